/* runner.h: run a kernel on deterministic inputs and check it against the
 * reference. */
#ifndef KJ_RUNNER_H
#define KJ_RUNNER_H

#include <stdint.h>

#include <ccache.h>

#include "spec.h"

/* A kernel agrees with the reference when every element satisfies
 * |kernel - reference| <= KJ_REL_TOL * |reference| + KJ_ABS_TOL. */
#define KJ_REL_TOL 1e-6
#define KJ_ABS_TOL 1e-9

typedef struct kj_result {
  int ok;             /* every element within tolerance */
  double max_abs_err; /* largest |kernel - reference| */
  size_t first_bad;   /* index of the first element out of tolerance (when !ok) */
} kj_result;

/* Fill a and b (sized by kj_spec_in_a/_b) for the index-th kernel of a run
 * seeded with seed: the same values in every process. */
void kj_inputs(kj_spec s, uint64_t seed, uint32_t index, float *a, float *b);

/* Run fn on the index-th kernel's inputs, check the output against
 * kj_reference(), and append the output's bytes to checksum (may be NULL).
 * -1 if buffers could not be allocated, else 0 with *res filled. */
int kj_run_checked(kj_spec s, kj_kernel_fn fn, uint64_t seed, uint32_t index, ccache_fp *checksum,
                   kj_result *res);

#endif
