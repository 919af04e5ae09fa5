/*
 * bench_scaling.c - P2: do hits scale with threads?
 *
 * Aggregate hits/s (ccache_fetch + ccache_lease_release) with 2 threads
 * divided by hits/s with 1 thread:
 *  - distinct keys: each thread looks up its own half of the keys (random
 *    order, dependent chain as in bench_hit), at 100k and 1k entries;
 *  - one hot key: every thread looks up the same key (every hit writes that
 *    entry's reference count: the one line the design still shares);
 *  - diagnostic: distinct keys in disjoint memory halves: thread t looks up
 *    keys [t n/2, (t+1) n/2), which were put one after the other, so their
 *    entries were allocated apart and no cache line holds entries of both
 *    threads.  In "distinct keys" thread t takes the keys i with i % 2 == t,
 *    whose entries are malloc neighbours.  A hit writes only its thread's
 *    reader stripe (ccache__my_stripe in src/closure.c: a mutex and counters,
 *    on lines of their own) and the entry's reference count; if this row
 *    scales and "distinct keys" does not, the cost is false sharing between
 *    neighbouring entries' reference counts.
 * The same ratio for a bare, lock-free, read-only uthash table (the same
 * hash as the library: bench_fold_hash) is measured alongside: it is what
 * the machine itself allows (2 vCPUs that share a core, or memory bandwidth,
 * show up there first).
 *
 * Threads are pinned one per CPU; each repetition runs 1 thread and then 2
 * threads back to back and keeps the ratio of that pair.
 */
#include <pthread.h>
#include <string.h>
#include <uthash.h>

#include "bench_tables.h"

#define KEY_SALT 2u
#define NTHREADS 2



static uint64_t loop_ccache(ccache *c, const uint32_t *order, size_t n) {
  uint64_t dep = 0, sum = 0;
  for (size_t i = 0; i < n; i++) {
    ccache_lease l;
    if (ccache_fetch(c, bench_key(KEY_SALT, order[i] + dep), &l) != CCACHE_OK) return UINT64_MAX;
    uintptr_t v = (uintptr_t)l.closure;
    sum += v;
    dep = v >> 60;
    ccache_lease_release(c, &l);
  }
  return sum;
}

static uint64_t loop_uthash(bench_uh_entry *head, const uint32_t *order, size_t n) {
  uint64_t dep = 0, sum = 0;
  for (size_t i = 0; i < n; i++) {
    ccache_key k = bench_key(KEY_SALT, order[i] + dep);
    bench_uh_entry *e;
    HASH_FIND_BYHASHVALUE(hh, head, &k, sizeof k, bench_fold_hash(k), e);
    if (!e) return UINT64_MAX;
    uintptr_t v = (uintptr_t)e->value;
    sum += v;
    dep = v >> 60;
  }
  return sum;
}

typedef struct worker {
  int cpu;
  ccache *c;      /* or */
  bench_uh_entry *uh;
  const uint32_t *order;
  size_t n;
  uint64_t want, sum;
  uint64_t t0, t1; /* this thread's own start and end */
  pthread_barrier_t *start;
} worker;

static void *worker_main(void *arg) {
  worker *w = arg;
  bench_pin(w->cpu);
  pthread_barrier_wait(w->start);
  w->t0 = bench_now_ns();
  w->sum = w->c ? loop_ccache(w->c, w->order, w->n) : loop_uthash(w->uh, w->order, w->n);
  w->t1 = bench_now_ns();
  return NULL;
}

/* Hits per second of nt threads, thread t on orders[t]. */
static double run(int nt, ccache *c, bench_uh_entry *uh, uint32_t *const *orders, const uint64_t *want,
                  size_t n) {
  pthread_t th[NTHREADS];
  worker w[NTHREADS];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)nt + 1);
  for (int t = 0; t < nt; t++) {
    w[t] = (worker){.cpu = t, .c = c, .uh = uh, .order = orders[t], .n = n, .want = want[t],
                    .start = &start};
    BENCH_CHECK(pthread_create(&th[t], NULL, worker_main, &w[t]) == 0, "pthread_create");
  }
  pthread_barrier_wait(&start);
  for (int t = 0; t < nt; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&start);
  /* From the first thread's start to the last thread's end. */
  uint64_t t0 = w[0].t0, t1 = w[0].t1;
  for (int t = 1; t < nt; t++) {
    if (w[t].t0 < t0) t0 = w[t].t0;
    if (w[t].t1 > t1) t1 = w[t].t1;
  }
  uint64_t dt = t1 > t0 ? t1 - t0 : 1;
  for (int t = 0; t < nt; t++)
    BENCH_CHECK(w[t].sum == w[t].want, "thread %d: a lookup returned a wrong value", t);
  return (double)nt * (double)n * 1e9 / (double)dt;
}


typedef enum { KM_DISTINCT, KM_HOT, KM_HALVES } keymode;

/* Key index for thread t's j-th pick (j random in [0, n/2)). */
static uint32_t pick(keymode km, uint32_t j, int t, uint64_t half) {
  switch (km) {
  case KM_HOT: return 0;
  case KM_HALVES: return (uint32_t)((uint64_t)t * half + j);
  default: return j * NTHREADS + (uint32_t)t;
  }
}

/* One configuration: ratio (2 threads / 1 thread) of ccache and of uthash.
 * KM_DISTINCT: thread t uses keys i with i % 2 == t; KM_HOT: every thread
 * uses key 0; KM_HALVES: thread t uses keys [t n/2, (t+1) n/2). */
static void scaling(bench_report *rep, const bench_opts *o, uint64_t n, const char *label,
                    keymode km, bool target) {
  const uint64_t half = n / NTHREADS;
  int reps = o->quick ? 3 : 15;
  ccache *c = bench_cc_build(KEY_SALT, n, 1);
  bench_uh_entry *uh = bench_uh_build(KEY_SALT, n, true);
  uint32_t *orders[NTHREADS];
  uint64_t want[NTHREADS];
  /* Lookups per thread: enough for ~25 ms (quick) / ~120 ms (full) on one
   * thread, from a short calibration run, so scheduler noise stays small. */
  size_t per = 20000;
  for (int pass = 0; pass < 2; pass++) {
    for (int t = 0; t < NTHREADS; t++) {
      orders[t] = bench_random_order(per, (uint32_t)half, 500 + (uint64_t)t);
      want[t] = 0;
      for (size_t i = 0; i < per; i++) {
        orders[t][i] = pick(km, orders[t][i], t, half);
        want[t] += (uintptr_t)bench_closure_of(orders[t][i]);
      }
    }
    if (pass == 1) break;
    run(1, c, NULL, orders, want, per);
    double rate = run(1, c, NULL, orders, want, per); /* hits/s */
    double target_s = o->quick ? 0.025 : 0.12;
    size_t want_n = (size_t)(rate * target_s);
    per = want_n < 20000 ? 20000 : want_n > 20000000 ? 20000000 : want_n;
    for (int t = 0; t < NTHREADS; t++) free(orders[t]);
  }
  double *r_cc = malloc(sizeof(double) * (size_t)reps), *r_uh = malloc(sizeof(double) * (size_t)reps),
         *one = malloc(sizeof(double) * (size_t)reps), *two = malloc(sizeof(double) * (size_t)reps),
         *one_u = malloc(sizeof(double) * (size_t)reps), *two_u = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(r_cc && r_uh && one && two && one_u && two_u, "out of memory");
  uint64_t h0 = bench_cc_hits(c);
  run(1, c, NULL, orders, want, per); /* warm-up (and the hit count starts here) */
  run(NTHREADS, c, NULL, orders, want, per);
  run(1, NULL, uh, orders, want, per);
  for (int r = 0; r < reps; r++) {
    one[r] = run(1, c, NULL, orders, want, per);
    two[r] = run(NTHREADS, c, NULL, orders, want, per);
    one_u[r] = run(1, NULL, uh, orders, want, per);
    two_u[r] = run(NTHREADS, NULL, uh, orders, want, per);
    r_cc[r] = two[r] / one[r];
    r_uh[r] = two_u[r] / one_u[r];
  }
  uint64_t lookups = (uint64_t)per * (uint64_t)(reps + 1) * (1 + NTHREADS);
  BENCH_CHECK(bench_cc_hits(c) - h0 == lookups, "hit counter %llu, want %llu",
              (unsigned long long)(bench_cc_hits(c) - h0), (unsigned long long)lookups);
  char fig[96];
  snprintf(fig, sizeof fig, "P2 scaling, %d threads / 1, %s, %s entries", NTHREADS,
           km == KM_HOT      ? "one hot key"
           : km == KM_HALVES ? "distinct keys in disjoint memory halves (diagnostic)"
                             : "distinct keys",
           label);
  bool can = bench_ncpu() >= NTHREADS;
  bench_row *row = bench_add(rep, fig, bench_stats(two, reps).med / 1e6, "M hits/s",
                             bench_stats(one, reps).med / 1e6, "ccache, 1 thread",
                             bench_stats(r_cc, reps), "2T / 1T", target && can ? BENCH_RATIO_GE : BENCH_REPORT,
                             1.8);
  bench_stat su = bench_stats(r_uh, reps);
  snprintf(row->note, sizeof row->note, "bare uthash (no lock) scales %.2f× [%.2f, %.2f]%s",
           su.med, su.min, su.max, can ? "" : "; fewer CPUs than threads: no target");
  free(r_cc);
  free(r_uh);
  free(one);
  free(two);
  free(one_u);
  free(two_u);
  for (int t = 0; t < NTHREADS; t++) free(orders[t]);
  bench_uh_free(&uh);
  BENCH_OK(ccache_close(c));
  bench_trim();
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(argc, argv, &o, "P2: aggregate hits/s with 2 threads / 1 thread", false);
  bench_report rep;
  bench_report_init(&rep, "bench_scaling", "do hits scale with threads? (aggregate hits/s, 2 threads / 1)");
  scaling(&rep, &o, 100000, "100k", KM_DISTINCT, true);
  scaling(&rep, &o, 1000, "1k", KM_DISTINCT, false);
  scaling(&rep, &o, 100000, "100k", KM_HOT, false);
  scaling(&rep, &o, 100000, "100k", KM_HALVES, false);
  scaling(&rep, &o, 1000, "1k", KM_HALVES, false);
  bench_note(&rep, "threads pinned one per CPU (%d online); each repetition runs 1 then 2 "
                   "threads (~120 ms each) and keeps that pair's ratio; warm-up first; time = "
                   "first thread's start to last thread's end",
             bench_ncpu());
  if (o.quick) bench_note(&rep, "quick mode: 3 repetitions of ~25 ms");
  return bench_report_print(&rep, &o);
}
