/* runner.c: inputs, execution, comparison. */
#include "runner.h"

#include <math.h>
#include <stdlib.h>

#include "reference.h"

/* splitmix64: a fixed, portable stream from (seed, kernel, buffer). */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* n values uniform in [lo, hi). */
static void fill(float *v, size_t n, uint64_t stream, float lo, float hi) {
  for (size_t i = 0; i < n; i++) {
    double u = (double)(mix(stream + i * 0x632be59bd9b4e019ull) >> 11) * 0x1p-53;
    v[i] = lo + (hi - lo) * (float)u;
  }
}

void kj_inputs(kj_spec s, uint64_t seed, uint32_t index, float *a, float *b) {
  uint64_t base = mix(seed) ^ ((uint64_t)index << 32);
  /* Ranges of realistic activations: softmax scores span e^±8 after scaling,
   * gates reach silu's curved part, norm weights sit around 1. */
  static const float range_a[KJ_N_OPS][2] = {{-2, 2}, {-6, 6}, {-1, 1}, {-1, 1}, {-64, 64}};
  static const float range_b[KJ_N_OPS][2] = {{0.5f, 1.5f}, {-1, 1}, {0, 0}, {-1, 1}, {0, 0}};
  fill(a, kj_spec_in_a(s), mix(base + 1), range_a[s.op][0], range_a[s.op][1]);
  if (b) fill(b, kj_spec_in_b(s), mix(base + 2), range_b[s.op][0], range_b[s.op][1]);
}

static void compare(const float *got, const float *want, size_t n, kj_result *res) {
  res->ok = 1;
  res->max_abs_err = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - (double)want[i]);
    int bad = !(d <= KJ_REL_TOL * fabs((double)want[i]) + KJ_ABS_TOL); /* NaN is bad */
    if (bad && res->ok) {
      res->ok = 0;
      res->first_bad = i;
    }
    if (!(d <= res->max_abs_err)) res->max_abs_err = d;
  }
}

int kj_run_checked(kj_spec s, kj_kernel_fn fn, uint64_t seed, uint32_t index, ccache_fp *checksum,
                   kj_result *res) {
  size_t na = kj_spec_in_a(s), nb = kj_spec_in_b(s), no = kj_spec_out(s);
  float *a = malloc(na * sizeof *a), *b = nb ? malloc(nb * sizeof *b) : NULL;
  float *out = malloc(no * sizeof *out), *ref = malloc(no * sizeof *ref);
  int rc = -1;
  if (a && (b || !nb) && out && ref) {
    kj_inputs(s, seed, index, a, b);
    fn(a, b, out);
    kj_reference(s, a, b, ref);
    compare(out, ref, no, res);
    if (checksum) ccache_fp_bytes(checksum, out, no * sizeof *out);
    rc = 0;
  }
  free(a);
  free(b);
  free(out);
  free(ref);
  return rc;
}
