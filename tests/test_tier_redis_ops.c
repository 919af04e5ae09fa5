/*
 * test_tier_redis_ops.c - the Redis tier under the ordinary events of a
 * production Redis (issue 33): connections the server closed while idle,
 * short stalls during a renewal, lease values planted by others, the
 * bounded fetch, fallback copies, stale or silent Sentinels and planned
 * failovers.  Each test starts its own redis-server (and redis-sentinel)
 * processes on 127.0.0.1 (redis_support.c); without them they skip, or
 * fail when CCACHE_TEST_REQUIRE_REDIS=1.
 *
 * The real-time cases (SIGSTOP, wall-clock bounds) run with the argument
 * `realtime` (ctest tier_redis_ops_realtime, label realtime).
 */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis_tier_support.h"
#include "tier/redis/tier_redis.h"
#include "tier/tier.h"

/* Sleep ms milliseconds. */
static void t_sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* Wait (bounded) until the server has closed every client but the admin
 * connection: CLIENT LIST has one line.  1 if it did. */
static int t_wait_idle_closed(t_redis_server *s, unsigned long long ms) {
  unsigned long long end = t_redis_now_ms() + ms;
  while (t_redis_now_ms() < end) {
    redisReply *r = t_redis_cmd(s, "CLIENT LIST");
    int lines = 0;
    if (r && r->type == REDIS_REPLY_STRING)
      for (size_t i = 0; i < r->len; i++) lines += r->str[i] == '\n';
    if (r) freeReplyObject(r);
    if (lines == 1) return 1;
    t_sleep_ms(50);
  }
  return 0;
}

/* ------------------------------------------------- item 1: idle timeout */
/* `timeout 1` on the server: a pooled connection and the renewal connection,
 * idle for longer, are closed by the server.  The next command on each is
 * sent on a fresh connection: no I/O error, no backoff, no tier error. */
static void redis_idle_closed_connection_is_not_a_failure(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_be b;
  t_be_open_simple(&b, s->addr);
  assert_int_equal(t_put_n(&b, 1, 100), CCACHE_OK); /* one pooled connection */
  void *l = NULL;
  assert_int_equal(b.ops.lock(b.r, PK(2), &l), CCACHE_OK);
  assert_int_equal(b.ops.renew(b.r, l), CCACHE_OK); /* the renewal connection */
  ccache__rcounters c0 = t_counters(&b);
  redisReply *r = t_redis_cmd(s, "CONFIG SET timeout 1");
  assert_non_null(r);
  freeReplyObject(r);
  assert_true(t_wait_idle_closed(s, T_WAIT_MS)); /* the server closed ours */
  t_sleep_ms(100);                               /* the FINs are in */

  int got = t_get_check(&b, 1, 100);
  int renewed = b.ops.renew(b.r, l);
  ccache__rcounters c = t_counters(&b);
  ccache_tier_health h = {.size = sizeof h};
  assert_int_equal(b.ops.health(b.r, 0, &h), CCACHE_OK);
  print_message(
      "after the idle close: get %d, renew %d, io_errors %llu, connects %llu (+%llu), errors %llu, "
      "backoff %llu ms, leases lost %llu, status %u\n",
      got, renewed, (unsigned long long)c.io_errors, (unsigned long long)c.connects,
      (unsigned long long)(c.connects - c0.connects), (unsigned long long)h.errors,
      (unsigned long long)h.backoff_ms, (unsigned long long)h.leases_lost, h.status);
  assert_int_equal(got, CCACHE_OK);
  assert_int_equal(renewed, CCACHE_OK);
  assert_int_equal(c.io_errors, 0);
  assert_int_equal(c.connect_failures, 0);
  assert_int_equal(c.refused_backoff, 0);
  assert_int_equal(c.connects - c0.connects, 2);       /* one pooled, one renewal */
  assert_int_equal(c.idle_closed - c0.idle_closed, 2); /* i33-only */
  assert_int_equal(h.errors, 0);
  assert_int_equal(h.backoff_ms, 0);
  assert_int_equal(h.leases_lost, 0);
  assert_int_equal(h.status, CCACHE_TIER_UP);
  b.ops.unlock(b.r, l);
  t_be_close(&b);
  t_redis_stop(s);
}

/* ------------------------------------------- item 2: renewals that fail */
/* A signed lease's renewal replaces the stored value; if its reply is lost
 * (timed out after sending), the server may hold the new value while the
 * client still has the old one.  Planted here as the server would leave it:
 * the next renewal and the release must still find the lease ours. */
static void redis_renew_after_unknown_outcome_keeps_the_lease(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_be b;
  t_be_open_simple(&b, s->addr);
  void *l = NULL;
  assert_int_equal(b.ops.lock_value(b.r, PK(7), "value-1", 7, &l), CCACHE_OK);
  char key[256];
  assert_true(ccache__redis_key(b.r, PK(7), 1, key, sizeof key) > 0);
  /* What an executed renew_value("value-2") whose reply was lost leaves. */
  char planted[64];
  snprintf(planted, sizeof planted, "%svalue-2", ccache__redis_lock_token(l));
  redisReply *r = t_redis_cmd(s, "SET %s %s PX 60000", key, planted);
  assert_non_null(r);
  freeReplyObject(r);
  int renewed = b.ops.renew_value(b.r, l, "value-3", 7);
  char *now = t_reply_str(s, "GET %s", key);
  b.ops.unlock(b.r, l);
  long long left = t_redis_int(s, "EXISTS %s", key);
  print_message("renew after an unknown outcome: %d; stored \"%s\"; after release: exists %lld\n",
                renewed, now ? now + 32 : "(none)", left);
  assert_int_equal(renewed, CCACHE_OK);
  assert_non_null(now);
  assert_string_equal(now + 32, "value-3");
  assert_int_equal(left, 0); /* the release found it ours too */
  free(now);
  t_be_close(&b);
  t_redis_stop(s);
}

/* The server stalls 1.4 s (SIGSTOP) while a renewal is due (lease_ms 3000,
 * command_timeout_ms 1000): that renewal times out in the client and the
 * server executes it on waking.  The lease, still valid by the lock, is
 * renewed again and never lapses during the 6.5 s compile; nothing lost. */
#define STALL2_LEASE_MS 3000
static char stall2_lease[256];
static int stall2_lapsed, stall2_checks;

static int stall2_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                          uint64_t *cost_out) {
  (void)ud, (void)c;
  unsigned long long t0 = t_redis_now_ms();
  t_sleep_ms(700); /* the first renewal is due at +1000 ms */
  t_redis_pause(&t_servers[0]);
  t_sleep_ms(1400);
  t_redis_resume(&t_servers[0]);
  while (t_redis_now_ms() < t0 + 6500) { /* past the lapse of the woken renewal (+5100) */
    if (t_redis_int(&t_servers[0], "EXISTS %s", stall2_lease) != 1) stall2_lapsed++;
    stall2_checks++;
    t_sleep_ms(100);
  }
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return 0;
}

static void redis_e2e_renewal_survives_a_short_stall(void **state) {
  (void)state;
  t_need_redis();
  t_must_start(&t_servers[0], NULL);
  ccache_redis_options o;
  t_opts(&o, t_servers[0].addr);
  o.lease_ms = STALL2_LEASE_MS;
  o.command_timeout_ms = 1000;
  t_e2e_entry_key(stall2_lease, sizeof stall2_lease, T_E2E_TAG, 9);
  strcat(stall2_lease, ":lease");
  stall2_lapsed = stall2_checks = 0;
  t_ctx ctx = {0};
  ccache *c = t_e2e_open(&ctx, &o, T_E2E_TAG);
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(c, PK(9), stall2_compile, NULL, &p);
  if (rc == CCACHE_OK) ccache_program_release(c, p);
  ccache_stats cs = t_stats(c);
  print_message(
      "after a 1.4 s stall: lease missing in %d of %d checks; leases lost %llu, tier "
      "errors %llu\n",
      stall2_lapsed, stall2_checks, (unsigned long long)cs.tier_leases_lost,
      (unsigned long long)cs.tier_errors);
  assert_int_equal(rc, CCACHE_OK);
  assert_true(stall2_checks > 30);
  assert_int_equal(stall2_lapsed, 0);
  assert_int_equal(cs.tier_leases_lost, 0);
  t_close(c);
  t_redis_stop(&t_servers[0]);
}

/* ---------------------------------- items 7 and 8: bounded reads of values */
/* Bytes the server has sent to its clients (INFO stats). */
static long long t_net_out(t_redis_server *s) {
  redisReply *r = t_redis_cmd(s, "INFO stats");
  long long v = -1;
  const char *p =
      r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "total_net_output_bytes:") : NULL;
  if (p) v = strtoll(p + 23, NULL, 10);
  if (r) freeReplyObject(r);
  return v;
}

/* A squatter plants a 32 MiB value under a lease name: a peek at it costs a
 * bounded read (a few hundred bytes), and reads as a holder with no value. */
static void redis_lease_peek_reads_a_bounded_prefix(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_be b;
  t_be_open_simple(&b, s->addr);
  char key[256];
  assert_true(ccache__redis_key(b.r, PK(11), 1, key, sizeof key) > 0);
  assert_int_equal(t_redis_int(s, "SETRANGE %s %d x", key, (32 << 20) - 1), 32 << 20);
  long long before = t_net_out(s);
  unsigned char buf[256];
  size_t len = 99;
  int rc = b.ops.lease_peek(b.r, PK(11), buf, sizeof buf, &len);
  long long sent = t_net_out(s) - before;
  print_message("lease peek of a 32 MiB planted value: rc %d, value length %zu, %lld bytes sent\n",
                rc, len, sent);
  assert_int_equal(rc, CCACHE_OK);
  assert_int_equal(len, 0);
  assert_true(sent < 16384); /* 193 bytes of value, and INFO's own reply */
  t_be_close(&b);
  t_redis_stop(s);
}

/* An entry over the reader's bound: the lookup says so (oversize) with at
 * most a prefix of it sent, and the connection stays pooled. */
static void redis_oversize_entry_costs_a_prefix(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_redis(&o, &t), CCACHE_OK);
  assert_int_equal(t->ops.attach(t->state, T_NS), CCACHE_OK);
  char key[256];
  t_entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", 12); /* T_NS, / as : */
  assert_int_equal(t_redis_int(s, "SETRANGE %s %d x", key, (32 << 20) - 1), 32 << 20);
  void *blob = NULL;
  size_t len = 0;
  long long before = t_net_out(s);
  int rc = t->get_bounded(t->state, PK(12), 16 << 20, &blob, &len);
  long long sent = t_net_out(s) - before;
  print_message("lookup of a 32 MiB entry, bound 16 MiB: rc %d, %lld bytes sent\n", rc, sent);
  assert_int_equal(rc, CCACHE__TIER_OVERSIZE);
  assert_true(sent < (1 << 20));
  ccache_tier_free(t);
  t_redis_stop(s);
}

/* An entry longer than the first round's prefix (128 KiB) is read in two
 * round trips the first time; once the core has verified it (accepted),
 * the prefix is that long and the same lookup takes one.  Each read comes
 * back whole and exact (the long reply is read straight into hiredis's
 * buffer).  A longer value read but never verified (planted, or foreign)
 * raises nothing: an entry over the bound then still costs the server at
 * most the verified entry's length. */
static void redis_long_entry_takes_one_round_trip_once_seen(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_be b;
  t_be_open_simple(&b, s->addr);
  const size_t len = (300u << 10) + 7u;
  assert_int_equal(t_put_n(&b, 13, len), CCACHE_OK);
  long long calls[4];
  calls[0] = t_cmd_calls(s, "getrange");
  for (int i = 1; i < 4; i++) {
    assert_int_equal(t_get_check(&b, 13, len), CCACHE_OK);
    calls[i] = t_cmd_calls(s, "getrange");
  }
  print_message("GETRANGEs for three lookups of a %zu-byte entry: %lld, %lld, %lld\n", len,
                calls[1] - calls[0], calls[2] - calls[1], calls[3] - calls[2]);
  assert_int_equal(calls[1] - calls[0], 2);
  assert_int_equal(calls[2] - calls[1], 1);
  assert_int_equal(calls[3] - calls[2], 1);
  char key[256];
  void *blob = NULL;
  size_t got = 0;
  assert_true(ccache__redis_key(b.r, PK(15), 0, key, sizeof key) > 0);
  assert_int_equal(t_redis_int(s, "SETRANGE %s %d x", key, (4 << 20) - 1), 4 << 20);
  assert_int_equal(b.ops.get(b.r, PK(15), &blob, &got), CCACHE_OK); /* read, never accepted */
  assert_int_equal(got, 4u << 20);
  b.ops.free_blob(b.r, blob, got);
  assert_true(ccache__redis_key(b.r, PK(14), 0, key, sizeof key) > 0);
  assert_int_equal(t_redis_int(s, "SETRANGE %s %d x", key, (32 << 20) - 1), 32 << 20);
  long long before = t_net_out(s);
  int rc = ccache__redis_get_bounded(b.r, PK(14), 16 << 20, &blob, &got);
  long long sent = t_net_out(s) - before;
  print_message(
      "then, after a 4 MiB value read but not verified, a 32 MiB entry, bound 16 MiB: "
      "rc %d, %lld bytes sent\n",
      rc, sent);
  assert_int_equal(rc, CCACHE__TIER_OVERSIZE);
  assert_true(sent > (long long)len && sent < (long long)len + 16384);
  t_be_close(&b);
  t_redis_stop(s);
}

/* ------------------------------------ items 4 and 5: Sentinels and ROLE */
#ifndef CCACHE_TIER_DEGRADED
#define CCACHE_TIER_DEGRADED 3u /* (main has no such status: the test fails there) */
#endif

/* A fake Sentinel: answers every request on 127.0.0.1:port with the
 * address 127.0.0.1:answer_port, then closes (what a stale Sentinel says). */
typedef struct fake_sentinel {
  int fd, port, answer_port;
  _Atomic int stop;
  pthread_t th;
} fake_sentinel;

static void *fake_sentinel_main(void *arg) {
  fake_sentinel *f = arg;
  while (!atomic_load(&f->stop)) {
    struct pollfd pf = {.fd = f->fd, .events = POLLIN, .revents = 0};
    if (poll(&pf, 1, 20) <= 0) continue;
    int c = accept(f->fd, NULL, NULL);
    if (c < 0) continue;
    char buf[512], out[96];
    struct pollfd pc = {.fd = c, .events = POLLIN, .revents = 0};
    if (poll(&pc, 1, 2000) > 0 && read(c, buf, sizeof buf) > 0) {
      char port[8];
      int pl = snprintf(port, sizeof port, "%d", f->answer_port);
      int n = snprintf(out, sizeof out, "*2\r\n$9\r\n127.0.0.1\r\n$%d\r\n%s\r\n", pl, port);
      if (write(c, out, (size_t)n) != n) {
      }
    }
    close(c);
  }
  return NULL;
}

static void fake_sentinel_start(fake_sentinel *f, int answer_port) {
  memset(f, 0, sizeof *f);
  f->answer_port = answer_port;
  f->fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(f->fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(f->fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(f->fd, 16), 0);
  socklen_t al = sizeof a;
  assert_int_equal(getsockname(f->fd, (struct sockaddr *)&a, &al), 0);
  f->port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(&f->th, NULL, fake_sentinel_main, f), 0);
}

static void fake_sentinel_stop(fake_sentinel *f) {
  if (f->fd <= 0) return;
  atomic_store(&f->stop, 1);
  pthread_join(f->th, NULL);
  close(f->fd);
  f->fd = 0;
}

/* Primary t_servers[0] and its replica t_servers[1]. */
static void primary_and_replica(void) {
  t_must_start(&t_servers[0], NULL);
  static char port_arg[16];
  snprintf(port_arg, sizeof port_arg, "%d", t_servers[0].port);
  const char *const repl[] = {"--replicaof", "127.0.0.1", port_arg, NULL};
  t_must_start(&t_servers[1], repl);
}

/* Item 4: the first Sentinel is stale (it names the replica), the second
 * names the primary.  ROLE passes over the first: every write reaches the
 * primary; the health is UP. */
static void redis_stale_sentinel_is_passed_over(void **state) {
  (void)state;
  t_need_redis();
  primary_and_replica();
  fake_sentinel stale, good;
  fake_sentinel_start(&stale, t_servers[1].port);
  fake_sentinel_start(&good, t_servers[0].port);
  char spec[128];
  snprintf(spec, sizeof spec, "sentinel:127.0.0.1:%d,127.0.0.1:%d/mym", stale.port, good.port);
  t_be b;
  t_be_open_simple(&b, spec);
  int ok = 0;
  for (uint64_t n = 1; n <= 5; n++) ok += t_put_n(&b, n, 100) == CCACHE_OK;
  char key[256];
  t_entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", 3);
  long long on_primary = t_redis_int(&t_servers[0], "EXISTS %s", key);
  ccache_tier_health h = {.size = sizeof h};
  assert_int_equal(b.ops.health(b.r, 0, &h), CCACHE_OK);
  print_message(
      "stale Sentinel first: %d of 5 puts ok, on the primary: %lld, status %u, where "
      "\"%s\", last error \"%s\"\n",
      ok, on_primary, h.status, h.where, h.last_error);
  assert_int_equal(ok, 5);
  assert_int_equal(on_primary, 1);
  assert_int_equal(h.status, CCACHE_TIER_UP);
  t_be_close(&b);
  fake_sentinel_stop(&stale);
  fake_sentinel_stop(&good);
  t_redis_stop(&t_servers[1]);
  t_redis_stop(&t_servers[0]);
}

/* Item 5: once resolved, every Sentinel goes away and the primary stalls
 * once (a timeout: the tier asks the Sentinels again).  No Sentinel
 * answers: the tier goes on with the primary it knew (ROLE: master). */
static void redis_no_sentinel_keeps_the_last_primary(void **state) {
  (void)state;
  t_need_redis();
  t_must_start(&t_servers[0], NULL);
  fake_sentinel good;
  fake_sentinel_start(&good, t_servers[0].port);
  char spec[128];
  snprintf(spec, sizeof spec, "sentinel:127.0.0.1:%d/mym", good.port);
  ccache_redis_options o;
  t_opts(&o, spec);
  o.command_timeout_ms = 300;
  t_be b;
  t_be_open(&b, &o, T_NS);
  assert_int_equal(t_put_n(&b, 1, 100), CCACHE_OK);
  fake_sentinel_stop(&good); /* no Sentinel answers from here on */
  t_redis_pause(&t_servers[0]);
  int stalled = t_get_check(&b, 1, 100); /* times out: the server failed */
  t_redis_resume(&t_servers[0]);
  int got = t_get_until_reachable(&b, 1, 100);
  int put = t_put_n(&b, 2, 100);
  print_message(
      "every Sentinel gone: during the stall %d, then get %d, put %d, last error "
      "\"%s\"\n",
      stalled, got, put, t_last_error(&b));
  assert_int_equal(stalled, CCACHE_EIO);
  assert_int_equal(got, CCACHE_OK);
  assert_int_equal(put, CCACHE_OK);
  t_be_close(&b);
  t_redis_stop(&t_servers[0]);
}

/* Item 4: writes refused (OOM under maxmemory): the tier is up but writes
 * nowhere, and its health says so (DEGRADED); an accepted write ends it. */
static void redis_refused_writes_report_degraded(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_be b;
  t_be_open_simple(&b, s->addr);
  redisReply *r = t_redis_cmd(s, "CONFIG SET maxmemory 1");
  assert_non_null(r);
  freeReplyObject(r);
  int put = t_put_n(&b, 1, 100);
  ccache_tier_health h = {.size = sizeof h};
  assert_int_equal(b.ops.health(b.r, 0, &h), CCACHE_OK);
  print_message("writes refused: put %d, status %u, last error \"%s\"\n", put, h.status,
                h.last_error);
  assert_int_equal(put, CCACHE_EIO);
  assert_int_equal(h.status, CCACHE_TIER_DEGRADED);
  r = t_redis_cmd(s, "CONFIG SET maxmemory 0");
  assert_non_null(r);
  freeReplyObject(r);
  assert_int_equal(t_put_n(&b, 1, 100), CCACHE_OK);
  assert_int_equal(b.ops.health(b.r, 0, &h), CCACHE_OK);
  assert_int_equal(h.status, CCACHE_TIER_UP);
  t_be_close(&b);
  t_redis_stop(s);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_idle_closed_connection_is_not_a_failure, t_stop_all),
      cmocka_unit_test_teardown(redis_renew_after_unknown_outcome_keeps_the_lease, t_stop_all),
      cmocka_unit_test_teardown(redis_lease_peek_reads_a_bounded_prefix, t_stop_all),
      cmocka_unit_test_teardown(redis_oversize_entry_costs_a_prefix, t_stop_all),
      cmocka_unit_test_teardown(redis_long_entry_takes_one_round_trip_once_seen, t_stop_all),
      cmocka_unit_test_teardown(redis_stale_sentinel_is_passed_over, t_stop_all),
      cmocka_unit_test_teardown(redis_refused_writes_report_degraded, t_stop_all),
  };
  const struct CMUnitTest realtime[] = {
      cmocka_unit_test_teardown(redis_e2e_renewal_survives_a_short_stall, t_stop_all),
      cmocka_unit_test_teardown(redis_no_sentinel_keeps_the_last_primary, t_stop_all),
  };
  if (argc > 1 && strcmp(argv[1], "realtime") == 0)
    return cmocka_run_group_tests_name("realtime", realtime, NULL, NULL);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
