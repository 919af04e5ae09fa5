/*
 * bench_read_side.c - issue 36: what the membarrier read side costs the
 * writers, against today's fenced mode, in the same run.
 *
 * The mode is decided once per process, so the fenced figures come from
 * this program run again as a child with CLOSURE_CACHE_MEMBARRIER=off (the
 * process then behaves as under a kernel that refuses membarrier); the
 * parent runs in the mode the kernel allows.  Rows:
 *  - a put that evicts (max_items 1k, full) while another thread has a
 *    reader of the cache (it fetched, and is alive): membarrier mode pays a
 *    heavy barrier per 64 such puts, fenced mode a fence per put;
 *  - a sweep removing 10 expired entries of 1k, the same other thread alive
 *    (one blocking of the readers per sweep in both modes);
 *  - the p99 of one hit (fetch + release of one of 361 hot keys, timed one
 *    by one) while another thread puts fresh keys as fast as it can (every
 *    put evicts; a hit that misses puts its key back, untimed): the heavy
 *    barrier interrupts the reader, the fence is on every hit.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <unistd.h>

#include "bench_tables.h"

typedef struct fig {
  double put_ns, sweep_ns, p50_ns, p99_ns;
  int membarrier;
} fig;

typedef struct fake_clock {
  _Atomic uint64_t now_ms;
} fake_clock;

static uint64_t clock_read(void *ctx) { return atomic_load(&((fake_clock *)ctx)->now_ms); }

static ccache *open_cache(uint64_t max_items, uint64_t ttl, fake_clock *clk, ccache_program **p) {
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.sweeper_thread = 0;
  cfg.max_items = max_items;
  cfg.ttl_ms = ttl;
  atomic_store(&clk->now_ms, 1000);
  cfg.clock_ms = clock_read;
  cfg.ctx = clk;
  ccache *c = NULL;
  BENCH_OK(ccache_open(&cfg, &c));
  BENCH_OK(ccache_program_intern(c, bench_key(99, 1), (void *)(uintptr_t)0x1000u, 4096, p));
  return c;
}

static void put_keys(ccache *c, ccache_program *p, uint64_t salt, uint64_t from, uint64_t n) {
  for (uint64_t i = from; i < from + n; i++)
    BENCH_OK(ccache_put(c, bench_key(salt, i), bench_closure_of(i), p));
}

/* ------------------------------------------------ another thread reading */

typedef struct idle {
  ccache *c;
  ccache_key key;
  pthread_barrier_t ready, done;
  pthread_t th;
} idle;

static void *idle_main(void *arg) {
  idle *d = arg;
  ccache_lease l;
  if (ccache_fetch(d->c, d->key, &l) == CCACHE_OK) ccache_lease_release(d->c, &l);
  pthread_barrier_wait(&d->ready);
  pthread_barrier_wait(&d->done);
  return NULL;
}

static void idle_start(idle *d, ccache *c, ccache_key key) {
  d->c = c;
  d->key = key;
  pthread_barrier_init(&d->ready, NULL, 2);
  pthread_barrier_init(&d->done, NULL, 2);
  BENCH_CHECK(pthread_create(&d->th, NULL, idle_main, d) == 0, "pthread_create");
  pthread_barrier_wait(&d->ready);
}

static void idle_stop(idle *d) {
  pthread_barrier_wait(&d->done);
  pthread_join(d->th, NULL);
  pthread_barrier_destroy(&d->ready);
  pthread_barrier_destroy(&d->done);
}

static int is_membarrier(ccache *c) {
  ccache_stats s;
  ccache_stats_init(&s);
  ccache_stats_get(c, &s);
  return s.read_side == CCACHE_READ_SIDE_MEMBARRIER;
}

/* ns per evicting put, median of reps batches. */
static double evicting_put(const bench_opts *o, int *membarrier) {
  const int reps = o->quick ? 5 : 31;
  const uint64_t batch = o->quick ? 2000 : 20000;
  fake_clock clk;
  ccache_program *p;
  ccache *c = open_cache(1000, CCACHE_UNBOUNDED, &clk, &p);
  put_keys(c, p, 1, 0, 1000);
  idle d;
  idle_start(&d, c, bench_key(1, 999));
  uint64_t next = 1000;
  put_keys(c, p, 1, next, batch); /* warm-up */
  next += batch;
  double *t = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(t != NULL, "out of memory");
  for (int r = 0; r < reps; r++, next += batch) {
    uint64_t t0 = bench_now_ns();
    put_keys(c, p, 1, next, batch);
    t[r] = (double)(bench_now_ns() - t0) / (double)batch;
  }
  *membarrier = is_membarrier(c);
  idle_stop(&d);
  double med = bench_stats(t, reps).med;
  free(t);
  ccache_program_release(c, p);
  BENCH_OK(ccache_close(c));
  return med;
}

/* ns per sweep removing 10 expired of 1k (10 fresh put back, untimed). */
static double sweep10(const bench_opts *o) {
  const int reps = o->quick ? 200 : 2000;
  fake_clock clk;
  ccache_program *p;
  ccache *c = open_cache(CCACHE_UNBOUNDED, 100, &clk, &p);
  uint64_t next = 0;
  /* 1000 entries, 10 per ms of the fake clock. */
  for (int ms = 0; ms < 100; ms++, next += 10) {
    put_keys(c, p, 2, next, 10);
    atomic_fetch_add(&clk.now_ms, 1);
  }
  idle d;
  idle_start(&d, c, bench_key(2, next - 1));
  double *t = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(t != NULL, "out of memory");
  /* Now 1100: the 10 put at 1000 are 100 ms old (the TTL); each sweep
   * removes them, the 10 put back expire 100 sweeps later. */
  for (int r = 0; r < reps; r++, next += 10) {
    uint64_t t0 = bench_now_ns();
    int64_t n = ccache_sweep(c);
    t[r] = (double)(bench_now_ns() - t0);
    BENCH_CHECK(n == 10, "a sweep removed %lld, not 10", (long long)n);
    put_keys(c, p, 2, next, 10);
    atomic_fetch_add(&clk.now_ms, 1);
  }
  idle_stop(&d);
  double med = bench_stats(t, reps).med;
  free(t);
  ccache_program_release(c, p);
  BENCH_OK(ccache_close(c));
  return med;
}

/* ------------------------------------------------- hits while a thread puts */

#define HOT 361u

typedef struct putter {
  ccache *c;
  ccache_program *p;
  _Atomic int stop;
  uint64_t puts;
} putter;

static void *putter_main(void *arg) {
  putter *w = arg;
  bench_pin(1);
  for (uint64_t i = 0; !atomic_load_explicit(&w->stop, memory_order_relaxed); i++, w->puts++)
    BENCH_OK(ccache_put(w->c, bench_key(4, i), bench_closure_of(i), w->p));
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void hit_latency(const bench_opts *o, double *p50, double *p99) {
  const size_t n = o->quick ? 200000 : 2000000;
  fake_clock clk;
  ccache_program *p;
  ccache *c = open_cache(4096, CCACHE_UNBOUNDED, &clk, &p);
  put_keys(c, p, 3, 0, HOT);
  putter w = {.c = c, .p = p};
  atomic_init(&w.stop, 0);
  pthread_t th;
  BENCH_CHECK(pthread_create(&th, NULL, putter_main, &w) == 0, "pthread_create");
  bench_pin(0);
  double *t = malloc(sizeof(double) * n);
  BENCH_CHECK(t != NULL, "out of memory");
  uint64_t seed = 5;
  size_t hits = 0;
  while (hits < n) {
    uint64_t i = bench_rand(&seed) % HOT;
    ccache_key k = bench_key(3, i);
    ccache_lease l;
    uint64_t t0 = bench_now_ns();
    int rc = ccache_fetch(c, k, &l);
    if (rc == CCACHE_OK) ccache_lease_release(c, &l);
    uint64_t t1 = bench_now_ns();
    if (rc == CCACHE_OK)
      t[hits++] = (double)(t1 - t0);
    else /* evicted by the putter's FIFO: compile it again, untimed */
      BENCH_OK(ccache_put(c, k, bench_closure_of(i), p));
  }
  atomic_store(&w.stop, 1);
  pthread_join(th, NULL);
  bench_unpin();
  BENCH_CHECK(w.puts > 0, "the putter never ran");
  qsort(t, n, sizeof *t, cmp_double);
  *p50 = t[n / 2];
  *p99 = t[n * 99 / 100];
  free(t);
  ccache_program_release(c, p);
  BENCH_OK(ccache_close(c));
}

static fig measure(const bench_opts *o) {
  fig f;
  f.put_ns = evicting_put(o, &f.membarrier);
  f.sweep_ns = sweep10(o);
  hit_latency(o, &f.p50_ns, &f.p99_ns);
  return f;
}

/* The fenced figures: this program again, as a child, with the variable. */
static fig measure_fenced(const char *self, const bench_opts *o) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "CLOSURE_CACHE_MEMBARRIER=off '%s' --child%s", self,
           o->quick ? " --quick" : "");
  FILE *f = popen(cmd, "r");
  BENCH_CHECK(f != NULL, "popen");
  fig r;
  int ok = fscanf(f, "%lf %lf %lf %lf %d", &r.put_ns, &r.sweep_ns, &r.p50_ns, &r.p99_ns,
                  &r.membarrier) == 5;
  BENCH_CHECK(pclose(f) == 0 && ok, "the fenced child failed");
  BENCH_CHECK(!r.membarrier, "the child was not fenced");
  return r;
}

static bench_stat one(double v) { return (bench_stat){v, v, v, 1}; }

int main(int argc, char **argv) {
  bench_opts o;
  if (argc >= 2 && strcmp(argv[1], "--child") == 0) {
    memset(&o, 0, sizeof o);
    o.quick = argc >= 3 && strcmp(argv[2], "--quick") == 0;
    fig f = measure(&o);
    printf("%.3f %.3f %.3f %.3f %d\n", f.put_ns, f.sweep_ns, f.p50_ns, f.p99_ns, f.membarrier);
    return 0;
  }
  bench_parse(argc, argv, &o, "the writers' cost of the membarrier read side", false);
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  BENCH_CHECK(len > 0, "readlink /proc/self/exe");
  self[len] = '\0';
  bench_report rep;
  bench_report_init(&rep, "bench_read_side",
                    "what does the fence-free read side cost writers and hits, against fences?");
  fig fen1 = measure_fenced(self, &o);
  fig mb = measure(&o);
  fig fen2 = measure_fenced(self, &o);
  fig fen = {(fen1.put_ns + fen2.put_ns) / 2, (fen1.sweep_ns + fen2.sweep_ns) / 2,
             (fen1.p50_ns + fen2.p50_ns) / 2, (fen1.p99_ns + fen2.p99_ns) / 2, 0};
  const char *mode = mb.membarrier ? "membarrier" : "fenced (membarrier refused here)";
  bench_add(&rep, "put that evicts (1k), another thread reading", mb.put_ns, "ns/put", fen.put_ns,
            "fenced (today)", one(mb.put_ns / fen.put_ns), "new / fenced", BENCH_RATIO_LE, 1.3);
  bench_add(&rep, "sweep of 10 expired of 1k, another thread reading", mb.sweep_ns, "ns/sweep",
            fen.sweep_ns, "fenced (today)", one(mb.sweep_ns / fen.sweep_ns), "new / fenced",
            BENCH_RATIO_LE, 1.3);
  bench_row *row =
      bench_add(&rep, "hit p99 (fetch + release) while a thread puts", mb.p99_ns, "ns", fen.p99_ns,
                "fenced (today)", one(mb.p99_ns / fen.p99_ns), "new / fenced", BENCH_REPORT, 0);
  snprintf(row->note, sizeof row->note, "p50 %.0f ns vs %.0f ns fenced", mb.p50_ns, fen.p50_ns);
  bench_note(&rep,
             "this process's read side: %s; the fenced figures: the same program run "
             "twice as a child with CLOSURE_CACHE_MEMBARRIER=off (mean of the two medians)",
             mode);
  bench_note(&rep, "one hit timed alone includes two clock reads (about 20-40 ns)");
  return bench_report_print(&rep, &o);
}
