/* reference.h: plain C implementations every compiled kernel is checked
 * against, written with run-time loop bounds from the spec. */
#ifndef KJ_REFERENCE_H
#define KJ_REFERENCE_H

#include "spec.h"

/* out = op(a, b) for spec s (b unused by one-input ops). */
void kj_reference(kj_spec s, const float *a, const float *b, float *out);

/* RoPE's frequencies: inv_freq[i] = theta^(-2i/head_dim), i < head_dim/2,
 * computed in double and rounded once to float (the generator prints the
 * same table into the kernels). */
void kj_rope_inv_freq(float *inv_freq);

/* 1 / sqrt(head_dim). */
float kj_softmax_scale(void);

#endif
