/* requests.h: a deterministic stream of generation requests. */
#ifndef ONEDNN_SERVING_REQUESTS_H
#define ONEDNN_SERVING_REQUESTS_H

#include <stdint.h>

#define REQUESTS_MAX_PROMPT 512

typedef struct request {
  int id;
  int prompt_len;  /**< 1..REQUESTS_MAX_PROMPT */
  int decode;      /**< decode steps after the prompt */
  int32_t *prompt; /**< prompt_len token ids */
} request;

typedef struct request_stream {
  int n;
  request *reqs;
} request_stream;

/**
 * Make @p n requests from @p seed.  Prompt lengths are log-uniform over
 * 1..REQUESTS_MAX_PROMPT, stratified (request i draws from the i-th of n
 * equal slices of the log range) and then shuffled, so even a handful of
 * requests spans short chat turns to long documents.  Token ids are uniform
 * over the vocabulary.
 * @return 0, or -1 (out of memory; nothing to free).
 */
int requests_make(request_stream *rs, int n, int decode, int vocab, uint64_t seed);

void requests_free(request_stream *rs);

/** Total prompt tokens plus decode steps over the stream. */
uint64_t requests_tokens(const request_stream *rs);

#endif
