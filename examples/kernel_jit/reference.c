/* reference.c: the element-wise ops of SmolLM2-135M's decoder, plainly.
 *
 * Each op performs its float operations in the order the generated kernels
 * do (a float sum is order-dependent), so a correct kernel agrees to within
 * rounding of the libm calls, and usually bit for bit. */
#include "reference.h"

#include <math.h>

#define D    KJ_HEAD_DIM
#define NQKV (KJ_HEADS + KJ_KV_HEADS)

void kj_rope_inv_freq(float *inv_freq) {
  for (int i = 0; i < D / 2; i++)
    inv_freq[i] = (float)(1.0 / pow((double)KJ_ROPE_THETA, (double)(2 * i) / (double)D));
}

float kj_softmax_scale(void) { return (float)(1.0 / sqrt((double)D)); }

static void rmsnorm(uint32_t tokens, const float *x, const float *w, float *y) {
  const float eps = (float)KJ_RMS_EPS;
  for (uint32_t t = 0; t < tokens; t++) {
    const float *row = x + (size_t)t * KJ_HIDDEN;
    float sum_sq = 0.0f;
    for (int i = 0; i < KJ_HIDDEN; i++) sum_sq += row[i] * row[i];
    float mean_sq = sum_sq / (float)KJ_HIDDEN;
    float rstd = 1.0f / sqrtf(mean_sq + eps);
    for (int i = 0; i < KJ_HIDDEN; i++) y[(size_t)t * KJ_HIDDEN + i] = row[i] * rstd * w[i];
  }
}

static float silu(float v) { return v / (1.0f + expf(-v)); }

static void silu_mul(size_t n, const float *gate, const float *up, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = silu(gate[i]) * up[i];
}

/* HF Llama's rotate_half convention: pairs (i, i + D/2) of each head. */
static void rope(kj_spec s, const float *x, float *y) {
  float inv_freq[D / 2];
  kj_rope_inv_freq(inv_freq);
  for (uint32_t t = 0; t < s.q_len; t++) {
    float pos = (float)(s.kv_len - s.q_len + t);
    for (int h = 0; h < NQKV; h++) {
      size_t base = ((size_t)t * NQKV + (size_t)h) * D;
      for (int i = 0; i < D / 2; i++) {
        float angle = pos * inv_freq[i];
        float x1 = x[base + i], x2 = x[base + i + D / 2];
        y[base + i] = x1 * cosf(angle) - x2 * sinf(angle);
        y[base + i + D / 2] = x2 * cosf(angle) + x1 * sinf(angle);
      }
    }
  }
}

static void residual(size_t n, const float *a, const float *b, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

/* Causal: query t (position kv_len - q_len + t) sees keys 0..position. */
static void softmax(kj_spec s, const float *x, float *y) {
  const float scale = kj_softmax_scale();
  for (size_t row = 0; row < (size_t)KJ_HEADS * s.q_len; row++) {
    size_t t = row % s.q_len;
    size_t visible = s.kv_len - s.q_len + t + 1;
    const float *in = x + row * s.kv_len;
    float *out = y + row * s.kv_len;
    float max = -INFINITY;
    for (size_t j = 0; j < visible; j++) max = fmaxf(max, in[j] * scale);
    float sum = 0.0f;
    for (size_t j = 0; j < visible; j++) {
      out[j] = expf(in[j] * scale - max);
      sum += out[j];
    }
    float inv_sum = 1.0f / sum;
    for (size_t j = 0; j < s.kv_len; j++) out[j] = j < visible ? out[j] * inv_sum : 0.0f;
  }
}

void kj_reference(kj_spec s, const float *a, const float *b, float *out) {
  switch (s.op) {
    case KJ_OP_RMSNORM:
      rmsnorm(s.q_len, a, b, out);
      break;
    case KJ_OP_SILU_MUL:
      silu_mul(kj_spec_out(s), a, b, out);
      break;
    case KJ_OP_ROPE:
      rope(s, a, out);
      break;
    case KJ_OP_RESIDUAL:
      residual(kj_spec_out(s), a, b, out);
      break;
    case KJ_OP_SOFTMAX:
      softmax(s, a, out);
      break;
    default:
      break;
  }
}
