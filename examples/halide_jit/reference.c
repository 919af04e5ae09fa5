/* reference.c: the pipelines in plain C. */
#include "reference.h"

#include <float.h>
#include <math.h>

static void rmsnorm(const hj_call *c, float eps) {
  for (uint32_t t = 0; t < c->q; t++) {
    const float *x = c->a + (size_t)t * HJ_HIDDEN;
    float ss = 0.0f;
    for (int r = 0; r < HJ_HIDDEN; r++) ss += x[r] * x[r];
    float inv = 1.0f / sqrtf(ss / (float)HJ_HIDDEN + eps);
    for (int h = 0; h < HJ_HIDDEN; h++) c->out[(size_t)t * HJ_HIDDEN + h] = x[h] * inv * c->b[h];
  }
}

static void silu_gate(const hj_call *c) {
  for (size_t i = 0; i < (size_t)HJ_INTERMEDIATE * c->q; i++) {
    float g = c->a[i];
    c->out[i] = g / (1.0f + expf(-g)) * c->b[i];
  }
}

static void rope(const hj_call *c) {
  const int half = HJ_HEAD_DIM / 2, heads = (int)hj_rope_heads(c->kind);
  for (uint32_t t = 0; t < c->q; t++)
    for (int hd = 0; hd < heads; hd++) {
      const float *x = c->a + ((size_t)t * heads + hd) * HJ_HEAD_DIM;
      float *o = c->out + ((size_t)t * heads + hd) * HJ_HEAD_DIM;
      for (int d = 0; d < HJ_HEAD_DIM; d++) {
        int j = d < half ? d : d - half;
        float angle = (float)(c->pos0 + (int32_t)t) * c->b[j];
        float partner = d < half ? -x[d + half] : x[d - half];
        o[d] = x[d] * cosf(angle) + partner * sinf(angle);
      }
    }
}

static void softmax(const hj_call *c) {
  const float scale = 1.0f / 8.0f;
  for (int hd = 0; hd < HJ_HEADS; hd++)
    for (uint32_t t = 0; t < c->q; t++) {
      size_t row = ((size_t)hd * c->q + t) * c->kv;
      const float *s = c->a + row;
      float *o = c->out + row;
      uint32_t pos = c->kv - c->q + t;
      float mx = -FLT_MAX;
      for (uint32_t j = 0; j < c->kv; j++) {
        float m = j <= pos ? s[j] * scale : -FLT_MAX;
        mx = m > mx ? m : mx;
      }
      float sum = 0.0f;
      for (uint32_t j = 0; j < c->kv; j++) {
        o[j] = j <= pos ? expf(s[j] * scale - mx) : 0.0f;
        sum += o[j];
      }
      for (uint32_t j = 0; j < c->kv; j++) o[j] = o[j] / sum;
    }
}

void hj_reference(const hj_call *c, float rms_eps) {
  switch (c->kind) {
    case HJ_RMSNORM:
      rmsnorm(c, rms_eps);
      break;
    case HJ_SILU_GATE:
      silu_gate(c);
      break;
    case HJ_ROPE_Q:
    case HJ_ROPE_K:
      rope(c);
      break;
    case HJ_SOFTMAX:
      softmax(c);
      break;
    default:
      break;
  }
}

void hj_inv_freq(float *f) {
  for (int j = 0; j < HJ_HEAD_DIM / 2; j++)
    f[j] = (float)pow((double)HJ_ROPE_THETA, -2.0 * j / (double)HJ_HEAD_DIM);
}
