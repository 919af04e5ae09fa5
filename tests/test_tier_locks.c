/*
 * test_tier_locks.c - the tier stack's locks, over the in-memory tier
 * (mem_tier_support.h): taken tier by tier top-down and released in
 * reverse (a failed compile too), an entry found by the re-check after a
 * lock is loaded, a busy lock waited on until the holder publishes, the
 * wait bound ending in a local compile, and concurrent misses on one key
 * asking the tiers once (the flight's owner only).
 */
#include <pthread.h>
#include <time.h>

#include "mem_tier_support.h"

static void locks_taken_in_tier_order_released_in_reverse(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 3, true);
  assert_int_equal(t_goc(r.c, PK(5), &r.comp, CCACHE_OK), 5);
  /* tier by tier: lookup, lock, re-check; store; reverse unlock */
  assert_string_equal(op_log, "g0 L0 g0 g1 L1 g1 g2 L2 g2 P0 P1 P2 U2 U1 U0");
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_lock_waits, 0);
  /* A failed compile still releases every lock, and stores nothing. */
  op_log[0] = '\0';
  r.comp.fail = 1;
  assert_int_equal(t_goc(r.c, PK(6), &r.comp, CCACHE_ECOMPILE), -1);
  assert_string_equal(op_log, "g0 L0 g0 g1 L1 g1 g2 L2 g2 U2 U1 U0");
  s = t_stats(r.c);
  assert_int_equal(s.program_compile_failures, 1);
  assert_int_equal(s.program_compiles, 2);
  rig_close(&r);
}

static void entry_found_after_taking_a_lock_is_loaded(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 2, true);
  /* Tier 1's entry appears at its second get: the re-check after its lock. */
  size_t len;
  r.m[1]->pending = t_entry(PK(8), "rt-1", 8, 64, &len);
  r.m[1]->pending_len = len;
  r.m[1]->pending_key = PK(8);
  r.m[1]->publish_at_get = 2;
  assert_int_equal(t_goc(r.c, PK(8), &r.comp, CCACHE_OK), 8);
  assert_string_equal(op_log, "g0 L0 g0 g1 L1 g1 P0 U1 U0");
  assert_int_equal(r.comp.calls, 0);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_hits, 1);
  assert_int_equal(s.program_compiles, 0);
  rig_close(&r);
}

static void busy_lock_waits_then_loads_the_published_entry(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 1, true);
  mem_tier *m = r.m[0];
  m->busy = 1; /* another process compiles PK(4) ... */
  size_t len;
  m->pending = t_entry(PK(4), "rt-1", 4, 64, &len);
  m->pending_len = len;
  m->pending_key = PK(4);
  m->publish_at_get = 4; /* ... and publishes it before our 4th look */
  assert_int_equal(t_goc(r.c, PK(4), &r.comp, CCACHE_OK), 4);
  assert_string_equal(op_log, "g0 L0 g0 L0 g0 L0 g0");
  assert_int_equal(r.comp.calls, 0);
  assert_int_equal(m->unlocks, 0);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_hits, 1);
  assert_int_equal(s.tier_lock_waits, 1);
  assert_int_equal(s.program_compiles, 0);
  assert_int_equal(s.program_misses, 1);
  rig_close(&r);
}

static void wait_timeout_compiles_locally(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(true, 0);
  o.wait_ms = 20; /* a real, short bound: what is checked is that it ends */
  rig_open_ops(&r, 2, &o, "rt-1", 0);
  r.m[0]->busy = 1; /* held forever by someone else */
  assert_int_equal(t_goc(r.c, PK(6), &r.comp, CCACHE_OK), 6);
  assert_int_equal(r.comp.calls, 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_lock_waits, 1);
  assert_true(s.tier_wait_ms_max >= 20);
  assert_int_equal(s.tier_misses, 1);
  /* Gave up on tier 0's lock: no later lock was taken; stored everywhere. */
  assert_int_equal(r.m[1]->locks, 0);
  assert_int_equal(r.m[0]->unlocks + r.m[1]->unlocks, 0);
  assert_int_equal(s.tier_writes, 2);
  rig_close(&r);
}

/* Concurrent misses on one key: the tiers are asked by the flight's owner
 * only. */
typedef struct goc_arg {
  rig *r;
  int rc, id;
} goc_arg;

static void *goc_thread(void *p) {
  goc_arg *a = p;
  ccache_program *prog = NULL;
  a->rc = ccache_program_get_or_compile(a->r->c, PK(3), t_compile, &a->r->comp, &prog);
  if (a->rc == CCACHE_OK) {
    a->id = t_id(ccache_program_native(prog));
    ccache_program_release(a->r->c, prog);
  }
  return NULL;
}

/* Inside the compile: wait (bounded) until the other 7 threads joined. */
static void wait_for_joiners(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)comp;
  (void)pkey;
  for (int i = 0; i < 30000; i++) {
    if (t_stats(c).program_waits >= 7) return;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

static void one_flight_asks_the_tiers_once(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 1, true);
  r.comp.during = wait_for_joiners;
  pthread_t th[8];
  goc_arg a[8];
  for (int i = 0; i < 8; i++) {
    a[i].r = &r;
    a[i].rc = -100;
    assert_int_equal(pthread_create(&th[i], NULL, goc_thread, &a[i]), 0);
  }
  for (int i = 0; i < 8; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(a[i].rc, CCACHE_OK);
    assert_int_equal(a[i].id, 3);
  }
  assert_int_equal(r.comp.calls, 1);
  assert_int_equal(r.m[0]->gets, 2); /* lookup, re-check after the lock */
  assert_int_equal(r.m[0]->locks, 1);
  assert_int_equal(r.m[0]->puts, 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_misses, 1);
  assert_int_equal(s.program_waits, 7);
  rig_close(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(locks_taken_in_tier_order_released_in_reverse),
      cmocka_unit_test(entry_found_after_taking_a_lock_is_loaded),
      cmocka_unit_test(busy_lock_waits_then_loads_the_published_entry),
      cmocka_unit_test(wait_timeout_compiles_locally),
      cmocka_unit_test(one_flight_asks_the_tiers_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
