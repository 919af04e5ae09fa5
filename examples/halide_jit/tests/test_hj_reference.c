/* test_hj_reference.c: every pipeline, at several schedules and shapes,
 * against the plain C reference; the check itself can fail; a pipeline
 * called with a wrong buffer returns Halide's error code instead of
 * aborting the process. */
#include "kj_test.h"

#include <stdlib.h>

#include "jit.h"
#include "reference.h"
#include "runner.h"

static hj_jit jit; /* large: static */

static int setup(void **state) {
  (void)state;
  char err[640];
  hj_runtime_init();
  hj_jit_options o = {0};
  if (hj_jit_open(&jit, &o, err, sizeof err) != 0) {
    fprintf(stderr, "hj_jit_open: %s\n", err);
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  hj_jit_close(&jit);
  return 0;
}

static ccache_program *get(const hj_spec *s) {
  ccache_program *p = NULL;
  char err[640] = "";
  int rc = hj_jit_program(&jit, s, &p, err, sizeof err);
  if (rc != CCACHE_OK)
    fprintf(stderr, "%s: %s: %s\n", hj_kind_name(s->kind), ccache_strerror(rc), err);
  assert_int_equal(rc, CCACHE_OK);
  return p;
}

/* Shapes (q tokens, kv context): decode at 1 and 129, prefill with q = kv,
 * a chunk of 3 tokens after 17, and a context not a multiple of 16 lanes. */
static const uint32_t shapes[][2] = {{1, 1}, {1, 129}, {7, 7}, {64, 64}, {3, 20}, {5, 37}};

static void every_pipeline_matches_reference(void **state) {
  (void)state;
  const hj_schedule scheds[] = {{8, 1}, {1, 0}, {16, 1}};
  for (int k = 0; k < HJ_N_KINDS; k++)
    for (size_t c = 0; c < sizeof scheds / sizeof scheds[0]; c++) {
      hj_spec s = {(hj_kind)k, scheds[c]};
      ccache_program *p = get(&s);
      for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        hj_result res;
        assert_int_equal(
            hj_run_checked(s.kind, ccache_program_native(p), shapes[i][0], shapes[i][1], 3,
                           (uint32_t)i, (float)HJ_RMS_EPS, NULL, &res),
            0);
        if (!res.ok)
          fprintf(stderr,
                  "%s vector %u parallel %u q %u kv %u: status %d (%s), element %zu, "
                  "max abs err %g\n",
                  hj_kind_name(s.kind), s.sched.vector, s.sched.parallel, shapes[i][0],
                  shapes[i][1], res.status, hj_runtime_error(), res.first_bad, res.max_abs_err);
        assert_true(res.ok);
      }
      ccache_program_release(jit.cache, p);
    }
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(jit.cache, &st);
  assert_int_equal(st.program_compiles, HJ_N_KINDS * 3);
}

/* The reference with eps 1e-3 instead of 1e-5: every token's scale moves by
 * about 4e-4 relative, 40 times the tolerance, so the check must fail. */
static void check_rejects_wrong_eps(void **state) {
  (void)state;
  hj_spec s = hj_spec_default(HJ_RMSNORM);
  ccache_program *p = get(&s);
  hj_result res;
  assert_int_equal(
      hj_run_checked(HJ_RMSNORM, ccache_program_native(p), 4, 4, 1, 0, 1e-3f, NULL, &res), 0);
  assert_int_equal(res.status, 0);
  assert_false(res.ok);
  assert_true(res.max_abs_err > 1e-4);
  /* ... and a pipeline of another kind is never called through this one's
   * prototype (Halide's metadata says what it takes). */
  hj_spec soft = hj_spec_default(HJ_SOFTMAX);
  ccache_program *q = get(&soft);
  assert_int_equal(hj_run_checked(HJ_RMSNORM, ccache_program_native(q), 4, 4, 1, 0,
                                  (float)HJ_RMS_EPS, NULL, &res),
                   -1);
  ccache_program_release(jit.cache, q);
  ccache_program_release(jit.cache, p);
}

/* rmsnorm bakes in a hidden size of 576: a buffer of 500 is Halide's
 * bounds error, returned as a code with its message, not an abort. */
static void runtime_error_is_a_status(void **state) {
  (void)state;
  hj_spec s = hj_spec_default(HJ_RMSNORM);
  ccache_program *p = get(&s);
  const hj_native *n = ccache_program_native(p);
  float x[500] = {0}, w[576] = {0}, out[576];
  halide_dimension_t dw = {0, 576, 1, 0}, dx2[2] = {{0, 500, 1, 0}, {0, 1, 500, 0}};
  halide_dimension_t dout[2] = {{0, 576, 1, 0}, {0, 1, 576, 0}};
  halide_buffer_t bx = {0}, bw = {0}, bo = {0};
  struct halide_type_t f32 = {halide_type_float, 32, 1};
  bx.host = (uint8_t *)x, bx.type = f32, bx.dimensions = 2, bx.dim = dx2;
  bw.host = (uint8_t *)w, bw.type = f32, bw.dimensions = 1, bw.dim = &dw;
  bo.host = (uint8_t *)out, bo.type = f32, bo.dimensions = 2, bo.dim = dout;
  int (*fn)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
  memcpy(&fn, &n->fn, sizeof fn);
  int rc = fn(&bx, &bw, &bo);
  fprintf(stderr, "rmsnorm on a 500-wide buffer: %d: %s\n", rc, hj_runtime_error());
  assert_int_not_equal(rc, 0);
  assert_non_null(strstr(hj_runtime_error(), "x"));
  ccache_program_release(jit.cache, p);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(every_pipeline_matches_reference, setup, teardown),
      cmocka_unit_test_setup_teardown(check_rejects_wrong_eps, setup, teardown),
      cmocka_unit_test_setup_teardown(runtime_error_is_a_status, setup, teardown),
  };
  return KJ_RUN("halide_jit_reference", tests, argc, argv);
}
