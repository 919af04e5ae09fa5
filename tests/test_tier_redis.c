/*
 * test_tier_redis.c - the Redis tier (issue 15), against real redis-server
 * processes that each test starts and stops itself (redis_fixture.c).
 *
 * The backend is exercised through its ops table, as the tier core calls
 * it; the core's own counting (tier_hits, tier_errors, ...) is tested
 * end-to-end at the bottom.  Without redis-server every test skips with a
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

#include "tier/redis/redis.h"
#include "redis_fixture.h"
#include "support.h"

#define NS      "v1/0123456789abcdef"
#define WAIT_MS 10000ull /* generous bound for condition waits */

/* ------------------------------------------------------------ helpers */
static void need_redis(void) {
  const char *why = NULL;
  if (rf_binary(&why)) return;
  if (rf_required()) fail_msg("redis-server required (CCACHE_TEST_REQUIRE_REDIS=1): %s", why);
  print_message("SKIPPED: %s\n", why);
  skip();
}

/* The servers of the running test (rf_stop is idempotent): the teardown
 * stops any that a failed assertion left behind. */
static rf_server servers[3];

static void start(rf_server *s, const char *const *extra) {
  assert_int_equal(rf_start(s, extra), 0);
}

/* A fork child's exit: nothing inherited from the test process stays
 * allocated (valgrind checks each child as it exits). */
static void child_exit(int code) {
  for (size_t i = 0; i < sizeof servers / sizeof servers[0]; i++) rf_forget_admin(&servers[i]);
  _exit(code);
}

static int stop_all(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof servers / sizeof servers[0]; i++) {
    rf_stop(&servers[i]);
    servers[i].admin_user = servers[i].admin_pass = NULL; /* a failed test's */
  }
  return 0;
}

typedef struct be {
  ccache_tier_ops ops;
  ccache__redis *r;
} be;

static void opts(ccache_redis_options *o, const char *servers) {
  ccache_redis_options_init(o);
  o->servers = servers;
  o->reconnect_min_ms = 1;
  o->reconnect_max_ms = 20;
}

static void be_open(be *b, const ccache_redis_options *o, const char *ns) {
  char why[256];
  int rc = ccache__redis_new(o, &b->ops, &b->r, why, sizeof why);
  if (rc != CCACHE_OK) fail_msg("ccache__redis_new: %d (%s)", rc, why);
  assert_int_equal(b->ops.attach(b->r, ns), CCACHE_OK);
}

static void be_open_simple(be *b, const char *servers) {
  ccache_redis_options o;
  opts(&o, servers);
  be_open(b, &o, NS);
}

static void be_close(be *b) { b->ops.close(b->r); }

static ccache__rcounters cnt(be *b) {
  ccache__rcounters c;
  ccache__rpool_counters(ccache__redis_pool(b->r), &c);
  return c;
}

static const char *last_error(be *b) {
  static char buf[256];
  ccache__rpool_last_error(ccache__redis_pool(b->r), buf, sizeof buf);
  return buf;
}

/* Deterministic payload bytes for key n. */
static unsigned char *payload(uint64_t n, size_t len) {
  unsigned char *p = malloc(len ? len : 1);
  assert_non_null(p);
  uint64_t x = n * 0x9E3779B97F4A7C15ull + 7;
  for (size_t i = 0; i < len; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = (unsigned char)x;
  }
  return p;
}

static int put_n(be *b, uint64_t n, size_t len) {
  unsigned char *p = payload(n, len);
  int rc = b->ops.put(b->r, PK(n), p, len);
  free(p);
  return rc;
}

/* get PK(n) and compare with payload(n, len): OK, MISS, or the error. */
static int get_check(be *b, uint64_t n, size_t len) {
  void *blob = NULL;
  size_t got = 0;
  int rc = b->ops.get(b->r, PK(n), &blob, &got);
  if (rc != CCACHE_OK) return rc;
  unsigned char *want = payload(n, len);
  int same = got == len && memcmp(blob, want, len) == 0;
  free(want);
  b->ops.free_blob(b->r, blob, got);
  assert_true(same);
  return CCACHE_OK;
}

/* Retry get until it is no longer a tier error (a condition wait, bounded
 * in time and count). */
static int get_until_reachable(be *b, uint64_t n, size_t len) {
  unsigned long long deadline = rf_now_ms() + WAIT_MS;
  int rc = CCACHE_EIO;
  for (int i = 0; i < 100000; i++) {
    rc = get_check(b, n, len);
    if (rc != CCACHE_EIO || rf_now_ms() > deadline) break;
    rf_poll_pause();
  }
  return rc;
}

static void entry_key(char *buf, size_t len, const char *prefix, const char *ns, uint64_t n) {
  ccache_key k = PK(n);
  snprintf(buf, len, "%s:%s%s%016llx%016llx", prefix, ns ? ns : "", ns ? ":" : "",
           (unsigned long long)k.hi, (unsigned long long)k.lo);
}

static char *reply_str(rf_server *s, const char *fmt, const char *arg) {
  redisReply *r = rf_cmd(s, fmt, arg);
  char *out = NULL;
  if (r && r->type == REDIS_REPLY_STRING) out = strndup(r->str, r->len);
  if (r) freeReplyObject(r);
  return out;
}

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
    opts(&o, bad_lists[i]);
    why[0] = '\0';
    assert_int_equal(ccache__redis_new(&o, &ops, &r, why, sizeof why), CCACHE_EINVAL);
    assert_true(why[0] != '\0');
  }
  int n_bad = 0;
#define BAD(stmt)                                                                      \
  do {                                                                                 \
    opts(&o, "127.0.0.1:1");                                                           \
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
  opts(&o, "127.0.0.1:6379,bad-entry");
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_redis(&o, &t), CCACHE_EINVAL);
  assert_null(t);
  assert_non_null(strstr(ccache_error_detail(), "'bad-entry'"));
  opts(&o, "127.0.0.1:6379");
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
    opts(&o, good[i]);
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
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  be b;
  be_open_simple(&b, s->addr);
  static const size_t sizes[] = {0, 1, 4096, 1 << 20};
  for (uint64_t i = 0; i < 4; i++) assert_int_equal(put_n(&b, i, sizes[i]), CCACHE_OK);
  for (uint64_t i = 0; i < 4; i++) assert_int_equal(get_check(&b, i, sizes[i]), CCACHE_OK);
  assert_int_equal(get_check(&b, 99, 0), CCACHE_MISS);
  /* Replace. */
  assert_int_equal(put_n(&b, 2, 100), CCACHE_OK);
  assert_int_equal(get_check(&b, 2, 100), CCACHE_OK);
  unsigned char *p2 = payload(2, 100);
  assert_null(b.ops.remove); /* only the conditional remove is sent */
  assert_int_equal(b.ops.remove_if(b.r, PK(2), p2, 100), CCACHE_OK);
  assert_int_equal(b.ops.remove_if(b.r, PK(2), p2, 100), CCACHE_MISS);
  free(p2);
  assert_int_equal(get_check(&b, 2, 100), CCACHE_MISS);
  assert_int_equal(rf_int(s, "DBSIZE"), 3);
  /* One thread, one pooled connection for all 15 commands. */
  ccache__rcounters c = cnt(&b);
  assert_int_equal(c.connects, 1);
  assert_int_equal(c.connect_failures + c.io_errors + c.reply_errors + c.refused_backoff, 0);
  be_close(&b);

  /* The same over the unix socket. */
  be_open_simple(&b, s->unix_addr);
  assert_int_equal(get_check(&b, 3, sizes[3]), CCACHE_OK);
  assert_int_equal(cnt(&b).connects, 1);
  be_close(&b);
  rf_stop(s);
}

/* ------------------------------------------------- keys and namespaces */
static void redis_key_prefix_and_namespace(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  ccache_redis_options o;
  opts(&o, s->addr);
  o.prefix = "myapp";
  be a, other_prefix, other_ns, no_ns;
  be_open(&a, &o, NS);
  be_open(&no_ns, &o, NULL);
  be_open(&other_ns, &o, "v1/fedcba9876543210");
  o.prefix = "other";
  be_open(&other_prefix, &o, NS);

  assert_int_equal(put_n(&a, 7, 64), CCACHE_OK);
  char key[256];
  entry_key(key, sizeof key, "myapp", "v1:0123456789abcdef", 7);
  assert_int_equal(rf_int(s, "EXISTS %s", key), 1);
  char mine[256];
  assert_int_equal(ccache__redis_key(a.r, PK(7), 0, mine, sizeof mine), strlen(key));
  assert_string_equal(mine, key);
  assert_int_equal(rf_int(s, "DBSIZE"), 1);
  /* Another prefix or another runtime tag hash never sees it. */
  assert_int_equal(get_check(&other_prefix, 7, 64), CCACHE_MISS);
  assert_int_equal(get_check(&other_ns, 7, 64), CCACHE_MISS);
  assert_int_equal(get_check(&no_ns, 7, 64), CCACHE_MISS);
  assert_int_equal(get_check(&a, 7, 64), CCACHE_OK);
  /* Without a namespace: <prefix>:<hex>. */
  assert_int_equal(put_n(&no_ns, 7, 64), CCACHE_OK);
  entry_key(key, sizeof key, "myapp", NULL, 7);
  assert_int_equal(rf_int(s, "EXISTS %s", key), 1);
  assert_int_equal(rf_int(s, "DBSIZE"), 2);
  /* The lease lives beside the entry: <entry key>:lease. */
  void *lock = NULL;
  assert_int_equal(a.ops.lock(a.r, PK(7), &lock), CCACHE_OK);
  entry_key(key, sizeof key, "myapp", "v1:0123456789abcdef", 7);
  strcat(key, ":lease");
  char *tok = reply_str(s, "GET %s", key);
  assert_non_null(tok);
  assert_string_equal(tok, ccache__redis_lock_token(lock));
  free(tok);
  a.ops.unlock(a.r, lock);
  assert_int_equal(rf_int(s, "EXISTS %s", key), 0);
  be_close(&a);
  be_close(&no_ns);
  be_close(&other_ns);
  be_close(&other_prefix);
  rf_stop(s);
}

static void redis_entry_ttl(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  ccache_redis_options o;
  opts(&o, s->addr);
  be forever, ttl;
  be_open(&forever, &o, NS);
  o.entry_ttl_ms = 600000;
  be_open(&ttl, &o, NS);
  assert_int_equal(put_n(&forever, 1, 10), CCACHE_OK);
  assert_int_equal(put_n(&ttl, 2, 10), CCACHE_OK);
  char key[256];
  entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", 1);
  assert_int_equal(rf_int(s, "PTTL %s", key), -1);
  entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", 2);
  long long pttl = rf_int(s, "PTTL %s", key);
  assert_true(pttl > 600000 - (long long)WAIT_MS && pttl <= 600000);
  be_close(&forever);
  be_close(&ttl);
  rf_stop(s);
}

/* --------------------------------------------------------------- lease */
static void lease_key(char *buf, size_t len, uint64_t n) {
  entry_key(buf, len, "ccache", "v1:0123456789abcdef", n);
  strcat(buf, ":lease");
}

static void redis_lease_taken_held_released(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  ccache_redis_options o;
  opts(&o, s->addr);
  o.lease_ms = 30000;
  be a, b;
  be_open(&a, &o, NS);
  be_open(&b, &o, NS);
  char key[256];
  lease_key(key, sizeof key, 5);
  void *la = NULL, *lb = NULL;
  assert_int_equal(a.ops.lock(a.r, PK(5), &la), CCACHE_OK);
  long long pttl = rf_int(s, "PTTL %s", key);
  assert_true(pttl > 30000 - (long long)WAIT_MS && pttl <= 30000);
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
  assert_int_equal(rf_int(s, "EXISTS %s", key), 0);
  assert_int_equal(b.ops.lock(b.r, PK(5), &lb), CCACHE_OK);
  /* Tokens differ between holders. */
  char *tok = reply_str(s, "GET %s", key);
  assert_non_null(tok);
  assert_string_equal(tok, ccache__redis_lock_token(lb));
  assert_int_equal(strlen(tok), 32);
  free(tok);
  b.ops.unlock(b.r, lb);
  b.ops.unlock(b.r, NULL); /* no-op */
  assert_int_equal(rf_int(s, "DBSIZE"), 0);
  be_close(&a);
  be_close(&b);
  rf_stop(s);
}

static void redis_lease_renewed(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  ccache_redis_options o;
  opts(&o, s->addr);
  o.lease_ms = 40000;
  be a;
  be_open(&a, &o, NS);
  char key[256];
  lease_key(key, sizeof key, 9);
  void *l = NULL;
  assert_int_equal(a.ops.lock(a.r, PK(9), &l), CCACHE_OK);
  /* Let the lease run down (as time would), then renew: back to lease_ms. */
  for (int round = 0; round < 3; round++) {
    assert_int_equal(rf_int(s, "PEXPIRE %s 500", key), 1);
    assert_true(rf_int(s, "PTTL %s", key) <= 500);
    assert_int_equal(a.ops.renew(a.r, l), CCACHE_OK);
    long long pttl = rf_int(s, "PTTL %s", key);
    assert_true(pttl > 40000 - (long long)WAIT_MS && pttl <= 40000);
  }
  /* The renewal uses the server's own connection, not the pool: the lock
   * made the pooled one, the first renew one more, later ones none. */
  assert_int_equal(cnt(&a).connects, 2);
  assert_int_equal(get_check(&a, 9, 0), CCACHE_MISS); /* pooled, idle: reused */
  assert_int_equal(cnt(&a).connects, 2);
  a.ops.unlock(a.r, l);
  assert_int_equal(rf_int(s, "EXISTS %s", key), 0);
  be_close(&a);
  rf_stop(s);
}

/* A holder whose lease expired can neither extend nor delete the lease a
 * second holder took meanwhile. */
static void redis_lease_token_checked(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  ccache_redis_options o;
  opts(&o, s->addr);
  o.lease_ms = 30000;
  be a, b;
  be_open(&a, &o, NS);
  be_open(&b, &o, NS);
  char key[256];
  lease_key(key, sizeof key, 3);
  void *la = NULL, *lb = NULL;
  assert_int_equal(a.ops.lock(a.r, PK(3), &la), CCACHE_OK);
  assert_int_equal(rf_int(s, "DEL %s", key), 1); /* a's lease expires */
  assert_int_equal(b.ops.lock(b.r, PK(3), &lb), CCACHE_OK);
  assert_int_equal(rf_int(s, "PEXPIRE %s 20000", key), 1);
  /* The stale holder: renew refused, and the TTL untouched. */
  assert_int_equal(a.ops.renew(a.r, la), CCACHE_EBUSY);
  assert_true(rf_int(s, "PTTL %s", key) <= 20000);
  /* The stale holder's release leaves b's lease in place. */
  a.ops.unlock(a.r, la);
  char *tok = reply_str(s, "GET %s", key);
  assert_non_null(tok);
  assert_string_equal(tok, ccache__redis_lock_token(lb));
  free(tok);
  assert_int_equal(b.ops.renew(b.r, lb), CCACHE_OK);
  assert_true(rf_int(s, "PTTL %s", key) > 20000);
  b.ops.unlock(b.r, lb);
  assert_int_equal(rf_int(s, "EXISTS %s", key), 0);
  /* A renew after the lease vanished is refused too. */
  assert_int_equal(a.ops.lock(a.r, PK(3), &la), CCACHE_OK);
  assert_int_equal(rf_int(s, "DEL %s", key), 1);
  assert_int_equal(a.ops.renew(a.r, la), CCACHE_EBUSY);
  assert_int_equal(rf_int(s, "EXISTS %s", key), 0);
  a.ops.unlock(a.r, la);
  be_close(&a);
  be_close(&b);
  rf_stop(s);
}

/* ------------------------------------------------------ several servers */
#define SPREAD_KEYS 300

static void redis_rendezvous_spread_and_one_down(void **state) {
  (void)state;
  need_redis();
  rf_server *s = servers;
  for (int i = 0; i < 3; i++) start(&s[i], NULL);
  char list[800], reversed[800], two[800];
  snprintf(list, sizeof list, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  snprintf(reversed, sizeof reversed, "%.31s,%.31s,%.31s", s[2].addr, s[1].addr, s[0].addr);
  snprintf(two, sizeof two, "%.31s,%.31s", s[1].addr, s[0].addr);
  be b, rev, b2;
  be_open_simple(&b, list);
  be_open_simple(&rev, reversed);
  be_open_simple(&b2, two);
  for (uint64_t k = 0; k < SPREAD_KEYS; k++) assert_int_equal(put_n(&b, k, 32), CCACHE_OK);
  long long size[3], total = 0;
  for (int i = 0; i < 3; i++) {
    size[i] = rf_int(&s[i], "DBSIZE");
    total += size[i];
    /* Binomial(300, 1/3): mean 100, sd 8.2; +-40 is ~5 sd. */
    assert_true(size[i] >= 60 && size[i] <= 140);
  }
  assert_int_equal(total, SPREAD_KEYS);
  /* Every key is where server_of says, and only there; the reversed list
   * (another process's view) reads every key; the list without s[2] maps
   * every key of s[0] and s[1] to the same server (only s[2]'s share moves). */
  int moved = 0;
  for (uint64_t k = 0; k < SPREAD_KEYS; k++) {
    size_t at = ccache__redis_server_of(b.r, PK(k));
    char key[256];
    entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", k);
    for (size_t i = 0; i < 3; i++) assert_int_equal(rf_int(&s[i], "EXISTS %s", key), i == at);
    assert_int_equal(get_check(&rev, k, 32), CCACHE_OK);
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
  rf_kill(&s[1]);
  int ok = 0, err = 0, miss = 0;
  for (uint64_t k = 0; k < SPREAD_KEYS; k++) {
    int rc = get_check(&b, k, 32);
    ok += rc == CCACHE_OK;
    err += rc == CCACHE_EIO;
    miss += rc == CCACHE_MISS;
  }
  assert_int_equal(ok, size[0] + size[2]);
  assert_int_equal(err, 0);
  assert_int_equal(miss, size[1]);
  ccache__rcounters c = cnt(&b);
  /* Each failed get: the dead pooled connection (io error), a refused
   * connect, or a skip during the backoff. */
  assert_int_equal(c.io_errors + c.connect_failures + c.refused_backoff, size[1]);
  assert_int_equal(c.io_errors, 1);
  be_close(&b);
  be_close(&rev);
  be_close(&b2);
  for (int i = 0; i < 3; i++) rf_stop(&s[i]);
}

/* ---------------------------------------------------------------- auth */
static void redis_auth_password(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  static const char *const args[] = {"--requirepass", "s3cret-pw", NULL};
  start(s, args);
  ccache_redis_options o;
  opts(&o, s->addr);
  be none, wrong, good;
  be_open(&none, &o, NS);
  o.password = "wrong";
  be_open(&wrong, &o, NS);
  o.password = "s3cret-pw";
  be_open(&good, &o, NS);
  assert_int_equal(put_n(&good, 1, 100), CCACHE_OK);
  assert_int_equal(get_check(&good, 1, 100), CCACHE_OK);
  assert_int_equal(cnt(&good).connects, 1);
  /* Without a password the server answers NOAUTH: a reply error, the
   * connection stays. */
  assert_int_equal(get_check(&none, 1, 100), CCACHE_EIO);
  assert_non_null(strstr(last_error(&none), "NOAUTH"));
  assert_int_equal(cnt(&none).reply_errors, 1);
  assert_int_equal(cnt(&none).io_errors, 0);
  /* A wrong password fails the connection's AUTH. */
  assert_int_equal(get_check(&wrong, 1, 100), CCACHE_EIO);
  assert_non_null(strstr(last_error(&wrong), "AUTH"));
  assert_non_null(strstr(last_error(&wrong), "WRONGPASS"));
  assert_int_equal(cnt(&wrong).connect_failures, 1);
  assert_int_equal(cnt(&wrong).connects, 0);
  be_close(&none);
  be_close(&wrong);
  be_close(&good);
  rf_stop(s);
}

static void redis_auth_acl_user(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  memset(s, 0, sizeof *s);
  s->admin_user = "alice";
  s->admin_pass = "wonderland";
  /* Each word a separate argument: redis-server joins them into the
   * config line "user alice on >wonderland ~* +@all". */
  static const char *const args[] = {"--user", "alice", "on", ">wonderland", "~*", "+@all",
                                     "--user", "default", "off",
                                     /* the least a tier needs, as documented */
                                     "--user", "ccache", "on", ">tier-pw", "~ccache:*", "+get",
                                     "+set", "+del", "+eval", "+pexpire", "+strlen", NULL};
  start(s, args);
  ccache_redis_options o;
  opts(&o, s->addr);
  o.user = "alice";
  o.password = "wonderland";
  be alice, bad, anon;
  be_open(&alice, &o, NS);
  o.password = "rabbit-hole";
  be_open(&bad, &o, NS);
  o.user = NULL;
  o.password = NULL;
  be_open(&anon, &o, NS);
  assert_int_equal(put_n(&alice, 4, 1000), CCACHE_OK);
  assert_int_equal(get_check(&alice, 4, 1000), CCACHE_OK);
  void *l = NULL;
  assert_int_equal(alice.ops.lock(alice.r, PK(4), &l), CCACHE_OK);
  assert_int_equal(alice.ops.renew(alice.r, l), CCACHE_OK);
  alice.ops.unlock(alice.r, l);
  assert_int_equal(cnt(&alice).connects, 2); /* pool + renewal */
  assert_int_equal(get_check(&bad, 4, 1000), CCACHE_EIO);
  assert_non_null(strstr(last_error(&bad), "WRONGPASS"));
  assert_int_equal(cnt(&bad).connect_failures, 1);
  /* The minimal ACL of the header's example runs every op. */
  o.user = "ccache";
  o.password = "tier-pw";
  o.entry_ttl_ms = 3600000; /* SET ... PX as well */
  be least;
  be_open(&least, &o, NS);
  assert_int_equal(put_n(&least, 8, 100), CCACHE_OK);
  assert_int_equal(get_check(&least, 8, 100), CCACHE_OK);
  assert_int_equal(least.ops.lock(least.r, PK(8), &l), CCACHE_OK);
  assert_int_equal(least.ops.renew(least.r, l), CCACHE_OK);
  least.ops.unlock(least.r, l);
  unsigned char *p8 = payload(8, 100), *p9 = payload(9, 100);
  /* The remove-if script, both ways: not the value read (kept), then it. */
  assert_int_equal(least.ops.remove_if(least.r, PK(8), p9, 100), CCACHE_MISS);
  assert_int_equal(least.ops.remove_if(least.r, PK(8), p8, 100), CCACHE_OK);
  free(p8);
  free(p9);
  assert_int_equal(rf_int(s, "DBSIZE"), 1); /* alice's entry only: lease and entry 8 gone */
  ccache__rcounters lc = cnt(&least);
  assert_int_equal(lc.reply_errors + lc.io_errors + lc.connect_failures, 0);
  be_close(&least);
  /* Outside its key pattern it is refused (a reply error). */
  o.prefix = "other";
  be_open(&least, &o, NS);
  assert_int_equal(put_n(&least, 8, 100), CCACHE_EIO);
  assert_non_null(strstr(last_error(&least), "NOPERM"));
  be_close(&least);
  /* The default user is off: no access without credentials. */
  assert_int_equal(get_check(&anon, 4, 1000), CCACHE_EIO);
  assert_non_null(strstr(last_error(&anon), "NOAUTH"));
  be_close(&alice);
  be_close(&bad);
  be_close(&anon);
  rf_stop(s);
}

/* -------------------------------------------------------------- faults */
static void redis_absent_at_start(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  rf_kill(s); /* its port and directory stay ours */
  be b;
  be_open_simple(&b, s->addr);
  assert_int_equal(cnt(&b).connect_failures, 0); /* creating connects nothing */
  assert_int_equal(put_n(&b, 1, 10), CCACHE_EIO);
  void *l = NULL;
  assert_int_equal(b.ops.lock(b.r, PK(1), &l), CCACHE_EIO);
  assert_null(l);
  ccache__rcounters c = cnt(&b);
  assert_int_equal(c.connects, 0);
  assert_true(c.connect_failures >= 1);
  assert_int_equal(c.connect_failures + c.refused_backoff, 2);
  assert_non_null(strstr(last_error(&b), "connect"));
  /* The server appears: the backend connects after its backoff. */
  assert_int_equal(rf_restart(s), 0);
  assert_int_equal(get_until_reachable(&b, 1, 10), CCACHE_MISS);
  assert_int_equal(put_n(&b, 1, 10), CCACHE_OK);
  assert_int_equal(get_check(&b, 1, 10), CCACHE_OK);
  assert_int_equal(cnt(&b).connects, 1);
  be_close(&b);
  rf_stop(s);
}

static void redis_killed_mid_run_then_restarted(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  ccache_redis_options o;
  opts(&o, s->addr);
  be b, slow;
  be_open(&b, &o, NS);
  o.reconnect_min_ms = o.reconnect_max_ms = 3600000; /* backoff longer than the test */
  be_open(&slow, &o, NS);
  assert_int_equal(put_n(&b, 1, 5000), CCACHE_OK);
  assert_int_equal(get_check(&slow, 1, 5000), CCACHE_OK);
  rf_kill(s);
  /* The pooled connections are dead: one I/O error each, then backoff. */
  assert_int_equal(get_check(&b, 1, 5000), CCACHE_EIO);
  assert_int_equal(cnt(&b).io_errors, 1);
  assert_int_equal(get_check(&slow, 1, 5000), CCACHE_EIO);
  for (int i = 0; i < 10; i++) assert_int_equal(put_n(&slow, 2, 10), CCACHE_EIO);
  ccache__rcounters c = cnt(&slow);
  assert_int_equal(c.io_errors, 1);
  assert_int_equal(c.refused_backoff, 10); /* no connect attempt while backing off */
  assert_int_equal(c.connect_failures, 0);
  /* Restarted (empty: no persistence): b reconnects, slow still waits. */
  assert_int_equal(rf_restart(s), 0);
  assert_int_equal(get_until_reachable(&b, 1, 5000), CCACHE_MISS);
  assert_int_equal(put_n(&b, 1, 5000), CCACHE_OK);
  assert_int_equal(get_check(&b, 1, 5000), CCACHE_OK);
  assert_int_equal(get_check(&slow, 1, 5000), CCACHE_EIO);
  assert_int_equal(cnt(&slow).refused_backoff, 11);
  assert_int_equal(cnt(&b).connects, 2);
  be_close(&b);
  be_close(&slow);
  rf_stop(s);
}

static void redis_dropped_connection(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  be b;
  be_open_simple(&b, s->addr);
  assert_int_equal(put_n(&b, 1, 100), CCACHE_OK);
  void *l = NULL;
  assert_int_equal(b.ops.lock(b.r, PK(2), &l), CCACHE_OK);
  assert_int_equal(b.ops.renew(b.r, l), CCACHE_OK);
  assert_int_equal(cnt(&b).connects, 2);
  /* Kill every client but the admin one (SKIPME yes): pool and renewal. */
  assert_int_equal(rf_int(s, "CLIENT KILL TYPE normal"), 2);
  assert_int_equal(get_check(&b, 1, 100), CCACHE_EIO);
  assert_int_equal(cnt(&b).io_errors, 1);
  assert_int_equal(get_until_reachable(&b, 1, 100), CCACHE_OK);
  /* The renewal connection was dropped too: it reconnects on its own. */
  unsigned long long deadline = rf_now_ms() + WAIT_MS;
  int rc;
  while ((rc = b.ops.renew(b.r, l)) == CCACHE_EIO && rf_now_ms() < deadline) rf_poll_pause();
  assert_int_equal(rc, CCACHE_OK);
  b.ops.unlock(b.r, l);
  assert_int_equal(cnt(&b).connects, 4);
  be_close(&b);
  rf_stop(s);
}

typedef struct async_get {
  be *b;
  uint64_t n;
  size_t len;
  int rc;
  int done;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} async_get;

static void *async_get_main(void *arg) {
  async_get *g = arg;
  int rc = get_check(g->b, g->n, g->len);
  pthread_mutex_lock(&g->mu);
  g->rc = rc;
  g->done = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

static void async_start(async_get *g, pthread_t *t, be *b, uint64_t n, size_t len) {
  memset(g, 0, sizeof *g);
  g->b = b, g->n = n, g->len = len;
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  assert_int_equal(pthread_create(t, NULL, async_get_main, g), 0);
}

/* Wait (up to ms) for it to finish: 1 if it did. */
static int async_wait(async_get *g, unsigned long long ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)(ms / 1000);
  until.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&g->mu);
  while (!g->done && pthread_cond_timedwait(&g->cv, &g->mu, &until) == 0) {
  }
  int done = g->done;
  pthread_mutex_unlock(&g->mu);
  return done;
}

static void redis_slow_server_command_timeout(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  ccache_redis_options o;
  opts(&o, s->addr);
  o.command_timeout_ms = 250;
  be b;
  be_open(&b, &o, NS);
  assert_int_equal(put_n(&b, 1, 100), CCACHE_OK);
  rf_pause(s); /* the server stops answering */
  async_get g;
  pthread_t t;
  async_start(&g, &t, &b, 1, 100);
  int finished = async_wait(&g, WAIT_MS);
  rf_resume(s);
  pthread_join(t, NULL);
  assert_true(finished); /* the command timeout, not the server, ended it */
  assert_int_equal(g.rc, CCACHE_EIO);
  assert_int_equal(cnt(&b).io_errors, 1);
  assert_non_null(strstr(last_error(&b), "GET"));
  /* Back to normal once the server answers again. */
  assert_int_equal(get_until_reachable(&b, 1, 100), CCACHE_OK);
  assert_int_equal(cnt(&b).connects, 2);
  be_close(&b);
  rf_stop(s);
}

/* Connect timeout: the server is stopped and its accept queue (backlog 1)
 * is full, so the kernel drops further SYNs and a connect can only end by
 * the client's own timeout. */
static void redis_connect_timeout(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  static const char *const args[] = {"--tcp-backlog", "1", NULL};
  start(s, args);
  rf_pause(s);
  int fill[8];
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)s->port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < 8; i++) {
    fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(fill[i] >= 0);
    connect(fill[i], (struct sockaddr *)&a, sizeof a); /* EINPROGRESS or queued */
  }
  ccache_redis_options o;
  opts(&o, s->addr);
  o.connect_timeout_ms = 200;
  be b;
  be_open(&b, &o, NS);
  async_get g;
  pthread_t t;
  async_start(&g, &t, &b, 1, 10);
  int finished = async_wait(&g, WAIT_MS);
  for (int i = 0; i < 8; i++) close(fill[i]);
  rf_resume(s);
  pthread_join(t, NULL);
  assert_true(finished);
  assert_int_equal(g.rc, CCACHE_EIO);
  ccache__rcounters c = cnt(&b);
  assert_int_equal(c.connect_failures, 1);
  assert_int_equal(c.connects, 0);
  assert_non_null(strstr(last_error(&b), "connect"));
  assert_non_null(strstr(last_error(&b), "timed out"));
  assert_int_equal(get_until_reachable(&b, 1, 10), CCACHE_MISS);
  be_close(&b);
  rf_stop(s);
}

static void redis_oom_under_maxmemory(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  static const char *const args[] = {"--maxmemory", "3mb", "--maxmemory-policy", "noeviction",
                                     NULL};
  start(s, args);
  be b;
  be_open_simple(&b, s->addr);
  int first_fail = -1, rc = CCACHE_OK;
  for (int i = 0; i < 256 && first_fail < 0; i++) {
    rc = put_n(&b, (uint64_t)i, 64 * 1024);
    if (rc != CCACHE_OK) first_fail = i;
  }
  assert_true(first_fail >= 0);
  assert_int_equal(rc, CCACHE_EIO);
  assert_non_null(strstr(last_error(&b), "OOM command not allowed"));
  ccache__rcounters c = cnt(&b);
  assert_int_equal(c.reply_errors, 1);
  assert_int_equal(c.io_errors + c.refused_backoff + c.connect_failures, 0);
  /* The connection is fine: a second write fails the same way (no backoff),
   * reads still work, and nothing reconnected. */
  assert_int_equal(put_n(&b, 1000, 64 * 1024), CCACHE_EIO);
  assert_int_equal(cnt(&b).reply_errors, 2);
  if (first_fail > 0) assert_int_equal(get_check(&b, 0, 64 * 1024), CCACHE_OK);
  assert_int_equal(cnt(&b).connects, 1);
  assert_int_equal(cnt(&b).refused_backoff, 0);
  be_close(&b);
  rf_stop(s);
}

/* SIGPIPE: the server closes a pooled connection (CLIENT KILL: its FIN
 * arrives, the socket is in CLOSE_WAIT); the next put writes a large value,
 * the server's kernel answers the first bytes with a reset, and the
 * following write() fails with EPIPE and raises SIGPIPE.  Run in a child
 * with SIGPIPE at its default action and unblocked: without the library's
 * guard the child dies of it. */
static int sigpipe_child(rf_server *s) {
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, NULL);
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  o.servers = s->addr;
  o.reconnect_min_ms = o.reconnect_max_ms = 1;
  o.command_timeout_ms = 5000;
  ccache_tier_ops ops;
  ccache__redis *r;
  char why[256];
  if (ccache__redis_new(&o, &ops, &r, why, sizeof why) != CCACHE_OK) return 10;
  size_t len = 16u << 20;
  unsigned char *big = calloc(1, len);
  if (!big) return 11;
  int code = 3; /* no SIGPIPE in 50 tries */
  unsigned long long deadline = rf_now_ms() + WAIT_MS;
  for (int i = 0; i < 50 && rf_now_ms() < deadline; i++) {
    if (ops.put(r, PK(1), "x", 1) != CCACHE_OK) { /* (re)connect the pool */
      rf_poll_pause();
      continue;
    }
    if (rf_int(s, "CLIENT KILL TYPE normal") != 1) return 12;
    if (ops.put(r, PK(2), big, len) != CCACHE_EIO) return 13;
    ccache__rcounters c;
    ccache__rpool_counters(ccache__redis_pool(r), &c);
    if (c.sigpipes > 0) {
      code = 0;
      break;
    }
  }
  /* The signal mask is as before and nothing is left pending. */
  sigset_t mask, pending;
  pthread_sigmask(SIG_SETMASK, NULL, &mask);
  sigpending(&pending);
  if (code == 0 && (sigismember(&mask, SIGPIPE) || sigismember(&pending, SIGPIPE))) code = 4;
  free(big);
  ops.close(r);
  return code;
}

static void redis_sigpipe_default_disposition(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  struct sigaction sa;
  sigaction(SIGPIPE, NULL, &sa);
  assert_true(sa.sa_handler == SIG_DFL); /* main() made sure */
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) child_exit(sigpipe_child(s)); /* no admin connection yet to share */
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status)) fail_msg("the child died of signal %d", WTERMSIG(status));
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  rf_stop(s);
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
  return async_get_main(arg);
}

/* A miss on one thread holds its connection (here: parked inside the
 * command); a miss on another thread does not wait for it. */
static void redis_concurrent_misses_do_not_queue(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  be b;
  be_open_simple(&b, s->addr);
  assert_int_equal(put_n(&b, 1, 100), CCACHE_OK);
  assert_int_equal(put_n(&b, 2, 200), CCACHE_OK);
  assert_int_equal(cnt(&b).connects, 1);
  hold *h = &the_hold;
  h->blocked = h->release = 0;
  ccache__redis_set_hook(b.r, hold_hook, h);
  async_get a, c;
  pthread_t ta, tc;
  memset(&a, 0, sizeof a);
  a.b = &b, a.n = 1, a.len = 100;
  pthread_mutex_init(&a.mu, NULL);
  pthread_cond_init(&a.cv, NULL);
  assert_int_equal(pthread_create(&ta, NULL, blocked_get_main, &a), 0);
  pthread_mutex_lock(&h->mu);
  unsigned long long deadline = rf_now_ms() + WAIT_MS;
  while (!h->blocked && rf_now_ms() < deadline) {
    pthread_mutex_unlock(&h->mu);
    rf_poll_pause();
    pthread_mutex_lock(&h->mu);
  }
  int blocked = h->blocked;
  pthread_mutex_unlock(&h->mu);
  async_start(&c, &tc, &b, 2, 200);
  int c_done = async_wait(&c, WAIT_MS);
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
  assert_int_equal(cnt(&b).connects, 2);
  be_close(&b);
  rf_stop(s);
}

/* A fork child never touches the parent's connections. */
static void redis_fork_child_refuses(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  be b;
  be_open_simple(&b, s->addr);
  assert_int_equal(put_n(&b, 1, 100), CCACHE_OK);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int rc = put_n(&b, 2, 100);
    void *blob;
    size_t len;
    int rc2 = b.ops.get(b.r, PK(1), &blob, &len);
    be_close(&b); /* frees the child's copy; the parent's sockets stay open */
    child_exit(rc == CCACHE_EFORKED && rc2 == CCACHE_EFORKED ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(get_check(&b, 1, 100), CCACHE_OK);
  assert_int_equal(get_check(&b, 2, 100), CCACHE_MISS);
  ccache__rcounters c = cnt(&b);
  assert_int_equal(c.connects, 1);
  assert_int_equal(c.io_errors + c.reply_errors, 0);
  be_close(&b);
  rf_stop(s);
}

/* ------------------------------------------------ through a cache (core) */
#define E2E_PAYLOAD 3000
#define E2E_TAG     "test-runtime 1.0"

static _Atomic uint64_t e2e_compiles; /* compile callbacks run in this process */
#define E2E_KEYS_COUNTED 64
static _Atomic uint32_t e2e_key_compiles[E2E_KEYS_COUNTED]; /* per key n < 64 */

/* The codec: a native program is a t_obj; its bytes are payload(pkey.lo). */
static int e2e_encode(void *ctx, ccache_key pkey, void *native, void **bytes, size_t *len) {
  (void)ctx, (void)native;
  *bytes = payload(pkey.lo, E2E_PAYLOAD);
  *len = E2E_PAYLOAD;
  return 0;
}
static void e2e_free_bytes(void *ctx, void *bytes, size_t len) {
  (void)ctx, (void)len;
  free(bytes);
}
static int e2e_decode(void *ctx, ccache_key pkey, const void *bytes, size_t len, void **native_out,
                      uint64_t *cost_out) {
  (void)ctx;
  unsigned char *want = payload(pkey.lo, E2E_PAYLOAD);
  int same = len == E2E_PAYLOAD && memcmp(bytes, want, len) == 0;
  free(want);
  if (!same) return -1;
  *native_out = t_native((int)pkey.lo + 100000); /* loaded, not compiled */
  *cost_out = len;
  return 0;
}
static const ccache_codec e2e_codec = {e2e_encode, e2e_free_bytes, e2e_decode, NULL};

/* A compile that does some real work (no sleeping). */
static int e2e_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                       uint64_t *cost_out) {
  (void)ud, (void)c;
  atomic_fetch_add(&e2e_compiles, 1);
  if (pkey.lo < E2E_KEYS_COUNTED) atomic_fetch_add(&e2e_key_compiles[pkey.lo], 1);
  unsigned char *p = payload(pkey.lo, 1 << 16);
  uint64_t h = 0;
  for (int round = 0; round < 8; round++)
    for (size_t i = 0; i < (1 << 16); i++) h = h * 31 + p[i];
  free(p);
  *native_out = t_native((int)pkey.lo + (int)(h & 1) * 0); /* id = key */
  *cost_out = 1;
  return 0;
}

/* A cache over one Redis tier (options o), the codec and E2E_TAG. */
static ccache *e2e_open(t_ctx *ctx, const ccache_redis_options *o, const char *tag) {
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_redis(o, &t), CCACHE_OK);
  ccache_config cfg;
  t_config(&cfg, ctx);
  cfg.codec = &e2e_codec;
  cfg.runtime_tag = tag;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &t;
  cfg.n_tiers = 1;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  return c;
}

/* get-or-compile PK(n): the native's id (n: compiled, n+100000: loaded). */
static int e2e_get(ccache *c, uint64_t n) {
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(c, PK(n), e2e_compile, NULL, &p);
  if (rc != CCACHE_OK) return -1;
  int id = t_id(ccache_program_native(p));
  ccache_program_release(c, p);
  return id;
}

static void e2e_entry_key(char *buf, size_t len, const char *tag, uint64_t n) {
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash(tag), ns);
  for (char *q = ns; *q; q++)
    if (*q == '/') *q = ':';
  entry_key(buf, len, "ccache", ns, n);
}

static void redis_e2e_hit_is_a_tier_hit_not_a_compile(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  ccache_redis_options o;
  opts(&o, s->addr);
  t_ctx ctx = {0};
  atomic_store(&e2e_compiles, 0);
  ccache *a = e2e_open(&ctx, &o, E2E_TAG);
  assert_int_equal(e2e_get(a, 1), 1); /* compiled */
  ccache_stats st = t_stats(a);
  assert_int_equal(st.program_compiles, 1);
  assert_int_equal(st.tier_misses, 1);
  assert_int_equal(st.tier_writes, 1);
  assert_int_equal(st.tier_hits + st.tier_errors + st.tier_corrupt, 0);
  /* Stored under <prefix>:v1:<tag hash>:<key>, lease released. */
  char key[256];
  e2e_entry_key(key, sizeof key, E2E_TAG, 1);
  assert_int_equal(rf_int(s, "EXISTS %s", key), 1);
  assert_int_equal(rf_int(s, "DBSIZE"), 1);
  long long entry_len = rf_int(s, "STRLEN %s", key);
  assert_true(entry_len > E2E_PAYLOAD);
  t_close(a);

  /* Another cache (another process would do the same): a tier hit. */
  ccache *b = e2e_open(&ctx, &o, E2E_TAG);
  assert_int_equal(e2e_get(b, 1), 100001); /* loaded from Redis */
  st = t_stats(b);
  assert_int_equal(st.program_misses, 1);
  assert_int_equal(st.tier_hits, 1);
  assert_int_equal(st.program_compiles, 0);
  assert_int_equal(st.tier_misses + st.tier_errors + st.tier_writes, 0);
  assert_int_equal(st.tier_bytes_read, entry_len);
  assert_int_equal(atomic_load(&e2e_compiles), 1);
  t_close(b);

  /* Another runtime tag lives in another namespace: a miss, a compile. */
  ccache *other = e2e_open(&ctx, &o, "test-runtime 2.0");
  assert_int_equal(e2e_get(other, 1), 1);
  st = t_stats(other);
  assert_int_equal(st.tier_misses, 1);
  assert_int_equal(st.tier_corrupt, 0);
  assert_int_equal(rf_int(s, "DBSIZE"), 2);
  t_close(other);

  /* A damaged entry: tier_corrupt, removed, compiled and stored again. */
  redisReply *r = rf_cmd(s, "SETRANGE %s 100 XYZ", key);
  assert_non_null(r);
  freeReplyObject(r);
  ccache *d = e2e_open(&ctx, &o, E2E_TAG);
  assert_int_equal(e2e_get(d, 1), 1);
  st = t_stats(d);
  assert_int_equal(st.tier_corrupt, 1);
  assert_int_equal(st.tier_writes, 1);
  assert_int_equal(st.tier_hits, 0);
  t_close(d);
  assert_int_equal(atomic_load(&e2e_compiles), 3);
  rf_stop(s);
}

/* Redis down: every miss compiles; each failed op counts once. */
static void redis_e2e_server_down_never_fails_a_fetch(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  rf_kill(s);
  ccache_redis_options o;
  opts(&o, s->addr);
  t_ctx ctx = {0};
  atomic_store(&e2e_compiles, 0);
  ccache *c = e2e_open(&ctx, &o, E2E_TAG);
  for (uint64_t k = 1; k <= 5; k++) assert_int_equal(e2e_get(c, k), (int)k);
  ccache_stats st = t_stats(c);
  assert_int_equal(st.program_compiles, 5);
  assert_int_equal(st.tier_misses, 5);
  /* Per miss: get, lock, the get after the lock step, put. */
  assert_int_equal(st.tier_errors, 20);
  assert_int_equal(st.tier_writes + st.tier_hits, 0);
  assert_int_equal(atomic_load(&e2e_compiles), 5);
  t_close(c);
  rf_stop(s);
}

/* One child of the fleet tests: its counts, through a pipe. */
typedef struct fleet_report {
  int ok;
  uint64_t compiles, tier_hits, tier_misses, tier_errors, lock_waits, wait_ms_max;
  uint32_t per_key[E2E_KEYS_COUNTED]; /* compiles of key n in this process */
} fleet_report;

static void fleet_send(int fd, ccache *c, int ok) {
  fleet_report rep;
  memset(&rep, 0, sizeof rep);
  ccache_stats st;
  st.size = sizeof st;
  ccache_stats_get(c, &st);
  rep.ok = ok;
  rep.compiles = atomic_load(&e2e_compiles);
  rep.tier_hits = st.tier_hits;
  rep.tier_misses = st.tier_misses;
  rep.tier_errors = st.tier_errors;
  rep.lock_waits = st.tier_lock_waits;
  rep.wait_ms_max = st.tier_wait_ms_max;
  for (int i = 0; i < E2E_KEYS_COUNTED; i++) rep.per_key[i] = atomic_load(&e2e_key_compiles[i]);
  if (write(fd, &rep, sizeof rep) != (ssize_t)sizeof rep) _exit(3);
}

static int fleet_recv(int fd, fleet_report *rep) {
  size_t got = 0;
  while (got < sizeof *rep) {
    ssize_t n = read(fd, (char *)rep + got, sizeof *rep - got);
    if (n <= 0) return -1;
    got += (size_t)n;
  }
  return 0;
}

#define FLEET_KEYS 24

/* Child: wait for the start signal, then get every key, starting at
 * offset `first` (so the processes collide on different keys). */
/* Child: wait for the start signal, then get every key, starting at
 * offset `first` (so the processes collide on different keys).  With
 * ready_fd >= 0 it runs in two halves: keys 1..FLEET_KEYS/2, then a byte
 * on ready_fd and a second start byte from go_fd, then the rest. */
static void fleet_child2(const char *servers, int go_fd, int ready_fd, int out_fd, int first) {
  atomic_store(&e2e_compiles, 0);
  for (int i = 0; i < E2E_KEYS_COUNTED; i++) atomic_store(&e2e_key_compiles[i], 0);
  ccache_redis_options o;
  opts(&o, servers);
  o.poll_ms = 1;
  o.poll_max_ms = 20;
  t_ctx ctx = {0};
  ccache_tier *t = NULL;
  if (ccache_tier_redis(&o, &t) != CCACHE_OK) _exit(4);
  ccache_config cfg;
  t_config(&cfg, &ctx);
  cfg.codec = &e2e_codec;
  cfg.runtime_tag = E2E_TAG;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &t;
  cfg.n_tiers = 1;
  ccache *c = NULL;
  if (ccache_open(&cfg, &c) != CCACHE_OK) _exit(5);
  char go;
  if (go_fd >= 0 && read(go_fd, &go, 1) != 1) _exit(6);
  int ok = 1;
  int parts = ready_fd >= 0 ? 2 : 1, per = FLEET_KEYS / parts;
  for (int part = 0; part < parts; part++) {
    if (part == 1 && (write(ready_fd, "R", 1) != 1 || read(go_fd, &go, 1) != 1)) _exit(7);
    for (int i = 0; i < per; i++) {
      uint64_t k = (uint64_t)(part * per + (first + i) % per) + 1;
      int id = e2e_get(c, k);
      ok = ok && (id == (int)k || id == (int)k + 100000);
    }
  }
  fleet_send(out_fd, c, ok);
  ccache_close(c);
  child_exit(0);
}

static void fleet_child(const char *servers, int go_fd, int out_fd, int first) {
  fleet_child2(servers, go_fd, -1, out_fd, first);
}

static void redis_e2e_four_processes_compile_each_key_once(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  int go[2], out[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(out), 0);
  fflush(NULL);
  pid_t pid[5];
  for (int i = 0; i < 4; i++) {
    pid[i] = fork();
    assert_true(pid[i] >= 0);
    if (pid[i] == 0) {
      close(go[1]);
      close(out[0]);
      fleet_child(s->addr, go[0], out[1], i * (FLEET_KEYS / 8));
    }
  }
  close(go[0]);
  assert_int_equal(write(go[1], "GGGG", 4), 4); /* all four start together */
  close(go[1]);
  fleet_report rep[5];
  uint64_t compiles = 0, hits = 0, errors = 0;
  for (int i = 0; i < 4; i++) {
    assert_int_equal(fleet_recv(out[0], &rep[i]), 0);
    assert_true(rep[i].ok);
    compiles += rep[i].compiles;
    hits += rep[i].tier_hits;
    errors += rep[i].tier_errors;
    assert_int_equal(rep[i].tier_hits + rep[i].tier_misses, FLEET_KEYS);
    assert_int_equal(rep[i].compiles, rep[i].tier_misses);
  }
  for (int i = 0; i < 4; i++) {
    int st = 0;
    assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  print_message("4 processes, %d keys: %llu compiles, %llu tier hits\n", FLEET_KEYS,
                (unsigned long long)compiles, (unsigned long long)hits);
  assert_int_equal(compiles, FLEET_KEYS); /* exactly once per key, fleet-wide */
  assert_int_equal(hits, 4 * FLEET_KEYS - FLEET_KEYS);
  assert_int_equal(errors, 0);
  assert_int_equal(rf_int(s, "DBSIZE"), FLEET_KEYS); /* entries only: no lease left */

  /* A fifth process, afterwards: everything from Redis. */
  pid[4] = fork();
  assert_true(pid[4] >= 0);
  if (pid[4] == 0) fleet_child(s->addr, -1, out[1], 0);
  assert_int_equal(fleet_recv(out[0], &rep[4]), 0);
  int st = 0;
  assert_int_equal(waitpid(pid[4], &st, 0), pid[4]);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_true(rep[4].ok);
  assert_int_equal(rep[4].compiles, 0);
  assert_int_equal(rep[4].tier_hits, FLEET_KEYS);
  assert_int_equal(rep[4].tier_errors, 0);
  close(out[0]);
  close(out[1]);
  rf_stop(s);
}

/* A compile longer than the lease keeps it: the renewal thread renews it
 * every lease/3 through the tier's renew op.  The compile watches the
 * lease's TTL in Redis and returns after it has gone back up four times
 * (four renewals, 4 x lease/3 > lease), so without renewals it could not
 * finish (the bounded wait would fail it). */
#define RENEW_LEASE_MS 300
static rf_server *renew_srv;
static char renew_key[256];
static int renew_seen, renew_expired;

static int renewing_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                            uint64_t *cost_out) {
  (void)ud, (void)c;
  long long last = rf_int(renew_srv, "PTTL %s", renew_key);
  unsigned long long deadline = rf_now_ms() + WAIT_MS;
  while (renew_seen < 4 && rf_now_ms() < deadline) {
    long long now = rf_int(renew_srv, "PTTL %s", renew_key);
    if (now < 0) { /* expired (-2) or no TTL (-1): the lease was lost */
      renew_expired = 1;
      break;
    }
    if (now > last) renew_seen++;
    last = now;
    rf_poll_pause();
  }
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return 0;
}

static void redis_e2e_lease_renewed_through_a_long_compile(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  renew_srv = s;
  renew_seen = renew_expired = 0;
  e2e_entry_key(renew_key, sizeof renew_key, E2E_TAG, 31);
  strcat(renew_key, ":lease");
  ccache_redis_options o;
  opts(&o, s->addr);
  o.lease_ms = RENEW_LEASE_MS;
  t_ctx ctx = {0};
  ccache *c = e2e_open(&ctx, &o, E2E_TAG);
  ccache_program *p = NULL;
  assert_int_equal(ccache_program_get_or_compile(c, PK(31), renewing_compile, NULL, &p), CCACHE_OK);
  ccache_program_release(c, p);
  assert_false(renew_expired);
  assert_int_equal(renew_seen, 4);
  ccache_stats st = t_stats(c);
  assert_int_equal(st.tier_errors, 0); /* no renewal failed */
  assert_int_equal(st.tier_writes, 1);
  assert_int_equal(rf_int(s, "EXISTS %s", renew_key), 0); /* released */
  t_close(c);
  rf_stop(s);
}

#define HOLDER_LEASE_MS    600
#define HOLDER_POLL_MAX_MS 50
#define HOLDER_KEY         77

static int holder_block_fd = -1, holder_note_fd = -1;

/* The holder's compile: announce, then block until killed. */
static int holder_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                          uint64_t *cost_out) {
  (void)ud, (void)c, (void)pkey, (void)native_out, (void)cost_out;
  if (write(holder_note_fd, "H", 1) != 1) _exit(7);
  char x;
  while (read(holder_block_fd, &x, 1) != 0) {
  }
  _exit(8); /* never reached: killed first */
}

static void holder_child(const char *servers) {
  ccache_redis_options o;
  opts(&o, servers);
  o.lease_ms = HOLDER_LEASE_MS;
  t_ctx ctx = {0};
  ccache *c = e2e_open(&ctx, &o, E2E_TAG);
  ccache_program *p = NULL;
  ccache_program_get_or_compile(c, PK(HOLDER_KEY), holder_compile, NULL, &p);
  _exit(9);
}

static void waiter_child(const char *servers, int out_fd) {
  atomic_store(&e2e_compiles, 0);
  ccache_redis_options o;
  opts(&o, servers);
  o.lease_ms = HOLDER_LEASE_MS;
  o.poll_ms = 5;
  o.poll_max_ms = HOLDER_POLL_MAX_MS;
  o.wait_ms = 10000; /* a lease that never lapsed would end in a local compile */
  t_ctx ctx = {0};
  ccache *c = e2e_open(&ctx, &o, E2E_TAG);
  int id = e2e_get(c, HOLDER_KEY);
  fleet_send(out_fd, c, id == HOLDER_KEY || id == HOLDER_KEY + 100000);
  ccache_close(c);
  child_exit(0);
}

/* The lease holder dies mid-compile: its lease runs out (no renewals), one
 * waiter takes over and compiles, the others load its result; nobody waits
 * much past the lease plus one backoff step. */
static void redis_e2e_lease_holder_killed_mid_compile(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  int note[2], block[2], out[2];
  assert_int_equal(pipe(note), 0);
  assert_int_equal(pipe(block), 0);
  assert_int_equal(pipe(out), 0);
  fflush(NULL);
  pid_t holder = fork();
  assert_true(holder >= 0);
  if (holder == 0) {
    holder_note_fd = note[1];
    holder_block_fd = block[0];
    close(block[1]);
    holder_child(s->addr);
  }
  close(note[1]);
  close(block[0]);
  char h = 0;
  assert_int_equal(read(note[0], &h, 1), 1); /* compiling, lease held */
  assert_int_equal(h, 'H');
  char lkey[256];
  e2e_entry_key(lkey, sizeof lkey, E2E_TAG, HOLDER_KEY);
  strcat(lkey, ":lease");
  assert_int_equal(rf_int(s, "EXISTS %s", lkey), 1);
  pid_t w[3];
  for (int i = 0; i < 3; i++) {
    w[i] = fork();
    assert_true(w[i] >= 0);
    if (w[i] == 0) waiter_child(s->addr, out[1]);
  }
  kill(holder, SIGKILL);
  unsigned long long killed_at = rf_now_ms();
  int st = 0;
  assert_int_equal(waitpid(holder, &st, 0), holder);
  assert_true(WIFSIGNALED(st));
  uint64_t compiles = 0, hits = 0;
  for (int i = 0; i < 3; i++) {
    fleet_report rep;
    assert_int_equal(fleet_recv(out[0], &rep), 0);
    assert_true(rep.ok);
    compiles += rep.compiles;
    hits += rep.tier_hits;
    assert_int_equal(rep.tier_errors, 0);
    assert_int_equal(rep.lock_waits, 1);
    print_message("waiter: compiles %llu, tier hits %llu, waited %llu ms (lease %d + step %d)\n",
                  (unsigned long long)rep.compiles, (unsigned long long)rep.tier_hits,
                  (unsigned long long)rep.wait_ms_max, HOLDER_LEASE_MS, HOLDER_POLL_MAX_MS);
    /* The lease plus one backoff step, with room for two busy shared cores
     * (a waiter polling until wait_ms would take 120 s). */
    assert_true(rep.wait_ms_max <= HOLDER_LEASE_MS + HOLDER_POLL_MAX_MS + 400);
  }
  for (int i = 0; i < 3; i++) {
    assert_int_equal(waitpid(w[i], &st, 0), w[i]);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  print_message("all waiters done %llu ms after the kill\n", rf_now_ms() - killed_at);
  assert_int_equal(compiles, 1); /* at most one extra compile: exactly the takeover */
  assert_int_equal(hits, 2);
  assert_int_equal(rf_int(s, "EXISTS %s", lkey), 0);
  close(note[0]);
  close(block[1]);
  close(out[0]);
  close(out[1]);
  rf_stop(s);
}

/* CLOSURE_CACHE_REDIS adds a Redis tier to the default instance (which
 * exists once per process: each scenario runs in a child). */
static int env_child(const char *value, int use_codec, int expect_id, int expect_rc) {
  if (value)
    setenv("CLOSURE_CACHE_REDIS", value, 1);
  else
    unsetenv("CLOSURE_CACHE_REDIS");
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.sweeper_thread = 0;
  cfg.destroy_program = t_destroy_program;
  t_ctx ctx = {0};
  cfg.ctx = &ctx;
  cfg.codec = use_codec ? &e2e_codec : NULL;
  cfg.runtime_tag = E2E_TAG;
  cfg.tier_min_compile_us = 0;
  if (ccache_default_init(&cfg) != CCACHE_OK) return 20;
  ccache *c = NULL;
  int rc = ccache_default(&c);
  if (rc != expect_rc) return 21;
  if (rc != CCACHE_OK) return strstr(ccache_error_detail(), "CLOSURE_CACHE_REDIS") ? 0 : 22;
  if (e2e_get(c, 5) != expect_id) return 23;
  return 0;
}

static void run_env_child(const char *value, int use_codec, int expect_id, int expect_rc) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) child_exit(env_child(value, use_codec, expect_id, expect_rc));
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

static void redis_default_instance_from_environment(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  run_env_child(s->addr, 1, 5, CCACHE_OK); /* compiled, stored */
  assert_int_equal(rf_int(s, "DBSIZE"), 1);
  run_env_child(s->addr, 1, 100005, CCACHE_OK); /* another process: from Redis */
  run_env_child(NULL, 1, 5, CCACHE_OK);         /* unset: no tier */
  run_env_child(s->addr, 0, 5, CCACHE_OK);      /* no codec: ignored */
  run_env_child("not-a-server-list", 1, 0, CCACHE_EINVAL);
  assert_int_equal(rf_int(s, "DBSIZE"), 1);
  rf_stop(s);
}

/* ------------------------------------------------------ issue 20 faults */

/* The socket inode of a connection, as /proc/<pid>/fd shows it. */
static unsigned long sock_ino(int fd) {
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  return (unsigned long)st.st_ino;
}

/* fork + exec `ls -l /proc/self/fd` and return its output (malloc'd). */
static char *exec_ls_fds(void) {
  int out[2];
  assert_int_equal(pipe(out), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(out[1], 1);
    execl("/bin/ls", "ls", "-l", "/proc/self/fd", (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  size_t cap = 1 << 16, got = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  ssize_t n;
  while ((n = read(out[0], buf + got, cap - 1 - got)) > 0) got += (size_t)n;
  buf[got] = '\0';
  close(out[0]);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return buf;
}

/* Item 5: the tier's sockets (a pooled connection and the renewal one, TCP
 * and unix) never reach an exec'd child. */
static void redis_sockets_close_on_exec(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  char list[400];
  snprintf(list, sizeof list, "%s,%s", s->addr, s->unix_addr);
  be b;
  be_open_simple(&b, list);
  /* A key on each server: a pooled connection and a renewal one on each. */
  uint64_t key_of[2] = {0, 0};
  for (uint64_t n = 1; n < 100 && (!key_of[0] || !key_of[1]); n++) {
    size_t srv = ccache__redis_server_of(b.r, PK(n));
    if (!key_of[srv]) key_of[srv] = n;
  }
  assert_true(key_of[0] && key_of[1]);
  void *l[2];
  for (int i = 0; i < 2; i++) {
    assert_int_equal(put_n(&b, key_of[i], 100), CCACHE_OK);
    assert_int_equal(b.ops.lock(b.r, PK(key_of[i]), &l[i]), CCACHE_OK);
    assert_int_equal(b.ops.renew(b.r, l[i]), CCACHE_OK);
  }
  ccache__rpool *p = ccache__redis_pool(b.r);
  unsigned long ino[4];
  int nino = 0;
  for (int i = 0; i < 2; i++) {
    assert_int_equal(p->servers[i].n_idle, 1);
    ino[nino++] = sock_ino(p->servers[i].idle[0]->fd);
    assert_non_null(p->servers[i].renew_ctx);
    ino[nino++] = sock_ino(p->servers[i].renew_ctx->fd);
  }
  char *ls = exec_ls_fds();
  int leaked = 0;
  for (int i = 0; i < nino; i++) {
    char pat[48];
    snprintf(pat, sizeof pat, "socket:[%lu]", ino[i]);
    if (strstr(ls, pat)) {
      print_message("leaked into the child: %s\n", pat);
      leaked++;
    }
  }
  free(ls);
  for (int i = 0; i < 2; i++) b.ops.unlock(b.r, l[i]);
  be_close(&b);
  rf_stop(s);
  assert_int_equal(leaked, 0);
}

/* Item 4, the backend alone: remove_if deletes only the value read. */
static void redis_remove_if_only_the_value_read(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  be b;
  be_open_simple(&b, s->addr);
  unsigned char *old = payload(5, 3000), *newer = payload(6, 3000), *tiny = payload(7, 5);
  assert_int_equal(b.ops.put(b.r, PK(5), old, 3000), CCACHE_OK);
  /* Another process replaces it between our read and our remove. */
  assert_int_equal(b.ops.put(b.r, PK(5), newer, 3000), CCACHE_OK);
  assert_int_equal(b.ops.remove_if(b.r, PK(5), old, 3000), CCACHE_MISS);
  assert_int_equal(b.ops.remove_if(b.r, PK(5), newer, 2999), CCACHE_MISS); /* length differs */
  /* Same length and same last 16 bytes, another byte in the body: kept. */
  unsigned char *body = payload(6, 3000);
  body[100] ^= 1;
  assert_int_equal(b.ops.remove_if(b.r, PK(5), body, 3000), CCACHE_MISS);
  free(body);
  void *blob = NULL;
  size_t len = 0;
  assert_int_equal(b.ops.get(b.r, PK(5), &blob, &len), CCACHE_OK);
  assert_true(len == 3000 && memcmp(blob, newer, len) == 0);
  b.ops.free_blob(b.r, blob, len);
  assert_int_equal(b.ops.remove_if(b.r, PK(5), newer, 3000), CCACHE_OK);
  assert_int_equal(b.ops.get(b.r, PK(5), &blob, &len), CCACHE_MISS);
  /* Shorter than the trailer, and empty. */
  assert_int_equal(b.ops.put(b.r, PK(7), tiny, 5), CCACHE_OK);
  assert_int_equal(b.ops.remove_if(b.r, PK(7), tiny, 5), CCACHE_OK);
  assert_int_equal(b.ops.put(b.r, PK(7), NULL, 0), CCACHE_OK);
  assert_int_equal(b.ops.remove_if(b.r, PK(7), NULL, 0), CCACHE_OK);
  assert_int_equal(b.ops.remove_if(b.r, PK(7), NULL, 0), CCACHE_MISS);
  assert_int_equal(rf_int(s, "DBSIZE"), 0);
  ccache__rcounters c = cnt(&b);
  assert_int_equal(c.reply_errors + c.io_errors, 0);
  free(old);
  free(newer);
  free(tiny);
  be_close(&b);
  rf_stop(s);
}

/* The hook of the next test: publish the saved valid entry just before the
 * first command after the lookup's GET (the removal of the bad entry). */
static rf_server *race_srv;
static char race_key[256];
static char *race_valid;
static size_t race_valid_len;
static int race_armed, race_published;

static void race_hook(void *arg, size_t server, const char *cmd) {
  (void)arg, (void)server;
  if (!race_armed || strcmp(cmd, "GET") == 0) return;
  race_armed = 0;
  redisReply *r = rf_cmd(race_srv, "SET %s %b", race_key, race_valid, race_valid_len);
  race_published = r && r->type == REDIS_REPLY_STATUS;
  if (r) freeReplyObject(r);
}

/* Item 4 through the core: a valid entry published between the read of a
 * damaged one and its removal survives, and is loaded (no compile). */
static void redis_e2e_entry_published_between_read_and_remove_survives(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  ccache_redis_options o;
  opts(&o, s->addr);
  t_ctx ctx = {0};
  atomic_store(&e2e_compiles, 0);
  ccache *a = e2e_open(&ctx, &o, E2E_TAG);
  assert_int_equal(e2e_get(a, 1), 1); /* compiled and stored */
  t_close(a);
  race_srv = s;
  e2e_entry_key(race_key, sizeof race_key, E2E_TAG, 1);
  redisReply *r = rf_cmd(s, "GET %s", race_key);
  assert_true(r && r->type == REDIS_REPLY_STRING);
  race_valid_len = r->len;
  race_valid = malloc(r->len);
  assert_non_null(race_valid);
  memcpy(race_valid, r->str, r->len);
  freeReplyObject(r);
  r = rf_cmd(s, "SETRANGE %s 100 XYZ", race_key); /* damaged */
  assert_non_null(r);
  freeReplyObject(r);

  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_redis(&o, &t), CCACHE_OK);
  ccache__redis_set_hook((ccache__redis *)t->state, race_hook, NULL);
  ccache_config cfg;
  t_config(&cfg, &ctx);
  cfg.codec = &e2e_codec;
  cfg.runtime_tag = E2E_TAG;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &t;
  cfg.n_tiers = 1;
  ccache *b = NULL;
  assert_int_equal(ccache_open(&cfg, &b), CCACHE_OK);
  race_armed = 1;
  race_published = 0;
  int id = e2e_get(b, 1);
  ccache_stats st = t_stats(b);
  print_message("after the race: id %d, compiles %llu, tier_corrupt %llu, tier_hits %llu\n", id,
                (unsigned long long)atomic_load(&e2e_compiles), (unsigned long long)st.tier_corrupt,
                (unsigned long long)st.tier_hits);
  assert_true(race_published);
  assert_int_equal(st.tier_corrupt, 1);
  assert_int_equal(id, 100001); /* loaded: the entry published meanwhile stayed */
  assert_int_equal(st.tier_hits, 1);
  assert_int_equal(st.program_compiles, 0);
  assert_int_equal(atomic_load(&e2e_compiles), 1); /* the first cache's only */
  r = rf_cmd(s, "GET %s", race_key);
  assert_true(r && r->type == REDIS_REPLY_STRING && r->len == race_valid_len &&
              memcmp(r->str, race_valid, race_valid_len) == 0);
  freeReplyObject(r);
  free(race_valid);
  race_valid = NULL;
  t_close(b);
  rf_stop(s);
}

/* Item 10: each server of a Redis tier is a part of its health report. */
static ccache *health_cache;
static ccache_tier_health health_during;
static int health_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                          uint64_t *cost_out) {
  (void)ud, (void)c;
  health_during.size = sizeof health_during;
  ccache_tier_health_get(health_cache, 0, 0, &health_during); /* the lease is held */
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return 0;
}

static void redis_tier_health_reports_each_server(void **state) {
  (void)state;
  need_redis();
  start(&servers[0], NULL);
  start(&servers[1], NULL);
  rf_kill(&servers[1]); /* B is down from the start */
  char list[80];
  snprintf(list, sizeof list, "%s,%s", servers[0].addr, servers[1].addr);
  ccache_redis_options o;
  opts(&o, list);
  o.reconnect_min_ms = o.reconnect_max_ms = 60000;
  o.poll_ms = 1;
  o.poll_max_ms = 5;
  be pick;
  be_open_simple(&pick, list);
  uint64_t ka = 0, kb = 0;
  for (uint64_t n = 500; n < 700 && (!ka || !kb); n++) {
    size_t srv = ccache__redis_server_of(pick.r, PK(n));
    if (srv == 0 && !ka) ka = n;
    if (srv == 1 && !kb) kb = n;
  }
  be_close(&pick);
  t_ctx ctx = {0};
  ccache *c = e2e_open(&ctx, &o, E2E_TAG);
  health_cache = c;
  /* A's lease is held by "another process" for 50 ms: waits, then ours. */
  char lkey[256];
  e2e_entry_key(lkey, sizeof lkey, E2E_TAG, ka);
  strcat(lkey, ":lease");
  redisReply *r = rf_cmd(&servers[0], "SET %s other PX 50", lkey);
  assert_non_null(r);
  freeReplyObject(r);
  ccache_program *p = NULL;
  memset(&health_during, 0, sizeof health_during);
  assert_int_equal(ccache_program_get_or_compile(c, PK(ka), health_compile, NULL, &p), CCACHE_OK);
  ccache_program_release(c, p);
  assert_int_equal(e2e_get(c, kb), (int)kb); /* B down: compiled, stored on A */
  assert_int_equal(health_during.leases_held, 1);
  ccache_tier_health h[2];
  for (uint32_t i = 0; i < 2; i++) {
    memset(&h[i], 0, sizeof h[i]);
    h[i].size = sizeof h[i];
    assert_int_equal(ccache_tier_health_get(c, 0, i, &h[i]), CCACHE_OK);
    assert_int_equal(h[i].parts, 2);
    assert_string_equal(h[i].kind, "redis");
    assert_string_equal(h[i].where, servers[i].addr);
    print_message(
        "%s: status %u, backoff %llu ms (%llu left), errors %llu, leases %llu held "
        "%llu lost, lock waits %llu, last error \"%s\"\n",
        h[i].where, h[i].status, (unsigned long long)h[i].backoff_ms,
        (unsigned long long)h[i].backoff_left_ms, (unsigned long long)h[i].errors,
        (unsigned long long)h[i].leases_held, (unsigned long long)h[i].leases_lost,
        (unsigned long long)h[i].lock_waits, h[i].last_error);
  }
  ccache_tier_health end;
  end.size = sizeof end;
  assert_int_equal(ccache_tier_health_get(c, 0, 2, &end), CCACHE_MISS);
  assert_int_equal(ccache_tier_health_get(c, 1, 0, &end), CCACHE_MISS);
  assert_int_equal(h[0].status, CCACHE_TIER_UP);
  assert_int_equal(h[0].errors, 0);
  assert_int_equal(h[0].backoff_ms, 0);
  assert_string_equal(h[0].last_error, "");
  assert_true(h[0].lock_waits >= 1);
  assert_int_equal(h[0].leases_held, 0);
  assert_int_equal(h[1].status, CCACHE_TIER_DOWN);
  assert_int_equal(h[1].backoff_ms, 60000);
  assert_true(h[1].backoff_left_ms > 0 && h[1].backoff_left_ms <= 60000);
  /* ka's first miss on A looks for a fallback copy on B: refused at
   * connect (later misses pass B over in its backoff, uncounted); then kb's
   * get, lock, get, put each refused on B in backoff, and answered by A,
   * its fallback, which took kb's lease and entry. */
  assert_int_equal(h[1].errors, 5);
  assert_non_null(strstr(h[1].last_error, "connect"));
  assert_int_equal(h[1].leases_held + h[1].lock_waits, 0);
  assert_int_equal(h[0].fallback_writes, 2);
  assert_int_equal(h[0].fallback_reads, 0);
  assert_int_equal(h[1].fallback_writes + h[1].fallback_reads + h[1].failovers, 0);
  assert_int_equal(h[0].failovers, 0);
  ccache_stats st = t_stats(c);
  assert_int_equal(st.tier_errors, 0); /* every op found a server that answered */
  t_close(c);
  rf_stop(&servers[0]);
  rf_stop(&servers[1]);
}

/* A fake server for the timeout tests: accepts one connection on
 * 127.0.0.1, reads the request, then answers a bulk string one byte every
 * trickle_ms, until told to stop. */
typedef struct trickler {
  int lfd, port, trickle_ms;
  _Atomic int stop;
  _Atomic int sent;
  pthread_t t;
} trickler;

static void *trickle_main(void *arg) {
  trickler *tr = arg;
  int fd = -1;
  while (fd < 0 && !atomic_load(&tr->stop)) {
    struct pollfd pf = {tr->lfd, POLLIN, 0};
    if (poll(&pf, 1, 10) == 1) fd = accept(tr->lfd, NULL, NULL);
  }
  if (fd < 0) return NULL;
  char req[4096];
  struct pollfd pf = {fd, POLLIN, 0};
  if (poll(&pf, 1, (int)WAIT_MS) == 1 && read(fd, req, sizeof req) > 0) {
    const char head[] = "$1000\r\n";
    if (write(fd, head, sizeof head - 1) == (ssize_t)sizeof head - 1) {
      while (!atomic_load(&tr->stop) && atomic_load(&tr->sent) < 1000) {
        struct timespec ts = {0, (long)tr->trickle_ms * 1000000L};
        nanosleep(&ts, NULL);
        if (send(fd, "x", 1, MSG_NOSIGNAL) != 1) break;
        atomic_fetch_add(&tr->sent, 1);
      }
    }
  }
  close(fd);
  return NULL;
}

static void trickler_start(trickler *tr, int trickle_ms) {
  memset(tr, 0, sizeof *tr);
  tr->trickle_ms = trickle_ms;
  tr->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(tr->lfd >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(tr->lfd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  assert_int_equal(getsockname(tr->lfd, (struct sockaddr *)&a, &len), 0);
  tr->port = ntohs(a.sin_port);
  assert_int_equal(listen(tr->lfd, 4), 0);
  assert_int_equal(pthread_create(&tr->t, NULL, trickle_main, tr), 0);
}

static void trickler_stop(trickler *tr) {
  atomic_store(&tr->stop, 1);
  pthread_join(tr->t, NULL);
  close(tr->lfd);
}

typedef struct timed_fetch {
  ccache *c;
  uint64_t n;
  int id;
  unsigned long long took_ms;
  async_get sync; /* only its mu/cv/done */
} timed_fetch;

static void *timed_fetch_main(void *arg) {
  timed_fetch *f = arg;
  unsigned long long t0 = rf_now_ms();
  int id = e2e_get(f->c, f->n);
  unsigned long long took = rf_now_ms() - t0;
  pthread_mutex_lock(&f->sync.mu);
  f->id = id;
  f->took_ms = took;
  f->sync.done = 1;
  pthread_cond_broadcast(&f->sync.cv);
  pthread_mutex_unlock(&f->sync.mu);
  return NULL;
}

#define TRICKLE_TIMEOUT_MS 300
#define TRICKLE_STEP_MS    200 /* a byte well inside each read's timeout */

/* Item 6: a server trickling its reply a byte at a time, each just inside
 * the timeout, cannot hold a fetch past command_timeout_ms + 50 ms. */
static void redis_command_timeout_bounds_the_whole_command(void **state) {
  (void)state;
  trickler tr;
  trickler_start(&tr, TRICKLE_STEP_MS);
  char addr[32];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", tr.port);
  ccache_redis_options o;
  opts(&o, addr);
  o.command_timeout_ms = TRICKLE_TIMEOUT_MS;
  o.reconnect_min_ms = o.reconnect_max_ms = 3600000; /* no second connect */
  t_ctx ctx = {0};
  atomic_store(&e2e_compiles, 0);
  ccache *c = e2e_open(&ctx, &o, E2E_TAG);
  timed_fetch f;
  memset(&f, 0, sizeof f);
  f.c = c;
  f.n = 3;
  pthread_mutex_init(&f.sync.mu, NULL);
  pthread_cond_init(&f.sync.cv, NULL);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, timed_fetch_main, &f), 0);
  int finished = async_wait(&f.sync, 5 * TRICKLE_TIMEOUT_MS + 2000);
  int sent = atomic_load(&tr.sent);
  trickler_stop(&tr); /* ends a fetch the timeout did not */
  pthread_join(t, NULL);
  print_message("fetch took %llu ms (command_timeout_ms %d, a byte every %d ms; %d sent)\n",
                f.took_ms, TRICKLE_TIMEOUT_MS, TRICKLE_STEP_MS, sent);
  assert_true(finished);
  assert_int_equal(f.id, 3); /* compiled: the tier failed, the fetch did not */
  assert_true(f.took_ms <= TRICKLE_TIMEOUT_MS + 50);
  ccache_stats st = t_stats(c);
  assert_int_equal(st.program_compiles, 1);
  assert_true(st.tier_errors >= 1);
  t_close(c);
}

/* The backoff step of server i (0 when healthy). */
static uint64_t backoff_of(be *b, size_t i) {
  ccache__rserver *s = &ccache__redis_pool(b->r)->servers[i];
  ccache__lock(&s->mu);
  uint64_t v = s->backoff_ms;
  ccache__unlock(&s->mu);
  return v;
}

/* Wait (bounded) until server i may be connected again. */
static void wait_backoff_over(be *b, size_t i) {
  ccache__rserver *s = &ccache__redis_pool(b->r)->servers[i];
  unsigned long long deadline = rf_now_ms() + WAIT_MS;
  for (;;) {
    ccache__lock(&s->mu);
    uint64_t until = s->down_until_ms;
    ccache__unlock(&s->mu);
    if (rf_now_ms() > until || rf_now_ms() > deadline) break;
    rf_poll_pause();
  }
}

/* Item 7: a stopped server whose listen backlog is open accepts every
 * connect and answers nothing: it is backed off like an unreachable one
 * (the step doubles), and only an answered command resets the backoff. */
static void redis_accepting_but_silent_server_is_backed_off(void **state) {
  (void)state;
  need_redis();
  rf_server *s = &servers[0];
  start(s, NULL);
  ccache_redis_options o;
  opts(&o, s->addr);
  o.command_timeout_ms = 100;
  o.reconnect_min_ms = 40;
  o.reconnect_max_ms = 320;
  be b;
  be_open(&b, &o, NS);
  rf_pause(s);
  static const uint64_t want[] = {40, 80, 160, 320, 320};
  uint64_t got[5];
  for (int i = 0; i < 5; i++) {
    wait_backoff_over(&b, 0);
    assert_int_equal(get_check(&b, 1, 10), CCACHE_EIO);
    got[i] = backoff_of(&b, 0);
  }
  print_message("backoff after each timed-out command: %llu %llu %llu %llu %llu ms\n",
                (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2],
                (unsigned long long)got[3], (unsigned long long)got[4]);
  ccache__rcounters c = cnt(&b);
  rf_resume(s);
  assert_int_equal(c.connects, 5); /* every connect succeeded ... */
  assert_int_equal(c.connect_failures, 0);
  assert_int_equal(c.io_errors, 5); /* ... and led nowhere */
  for (int i = 0; i < 5; i++) assert_int_equal(got[i], want[i]);
  /* The server answers again: the first answered command resets it. */
  wait_backoff_over(&b, 0);
  assert_int_equal(get_check(&b, 1, 10), CCACHE_MISS);
  assert_int_equal(backoff_of(&b, 0), 0);
  be_close(&b);
  rf_stop(s);
}

/* Item 1: a stalled server never starves the renewals of another.  This
 * process holds a lease on server A (an outer compile) and, nested, one on
 * server B for a 3 s compile (lease_ms 600, command_timeout_ms 2000); A is
 * SIGSTOPped as the inner compile starts, so A's next renew (due within
 * lease/3) blocks for the whole command timeout.  B's lease must never
 * lapse, and a second process waiting on B's key must load the entry
 * published at the end (0 compiles). */
#define STALL_LEASE_MS   600
#define STALL_TIMEOUT_MS 2000
#define STALL_COMPILE_MS 3000

static uint64_t stall_key_a, stall_key_b;
static int stall_go_fd = -1;
static char stall_lease_b[256];
static long long stall_min_pttl;
static int stall_lapsed;

static int stall_inner_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                               uint64_t *cost_out) {
  (void)ud, (void)c;
  rf_pause(&servers[0]); /* A stops answering: its renew is due within lease/3 */
  if (write(stall_go_fd, "G", 1) != 1) stall_lapsed = 1; /* the waiter starts */
  unsigned long long end = rf_now_ms() + STALL_COMPILE_MS;
  stall_min_pttl = STALL_LEASE_MS;
  while (rf_now_ms() < end) { /* the compile: 3 s, watching B's lease */
    long long pttl = rf_int(&servers[1], "PTTL %s", stall_lease_b);
    if (pttl < 0) stall_lapsed = 1; /* -2: gone (lapsed) */
    if (pttl < stall_min_pttl) stall_min_pttl = pttl;
    rf_poll_pause();
  }
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return 0;
}

static int stall_outer_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                               uint64_t *cost_out) {
  (void)ud;
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(c, PK(stall_key_b), stall_inner_compile, NULL, &p);
  if (rc == CCACHE_OK) ccache_program_release(c, p);
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return rc;
}

static void redis_e2e_stalled_server_never_starves_renewals(void **state) {
  (void)state;
  need_redis();
  start(&servers[0], NULL);
  start(&servers[1], NULL);
  char list[80];
  snprintf(list, sizeof list, "%s,%s", servers[0].addr, servers[1].addr);
  be pick;
  be_open_simple(&pick, list);
  stall_key_a = stall_key_b = 0;
  for (uint64_t n = 200; n < 400 && (!stall_key_a || !stall_key_b); n++) {
    size_t srv = ccache__redis_server_of(pick.r, PK(n));
    if (srv == 0 && !stall_key_a) stall_key_a = n;
    if (srv == 1 && !stall_key_b) stall_key_b = n;
  }
  be_close(&pick);
  assert_true(stall_key_a && stall_key_b);
  e2e_entry_key(stall_lease_b, sizeof stall_lease_b, E2E_TAG, stall_key_b);
  strcat(stall_lease_b, ":lease");

  int go[2], out[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(out), 0);
  fflush(NULL);
  pid_t w = fork();
  assert_true(w >= 0);
  if (w == 0) { /* the second process: waits on B's key */
    close(go[1]);
    char g;
    if (read(go[0], &g, 1) != 1) child_exit(30);
    atomic_store(&e2e_compiles, 0);
    ccache_redis_options o;
    opts(&o, list);
    o.lease_ms = STALL_LEASE_MS;
    o.command_timeout_ms = STALL_TIMEOUT_MS;
    o.poll_ms = 5;
    o.poll_max_ms = 50;
    o.wait_ms = 4 * STALL_COMPILE_MS; /* a lease held to the end is waited for */
    t_ctx wctx = {0};
    ccache *wc = e2e_open(&wctx, &o, E2E_TAG);
    int id = e2e_get(wc, stall_key_b);
    fleet_send(out[1], wc, id == (int)stall_key_b || id == (int)stall_key_b + 100000);
    ccache_close(wc);
    child_exit(0);
  }
  close(go[0]);
  stall_go_fd = go[1];
  stall_lapsed = 0;
  atomic_store(&e2e_compiles, 0);
  ccache_redis_options o;
  opts(&o, list);
  o.lease_ms = STALL_LEASE_MS;
  o.command_timeout_ms = STALL_TIMEOUT_MS;
  o.reconnect_min_ms = o.reconnect_max_ms = 60000; /* A, once failed, is left alone */
  t_ctx ctx = {0};
  ccache *c = e2e_open(&ctx, &o, E2E_TAG);
  ccache_program *p = NULL;
  unsigned long long t0 = rf_now_ms();
  int rc = ccache_program_get_or_compile(c, PK(stall_key_a), stall_outer_compile, NULL, &p);
  unsigned long long took = rf_now_ms() - t0;
  if (rc == CCACHE_OK) ccache_program_release(c, p);
  rf_resume(&servers[0]);
  fleet_report rep;
  int got = fleet_recv(out[0], &rep);
  int st = 0;
  assert_int_equal(waitpid(w, &st, 0), w);
  ccache_stats cs = t_stats(c);
  print_message(
      "B's lease: lowest PTTL %lld ms, lapsed %d; the waiter: compiles %llu, tier hits "
      "%llu; here: leases lost %llu, tier errors %llu (%llu ms)\n",
      stall_min_pttl, stall_lapsed, (unsigned long long)rep.compiles,
      (unsigned long long)rep.tier_hits, (unsigned long long)cs.tier_leases_lost,
      (unsigned long long)cs.tier_errors, took);
  assert_int_equal(rc, CCACHE_OK);
  assert_int_equal(got, 0);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_true(rep.ok);
  assert_false(stall_lapsed);
  assert_int_equal(rep.compiles, 0); /* loaded what this process published */
  assert_int_equal(rep.tier_hits, 1);
  assert_int_equal(cs.program_compiles, 2);
  assert_int_equal(cs.tier_leases_lost, 1); /* A's, and only A's */
  close(go[1]);
  close(out[0]);
  close(out[1]);
  t_close(c);
  rf_stop(&servers[0]);
  rf_stop(&servers[1]);
}

/* ------------------------------------------------------------ fallback */
/* A key's rendezvous order is the order it would move in as servers are
 * removed: its second server is where it maps without its first, its third
 * where it maps without both.  (No server is contacted.) */
static void redis_rendezvous_order_is_the_removal_order(void **state) {
  (void)state;
  static const char *const names[3] = {"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"};
  be all, without[3];
  be_open_simple(&all, "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003");
  for (int d = 0; d < 3; d++) {
    char two[64];
    snprintf(two, sizeof two, "%s,%s", names[(d + 1) % 3], names[(d + 2) % 3]);
    be_open_simple(&without[d], two);
  }
  ccache__rpool *p = ccache__redis_pool(all.r);
  int second_moved[3] = {0, 0, 0};
  for (uint64_t k = 0; k < SPREAD_KEYS; k++) {
    uint8_t order[3];
    ccache__rendezvous_order(p->servers, p->n, PK(k), order);
    assert_int_equal(order[0], ccache__redis_server_of(all.r, PK(k)));
    assert_true(order[0] != order[1] && order[1] != order[2] && order[0] != order[2]);
    ccache__rpool *q = ccache__redis_pool(without[order[0]].r);
    size_t alt = ccache__redis_server_of(without[order[0]].r, PK(k));
    assert_string_equal(q->servers[alt].name, names[order[1]]);
    second_moved[order[1]]++;
  }
  for (int i = 0; i < 3; i++) assert_true(second_moved[i] > 0); /* fallbacks spread too */
  be_close(&all);
  for (int d = 0; d < 3; d++) be_close(&without[d]);
}

static uint64_t fb_count(be *b, size_t server, int writes) {
  ccache__rserver *sv = &ccache__redis_pool(b->r)->servers[server];
  return atomic_load(writes ? &sv->fallback_writes : &sv->fallback_reads);
}

/* wait_backoff_over, declared further down. */
static void wait_backoff_over(be *b, size_t i);

/* A dead server's keys are written to the next server of their order and
 * read from there; when it comes back it takes its keys back: reads find
 * the fallback copy and fill it in, new writes and leases go to it. */
static void redis_fallback_written_read_filled_and_given_back(void **state) {
  (void)state;
  need_redis();
  rf_server *s = servers;
  for (int i = 0; i < 3; i++) start(&s[i], NULL);
  char list[200];
  snprintf(list, sizeof list, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  be b;
  be_open_simple(&b, list);
  ccache__rpool *p = ccache__redis_pool(b.r);
  long long share = 0;
  for (uint64_t k = 0; k < SPREAD_KEYS; k++) share += ccache__redis_server_of(b.r, PK(k)) == 1;
  assert_true(share >= 60 && share <= 140); /* Binomial(300, 1/3) */
  rf_kill(&s[1]);
  for (uint64_t k = 0; k < SPREAD_KEYS; k++) assert_int_equal(put_n(&b, k, 32), CCACHE_OK);
  assert_int_equal(rf_int(&s[0], "DBSIZE") + rf_int(&s[2], "DBSIZE"), SPREAD_KEYS);
  for (uint64_t k = 0; k < SPREAD_KEYS; k++) {
    uint8_t order[3];
    ccache__rendezvous_order(p->servers, p->n, PK(k), order);
    if (order[0] != 1) continue;
    char key[256];
    entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", k);
    assert_int_equal(rf_int(&s[order[1]], "EXISTS %s", key), 1);
  }
  assert_int_equal(fb_count(&b, 0, 1) + fb_count(&b, 2, 1), share);
  assert_int_equal(fb_count(&b, 1, 1), 0);
  /* Read back while s[1] is down: every key hits, s[1]'s on their fallback. */
  for (uint64_t k = 0; k < SPREAD_KEYS; k++) assert_int_equal(get_check(&b, k, 32), CCACHE_OK);
  assert_int_equal(fb_count(&b, 0, 0) + fb_count(&b, 2, 0), share);

  /* s[1] comes back empty: its keys miss there, hit on the fallback and are
   * copied back to it. */
  assert_int_equal(rf_restart(&s[1]), 0);
  wait_backoff_over(&b, 1);
  for (uint64_t k = 0; k < SPREAD_KEYS; k++) assert_int_equal(get_check(&b, k, 32), CCACHE_OK);
  assert_int_equal(rf_int(&s[1], "DBSIZE"), share);
  assert_int_equal(fb_count(&b, 0, 0) + fb_count(&b, 2, 0), 2 * share);
  for (uint64_t k = 0; k < SPREAD_KEYS; k++) assert_int_equal(get_check(&b, k, 32), CCACHE_OK);
  assert_int_equal(fb_count(&b, 0, 0) + fb_count(&b, 2, 0), 2 * share); /* all first hits */
  assert_int_equal(fb_count(&b, 1, 0), 0);
  /* New keys of s[1]: entry and lease there. */
  int checked = 0;
  for (uint64_t k = SPREAD_KEYS; k < SPREAD_KEYS + 60; k++) {
    if (ccache__redis_server_of(b.r, PK(k)) != 1) continue;
    assert_int_equal(put_n(&b, k, 32), CCACHE_OK);
    void *l = NULL;
    assert_int_equal(b.ops.lock(b.r, PK(k), &l), CCACHE_OK);
    char key[256];
    entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", k);
    assert_int_equal(rf_int(&s[1], "EXISTS %s", key), 1);
    assert_int_equal(rf_int(&s[1], "EXISTS %s:lease", key), 1);
    b.ops.unlock(b.r, l);
    checked++;
  }
  assert_true(checked > 0);
  assert_int_equal(fb_count(&b, 0, 1) + fb_count(&b, 2, 1), share); /* no new fallback write */
  be_close(&b);
  for (int i = 0; i < 3; i++) rf_stop(&s[i]);
}

/* Fork n fleet children over list (ready_fd: see fleet_child2). */
static void fleet_fork(pid_t *pid, int n, const char *list, int go_rd, int ready_wr, int out_wr,
                       int *close_in_child, int n_close) {
  fflush(NULL);
  for (int i = 0; i < n; i++) {
    pid[i] = fork();
    assert_true(pid[i] >= 0);
    if (pid[i] == 0) {
      for (int j = 0; j < n_close; j++) close(close_in_child[j]);
      fleet_child2(list, go_rd, ready_wr, out_wr, i * (FLEET_KEYS / 8));
    }
  }
}

/* Reports of n children, summed per key into per_key (fleet-wide). */
static uint64_t fleet_collect(pid_t *pid, int n, int out_rd, uint32_t *per_key, uint64_t *errors) {
  uint64_t compiles = 0;
  *errors = 0;
  memset(per_key, 0, E2E_KEYS_COUNTED * sizeof *per_key);
  for (int i = 0; i < n; i++) {
    fleet_report rep;
    assert_int_equal(fleet_recv(out_rd, &rep), 0);
    assert_true(rep.ok); /* every fetch gave the right program */
    compiles += rep.compiles;
    *errors += rep.tier_errors;
    for (int k = 0; k < E2E_KEYS_COUNTED; k++) per_key[k] += rep.per_key[k];
  }
  for (int i = 0; i < n; i++) {
    int st = 0;
    assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  return compiles;
}

/* The server of list's three with the most of keys from..FLEET_KEYS (the
 * ports, hence the shares, change from run to run); *share: how many. */
static int fleet_victim(const char *list, uint64_t from, int *share) {
  be b;
  be_open_simple(&b, list);
  int n[3] = {0, 0, 0};
  for (uint64_t k = from; k <= FLEET_KEYS; k++) n[ccache__redis_server_of(b.r, PK(k))]++;
  be_close(&b);
  int v = 0;
  for (int i = 1; i < 3; i++)
    if (n[i] > n[v]) v = i;
  *share = n[v];
  return v;
}

/* Three servers, one dead before the run: 4 processes still compile each
 * key once between them (its keys go to their fallback, where the
 * processes all look).  Before fallback, each process compiled the dead
 * server's share itself. */
static void redis_e2e_one_server_dead_fleet_compiles_each_key_once(void **state) {
  (void)state;
  need_redis();
  rf_server *s = servers;
  for (int i = 0; i < 3; i++) start(&s[i], NULL);
  char list[200];
  snprintf(list, sizeof list, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  int share;
  int v = fleet_victim(list, 1, &share); /* >= 8 of 24 */
  rf_kill(&s[v]);
  int go[2], out[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(out), 0);
  pid_t pid[4];
  int cl[2] = {go[1], out[0]};
  fleet_fork(pid, 4, list, go[0], -1, out[1], cl, 2);
  close(go[0]);
  assert_int_equal(write(go[1], "GGGG", 4), 4);
  close(go[1]);
  uint32_t per_key[E2E_KEYS_COUNTED];
  uint64_t errors;
  uint64_t compiles = fleet_collect(pid, 4, out[0], per_key, &errors);
  print_message("one of 3 servers dead (%d of %d keys its own): 4 processes, %llu compiles\n",
                share, FLEET_KEYS, (unsigned long long)compiles);
  for (int k = 1; k <= FLEET_KEYS; k++) assert_int_equal(per_key[k], 1);
  assert_int_equal(compiles, FLEET_KEYS);
  assert_int_equal(errors, 0); /* every op answered by a live server */
  long long stored = 0;
  for (int i = 0; i < 3; i++) stored += i == v ? 0 : rf_int(&s[i], "DBSIZE");
  assert_int_equal(stored, FLEET_KEYS);
  close(out[0]);
  close(out[1]);
  for (int i = 0; i < 3; i++) rf_stop(&s[i]);
}

/* Killed between two halves of a run (every process has used it, and holds
 * pooled connections to it): each process's next op on it fails, and from
 * then on its keys go to their fallback in every process, so the second
 * half too compiles each key once. */
static void redis_e2e_server_killed_between_halves_compiles_each_key_once(void **state) {
  (void)state;
  need_redis();
  rf_server *s = servers;
  for (int i = 0; i < 3; i++) start(&s[i], NULL);
  char list[200];
  snprintf(list, sizeof list, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  int late; /* the victim's keys in the second half: >= 4 of 12 */
  int v = fleet_victim(list, FLEET_KEYS / 2 + 1, &late);
  int go[2], ready[2], out[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(out), 0);
  pid_t pid[4];
  int cl[3] = {go[1], out[0], ready[0]};
  fleet_fork(pid, 4, list, go[0], ready[1], out[1], cl, 3);
  close(go[0]);
  close(ready[1]);
  assert_int_equal(write(go[1], "GGGG", 4), 4);
  for (int i = 0; i < 4; i++) { /* bounded: a child that dies closes its end */
    char r;
    assert_int_equal(read(ready[0], &r, 1), 1);
  }
  rf_kill(&s[v]);
  assert_int_equal(write(go[1], "GGGG", 4), 4);
  close(go[1]);
  uint32_t per_key[E2E_KEYS_COUNTED];
  uint64_t errors;
  uint64_t compiles = fleet_collect(pid, 4, out[0], per_key, &errors);
  print_message(
      "killed between halves (%d second-half keys its own): %llu compiles, %llu tier "
      "errors\n",
      late, (unsigned long long)compiles, (unsigned long long)errors);
  for (int k = 1; k <= FLEET_KEYS; k++) assert_int_equal(per_key[k], 1);
  assert_int_equal(compiles, FLEET_KEYS);
  close(ready[0]);
  close(out[0]);
  close(out[1]);
  for (int i = 0; i < 3; i++) rf_stop(&s[i]);
}

/* Killed at an arbitrary point while 4 processes run: every fetch is
 * right, every key of the other servers still compiles once, and a key of
 * the killed server at most once more per process (the guarantee of the
 * header's "Fallback" paragraph). */
static void redis_e2e_server_killed_mid_run_one_extra_per_process_at_most(void **state) {
  (void)state;
  need_redis();
  rf_server *s = servers;
  for (int i = 0; i < 3; i++) start(&s[i], NULL);
  char list[200];
  snprintf(list, sizeof list, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  int share;
  int v = fleet_victim(list, 1, &share);
  int go[2], out[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(out), 0);
  pid_t pid[4];
  int cl[2] = {go[1], out[0]};
  fleet_fork(pid, 4, list, go[0], -1, out[1], cl, 2);
  close(go[0]);
  assert_int_equal(write(go[1], "GGGG", 4), 4);
  close(go[1]);
  /* Kill once the victim holds its first entry (a bounded wait). */
  unsigned long long deadline = rf_now_ms() + WAIT_MS;
  while (rf_int(&s[v], "DBSIZE") < 1 && rf_now_ms() < deadline) rf_poll_pause();
  rf_kill(&s[v]);
  uint32_t per_key[E2E_KEYS_COUNTED];
  uint64_t errors;
  uint64_t compiles = fleet_collect(pid, 4, out[0], per_key, &errors);
  print_message("killed mid-run (%d of %d keys its own): %llu compiles\n", share, FLEET_KEYS,
                (unsigned long long)compiles);
  be pick;
  be_open_simple(&pick, list);
  for (uint64_t k = 1; k <= FLEET_KEYS; k++) {
    if (ccache__redis_server_of(pick.r, PK(k)) == (size_t)v)
      assert_true(per_key[k] >= 1 && per_key[k] <= 4); /* the fleet's one + one per other process */
    else
      assert_int_equal(per_key[k], 1);
  }
  be_close(&pick);
  assert_true(compiles <= (uint64_t)(FLEET_KEYS + 4 * share));
  close(out[0]);
  close(out[1]);
  for (int i = 0; i < 3; i++) rf_stop(&s[i]);
}

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
    opts(&o, bad[i]);
    ccache_tier_ops ops;
    ccache__redis *r = NULL;
    char why[256];
    if (ccache__redis_new(&o, &ops, &r, why, sizeof why) != CCACHE_EINVAL)
      fail_msg("accepted '%s'", bad[i]);
    assert_true(why[0] != '\0');
  }
  ccache_redis_options o;
  opts(&o, "sentinel:127.0.0.1:1,127.0.0.1:2/a,b");
  o.sentinel_user = "watcher";
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_redis(&o, &t), CCACHE_EINVAL); /* a user needs a password */
  o.sentinel_password = "pw";
  be b;
  be_open(&b, &o, NS);
  ccache__rpool *p = ccache__redis_pool(b.r);
  assert_int_equal(p->n, 2);
  assert_int_equal(p->n_sentinels, 2);
  assert_string_equal(p->servers[0].name, "a");
  assert_true(p->servers[0].sentinel && p->servers[1].sentinel);
  /* CLOSURE_CACHE_REDIS takes the same form (nothing listens: compiled). */
  run_env_child("sentinel:127.0.0.1:1/a", 1, 5, CCACHE_OK);
  run_env_child("sentinel:127.0.0.1:1", 1, 0, CCACHE_EINVAL);
  /* Nothing listens: no primary, tier errors only. */
  assert_int_equal(put_n(&b, 1, 10), CCACHE_EIO);
  assert_int_equal(get_check(&b, 1, 10), CCACHE_EIO);
  assert_non_null(strstr(last_error(&b), "Sentinel"));
  be_close(&b);
}

static char sentinel_conf[512];

/* Primary servers[0], its replica servers[1] (in sync), and a Sentinel
 * servers[2] watching it as "mym" (quorum 1, down after 500 ms) that has
 * found the replica.  Every wait is bounded. */
static void sentinel_trio(void) {
  rf_server *s = servers;
  /* No 5 s wait for more replicas before the first (diskless) sync. */
  const char *const prim[] = {"--repl-diskless-sync-delay", "0", NULL};
  start(&s[0], prim);
  char port[16];
  snprintf(port, sizeof port, "%d", s[0].port);
  static char port_arg[16];
  memcpy(port_arg, port, sizeof port);
  const char *const repl[] = {"--replicaof", "127.0.0.1", port_arg, NULL};
  start(&s[1], repl);
  snprintf(sentinel_conf, sizeof sentinel_conf,
           "bind 127.0.0.1\n"
           "sentinel monitor mym 127.0.0.1 %d 1\n"
           "sentinel down-after-milliseconds mym 500\n"
           "sentinel failover-timeout mym 5000\n",
           s[0].port);
  assert_int_equal(rf_start_sentinel(&s[2], sentinel_conf), 0);
  unsigned long long deadline = rf_now_ms() + WAIT_MS;
  int linked = 0, found = 0;
  while (rf_now_ms() < deadline && !(linked && found)) {
    redisReply *r = rf_cmd(&s[1], "INFO replication");
    linked = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up");
    if (r) freeReplyObject(r);
    r = rf_cmd(&s[2], "SENTINEL replicas mym");
    found = r && r->type == REDIS_REPLY_ARRAY && r->elements == 1;
    if (r) freeReplyObject(r);
    if (!(linked && found)) rf_poll_pause();
  }
  assert_true(linked);
  assert_true(found);
}

/* The port Sentinel names for mym now (0 if none). */
static int sentinel_primary_port(void) {
  redisReply *r = rf_cmd(&servers[2], "SENTINEL get-master-addr-by-name mym");
  int port = 0;
  if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) port = atoi(r->element[1]->str);
  if (r) freeReplyObject(r);
  return port;
}

/* Entries (not leases) of the e2e namespace on s, counted with SCAN. */
static long long scan_entries(rf_server *s) {
  long long n = 0;
  char cursor[32] = "0";
  for (int round = 0; round < 100000; round++) {
    redisReply *r = rf_cmd(s, "SCAN %s MATCH ccache:* COUNT 100", cursor);
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
  need_redis();
  sentinel_trio();
  rf_server *s = servers;
  char spec[96];
  snprintf(spec, sizeof spec, "sentinel:%s/mym", s[2].addr);
  ccache_redis_options o;
  opts(&o, spec);
  o.reconnect_min_ms = 10;
  o.reconnect_max_ms = 100;
  o.command_timeout_ms = 500;
  t_ctx ctx = {0};
  atomic_store(&e2e_compiles, 0);
  ccache *c1 = e2e_open(&ctx, &o, E2E_TAG);
  for (uint64_t k = 1; k <= SENT_KEYS / 2; k++) assert_int_equal(e2e_get(c1, k), (int)k);
  assert_int_equal(atomic_load(&e2e_compiles), SENT_KEYS / 2);
  rf_kill(&s[0]);
  for (uint64_t k = SENT_KEYS / 2 + 1; k <= SENT_KEYS; k++) {
    int id = e2e_get(c1, k);
    assert_true(id == (int)k || id == (int)k + 100000);
  }
  assert_int_equal(atomic_load(&e2e_compiles), SENT_KEYS);
  /* The failover: Sentinel names the replica, which is a primary now. */
  unsigned long long t0 = rf_now_ms(), deadline = t0 + 3 * WAIT_MS;
  while (sentinel_primary_port() != s[1].port && rf_now_ms() < deadline) rf_poll_pause();
  assert_int_equal(sentinel_primary_port(), s[1].port);
  int promoted = 0;
  while (!promoted && rf_now_ms() < deadline) {
    redisReply *r = rf_cmd(&s[1], "INFO replication");
    promoted = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "role:master");
    if (r) freeReplyObject(r);
    if (!promoted) rf_poll_pause();
  }
  assert_true(promoted);
  long long present = scan_entries(&s[1]);
  print_message("failover after %llu ms; %lld of %d entries on the promoted replica\n",
                rf_now_ms() - t0, present, SENT_KEYS);
  assert_true(present >= 0 && present <= SENT_KEYS / 2); /* only run 1's first half was stored */
  t_ctx ctx2 = {0};
  atomic_store(&e2e_compiles, 0);
  ccache *c2 = e2e_open(&ctx2, &o, E2E_TAG);
  for (uint64_t k = 1; k <= SENT_KEYS; k++) {
    int id = e2e_get(c2, k);
    assert_true(id == (int)k || id == (int)k + 100000);
  }
  print_message("run 2: %llu compiles\n", (unsigned long long)atomic_load(&e2e_compiles));
  assert_int_equal(atomic_load(&e2e_compiles), SENT_KEYS - present);
  assert_int_equal(t_stats(c2).tier_errors, 0);
  t_close(c2);
  t_ctx ctx3 = {0};
  atomic_store(&e2e_compiles, 0);
  ccache *c3 = e2e_open(&ctx3, &o, E2E_TAG);
  for (uint64_t k = 1; k <= SENT_KEYS; k++) assert_int_equal(e2e_get(c3, k), (int)k + 100000);
  assert_int_equal(atomic_load(&e2e_compiles), 0);
  t_close(c3);
  /* The first cache follows too, once its backoff allows a connect. */
  deadline = rf_now_ms() + WAIT_MS;
  int id = -1;
  while (rf_now_ms() < deadline) {
    id = e2e_get(c1, 1000 + (uint64_t)(rf_now_ms() % 100000));
    if (part_health(c1).failovers == 1 && part_health(c1).status == CCACHE_TIER_UP) break;
    rf_poll_pause();
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
  need_redis();
  sentinel_trio();
  rf_server *s = servers;
  char spec[96];
  snprintf(spec, sizeof spec, "sentinel:%s/mym", s[2].addr);
  be b;
  be_open_simple(&b, spec);
  assert_int_equal(put_n(&b, 1, 32), CCACHE_OK); /* on the primary; its connection pooled */
  assert_int_equal(cnt(&b).connects, 1);
  /* Swap the roles by hand, and tell the Sentinel. */
  redisReply *r = rf_cmd(&s[1], "REPLICAOF NO ONE");
  assert_non_null(r);
  freeReplyObject(r);
  r = rf_cmd(&s[0], "REPLICAOF 127.0.0.1 %d", s[1].port);
  assert_non_null(r);
  freeReplyObject(r);
  r = rf_cmd(&s[2], "SENTINEL REMOVE mym");
  assert_non_null(r);
  freeReplyObject(r);
  r = rf_cmd(&s[2], "SENTINEL MONITOR mym 127.0.0.1 %d 1", s[1].port);
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_STATUS);
  freeReplyObject(r);
  assert_int_equal(sentinel_primary_port(), s[1].port);
  assert_int_equal(put_n(&b, 2, 32), CCACHE_EIO);
  assert_non_null(strstr(last_error(&b), "READONLY"));
  ccache__rcounters c = cnt(&b);
  assert_int_equal(c.reply_errors, 1);
  assert_int_equal(c.io_errors + c.connect_failures, 0);
  assert_int_equal(put_n(&b, 2, 32), CCACHE_OK); /* followed at once: no backoff */
  char key[256];
  entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", 2);
  assert_int_equal(rf_int(&s[1], "EXISTS %s", key), 1);
  assert_int_equal(cnt(&b).connects, 2);
  ccache__rserver *sv = &ccache__redis_pool(b.r)->servers[0];
  assert_int_equal(atomic_load(&sv->failovers), 1);
  assert_int_equal(get_check(&b, 2, 32), CCACHE_OK);
  be_close(&b);
}

/* The Sentinel's own ACL user, limited to exactly what the tier sends it
 * (the header's line): the primary is found; a wrong password is a tier
 * error naming AUTH, never a failed call. */
static void redis_sentinel_acl_user(void **state) {
  (void)state;
  need_redis();
  rf_server *s = servers;
  start(&s[0], NULL);
  snprintf(sentinel_conf, sizeof sentinel_conf,
           "bind 127.0.0.1\n"
           "user default off\n"
           "user watcher on >pw +sentinel|get-master-addr-by-name\n"
           "user admin on >adm +@all\n"
           "sentinel monitor mym 127.0.0.1 %d 1\n",
           s[0].port);
  s[2].admin_user = "admin";
  s[2].admin_pass = "adm";
  assert_int_equal(rf_start_sentinel(&s[2], sentinel_conf), 0);
  char spec[96];
  snprintf(spec, sizeof spec, "sentinel:%s/mym", s[2].addr);
  ccache_redis_options o;
  opts(&o, spec);
  o.sentinel_user = "watcher";
  o.sentinel_password = "pw";
  be b;
  be_open(&b, &o, NS);
  assert_int_equal(put_n(&b, 1, 32), CCACHE_OK);
  assert_int_equal(get_check(&b, 1, 32), CCACHE_OK);
  be_close(&b);
  o.sentinel_password = "wrong";
  be_open(&b, &o, NS);
  assert_int_equal(get_check(&b, 1, 32), CCACHE_EIO);
  assert_non_null(strstr(last_error(&b), "AUTH"));
  be_close(&b);
  s[2].admin_user = s[2].admin_pass = NULL;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_options_defaults_and_validation, stop_all),
      cmocka_unit_test_teardown(redis_round_trip, stop_all),
      cmocka_unit_test_teardown(redis_key_prefix_and_namespace, stop_all),
      cmocka_unit_test_teardown(redis_entry_ttl, stop_all),
      cmocka_unit_test_teardown(redis_lease_taken_held_released, stop_all),
      cmocka_unit_test_teardown(redis_lease_renewed, stop_all),
      cmocka_unit_test_teardown(redis_lease_token_checked, stop_all),
      cmocka_unit_test_teardown(redis_rendezvous_spread_and_one_down, stop_all),
      cmocka_unit_test_teardown(redis_auth_password, stop_all),
      cmocka_unit_test_teardown(redis_auth_acl_user, stop_all),
      cmocka_unit_test_teardown(redis_absent_at_start, stop_all),
      cmocka_unit_test_teardown(redis_killed_mid_run_then_restarted, stop_all),
      cmocka_unit_test_teardown(redis_dropped_connection, stop_all),
      cmocka_unit_test_teardown(redis_slow_server_command_timeout, stop_all),
      cmocka_unit_test_teardown(redis_connect_timeout, stop_all),
      cmocka_unit_test_teardown(redis_oom_under_maxmemory, stop_all),
      cmocka_unit_test_teardown(redis_sigpipe_default_disposition, stop_all),
      cmocka_unit_test_teardown(redis_concurrent_misses_do_not_queue, stop_all),
      cmocka_unit_test_teardown(redis_fork_child_refuses, stop_all),
      cmocka_unit_test_teardown(redis_e2e_hit_is_a_tier_hit_not_a_compile, stop_all),
      cmocka_unit_test_teardown(redis_e2e_server_down_never_fails_a_fetch, stop_all),
      cmocka_unit_test_teardown(redis_e2e_four_processes_compile_each_key_once, stop_all),
      cmocka_unit_test_teardown(redis_e2e_lease_renewed_through_a_long_compile, stop_all),
      cmocka_unit_test_teardown(redis_e2e_lease_holder_killed_mid_compile, stop_all),
      cmocka_unit_test_teardown(redis_default_instance_from_environment, stop_all),
      cmocka_unit_test_teardown(redis_sockets_close_on_exec, stop_all),
      cmocka_unit_test_teardown(redis_remove_if_only_the_value_read, stop_all),
      cmocka_unit_test_teardown(redis_e2e_entry_published_between_read_and_remove_survives,
                                stop_all),
      cmocka_unit_test_teardown(redis_tier_health_reports_each_server, stop_all),
      cmocka_unit_test_teardown(redis_rendezvous_order_is_the_removal_order, stop_all),
      cmocka_unit_test_teardown(redis_fallback_written_read_filled_and_given_back, stop_all),
      cmocka_unit_test_teardown(redis_e2e_one_server_dead_fleet_compiles_each_key_once, stop_all),
      cmocka_unit_test_teardown(redis_e2e_server_killed_between_halves_compiles_each_key_once,
                                stop_all),
      cmocka_unit_test_teardown(redis_sentinel_spec_validation, stop_all),
      cmocka_unit_test_teardown(redis_sentinel_demoted_primary_readonly_followed, stop_all),
      cmocka_unit_test_teardown(redis_sentinel_acl_user, stop_all),
  };
  /* Real-time fault tests (SIGSTOP, timeouts measured on the wall clock):
   * `test_tier_redis realtime` runs them (CTest label realtime: plain and
   * checked builds only, not under the sanitizers or valgrind). */
  const struct CMUnitTest realtime[] = {
      cmocka_unit_test_teardown(redis_command_timeout_bounds_the_whole_command, stop_all),
      cmocka_unit_test_teardown(redis_accepting_but_silent_server_is_backed_off, stop_all),
      cmocka_unit_test_teardown(redis_e2e_stalled_server_never_starves_renewals, stop_all),
      cmocka_unit_test_teardown(redis_e2e_server_killed_mid_run_one_extra_per_process_at_most,
                                stop_all),
      cmocka_unit_test_teardown(redis_sentinel_primary_killed_failover_followed, stop_all),
  };
  if (argc > 1 && strcmp(argv[1], "realtime") == 0)
    return cmocka_run_group_tests_name("realtime", realtime, NULL, NULL);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
