/*
 * bench_scaling.c - P2: do hits scale with threads on the workloads serving
 * threads really run?
 *
 * Aggregate hits/s (ccache_fetch + ccache_lease_release) with 2 threads
 * divided by hits/s with 1 thread, each repetition a pinned pair (1 thread
 * then 2, one per CPU, back to back), on four workloads:
 *  - one hot closure: every thread fetches the same key;
 *  - 1k entries, random keys: each thread its own random order;
 *  - a decode step's 361 call sites: each thread walks them in order, again
 *    and again (what the oneDNN example's serving threads do);
 *  - 100k distinct entries, random keys.
 * Beside ccache, in the same repetitions and on the same keys:
 *  - bare uthash: the same table and hash, read-only, no lock, no counts:
 *    what the machine allows (its ratio is ccache's ceiling);
 *  - mutex + uthash: one pthread mutex around the same table;
 *  - thread-local (RLX's approach): each thread its own uthash table.  Hits
 *    scale trivially, but every thread holds (and compiles) every program.
 * And one cliff check: 64 threads on the 361-site walk (threads pinned round
 * robin to the CPUs) against 2 threads, aggregate hits/s.
 *
 * The scaling curve (bench/figures/scaling.svg): aggregate hits/s at 1, 2, 4
 * and 8 threads on the 361-site walk for ccache, bare uthash, mutex +
 * uthash, thread-local tables (one per thread) and EMLX's mechanism (an
 * owner thread serving a mailbox, bench_tables.h), median of the
 * repetitions; with --points FILE the medians go to FILE.  On a machine
 * with fewer CPUs than threads the curve flattens past the CPU count: what
 * is left to see there is whether a mechanism loses throughput when
 * threads outnumber CPUs.
 *
 * Every lookup's key depends on the value the previous one returned (through
 * a bit that is always zero, which the compiler cannot know), so the loops
 * measure latency-bound hits, as a JIT path sees them.  Every value found is
 * summed and checked: a wrong lookup fails the benchmark.
 */
#include <pthread.h>
#include <string.h>
#include <uthash.h>

#include "bench_tables.h"

#define KEY_SALT 2u
#define MAXT     64

#define CURVE_MAXT 8

typedef enum { S_CCACHE, S_BARE, S_MUTEX, S_LOCAL, S_EMLX, NSUBJ } subject;
#define NPAIR S_EMLX /* the 2T / 1T rows time all but EMLX (bench_hit's rows do) */
static const char *const subj_name[NSUBJ] = {"ccache", "bare uthash", "mutex + uthash",
                                             "thread-local uthash (RLX)",
                                             "EMLX mechanism (owner thread)"};

typedef struct tables {
  ccache *c;
  bench_uh_entry *shared; /* bare and mutex */
  pthread_mutex_t mu;
  bench_uh_entry *local[CURVE_MAXT]; /* one per thread (RLX) */
  int nlocal;
  bench_emlx *emlx; /* the curve only */
} tables;

/* --------------------------------------------------------------- loops */

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

static uint64_t loop_uthash(bench_uh_entry *head, pthread_mutex_t *mu, const uint32_t *order,
                            size_t n) {
  uint64_t dep = 0, sum = 0;
  for (size_t i = 0; i < n; i++) {
    ccache_key k = bench_key(KEY_SALT, order[i] + dep);
    bench_uh_entry *e;
    if (mu) pthread_mutex_lock(mu);
    HASH_FIND_BYHASHVALUE(hh, head, &k, sizeof k, bench_fold_hash(k), e);
    uintptr_t v = e ? (uintptr_t)e->value : 0;
    if (mu) pthread_mutex_unlock(mu);
    if (!e) return UINT64_MAX;
    sum += v;
    dep = v >> 60;
  }
  return sum;
}

typedef struct worker {
  int cpu, t;
  subject s;
  tables *tb;
  const uint32_t *order;
  size_t n;
  uint64_t want, sum;
  uint64_t t0, t1;
  pthread_barrier_t *start;
} worker;

static uint64_t loop_emlx(bench_emlx *srv, const uint32_t *order, size_t n) {
  bench_emlx_req r;
  bench_emlx_req_init(&r);
  uint64_t dep = 0, sum = 0;
  for (size_t i = 0; i < n; i++) {
    uintptr_t v = (uintptr_t)bench_emlx_call(srv, &r, bench_key(KEY_SALT, order[i] + dep));
    if (!v) {
      sum = UINT64_MAX;
      break;
    }
    sum += v;
    dep = v >> 60;
  }
  bench_emlx_req_destroy(&r);
  return sum;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  bench_pin(w->cpu);
  pthread_barrier_wait(w->start);
  w->t0 = bench_now_ns();
  switch (w->s) {
    case S_CCACHE:
      w->sum = loop_ccache(w->tb->c, w->order, w->n);
      break;
    case S_BARE:
      w->sum = loop_uthash(w->tb->shared, NULL, w->order, w->n);
      break;
    case S_MUTEX:
      w->sum = loop_uthash(w->tb->shared, &w->tb->mu, w->order, w->n);
      break;
    case S_LOCAL:
      w->sum = loop_uthash(w->tb->local[w->t % w->tb->nlocal], NULL, w->order, w->n);
      break;
    default:
      w->sum = loop_emlx(w->tb->emlx, w->order, w->n);
      break;
  }
  w->t1 = bench_now_ns();
  return NULL;
}

/* Aggregate hits/s of nt threads; thread t runs orders[t % 2]. */
static double run(subject s, int nt, tables *tb, uint32_t *const *orders, const uint64_t *want,
                  size_t n) {
  static pthread_t th[MAXT];
  static worker w[MAXT];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)nt + 1);
  int ncpu = bench_ncpu();
  for (int t = 0; t < nt; t++) {
    w[t] = (worker){.cpu = t % ncpu,
                    .t = t,
                    .s = s,
                    .tb = tb,
                    .order = orders[t % 2],
                    .n = n,
                    .want = want[t % 2],
                    .start = &start};
    BENCH_CHECK(pthread_create(&th[t], NULL, worker_main, &w[t]) == 0, "pthread_create");
  }
  pthread_barrier_wait(&start);
  for (int t = 0; t < nt; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&start);
  uint64_t t0 = w[0].t0, t1 = w[0].t1;
  for (int t = 0; t < nt; t++) {
    BENCH_CHECK(w[t].sum == w[t].want, "%s, thread %d: a lookup returned a wrong value",
                subj_name[s], t);
    if (w[t].t0 < t0) t0 = w[t].t0;
    if (w[t].t1 > t1) t1 = w[t].t1;
  }
  return (double)nt * (double)n * 1e9 / (double)(t1 > t0 ? t1 - t0 : 1);
}

/* ----------------------------------------------------------- workloads */

typedef enum { W_HOT, W_RANDOM, W_WALK } wmode;

typedef struct workload {
  const char *label;
  uint64_t entries;
  wmode mode;
} workload;

static uint32_t *make_order(const workload *wl, size_t per, int t) {
  if (wl->mode == W_RANDOM)
    return bench_random_order(per, (uint32_t)wl->entries, 700 + (uint64_t)t);
  uint32_t *o = malloc(per * sizeof *o);
  BENCH_CHECK(o != NULL, "out of memory");
  for (size_t i = 0; i < per; i++) o[i] = wl->mode == W_HOT ? 0 : (uint32_t)(i % wl->entries);
  return o;
}

static uint64_t sum_of(const uint32_t *order, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; i++) s += (uintptr_t)bench_closure_of(order[i]);
  return s;
}

static void build(tables *tb, uint64_t n, int nlocal) {
  memset(tb, 0, sizeof *tb);
  tb->c = bench_cc_build(KEY_SALT, n, 16);
  tb->shared = bench_uh_build(KEY_SALT, n, true);
  pthread_mutex_init(&tb->mu, NULL);
  tb->nlocal = nlocal;
  for (int t = 0; t < nlocal; t++) tb->local[t] = bench_uh_build(KEY_SALT, n, true);
}

static void teardown(tables *tb) {
  BENCH_OK(ccache_close(tb->c));
  bench_uh_free(&tb->shared);
  pthread_mutex_destroy(&tb->mu);
  for (int t = 0; t < tb->nlocal; t++) bench_uh_free(&tb->local[t]);
  bench_trim();
}

/* Lookups per thread: enough for ~100 ms (full) / ~20 ms (quick) on one
 * thread, from a calibration run. */
static size_t calibrate(tables *tb, const workload *wl, const bench_opts *o) {
  size_t per = 20000;
  uint32_t *ord[2] = {make_order(wl, per, 0), make_order(wl, per, 1)};
  uint64_t want[2] = {sum_of(ord[0], per), sum_of(ord[1], per)};
  run(S_CCACHE, 1, tb, ord, want, per);
  double rate = run(S_CCACHE, 1, tb, ord, want, per);
  free(ord[0]);
  free(ord[1]);
  size_t n = (size_t)(rate * (o->quick ? 0.02 : 0.1));
  return n < 20000 ? 20000 : n > 20000000 ? 20000000 : n;
}

static void scaling(bench_report *rep, const bench_opts *o, const workload *wl, bool with64) {
  int reps = o->quick ? 3 : 15;
  tables tb;
  build(&tb, wl->entries, 2);
  size_t per = calibrate(&tb, wl, o);
  uint32_t *ord[2] = {make_order(wl, per, 0), make_order(wl, per, 1)};
  uint64_t want[2] = {sum_of(ord[0], per), sum_of(ord[1], per)};
  double *one[NPAIR], *two[NPAIR], *ratio[NPAIR], *rel = malloc(sizeof(double) * (size_t)reps);
  for (int s = 0; s < NPAIR; s++) {
    one[s] = malloc(sizeof(double) * (size_t)reps);
    two[s] = malloc(sizeof(double) * (size_t)reps);
    ratio[s] = malloc(sizeof(double) * (size_t)reps);
    BENCH_CHECK(one[s] && two[s] && ratio[s] && rel, "out of memory");
    run((subject)s, 1, &tb, ord, want, per); /* warm-up */
    run((subject)s, 2, &tb, ord, want, per);
  }
  uint64_t h0 = bench_cc_hits(tb.c);
  for (int r = 0; r < reps; r++)
    for (int s = 0; s < NPAIR; s++) {
      one[s][r] = run((subject)s, 1, &tb, ord, want, per);
      two[s][r] = run((subject)s, 2, &tb, ord, want, per);
      ratio[s][r] = two[s][r] / one[s][r];
    }
  BENCH_CHECK(bench_cc_hits(tb.c) - h0 == (uint64_t)reps * per * 3, "hit counter %llu, want %llu",
              (unsigned long long)(bench_cc_hits(tb.c) - h0),
              (unsigned long long)((uint64_t)reps * per * 3));
  for (int r = 0; r < reps; r++) rel[r] = ratio[S_CCACHE][r] / ratio[S_BARE][r];
  bool can = bench_ncpu() >= 2;
  char fig[96], note[160];
  snprintf(fig, sizeof fig, "P2 scaling, 2 threads / 1, %s", wl->label);
  bench_row *row = bench_add(rep, fig, bench_stats(two[S_CCACHE], reps).med / 1e6, "M hits/s",
                             bench_stats(one[S_CCACHE], reps).med / 1e6, "ccache, 1 thread",
                             bench_stats(ratio[S_CCACHE], reps), "2T / 1T",
                             can ? BENCH_RATIO_GE : BENCH_REPORT, 1.8);
  bench_stat sb = bench_stats(ratio[S_BARE], reps);
  snprintf(row->note, sizeof row->note, "bare uthash scales %.2f× [%.2f, %.2f]%s", sb.med, sb.min,
           sb.max, can ? "" : "; fewer CPUs than threads: no target");
  snprintf(fig, sizeof fig, "P2 ccache's scaling / bare uthash's, %s", wl->label);
  bench_add(rep, fig, bench_stats(ratio[S_CCACHE], reps).med, "× (2T/1T)", sb.med,
            "bare uthash 2T/1T", bench_stats(rel, reps), "ccache / uthash",
            can ? BENCH_RATIO_GE : BENCH_REPORT, 0.9);
  for (int s = S_MUTEX; s < NPAIR; s++) {
    snprintf(fig, sizeof fig, "peer: %s, 2 threads / 1, %s", subj_name[s], wl->label);
    row = bench_add(rep, fig, bench_stats(two[s], reps).med / 1e6, "M hits/s",
                    bench_stats(one[s], reps).med / 1e6, "1 thread", bench_stats(ratio[s], reps),
                    "2T / 1T", BENCH_REPORT, 0);
    snprintf(
        note, sizeof note, "2 threads: %.2f× ccache's hits/s%s",
        bench_stats(two[s], reps).med / bench_stats(two[S_CCACHE], reps).med,
        s == S_LOCAL ? "; every thread holds every program: memory and compiles × threads" : "");
    snprintf(row->note, sizeof row->note, "%s", note);
  }
  if (with64) {
    /* The cliff check: 64 threads on 2 CPUs, aggregate, against 2 threads. */
    int r64 = o->quick ? 2 : 7;
    size_t per64 = per / 32 > 5000 ? per / 32 : 5000;
    uint32_t *o64[2] = {make_order(wl, per64, 0), make_order(wl, per64, 1)};
    uint64_t w64[2] = {sum_of(o64[0], per64), sum_of(o64[1], per64)};
    double *a = malloc(sizeof(double) * (size_t)r64), *b = malloc(sizeof(double) * (size_t)r64),
           *q = malloc(sizeof(double) * (size_t)r64);
    BENCH_CHECK(a && b && q, "out of memory");
    run(S_CCACHE, MAXT, &tb, o64, w64, per64);
    for (int r = 0; r < r64; r++) {
      b[r] = run(S_CCACHE, 2, &tb, ord, want, per);
      a[r] = run(S_CCACHE, MAXT, &tb, o64, w64, per64);
      q[r] = a[r] / b[r];
    }
    snprintf(fig, sizeof fig, "P2 no cliff: 64 threads / 2 threads, %s", wl->label);
    bench_add(rep, fig, bench_stats(a, r64).med / 1e6, "M hits/s", bench_stats(b, r64).med / 1e6,
              "2 threads", bench_stats(q, r64), "64T / 2T", BENCH_RATIO_GE, 0.8);
    free(a);
    free(b);
    free(q);
    free(o64[0]);
    free(o64[1]);
  }
  for (int s = 0; s < NPAIR; s++) {
    free(one[s]);
    free(two[s]);
    free(ratio[s]);
  }
  free(rel);
  free(ord[0]);
  free(ord[1]);
  teardown(&tb);
}

/* The scaling curve: every subject at 1, 2, 4 and 8 threads on the 361-site
 * walk, each repetition running every (subject, threads) pair once; the
 * medians become one report row per subject and, with --points, the data
 * points of bench/figures/scaling.svg. */
static void curve(bench_report *rep, const bench_opts *o) {
  static const int threads[] = {1, 2, 4, CURVE_MAXT};
  enum { NT = sizeof threads / sizeof threads[0] };
  const workload wl = {"361-site walk (one decode step)", 361, W_WALK};
  int reps = o->quick ? 1 : 5;
  tables tb;
  build(&tb, wl.entries, CURVE_MAXT);
  bench_emlx srv;
  bench_emlx_start(&srv, bench_uh_build(KEY_SALT, wl.entries, false));
  tb.emlx = &srv;
  size_t per = calibrate(&tb, &wl, o) / 2; /* ~50 ms (full) per thread */
  /* A round trip costs ~100x a hit: fewer lookups, about as long. */
  size_t per_emlx = per / 100 > 2000 ? per / 100 : 2000;
  uint32_t *ord[2] = {make_order(&wl, per, 0), make_order(&wl, per, 1)};
  uint64_t want[2] = {sum_of(ord[0], per), sum_of(ord[1], per)};
  uint64_t want_emlx[2] = {sum_of(ord[0], per_emlx), sum_of(ord[1], per_emlx)};
  static double rate[NSUBJ][NT][16];
  for (int s = 0; s < NSUBJ; s++) /* warm-up */
    run((subject)s, 2, &tb, ord, s == S_EMLX ? want_emlx : want, s == S_EMLX ? per_emlx : per);
  for (int r = 0; r < reps; r++)
    for (int i = 0; i < NT; i++)
      for (int s = 0; s < NSUBJ; s++)
        rate[s][i][r] = run((subject)s, threads[i], &tb, ord, s == S_EMLX ? want_emlx : want,
                            s == S_EMLX ? per_emlx : per);
  for (int s = 0; s < NSUBJ; s++) {
    double med[NT], q[16];
    for (int i = 0; i < NT; i++) {
      med[i] = bench_stats(rate[s][i], reps).med;
      char x[8];
      snprintf(x, sizeof x, "%d", threads[i]);
      bench_point(o, "scaling", subj_name[s], x, med[i], "hits/s");
    }
    for (int r = 0; r < reps; r++) q[r] = rate[s][NT - 1][r] / rate[s][0][r];
    char fig[96];
    snprintf(fig, sizeof fig, "curve: %s, %d threads / 1, %s", subj_name[s], CURVE_MAXT, wl.label);
    bench_row *row = bench_add(rep, fig, med[NT - 1] / 1e6, "M hits/s", med[0] / 1e6, "1 thread",
                               bench_stats(q, reps), "8T / 1T", BENCH_REPORT, 0);
    snprintf(row->note, sizeof row->note,
             "aggregate M hits/s at 1, 2, 4, 8 threads: %.3g, %.3g, %.3g, %.3g (%d CPUs)",
             med[0] / 1e6, med[1] / 1e6, med[2] / 1e6, med[3] / 1e6, bench_ncpu());
  }
  free(ord[0]);
  free(ord[1]);
  bench_emlx_stop(&srv);
  teardown(&tb);
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(argc, argv, &o, "P2: aggregate hits/s with 2 threads / 1 thread", false);
  bench_report rep;
  bench_report_init(&rep, "bench_scaling",
                    "do hits scale with threads on the hot sets serving threads share?");
  static const workload wls[] = {
      {"one hot closure", 1000, W_HOT},
      {"1k entries, random keys", 1000, W_RANDOM},
      {"361-site walk (one decode step)", 361, W_WALK},
      {"100k distinct entries, random keys", 100000, W_RANDOM},
  };
  for (size_t i = 0; i < sizeof wls / sizeof wls[0]; i++)
    scaling(&rep, &o, &wls[i], wls[i].mode == W_WALK);
  curve(&rep, &o);
  bench_note(&rep,
             "threads pinned one per CPU (%d online); each repetition runs 1 then 2 threads "
             "(~100 ms each) of every subject and keeps that pair's ratio; warm-up first; "
             "time = first thread's start to last thread's end",
             bench_ncpu());
  if (o.quick) bench_note(&rep, "quick mode: 3 repetitions of ~20 ms");
  return bench_report_print(&rep, &o);
}
