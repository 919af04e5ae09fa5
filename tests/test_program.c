/* test_program.c - the reference-counted program table. */
#include <string.h>

#include "support.h"

static void intern_fetch_release(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *p = t_intern(c, 1, 10, 100);
  assert_int_equal(t_id(ccache_program_native(p)), 10);
  ccache_program *q = NULL;
  assert_int_equal(ccache_program_fetch(c, PK(1), &q), CCACHE_OK);
  assert_ptr_equal(p, q);
  assert_int_equal(ccache_program_fetch(c, PK(2), &q), CCACHE_MISS);
  assert_null(q);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.programs, 1);
  assert_int_equal(s.program_hits, 1);
  assert_int_equal(s.program_misses, 2); /* the intern of a new key, the fetch of PK(2) */
  assert_int_equal(s.cost_bytes, 0);     /* no closure entry refers to it */
  ccache_program_release(c, p);
  assert_int_equal(t.programs_destroyed, 0);
  t_check(c, &t);
  ccache_program_release(c, p);
  assert_int_equal(t.programs_destroyed, 1);
  s = t_stats(c);
  assert_int_equal(s.programs, 0);
  assert_int_equal(s.programs_destroyed, 1);
  assert_int_equal(ccache_program_fetch(c, PK(1), &q), CCACHE_MISS);
  ccache_program_release(c, NULL); /* no-op */
  ccache_program_release(NULL, p); /* no-op */
  assert_null(ccache_program_native(NULL));
  t_close(c);
}

static void intern_existing_destroys_duplicate_once(void **state) {
  (void)state;
  t_ctx t = {0};
  t.log_on = 1;
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *p1 = t_intern(c, 7, 1, 10);
  ccache_program *p2 = t_intern(c, 7, 2, 10); /* duplicate: native 2 destroyed */
  assert_ptr_equal(p1, p2);
  assert_int_equal(t_id(ccache_program_native(p2)), 1);
  assert_int_equal(t.programs_destroyed, 1);
  assert_int_equal(t.log[0].kind, 'p');
  assert_int_equal(t.log[0].id, 2);
  /* Interning the very pointer already interned destroys nothing. */
  ccache_program *p3 = NULL;
  assert_int_equal(ccache_program_intern(c, PK(7), ccache_program_native(p1), 10, &p3), CCACHE_OK);
  assert_ptr_equal(p3, p1);
  assert_int_equal(t.programs_destroyed, 1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.program_hits, 2);
  assert_int_equal(s.program_misses, 1);
  ccache_program_release(c, p1);
  ccache_program_release(c, p2);
  ccache_program_release(c, p3);
  assert_int_equal(t.programs_destroyed, 2);
  t_close(c);
}

static void shared_program_destroyed_with_last_closure(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *p = t_intern(c, 1, 100, 64);
  t_put(c, 1, 1, p);
  t_put(c, 2, 2, p);
  ccache_program_release(c, p); /* only the two entries hold it now */
  assert_int_equal(t_stats(c).cost_bytes, 64);
  assert_int_equal(ccache_remove(c, K(1)), CCACHE_OK);
  assert_int_equal(t.closures_destroyed, 1);
  assert_int_equal(t.programs_destroyed, 0);
  t_check(c, &t);
  assert_int_equal(ccache_remove(c, K(2)), CCACHE_OK);
  assert_int_equal(t.closures_destroyed, 2);
  assert_int_equal(t.programs_destroyed, 1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.programs, 0);
  assert_int_equal(s.items, 0);
  assert_int_equal(s.removed, 2);
  assert_int_equal(s.cost_bytes, 0);
  assert_int_equal(ccache_remove(c, K(2)), CCACHE_MISS);
  t_close(c);
}

static void thousand_intern_put_remove_cycles(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  for (int i = 0; i < 1000; i++) {
    ccache_program *p = t_intern(c, (uint64_t)i, i, 8);
    t_put(c, (uint64_t)i, i, p);
    ccache_program_release(c, p);
    assert_int_equal(ccache_remove(c, K((uint64_t)i)), CCACHE_OK);
  }
  ccache_stats s = t_stats(c);
  assert_int_equal(t.programs_destroyed, 1000);
  assert_int_equal(t.closures_destroyed, 1000);
  assert_int_equal(s.programs, 0);
  assert_int_equal(s.programs_destroyed, 1000);
  assert_int_equal(s.items, 0);
  t_check(c, &t);
  t_close(c);
}

static void closure_destroyed_before_its_program(void **state) {
  (void)state;
  t_ctx t = {0};
  t.log_on = 1;
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  ccache_program_release(c, p);
  assert_int_equal(ccache_remove(c, K(1)), CCACHE_OK);
  assert_int_equal(t.nlog, 2);
  assert_int_equal(t.log[0].kind, 'c');
  assert_int_equal(t.log[1].kind, 'p');
  t_close(c);
}

static void close_busy_while_handle_out(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *p = t_intern(c, 1, 1, 1);
  assert_int_equal(ccache_close(c), CCACHE_EBUSY);
  t_put(c, 1, 1, p); /* still usable */
  assert_int_equal(t_fetch_id(c, 1), 1);
  ccache_program_release(c, p);
  t_close(c);
  assert_int_equal(t.programs_destroyed, 1);
  assert_int_equal(t.closures_destroyed, 1);
}

static void program_bad_input(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *p = NULL;
  /* Ownership of native passes even on error. */
  assert_int_equal(ccache_program_intern(c, PK(1), t_native(1), 1, NULL), CCACHE_EINVAL);
  assert_int_equal(t.programs_destroyed, 1);
  assert_int_equal(ccache_program_intern(NULL, PK(1), NULL, 1, &p), CCACHE_EINVAL);
  assert_int_equal(ccache_program_fetch(NULL, PK(1), &p), CCACHE_EINVAL);
  assert_int_equal(ccache_program_fetch(c, PK(1), NULL), CCACHE_EINVAL);
  /* A NULL native is allowed and never passed to destroy. */
  assert_int_equal(ccache_program_intern(c, PK(2), NULL, 1, &p), CCACHE_OK);
  assert_null(ccache_program_native(p));
  ccache_program_release(c, p);
  assert_int_equal(t.programs_destroyed, 1);          /* callback not called for NULL */
  assert_int_equal(t_stats(c).programs_destroyed, 2); /* both natives left the cache */
  assert_int_equal(t_stats(c).programs, 0);
  t_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(intern_fetch_release),
      cmocka_unit_test(intern_existing_destroys_duplicate_once),
      cmocka_unit_test(shared_program_destroyed_with_last_closure),
      cmocka_unit_test(thousand_intern_put_remove_cycles),
      cmocka_unit_test(closure_destroyed_before_its_program),
      cmocka_unit_test(close_busy_while_handle_out),
      cmocka_unit_test(program_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
