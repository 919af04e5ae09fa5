/*
 * test_extremes.c - every bound and counter at the edges of uint64: 0, 1,
 * UINT64_MAX - 1, UINT64_MAX (= CCACHE_UNBOUNDED for a bound), and sums that
 * cross 2^64.  "Unbounded" never evicts for that bound; monotonic counters
 * wrap; the cost_bytes gauge saturates.  Counters no sequence of calls could
 * drive near 2^64 are seeded through the test-only ccache__seed().
 */
#include "core/internal.h"
#include "support.h"

#define U    CCACHE_UNBOUNDED
#define MAX  UINT64_MAX
#define HALF (UINT64_C(1) << 63)

/* -------------------------------------------------------------- cost cap */

/* The wrong eviction this file was written for: two programs costing
 * UINT64_MAX ("unknown size") under the default, unbounded cap. */
static void unbounded_cost_keeps_two_max_costs(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  ccache_program *a = t_intern(c, 1, 101, MAX);
  ccache_program *b = t_intern(c, 2, 102, MAX);
  t_put(c, 1, 1, a);
  t_put(c, 2, 2, b);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.items, 2);
  assert_int_equal(s.evicted_cost, 0);
  assert_true(s.cost_bytes == MAX); /* 2^65 - 2 charged: the gauge saturates */
  assert_int_equal(t_fetch_id(c, 1), 1);
  assert_int_equal(t_fetch_id(c, 2), 2);
  t_check(c, &t);
  ccache_program_release(c, a);
  ccache_program_release(c, b);
  t_close(c);
}

static void unbounded_cost_keeps_three_halves(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  for (uint64_t k = 1; k <= 3; k++) {
    ccache_program *p = t_intern(c, k, (int)(100 + k), HALF);
    t_put(c, k, (int)k, p);
    ccache_program_release(c, p);
  }
  ccache_stats s = t_stats(c);
  assert_int_equal(s.items, 3);
  assert_int_equal(s.evicted_cost, 0);
  assert_true(s.cost_bytes == MAX);
  t_check(c, &t);
  t_close(c);
}

/* A finite cap just under 2^64: the sum of two 2^63 programs is 2^64, one
 * byte over the cap, so the older entry leaves. */
static void cost_cap_max_minus_one_sum_crossing_2_64(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, MAX - 1);
  ccache_program *a = t_intern(c, 1, 101, HALF);
  ccache_program *b = t_intern(c, 2, 102, HALF - 1);
  ccache_program *d = t_intern(c, 3, 103, 1);
  t_put(c, 1, 1, a); /* 2^63 */
  t_put(c, 2, 2, b); /* 2^64 - 1 > cap */
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_cost, 1);
  assert_int_equal(s.items, 1);
  assert_true(s.cost_bytes == HALF - 1);
  t_put(c, 3, 3, d); /* 2^63: fits */
  s = t_stats(c);
  assert_int_equal(s.evicted_cost, 1);
  assert_int_equal(s.items, 2);
  assert_true(s.cost_bytes == HALF);
  assert_int_equal(t_fetch_id(c, 1), -1);
  assert_int_equal(t_fetch_id(c, 2), 2);
  assert_int_equal(t_fetch_id(c, 3), 3);
  t_check(c, &t);
  ccache_program_release(c, a);
  ccache_program_release(c, b);
  ccache_program_release(c, d);
  t_close(c);
}

/* Cap 1: costs 0 and 1 fit together; an entry over the cap by itself stays
 * (never the entry just inserted) until the next insert. */
static void cost_cap_one(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, 1);
  ccache_program *zero = t_intern(c, 1, 100, 0);
  ccache_program *one = t_intern(c, 2, 101, 1);
  ccache_program *two = t_intern(c, 3, 102, 2);
  t_put(c, 1, 1, zero);
  t_put(c, 2, 2, one);
  assert_int_equal(t_stats(c).evicted_cost, 0);
  t_put(c, 3, 3, two); /* 3 > 1: K1 (frees 0), K2 (frees 1), then K3 is kept */
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_cost, 2);
  assert_int_equal(s.items, 1);
  assert_int_equal(s.cost_bytes, 2);
  t_put(c, 4, 4, zero); /* 2 > 1: K3 leaves, K4 (cost 0) is kept */
  s = t_stats(c);
  assert_int_equal(s.evicted_cost, 3);
  assert_int_equal(s.items, 1);
  assert_int_equal(s.cost_bytes, 0);
  t_check(c, &t);
  ccache_program_release(c, zero);
  ccache_program_release(c, one);
  ccache_program_release(c, two);
  t_close(c);
}

/* One program of cost UINT64_MAX - 1 shared by three entries is charged
 * once; a fourth entry on a program of cost 1 crosses the cap, and the
 * three sharing entries must all leave before the cost falls. */
static void shared_program_at_max_charged_once(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, MAX - 1);
  ccache_program *big = t_intern(c, 1, 100, MAX - 1);
  ccache_program *small = t_intern(c, 2, 101, 1);
  for (uint64_t k = 1; k <= 3; k++) t_put(c, k, (int)k, big);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.items, 3);
  assert_int_equal(s.evicted_cost, 0);
  assert_true(s.cost_bytes == MAX - 1);
  t_put(c, 4, 4, small); /* 2^64 - 1 + 1 = 2^64 > cap */
  s = t_stats(c);
  assert_int_equal(s.evicted_cost, 3);
  assert_int_equal(s.items, 1);
  assert_int_equal(s.cost_bytes, 1);
  assert_int_equal(t_fetch_id(c, 4), 4);
  t_check(c, &t);
  ccache_program_release(c, big);
  ccache_program_release(c, small);
  t_close(c);
}

/* set_limits between unbounded and finite at the extremes. */
static void set_limits_between_unbounded_and_extremes(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  for (uint64_t k = 1; k <= 3; k++) {
    ccache_program *p = t_intern(c, k, (int)(100 + k), HALF);
    t_put(c, k, (int)k, p);
    ccache_program_release(c, p);
  }
  /* 3 x 2^63 under a cap of 2^64 - 2: K1 leaves (2^64 still over), K2 too. */
  assert_int_equal(ccache_set_limits(c, U, U, MAX - 1), CCACHE_OK);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_cost, 2);
  assert_int_equal(s.items, 1);
  assert_true(s.cost_bytes == HALF);
  /* Back to unbounded, then a program of UINT64_MAX: nothing leaves. */
  assert_int_equal(ccache_set_limits(c, U, U, U), CCACHE_OK);
  ccache_program *p = t_intern(c, 9, 109, MAX);
  t_put(c, 9, 9, p);
  s = t_stats(c);
  assert_int_equal(s.evicted_cost, 2);
  assert_int_equal(s.items, 2);
  assert_true(s.cost_bytes == MAX);
  /* Items: UINT64_MAX - 1 is a bound nothing reaches; 1 evicts at once. */
  assert_int_equal(ccache_set_limits(c, MAX - 1, U, U), CCACHE_OK);
  assert_int_equal(t_stats(c).evicted_capacity, 0);
  assert_int_equal(ccache_set_limits(c, 1, U, U), CCACHE_OK);
  s = t_stats(c);
  assert_int_equal(s.evicted_capacity, 1);
  assert_int_equal(s.items, 1);
  assert_int_equal(t_fetch_id(c, 9), 9);
  /* A bound of 0 is refused, whatever the others are. */
  assert_int_equal(ccache_set_limits(c, 0, MAX, MAX), CCACHE_EINVAL);
  assert_int_equal(ccache_set_limits(c, MAX, 0, MAX), CCACHE_EINVAL);
  assert_int_equal(ccache_set_limits(c, MAX, MAX, 0), CCACHE_EINVAL);
  uint64_t mi, ttl, mc;
  assert_int_equal(ccache_get_limits(c, &mi, &ttl, &mc), CCACHE_OK);
  assert_true(mi == 1 && ttl == U && mc == U);
  t_check(c, &t);
  ccache_program_release(c, p);
  t_close(c);
}

/* ------------------------------------------------------------ item bound */

static void item_bound_one(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, 1, U, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  for (uint64_t k = 1; k <= 5; k++) t_put(c, k, (int)k, p);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_capacity, 4);
  assert_int_equal(s.items, 1);
  assert_int_equal(t_fetch_id(c, 5), 5);
  t_check(c, &t);
  ccache_program_release(c, p);
  t_close(c);
}

/* ------------------------------------------------------------------- TTL */

static void ttl_one(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, 1, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t.now_ms = 5;
  t_put(c, 1, 1, p);
  assert_int_equal(t_fetch_id(c, 1), 1);
  t.now_ms = 6;
  assert_int_equal(t_fetch_id(c, 1), -1);
  assert_int_equal(t_stats(c).evicted_ttl, 1);
  ccache_program_release(c, p);
  t_close(c);
}

/* Insert at 0 with a TTL of 2^64 - 2: alive up to now = 2^64 - 3, expired at
 * 2^64 - 2 (the deadline itself, never computed as a sum that wraps). */
static void ttl_max_minus_one(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, MAX - 1, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  t.now_ms = MAX - 2;
  assert_int_equal(t_fetch_id(c, 1), 1);
  assert_int_equal(ccache_sweep(c), 0);
  t.now_ms = MAX - 1;
  assert_int_equal(ccache_sweep(c), 1);
  assert_int_equal(t_fetch_id(c, 1), -1);
  ccache_program_release(c, p);
  t_close(c);
}

/* Insert times at the top of the clock: inserted at UINT64_MAX - 1 with a
 * TTL of 1, expired at UINT64_MAX; inserted at UINT64_MAX, never (no later
 * time exists), whatever the TTL. */
static void ttl_at_the_end_of_the_clock(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, 1, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t.now_ms = MAX - 1;
  t_put(c, 1, 1, p);
  t.now_ms = MAX;
  assert_int_equal(t_fetch_id(c, 1), -1);
  t_put(c, 2, 2, p);
  assert_int_equal(t_fetch_id(c, 2), 2);
  assert_int_equal(ccache_sweep(c), 0);
  assert_int_equal(ccache_set_limits(c, U, MAX - 1, U), CCACHE_OK);
  assert_int_equal(t_fetch_id(c, 2), 2);
  t_check(c, &t);
  ccache_program_release(c, p);
  t_close(c);
}

/* The last insert time is clamped upwards (never decreases): seeded at
 * UINT64_MAX, every later insert is stamped UINT64_MAX too. */
static void last_insert_time_at_max(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, 10, U);
  assert_int_equal(ccache__seed(c, "last_ins_ms", MAX), 0);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t.now_ms = 3;
  t_put(c, 1, 1, p);
  t.now_ms = MAX;
  assert_int_equal(t_fetch_id(c, 1), 1); /* inserted "at" UINT64_MAX */
  t_check(c, &t);
  ccache_program_release(c, p);
  t_close(c);
}

/* -------------------------------------------------------------- counters */

/* The insert index wraps from UINT64_MAX to 0; FIFO order is the table's
 * insertion order, so eviction still takes the oldest entry. */
static void insert_index_wraps(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, 2, U, U);
  assert_int_equal(ccache__seed(c, "next_idx", MAX - 1), 0);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p); /* index 2^64 - 2 */
  t_put(c, 2, 2, p); /* 2^64 - 1 */
  t_check(c, &t);
  t_put(c, 3, 3, p); /* 0: K1 leaves */
  t_check(c, &t);
  assert_int_equal(t_fetch_id(c, 1), -1);
  t_put(c, 4, 4, p); /* 1: K2 leaves */
  assert_int_equal(t_fetch_id(c, 2), -1);
  assert_int_equal(t_fetch_id(c, 3), 3);
  assert_int_equal(t_fetch_id(c, 4), 4);
  assert_int_equal(t_stats(c).evicted_capacity, 2);
  t_check(c, &t);
  ccache_program_release(c, p);
  t_close(c);
}

/* Monotonic counters wrap at 2^64 (documented): one more event after
 * UINT64_MAX reads 0. */
static void counters_wrap(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  const char *names[] = {
      "inserts", "hits", "misses", "program_misses", "programs_destroyed", "closures_destroyed"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    assert_int_equal(ccache__seed(c, names[i], MAX), 0);
  assert_int_equal(ccache__seed(c, "no_such_counter", 1), -1);
  ccache_program *p = t_intern(c, 1, 100, 1);          /* program_misses -> 0 */
  t_put(c, 1, 1, p);                                   /* inserts -> 0 */
  assert_int_equal(t_fetch_id(c, 1), 1);               /* hits -> 0 */
  assert_int_equal(t_fetch_id(c, 2), -1);              /* misses -> 0 */
  assert_int_equal(ccache_remove(c, K(1)), CCACHE_OK); /* closures_destroyed -> 0 */
  ccache_program_release(c, p);                        /* programs_destroyed -> 0 */
  ccache_stats s = t_stats(c);
  assert_int_equal(s.inserts, 0);
  assert_int_equal(s.hits, 0);
  assert_int_equal(s.misses, 0);
  assert_int_equal(s.program_misses, 0);
  assert_int_equal(s.closures_destroyed, 0);
  assert_int_equal(s.programs_destroyed, 0);
  assert_int_equal(s.leases_out, 0);
  t_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unbounded_cost_keeps_two_max_costs),
      cmocka_unit_test(unbounded_cost_keeps_three_halves),
      cmocka_unit_test(cost_cap_max_minus_one_sum_crossing_2_64),
      cmocka_unit_test(cost_cap_one),
      cmocka_unit_test(shared_program_at_max_charged_once),
      cmocka_unit_test(set_limits_between_unbounded_and_extremes),
      cmocka_unit_test(item_bound_one),
      cmocka_unit_test(ttl_one),
      cmocka_unit_test(ttl_max_minus_one),
      cmocka_unit_test(ttl_at_the_end_of_the_clock),
      cmocka_unit_test(last_insert_time_at_max),
      cmocka_unit_test(insert_index_wraps),
      cmocka_unit_test(counters_wrap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
