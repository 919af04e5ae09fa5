/* reference.h: plain C versions of the pipelines, written with run-time
 * loop bounds and the same float operations in the same order as the
 * Halide definitions, to check every output against. */
#ifndef HJ_REFERENCE_H
#define HJ_REFERENCE_H

#include <stdint.h>

#include "spec.h"

/* The inputs of one run of a pipeline and its output; a, b, out sized by
 * hj_in_a / hj_in_b / hj_out; pos0 (RoPE) is the first token's position. */
typedef struct hj_call {
  hj_kind kind;
  uint32_t q, kv;
  int32_t pos0;
  const float *a, *b;
  float *out;
} hj_call;

/* RMSNorm's eps as a parameter (the pipelines bake in HJ_RMS_EPS): the
 * tests run the reference with a wrong one to show the check notices. */
void hj_reference(const hj_call *c, float rms_eps);

/* RoPE's 32 inverse frequencies, theta^(-2j/64), for the model's theta. */
void hj_inv_freq(float *f);

#endif
