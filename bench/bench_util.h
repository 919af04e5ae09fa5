/*
 * bench_util.h - shared plumbing of the benchmarks: options, clocks,
 * statistics, deterministic keys, thread pinning, an allocation-counting
 * hook, and the report (one markdown table, or one JSON object).
 *
 * Every benchmark reports ratios against a baseline measured in the same
 * run: each repetition times the subject and its baseline back to back, the
 * ratio of that repetition is kept, and the table shows the median ratio
 * with its min and max over the repetitions.  Absolute times are printed for
 * orientation only.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <ccache.h>

#include "base/keyhash.h" /* src/: the library's bucket hash */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------ options */

typedef struct bench_opts {
  bool quick;         /* --quick: short mode for CI (targets never fail it) */
  bool json;          /* --json: one JSON object instead of the table */
  long callgrind;     /* --callgrind N (bench_hit only): -1 when absent */
  long cg_entries;    /* --callgrind-entries E (bench_hit only): table size, default 100k */
  const char *points; /* --points FILE: where bench_point appends (NULL: nowhere) */
} bench_opts;

/* Parses --quick, --json, --points FILE, --help (and --callgrind N /
 * --callgrind-entries E when allow_callgrind).  Exits on --help or on an
 * unknown option. */
void bench_parse(int argc, char **argv, bench_opts *o, const char *what, bool allow_callgrind);

/* With --points FILE, appends one data point of a figure to FILE, one
 * tab-separated line "figure series x y unit" (x a number or a category
 * label; bench/figures.sh draws them, bench/run passes the option); without
 * it, does nothing.  Names must not hold tabs or newlines. */
void bench_point(const bench_opts *o, const char *figure, const char *series, const char *x,
                 double y, const char *unit);

/* ------------------------------------------------------------- clocks */

uint64_t bench_now_ns(void);

/* ---------------------------------------------------------- statistics */

typedef struct bench_stat {
  double med, min, max;
  int n;
} bench_stat;

/* Median, min and max of v[0..n) (v is left unchanged). */
bench_stat bench_stats(const double *v, int n);

/* ------------------------------------------------------------------ keys */

static inline uint64_t bench_mix64(uint64_t x) {
  /* splitmix64's finaliser: a bijection of 64-bit words. */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The i-th key of a stream named by salt: random-looking, distinct for
 * distinct i (the low half is a bijection of i). */
static inline ccache_key bench_key(uint64_t salt, uint64_t i) {
  ccache_key k = {bench_mix64(i ^ (salt << 48)), bench_mix64(i + 0x5bd1e995ull * (salt + 1))};
  return k;
}

/* The library's table hash itself (src/keyhash.h), which folds the 128-bit
 * key (already an XXH3 fingerprint) to uthash's 32 bits instead of rehashing
 * it.  The bare-uthash baselines use it through HASH_ADD/FIND_BYHASHVALUE, so
 * "ccache / uthash" compares the same table with the same hash, with and
 * without the library around it. */
static inline unsigned bench_fold_hash(ccache_key key) { return ccache__key_hash(key); }

/* A small PRNG for shuffles and random orders. */
static inline uint64_t bench_rand(uint64_t *state) { return bench_mix64((*state)++); }

/* n indices in [0, range), uniformly random (caller frees). */
uint32_t *bench_random_order(size_t n, uint32_t range, uint64_t seed);

/* ------------------------------------------------------------- threads */

/* Pin the calling thread to cpu (modulo the CPUs available); best effort. */
void bench_pin(int cpu);
/* Undo bench_pin: the thread may run on every CPU it could at start. */
void bench_unpin(void);
int bench_ncpu(void);

/* Give freed memory back (glibc: consolidate the fast bins and trim), so
 * the next table is laid out in fresh memory, not scattered over the free
 * lists of the previous one.  Call after tearing a table down. */
void bench_trim(void);

/* ------------------------------------------- allocation-counting hook */

typedef struct bench_counter {
  long long live_bytes; /* bytes requested and not yet freed */
  long long live_allocs;
  long long peak_bytes;
  long long total_allocs;
  long long live_chunk_bytes; /* estimate of what glibc malloc really uses:
                                 request + 8, rounded up to 16, at least 32 */
} bench_counter;

/* ccache_config::alloc / ::free with alloc_ctx = a bench_counter *.
 * Single-threaded use only (the memory benchmark opens no sweeper). */
void *bench_count_alloc(void *ctx, size_t size);
void bench_count_free(void *ctx, void *ptr);

/* -------------------------------------------------------------- checks */

/* A real error (wrong count, failed call): the benchmark exits non-zero in
 * every mode.  A missed target never does this. */
#define BENCH_CHECK(cond, ...)                                                    \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "bench: FAILED at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                               \
      fprintf(stderr, "\n");                                                      \
      exit(2);                                                                    \
    }                                                                             \
  } while (0)

#define BENCH_OK(call)                                                                      \
  do {                                                                                      \
    int rc_ = (call);                                                                       \
    BENCH_CHECK(rc_ == CCACHE_OK, "%s returned %d (%s)", #call, rc_, ccache_strerror(rc_)); \
  } while (0)

/* ------------------------------------------------------------- report */

typedef enum bench_target_kind {
  BENCH_REPORT = 0, /* no target: reported only */
  BENCH_RATIO_LE,   /* median ratio <= target */
  BENCH_RATIO_GE,   /* median ratio >= target */
  BENCH_VALUE_LE,   /* median measured value <= target (in the value's unit) */
} bench_target_kind;

typedef struct bench_row {
  char figure[96]; /* what is measured */
  double value;    /* median of the subject */
  char unit[24];   /* unit of value and baseline */
  double baseline; /* median of the baseline (NAN: none) */
  char baseline_name[64];
  bench_stat ratio;    /* subject/baseline (or as documented per row); n = 0: none */
  char ratio_what[48]; /* what the ratio is, e.g. "ccache / uthash" */
  bench_target_kind kind;
  double target;
  char note[160];
} bench_row;

#define BENCH_MAX_ROWS 48

typedef struct bench_report {
  const char *name;  /* program, e.g. "bench_hit" */
  const char *title; /* the question it answers */
  bench_row rows[BENCH_MAX_ROWS];
  int n;
  char notes[8][240];
  int n_notes;
} bench_report;

void bench_report_init(bench_report *r, const char *name, const char *title);
/* Adds a row; returns it so the caller can set a note. */
bench_row *bench_add(bench_report *r, const char *figure, double value, const char *unit,
                     double baseline, const char *baseline_name, bench_stat ratio,
                     const char *ratio_what, bench_target_kind kind, double target);
void bench_note(bench_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "met", "MISSED" or "report". */
const char *bench_status(const bench_row *row);
/* Prints the markdown table or the JSON object.  Returns the exit status:
 * 0 (a missed target is not an error in any mode). */
int bench_report_print(const bench_report *r, const bench_opts *o);

#endif
