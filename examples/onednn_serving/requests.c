/* requests.c: the request stream. */
#include "requests.h"

#include <math.h>
#include <stdlib.h>

#include "model.h"

static double rand_01(uint64_t *st) {
  return (double)(model_rand_next(st) >> 11) / 9007199254740992.0;
}

static int prompt_length(int i, int n, uint64_t *st) {
  /* Slice i of [0, ln(max+1)), then exponentiate: log-uniform lengths. */
  double u = ((double)i + rand_01(st)) / (double)n;
  int len = (int)exp(u * log((double)REQUESTS_MAX_PROMPT + 1.0));
  return len < 1 ? 1 : len > REQUESTS_MAX_PROMPT ? REQUESTS_MAX_PROMPT : len;
}

int requests_make(request_stream *rs, int n, int decode, int vocab, uint64_t seed) {
  uint64_t st = seed ^ 0x5EED5EED5EED5EEDull; /* independent of the weights' stream */
  rs->n = n;
  rs->reqs = calloc((size_t)n, sizeof *rs->reqs);
  if (!rs->reqs) return -1;
  int *lens = malloc((size_t)n * sizeof *lens);
  if (!lens) {
    requests_free(rs);
    return -1;
  }
  for (int i = 0; i < n; i++) lens[i] = prompt_length(i, n, &st);
  for (int i = n - 1; i > 0; i--) { /* Fisher-Yates: long prompts not all last */
    int j = (int)(model_rand_next(&st) % (uint64_t)(i + 1));
    int t = lens[i];
    lens[i] = lens[j];
    lens[j] = t;
  }
  for (int i = 0; i < n; i++) {
    request *r = &rs->reqs[i];
    r->id = i;
    r->prompt_len = lens[i];
    r->decode = decode;
    r->prompt = malloc((size_t)r->prompt_len * sizeof *r->prompt);
    if (!r->prompt) {
      free(lens);
      requests_free(rs);
      return -1;
    }
    for (int t = 0; t < r->prompt_len; t++)
      r->prompt[t] = (int32_t)(model_rand_next(&st) % (uint64_t)vocab);
  }
  free(lens);
  return 0;
}

void requests_free(request_stream *rs) {
  if (rs->reqs)
    for (int i = 0; i < rs->n; i++) free(rs->reqs[i].prompt);
  free(rs->reqs);
  rs->reqs = NULL;
  rs->n = 0;
}

uint64_t requests_tokens(const request_stream *rs) {
  uint64_t t = 0;
  for (int i = 0; i < rs->n; i++)
    t += (uint64_t)rs->reqs[i].prompt_len + (uint64_t)rs->reqs[i].decode;
  return t;
}
