/*
 * bench_sweeper.c - what the sweeper thread costs and how late it is.
 *
 *  - idle CPU: a cache with ttl_ms = 1 and no entry, its sweeper thread
 *    started, left alone for a second; the process's CPU time over that
 *    second against the same second with a cache that has no sweeper thread
 *    (the baseline: what the process burns anyway).  Target: <= 1 ms/s more.
 *  - lateness: an entry with a 200 ms TTL and no call at all after the put;
 *    the time from its deadline (insert + 200 ms, real clock) to its destroy
 *    callback, which the sweeper runs.  Target: <= 5 ms (median and max).
 *  - a batch of 1,000 entries put within one millisecond-step of a stepped
 *    clock share one deadline: the sweeper's deadline wake-ups it costs.
 *    Target: 1.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(uint64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* CPU ms the process spends over `ms` of real time while it sleeps. */
static double idle_cpu_ms(uint64_t ms) {
  uint64_t c0 = cpu_ns();
  sleep_ms(ms);
  return (double)(cpu_ns() - c0) / 1e6;
}

static ccache *open_ttl(uint64_t ttl, int sweeper, ccache_destroy_fn destroy, void *ctx,
                        ccache_clock_fn clock) {
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.ttl_ms = ttl;
  cfg.sweeper_thread = sweeper;
  cfg.destroy_closure = destroy;
  cfg.ctx = ctx;
  cfg.clock_ms = clock;
  ccache *c = NULL;
  BENCH_OK(ccache_open(&cfg, &c));
  return c;
}

static void put_one(ccache *c, uint64_t k, void *closure) {
  ccache_program *p = NULL;
  BENCH_OK(ccache_program_intern(c, bench_key(7, 0), NULL, 1, &p));
  BENCH_OK(ccache_put(c, bench_key(1, k), closure, p));
  ccache_program_release(c, p);
}

/* --------------------------------------------------------------- idle */

static void row_idle(bench_report *rep, const bench_opts *o) {
  int reps = o->quick ? 1 : 5;
  uint64_t ms = o->quick ? 200 : 1000;
  double with[8], without[8], diff[8];
  for (int i = 0; i < reps; i++) {
    ccache *none = open_ttl(1, 0, NULL, NULL, NULL);
    without[i] = idle_cpu_ms(ms) * 1000.0 / (double)ms;
    BENCH_OK(ccache_close(none));
    ccache *c = open_ttl(1, 1, NULL, NULL, NULL); /* the thread starts here */
    with[i] = idle_cpu_ms(ms) * 1000.0 / (double)ms;
    ccache_stats s = {.size = sizeof s};
    ccache_stats_get(c, &s);
    BENCH_CHECK(s.sweeper_wakeups == 0, "an empty cache's sweeper woke %llu times",
                (unsigned long long)s.sweeper_wakeups);
    BENCH_OK(ccache_close(c));
    diff[i] = with[i] - without[i];
  }
  bench_stat d = bench_stats(diff, reps), none = {0};
  bench_row *r = bench_add(rep, "sweeper idle CPU, ttl_ms 1, no entries (extra over no thread)",
                           d.med, "ms CPU/s", NAN, "", none, "", BENCH_VALUE_LE, 1.0);
  snprintf(r->note, sizeof r->note,
           "process CPU %.3f ms/s with the sweeper, %.3f without; [%.3f, %.3f] over %d runs; "
           "0 wake-ups while empty",
           bench_stats(with, reps).med, bench_stats(without, reps).med, d.min, d.max, reps);
}

/* ----------------------------------------------------------- lateness */

typedef struct late_ctx {
  _Atomic uint64_t destroyed_ns;
} late_ctx;

static void on_destroy(void *obj, void *ctx) {
  (void)obj;
  atomic_store(&((late_ctx *)ctx)->destroyed_ns, bench_now_ns());
}

static void row_lateness(bench_report *rep, const bench_opts *o) {
  int reps = o->quick ? 2 : 9;
  const uint64_t ttl = 200;
  double late[16];
  for (int i = 0; i < reps; i++) {
    late_ctx lc = {0};
    ccache *c = open_ttl(ttl, 1, on_destroy, &lc, NULL);
    /* The cache's clock is CLOCK_MONOTONIC in ms: the entry's insert time is
     * the millisecond it was put in, its deadline that + ttl. */
    uint64_t put_ms = bench_now_ns() / 1000000u;
    put_one(c, (uint64_t)i, (void *)(uintptr_t)1);
    uint64_t deadline_ns = (put_ms + ttl) * 1000000u;
    while (atomic_load(&lc.destroyed_ns) == 0) sleep_ms(1);
    late[i] = (double)((int64_t)(atomic_load(&lc.destroyed_ns) - deadline_ns)) / 1e6;
    BENCH_OK(ccache_close(c));
  }
  bench_stat st = bench_stats(late, reps), none = {0};
  bench_row *r = bench_add(rep, "sweeper lateness: destroy - deadline, ttl_ms 200, no calls",
                           st.med, "ms", NAN, "", none, "", BENCH_VALUE_LE, 5.0);
  snprintf(r->note, sizeof r->note, "[%.2f, %.2f] ms over %d entries", st.min, st.max, reps);
}

/* -------------------------------------------------------------- batch */

static uint64_t stepped_clock(void *ctx) {
  (void)ctx;
  return bench_now_ns() / 100000000u * 100u; /* 100 ms steps */
}

typedef struct count_ctx {
  _Atomic uint64_t n;
} count_ctx;

static void on_count(void *obj, void *ctx) {
  (void)obj;
  atomic_fetch_add(&((count_ctx *)ctx)->n, 1);
}

static void row_batch(bench_report *rep, const bench_opts *o) {
  int reps = o->quick ? 1 : 3;
  const uint64_t n = 1000;
  double wakes[8];
  for (int i = 0; i < reps; i++) {
    count_ctx cc = {0};
    ccache *c = open_ttl(100, 1, on_count, &cc, stepped_clock);
    while (bench_now_ns() / 1000000u % 100 > 50) {
    }
    for (uint64_t k = 0; k < n; k++) put_one(c, k, (void *)(uintptr_t)1);
    while (atomic_load(&cc.n) < n) sleep_ms(1);
    ccache_stats s = {.size = sizeof s};
    ccache_stats_get(c, &s);
    BENCH_CHECK(s.evicted_ttl == n, "expired %llu", (unsigned long long)s.evicted_ttl);
    wakes[i] = (double)s.sweeper_wakeups;
    BENCH_OK(ccache_close(c));
  }
  bench_stat st = bench_stats(wakes, reps), none = {0};
  bench_row *r = bench_add(rep, "sweeper wake-ups for 1,000 entries with one deadline", st.med,
                           "wake-ups", NAN, "", none, "", BENCH_VALUE_LE, 1.0);
  snprintf(r->note, sizeof r->note, "[%.0f, %.0f] over %d batches", st.min, st.max, reps);
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(argc, argv, &o, "bench_sweeper: the sweeper's idle cost and lateness", false);
  bench_report rep;
  bench_report_init(&rep, "bench_sweeper", "Does the sweeper sleep until something can expire?");
  row_idle(&rep, &o);
  row_lateness(&rep, &o);
  row_batch(&rep, &o);
  bench_note(&rep, "Real time; the machine's load moves the lateness figures.");
  return bench_report_print(&rep, &o);
}
