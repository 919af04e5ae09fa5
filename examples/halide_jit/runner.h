/* runner.h: run a pipeline on deterministic inputs through Halide's C ABI
 * (halide_buffer_t) and check it against the reference. */
#ifndef HJ_RUNNER_H
#define HJ_RUNNER_H

#include <stdint.h>

#include <ccache.h>

#include "native.h"
#include "spec.h"

/* A pipeline agrees with the reference when every element satisfies
 * |pipeline - reference| <= HJ_REL_TOL * |reference| + HJ_ABS_TOL.  Not
 * exact: Halide compiles with LLVM's fast-math flags (it may contract a
 * multiply and an add into an FMA, and vectorises), and its exp/sin/cos of
 * vectors need not round like libm's. */
#define HJ_REL_TOL 1e-5
#define HJ_ABS_TOL 1e-6

typedef struct hj_result {
  int ok;             /* every element within tolerance (and the call returned 0) */
  int status;         /* what the pipeline returned (0; Halide's error code otherwise) */
  double max_abs_err; /* largest |pipeline - reference| */
  size_t first_bad;   /* first element out of tolerance (when !ok and status 0) */
} hj_result;

/* Install the error handler of the executable's one Halide runtime (its
 * default prints and aborts): a failing pipeline returns its error code and
 * the message is kept per thread (hj_runtime_error). */
void hj_runtime_init(void);
const char *hj_runtime_error(void);

/* Run n (a pipeline of this kind) on q tokens attending to kv positions,
 * inputs drawn from (seed, site), compare with hj_reference(rms_eps), and
 * append the output to checksum (may be NULL).  -1 if buffers could not be
 * allocated or n's arguments are not this kind's; else 0 with *res. */
int hj_run_checked(hj_kind kind, const hj_native *n, uint32_t q, uint32_t kv, uint64_t seed,
                   uint32_t site, float rms_eps, ccache_fp *checksum, hj_result *res);

#endif
