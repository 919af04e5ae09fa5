/* forward.h: the decoder forward pass, one step (prefill or decode) at a time. */
#ifndef ONEDNN_SERVING_FORWARD_H
#define ONEDNN_SERVING_FORWARD_H

#include <stdint.h>

#include "model.h"
#include "prims.h"

/** Read-only tables shared by all sequences (RoPE angles). */
typedef struct forward_tables {
  int cap;    /**< positions covered */
  float *cos; /**< [cap][head_dim / 2] */
  float *sin;
} forward_tables;

/** One sequence being generated: its KV cache and scratch buffers.  Owned
 *  by one serving thread and reused across its requests. */
typedef struct sequence {
  int cap;       /**< KV-cache capacity in positions (also the max step size) */
  int pos;       /**< positions filled */
  float *kcache; /**< [layers][kv_heads][cap][head_dim] */
  float *vcache; /**< same layout */
  /* Activations for up to cap tokens per step. */
  float *h, *xn, *q, *k, *v, *attn, *tmp, *up, *act, *scores, *logits;
} sequence;

int forward_tables_init(forward_tables *t, const model_config *cfg, int cap);
void forward_tables_free(forward_tables *t);

/** Allocate a sequence for @p cap positions.  @return 0 or -1 (ENOMEM). */
int sequence_init(sequence *s, const model_config *cfg, int cap);
void sequence_free(sequence *s);
/** Start a new request (the KV cache contents are simply overwritten). */
static inline void sequence_reset(sequence *s) { s->pos = 0; }

/** Options of the forward pass that change which primitives it asks for. */
typedef struct forward_opts {
  int runtime_dims; /**< attention matmuls take the context length at run time */
} forward_opts;

/**
 * Run @p n_tokens new tokens through the model and leave the logits of the
 * last one in s->logits.  Every oneDNN primitive goes through prims_run().
 * @return 0, or -1 (a primitive failed; a message was printed).
 */
int forward_step(const model *m, const forward_tables *tab, const forward_opts *opt, prim_ctx *ctx,
                 prim_worker *w, sequence *s, const int32_t *tokens, int n_tokens);

/** Index of the largest logit (greedy decoding; ties go to the lowest id). */
int32_t forward_argmax(const float *logits, int vocab);

#endif
