/*
 * test_tier_redis_sentinel_failover.c - the Redis tier following a
 * Sentinel's primary while the old one stays up and a master: an
 * operator's SENTINEL FAILOVER followed on +switch-master with leases held,
 * the periodic re-ask following a switch no message announced, and a lease
 * held across a planned failover through a cache.  Each test starts its own
 * primary, replica and Sentinel (redis_support.c, redis_sentinel_support.c);
 * without them they skip, or fail when CCACHE_TEST_REQUIRE_REDIS=1.  The
 * spec, a primary killed or demoted, and ACL users are
 * test_tier_redis_sentinel.c.
 *
 * The real-time case runs with the argument `realtime` (ctest
 * tier_redis_sentinel_failover_realtime, label realtime).  SIGPIPE stays at
 * its default action for the whole run (set in main).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "redis_sentinel_support.h"
#include "redis_tier_support.h"

/* ---------------------------------------------------- planned failover */
/* The backend's health of server 0 (the one primary name). */
static ccache_tier_health be_health(t_be *b) {
  ccache_tier_health h;
  memset(&h, 0, sizeof h);
  h.size = sizeof h;
  assert_int_equal(b->ops.health(b->r, 0, &h), CCACHE_OK);
  return h;
}

/* Wait (up to ms) until server 0 has followed `want` failovers: the ms it
 * took, or -1. */
static long long wait_followed(t_be *b, uint64_t want, unsigned long long ms) {
  ccache__rserver *sv = &ccache__redis_pool(b->r)->servers[0];
  unsigned long long t0 = t_redis_now_ms();
  while (atomic_load(&sv->failovers) < want && t_redis_now_ms() - t0 < ms) t_redis_poll_pause();
  return atomic_load(&sv->failovers) >= want ? (long long)(t_redis_now_ms() - t0) : -1;
}

/* Whether some client of the Sentinel is subscribed (CLIENT LIST: sub=1),
 * waited for up to ms. */
static int wait_subscriber(unsigned long long ms) {
  unsigned long long t0 = t_redis_now_ms();
  int sub = 0;
  while (!sub && t_redis_now_ms() - t0 < ms) {
    redisReply *r = t_redis_cmd(&t_servers[2], "CLIENT LIST");
    sub = r && r->type == REDIS_REPLY_STRING && strstr(r->str, " sub=1 ");
    if (r) freeReplyObject(r);
    if (!sub) t_redis_poll_pause();
  }
  return sub;
}

/* SENTINEL FAILOVER (an operator's planned switch: the old primary stays up
 * and a master for seconds) while the tier holds two leases: the tier
 * follows on the Sentinel's +switch-master message (the periodic re-ask is
 * set to a minute, out of reach), with no error on the old primary; the
 * lease the new primary lacks is taken there again (leases_retaken 1), the
 * one it has is renewed there, and the next publish lands on the new
 * primary. */
static void redis_planned_failover_is_followed(void **state) {
  (void)state;
  t_need_redis();
  t_sentinel_trio();
  t_redis_server *s = t_servers;
  char spec[96];
  snprintf(spec, sizeof spec, "sentinel:%s/mym", s[2].addr);
  ccache_redis_options o;
  t_opts(&o, spec);
  o.lease_ms = 30000; /* renewed by hand below */
  t_be b;
  t_be_open(&b, &o, T_NS);
  ccache__redis_pool(b.r)->reask_ms = 60000;
  void *l3 = NULL, *l4 = NULL;
  assert_int_equal(b.ops.lock(b.r, PK(3), &l3), CCACHE_OK); /* on s[0], the primary */
  assert_int_equal(b.ops.lock(b.r, PK(4), &l4), CCACHE_OK);
  assert_int_equal(t_put_n(&b, 1, 32), CCACHE_OK);
  int subscribed = wait_subscriber(T_WAIT_MS / 2);
  /* The replica has the leases and the entry (in sync, as a planned
   * failover wants). */
  unsigned long long synced = t_redis_now_ms() + T_WAIT_MS;
  while (t_redis_int(&s[1], "DBSIZE") != 3 && t_redis_now_ms() < synced) t_redis_poll_pause();
  assert_int_equal(t_redis_int(&s[1], "DBSIZE"), 3);
  /* NOGOODSLAVE until the Sentinel has the replica's INFO: asked again. */
  unsigned long long deadline = t_redis_now_ms() + 3 * T_WAIT_MS;
  int started = 0;
  while (!started && t_redis_now_ms() < deadline) {
    redisReply *r = t_redis_cmd(&s[2], "SENTINEL FAILOVER mym");
    assert_non_null(r);
    started = r->type == REDIS_REPLY_STATUS;
    if (!started && t_redis_now_ms() + 100 >= deadline)
      print_message("SENTINEL FAILOVER: %s\n", r->type == REDIS_REPLY_ERROR ? r->str : "?");
    freeReplyObject(r);
    for (int i = 0; !started && i < 100; i++) t_redis_poll_pause();
  }
  assert_true(started);
  while (t_sentinel_primary_port() != s[1].port && t_redis_now_ms() < deadline)
    t_redis_poll_pause();
  assert_int_equal(t_sentinel_primary_port(), s[1].port);
  long long took = wait_followed(&b, 1, 5000);
  redisReply *rr = t_redis_cmd(&s[0], "ROLE");
  const char *old_role = rr && rr->type == REDIS_REPLY_ARRAY && rr->elements > 0 &&
                                 rr->element[0]->type == REDIS_REPLY_STRING
                             ? rr->element[0]->str
                             : "?";
  /* A lease taken just before the switch and not yet replicated. */
  char lkey[256];
  assert_true(ccache__redis_key(b.r, PK(3), 1, lkey, sizeof lkey) > 0);
  long long deleted = t_redis_int(&s[1], "DEL %s", lkey);
  int rc3 = b.ops.renew(b.r, l3), rc4 = b.ops.renew(b.r, l4);
  int put = t_put_n(&b, 2, 32);
  char ekey[256];
  t_entry_key(ekey, sizeof ekey, "ccache", "v1:0123456789abcdef", 2);
  long long on_new = t_redis_int(&s[1], "EXISTS %s", ekey);
  long long lease_on_new = t_redis_int(&s[1], "EXISTS %s", lkey);
  ccache_tier_health h = be_health(&b);
  ccache__rcounters c = t_counters(&b);
  print_message(
      "subscriber seen %d; followed after %lld ms (old primary's role then: %s); renew "
      "(re-taken) %d, renew %d, put %d; on the new primary: entry %lld, lease %lld (deleted "
      "%lld); failovers %llu, leases re-taken %llu, lost %llu; io errors %llu, reply errors "
      "%llu; where \"%s\"\n",
      subscribed, took, old_role, rc3, rc4, put, on_new, lease_on_new, deleted,
      (unsigned long long)h.failovers, (unsigned long long)h.leases_retaken,
      (unsigned long long)h.leases_lost, (unsigned long long)c.io_errors,
      (unsigned long long)c.reply_errors, h.where);
  if (rr) freeReplyObject(rr);
  assert_true(took >= 0);
  assert_int_equal(deleted, 1);
  assert_int_equal(rc3, CCACHE_OK);
  assert_int_equal(rc4, CCACHE_OK);
  assert_int_equal(put, CCACHE_OK);
  assert_int_equal(on_new, 1);
  assert_int_equal(lease_on_new, 1);
  assert_int_equal(h.failovers, 1);
  assert_int_equal(h.leases_retaken, 1);
  assert_int_equal(h.leases_lost, 0);
  assert_int_equal(c.io_errors + c.reply_errors, 0);
  assert_int_equal(c.watch_events, 1);
  char want[48];
  snprintf(want, sizeof want, "mym (%s)", s[1].addr);
  assert_string_equal(h.where, want);
  b.ops.unlock(b.r, l3);
  b.ops.unlock(b.r, l4);
  assert_int_equal(t_redis_int(&s[1], "EXISTS %s", lkey), 0);
  t_be_close(&b);
}

/* The Sentinel's view changes with no +switch-master (its config edited:
 * REMOVE and MONITOR), and the old primary stays a master: the periodic
 * re-ask (set to 300 ms here) follows it, and the next publish lands on
 * the new primary with no error. */
static void redis_sentinel_reask_follows_a_silent_switch(void **state) {
  (void)state;
  t_need_redis();
  t_sentinel_trio();
  t_redis_server *s = t_servers;
  char spec[96];
  snprintf(spec, sizeof spec, "sentinel:%s/mym", s[2].addr);
  t_be b;
  t_be_open_simple(&b, spec);
  ccache__redis_pool(b.r)->reask_ms = 300;
  assert_int_equal(t_put_n(&b, 1, 32), CCACHE_OK); /* on s[0]; its connection pooled */
  redisReply *r = t_redis_cmd(&s[1], "REPLICAOF NO ONE");
  assert_non_null(r);
  freeReplyObject(r);
  r = t_redis_cmd(&s[2], "SENTINEL REMOVE mym");
  assert_non_null(r);
  freeReplyObject(r);
  r = t_redis_cmd(&s[2], "SENTINEL MONITOR mym 127.0.0.1 %d 1", s[1].port);
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_STATUS);
  freeReplyObject(r);
  long long took = wait_followed(&b, 1, 5000);
  int put = t_put_n(&b, 2, 32);
  char key[256];
  t_entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", 2);
  long long on_new = t_redis_int(&s[1], "EXISTS %s", key);
  long long on_old = t_redis_int(&s[0], "EXISTS %s", key);
  ccache__rcounters c = t_counters(&b);
  print_message(
      "followed after %lld ms; put %d: on the new primary %lld, on the old %lld; "
      "errors %llu\n",
      took, put, on_new, on_old,
      (unsigned long long)(c.io_errors + c.reply_errors + c.connect_failures));
  assert_true(took >= 0);
  assert_int_equal(put, CCACHE_OK);
  assert_int_equal(on_new, 1);
  assert_int_equal(on_old, 0);
  assert_int_equal(c.io_errors + c.reply_errors + c.connect_failures, 0);
  assert_int_equal(c.watch_events, 0); /* the re-ask, not a message */
  t_be_close(&b);
}

/* End to end, two caches as two processes would be: A compiles key 7 under
 * a 1.5 s lease; meanwhile an operator's SENTINEL FAILOVER; three lease
 * periods later A's lease is still on the new primary (renewed there), B
 * (opened after the switch) waits for it instead of compiling, and loads
 * what A published on the new primary.  Real time: the renewals run on
 * A's renewal thread. */
#define PF_LEASE_MS 1500
static void pf_sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}
static ccache *pf_b;
static int pf_b_id;
static long long pf_lease_on_new, pf_followed_ms;
static pthread_t pf_thread;
static int pf_thread_made; /* the main thread's alone */

static void *pf_b_main(void *arg) {
  (void)arg;
  pf_b_id = t_e2e_get(pf_b, 7);
  return NULL;
}

static int pf_compile(void *ud, ccache *c, ccache_key pkey, void **native_out, uint64_t *cost_out) {
  (void)ud, (void)c;
  t_redis_server *s = t_servers;
  unsigned long long deadline = t_redis_now_ms() + T_WAIT_MS;
  while (t_redis_int(&s[1], "DBSIZE") < 1 && t_redis_now_ms() < deadline) t_redis_poll_pause();
  deadline = t_redis_now_ms() + 3 * T_WAIT_MS;
  int started = 0;
  while (!started && t_redis_now_ms() < deadline) {
    redisReply *r = t_redis_cmd(&s[2], "SENTINEL FAILOVER mym");
    started = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    for (int i = 0; !started && i < 100; i++) t_redis_poll_pause();
  }
  unsigned long long t0 = t_redis_now_ms();
  while (t_sentinel_primary_port() != s[1].port && t_redis_now_ms() < deadline)
    t_redis_poll_pause();
  pf_followed_ms =
      started && t_sentinel_primary_port() == s[1].port ? (long long)(t_redis_now_ms() - t0) : -1;
  pf_sleep_ms(3 * PF_LEASE_MS); /* unrenewed there, the lease would have lapsed twice */
  char lkey[256];
  t_e2e_entry_key(lkey, sizeof lkey, T_E2E_TAG, 7);
  strcat(lkey, ":lease");
  pf_lease_on_new = t_redis_int(&s[1], "EXISTS %s", lkey);
  pf_thread_made = pthread_create(&pf_thread, NULL, pf_b_main, NULL) == 0;
  pf_sleep_ms(300); /* B finds the lease and waits */
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return 0;
}

static void redis_e2e_lease_held_across_a_planned_failover(void **state) {
  (void)state;
  t_need_redis();
  t_sentinel_trio();
  t_redis_server *s = t_servers;
  char spec[96];
  snprintf(spec, sizeof spec, "sentinel:%s/mym", s[2].addr);
  ccache_redis_options o;
  t_opts(&o, spec);
  o.lease_ms = PF_LEASE_MS;
  o.command_timeout_ms = 500;
  t_ctx ca = {0}, cb = {0};
  atomic_store(&t_e2e_compiles, 0);
  ccache *a = t_e2e_open(&ca, &o, T_E2E_TAG);
  pf_b = t_e2e_open(&cb, &o, T_E2E_TAG);
  pf_b_id = -1;
  pf_thread_made = 0;
  pf_lease_on_new = pf_followed_ms = -1;
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(a, PK(7), pf_compile, NULL, &p);
  if (rc == CCACHE_OK) ccache_program_release(a, p);
  if (pf_thread_made) pthread_join(pf_thread, NULL);
  char ekey[256];
  t_e2e_entry_key(ekey, sizeof ekey, T_E2E_TAG, 7);
  long long entry_on_new = t_redis_int(&s[1], "EXISTS %s", ekey);
  ccache_stats sa = t_stats(a), sb = t_stats(pf_b);
  print_message(
      "switch seen by the Sentinel after %lld ms; after 3 lease periods the lease on "
      "the new primary: %lld; B: id %d, compiles %llu, lock waits %llu; entry on the "
      "new primary %lld; A: leases lost %llu, tier errors %llu\n",
      pf_followed_ms, pf_lease_on_new, pf_b_id, (unsigned long long)atomic_load(&t_e2e_compiles),
      (unsigned long long)sb.tier_lock_waits, entry_on_new, (unsigned long long)sa.tier_leases_lost,
      (unsigned long long)sa.tier_errors);
  assert_int_equal(rc, CCACHE_OK);
  assert_true(pf_followed_ms >= 0);
  assert_int_equal(pf_lease_on_new, 1);
  assert_int_equal(pf_b_id, 7 + 100000); /* loaded, not compiled */
  assert_int_equal(atomic_load(&t_e2e_compiles), 0);
  assert_int_equal(entry_on_new, 1);
  assert_int_equal(sa.tier_leases_lost, 0);
  t_close(pf_b);
  t_close(a);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_planned_failover_is_followed, t_stop_all),
      cmocka_unit_test_teardown(redis_sentinel_reask_follows_a_silent_switch, t_stop_all),
  };
  /* Real-time tests (lease periods measured on the wall clock):
   * `test_tier_redis_sentinel_failover realtime` runs them (CTest label
   * realtime: plain and checked builds only, not under the sanitizers or
   * valgrind). */
  const struct CMUnitTest realtime[] = {
      cmocka_unit_test_teardown(redis_e2e_lease_held_across_a_planned_failover, t_stop_all),
  };
  if (argc > 1 && strcmp(argv[1], "realtime") == 0)
    return cmocka_run_group_tests_name("realtime", realtime, NULL, NULL);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
