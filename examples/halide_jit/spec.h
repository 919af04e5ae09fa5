/* spec.h: the Halide pipelines of SmolLM2-135M that halide_jit builds, and
 * the schedule each is built with.
 *
 * The model constants come from the config.json copied into the repository
 * (examples/onednn_serving/smollm2-135m-config.json); CMake reads it at
 * configure time and passes each number as a compile definition.  They are
 * baked into the pipelines' definitions (reduction extents, head counts,
 * eps, the softmax scale); the token count and the context length are not:
 * they are the extents of the buffers a pipeline is called with, so one
 * compiled pipeline serves prefill and decode alike.  C and C++. */
#ifndef HJ_SPEC_H
#define HJ_SPEC_H

#include <stddef.h>
#include <stdint.h>

#if !defined(HJ_HIDDEN) || !defined(HJ_INTERMEDIATE) || !defined(HJ_HEADS) || \
    !defined(HJ_KV_HEADS) || !defined(HJ_HEAD_DIM) || !defined(HJ_RMS_EPS) || \
    !defined(HJ_ROPE_THETA) || !defined(HJ_LAYERS)
#error "the model constants come from CMake (examples/halide_jit/CMakeLists.txt)"
#endif

/* What the builder's code is: bumped whenever a definition or the way a
 * schedule is applied changes, so old keys (and tier entries) stop
 * matching.  Part of every program key. */
#define HJ_BUILDER_VERSION 1u

typedef enum hj_kind {
  HJ_RMSNORM = 0, /* out = x / sqrt(mean(x^2) + eps) * w per token; x [576, T] */
  HJ_SILU_GATE,   /* out = silu(gate) * up; [1536, T] */
  HJ_ROPE_Q,      /* rotary embedding of the 9 query heads; [64, 9, T], from position pos0 */
  HJ_ROPE_K,      /* the same for the 3 key heads; [64, 3, T] */
  HJ_SOFTMAX,     /* causal softmax of scores scaled by 1/sqrt(64); [kv, T, 9] */
  HJ_N_KINDS
} hj_kind;

/* How a pipeline is scheduled: its output's innermost dimension vectorised
 * by `vector` lanes (1 = scalar), and its rows (tokens, or heads for softmax)
 * spread over Halide's thread pool when `parallel` is 1. */
typedef struct hj_schedule {
  uint32_t vector;   /* 1, 2, 4, 8 or 16 */
  uint32_t parallel; /* 0 or 1 */
} hj_schedule;

/* One pipeline: what a runtime's builder is asked for at a call site. */
typedef struct hj_spec {
  hj_kind kind;
  hj_schedule sched;
} hj_spec;

/* The schedule halide_jit uses (8 lanes, parallel rows). */
hj_spec hj_spec_default(hj_kind kind);

/* 0 if s is a kind and schedule the builder accepts. */
int hj_spec_valid(const hj_spec *s);

/* "rmsnorm", "silu_gate", "rope_q", "rope_k", "softmax". */
const char *hj_kind_name(hj_kind kind);

/* Heads a RoPE pipeline rotates (9 or 3); 0 for the other kinds. */
uint32_t hj_rope_heads(hj_kind kind);

/* Element counts, for q tokens attending to kv positions: the pipeline's
 * first input (x, gate or scores), its second (w, up or the 32 inverse
 * frequencies; 0 for softmax) and its output. */
size_t hj_in_a(hj_kind kind, uint32_t q, uint32_t kv);
size_t hj_in_b(hj_kind kind, uint32_t q);
size_t hj_out(hj_kind kind, uint32_t q, uint32_t kv);

#endif
