/* spec.c: names and sizes of the pipelines. */
#include "spec.h"

hj_spec hj_spec_default(hj_kind kind) {
  hj_spec s = {kind, {8, 1}};
  return s;
}

int hj_spec_valid(const hj_spec *s) {
  uint32_t v = s->sched.vector;
  if ((unsigned)s->kind >= HJ_N_KINDS) return -1;
  if (v != 1 && v != 2 && v != 4 && v != 8 && v != 16) return -1;
  return s->sched.parallel <= 1 ? 0 : -1;
}

const char *hj_kind_name(hj_kind kind) {
  static const char *const names[HJ_N_KINDS] = {"rmsnorm", "silu_gate", "rope_q", "rope_k",
                                                "softmax"};
  return (unsigned)kind < HJ_N_KINDS ? names[kind] : "?";
}

uint32_t hj_rope_heads(hj_kind kind) {
  return kind == HJ_ROPE_Q ? HJ_HEADS : kind == HJ_ROPE_K ? HJ_KV_HEADS : 0;
}

size_t hj_in_a(hj_kind kind, uint32_t q, uint32_t kv) {
  switch (kind) {
    case HJ_RMSNORM:
      return (size_t)HJ_HIDDEN * q;
    case HJ_SILU_GATE:
      return (size_t)HJ_INTERMEDIATE * q;
    case HJ_ROPE_Q:
    case HJ_ROPE_K:
      return (size_t)HJ_HEAD_DIM * hj_rope_heads(kind) * q;
    case HJ_SOFTMAX:
      return (size_t)kv * q * HJ_HEADS;
    default:
      return 0;
  }
}

size_t hj_in_b(hj_kind kind, uint32_t q) {
  switch (kind) {
    case HJ_RMSNORM:
      return HJ_HIDDEN;
    case HJ_SILU_GATE:
      return (size_t)HJ_INTERMEDIATE * q;
    case HJ_ROPE_Q:
    case HJ_ROPE_K:
      return HJ_HEAD_DIM / 2;
    default:
      return 0;
  }
}

size_t hj_out(hj_kind kind, uint32_t q, uint32_t kv) { return hj_in_a(kind, q, kv); }
