/*
 * test_tier_redis_polls.c - what a process waiting on another's compile
 * lease costs the Redis servers: its polls read the key's first live server
 * only (where the lease holder publishes), and so do its lookups while it
 * has seen no server fail (a fallback copy is read only after that:
 * test_tier_redis_fleet.c).  Counted per server
 * with INFO commandstats over three private redis-servers
 * (redis_support.c); without one the tests skip, or fail when
 * CCACHE_TEST_REQUIRE_REDIS=1.
 *
 * The lease holder is played by the test: it sets the lease on the key's
 * first server under the tier's own key naming, then publishes the entry
 * bytes a real compile stored, or deletes the lease unpublished (so the
 * waiter's wait is as long as the test makes it, whatever the load of the
 * machine).  SIGPIPE stays at its
 * default action (main).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis_tier_support.h"

#define K          7u /* the key waited for (PK(K)) */
#define MIN_POLLS  8  /* polls seen on the home server before publishing */
#define LEASE_LEFT 60000u

/* One server's lookups and sets, from INFO commandstats. */
typedef struct cmd_counts {
  long long eval, getrange, strlen_, set; /* a lookup: STRLEN + GETRANGE (issue 33) */
} cmd_counts;

/* calls=N of cmdstat_<name> in an INFO commandstats text (0: never called). */
static long long stat_calls(const char *info, const char *name) {
  char tag[64];
  snprintf(tag, sizeof tag, "cmdstat_%s:calls=", name);
  const char *p = strstr(info, tag);
  return p ? strtoll(p + strlen(tag), NULL, 10) : 0;
}

static cmd_counts counts_of(t_redis_server *s) {
  redisReply *rep = t_redis_cmd(s, "INFO commandstats");
  assert_non_null(rep);
  assert_int_equal(rep->type, REDIS_REPLY_STRING);
  cmd_counts c = {stat_calls(rep->str, "eval"), stat_calls(rep->str, "getrange"),
                  stat_calls(rep->str, "strlen"), stat_calls(rep->str, "set")};
  freeReplyObject(rep);
  return c;
}

static void reset_stats(t_redis_server *s) {
  redisReply *rep = t_redis_cmd(s, "CONFIG RESETSTAT");
  assert_non_null(rep);
  assert_int_equal(rep->type, REDIS_REPLY_STATUS);
  freeReplyObject(rep);
}

/* Three servers, their list, and PK(K)'s rendezvous order over it. */
static void start_three(char *list, size_t len, uint8_t order[3]) {
  t_need_redis();
  t_redis_server *s = t_servers;
  for (int i = 0; i < 3; i++) t_must_start(&s[i], NULL);
  snprintf(list, len, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  t_be b;
  t_be_open_simple(&b, list);
  ccache__rpool *p = ccache__redis_pool(b.r);
  ccache__rendezvous_order(p->servers, p->n, PK(K), order);
  t_be_close(&b);
}

/* The bytes a compile of PK(K) stores (a real cache compiles and stores
 * them on the home server), taken off that server again: the caller
 * publishes them where it wants.  *len: their length; caller frees. */
static char *stored_entry(const char *list, const char *key, size_t *len, t_redis_server *home) {
  ccache_redis_options o;
  t_opts(&o, list);
  t_ctx ctx = {0};
  ccache *a = t_e2e_open(&ctx, &o, T_E2E_TAG);
  assert_int_equal(t_e2e_get(a, K), (int)K);
  t_close(a);
  redisReply *rep = t_redis_cmd(home, "GET %s", key);
  assert_non_null(rep);
  assert_int_equal(rep->type, REDIS_REPLY_STRING);
  char *bytes = malloc(rep->len);
  assert_non_null(bytes);
  memcpy(bytes, rep->str, rep->len);
  *len = rep->len;
  freeReplyObject(rep);
  assert_int_equal(t_redis_int(home, "DEL %s", key), 1);
  return bytes;
}

typedef struct waiter {
  ccache *c;
  int id;
} waiter;

static void *waiter_main(void *arg) {
  waiter *w = arg;
  w->id = t_e2e_get(w->c, K);
  return NULL;
}

/* B misses PK(K) while its lease is held on K's home server, and polls
 * until the holder publishes (publish) or lets the lease go unpublished.
 * B's first lookup reads the home server alone (STRLEN and GETRANGE,
 * pipelined: no server was seen failing); then every lock attempt (SET NX,
 * busy) and every poll go to the home server alone, one poll after each
 * busy attempt.  Returns the
 * per-server counts in rendezvous order, the polls, and the compiles B ran
 * (its id checked: loaded when published, compiled otherwise). */
static long long wait_case(int publish, cmd_counts c[3], uint64_t *compiled) {
  char list[200];
  uint8_t order[3];
  start_three(list, sizeof list, order);
  t_redis_server *s = t_servers, *home = &s[order[0]];
  char key[256];
  t_e2e_entry_key(key, sizeof key, T_E2E_TAG, K);
  size_t len = 0;
  char *bytes = stored_entry(list, key, &len, home);

  /* The holder's lease, as the tier names it. */
  redisReply *rep = t_redis_cmd(home, "SET %s:lease holder-token NX PX %u", key, LEASE_LEFT);
  assert_non_null(rep);
  assert_int_equal(rep->type, REDIS_REPLY_STATUS);
  freeReplyObject(rep);
  for (int i = 0; i < 3; i++) reset_stats(&s[i]);

  ccache_redis_options o;
  t_opts(&o, list);
  o.poll_ms = 1;
  o.poll_max_ms = 2;
  o.wait_ms = 4 * T_WAIT_MS; /* B never gives up before the holder is done */
  o.lease_ms = LEASE_LEFT;   /* B's own lease (unpublished case): no renewal */
  t_ctx ctx = {0};
  waiter w = {t_e2e_open(&ctx, &o, T_E2E_TAG), -1};
  uint64_t compiles = atomic_load(&t_e2e_compiles);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
  unsigned long long until = t_redis_now_ms() + T_WAIT_MS;
  while (counts_of(home).getrange < 1 + MIN_POLLS && t_redis_now_ms() < until) t_redis_poll_pause();
  if (publish) /* the holder publishes (its lease expires later) */
    rep = t_redis_cmd(home, "SET %s %b", key, bytes, len);
  else /* the holder gives up: its lease is gone, nothing published */
    rep = t_redis_cmd(home, "DEL %s:lease", key);
  assert_non_null(rep);
  assert_int_equal(rep->type, publish ? REDIS_REPLY_STATUS : REDIS_REPLY_INTEGER);
  freeReplyObject(rep);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(w.id, publish ? (int)K + 100000 : (int)K);
  *compiled = atomic_load(&t_e2e_compiles) - compiles;

  for (int k = 0; k < 3; k++) c[k] = counts_of(&s[order[k]]);
  for (int k = 0; k < 3; k++)
    print_message("server %d of the key's order: EVAL %lld GETRANGE %lld STRLEN %lld SET %lld\n", k,
                  c[k].eval, c[k].getrange, c[k].strlen_, c[k].set);
  ccache_stats st;
  ccache_stats_init(&st);
  assert_int_equal(ccache_stats_get(w.c, &st), CCACHE_OK);
  assert_int_equal(st.tier_hits, publish ? 1 : 0);
  assert_int_equal(st.tier_misses, publish ? 0 : 1);
  t_close(w.c);
  free(bytes);
  for (int i = 0; i < 3; i++) t_redis_stop(&s[i]);
  /* Home SETs: the busy attempts (one poll each), then the publish, or
   * B's own lease and its store. */
  return c[0].set - (publish ? 1 : 2);
}

/* Published: the two other servers see nothing however long B waits, the
 * home server B's first lookup plus one per poll, and B loads the entry
 * with no compile. */
static void redis_wait_polls_only_the_home_server(void **state) {
  (void)state;
  cmd_counts c[3];
  uint64_t compiled = 0;
  long long polls = wait_case(1, c, &compiled);
  assert_int_equal(compiled, 0);
  assert_true(polls >= MIN_POLLS);
  assert_int_equal(c[0].eval, 0);
  assert_int_equal(c[0].getrange, 1 + polls);
  assert_int_equal(c[0].strlen_, 1 + polls);
  for (int k = 1; k < 3; k++) {
    assert_int_equal(c[k].eval, 0);
    assert_int_equal(c[k].getrange, 0);
    assert_int_equal(c[k].strlen_, 0);
    assert_int_equal(c[k].set, 0);
  }
}

/* Unpublished: once B holds the lease, its lookup is a lookup again, of
 * the home server alone (no server seen failing): the two other servers
 * see nothing; B compiles once.  Home: 1 + polls + 1 lookups, and B's lease release (an
 * EVAL whose script reads the token with GETRANGE). */
static void redis_lookup_after_the_lock_reads_the_home_server(void **state) {
  (void)state;
  cmd_counts c[3];
  uint64_t compiled = 0;
  long long polls = wait_case(0, c, &compiled);
  assert_int_equal(compiled, 1);
  assert_true(polls >= MIN_POLLS);
  assert_int_equal(c[0].eval, 1);
  assert_int_equal(c[0].getrange, 1 + polls + 1 + 1);
  assert_int_equal(c[0].strlen_, 1 + polls + 1);
  for (int k = 1; k < 3; k++) {
    assert_int_equal(c[k].eval, 0);
    assert_int_equal(c[k].getrange, 0);
    assert_int_equal(c[k].strlen_, 0);
    assert_int_equal(c[k].set, 0);
  }
}

/* An entry on the key's second server only (written while its first was
 * down, by a process that saw it) is not read by a process that never saw
 * the first server fail: the first server's miss is the answer, and that
 * process compiles once (under the lease on the first server) and stores
 * there.  The second and third servers see nothing. */
static void redis_unseen_fallback_copy_is_not_read(void **state) {
  (void)state;
  char list[200];
  uint8_t order[3];
  start_three(list, sizeof list, order);
  t_redis_server *s = t_servers;
  char key[256];
  t_e2e_entry_key(key, sizeof key, T_E2E_TAG, K);
  size_t len = 0;
  char *bytes = stored_entry(list, key, &len, &s[order[0]]);
  redisReply *rep = t_redis_cmd(&s[order[1]], "SET %s %b", key, bytes, len);
  assert_non_null(rep);
  freeReplyObject(rep);
  for (int i = 0; i < 3; i++) reset_stats(&s[i]);

  ccache_redis_options o;
  t_opts(&o, list);
  t_ctx ctx = {0};
  ccache *b = t_e2e_open(&ctx, &o, T_E2E_TAG);
  uint64_t compiles = atomic_load(&t_e2e_compiles);
  assert_int_equal(t_e2e_get(b, K), (int)K);
  assert_int_equal(atomic_load(&t_e2e_compiles), compiles + 1);
  cmd_counts c[3];
  for (int k = 0; k < 3; k++) c[k] = counts_of(&s[order[k]]);
  assert_int_equal(c[0].strlen_, 2); /* the miss, and the lookup after the lease */
  assert_int_equal(c[0].set, 2);     /* the lease and the entry */
  assert_int_equal(c[1].getrange + c[1].set, 0);
  assert_int_equal(c[2].getrange + c[2].set, 0);
  assert_int_equal(t_redis_int(&s[order[0]], "EXISTS %s", key), 1);
  t_close(b);
  free(bytes);
  for (int i = 0; i < 3; i++) t_redis_stop(&s[i]);
}

int main(void) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_wait_polls_only_the_home_server, t_stop_all),
      cmocka_unit_test_teardown(redis_lookup_after_the_lock_reads_the_home_server, t_stop_all),
      cmocka_unit_test_teardown(redis_unseen_fallback_copy_is_not_read, t_stop_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
