/*
 * test_tier_redis_sentinel.c - the Redis tier in Sentinel mode: the spec's
 * validation, a primary killed (failover followed), a demoted primary
 * answering READONLY, and a Sentinel ACL user.  Each test starts its own
 * primary, replica and Sentinel (redis_support.c, redis_sentinel_support.c);
 * without them they skip, or fail when CCACHE_TEST_REQUIRE_REDIS=1.  An
 * operator's planned failover and the periodic re-ask are
 * test_tier_redis_sentinel_failover.c.
 *
 * The real-time case runs with the argument `realtime` (ctest
 * tier_redis_sentinel_realtime, label realtime).  SIGPIPE stays at its
 * default action for the whole run (set in main).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis_sentinel_support.h"
#include "redis_tier_support.h"

/* ------------------------------------------------------------ Sentinel */
static void redis_sentinel_spec_validation(void **state) {
  (void)state;
  static const char *const bad[] = {
      "sentinel:",
      "sentinel:127.0.0.1:26379",
      "sentinel:127.0.0.1:26379/",
      "sentinel:/mym",
      "sentinel:127.0.0.1:26379/a,a",
      "sentinel:127.0.0.1:26379/a b",
      "sentinel:127.0.0.1:26379/a/b",
      "sentinel:127.0.0.1:26379/a,",
      "sentinel:127.0.0.1/mym",
      "127.0.0.1:6379,sentinel:127.0.0.1:26379/mym",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ccache_redis_options o;
    t_opts(&o, bad[i]);
    ccache_tier_ops ops;
    ccache__redis *r = NULL;
    char why[256];
    if (ccache__redis_new(&o, &ops, &r, why, sizeof why) != CCACHE_EINVAL)
      fail_msg("accepted '%s'", bad[i]);
    assert_true(why[0] != '\0');
  }
  ccache_redis_options o;
  t_opts(&o, "sentinel:127.0.0.1:1,127.0.0.1:2/a,b");
  o.sentinel_user = "watcher";
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_redis(&o, &t), CCACHE_EINVAL); /* a user needs a password */
  o.sentinel_password = "pw";
  t_be b;
  t_be_open(&b, &o, T_NS);
  ccache__rpool *p = ccache__redis_pool(b.r);
  assert_int_equal(p->n, 2);
  assert_int_equal(p->n_sentinels, 2);
  assert_string_equal(p->servers[0].name, "a");
  assert_true(p->servers[0].sentinel && p->servers[1].sentinel);
  /* CLOSURE_CACHE_REDIS takes the same form (nothing listens: compiled). */
  t_run_env_child("sentinel:127.0.0.1:1/a", 1, 5, CCACHE_OK);
  t_run_env_child("sentinel:127.0.0.1:1", 1, 0, CCACHE_EINVAL);
  /* Nothing listens: no primary, tier errors only. */
  assert_int_equal(t_put_n(&b, 1, 10), CCACHE_EIO);
  assert_int_equal(t_get_check(&b, 1, 10), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&b), "Sentinel"));
  t_be_close(&b);
}

/* Entries (not leases) of the e2e namespace on s, counted with SCAN. */
static long long scan_entries(t_redis_server *s) {
  long long n = 0;
  char cursor[32] = "0";
  for (int round = 0; round < 100000; round++) {
    redisReply *r = t_redis_cmd(s, "SCAN %s MATCH ccache:* COUNT 100", cursor);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
    for (size_t i = 0; i < r->element[1]->elements; i++)
      n += strstr(r->element[1]->element[i]->str, ":lease") == NULL;
    freeReplyObject(r);
    if (strcmp(cursor, "0") == 0) break;
  }
  return n;
}

static ccache_tier_health part_health(ccache *c) {
  ccache_tier_health h;
  memset(&h, 0, sizeof h);
  h.size = sizeof h;
  assert_int_equal(ccache_tier_health_get(c, 0, 0, &h), CCACHE_OK);
  return h;
}

#define SENT_KEYS 12

/* The primary is killed mid-run: the run finishes with the right answers
 * (its keys compiled locally meanwhile); after the Sentinel's failover the
 * next run compiles exactly the keys missing on the promoted replica, and
 * the run after it compiles nothing. */
static void redis_sentinel_primary_killed_failover_followed(void **state) {
  (void)state;
  t_need_redis();
  t_sentinel_trio();
  t_redis_server *s = t_servers;
  char spec[96];
  snprintf(spec, sizeof spec, "sentinel:%s/mym", s[2].addr);
  ccache_redis_options o;
  t_opts(&o, spec);
  o.reconnect_min_ms = 10;
  o.reconnect_max_ms = 100;
  o.command_timeout_ms = 500;
  t_ctx ctx = {0};
  atomic_store(&t_e2e_compiles, 0);
  ccache *c1 = t_e2e_open(&ctx, &o, T_E2E_TAG);
  for (uint64_t k = 1; k <= SENT_KEYS / 2; k++) assert_int_equal(t_e2e_get(c1, k), (int)k);
  assert_int_equal(atomic_load(&t_e2e_compiles), SENT_KEYS / 2);
  t_redis_kill(&s[0]);
  for (uint64_t k = SENT_KEYS / 2 + 1; k <= SENT_KEYS; k++) {
    int id = t_e2e_get(c1, k);
    assert_true(id == (int)k || id == (int)k + 100000);
  }
  assert_int_equal(atomic_load(&t_e2e_compiles), SENT_KEYS);
  /* The failover: Sentinel names the replica, which is a primary now. */
  unsigned long long t0 = t_redis_now_ms(), deadline = t0 + 3 * T_WAIT_MS;
  while (t_sentinel_primary_port() != s[1].port && t_redis_now_ms() < deadline)
    t_redis_poll_pause();
  assert_int_equal(t_sentinel_primary_port(), s[1].port);
  int promoted = 0;
  while (!promoted && t_redis_now_ms() < deadline) {
    redisReply *r = t_redis_cmd(&s[1], "INFO replication");
    promoted = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "role:master");
    if (r) freeReplyObject(r);
    if (!promoted) t_redis_poll_pause();
  }
  assert_true(promoted);
  long long present = scan_entries(&s[1]);
  print_message("failover after %llu ms; %lld of %d entries on the promoted replica\n",
                t_redis_now_ms() - t0, present, SENT_KEYS);
  assert_true(present >= 0 && present <= SENT_KEYS / 2); /* only run 1's first half was stored */
  t_ctx ctx2 = {0};
  atomic_store(&t_e2e_compiles, 0);
  ccache *c2 = t_e2e_open(&ctx2, &o, T_E2E_TAG);
  for (uint64_t k = 1; k <= SENT_KEYS; k++) {
    int id = t_e2e_get(c2, k);
    assert_true(id == (int)k || id == (int)k + 100000);
  }
  print_message("run 2: %llu compiles\n", (unsigned long long)atomic_load(&t_e2e_compiles));
  assert_int_equal(atomic_load(&t_e2e_compiles), SENT_KEYS - present);
  assert_int_equal(t_stats(c2).tier_errors, 0);
  t_close(c2);
  t_ctx ctx3 = {0};
  atomic_store(&t_e2e_compiles, 0);
  ccache *c3 = t_e2e_open(&ctx3, &o, T_E2E_TAG);
  for (uint64_t k = 1; k <= SENT_KEYS; k++) assert_int_equal(t_e2e_get(c3, k), (int)k + 100000);
  assert_int_equal(atomic_load(&t_e2e_compiles), 0);
  t_close(c3);
  /* The first cache follows too, once its backoff allows a connect. */
  deadline = t_redis_now_ms() + T_WAIT_MS;
  int id = -1;
  while (t_redis_now_ms() < deadline) {
    id = t_e2e_get(c1, 1000 + (uint64_t)(t_redis_now_ms() % 100000));
    if (part_health(c1).failovers == 1 && part_health(c1).status == CCACHE_TIER_UP) break;
    t_redis_poll_pause();
  }
  ccache_tier_health h = part_health(c1);
  print_message("first cache: where \"%s\", failovers %llu\n", h.where,
                (unsigned long long)h.failovers);
  assert_int_equal(h.failovers, 1);
  char want[48];
  snprintf(want, sizeof want, "mym (%s)", s[1].addr);
  assert_string_equal(h.where, want);
  (void)id;
  t_close(c1);
}

/* The primary is demoted live (REPLICAOF) while the tier holds a pooled
 * connection to it: the write on that connection answers -READONLY (a
 * tier error), the tier asks the Sentinel again, and the next write goes
 * to the new primary, with no backoff. */
static void redis_sentinel_demoted_primary_readonly_followed(void **state) {
  (void)state;
  t_need_redis();
  t_sentinel_trio();
  t_redis_server *s = t_servers;
  char spec[96];
  snprintf(spec, sizeof spec, "sentinel:%s/mym", s[2].addr);
  t_be b;
  t_be_open_simple(&b, spec);
  assert_int_equal(t_put_n(&b, 1, 32), CCACHE_OK); /* on the primary; its connection pooled */
  assert_int_equal(t_counters(&b).connects, 1);
  /* Swap the roles by hand, and tell the Sentinel. */
  redisReply *r = t_redis_cmd(&s[1], "REPLICAOF NO ONE");
  assert_non_null(r);
  freeReplyObject(r);
  r = t_redis_cmd(&s[0], "REPLICAOF 127.0.0.1 %d", s[1].port);
  assert_non_null(r);
  freeReplyObject(r);
  r = t_redis_cmd(&s[2], "SENTINEL REMOVE mym");
  assert_non_null(r);
  freeReplyObject(r);
  r = t_redis_cmd(&s[2], "SENTINEL MONITOR mym 127.0.0.1 %d 1", s[1].port);
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_STATUS);
  freeReplyObject(r);
  assert_int_equal(t_sentinel_primary_port(), s[1].port);
  assert_int_equal(t_put_n(&b, 2, 32), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&b), "READONLY"));
  ccache__rcounters c = t_counters(&b);
  assert_int_equal(c.reply_errors, 1);
  assert_int_equal(c.io_errors + c.connect_failures, 0);
  assert_int_equal(t_put_n(&b, 2, 32), CCACHE_OK); /* followed at once: no backoff */
  char key[256];
  t_entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", 2);
  assert_int_equal(t_redis_int(&s[1], "EXISTS %s", key), 1);
  assert_int_equal(t_counters(&b).connects, 2);
  ccache__rserver *sv = &ccache__redis_pool(b.r)->servers[0];
  assert_int_equal(atomic_load(&sv->failovers), 1);
  assert_int_equal(t_get_check(&b, 2, 32), CCACHE_OK);
  t_be_close(&b);
}

/* The Sentinel's own ACL user, limited to exactly what the tier sends it
 * (the header's line): the primary is found; a wrong password is a tier
 * error naming AUTH, never a failed call. */
static void redis_sentinel_acl_user(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = t_servers;
  t_must_start(&s[0], NULL);
  snprintf(t_sentinel_conf, sizeof t_sentinel_conf,
           "bind 127.0.0.1\n"
           "user default off\n"
           "user watcher on >pw +sentinel|get-master-addr-by-name\n"
           "user admin on >adm +@all\n"
           "sentinel monitor mym 127.0.0.1 %d 1\n",
           s[0].port);
  s[2].admin_user = "admin";
  s[2].admin_pass = "adm";
  assert_int_equal(t_redis_start_sentinel(&s[2], t_sentinel_conf), 0);
  char spec[96];
  snprintf(spec, sizeof spec, "sentinel:%s/mym", s[2].addr);
  ccache_redis_options o;
  t_opts(&o, spec);
  o.sentinel_user = "watcher";
  o.sentinel_password = "pw";
  t_be b;
  t_be_open(&b, &o, T_NS);
  assert_int_equal(t_put_n(&b, 1, 32), CCACHE_OK);
  assert_int_equal(t_get_check(&b, 1, 32), CCACHE_OK);
  t_be_close(&b);
  o.sentinel_password = "wrong";
  t_be_open(&b, &o, T_NS);
  assert_int_equal(t_get_check(&b, 1, 32), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&b), "AUTH"));
  t_be_close(&b);
  s[2].admin_user = s[2].admin_pass = NULL;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  /* The spec test first: its CLOSURE_CACHE_REDIS children must not reuse a
   * stack cached from this process's threads (see test_tier_redis_cache.c). */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_sentinel_spec_validation, t_stop_all),
      cmocka_unit_test_teardown(redis_sentinel_demoted_primary_readonly_followed, t_stop_all),
      cmocka_unit_test_teardown(redis_sentinel_acl_user, t_stop_all),
  };
  /* Real-time fault tests (SIGSTOP, timeouts measured on the wall clock):
   * `test_tier_redis_sentinel realtime` runs them (CTest label realtime: plain
   * and checked builds only, not under the sanitizers or valgrind). */
  const struct CMUnitTest realtime[] = {
      cmocka_unit_test_teardown(redis_sentinel_primary_killed_failover_followed, t_stop_all),
  };
  if (argc > 1 && strcmp(argv[1], "realtime") == 0)
    return cmocka_run_group_tests_name("realtime", realtime, NULL, NULL);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
