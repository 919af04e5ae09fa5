/* spec.h: SmolLM2-135M's element-wise kernels and the shapes they are
 * specialised to.
 *
 * The model constants come from the config.json copied into the repository
 * (examples/onednn_serving/smollm2-135m-config.json); CMake reads it at
 * configure time and passes each number as a compile definition, so the
 * binary never opens the file and the generated C bakes them in. */
#ifndef KJ_SPEC_H
#define KJ_SPEC_H

#include <stddef.h>
#include <stdint.h>

#if !defined(KJ_HIDDEN) || !defined(KJ_INTERMEDIATE) || !defined(KJ_HEADS) || \
    !defined(KJ_KV_HEADS) || !defined(KJ_HEAD_DIM) || !defined(KJ_RMS_EPS) || \
    !defined(KJ_ROPE_THETA) || !defined(KJ_MAX_POSITIONS)
#error "the model constants come from CMake (examples/kernel_jit/CMakeLists.txt)"
#endif

typedef enum kj_op {
  KJ_OP_RMSNORM = 0, /* y = x / sqrt(mean(x^2) + eps) * w, per token */
  KJ_OP_SILU_MUL,    /* y = silu(gate) * up, the MLP's gated product */
  KJ_OP_ROPE,        /* rotary embedding of the q and k heads at their positions */
  KJ_OP_RESIDUAL,    /* y = a + b */
  KJ_OP_SOFTMAX,     /* causal softmax of attention scores, scaled by 1/sqrt(head_dim) */
  KJ_N_OPS
} kj_op;

/* One specialised kernel: an op at one shape.  q_len tokens are processed;
 * kv_len is the context they attend to (softmax) and fixes their positions
 * (kv_len - q_len .. kv_len - 1; RoPE).  Decode is q_len 1. */
typedef struct kj_spec {
  kj_op op;
  uint32_t q_len;
  uint32_t kv_len;
} kj_spec;

/* The context length of the decode shape. */
#define KJ_DECODE_CONTEXT 128u
/* Prefill shapes are multiples of this many tokens (padding buckets). */
#define KJ_PREFILL_STEP   16u
/* Longest prefill shape: 1024 tokens keeps the largest softmax buffer
 * (9 x 1024 x 1024 floats) at 36 MiB. */
#define KJ_PREFILL_MAX    1024u
/* Kernels available: every op at the decode shape and at each prefill shape. */
#define KJ_MAX_KERNELS    (KJ_N_OPS * (1u + KJ_PREFILL_MAX / KJ_PREFILL_STEP))

/* The i-th kernel of a run (0 <= i < KJ_MAX_KERNELS): op i % 5 at shape
 * i / 5, shape 0 being decode and shape s >= 1 prefill of 16*s tokens.  A run
 * with --kernels N needs kernels 0..N-1, all distinct. */
kj_spec kj_spec_nth(uint32_t i);

/* "rmsnorm", "silu_mul", "rope", "residual", "softmax". */
const char *kj_op_name(kj_op op);

/* Element counts of the kernel's two inputs (b is 0 when the op has one
 * input) and of its output. */
size_t kj_spec_in_a(kj_spec s);
size_t kj_spec_in_b(kj_spec s);
size_t kj_spec_out(kj_spec s);

/* Every kernel has this signature; b is NULL for one-input ops. */
typedef void (*kj_kernel_fn)(const float *a, const float *b, float *out);

#endif
