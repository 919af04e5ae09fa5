/* test_bounds.c - max_items (FIFO), TTL from insert time, the cost cap, set_limits. */
#include <string.h>

#include "support.h"

#define U CCACHE_UNBOUNDED

static void fifo_capacity_three(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, 3, U, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  for (int k = 1; k <= 4; k++) t_put(c, (uint64_t)k, k, p);
  assert_int_equal(t_fetch_id(c, 1), -1);
  for (int k = 2; k <= 4; k++) assert_int_equal(t_fetch_id(c, (uint64_t)k), k);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_capacity, 1);
  assert_int_equal(s.items, 3);
  /* Put K4 again: a replacement, no capacity eviction. */
  t_put(c, 4, 40, p);
  s = t_stats(c);
  assert_int_equal(s.items, 3);
  for (int k = 2; k <= 3; k++) assert_int_equal(t_fetch_id(c, (uint64_t)k), k);
  assert_int_equal(t_fetch_id(c, 4), 40);
  s = t_stats(c);
  assert_int_equal(s.evicted_capacity, 1);
  assert_int_equal(s.replaced, 1);
  assert_int_equal(s.inserts, 5);
  /* The replacement took a new insert index: K2 is now the oldest. */
  t_put(c, 5, 5, p);
  assert_int_equal(t_fetch_id(c, 2), -1);
  assert_int_equal(t_fetch_id(c, 4), 40);
  t_check(c, &t);
  ccache_program_release(c, p);
  t_close(c);
}

static void ttl_counts_from_insert_time(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, 100, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  uint64_t times[] = {40, 80, 99};
  for (int i = 0; i < 3; i++) {
    t.now_ms = times[i];
    assert_int_equal(t_fetch_id(c, 1), 1); /* hits never refresh the TTL */
  }
  t.now_ms = 100;
  assert_int_equal(t_fetch_id(c, 1), -1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_ttl, 1);
  assert_int_equal(s.hits, 3);
  assert_int_equal(s.misses, 1);
  assert_int_equal(s.items, 0);
  assert_int_equal(t.closures_destroyed, 1);
  t_check(c, &t);
  ccache_program_release(c, p);
  t_close(c);
}

static void sweep_removes_expired_prefix(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, 100, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  for (int k = 0; k < 10; k++) {
    t.now_ms = (uint64_t)k * 10; /* K0 at 0 .. K9 at 90 */
    t_put(c, (uint64_t)k, k, p);
  }
  t.now_ms = 145; /* K0..K4 (inserted at 0..40) have expired */
  assert_int_equal(ccache_sweep(c), 5);
  assert_int_equal(ccache_sweep(c), 0);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_ttl, 5);
  assert_int_equal(s.items, 5);
  assert_int_equal(t.closures_destroyed, 5);
  t_check(c, &t);
  assert_int_equal(ccache_sweep(NULL), CCACHE_EINVAL);
  ccache_program_release(c, p);
  t_close(c);
}

static void clock_stepping_back_keeps_fifo_times(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, 100, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t.now_ms = 500;
  t_put(c, 1, 1, p);
  t.now_ms = 200;    /* the injected clock steps back */
  t_put(c, 2, 2, p); /* inserted at max(200, 500) = 500 */
  t_check(c, &t);
  t.now_ms = 599;
  assert_int_equal(t_fetch_id(c, 2), 2);
  t.now_ms = 600;
  assert_int_equal(ccache_sweep(c), 2);
  ccache_program_release(c, p);
  t_close(c);
}

static void lease_pins_evicted_entry(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, 1, U, U);
  ccache_program *p1 = t_intern(c, 1, 100, 1);
  ccache_program *p2 = t_intern(c, 2, 200, 1);
  t_put(c, 1, 1, p1);
  ccache_program_release(c, p1);
  ccache_lease l;
  assert_int_equal(ccache_fetch(c, K(1), &l), CCACHE_OK);
  t_put(c, 2, 2, p2);
  assert_int_equal(t_fetch_id(c, 1), -1);
  assert_int_equal(t.closures_destroyed, 0);
  assert_int_equal(t.programs_destroyed, 0);
  assert_int_equal(t_id(l.closure), 1);
  assert_int_equal(t_id(l.native), 100);
  ccache_lease_release(c, &l);
  assert_int_equal(t.closures_destroyed, 1);
  assert_int_equal(t.programs_destroyed, 1);
  assert_int_equal(t_stats(c).evicted_capacity, 1);
  ccache_program_release(c, p2);
  t_close(c);
  assert_int_equal(t.closures_destroyed, 2);
  assert_int_equal(t.programs_destroyed, 2);
}

static void set_limits_shrinks_at_once(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t.log_on = 1;
  for (int k = 1; k <= 10; k++) t_put(c, (uint64_t)k, k, p);
  assert_int_equal(ccache_set_limits(c, 3, U, U), CCACHE_OK);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_capacity, 7);
  assert_int_equal(s.items, 3);
  assert_int_equal(t.nlog, 7);
  for (int i = 0; i < 7; i++) { /* destroyed in insert order */
    assert_int_equal(t.log[i].kind, 'c');
    assert_int_equal(t.log[i].id, i + 1);
  }
  for (int k = 1; k <= 7; k++) assert_int_equal(t_fetch_id(c, (uint64_t)k), -1);
  for (int k = 8; k <= 10; k++) assert_int_equal(t_fetch_id(c, (uint64_t)k), k);
  uint64_t mi, ttl, mc;
  assert_int_equal(ccache_get_limits(c, &mi, &ttl, &mc), CCACHE_OK);
  assert_true(mi == 3 && ttl == U && mc == U);
  assert_int_equal(ccache_get_limits(c, NULL, NULL, NULL), CCACHE_OK);
  t_check(c, &t);
  ccache_program_release(c, p);
  t_close(c);
}

static void set_limits_new_ttl_applies_to_present_entries(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p); /* at t=0 */
  t.now_ms = 1000;
  assert_int_equal(t_fetch_id(c, 1), 1);
  assert_int_equal(ccache_set_limits(c, U, 500, U), CCACHE_OK);
  assert_int_equal(t_fetch_id(c, 1), -1); /* 1000 >= 0 + 500 */
  assert_int_equal(t_stats(c).evicted_ttl, 1);
  ccache_program_release(c, p);
  t_close(c);
}

static void cost_cap_evicts_oldest(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, 100);
  ccache_program *p1 = t_intern(c, 1, 100, 60);
  ccache_program *p2 = t_intern(c, 2, 200, 60);
  t_put(c, 1, 1, p1);
  ccache_program_release(c, p1);
  t_put(c, 2, 2, p2);
  ccache_program_release(c, p2);
  assert_int_equal(t_fetch_id(c, 1), -1);
  assert_int_equal(t_fetch_id(c, 2), 2);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_cost, 1);
  assert_int_equal(s.cost_bytes, 60);
  assert_int_equal(s.programs, 1);
  assert_int_equal(t.programs_destroyed, 1);
  t_check(c, &t);
  t_close(c);
}

static void cost_cap_shared_program_evicts_on(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, 100);
  ccache_program *shared = t_intern(c, 1, 100, 50);
  ccache_program *big = t_intern(c, 2, 200, 60);
  t_put(c, 1, 1, shared);
  t_put(c, 2, 2, shared); /* charged once: 50 */
  assert_int_equal(t_stats(c).cost_bytes, 50);
  t_put(c, 3, 3, big); /* 110 > 100: K1 leaves (frees nothing), then K2 */
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_cost, 2);
  assert_int_equal(s.cost_bytes, 60);
  assert_int_equal(s.items, 1);
  /* An entry whose program alone exceeds the cap stays: never the entry just
   * inserted. */
  ccache_program *huge = t_intern(c, 3, 300, 1000);
  t_put(c, 4, 4, huge);
  s = t_stats(c);
  assert_int_equal(s.items, 1);
  assert_int_equal(s.cost_bytes, 1000);
  assert_int_equal(t_fetch_id(c, 4), 4);
  /* Lowering the cap at runtime evicts even the newest. */
  assert_int_equal(ccache_set_limits(c, U, U, 10), CCACHE_OK);
  assert_int_equal(t_stats(c).items, 0);
  assert_int_equal(t_stats(c).evicted_cost, 4);
  ccache_program_release(c, shared);
  ccache_program_release(c, big);
  ccache_program_release(c, huge);
  t_check(c, &t);
  t_close(c);
  assert_int_equal(t.programs_destroyed, 3);
}

static void cost_total_does_not_wrap(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, UINT64_MAX - 1);
  ccache_program *p[3];
  for (int i = 0; i < 3; i++) {
    p[i] = t_intern(c, (uint64_t)i, i, UINT64_MAX / 2);
    t_put(c, (uint64_t)i, i, p[i]);
  }
  /* Two halves fit under UINT64_MAX - 1; the third pushes the true sum past
   * 2^64, so the oldest leaves instead of the total wrapping. */
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_cost, 1);
  assert_int_equal(s.items, 2);
  assert_true(s.cost_bytes == UINT64_MAX / 2 * 2);
  assert_int_equal(t_fetch_id(c, 0), -1);
  t_check(c, &t);
  for (int i = 0; i < 3; i++) ccache_program_release(c, p[i]);
  t_close(c);
}

static void zero_bounds_rejected(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache_config cfg;
  ccache *c = (ccache *)&t; /* sentinel: must stay untouched */
  t_config(&cfg, &t);
  cfg.max_items = 0;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  assert_ptr_equal(c, (ccache *)&t);
  t_config(&cfg, &t);
  cfg.ttl_ms = 0;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  t_config(&cfg, &t);
  cfg.max_cost_bytes = 0;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  t_config(&cfg, &t);
  cfg.size = 4;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  t_config(&cfg, &t);
  assert_int_equal(ccache_open(NULL, &c), CCACHE_EINVAL);
  assert_int_equal(ccache_open(&cfg, NULL), CCACHE_EINVAL);

  c = t_open(&t, 5, 1000, 500);
  ccache_program *p = t_intern(c, 1, 100, 1);
  for (int k = 1; k <= 5; k++) t_put(c, (uint64_t)k, k, p);
  assert_int_equal(ccache_set_limits(c, 0, U, U), CCACHE_EINVAL);
  assert_int_equal(ccache_set_limits(c, 2, 0, U), CCACHE_EINVAL);
  assert_int_equal(ccache_set_limits(c, 2, U, 0), CCACHE_EINVAL);
  assert_int_equal(ccache_set_limits(NULL, 2, U, U), CCACHE_EINVAL);
  uint64_t mi, ttl, mc;
  assert_int_equal(ccache_get_limits(c, &mi, &ttl, &mc), CCACHE_OK);
  assert_true(mi == 5 && ttl == 1000 && mc == 500); /* nothing changed */
  assert_int_equal(t_stats(c).items, 5);
  assert_int_equal(ccache_get_limits(NULL, &mi, &ttl, &mc), CCACHE_EINVAL);
  ccache_program_release(c, p);
  t_close(c);
}

static void close_busy_with_lease_out(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  ccache_program_release(c, p);
  ccache_lease l;
  assert_int_equal(ccache_fetch(c, K(1), &l), CCACHE_OK);
  assert_int_equal(ccache_close(c), CCACHE_EBUSY);
  assert_int_equal(t_fetch_id(c, 1), 1); /* still usable */
  t_put(c, 2, 2, t_intern(c, 2, 200, 1));
  assert_int_equal(ccache_close(c), CCACHE_EBUSY); /* and the new handle too */
  ccache_program *h = NULL;
  assert_int_equal(ccache_program_fetch(c, PK(2), &h), CCACHE_OK);
  ccache_program_release(c, h);
  ccache_program_release(c, h); /* the handle t_intern returned */
  ccache_lease_release(c, &l);
  t_close(c);
  assert_int_equal(t.closures_destroyed, 2);
  assert_int_equal(t.programs_destroyed, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fifo_capacity_three),
      cmocka_unit_test(ttl_counts_from_insert_time),
      cmocka_unit_test(sweep_removes_expired_prefix),
      cmocka_unit_test(clock_stepping_back_keeps_fifo_times),
      cmocka_unit_test(lease_pins_evicted_entry),
      cmocka_unit_test(set_limits_shrinks_at_once),
      cmocka_unit_test(set_limits_new_ttl_applies_to_present_entries),
      cmocka_unit_test(cost_cap_evicts_oldest),
      cmocka_unit_test(cost_cap_shared_program_evicts_on),
      cmocka_unit_test(cost_total_does_not_wrap),
      cmocka_unit_test(zero_bounds_rejected),
      cmocka_unit_test(close_busy_with_lease_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
