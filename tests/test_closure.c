/* test_closure.c - the closure table: put, fetch, leases, replace, remove, clear. */
#include <string.h>

#include "support.h"

static void put_fetch_hit_and_miss(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *p = t_intern(c, 1, 100, 10);
  t_put(c, 1, 1, p);
  ccache_lease l;
  assert_int_equal(ccache_fetch(c, K(1), &l), CCACHE_OK);
  assert_int_equal(t_id(l.closure), 1);
  assert_ptr_equal(l.native, ccache_program_native(p));
  assert_int_equal(t_stats(c).leases_out, 1);
  ccache_lease_release(c, &l);
  ccache_lease zero;
  memset(&zero, 0, sizeof zero);
  assert_memory_equal(&l, &zero, sizeof l); /* release zeroes */
  ccache_lease_release(c, &l);              /* releasing a zeroed lease: no-op */
  ccache_lease_release(c, NULL);
  assert_int_equal(ccache_fetch(c, K(2), &l), CCACHE_MISS);
  assert_memory_equal(&l, &zero, sizeof l);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.hits, 1);
  assert_int_equal(s.misses, 1);
  assert_int_equal(s.inserts, 1);
  assert_int_equal(s.items, 1);
  assert_int_equal(s.leases_out, 0);
  assert_int_equal(s.cost_bytes, 10);
  ccache_program_release(c, p);
  t_check(c, &t);
  t_close(c);
  assert_int_equal(t.closures_destroyed, 1);
  assert_int_equal(t.programs_destroyed, 1);
}

static void replace_later_insert_wins(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *p = t_intern(c, 1, 100, 10);
  t_put(c, 1, 1, p);
  t_put(c, 1, 2, p);
  assert_int_equal(t.closures_destroyed, 1); /* closure 1 replaced, no lease */
  assert_int_equal(t_fetch_id(c, 1), 2);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.inserts, 2);
  assert_int_equal(s.replaced, 1);
  assert_int_equal(s.items, 1);
  assert_int_equal(s.cost_bytes, 10);
  ccache_program_release(c, p);
  t_check(c, &t);
  t_close(c);
}

static void reput_same_closure_pointer_keeps_it(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *p = t_intern(c, 1, 100, 10);
  ccache_program *q = t_intern(c, 2, 200, 20);
  t_obj *cl = t_closure(5);
  assert_int_equal(ccache_put(c, K(1), cl, p), CCACHE_OK);
  ccache_lease old;
  assert_int_equal(ccache_fetch(c, K(1), &old), CCACHE_OK);
  assert_int_equal(ccache_put(c, K(1), cl, p), CCACHE_OK);
  assert_int_equal(ccache_put(c, K(1), cl, q), CCACHE_OK); /* same closure, other program */
  assert_int_equal(t.closures_destroyed, 0);
  assert_int_equal(t_fetch_id(c, 1), 5);
  assert_int_equal(t_stats(c).replaced, 2);
  assert_int_equal(t_stats(c).cost_bytes, 20);
  ccache_lease_release(c, &old);
  assert_int_equal(t.closures_destroyed, 0); /* the current entry still runs it */
  t_check(c, &t);
  assert_int_equal(ccache_remove(c, K(1)), CCACHE_OK);
  assert_int_equal(t.closures_destroyed, 1);
  ccache_program_release(c, p);
  ccache_program_release(c, q);
  assert_int_equal(t.programs_destroyed, 2);
  t_close(c);
}

static void lease_outlives_remove(void **state) {
  (void)state;
  t_ctx t = {0};
  t.log_on = 1;
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *p = t_intern(c, 1, 100, 10);
  t_put(c, 1, 1, p);
  ccache_program_release(c, p);
  ccache_lease l;
  assert_int_equal(ccache_fetch(c, K(1), &l), CCACHE_OK);
  assert_int_equal(ccache_remove(c, K(1)), CCACHE_OK);
  assert_int_equal(t.closures_destroyed, 0);
  assert_int_equal(t_fetch_id(c, 1), -1);
  assert_int_equal(t_id(l.closure), 1); /* still valid */
  assert_int_equal(t_id(l.native), 100);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.items, 0);
  assert_int_equal(s.cost_bytes, 0); /* a lease on a removed entry is not charged */
  assert_int_equal(s.programs, 1);
  assert_int_equal(ccache_close(c), CCACHE_EBUSY);
  ccache_lease_release(c, &l);
  assert_int_equal(t.nlog, 2);
  assert_int_equal(t.log[0].kind, 'c');
  assert_int_equal(t.log[1].kind, 'p');
  t_close(c);
}

static void clear_counts_and_destroys(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *p = t_intern(c, 1, 100, 10);
  for (int i = 0; i < 50; i++) t_put(c, (uint64_t)i, i, p);
  assert_int_equal(ccache_clear(c), CCACHE_OK);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.cleared, 50);
  assert_int_equal(s.items, 0);
  assert_int_equal(s.cost_bytes, 0);
  assert_int_equal(t.closures_destroyed, 50);
  assert_int_equal(t.programs_destroyed, 0); /* the handle keeps it interned */
  assert_int_equal(s.programs, 1);
  assert_int_equal(ccache_clear(NULL), CCACHE_EINVAL);
  t_put(c, 1, 1, p); /* usable after clear */
  assert_int_equal(t_fetch_id(c, 1), 1);
  ccache_program_release(c, p);
  t_check(c, &t);
  t_close(c);
  assert_int_equal(t.programs_destroyed, 1);
}

static void put_bad_input_takes_closure(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache *other = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *foreign = t_intern(other, 1, 1, 1);
  assert_int_equal(ccache_put(c, K(1), t_closure(1), NULL), CCACHE_EINVAL);
  assert_int_equal(t.closures_destroyed, 1);
  assert_int_equal(ccache_put(c, K(1), t_closure(2), foreign), CCACHE_EINVAL);
  assert_int_equal(t.closures_destroyed, 2);
  assert_int_equal(ccache_put(NULL, K(1), NULL, foreign), CCACHE_EINVAL);
  ccache_lease l;
  assert_int_equal(ccache_fetch(NULL, K(1), &l), CCACHE_EINVAL);
  assert_int_equal(ccache_fetch(c, K(1), NULL), CCACHE_EINVAL);
  assert_int_equal(ccache_remove(NULL, K(1)), CCACHE_EINVAL);
  assert_int_equal(t_stats(c).items, 0);
  assert_int_equal(t_stats(c).inserts, 0);
  ccache_program_release(other, foreign);
  t_close(other);
  t_close(c);
  assert_int_equal(ccache_close(NULL), CCACHE_OK);
}

static void stats_size_respected(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_program *p = t_intern(c, 1, 1, 1);
  t_put(c, 1, 1, p);
  assert_int_equal(t_fetch_id(c, 1), 1);
  /* An older, smaller caller struct: nothing past its size is written. */
  _Alignas(ccache_stats) unsigned char buf[sizeof(ccache_stats) + 8];
  memset(buf, 0xEE, sizeof buf);
  ccache_stats *s = (ccache_stats *)(void *)buf;
  size_t small = offsetof(ccache_stats, misses);
  s->size = (uint32_t)small;
  ccache_stats_get(c, s);
  assert_int_equal(s->hits, 1);
  for (size_t i = small; i < sizeof buf; i++) assert_int_equal(buf[i], 0xEE);
  ccache_stats_get(c, NULL);
  ccache_program_release(c, p);
  t_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(put_fetch_hit_and_miss),
      cmocka_unit_test(replace_later_insert_wins),
      cmocka_unit_test(reput_same_closure_pointer_keeps_it),
      cmocka_unit_test(lease_outlives_remove),
      cmocka_unit_test(clear_counts_and_destroys),
      cmocka_unit_test(put_bad_input_takes_closure),
      cmocka_unit_test(stats_size_respected),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
