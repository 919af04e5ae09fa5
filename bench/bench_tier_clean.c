/*
 * bench_tier_clean.c - does a program miss pay for the directory tier's
 * clean?  (issue 20, item 9)
 *
 * A directory of 100,000 entries (512-byte payloads) is filled through the
 * library.  Then, in the same run, 1,000 program misses (each compiles and
 * stores one entry) are timed twice over that directory: by a cache whose
 * tier has no cap, and by one whose cap is the directory's size at that
 * moment, so its first write crosses the cap and starts a clean of the
 * whole directory (listing 101,000 entries, removing the oldest tenth).
 * The figures are the maximum and the 99th percentile of the capped misses
 * against the uncapped ones: a miss that paid for the scan would be
 * hundreds of times the uncapped maximum; the goal is at most 2x.
 *
 * --quick: 10,000 entries and 200 misses.
 */
#define _GNU_SOURCE 1 /* nftw's FTW_PHYS */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"

#define TAG     "bench_tier_clean"
#define PAYLOAD 512u
#define ENTRY   (PAYLOAD + 56u + 16u) /* header + payload + checksum */

static int enc(void *ctx, ccache_key pkey, void *native, void **bytes, size_t *len) {
  (void)ctx;
  (void)native;
  unsigned char *b = malloc(PAYLOAD);
  if (!b) return -1;
  for (size_t i = 0; i < PAYLOAD; i += 8) memcpy(b + i, &pkey.lo, 8);
  *bytes = b;
  *len = PAYLOAD;
  return 0;
}
static void enc_free(void *ctx, void *bytes, size_t len) {
  (void)ctx;
  (void)len;
  free(bytes);
}
static int dec(void *ctx, ccache_key pkey, const void *bytes, size_t len, void **native_out,
               uint64_t *cost_out) {
  (void)ctx;
  (void)pkey;
  (void)bytes;
  *native_out = (void *)(uintptr_t)1;
  *cost_out = len;
  return 0;
}
static int compile(void *ud, ccache *c, ccache_key pkey, void **native_out, uint64_t *cost_out) {
  (void)ud;
  (void)c;
  *native_out = (void *)(uintptr_t)(pkey.lo | 1);
  *cost_out = PAYLOAD;
  return 0;
}

static ccache *open_over(const char *dir, uint64_t cap) {
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  o.max_bytes = cap;
  ccache_tier *t = NULL;
  int rc = ccache_tier_disk(&o, &t);
  BENCH_CHECK(rc == CCACHE_OK, "ccache_tier_disk: %s (%s)", ccache_strerror(rc),
              ccache_error_detail());
  ccache_codec k = {enc, enc_free, dec, NULL};
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.sweeper_thread = 0;
  cfg.codec = &k;
  cfg.runtime_tag = TAG;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &t;
  cfg.n_tiers = 1;
  /* Programs are released at once and never hit again: keep the table small. */
  cfg.max_items = 1024;
  ccache *c = NULL;
  BENCH_OK(ccache_open(&cfg, &c));
  return c;
}

/* n misses on keys salt/first..first+n-1; each one's time in us[]. */
static void misses(ccache *c, uint64_t salt, uint64_t first, int n, double *us) {
  for (int i = 0; i < n; i++) {
    ccache_program *p = NULL;
    uint64_t t0 = bench_now_ns();
    BENCH_OK(
        ccache_program_get_or_compile(c, bench_key(salt, first + (uint64_t)i), compile, NULL, &p));
    if (us) us[i] = (double)(bench_now_ns() - t0) / 1e3;
    ccache_program_release(c, p);
  }
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
/* v sorted in place: its maximum and its p-th percentile (nearest rank). */
static void tail(double *v, int n, double p, double *max, double *pct) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  int rank = (int)ceil(p / 100.0 * n);
  *pct = v[(rank < 1 ? 1 : rank) - 1];
  *max = v[n - 1];
}

static long dir_entries;
static int count_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)st;
  (void)f;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (flag == FTW_F && strlen(base) == 32 && strspn(base, "0123456789abcdef") == 32) dir_entries++;
  return 0;
}
static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)st;
  (void)flag;
  (void)f;
  remove(path);
  return 0;
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(argc, argv, &o, "program misses on a directory tier held at its cap", false);
  bench_report rep;
  bench_report_init(&rep, "bench_tier_clean", "does a program miss pay for the directory clean?");
  const int entries = o.quick ? 10000 : 100000;
  const int n = o.quick ? 200 : 1000;
  char dir[] = "/tmp/ccache-bench-clean-XXXXXX";
  BENCH_CHECK(mkdtemp(dir) != NULL, "mkdtemp");

  uint64_t t0 = bench_now_ns();
  ccache *c = open_over(dir, CCACHE_UNBOUNDED);
  misses(c, 20, 0, entries, NULL);
  BENCH_OK(ccache_close(c));
  double fill_s = (double)(bench_now_ns() - t0) / 1e9;

  double *un = malloc(sizeof(double) * (size_t)n), *cap = malloc(sizeof(double) * (size_t)n);
  BENCH_CHECK(un && cap, "malloc");
  c = open_over(dir, CCACHE_UNBOUNDED);
  misses(c, 21, 0, n, un);
  BENCH_OK(ccache_close(c));

  /* The cap is what the directory holds now: the first write crosses it. */
  const uint64_t held = (uint64_t)(entries + n) * ENTRY;
  c = open_over(dir, held);
  misses(c, 22, 0, n, cap);
  ccache_stats s = {.size = sizeof s};
  ccache_stats_get(c, &s);
  BENCH_CHECK(s.tier_writes == (uint64_t)n && s.tier_errors == 0,
              "tier_writes %llu tier_errors %llu", (unsigned long long)s.tier_writes,
              (unsigned long long)s.tier_errors);
  uint64_t tc = bench_now_ns();
  BENCH_OK(ccache_close(c)); /* lets the clean it started finish */
  double close_ms = (double)(bench_now_ns() - tc) / 1e6;
  dir_entries = 0;
  nftw(dir, count_one, 16, FTW_PHYS);
  BENCH_CHECK(dir_entries < entries + 2 * n, "no clean ran: %ld entries", dir_entries);

  double un_max, un_p99, cap_max, cap_p99;
  tail(un, n, 99.0, &un_max, &un_p99);
  tail(cap, n, 99.0, &cap_max, &cap_p99);
  char fig[96];
  snprintf(fig, sizeof fig, "slowest of %d misses, %d-entry directory at its cap", n, entries + n);
  bench_stat r = {cap_max / un_max, cap_max / un_max, cap_max / un_max, 1};
  bench_row *row = bench_add(&rep, fig, cap_max, "us", un_max, "same, uncapped", r,
                             "capped / uncapped", BENCH_RATIO_LE, 2.0);
  snprintf(row->note, sizeof row->note,
           "the first capped write crosses the cap and starts a clean (%ld entries left "
           "after it); close waited %.0f ms for it",
           dir_entries, close_ms);
  snprintf(fig, sizeof fig, "p99 of %d misses, %d-entry directory at its cap", n, entries + n);
  r = (bench_stat){cap_p99 / un_p99, cap_p99 / un_p99, cap_p99 / un_p99, 1};
  bench_add(&rep, fig, cap_p99, "us", un_p99, "same, uncapped", r, "capped / uncapped",
            BENCH_REPORT, 0);
  bench_note(&rep,
             "directory on /tmp, %d entries of %u bytes filled through the library in %.1f s; "
             "uncapped misses first, then capped, one process",
             entries, ENTRY, fill_s);
  if (o.quick) bench_note(&rep, "quick mode: 10,000 entries, 200 misses");
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  free(un);
  free(cap);
  return bench_report_print(&rep, &o);
}
