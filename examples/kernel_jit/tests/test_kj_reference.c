/* test_kj_reference.c: every kernel the JIT can produce, compiled through
 * ccache and checked against the plain C reference; and two deliberately
 * wrong kernels that the check must reject (so the tolerance is tight enough
 * to see a real bug). */
#include "kj_test.h"

#include <stdlib.h>

#include "codegen.h"
#include "compiler.h"
#include "jit.h"
#include "keys.h"
#include "loader.h"
#include "runner.h"

static void every_kernel_matches_reference(void **state) {
  (void)state;
  char err[512];
  kj_jit j;
  kj_jit_options o = {0};
  assert_int_equal(kj_jit_open(&j, &o, err, sizeof err), 0);
  uint32_t bad = 0;
  for (uint32_t i = 0; i < KJ_MAX_KERNELS; i++) {
    kj_spec s = kj_spec_nth(i);
    ccache_program *p = NULL;
    int rc = kj_jit_get(&j, s, &p);
    if (rc != CCACHE_OK) fprintf(stderr, "kernel %u: %s: %s\n", i, ccache_strerror(rc), j.err);
    assert_int_equal(rc, CCACHE_OK);
    kj_result res;
    assert_int_equal(kj_run_checked(s, kj_program_fn(p), 1, i, NULL, &res), 0);
    if (!res.ok) {
      fprintf(stderr, "kernel %u (%s q_len %u kv_len %u): element %zu differs, max abs err %g\n", i,
              kj_op_name(s.op), s.q_len, s.kv_len, res.first_bad, res.max_abs_err);
      bad++;
    }
    ccache_program_release(j.cache, p);
  }
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(j.cache, &st);
  assert_int_equal(bad, 0);
  /* All distinct: one compile each, none shared by mistake. */
  assert_int_equal(st.program_compiles, KJ_MAX_KERNELS);
  assert_int_equal(st.program_misses, KJ_MAX_KERNELS);
  assert_int_equal(st.program_hits, 0);
  kj_jit_close(&j);
}

/* Compile source that differs from the generator's by one substitution and
 * report whether the check accepted it. */
static int check_mutant(kj_spec s, const char *from, const char *to) {
  char err[512] = "";
  kj_compiler cc;
  assert_int_equal(kj_compiler_open(&cc, err, sizeof err), 0);
  ccache_key key;
  assert_int_equal(kj_program_key(s, &cc, &key), CCACHE_OK);
  char *src = kj_codegen(s, key);
  assert_non_null(src);
  char *at = strstr(src, from);
  assert_non_null(at); /* the generator still emits what the mutant replaces */
  size_t n = strlen(src) - strlen(from) + strlen(to) + 1;
  char *mut = malloc(n);
  assert_non_null(mut);
  snprintf(mut, n, "%.*s%s%s", (int)(at - src), src, to, at + strlen(from));
  void *bytes = NULL;
  size_t len = 0;
  assert_int_equal(kj_compile(&cc, mut, &bytes, &len, err, sizeof err), 0);
  kj_native *nat = kj_load(bytes, len, key, NULL, err, sizeof err);
  assert_non_null(nat);
  kj_result res;
  assert_int_equal(kj_run_checked(s, nat->fn, 1, 0, NULL, &res), 0);
  kj_unload(nat);
  free(bytes);
  free(mut);
  free(src);
  kj_compiler_close(&cc);
  return res.ok;
}

/* eps 1e-5 -> 1e-6 moves RMSNorm's output by about 1.5e-5 relative. */
static void check_rejects_wrong_eps(void **state) {
  (void)state;
  kj_spec s = {KJ_OP_RMSNORM, 16, 16};
  assert_false(check_mutant(s, "+ 9.99999975e-06f", "+ 9.99999997e-07f"));
}

/* Decode attends to every key, so unmasking must be tested on prefill. */
static void check_rejects_unmasked_softmax(void **state) {
  (void)state;
  kj_spec s = {KJ_OP_SOFTMAX, 16, 16};
  assert_false(check_mutant(s, "const long last = t + 0;", "const long last = t + 1;"));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_kernel_matches_reference),
      cmocka_unit_test(check_rejects_wrong_eps),
      cmocka_unit_test(check_rejects_unmasked_softmax),
  };
  return KJ_RUN("kernel_jit_reference", tests, argc, argv);
}
