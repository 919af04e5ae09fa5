/*
 * test_tier_redis_backend.c - the Redis tier's backend through its ops
 * table, as the tier core calls it, against real redis-server processes
 * that each test starts and stops (redis_support.c): options and their
 * validation, the round trip, keys and namespaces, entry TTLs, and the
 * compile lease.  Without redis-server every test skips with a message, or
 * fails when CCACHE_TEST_REQUIRE_REDIS=1.  Several servers, AUTH and ACL
 * users, concurrent misses and a fork child are
 * test_tier_redis_backend_pool.c.
 *
 * SIGPIPE stays at its default action for the whole run (set in main), so a
 * write to a reset connection that the library failed to guard kills the
 * test.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_tier_support.h"

/* -------------------------------------------------------------- options */
static void redis_options_defaults_and_validation(void **state) {
  (void)state;
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  assert_int_equal(o.size, sizeof o);
  assert_null(o.servers);
  assert_string_equal(o.prefix, "ccache");
  assert_null(o.user);
  assert_null(o.password);
  assert_int_equal(o.connect_timeout_ms, 200);
  assert_int_equal(o.command_timeout_ms, 1000);
  assert_true(o.entry_ttl_ms == CCACHE_UNBOUNDED);
  assert_int_equal(o.lease_ms, 10000);
  assert_int_equal(o.poll_ms, 5);
  assert_int_equal(o.poll_max_ms, 200);
  assert_int_equal(o.wait_ms, 120000);
  assert_int_equal(o.reconnect_min_ms, 100);
  assert_int_equal(o.reconnect_max_ms, 5000);

  ccache_tier_ops ops;
  ccache__redis *r = NULL;
  char why[256];
  /* Each bad field alone is EINVAL with a reason; nothing is connected. */
  static const char *bad_lists[] = {
      NULL,   "",         "127.0.0.1", "127.0.0.1:0", "host:65536",    ":6379",   "a:1,,b:2",
      "a:1,", "::1:6379", "[::1]6379", "unix:",       "unix:rel/path", "a:1,a:1", "a:12x"};
  for (size_t i = 0; i < sizeof bad_lists / sizeof bad_lists[0]; i++) {
    t_opts(&o, bad_lists[i]);
    why[0] = '\0';
    assert_int_equal(ccache__redis_new(&o, &ops, &r, why, sizeof why), CCACHE_EINVAL);
    assert_true(why[0] != '\0');
  }
  int n_bad = 0;
#define BAD(stmt)                                                                      \
  do {                                                                                 \
    t_opts(&o, "127.0.0.1:1");                                                         \
    stmt;                                                                              \
    assert_int_equal(ccache__redis_new(&o, &ops, &r, why, sizeof why), CCACHE_EINVAL); \
    n_bad++;                                                                           \
  } while (0)
  BAD(o.size = 8);
  BAD(o.prefix = "");
  BAD(o.user = "alice");
  BAD(o.connect_timeout_ms = 0);
  BAD(o.command_timeout_ms = 0);
  BAD(o.entry_ttl_ms = 0);
  BAD(o.lease_ms = 2);
  BAD(o.poll_ms = 0);
  BAD((o.poll_ms = 10, o.poll_max_ms = 9));
  BAD(o.reconnect_min_ms = 0);
  BAD((o.reconnect_min_ms = 10, o.reconnect_max_ms = 9));
#undef BAD
  assert_int_equal(n_bad, 11);
  /* The public call says why, in the thread's error detail. */
  t_opts(&o, "127.0.0.1:6379,bad-entry");
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_redis(&o, &t), CCACHE_EINVAL);
  assert_null(t);
  assert_non_null(strstr(ccache_error_detail(), "'bad-entry'"));
  t_opts(&o, "127.0.0.1:6379");
  o.user = "alice";
  assert_int_equal(ccache_tier_redis(&o, &t), CCACHE_EINVAL);
  assert_non_null(strstr(ccache_error_detail(), "password"));
  assert_int_equal(ccache_tier_redis(NULL, &t), CCACHE_EINVAL);
  assert_int_equal(ccache_tier_redis(&o, NULL), CCACHE_EINVAL);
  o.user = NULL;
  o.prefix = NULL; /* the default prefix */
  assert_int_equal(ccache_tier_redis(&o, &t), CCACHE_OK);
  ccache_tier_free(t);
  /* Good lists: parsed, no connection made (nothing listens on port 1). */
  static const char *good[] = {"127.0.0.1:1", "[::1]:1,127.0.0.1:2", "unix:/nonexistent/x.sock",
                               "localhost:65535"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    t_opts(&o, good[i]);
    assert_int_equal(ccache__redis_new(&o, &ops, &r, why, sizeof why), CCACHE_OK);
    assert_string_equal(ops.name, "redis");
    assert_int_equal(ops.lease_ms, 10000);
    assert_int_equal(ops.poll_ms, 5);
    assert_int_equal(ops.poll_max_ms, 200);
    assert_int_equal(ops.wait_ms, 120000);
    ccache__rcounters c;
    ccache__rpool_counters(ccache__redis_pool(r), &c);
    assert_int_equal(c.connects + c.connect_failures, 0);
    ops.close(r);
  }
}

/* ---------------------------------------------------------- round trip */
static void redis_round_trip(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_be b;
  t_be_open_simple(&b, s->addr);
  static const size_t sizes[] = {0, 1, 4096, 1 << 20};
  for (uint64_t i = 0; i < 4; i++) assert_int_equal(t_put_n(&b, i, sizes[i]), CCACHE_OK);
  /* An empty value reads as no entry (the core never stores one; the
   * bounded lookup cannot tell it from a missing key). */
  assert_int_equal(t_get_check(&b, 0, 0), CCACHE_MISS);
  for (uint64_t i = 1; i < 4; i++) assert_int_equal(t_get_check(&b, i, sizes[i]), CCACHE_OK);
  assert_int_equal(t_get_check(&b, 99, 0), CCACHE_MISS);
  /* Replace. */
  assert_int_equal(t_put_n(&b, 2, 100), CCACHE_OK);
  assert_int_equal(t_get_check(&b, 2, 100), CCACHE_OK);
  unsigned char *p2 = t_payload(2, 100);
  assert_null(b.ops.remove); /* only the conditional remove is sent */
  assert_int_equal(b.ops.remove_if(b.r, PK(2), p2, 100), CCACHE_OK);
  assert_int_equal(b.ops.remove_if(b.r, PK(2), p2, 100), CCACHE_MISS);
  free(p2);
  assert_int_equal(t_get_check(&b, 2, 100), CCACHE_MISS);
  assert_int_equal(t_redis_int(s, "DBSIZE"), 3);
  /* One thread, one pooled connection for all 15 commands. */
  ccache__rcounters c = t_counters(&b);
  assert_int_equal(c.connects, 1);
  assert_int_equal(c.connect_failures + c.io_errors + c.reply_errors + c.refused_backoff, 0);
  t_be_close(&b);

  /* The same over the unix socket. */
  t_be_open_simple(&b, s->unix_addr);
  assert_int_equal(t_get_check(&b, 3, sizes[3]), CCACHE_OK);
  assert_int_equal(t_counters(&b).connects, 1);
  t_be_close(&b);
  t_redis_stop(s);
}

/* ------------------------------------------------- keys and namespaces */
static void redis_key_prefix_and_namespace(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  o.prefix = "myapp";
  t_be a, other_prefix, other_ns, no_ns;
  t_be_open(&a, &o, T_NS);
  t_be_open(&no_ns, &o, NULL);
  t_be_open(&other_ns, &o, "v1/fedcba9876543210");
  o.prefix = "other";
  t_be_open(&other_prefix, &o, T_NS);

  assert_int_equal(t_put_n(&a, 7, 64), CCACHE_OK);
  char key[256];
  t_entry_key(key, sizeof key, "myapp", "v1:0123456789abcdef", 7);
  assert_int_equal(t_redis_int(s, "EXISTS %s", key), 1);
  char mine[256];
  assert_int_equal(ccache__redis_key(a.r, PK(7), 0, mine, sizeof mine), strlen(key));
  assert_string_equal(mine, key);
  assert_int_equal(t_redis_int(s, "DBSIZE"), 1);
  /* Another prefix or another runtime tag hash never sees it. */
  assert_int_equal(t_get_check(&other_prefix, 7, 64), CCACHE_MISS);
  assert_int_equal(t_get_check(&other_ns, 7, 64), CCACHE_MISS);
  assert_int_equal(t_get_check(&no_ns, 7, 64), CCACHE_MISS);
  assert_int_equal(t_get_check(&a, 7, 64), CCACHE_OK);
  /* Without a namespace: <prefix>:<hex>. */
  assert_int_equal(t_put_n(&no_ns, 7, 64), CCACHE_OK);
  t_entry_key(key, sizeof key, "myapp", NULL, 7);
  assert_int_equal(t_redis_int(s, "EXISTS %s", key), 1);
  assert_int_equal(t_redis_int(s, "DBSIZE"), 2);
  /* The lease lives beside the entry: <entry key>:lease. */
  void *lock = NULL;
  assert_int_equal(a.ops.lock(a.r, PK(7), &lock), CCACHE_OK);
  t_entry_key(key, sizeof key, "myapp", "v1:0123456789abcdef", 7);
  strcat(key, ":lease");
  char *tok = t_reply_str(s, "GET %s", key);
  assert_non_null(tok);
  assert_string_equal(tok, ccache__redis_lock_token(lock));
  free(tok);
  a.ops.unlock(a.r, lock);
  assert_int_equal(t_redis_int(s, "EXISTS %s", key), 0);
  t_be_close(&a);
  t_be_close(&no_ns);
  t_be_close(&other_ns);
  t_be_close(&other_prefix);
  t_redis_stop(s);
}

static void redis_entry_ttl(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  t_be forever, ttl;
  t_be_open(&forever, &o, T_NS);
  o.entry_ttl_ms = 600000;
  t_be_open(&ttl, &o, T_NS);
  assert_int_equal(t_put_n(&forever, 1, 10), CCACHE_OK);
  assert_int_equal(t_put_n(&ttl, 2, 10), CCACHE_OK);
  char key[256];
  t_entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", 1);
  assert_int_equal(t_redis_int(s, "PTTL %s", key), -1);
  t_entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", 2);
  long long pttl = t_redis_int(s, "PTTL %s", key);
  assert_true(pttl > 600000 - (long long)T_WAIT_MS && pttl <= 600000);
  t_be_close(&forever);
  t_be_close(&ttl);
  t_redis_stop(s);
}

/* --------------------------------------------------------------- lease */
static void lease_key(char *buf, size_t len, uint64_t n) {
  t_entry_key(buf, len, "ccache", "v1:0123456789abcdef", n);
  strcat(buf, ":lease");
}

static void redis_lease_taken_held_released(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  o.lease_ms = 30000;
  t_be a, b;
  t_be_open(&a, &o, T_NS);
  t_be_open(&b, &o, T_NS);
  char key[256];
  lease_key(key, sizeof key, 5);
  void *la = NULL, *lb = NULL;
  assert_int_equal(a.ops.lock(a.r, PK(5), &la), CCACHE_OK);
  long long pttl = t_redis_int(s, "PTTL %s", key);
  assert_true(pttl > 30000 - (long long)T_WAIT_MS && pttl <= 30000);
  /* Held: another process, and this one, get EBUSY. */
  assert_int_equal(b.ops.lock(b.r, PK(5), &lb), CCACHE_EBUSY);
  assert_null(lb);
  void *again = NULL;
  assert_int_equal(a.ops.lock(a.r, PK(5), &again), CCACHE_EBUSY);
  /* Another key is independent. */
  assert_int_equal(b.ops.lock(b.r, PK(6), &lb), CCACHE_OK);
  b.ops.unlock(b.r, lb);
  /* Released: gone, and b takes it. */
  a.ops.unlock(a.r, la);
  assert_int_equal(t_redis_int(s, "EXISTS %s", key), 0);
  assert_int_equal(b.ops.lock(b.r, PK(5), &lb), CCACHE_OK);
  /* Tokens differ between holders. */
  char *tok = t_reply_str(s, "GET %s", key);
  assert_non_null(tok);
  assert_string_equal(tok, ccache__redis_lock_token(lb));
  assert_int_equal(strlen(tok), 32);
  free(tok);
  b.ops.unlock(b.r, lb);
  b.ops.unlock(b.r, NULL); /* no-op */
  assert_int_equal(t_redis_int(s, "DBSIZE"), 0);
  t_be_close(&a);
  t_be_close(&b);
  t_redis_stop(s);
}

static void redis_lease_renewed(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  o.lease_ms = 40000;
  t_be a;
  t_be_open(&a, &o, T_NS);
  char key[256];
  lease_key(key, sizeof key, 9);
  void *l = NULL;
  assert_int_equal(a.ops.lock(a.r, PK(9), &l), CCACHE_OK);
  /* Let the lease run down (as time would), then renew: back to lease_ms. */
  for (int round = 0; round < 3; round++) {
    assert_int_equal(t_redis_int(s, "PEXPIRE %s 500", key), 1);
    assert_true(t_redis_int(s, "PTTL %s", key) <= 500);
    assert_int_equal(a.ops.renew(a.r, l), CCACHE_OK);
    long long pttl = t_redis_int(s, "PTTL %s", key);
    assert_true(pttl > 40000 - (long long)T_WAIT_MS && pttl <= 40000);
  }
  /* The renewal uses the server's own connection, not the pool: the lock
   * made the pooled one, the first renew one more, later ones none. */
  assert_int_equal(t_counters(&a).connects, 2);
  assert_int_equal(t_get_check(&a, 9, 0), CCACHE_MISS); /* pooled, idle: reused */
  assert_int_equal(t_counters(&a).connects, 2);
  a.ops.unlock(a.r, l);
  assert_int_equal(t_redis_int(s, "EXISTS %s", key), 0);
  t_be_close(&a);
  t_redis_stop(s);
}

/* A holder whose lease expired can neither extend nor delete the lease a
 * second holder took meanwhile. */
static void redis_lease_token_checked(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  o.lease_ms = 30000;
  t_be a, b;
  t_be_open(&a, &o, T_NS);
  t_be_open(&b, &o, T_NS);
  char key[256];
  lease_key(key, sizeof key, 3);
  void *la = NULL, *lb = NULL;
  assert_int_equal(a.ops.lock(a.r, PK(3), &la), CCACHE_OK);
  assert_int_equal(t_redis_int(s, "DEL %s", key), 1); /* a's lease expires */
  assert_int_equal(b.ops.lock(b.r, PK(3), &lb), CCACHE_OK);
  assert_int_equal(t_redis_int(s, "PEXPIRE %s 20000", key), 1);
  /* The stale holder: renew refused, and the TTL untouched. */
  assert_int_equal(a.ops.renew(a.r, la), CCACHE_EBUSY);
  assert_true(t_redis_int(s, "PTTL %s", key) <= 20000);
  /* The stale holder's release leaves b's lease in place. */
  a.ops.unlock(a.r, la);
  char *tok = t_reply_str(s, "GET %s", key);
  assert_non_null(tok);
  assert_string_equal(tok, ccache__redis_lock_token(lb));
  free(tok);
  assert_int_equal(b.ops.renew(b.r, lb), CCACHE_OK);
  assert_true(t_redis_int(s, "PTTL %s", key) > 20000);
  b.ops.unlock(b.r, lb);
  assert_int_equal(t_redis_int(s, "EXISTS %s", key), 0);
  /* A renew after the lease vanished is refused too. */
  assert_int_equal(a.ops.lock(a.r, PK(3), &la), CCACHE_OK);
  assert_int_equal(t_redis_int(s, "DEL %s", key), 1);
  assert_int_equal(a.ops.renew(a.r, la), CCACHE_EBUSY);
  assert_int_equal(t_redis_int(s, "EXISTS %s", key), 0);
  a.ops.unlock(a.r, la);
  t_be_close(&a);
  t_be_close(&b);
  t_redis_stop(s);
}

int main(void) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_options_defaults_and_validation, t_stop_all),
      cmocka_unit_test_teardown(redis_round_trip, t_stop_all),
      cmocka_unit_test_teardown(redis_key_prefix_and_namespace, t_stop_all),
      cmocka_unit_test_teardown(redis_entry_ttl, t_stop_all),
      cmocka_unit_test_teardown(redis_lease_taken_held_released, t_stop_all),
      cmocka_unit_test_teardown(redis_lease_renewed, t_stop_all),
      cmocka_unit_test_teardown(redis_lease_token_checked, t_stop_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
