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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis_tier_support.h"

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
  assert_int_equal(c.connects - c0.connects, 2); /* one pooled, one renewal */
  assert_int_equal(c.idle_closed - c0.idle_closed, 2);
  assert_int_equal(h.errors, 0);
  assert_int_equal(h.backoff_ms, 0);
  assert_int_equal(h.leases_lost, 0);
  assert_int_equal(h.status, CCACHE_TIER_UP);
  b.ops.unlock(b.r, l);
  t_be_close(&b);
  t_redis_stop(s);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_idle_closed_connection_is_not_a_failure, t_stop_all),
  };
  const struct CMUnitTest realtime[] = {
      cmocka_unit_test_teardown(redis_idle_closed_connection_is_not_a_failure, t_stop_all),
  };
  if (argc > 1 && strcmp(argv[1], "realtime") == 0)
    return cmocka_run_group_tests_name("realtime", realtime, NULL, NULL);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
