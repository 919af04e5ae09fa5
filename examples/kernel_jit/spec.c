/* spec.c: which kernel a run needs at position i, and its buffer sizes. */
#include "spec.h"

kj_spec kj_spec_nth(uint32_t i) {
  uint32_t shape = i / KJ_N_OPS;
  kj_spec s = {(kj_op)(i % KJ_N_OPS), 1, KJ_DECODE_CONTEXT};
  if (shape > 0) s.q_len = s.kv_len = shape * KJ_PREFILL_STEP;
  return s;
}

const char *kj_op_name(kj_op op) {
  static const char *const names[KJ_N_OPS] = {"rmsnorm", "silu_mul", "rope", "residual", "softmax"};
  return (unsigned)op < KJ_N_OPS ? names[op] : "?";
}

/* Width of one token's row for the row-wise ops. */
static size_t row_width(kj_op op) {
  switch (op) {
    case KJ_OP_RMSNORM:
    case KJ_OP_RESIDUAL:
      return KJ_HIDDEN;
    case KJ_OP_SILU_MUL:
      return KJ_INTERMEDIATE;
    case KJ_OP_ROPE:
      return (size_t)(KJ_HEADS + KJ_KV_HEADS) * KJ_HEAD_DIM; /* q heads, then k heads */
    default:
      return 0;
  }
}

size_t kj_spec_in_a(kj_spec s) {
  if (s.op == KJ_OP_SOFTMAX) return (size_t)KJ_HEADS * s.q_len * s.kv_len;
  return row_width(s.op) * s.q_len;
}

size_t kj_spec_in_b(kj_spec s) {
  switch (s.op) {
    case KJ_OP_RMSNORM:
      return KJ_HIDDEN; /* the norm's weight */
    case KJ_OP_SILU_MUL:
    case KJ_OP_RESIDUAL:
      return kj_spec_in_a(s);
    default:
      return 0;
  }
}

size_t kj_spec_out(kj_spec s) { return kj_spec_in_a(s); }
