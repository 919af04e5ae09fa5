/*
 * test_tier_redis_backend.c - the Redis tier's backend through its ops
 * table, as the tier core calls it, against real redis-server processes
 * that each test starts and stops (redis_support.c): options and their
 * validation, the round trip, keys and namespaces, entry TTLs, the compile
 * lease, several servers (rendezvous), AUTH and ACL users, and concurrent
 * misses on a shared pool.  Without redis-server every test skips with a
 * message, or fails when CCACHE_TEST_REQUIRE_REDIS=1.
 *
 * SIGPIPE stays at its default action for the whole run (set in main), so a
 * write to a reset connection that the library failed to guard kills the
 * test.
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

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

/* ------------------------------------------------------ several servers */

static void redis_rendezvous_spread_and_one_down(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = t_servers;
  for (int i = 0; i < 3; i++) t_must_start(&s[i], NULL);
  char list[800], reversed[800], two[800];
  snprintf(list, sizeof list, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  snprintf(reversed, sizeof reversed, "%.31s,%.31s,%.31s", s[2].addr, s[1].addr, s[0].addr);
  snprintf(two, sizeof two, "%.31s,%.31s", s[1].addr, s[0].addr);
  t_be b, rev, b2;
  t_be_open_simple(&b, list);
  t_be_open_simple(&rev, reversed);
  t_be_open_simple(&b2, two);
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) assert_int_equal(t_put_n(&b, k, 32), CCACHE_OK);
  long long size[3], total = 0;
  for (int i = 0; i < 3; i++) {
    size[i] = t_redis_int(&s[i], "DBSIZE");
    total += size[i];
    /* Binomial(300, 1/3): mean 100, sd 8.2; +-40 is ~5 sd. */
    assert_true(size[i] >= 60 && size[i] <= 140);
  }
  assert_int_equal(total, T_SPREAD_KEYS);
  /* Every key is where server_of says, and only there; the reversed list
   * (another process's view) reads every key; the list without s[2] maps
   * every key of s[0] and s[1] to the same server (only s[2]'s share moves). */
  int moved = 0;
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) {
    size_t at = ccache__redis_server_of(b.r, PK(k));
    char key[256];
    t_entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", k);
    for (size_t i = 0; i < 3; i++) assert_int_equal(t_redis_int(&s[i], "EXISTS %s", key), i == at);
    assert_int_equal(t_get_check(&rev, k, 32), CCACHE_OK);
    size_t at2 = ccache__redis_server_of(b2.r, PK(k));
    const char *name2 = at2 == 0 ? s[1].addr : s[0].addr;
    if (at == 2)
      moved++;
    else
      assert_string_equal(name2, s[at].addr);
  }
  assert_int_equal(moved, size[2]);

  /* s[1] goes down: only its share is lost (misses on the fallback
   * servers, which answer), the rest hits where it was. */
  t_redis_kill(&s[1]);
  int ok = 0, err = 0, miss = 0;
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) {
    int rc = t_get_check(&b, k, 32);
    ok += rc == CCACHE_OK;
    err += rc == CCACHE_EIO;
    miss += rc == CCACHE_MISS;
  }
  assert_int_equal(ok, size[0] + size[2]);
  assert_int_equal(err, 0);
  assert_int_equal(miss, size[1]);
  ccache__rcounters c = t_counters(&b);
  /* Each failed get: a refused connect (the first after the dead pooled
   * connection was seen closed and dropped), or a skip during the backoff. */
  assert_int_equal(c.io_errors + c.connect_failures + c.refused_backoff, size[1]);
  assert_int_equal(c.io_errors, 0);
  assert_int_equal(c.idle_closed, 1);
  t_be_close(&b);
  t_be_close(&rev);
  t_be_close(&b2);
  for (int i = 0; i < 3; i++) t_redis_stop(&s[i]);
}

/* ---------------------------------------------------------------- auth */
static void redis_auth_password(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  static const char *const args[] = {"--requirepass", "s3cret-pw", NULL};
  t_must_start(s, args);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  t_be none, wrong, good;
  t_be_open(&none, &o, T_NS);
  o.password = "wrong";
  t_be_open(&wrong, &o, T_NS);
  o.password = "s3cret-pw";
  t_be_open(&good, &o, T_NS);
  assert_int_equal(t_put_n(&good, 1, 100), CCACHE_OK);
  assert_int_equal(t_get_check(&good, 1, 100), CCACHE_OK);
  assert_int_equal(t_counters(&good).connects, 1);
  /* Without a password the server answers NOAUTH: a reply error, the
   * connection stays. */
  assert_int_equal(t_get_check(&none, 1, 100), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&none), "NOAUTH"));
  assert_int_equal(t_counters(&none).reply_errors, 1);
  assert_int_equal(t_counters(&none).io_errors, 0);
  /* A wrong password fails the connection's AUTH. */
  assert_int_equal(t_get_check(&wrong, 1, 100), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&wrong), "AUTH"));
  assert_non_null(strstr(t_last_error(&wrong), "WRONGPASS"));
  assert_int_equal(t_counters(&wrong).connect_failures, 1);
  assert_int_equal(t_counters(&wrong).connects, 0);
  t_be_close(&none);
  t_be_close(&wrong);
  t_be_close(&good);
  t_redis_stop(s);
}

static void redis_auth_acl_user(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  memset(s, 0, sizeof *s);
  s->admin_user = "alice";
  s->admin_pass = "wonderland";
  /* Each word a separate argument: redis-server joins them into the
   * config line "user alice on >wonderland ~* +@all". */
  static const char *const args[] = {
      "--user", "alice", "on", ">wonderland", "~*", "+@all", "--user", "default", "off",
      /* the least a tier needs, as documented */
      "--user", "ccache", "on", ">tier-pw", "~ccache:*", "+get", "+set", "+del", "+eval",
      "+pexpire", "+strlen", "+getrange", "+pttl", NULL};
  t_must_start(s, args);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  o.user = "alice";
  o.password = "wonderland";
  t_be alice, bad, anon;
  t_be_open(&alice, &o, T_NS);
  o.password = "rabbit-hole";
  t_be_open(&bad, &o, T_NS);
  o.user = NULL;
  o.password = NULL;
  t_be_open(&anon, &o, T_NS);
  assert_int_equal(t_put_n(&alice, 4, 1000), CCACHE_OK);
  assert_int_equal(t_get_check(&alice, 4, 1000), CCACHE_OK);
  void *l = NULL;
  assert_int_equal(alice.ops.lock(alice.r, PK(4), &l), CCACHE_OK);
  assert_int_equal(alice.ops.renew(alice.r, l), CCACHE_OK);
  alice.ops.unlock(alice.r, l);
  assert_int_equal(t_counters(&alice).connects, 2); /* pool + renewal */
  assert_int_equal(t_get_check(&bad, 4, 1000), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&bad), "WRONGPASS"));
  assert_int_equal(t_counters(&bad).connect_failures, 1);
  /* The minimal ACL of the header's example runs every op. */
  o.user = "ccache";
  o.password = "tier-pw";
  o.entry_ttl_ms = 3600000; /* SET ... PX as well */
  t_be least;
  t_be_open(&least, &o, T_NS);
  assert_int_equal(t_put_n(&least, 8, 100), CCACHE_OK);
  assert_int_equal(t_get_check(&least, 8, 100), CCACHE_OK);
  assert_int_equal(least.ops.lock(least.r, PK(8), &l), CCACHE_OK);
  assert_int_equal(least.ops.renew(least.r, l), CCACHE_OK);
  least.ops.unlock(least.r, l);
  unsigned char *p8 = t_payload(8, 100), *p9 = t_payload(9, 100);
  /* The remove-if script, both ways: not the value read (kept), then it. */
  assert_int_equal(least.ops.remove_if(least.r, PK(8), p9, 100), CCACHE_MISS);
  assert_int_equal(least.ops.remove_if(least.r, PK(8), p8, 100), CCACHE_OK);
  free(p8);
  free(p9);
  assert_int_equal(t_redis_int(s, "DBSIZE"), 1); /* alice's entry only: lease and entry 8 gone */
  ccache__rcounters lc = t_counters(&least);
  assert_int_equal(lc.reply_errors + lc.io_errors + lc.connect_failures, 0);
  t_be_close(&least);
  /* Outside its key pattern it is refused (a reply error). */
  o.prefix = "other";
  t_be_open(&least, &o, T_NS);
  assert_int_equal(t_put_n(&least, 8, 100), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&least), "NOPERM"));
  t_be_close(&least);
  /* The default user is off: no access without credentials. */
  assert_int_equal(t_get_check(&anon, 4, 1000), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&anon), "NOAUTH"));
  t_be_close(&alice);
  t_be_close(&bad);
  t_be_close(&anon);
  t_redis_stop(s);
}

/* ------------------------------------------------------- concurrency */
static _Thread_local int block_here;
typedef struct hold {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int blocked, release;
} hold;
static hold the_hold = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void hold_hook(void *arg, size_t server, const char *cmd) {
  (void)server, (void)cmd;
  hold *h = arg;
  if (!block_here) return;
  pthread_mutex_lock(&h->mu);
  h->blocked = 1;
  pthread_cond_broadcast(&h->cv);
  while (!h->release) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
}

static void *blocked_get_main(void *arg) {
  block_here = 1;
  return t_async_get_main(arg);
}

/* A miss on one thread holds its connection (here: parked inside the
 * command); a miss on another thread does not wait for it. */
static void redis_concurrent_misses_do_not_queue(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_be b;
  t_be_open_simple(&b, s->addr);
  assert_int_equal(t_put_n(&b, 1, 100), CCACHE_OK);
  assert_int_equal(t_put_n(&b, 2, 200), CCACHE_OK);
  assert_int_equal(t_counters(&b).connects, 1);
  hold *h = &the_hold;
  h->blocked = h->release = 0;
  ccache__redis_set_hook(b.r, hold_hook, h);
  t_async_get a, c;
  pthread_t ta, tc;
  memset(&a, 0, sizeof a);
  a.b = &b, a.n = 1, a.len = 100;
  pthread_mutex_init(&a.mu, NULL);
  pthread_cond_init(&a.cv, NULL);
  assert_int_equal(pthread_create(&ta, NULL, blocked_get_main, &a), 0);
  pthread_mutex_lock(&h->mu);
  unsigned long long deadline = t_redis_now_ms() + T_WAIT_MS;
  while (!h->blocked && t_redis_now_ms() < deadline) {
    pthread_mutex_unlock(&h->mu);
    t_redis_poll_pause();
    pthread_mutex_lock(&h->mu);
  }
  int blocked = h->blocked;
  pthread_mutex_unlock(&h->mu);
  t_async_start(&c, &tc, &b, 2, 200);
  int c_done = t_async_wait(&c, T_WAIT_MS);
  pthread_mutex_lock(&h->mu);
  h->release = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  pthread_join(ta, NULL);
  pthread_join(tc, NULL);
  ccache__redis_set_hook(b.r, NULL, NULL);
  assert_true(blocked);
  assert_true(c_done); /* finished while the other thread held its connection */
  assert_int_equal(a.rc, CCACHE_OK);
  assert_int_equal(c.rc, CCACHE_OK);
  assert_int_equal(t_counters(&b).connects, 2);
  t_be_close(&b);
  t_redis_stop(s);
}

/* A fork child never touches the parent's connections. */
static void redis_fork_child_refuses(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_be b;
  t_be_open_simple(&b, s->addr);
  assert_int_equal(t_put_n(&b, 1, 100), CCACHE_OK);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int rc = t_put_n(&b, 2, 100);
    void *blob;
    size_t len;
    int rc2 = b.ops.get(b.r, PK(1), &blob, &len);
    t_be_close(&b); /* frees the child's copy; the parent's sockets stay open */
    t_child_exit(rc == CCACHE_EFORKED && rc2 == CCACHE_EFORKED ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(t_get_check(&b, 1, 100), CCACHE_OK);
  assert_int_equal(t_get_check(&b, 2, 100), CCACHE_MISS);
  ccache__rcounters c = t_counters(&b);
  assert_int_equal(c.connects, 1);
  assert_int_equal(c.io_errors + c.reply_errors, 0);
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
      cmocka_unit_test_teardown(redis_rendezvous_spread_and_one_down, t_stop_all),
      cmocka_unit_test_teardown(redis_auth_password, t_stop_all),
      cmocka_unit_test_teardown(redis_auth_acl_user, t_stop_all),
      cmocka_unit_test_teardown(redis_concurrent_misses_do_not_queue, t_stop_all),
      cmocka_unit_test_teardown(redis_fork_child_refuses, t_stop_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
