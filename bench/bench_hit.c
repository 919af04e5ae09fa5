/*
 * bench_hit.c - P1: how much does a hit cost?
 *
 *  - P1: ccache_fetch + ccache_lease_release on random existing keys at 1k,
 *    100k and 1M entries, against a bare uthash HASH_FIND on the same keys
 *    with no lock and the same hash function as the library (its 128-to-32
 *    bit fold, bench_fold_hash, through HASH_FIND_BYHASHVALUE): the ratio is
 *    what the library adds around the same table.  Plain HASH_FIND (uthash's
 *    default Jenkins hash over the 16 key bytes, what the library used
 *    before the fold) is timed in the same repetitions and given in the
 *    notes.
 *  - EMLX mechanism: the same lookups through one server thread that owns
 *    the table; every lookup is a request/response round trip (a mailbox
 *    under a mutex + condition variable, the reply through a semaphore), as
 *    a GenServer.call; 1 and 2 client threads.
 *  - Naive baseline: one pthread mutex around a uthash table that clears
 *    itself when full (the RLX approach); 1 and 2 threads.
 *
 * Every loop is a dependent chain: the next key is derived from the value
 * the previous lookup returned (through a bit that is always zero, which the
 * compiler cannot know), so what is timed is the latency of one lookup, as a
 * JIT path sees it (look up, then run), not the overlap of many.
 *
 * --callgrind N [--callgrind-entries E]: build E entries (default 100k), then
 * run N lookups through each of
 * cg_loop_empty (key generation only), cg_loop_uthash (fold hash),
 * cg_loop_uthash_jen (default hash) and cg_loop_ccache; bench/run reads their
 * inclusive instruction counts from callgrind.  CCACHE_BENCH_CG_TTL_MS=t in
 * the environment gives the cache a finite TTL of t ms first.  With
 * --callgrind-strong the ccache loop runs on a strong cache
 * (CCACHE_KEYS_STRONG, ccache_fetch_strong).
 */
#include <pthread.h>
#include <string.h>
#include <uthash.h>

#include "bench_tables.h"

#define KEY_SALT  1u
#define NPROGRAMS 16u

/* ------------------------------------------------------------ tables */

/* The naive cache: one mutex, one uthash table, cleared when full. */
typedef struct naive {
  pthread_mutex_t mu;
  bench_uh_entry *head;
  uint64_t count, cap;
} naive;

static void naive_put(naive *t, ccache_key key, void *value) {
  pthread_mutex_lock(&t->mu);
  if (t->count >= t->cap) { /* full: forget everything */
    bench_uh_free(&t->head);
    t->count = 0;
  }
  bench_uh_entry *e = calloc(1, sizeof *e);
  BENCH_CHECK(e != NULL, "out of memory");
  e->key = key;
  e->value = value;
  HASH_ADD(hh, t->head, key, sizeof e->key, e);
  t->count++;
  pthread_mutex_unlock(&t->mu);
}

static void *naive_get(naive *t, ccache_key key) {
  bench_uh_entry *e;
  pthread_mutex_lock(&t->mu);
  HASH_FIND(hh, t->head, &key, sizeof key, e);
  void *v = e ? e->value : NULL;
  pthread_mutex_unlock(&t->mu);
  return v;
}

/* ------------------------------------------------------------- loops */

/* Each loop returns the sum of the values found, checked by the caller
 * against the expected sum (every lookup must find the right entry). */

__attribute__((noipa)) uint64_t cg_loop_empty(const uint32_t *order, size_t n) {
  uint64_t dep = 0, sum = 0;
  for (size_t i = 0; i < n; i++) {
    ccache_key k = bench_key(KEY_SALT, order[i] + dep);
    uintptr_t v = (uintptr_t)(k.lo & 0xffff);
    sum += v;
    dep = v >> 60;
  }
  return sum;
}

/* The P1 baseline: the library's table and hash, nothing around them. */
__attribute__((noipa)) uint64_t cg_loop_uthash(bench_uh_entry *head, const uint32_t *order,
                                               size_t n) {
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

/* Plain HASH_FIND: uthash's default (Jenkins) hash of the 16 key bytes. */
__attribute__((noipa)) uint64_t cg_loop_uthash_jen(bench_uh_entry *head, const uint32_t *order,
                                                   size_t n) {
  uint64_t dep = 0, sum = 0;
  for (size_t i = 0; i < n; i++) {
    ccache_key k = bench_key(KEY_SALT, order[i] + dep);
    bench_uh_entry *e;
    HASH_FIND(hh, head, &k, sizeof k, e);
    if (!e) return UINT64_MAX;
    uintptr_t v = (uintptr_t)e->value;
    sum += v;
    dep = v >> 60;
  }
  return sum;
}

__attribute__((noipa)) uint64_t cg_loop_ccache(ccache *c, const uint32_t *order, size_t n) {
  uint64_t dep = 0, sum = 0;
  for (size_t i = 0; i < n; i++) {
    ccache_key k = bench_key(KEY_SALT, order[i] + dep);
    ccache_lease l;
    if (ccache_fetch(c, k, &l) != CCACHE_OK) return UINT64_MAX;
    uintptr_t v = (uintptr_t)l.closure;
    sum += v;
    dep = v >> 60;
    ccache_lease_release(c, &l);
  }
  return sum;
}

/* The strong mode (issue 22): a 256-bit key, its first half bench_key()'s
 * and its second half derived from it, through ccache_fetch_strong(). */
static ccache_strong_key strong_of(ccache_key k) {
  ccache_strong_key s = {k, {k.hi ^ 0x5bd1e9955bd1e995ull, k.lo * 0x9e3779b97f4a7c15ull}};
  return s;
}

__attribute__((noipa)) uint64_t cg_loop_ccache_strong(ccache *c, const uint32_t *order, size_t n) {
  uint64_t dep = 0, sum = 0;
  for (size_t i = 0; i < n; i++) {
    ccache_strong_key k = strong_of(bench_key(KEY_SALT, order[i] + dep));
    ccache_lease l;
    if (ccache_fetch_strong(c, &k, &l) != CCACHE_OK) return UINT64_MAX;
    uintptr_t v = (uintptr_t)l.closure;
    sum += v;
    dep = v >> 60;
    ccache_lease_release(c, &l);
  }
  return sum;
}

/* bench_cc_build()'s cache with the same entries under strong keys. */
static ccache *strong_build(uint64_t salt, uint64_t n, unsigned nprograms) {
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.sweeper_thread = 0;
  cfg.key_mode = CCACHE_KEYS_STRONG;
  ccache *c;
  BENCH_OK(ccache_open(&cfg, &c));
  ccache_program **p = calloc(nprograms, sizeof *p);
  BENCH_CHECK(p != NULL, "out of memory");
  for (unsigned j = 0; j < nprograms; j++) {
    ccache_strong_key pk = strong_of(bench_key(99, j));
    BENCH_OK(ccache_program_intern_strong(c, &pk, (void *)(uintptr_t)(0x1000u + j), 4096, &p[j]));
  }
  for (uint64_t i = 0; i < n; i++) {
    ccache_strong_key k = strong_of(bench_key(salt, i));
    BENCH_OK(ccache_put_strong(c, &k, bench_closure_of(i), p[i % nprograms]));
  }
  for (unsigned j = 0; j < nprograms; j++) ccache_program_release(c, p[j]);
  free(p);
  return c;
}

static uint64_t loop_naive(naive *t, const uint32_t *order, size_t n) {
  uint64_t dep = 0, sum = 0;
  for (size_t i = 0; i < n; i++) {
    uintptr_t v = (uintptr_t)naive_get(t, bench_key(KEY_SALT, order[i] + dep));
    if (!v) return UINT64_MAX;
    sum += v;
    dep = v >> 60;
  }
  return sum;
}

static uint64_t loop_emlx(bench_emlx *s, bench_emlx_req *r, const uint32_t *order, size_t n) {
  uint64_t dep = 0, sum = 0;
  for (size_t i = 0; i < n; i++) {
    uintptr_t v = (uintptr_t)bench_emlx_call(s, r, bench_key(KEY_SALT, order[i] + dep));
    if (!v) return UINT64_MAX;
    sum += v;
    dep = v >> 60;
  }
  return sum;
}

static uint64_t expected_sum(const uint32_t *order, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; i++) s += (uintptr_t)bench_closure_of(order[i]);
  return s;
}

/* ----------------------------------------------------- threaded runs */

typedef enum { SUBJ_CCACHE, SUBJ_NAIVE, SUBJ_EMLX } subject;

typedef struct worker {
  subject what;
  ccache *c;
  naive *nv;
  bench_emlx *srv;
  const uint32_t *order;
  size_t n;
  uint64_t sum;
  uint64_t t0, t1; /* this thread's own start and end */
  pthread_barrier_t *start;
} worker;

static void *worker_main(void *arg) {
  worker *w = arg;
  bench_emlx_req req;
  if (w->what == SUBJ_EMLX) bench_emlx_req_init(&req);
  pthread_barrier_wait(w->start);
  w->t0 = bench_now_ns();
  switch (w->what) {
    case SUBJ_CCACHE:
      w->sum = cg_loop_ccache(w->c, w->order, w->n);
      break;
    case SUBJ_NAIVE:
      w->sum = loop_naive(w->nv, w->order, w->n);
      break;
    case SUBJ_EMLX:
      w->sum = loop_emlx(w->srv, &req, w->order, w->n);
      break;
  }
  w->t1 = bench_now_ns();
  if (w->what == SUBJ_EMLX) bench_emlx_req_destroy(&req);
  return NULL;
}

/* Runs nthreads clients of `what`, thread t on orders[t]; returns the wall
 * time in ns from the common start to the last finish. */
static uint64_t run_threads(subject what, int nthreads, ccache *c, naive *nv, bench_emlx *srv,
                            uint32_t *const *orders, const uint64_t *sums, size_t n) {
  pthread_t th[2];
  worker w[2];
  pthread_barrier_t start;
  BENCH_CHECK(nthreads >= 1 && nthreads <= 2, "threads");
  pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
  for (int t = 0; t < nthreads; t++) {
    w[t] = (worker){
        .what = what, .c = c, .nv = nv, .srv = srv, .order = orders[t], .n = n, .start = &start};
    BENCH_CHECK(pthread_create(&th[t], NULL, worker_main, &w[t]) == 0, "pthread_create");
  }
  pthread_barrier_wait(&start);
  for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&start);
  /* From the first thread's start to the last thread's end. */
  uint64_t t0 = w[0].t0, t1 = w[0].t1;
  for (int t = 1; t < nthreads; t++) {
    if (w[t].t0 < t0) t0 = w[t].t0;
    if (w[t].t1 > t1) t1 = w[t].t1;
  }
  for (int t = 0; t < nthreads; t++)
    BENCH_CHECK(w[t].sum == sums[t], "a lookup returned a wrong value (thread %d)", t);
  return t1 - t0;
}

/* --------------------------------------------------------------- P1 */

static void p1_size(bench_report *rep, const bench_opts *o, uint64_t n, const char *label, int reps,
                    size_t lookups, bool target) {
  ccache *c = bench_cc_build(KEY_SALT, n, NPROGRAMS);
  bench_uh_entry *uh = bench_uh_build(KEY_SALT, n, true), *uj = bench_uh_build(KEY_SALT, n, false);
  uint32_t *order = bench_random_order(lookups, (uint32_t)n, 1000 + n);
  uint64_t want = expected_sum(order, lookups);
  uint64_t hits0 = bench_cc_hits(c);
  double *rc = malloc(sizeof(double) * (size_t)reps), *ru = malloc(sizeof(double) * (size_t)reps),
         *ratio = malloc(sizeof(double) * (size_t)reps),
         *ratio_j = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(rc && ru && ratio && ratio_j, "out of memory");
  /* Warm-up: one pass of each, untimed. */
  BENCH_CHECK(cg_loop_uthash(uh, order, lookups) == want, "uthash lookup");
  BENCH_CHECK(cg_loop_uthash_jen(uj, order, lookups) == want, "uthash (default hash) lookup");
  BENCH_CHECK(cg_loop_ccache(c, order, lookups) == want, "ccache lookup");
  static const char *const names[3] = {"ccache", "uthash", "uthash (default hash)"};
  for (int r = 0; r < reps; r++) {
    /* Rotate which goes first, so a drift in machine speed is shared. */
    uint64_t t[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
      int which = (k + r) % 3;
      uint64_t t0 = bench_now_ns();
      uint64_t s = which == 0   ? cg_loop_ccache(c, order, lookups)
                   : which == 1 ? cg_loop_uthash(uh, order, lookups)
                                : cg_loop_uthash_jen(uj, order, lookups);
      t[which] = bench_now_ns() - t0;
      BENCH_CHECK(s == want, "%s lookup returned a wrong value", names[which]);
    }
    rc[r] = (double)t[0] / (double)lookups;
    ru[r] = (double)t[1] / (double)lookups;
    ratio[r] = rc[r] / ru[r];
    ratio_j[r] = (double)t[0] / (double)t[2];
  }
  BENCH_CHECK(bench_cc_hits(c) - hits0 == (uint64_t)(reps + 1) * lookups,
              "hit counter: %llu, want %llu", (unsigned long long)(bench_cc_hits(c) - hits0),
              (unsigned long long)((uint64_t)(reps + 1) * lookups));
  char fig[96];
  snprintf(fig, sizeof fig, "P1 hit latency, %s entries", label);
  bench_row *row = bench_add(rep, fig, bench_stats(rc, reps).med, "ns", bench_stats(ru, reps).med,
                             "uthash HASH_FIND, same hash, no lock", bench_stats(ratio, reps),
                             "ccache / uthash", target ? BENCH_RATIO_LE : BENCH_REPORT, 1.5);
  bench_stat sj = bench_stats(ratio_j, reps);
  snprintf(row->note, sizeof row->note,
           "vs plain HASH_FIND (default Jenkins hash): %.2f× [%.2f, %.2f]", sj.med, sj.min, sj.max);
  (void)o;
  free(rc);
  free(ru);
  free(ratio);
  free(ratio_j);
  free(order);
  bench_uh_free(&uh);
  bench_uh_free(&uj);
  BENCH_OK(ccache_close(c));
  bench_trim();
}

/* ------------------------------------------------- EMLX and naive */

static void mechanisms(bench_report *rep, const bench_opts *o) {
  const uint64_t n = 100000;
  const char *label = "100k";
  int reps = o->quick ? 3 : 9;
  size_t n_emlx = o->quick ? 2000 : 20000;
  size_t n_fast = o->quick ? 30000 : 200000;
  ccache *c = bench_cc_build(KEY_SALT, n, NPROGRAMS);
  naive nv = {.cap = 1u << 20};
  pthread_mutex_init(&nv.mu, NULL);
  for (uint64_t i = 0; i < n; i++) naive_put(&nv, bench_key(KEY_SALT, i), bench_closure_of(i));
  BENCH_CHECK(nv.count == n, "naive table count");
  bench_emlx srv;
  bench_emlx_start(&srv, bench_uh_build(KEY_SALT, n, false));

  uint32_t *orders[2];
  uint64_t sums_fast[2], sums_emlx[2];
  for (int t = 0; t < 2; t++) {
    orders[t] = bench_random_order(n_fast, (uint32_t)n, 2000 + (uint64_t)t);
    sums_fast[t] = expected_sum(orders[t], n_fast);
    sums_emlx[t] = expected_sum(orders[t], n_emlx);
  }

  for (int nt = 1; nt <= 2; nt++) {
    double *cc = malloc(sizeof(double) * (size_t)reps),
           *cc2 = malloc(sizeof(double) * (size_t)reps),
           *em = malloc(sizeof(double) * (size_t)reps),
           *nvv = malloc(sizeof(double) * (size_t)reps),
           *r_em = malloc(sizeof(double) * (size_t)reps),
           *r_nv = malloc(sizeof(double) * (size_t)reps);
    BENCH_CHECK(cc && cc2 && em && nvv && r_em && r_nv, "out of memory");
    /* warm-up */
    run_threads(SUBJ_CCACHE, nt, c, NULL, NULL, orders, sums_fast, n_fast);
    run_threads(SUBJ_NAIVE, nt, NULL, &nv, NULL, orders, sums_fast, n_fast);
    run_threads(SUBJ_EMLX, nt, NULL, NULL, &srv, orders, sums_emlx, n_emlx);
    for (int r = 0; r < reps; r++) {
      /* Latency as each client sees it: wall time / lookups per client. */
      cc[r] = (double)run_threads(SUBJ_CCACHE, nt, c, NULL, NULL, orders, sums_fast, n_fast) /
              (double)n_fast;
      nvv[r] = (double)run_threads(SUBJ_NAIVE, nt, NULL, &nv, NULL, orders, sums_fast, n_fast) /
               (double)n_fast;
      em[r] = (double)run_threads(SUBJ_EMLX, nt, NULL, NULL, &srv, orders, sums_emlx, n_emlx) /
              (double)n_emlx;
      cc2[r] = (double)run_threads(SUBJ_CCACHE, nt, c, NULL, NULL, orders, sums_fast, n_fast) /
               (double)n_fast;
      double base = 0.5 * (cc[r] + cc2[r]); /* ccache measured around both */
      r_em[r] = em[r] / base;
      r_nv[r] = nvv[r] / base;
      cc[r] = base;
    }
    char fig[96], bname[64];
    snprintf(bname, sizeof bname, "ccache, %d thread%s", nt, nt > 1 ? "s" : "");
    snprintf(fig, sizeof fig, "EMLX mechanism (server thread), %d client%s, %s entries", nt,
             nt > 1 ? "s" : "", label);
    bench_row *row = bench_add(rep, fig, bench_stats(em, reps).med, "ns/lookup/client",
                               bench_stats(cc, reps).med, bname, bench_stats(r_em, reps),
                               "EMLX / ccache", BENCH_REPORT, 0);
    snprintf(row->note, sizeof row->note, "aggregate %.3g lookups/s",
             (double)nt * 1e9 / bench_stats(em, reps).med);
    snprintf(fig, sizeof fig, "naive mutex + clear-when-full, %d thread%s, %s entries", nt,
             nt > 1 ? "s" : "", label);
    row = bench_add(rep, fig, bench_stats(nvv, reps).med, "ns/lookup/client",
                    bench_stats(cc, reps).med, bname, bench_stats(r_nv, reps), "naive / ccache",
                    BENCH_REPORT, 0);
    snprintf(row->note, sizeof row->note, "aggregate %.3g lookups/s",
             (double)nt * 1e9 / bench_stats(nvv, reps).med);
    free(cc);
    free(cc2);
    free(em);
    free(nvv);
    free(r_em);
    free(r_nv);
  }

  bench_emlx_stop(&srv);
  bench_uh_free(&nv.head);
  pthread_mutex_destroy(&nv.mu);
  for (int t = 0; t < 2; t++) free(orders[t]);
  BENCH_OK(ccache_close(c));
  bench_trim();
}

/* ---------------------------------------------------------- callgrind */

static int callgrind_mode(size_t n, uint64_t size, bool strong) {
  ccache *c =
      strong ? strong_build(KEY_SALT, size, NPROGRAMS) : bench_cc_build(KEY_SALT, size, NPROGRAMS);
  /* CCACHE_BENCH_CG_TTL_MS=t: the same with a finite TTL (fetch reads the
   * clock and takes its general path), for the README's figure. */
  const char *ttl = getenv("CCACHE_BENCH_CG_TTL_MS");
  if (ttl && *ttl)
    BENCH_OK(ccache_set_limits(c, CCACHE_UNBOUNDED, strtoull(ttl, NULL, 10), CCACHE_UNBOUNDED));
  bench_uh_entry *uh = bench_uh_build(KEY_SALT, size, true),
                 *uj = bench_uh_build(KEY_SALT, size, false);
  uint32_t *order = bench_random_order(n ? n : 1, (uint32_t)size, 3000);
  uint64_t want = expected_sum(order, n);
  /* The four loops, each once, in their own (never inlined) functions. */
  uint64_t e = cg_loop_empty(order, n);
  uint64_t u = cg_loop_uthash(uh, order, n);
  uint64_t j = cg_loop_uthash_jen(uj, order, n);
  uint64_t k = strong ? cg_loop_ccache_strong(c, order, n) : cg_loop_ccache(c, order, n);
  BENCH_CHECK(u == want && j == want && k == want, "callgrind loops returned wrong values");
  printf("callgrind mode: %zu lookups at %llu entries done (%llu)\n", n, (unsigned long long)size,
         (unsigned long long)(e & 1));
  free(order);
  bench_uh_free(&uh);
  bench_uh_free(&uj);
  BENCH_OK(ccache_close(c));
  return 0;
}

int main(int argc, char **argv) {
  /* --callgrind-strong: the callgrind loop on a strong cache (bench/run). */
  bool strong = false;
  int kept = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--callgrind-strong") == 0)
      strong = true;
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  bench_opts o;
  bench_parse(argc, argv, &o,
              "P1 hit latency vs bare uthash; EMLX server-thread mechanism; naive mutex table",
              true);
  if (o.callgrind >= 0) return callgrind_mode((size_t)o.callgrind, (uint64_t)o.cg_entries, strong);
  bench_report rep;
  bench_report_init(
      &rep, "bench_hit",
      "hit latency (fetch + release) vs a bare uthash lookup, and two other mechanisms");
  bench_pin(0);
  int reps = o.quick ? 3 : 21;
  p1_size(&rep, &o, 1000, "1k", reps, o.quick ? 50000 : 1000000, false);
  p1_size(&rep, &o, 100000, "100k", reps, o.quick ? 50000 : 300000, true);
  if (!o.quick)
    p1_size(&rep, &o, 1000000, "1M", reps, 300000, false);
  else
    bench_note(&rep, "quick mode: 1M entries skipped, 3 repetitions, shorter loops");
  /* The thread runs must not all be stuck on CPU 0. */
  bench_unpin();
  mechanisms(&rep, &o);
  bench_note(&rep,
             "each lookup's key depends on the previous lookup's result: latency, not "
             "overlapped throughput; random keys over the whole table; warm-up pass first");
  bench_note(&rep,
             "EMLX: one owner thread serves a mailbox (mutex + condvar), replies by "
             "semaphore, one request at a time; clients and server unpinned");
  return bench_report_print(&rep, &o);
}
