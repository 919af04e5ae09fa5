/*
 * test_first_use.c - what a runtime author meets first (issue 29), around a
 * compile: compile errors that reach every waiter (the detail, a status the
 * compile gives kept or made CCACHE_ECOMPILE, a compile that forgets its
 * program) and the event hook (compile, eviction, tier and failure events,
 * on the calling thread; the hook reads the stats, so an event under a
 * lock would deadlock).  The refusals and the close are in
 * test_first_use_refusals.c, the counters, the key helpers and the
 * thrashing signal in test_first_use_counters.c.  Exact counts throughout;
 * waits are bounded, never timed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "support.h"
#include "tier_support.h"

#define U CCACHE_UNBOUNDED

/* Poll (bounded: 30 s) until cond(c) holds; for joins inside a compile. */
static void wait_until(ccache *c, int (*cond)(ccache *)) {
  for (int i = 0; i < 30000 && !cond(c); i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

/* -------------------------------------------- compile errors that travel */

#define WAITERS 7
static const char *const cc_message = "cc: error: site_12.c:3:14: expected ';' before '}'";

typedef struct travel {
  ccache *c;
  pthread_barrier_t barrier;
  _Atomic int compiles;
  int rc[WAITERS + 1];
  char detail[WAITERS + 1][512];
} travel;

static int seven_waiting(ccache *c) { return t_stats(c).waits >= WAITERS; }

static int failing_compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                           ccache_program **program_out) {
  travel *t = ud;
  (void)key, (void)closure_out, (void)program_out;
  atomic_fetch_add(&t->compiles, 1);
  wait_until(c, seven_waiting); /* every other thread is a waiter now */
  return ccache_compile_fail(CCACHE_ECOMPILE, "%s", cc_message);
}

static void *travel_thread(void *arg) {
  void **a = arg;
  travel *t = a[0];
  int i = (int)(intptr_t)a[1];
  pthread_barrier_wait(&t->barrier);
  ccache_lease l;
  t->rc[i] = ccache_get_or_compile(t->c, K(12), failing_compile, t, &l);
  snprintf(t->detail[i], sizeof t->detail[i], "%s", ccache_error_detail());
  return NULL;
}

static void compile_detail_reaches_every_waiter(void **state) {
  (void)state;
  t_ctx tc = {0};
  travel *t = calloc(1, sizeof *t);
  t->c = t_open(&tc, U, U, U);
  pthread_barrier_init(&t->barrier, NULL, WAITERS + 1);
  pthread_t th[WAITERS + 1];
  void *args[WAITERS + 1][2];
  for (int i = 0; i <= WAITERS; i++) {
    args[i][0] = t;
    args[i][1] = (void *)(intptr_t)i;
    pthread_create(&th[i], NULL, travel_thread, args[i]);
  }
  for (int i = 0; i <= WAITERS; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&t->barrier);
  assert_int_equal(t->compiles, 1);
  for (int i = 0; i <= WAITERS; i++) {
    assert_int_equal(t->rc[i], CCACHE_ECOMPILE);
    assert_string_equal(t->detail[i], cc_message);
  }
  ccache_stats s = t_stats(t->c);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.waits, WAITERS);
  assert_int_equal(s.compile_failures, 1);
  assert_int_equal(s.misses, WAITERS + 1);
  assert_int_equal(s.hits, 0);
  assert_int_equal(s.items, 0);
  t_close(t->c);
  free(t);
}

/* A compile's own ccache status, and a nested compile's, reach the caller. */
typedef struct nest {
  int mode;
} nest;

static int program_fails(void *ud, ccache *c, ccache_key pkey, void **native_out,
                         uint64_t *cost_out) {
  (void)ud, (void)c, (void)pkey, (void)native_out, (void)cost_out;
  return ccache_compile_fail(CCACHE_ECOMPILE, "ptxas: out of registers in kernel matmul_%d", 7);
}

static int status_compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                          ccache_program **program_out) {
  nest *n = ud;
  (void)key, (void)closure_out;
  switch (n->mode) {
    case 0: /* its own ccache status, with a message */
      return ccache_compile_fail(CCACHE_ENOMEM, "scratch arena of %d MiB refused", 512);
    case 1: { /* passes the nested status up */
      int rc = ccache_program_get_or_compile(c, PK(1), program_fails, NULL, program_out);
      return rc;
    }
    case 2: /* a nested failure, then its own -1: ECOMPILE, the nested message */
      if (ccache_program_get_or_compile(c, PK(2), program_fails, NULL, program_out) != CCACHE_OK)
        return -1;
      return 0;
    case 3: /* a ccache status returned bare, no failure recorded: ECOMPILE */
      return CCACHE_EIO;
    default: /* non-zero without a word */
      return 7;
  }
}

static void compile_keeps_its_ccache_status(void **state) {
  (void)state;
  t_ctx tc = {0};
  ccache *c = t_open(&tc, U, U, U);
  ccache_lease l;
  nest n = {0};
  assert_int_equal(ccache_get_or_compile(c, K(1), status_compile, &n, &l), CCACHE_ENOMEM);
  assert_string_equal(ccache_error_detail(), "scratch arena of 512 MiB refused");
  n.mode = 1;
  assert_int_equal(ccache_get_or_compile(c, K(2), status_compile, &n, &l), CCACHE_ECOMPILE);
  assert_string_equal(ccache_error_detail(), "ptxas: out of registers in kernel matmul_7");
  n.mode = 2;
  assert_int_equal(ccache_get_or_compile(c, K(3), status_compile, &n, &l), CCACHE_ECOMPILE);
  assert_string_equal(ccache_error_detail(), "ptxas: out of registers in kernel matmul_7");
  n.mode = 3;
  assert_int_equal(ccache_get_or_compile(c, K(4), status_compile, &n, &l), CCACHE_ECOMPILE);
  assert_non_null(strstr(ccache_error_detail(), "returned -10 without a detail"));
  n.mode = 4;
  assert_int_equal(ccache_get_or_compile(c, K(5), status_compile, &n, &l), CCACHE_ECOMPILE);
  char want[200], hex[CCACHE_KEY_HEX_LEN];
  snprintf(want, sizeof want,
           "ccache_get_or_compile: the compile callback for key %s returned 7 without a detail "
           "(ccache_compile_fail() gives one)",
           ccache_key_hex(K(5), hex));
  assert_string_equal(ccache_error_detail(), want);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.compile_failures, 5);
  assert_int_equal(s.program_compile_failures, 2);
  assert_int_equal(s.items, 0);
  /* Outside a compile it only records. */
  assert_int_equal(ccache_compile_fail(0, NULL), CCACHE_ECOMPILE);
  assert_string_equal(ccache_error_detail(), ccache_strerror(CCACHE_ECOMPILE));
  t_close(c);
}

static int no_program_compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                              ccache_program **program_out) {
  (void)ud, (void)c, (void)key, (void)program_out;
  *closure_out = t_closure(9);
  return 0; /* forgot the program */
}

static void compile_without_program_says_so(void **state) {
  (void)state;
  t_ctx tc = {0};
  ccache *c = t_open(&tc, U, U, U);
  ccache_lease l;
  assert_int_equal(ccache_get_or_compile(c, K(1), no_program_compile, NULL, &l), CCACHE_EINVAL);
  char want[200], hex[CCACHE_KEY_HEX_LEN];
  snprintf(want, sizeof want,
           "ccache_get_or_compile: the compile callback for key %s returned 0 without setting "
           "*program_out (nothing cached)",
           ccache_key_hex(K(1), hex));
  assert_string_equal(ccache_error_detail(), want);
  assert_int_equal(tc.closures_destroyed, 1); /* the cache took and destroyed it */
  t_close(c);
}

/* --------------------------------------------------------- the event hook */

typedef struct ev_log {
  int n;
  struct {
    int kind, level, cause, status;
    ccache_key key;
    char op[16], tier_name[16];
    uint64_t duration_ns;
    pthread_t thread;
  } e[64];
  ccache *c; /* read stats from inside the hook: never under a lock */
} ev_log;

static void record_event(void *ctx, const ccache_event *ev) {
  ev_log *log = ctx;
  if (log->c) (void)t_stats(log->c); /* would deadlock under wlock or pmu */
  if (log->n == 64) return;
  int i = log->n++;
  log->e[i].kind = ev->kind;
  log->e[i].level = ev->level;
  log->e[i].cause = ev->cause;
  log->e[i].status = ev->status;
  log->e[i].key = ev->key;
  snprintf(log->e[i].op, sizeof log->e[i].op, "%s", ev->op ? ev->op : "");
  snprintf(log->e[i].tier_name, sizeof log->e[i].tier_name, "%s",
           ev->tier_name ? ev->tier_name : "");
  log->e[i].duration_ns = ev->duration_ns;
  log->e[i].thread = pthread_self();
}

static int nested_compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                          ccache_program **program_out) {
  t_compiler *tcomp = ud;
  if (ccache_program_get_or_compile(c, PK(1), t_compile, tcomp, program_out) != CCACHE_OK)
    return -1;
  *closure_out = t_closure((int)key.hi);
  return 0;
}

#define EV(i, k, lvl, keyv)                              \
  do {                                                   \
    assert_int_equal(log.e[i].kind, (k));                \
    assert_int_equal(log.e[i].level, (lvl));             \
    assert_true(ccache_key_eq(log.e[i].key, (keyv)));    \
    assert_true(pthread_equal(log.e[i].thread, caller)); \
  } while (0)

static void event_hook_reports_compiles_and_evictions(void **state) {
  (void)state;
  t_ctx tc = {0};
  ev_log log;
  memset(&log, 0, sizeof log);
  ccache_config cfg;
  t_config(&cfg, &tc);
  cfg.max_items = 2;
  cfg.on_event = record_event;
  cfg.event_ctx = &log;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  log.c = c;
  pthread_t caller = pthread_self();
  t_compiler comp = {0};
  ccache_lease l;
  for (uint64_t k = 1; k <= 3; k++) {
    assert_int_equal(ccache_get_or_compile(c, K(k), nested_compile, &comp, &l), CCACHE_OK);
    ccache_lease_release(c, &l);
  }
  assert_int_equal(ccache_remove(c, K(2)), CCACHE_OK);
  t_close(c);
  /* K1: closure start, program start + end, closure end; K2, K3: closure
   * start + end (the program is shared); K3's insert evicts K1; remove K2;
   * close K3. */
  assert_int_equal(log.n, 4 + 2 + 2 + 1 + 1 + 1);
  EV(0, CCACHE_EVENT_COMPILE_START, CCACHE_LEVEL_CLOSURE, K(1));
  EV(1, CCACHE_EVENT_COMPILE_START, CCACHE_LEVEL_PROGRAM, PK(1));
  EV(2, CCACHE_EVENT_COMPILE_END, CCACHE_LEVEL_PROGRAM, PK(1));
  EV(3, CCACHE_EVENT_COMPILE_END, CCACHE_LEVEL_CLOSURE, K(1));
  assert_int_equal(log.e[2].status, CCACHE_OK);
  assert_true(log.e[3].duration_ns >= log.e[2].duration_ns); /* nested inside */
  EV(4, CCACHE_EVENT_COMPILE_START, CCACHE_LEVEL_CLOSURE, K(2));
  EV(5, CCACHE_EVENT_COMPILE_END, CCACHE_LEVEL_CLOSURE, K(2));
  EV(6, CCACHE_EVENT_COMPILE_START, CCACHE_LEVEL_CLOSURE, K(3));
  EV(7, CCACHE_EVENT_EVICT, CCACHE_LEVEL_CLOSURE, K(1)); /* K3's insert, before its end */
  assert_int_equal(log.e[7].cause, CCACHE_CAUSE_CAPACITY);
  EV(8, CCACHE_EVENT_COMPILE_END, CCACHE_LEVEL_CLOSURE, K(3));
  EV(9, CCACHE_EVENT_EVICT, CCACHE_LEVEL_CLOSURE, K(2));
  assert_int_equal(log.e[9].cause, CCACHE_CAUSE_REMOVED);
  EV(10, CCACHE_EVENT_EVICT, CCACHE_LEVEL_CLOSURE, K(3));
  assert_int_equal(log.e[10].cause, CCACHE_CAUSE_CLOSED);
  assert_int_equal(comp.calls, 1);
}

static void event_hook_reports_a_failed_compile(void **state) {
  (void)state;
  t_ctx tc = {0};
  ev_log log;
  memset(&log, 0, sizeof log);
  ccache_config cfg;
  t_config(&cfg, &tc);
  cfg.on_event = record_event;
  cfg.event_ctx = &log;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  ccache_lease l;
  nest n = {0};
  assert_int_equal(ccache_get_or_compile(c, K(1), status_compile, &n, &l), CCACHE_ENOMEM);
  t_close(c);
  assert_int_equal(log.n, 2);
  assert_int_equal(log.e[1].kind, CCACHE_EVENT_COMPILE_END);
  assert_int_equal(log.e[1].status, CCACHE_ENOMEM);
}

static void event_hook_reports_tier_ops(void **state) {
  (void)state;
  char *dir = t_tempdir("events");
  t_codec codec_state;
  memset(&codec_state, 0, sizeof codec_state);
  ccache_codec codec = t_codec_make(&codec_state, 64);
  for (int round = 0; round < 3; round++) {
    t_ctx tc = {0};
    ev_log log;
    memset(&log, 0, sizeof log);
    ccache_disk_options d;
    ccache_disk_options_init(&d);
    d.dir = dir;
    ccache_tier *tier = NULL;
    assert_int_equal(ccache_tier_disk(&d, &tier), CCACHE_OK);
    ccache_config cfg;
    t_config(&cfg, &tc);
    cfg.codec = &codec;
    cfg.runtime_tag = "events test";
    cfg.tier_min_compile_us = 0;
    cfg.tiers = &tier;
    cfg.n_tiers = 1;
    cfg.on_event = record_event;
    cfg.event_ctx = &log;
    ccache *c = NULL;
    assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
    t_compiler comp = {0};
    assert_int_equal(t_goc(c, PK(5), &comp, CCACHE_OK), 5);
    t_close(c);
    int i = 0;
    if (round == 0) { /* cold: miss, miss again after the lock, compile, store */
      assert_int_equal(log.n, 5);
      assert_int_equal(log.e[i++].kind, CCACHE_EVENT_TIER_MISS);
      assert_int_equal(log.e[i++].kind, CCACHE_EVENT_TIER_MISS);
      assert_int_equal(log.e[i++].kind, CCACHE_EVENT_COMPILE_START);
      assert_int_equal(log.e[i].kind, CCACHE_EVENT_TIER_WRITE);
      assert_string_equal(log.e[i].op, "put");
      assert_string_equal(log.e[i++].tier_name, "disk");
      assert_int_equal(log.e[i++].kind, CCACHE_EVENT_COMPILE_END);
      assert_int_equal(comp.calls, 1);
      /* Now damage the entry: its file name is the key in hex. */
      char hex[CCACHE_KEY_HEX_LEN], path[4096];
      ccache_key_hex(PK(5), hex);
      char taghex[17];
      snprintf(taghex, sizeof taghex, "%016llx",
               (unsigned long long)XXH3_64bits("events test", strlen("events test")));
      snprintf(path, sizeof path, "%s/v1/%s/%.2s/%s", dir, taghex, hex, hex);
      FILE *f = fopen(path, "r+b");
      assert_non_null(f); /* the directory tier names its files by ccache_key_hex() */
      fseek(f, 60, SEEK_SET);
      fputc(0x5A ^ fgetc(f), f);
      fclose(f);
    } else if (round == 1) { /* the damaged entry: corrupt, then compiled again */
      assert_int_equal(log.e[i].kind, CCACHE_EVENT_TIER_CORRUPT);
      assert_string_equal(log.e[i++].op, "get");
      assert_int_equal(comp.calls, 1);
      assert_int_equal(log.e[log.n - 2].kind, CCACHE_EVENT_TIER_WRITE);
    } else { /* warm: a hit, nothing compiled */
      assert_int_equal(log.n, 1);
      assert_int_equal(log.e[0].kind, CCACHE_EVENT_TIER_HIT);
      assert_int_equal(log.e[0].level, CCACHE_LEVEL_PROGRAM);
      assert_true(ccache_key_eq(log.e[0].key, PK(5)));
      assert_int_equal(comp.calls, 0);
    }
  }
  t_rmrf(dir);
  free(dir);
}
int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(compile_detail_reaches_every_waiter),
      cmocka_unit_test(compile_keeps_its_ccache_status),
      cmocka_unit_test(compile_without_program_says_so),
      cmocka_unit_test(event_hook_reports_compiles_and_evictions),
      cmocka_unit_test(event_hook_reports_a_failed_compile),
      cmocka_unit_test(event_hook_reports_tier_ops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
