/*
 * bench_evict.c - P4 and the sweep: do evictions cost O(evicted)?
 *
 *  - P4: a ccache_put that evicts (the cache is at capacity) at max_items
 *    1M against the same at max_items 1k.  Batches of puts of fresh keys on
 *    the big and the small cache alternate; each pair gives a ratio.
 *  - sweep: ccache_sweep() removing 10 expired entries of 1M against 10 of
 *    1k.  A fake clock (config.clock_ms) makes exactly 10 entries expire
 *    before each sweep; 10 fresh entries are put back after it, so the table
 *    keeps its size.  Sweeps on the big and the small cache alternate; each
 *    pair gives a ratio.
 * Both are expected to be O(evicted): the ratio shows what the table size
 * costs beyond that (mostly cache misses on cold entries).
 */
#include <pthread.h>
#include <string.h>
#include <uthash.h>

#include "bench_tables.h"

/* The memory floor: the same O(1) work on a bare uthash table kept in
 * insertion order (uthash's app-order list is a FIFO): a put is a find
 * (miss) + add + delete of the oldest + free; a sweep deletes the 10 oldest.
 * Its big/small ratio is what cold cache lines and TLB misses alone cost on
 * this machine, whatever the library does. */
typedef struct uh_entry {
  UT_hash_handle hh;
  ccache_key key;
  void *value;
} uh_entry;

typedef struct fifo {
  uh_entry *head; /* uthash head = oldest */
  uint64_t next, salt;
} fifo;

static void fifo_add(fifo *f, uint64_t n) {
  for (uint64_t i = 0; i < n; i++, f->next++) {
    ccache_key k = bench_key(f->salt, f->next);
    uh_entry *e;
    HASH_FIND(hh, f->head, &k, sizeof k, e);
    BENCH_CHECK(e == NULL, "fifo key exists");
    e = malloc(sizeof *e);
    BENCH_CHECK(e != NULL, "out of memory");
    memset(e, 0, sizeof *e);
    e->key = k;
    HASH_ADD(hh, f->head, key, sizeof e->key, e);
  }
}

static void fifo_drop_oldest(fifo *f, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    uh_entry *old = f->head;
    HASH_DELETE(hh, f->head, old);
    free(old);
  }
}

static void fifo_put_evict(fifo *f, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    fifo_add(f, 1);
    fifo_drop_oldest(f, 1);
  }
}

static void fifo_free(fifo *f) { fifo_drop_oldest(f, HASH_COUNT(f->head)); }

/* Alternating big/small batches of op; returns the big/small ratio stats
 * and the medians (ns per unit). */
static bench_stat fifo_ratio(fifo *big, fifo *small, void (*op)(fifo *, uint64_t), uint64_t batch,
                             uint64_t per_units, int reps, void (*after)(fifo *, uint64_t),
                             double *med_big, double *med_small) {
  double *tb = malloc(sizeof(double) * (size_t)reps), *ts = malloc(sizeof(double) * (size_t)reps),
         *ratio = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(tb && ts && ratio, "out of memory");
  for (int r = -1; r < reps; r++) {
    double t[2];
    for (int k = 0; k < 2; k++) {
      fifo *f = k == 0 ? big : small;
      uint64_t t0 = bench_now_ns();
      op(f, batch);
      t[k] = (double)(bench_now_ns() - t0) / (double)per_units;
      if (after) after(f, batch);
    }
    if (r < 0) continue;
    tb[r] = t[0];
    ts[r] = t[1];
    ratio[r] = t[0] / t[1];
  }
  bench_stat st = bench_stats(ratio, reps);
  *med_big = bench_stats(tb, reps).med;
  *med_small = bench_stats(ts, reps).med;
  free(tb);
  free(ts);
  free(ratio);
  return st;
}

typedef struct fake_clock {
  uint64_t now_ms;
} fake_clock;

static uint64_t clock_read(void *ctx) { return ((fake_clock *)ctx)->now_ms; }

typedef struct sized {
  ccache *c;
  ccache_program *p;
  uint64_t next; /* next fresh key index */
  uint64_t salt;
  fake_clock clk;
} sized;

static void open_cache(sized *s, uint64_t salt, uint64_t max_items, uint64_t ttl) {
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.sweeper_thread = 0;
  cfg.max_items = max_items;
  cfg.ttl_ms = ttl;
  s->clk.now_ms = 1000;
  cfg.clock_ms = clock_read;
  cfg.ctx = &s->clk;
  s->salt = salt;
  s->next = 0;
  BENCH_OK(ccache_open(&cfg, &s->c));
  BENCH_OK(
      ccache_program_intern(s->c, bench_key(99, salt), (void *)(uintptr_t)0x1000u, 4096, &s->p));
}

static void close_cache(sized *s) {
  ccache_program_release(s->c, s->p);
  BENCH_OK(ccache_close(s->c));
}

static void put_fresh(sized *s, uint64_t n) {
  for (uint64_t i = 0; i < n; i++, s->next++)
    BENCH_OK(ccache_put(s->c, bench_key(s->salt, s->next), bench_closure_of(s->next), s->p));
}

/* The timed batches, in their own functions so that callgrind can count
 * their instructions apart (--toggle-collect=timed_puts_big etc.). */
__attribute__((noipa)) void timed_puts_big(sized *s, uint64_t n) { put_fresh(s, n); }
__attribute__((noipa)) void timed_puts_small(sized *s, uint64_t n) { put_fresh(s, n); }

static ccache_stats stats_of(ccache *c) {
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(c, &st);
  return st;
}

/* --------------------------------------------------------------- P4 */

/* Adds a big-vs-small row (target: big / small <= 1.3), then frees the
 * samples and both caches and gives the memory back before the floor runs. */
static void report_big_small(bench_report *rep, const char *fig, const char *unit,
                             const char *small_name, double *tb, double *ts, double *ratio,
                             int reps, sized *big, sized *small) {
  bench_add(rep, fig, bench_stats(tb, reps).med, unit, bench_stats(ts, reps).med, small_name,
            bench_stats(ratio, reps), "big / small", BENCH_RATIO_LE, 1.3);
  free(tb);
  free(ts);
  free(ratio);
  close_cache(big);
  close_cache(small);
  bench_trim();
}

static void p4(bench_report *rep, const bench_opts *o) {
  const uint64_t big_n = o->quick ? 100000 : 1000000, small_n = 1000;
  const int reps = o->quick ? 5 : 31;
  const uint64_t batch = o->quick ? 5000 : 20000;
  sized big, small;
  open_cache(&big, 11, big_n, CCACHE_UNBOUNDED);
  open_cache(&small, 12, small_n, CCACHE_UNBOUNDED);
  put_fresh(&big, big_n);
  put_fresh(&small, small_n);
  BENCH_CHECK(stats_of(big.c).evicted_capacity == 0 && stats_of(big.c).items == big_n,
              "filling evicted");
  /* Warm-up: one batch each (these already evict). */
  put_fresh(&big, batch);
  put_fresh(&small, batch);
  double *tb = malloc(sizeof(double) * (size_t)reps), *ts = malloc(sizeof(double) * (size_t)reps),
         *ratio = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(tb && ts && ratio, "out of memory");
  for (int r = 0; r < reps; r++) {
    for (int k = 0; k < 2; k++) {
      bool big_now = (k == 0) == (r % 2 == 0);
      sized *s = big_now ? &big : &small;
      uint64_t t0 = bench_now_ns();
      if (big_now)
        timed_puts_big(s, batch);
      else
        timed_puts_small(s, batch);
      double per = (double)(bench_now_ns() - t0) / (double)batch;
      if (big_now)
        tb[r] = per;
      else
        ts[r] = per;
    }
    ratio[r] = tb[r] / ts[r];
  }
  uint64_t puts = batch * (uint64_t)(reps + 1);
  ccache_stats sb = stats_of(big.c), ss = stats_of(small.c);
  BENCH_CHECK(sb.items == big_n && sb.evicted_capacity == puts, "big: items %llu evicted %llu",
              (unsigned long long)sb.items, (unsigned long long)sb.evicted_capacity);
  BENCH_CHECK(ss.items == small_n && ss.evicted_capacity == puts, "small: items %llu evicted %llu",
              (unsigned long long)ss.items, (unsigned long long)ss.evicted_capacity);
  char fig[96];
  snprintf(fig, sizeof fig, "P4 put that evicts, max_items %s vs 1k", o->quick ? "100k" : "1M");
  report_big_small(rep, fig, "ns/put", "max_items 1k", tb, ts, ratio, reps, &big, &small);

  /* The floor: a bare uthash FIFO doing the same O(1) work. */
  fifo fb = {.salt = 13}, fs = {.salt = 14};
  fifo_add(&fb, big_n);
  fifo_add(&fs, small_n);
  double mb, ms;
  bench_stat st = fifo_ratio(&fb, &fs, fifo_put_evict, batch, batch, reps, NULL, &mb, &ms);
  snprintf(fig, sizeof fig, "floor: bare uthash FIFO find + add + delete oldest, %s vs 1k",
           o->quick ? "100k" : "1M");
  bench_add(rep, fig, mb, "ns/put", ms, "1k", st, "big / small", BENCH_REPORT, 0);
  fifo_free(&fb);
  fifo_free(&fs);
  bench_trim();
}

/* ------------------------------------------------------------ sweep */

#define SWEEP_BATCH 10u
#define TTL_MS      1000000u

/* n entries: `rounds` batches of 10 at times 1000, 1001, ..., then the rest
 * at 1000 + rounds.  Sweep k runs at 1000 + k + TTL: only batch k expired. */
static void sweep_setup(sized *s, uint64_t salt, uint64_t n, int rounds) {
  open_cache(s, salt, CCACHE_UNBOUNDED, TTL_MS);
  for (int k = 0; k < rounds; k++) {
    s->clk.now_ms = 1000 + (uint64_t)k;
    put_fresh(s, SWEEP_BATCH);
  }
  s->clk.now_ms = 1000 + (uint64_t)rounds;
  put_fresh(s, n - SWEEP_BATCH * (uint64_t)rounds);
  BENCH_CHECK(stats_of(s->c).items == n, "setup");
}

static double sweep_once(sized *s, int k, uint64_t n) {
  s->clk.now_ms = 1000 + (uint64_t)k + TTL_MS;
  uint64_t t0 = bench_now_ns();
  int64_t removed = ccache_sweep(s->c);
  uint64_t dt = bench_now_ns() - t0;
  BENCH_CHECK(removed == SWEEP_BATCH, "sweep %d removed %lld, want %u", k, (long long)removed,
              SWEEP_BATCH);
  put_fresh(s, SWEEP_BATCH); /* back to n, at the tail of the FIFO */
  BENCH_CHECK(stats_of(s->c).items == n, "size after sweep %d", k);
  return (double)dt;
}

static void sweep(bench_report *rep, const bench_opts *o) {
  const uint64_t big_n = o->quick ? 100000 : 1000000, small_n = 1000;
  const int warm = 5, reps = o->quick ? 25 : 95, rounds = warm + reps;
  BENCH_CHECK(SWEEP_BATCH * (uint64_t)rounds <= small_n, "too many rounds");
  sized big, small;
  sweep_setup(&big, 21, big_n, rounds);
  sweep_setup(&small, 22, small_n, rounds);
  double *tb = malloc(sizeof(double) * (size_t)reps), *ts = malloc(sizeof(double) * (size_t)reps),
         *ratio = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(tb && ts && ratio, "out of memory");
  for (int k = 0; k < rounds; k++) {
    double b, sm;
    if (k % 2) {
      b = sweep_once(&big, k, big_n);
      sm = sweep_once(&small, k, small_n);
    } else {
      sm = sweep_once(&small, k, small_n);
      b = sweep_once(&big, k, big_n);
    }
    if (k < warm) continue;
    tb[k - warm] = b;
    ts[k - warm] = sm;
    ratio[k - warm] = b / sm;
  }
  BENCH_CHECK(stats_of(big.c).evicted_ttl == SWEEP_BATCH * (uint64_t)rounds, "evicted_ttl");
  char fig[96];
  snprintf(fig, sizeof fig, "sweep removing 10 expired of %s vs 10 of 1k",
           o->quick ? "100k" : "1M");
  report_big_small(rep, fig, "ns/sweep", "10 of 1k", tb, ts, ratio, reps, &big, &small);

  /* The floor: deleting the 10 oldest of a bare uthash FIFO (10 fresh ones
   * added back after each, untimed). */
  fifo fb = {.salt = 23}, fs = {.salt = 24};
  fifo_add(&fb, big_n);
  fifo_add(&fs, small_n);
  double mb, ms;
  bench_stat st = fifo_ratio(&fb, &fs, fifo_drop_oldest, SWEEP_BATCH, 1, reps, fifo_add, &mb, &ms);
  snprintf(fig, sizeof fig, "floor: bare uthash FIFO delete 10 oldest of %s vs of 1k",
           o->quick ? "100k" : "1M");
  bench_add(rep, fig, mb, "ns/sweep", ms, "of 1k", st, "big / small", BENCH_REPORT, 0);
  fifo_free(&fb);
  fifo_free(&fs);
}

/* ------------------------------------------------ registered readers */

/* A writer blocks every reader registered on the cache (readers.c): it
 * reads each one's flag and looks through its occupied slots.  Evicting puts
 * on a 1k cache that 63 other live threads have used (each fetched once, then
 * waits) against the same puts with no other thread: what the readers cost a
 * writer. */
typedef struct idle_reader {
  ccache *c;
  ccache_key key;
  pthread_barrier_t *ready, *done;
} idle_reader;

static void *idle_main(void *arg) {
  idle_reader *ir = arg;
  ccache_lease l;
  BENCH_CHECK(ccache_fetch(ir->c, ir->key, &l) == CCACHE_OK, "idle reader missed");
  ccache_lease_release(ir->c, &l);
  pthread_barrier_wait(ir->ready);
  pthread_barrier_wait(ir->done);
  return NULL;
}

static double timed_batch(sized *s, uint64_t batch) {
  uint64_t t0 = bench_now_ns();
  put_fresh(s, batch);
  return (double)(bench_now_ns() - t0) / (double)batch;
}

static void readers_cost(bench_report *rep, const bench_opts *o) {
  enum { IDLE = 63 };
  const int reps = o->quick ? 5 : 31;
  const uint64_t batch = o->quick ? 2000 : 20000;
  sized plain, crowd;
  open_cache(&plain, 15, 1000, CCACHE_UNBOUNDED);
  open_cache(&crowd, 16, 1000, CCACHE_UNBOUNDED);
  put_fresh(&plain, 1000);
  put_fresh(&crowd, 1000);
  pthread_barrier_t ready, done;
  pthread_barrier_init(&ready, NULL, IDLE + 1);
  pthread_barrier_init(&done, NULL, IDLE + 1);
  pthread_t th[IDLE];
  idle_reader ir = {.c = crowd.c, .key = bench_key(16, 999), .ready = &ready, .done = &done};
  for (int t = 0; t < IDLE; t++)
    BENCH_CHECK(pthread_create(&th[t], NULL, idle_main, &ir) == 0, "pthread_create");
  pthread_barrier_wait(&ready); /* 63 readers registered on crowd, alive */
  /* The calling thread registers on both (its puts read nothing, so fetch
   * once each): 1 reader against 64. */
  ccache_lease l;
  BENCH_OK(ccache_fetch(plain.c, bench_key(15, 999), &l));
  ccache_lease_release(plain.c, &l);
  BENCH_OK(ccache_fetch(crowd.c, bench_key(16, 999), &l));
  ccache_lease_release(crowd.c, &l);
  timed_batch(&plain, batch);
  timed_batch(&crowd, batch);
  double *tc = malloc(sizeof(double) * (size_t)reps), *tp = malloc(sizeof(double) * (size_t)reps),
         *ratio = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(tc && tp && ratio, "out of memory");
  for (int r = 0; r < reps; r++) {
    if (r % 2) {
      tc[r] = timed_batch(&crowd, batch);
      tp[r] = timed_batch(&plain, batch);
    } else {
      tp[r] = timed_batch(&plain, batch);
      tc[r] = timed_batch(&crowd, batch);
    }
    ratio[r] = tc[r] / tp[r];
  }
  pthread_barrier_wait(&done);
  for (int t = 0; t < IDLE; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&ready);
  pthread_barrier_destroy(&done);
  BENCH_CHECK(stats_of(crowd.c).evicted_capacity == batch * (uint64_t)(reps + 1),
              "crowd evictions");
  bench_add(rep, "put that evicts, 64 readers registered vs 1 (max_items 1k)",
            bench_stats(tc, reps).med, "ns/put", bench_stats(tp, reps).med, "1 reader",
            bench_stats(ratio, reps), "64 / 1", BENCH_REPORT, 0);
  free(tc);
  free(tp);
  free(ratio);
  close_cache(&plain);
  close_cache(&crowd);
  bench_trim();
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(argc, argv, &o, "P4: evicting put at 1M vs 1k items; sweep of 10 of 1M vs 10 of 1k",
              false);
  bench_report rep;
  bench_report_init(&rep, "bench_evict",
                    "do eviction and sweeps cost O(evicted), whatever the table size?");
  bench_pin(0);
  p4(&rep, &o);
  sweep(&rep, &o);
  readers_cost(&rep, &o);
  bench_note(&rep,
             "puts of fresh keys in batches; big and small caches alternate, each pair "
             "gives one ratio; warm-up batch/sweeps first");
  bench_note(&rep,
             "sweep: fake clock, exactly 10 entries expire before each sweep, 10 fresh "
             "ones are put back after it (untimed)");
  bench_note(&rep,
             "floor rows: the same O(1) work on a bare uthash table in insertion order; "
             "their ratio is what cold cache lines and TLB misses alone cost here");
  if (o.quick) bench_note(&rep, "quick mode: the big cache holds 100k, not 1M");
  return bench_report_print(&rep, &o);
}
