/* test_hj_keys.c: the program key.  Two builds of one pipeline get one key;
 * a schedule (or target, or version) change gets another.  The lowered
 * statement shows why the key is made from the builder's parameters: its
 * raw text differs between two builds of one pipeline (Halide's per-process
 * unique names), and once those names are renumbered it is equal for equal
 * parameters and different for each schedule change the key tells apart. */
#include "kj_test.h"

#include <stdlib.h>
#include <time.h>

#include "halide_build.h"
#include "keys.h"

static hj_ident ident(void) {
  hj_ident id = {.halide = "Halide 14.0.0, LLVM 140", .cc = "cc (test) 1.0"};
  assert_int_equal(hj_halide_pipeline_target(id.target, sizeof id.target), 0);
  return id;
}

static ccache_key key_of(const hj_spec *s, const hj_ident *id) {
  ccache_key k;
  assert_int_equal(hj_program_key(s, id, &k), CCACHE_OK);
  return k;
}

static int same(ccache_key a, ccache_key b) { return a.lo == b.lo && a.hi == b.hi; }

static char *lowered(const hj_spec *s, const char *target, int normalize) {
  char *text = NULL, err[512] = "";
  int rc = hj_halide_lowered(s, target, normalize, &text, err, sizeof err);
  if (rc != 0) fprintf(stderr, "lowering failed: %s\n", err);
  assert_int_equal(rc, 0);
  return text;
}

/* The first line where a and b differ, on stderr (cmocka cuts long strings). */
static void show_difference(const char *what, const char *a, const char *b) {
  for (int line = 1;; line++) {
    size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
    if (la != lb || memcmp(a, b, la) != 0) {
      fprintf(stderr, "%s: line %d differs:\n  %.*s\n  %.*s\n", what, line, (int)la, a, (int)lb, b);
      return;
    }
    if (!a[la] || !b[lb]) return;
    a += la + 1, b += lb + 1;
  }
}

/* Every kind: the builder called at two call sites gives one key; the raw
 * statements of the two builds differ, the renumbered ones do not. */
static void two_builds_one_key(void **state) {
  (void)state;
  hj_ident id = ident();
  for (int k = 0; k < HJ_N_KINDS; k++) {
    hj_spec site_a = hj_spec_default((hj_kind)k), site_b = hj_spec_default((hj_kind)k);
    assert_true(same(key_of(&site_a, &id), key_of(&site_b, &id)));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char *raw_a = lowered(&site_a, id.target, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* What hashing the statement would add to every call site's lookup. */
    fprintf(stderr, "%s: lowering took %.1f ms\n", hj_kind_name((hj_kind)k),
            (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    char *raw_b = lowered(&site_b, id.target, 0);
    char *norm_a = lowered(&site_a, id.target, 1), *norm_b = lowered(&site_b, id.target, 1);
    if (strcmp(raw_a, raw_b) == 0)
      fprintf(stderr, "%s: raw statements equal (Halide's names did not differ)\n",
              hj_kind_name((hj_kind)k));
    assert_int_not_equal(strcmp(raw_a, raw_b), 0);
    if (strcmp(norm_a, norm_b) != 0) show_difference(hj_kind_name((hj_kind)k), norm_a, norm_b);
    assert_int_equal(strcmp(norm_a, norm_b), 0);
    free(raw_a), free(raw_b), free(norm_a), free(norm_b);
  }
}

/* Each schedule change: another key, and another (renumbered) statement. */
static void schedule_change_another_key(void **state) {
  (void)state;
  hj_ident id = ident();
  for (int k = 0; k < HJ_N_KINDS; k++) {
    hj_spec base = hj_spec_default((hj_kind)k);
    hj_spec narrower = base, serial = base;
    narrower.sched.vector = 4;
    serial.sched.parallel = 0;
    const hj_spec *changed[] = {&narrower, &serial};
    char *text = lowered(&base, id.target, 1);
    for (int c = 0; c < 2; c++) {
      assert_false(same(key_of(&base, &id), key_of(changed[c], &id)));
      char *other = lowered(changed[c], id.target, 1);
      assert_int_not_equal(strcmp(text, other), 0);
      free(other);
    }
    assert_false(same(key_of(&narrower, &id), key_of(&serial, &id)));
    free(text);
  }
}

/* Kinds, target, Halide's version, the linker: each in the key. */
static void identity_in_key(void **state) {
  (void)state;
  hj_ident id = ident();
  ccache_key keys[HJ_N_KINDS];
  for (int k = 0; k < HJ_N_KINDS; k++) {
    hj_spec s = hj_spec_default((hj_kind)k);
    keys[k] = key_of(&s, &id);
    for (int m = 0; m < k; m++) assert_false(same(keys[k], keys[m]));
  }
  hj_spec s = hj_spec_default(HJ_RMSNORM);
  hj_ident t = id, v = id, c = id;
  snprintf(t.target, sizeof t.target, "x86-64-linux-no_runtime");
  snprintf(v.halide, sizeof v.halide, "Halide 15.0.0, LLVM 150");
  snprintf(c.cc, sizeof c.cc, "cc (other) 2.0");
  assert_false(same(keys[HJ_RMSNORM], key_of(&s, &t)));
  assert_false(same(keys[HJ_RMSNORM], key_of(&s, &v)));
  assert_false(same(keys[HJ_RMSNORM], key_of(&s, &c)));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(two_builds_one_key),
      cmocka_unit_test(schedule_change_another_key),
      cmocka_unit_test(identity_in_key),
  };
  return KJ_RUN("halide_jit_keys", tests, argc, argv);
}
