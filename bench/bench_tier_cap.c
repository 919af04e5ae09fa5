/*
 * bench_tier_cap.c - the directory tier under its size cap (issue 14):
 * "cap 64 MiB, 10,000 puts of 64 KiB: the directory stays <= cap + one
 * entry".  Every put is a program miss whose compile is stored (the codec
 * makes 64 KiB); after each, the directory's entry bytes are summed from the
 * file system (not from the library's own running total).
 *
 * The clean runs on the tier's cleaner thread (issue 20), and the bound the
 * tier keeps (include/ccache/tier_disk.h, issue 34) is cap + cap / 10 + one entry
 * per write in progress: a write that finds the total over cap + cap / 10
 * waits (at most io_lock_ms) for the cleaner.  Three phases:
 *  - the cap itself: after a put that finds the directory over the cap, the
 *    writer waits (bounded) until it is back under, so no write lands while
 *    a clean runs and the largest directory must be <= cap + one entry.
 *    This fails if the cleaner does not run, removes too little, or the
 *    running total undercounts (no wake at the real crossing);
 *  - a writer that goes on during the cleans: the largest directory, which
 *    must be <= cap + cap / 10 + one entry, and the most puts published in
 *    one over-cap window;
 *  - 8 writing processes (each a cache over the directory, its own cleaner
 *    thread) while this process sums the directory all along: the largest
 *    directory must be <= cap + cap / 10 + 8 entries (a fresh directory).
 * Then a fresh cache over the same directory loads the entries still there:
 * the tier hit (get, verify, decode, intern) against a plain
 * open+read+close of the same file.
 *
 * --quick: 1,000 + 300 puts under a 4 MiB cap, 8 x 100 puts.
 */
#define _GNU_SOURCE 1 /* nftw's FTW_PHYS */
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "bench_util.h"

#define TAG     "bench_tier_cap"
#define PAYLOAD (64u * 1024u)
#define ENTRY   (PAYLOAD + 56u + 16u) /* header + payload + checksum */

/* ------------------------------------------------------------ the codec */

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
  uint64_t first;
  if (len != PAYLOAD) return -1;
  memcpy(&first, bytes, 8);
  if (first != pkey.lo) return -1;
  *native_out = (void *)(uintptr_t)(pkey.lo + 1); /* any non-NULL token */
  *cost_out = len;
  return 0;
}
static int compile(void *ud, ccache *c, ccache_key pkey, void **native_out, uint64_t *cost_out) {
  (void)ud;
  (void)c;
  *native_out = (void *)(uintptr_t)(pkey.lo + 1);
  *cost_out = PAYLOAD;
  return 0;
}

/* ---------------------------------------------------------- the directory */

static uint64_t dir_bytes;
static long dir_entries;
static int add_entry(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)f;
  const char *base = strrchr(path, '/');
  if (flag == FTW_F && strlen(base ? base + 1 : path) == 32) {
    dir_bytes += (uint64_t)st->st_size;
    dir_entries++;
  }
  return 0;
}
static void scan(const char *dir) {
  dir_bytes = 0;
  dir_entries = 0;
  nftw(dir, add_entry, 16, FTW_PHYS);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)st;
  (void)flag;
  (void)f;
  remove(path);
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
  ccache *c = NULL;
  BENCH_OK(ccache_open(&cfg, &c));
  return c;
}

/* The documented layout: <dir>/v1/<XXH3-64 of the tag>/<xx>/<key hex>. */
static void key_path(const char *dir, ccache_key k, char *out, size_t n) {
  unsigned long long tag = XXH3_64bits(TAG, strlen(TAG));
  char hex[33];
  snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long)k.hi, (unsigned long long)k.lo);
  snprintf(out, n, "%s/v1/%016llx/%.2s/%s", dir, tag, hex, hex);
}

/* One put: a program miss that compiles and stores 64 KiB; us. */
static double put_one(ccache *c, int i) {
  ccache_program *p = NULL;
  uint64_t t0 = bench_now_ns();
  BENCH_OK(ccache_program_get_or_compile(c, bench_key(14, (uint64_t)i), compile, NULL, &p));
  double us = (double)(bench_now_ns() - t0) / 1e3;
  ccache_program_release(c, p);
  return us;
}

/* Waits (polling the file system every 2 ms, at most WAIT_S s) until the
 * directory is back under the cap: ms waited, or -1 when it was not. */
#define WAIT_S 5
static double wait_under(const char *dir, uint64_t cap) {
  uint64_t t0 = bench_now_ns();
  while (bench_now_ns() - t0 < (uint64_t)WAIT_S * 1000000000u) {
    nanosleep(&(struct timespec){0, 2000000}, NULL);
    scan(dir);
    if (dir_bytes <= cap) return (double)(bench_now_ns() - t0) / 1e6;
  }
  return -1;
}

/* ------------------------------------------------- 8 writing processes */

#define WRITERS 8

/* One writing process: its own cache over dir, puts keys salt 15 + w; the
 * writes withheld (tier errors) go to the pipe. */
static void writer(const char *dir, uint64_t cap, int w, int puts, int out) {
  ccache *c = open_over(dir, cap);
  for (int i = 0; i < puts; i++) {
    ccache_program *p = NULL;
    BENCH_OK(ccache_program_get_or_compile(c, bench_key(15 + (uint64_t)w, (uint64_t)i), compile,
                                           NULL, &p));
    ccache_program_release(c, p);
  }
  ccache_stats s = {.size = sizeof s};
  ccache_stats_get(c, &s);
  BENCH_OK(ccache_close(c));
  long withheld = (long)s.tier_errors;
  _exit(write(out, &withheld, sizeof withheld) == (ssize_t)sizeof withheld ? 0 : 1);
}

/* The 8-writer row: the largest directory against the tier's bound. */
static void writers_row(bench_report *rep, uint64_t cap, int puts) {
  char dir[] = "/tmp/ccache-bench-tier8-XXXXXX";
  BENCH_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  int pfd[2];
  BENCH_CHECK(pipe(pfd) == 0, "pipe");
  fflush(NULL);
  pid_t pid[WRITERS];
  for (int w = 0; w < WRITERS; w++) {
    pid[w] = fork();
    BENCH_CHECK(pid[w] >= 0, "fork");
    if (pid[w] == 0) {
      close(pfd[0]);
      writer(dir, cap, w, puts, pfd[1]);
    }
  }
  close(pfd[1]);
  uint64_t most = 0, t0 = bench_now_ns();
  long most_entries = 0, samples = 0;
  int running = WRITERS;
  while (running > 0) {
    scan(dir);
    samples++;
    if (dir_bytes > most) most = dir_bytes;
    if (dir_entries > most_entries) most_entries = dir_entries;
    for (int w = 0; w < WRITERS; w++) {
      int st = 0;
      if (pid[w] > 0 && waitpid(pid[w], &st, WNOHANG) == pid[w]) {
        BENCH_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed", w);
        pid[w] = 0;
        running--;
      }
    }
  }
  double secs = (double)(bench_now_ns() - t0) / 1e9;
  long withheld = 0, n;
  for (int w = 0; w < WRITERS; w++) {
    BENCH_CHECK(read(pfd[0], &n, sizeof n) == (ssize_t)sizeof n, "writer report");
    withheld += n;
  }
  close(pfd[0]);
  const uint64_t bound = cap + cap / 10 + (uint64_t)WRITERS * ENTRY;
  double r = (double)most / (double)bound;
  char fig[96];
  snprintf(fig, sizeof fig, "largest directory, %d processes x %d puts of 64 KiB, cap %llu MiB",
           WRITERS, puts, (unsigned long long)(cap >> 20));
  bench_row *row = bench_add(rep, fig, (double)most / 1048576.0, "MiB", (double)bound / 1048576.0,
                             "cap + cap/10 + 8 entries", (bench_stat){r, r, r, 1},
                             "largest / bound", BENCH_RATIO_LE, 1.0);
  snprintf(row->note, sizeof row->note,
           "at most %ld entries (%llu fit); %ld samples over %.1f s; %ld of %d writes withheld "
           "(the cleaner behind for io_lock_ms)",
           most_entries, (unsigned long long)(cap / ENTRY), samples, secs, withheld,
           WRITERS * puts);
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(argc, argv, &o, "the directory tier under its size cap, and a tier hit", false);
  bench_report rep;
  bench_report_init(&rep, "bench_tier_cap", "does the directory tier hold its size cap?");
  const uint64_t cap = o.quick ? (4u << 20) : (64u << 20);
  const int puts = o.quick ? 1000 : 10000;
  const int cont_puts = o.quick ? 300 : 2000;
  char dir[] = "/tmp/ccache-bench-tier-XXXXXX";
  BENCH_CHECK(mkdtemp(dir) != NULL, "mkdtemp");

  /* Phase 1, the cap: each a program miss that compiles and stores 64 KiB;
   * a put that leaves the directory over the cap waits for the clean. */
  ccache *c = open_over(dir, cap);
  const int total_puts = puts + cont_puts;
  double *put_us = malloc(sizeof(double) * (size_t)total_puts);
  uint64_t most = 0;
  long most_entries = 0, waits = 0, wait_timeouts = 0;
  double wait_ms_max = 0;
  for (int i = 0; i < puts; i++) {
    put_us[i] = put_one(c, i);
    scan(dir);
    if (dir_bytes > most) most = dir_bytes;
    if (dir_entries > most_entries) most_entries = dir_entries;
    if (dir_bytes > cap) {
      double ms = wait_under(dir, cap);
      waits++;
      if (ms < 0) wait_timeouts++;
      if (ms > wait_ms_max) wait_ms_max = ms;
    }
  }
  bench_stat one = {(double)most / (double)(cap + ENTRY), (double)most / (double)(cap + ENTRY),
                    (double)most / (double)(cap + ENTRY), 1};
  char fig[96];
  snprintf(fig, sizeof fig, "largest directory over %d puts of 64 KiB, cap %llu MiB", puts,
           (unsigned long long)(cap >> 20));
  bench_row *row =
      bench_add(&rep, fig, (double)most / 1048576.0, "MiB", (double)(cap + ENTRY) / 1048576.0,
                "cap + one entry", one, "largest / (cap + entry)", BENCH_RATIO_LE, 1.0);
  snprintf(row->note, sizeof row->note,
           "at most %ld entries (%llu fit); writer waits out each clean: %ld (longest %.0f ms, "
           "%ld over %d s)",
           most_entries, (unsigned long long)(cap / ENTRY), waits, wait_ms_max, wait_timeouts,
           WAIT_S);

  /* Phase 2: the writer goes on while the cleaner lists and removes. */
  uint64_t most2 = 0;
  long most2_entries = 0, over_run = 0, over_most = 0;
  for (int i = puts; i < total_puts; i++) {
    put_us[i] = put_one(c, i);
    scan(dir);
    if (dir_bytes > most2) most2 = dir_bytes;
    if (dir_entries > most2_entries) most2_entries = dir_entries;
    over_run = dir_bytes > cap ? over_run + 1 : 0;
    if (over_run > over_most) over_most = over_run;
  }
  ccache_stats s = {.size = sizeof s};
  ccache_stats_get(c, &s);
  BENCH_CHECK(s.tier_writes == (uint64_t)total_puts && s.tier_errors == 0,
              "tier_writes %llu tier_errors %llu", (unsigned long long)s.tier_writes,
              (unsigned long long)s.tier_errors);
  BENCH_OK(ccache_close(c));
  const uint64_t bound1 = cap + cap / 10 + ENTRY;
  double r2 = (double)most2 / (double)bound1;
  snprintf(fig, sizeof fig, "largest directory, %d more puts going on during the cleans",
           cont_puts);
  row = bench_add(&rep, fig, (double)most2 / 1048576.0, "MiB", (double)bound1 / 1048576.0,
                  "cap + cap/10 + one entry", (bench_stat){r2, r2, r2, 1},
                  "largest / (cap + cap/10 + entry)", BENCH_RATIO_LE, 1.0);
  snprintf(row->note, sizeof row->note,
           "at most %ld entries (%llu fit); up to %ld puts in a row over the cap: the crossing "
           "one, then those during a clean",
           most2_entries, (unsigned long long)(cap / ENTRY), over_most);
  bench_stat pst = bench_stats(put_us, total_puts);
  bench_add(&rep, "program miss that stores 64 KiB (encode, write, rename, count)", pst.med, "us",
            NAN, "", (bench_stat){0}, "", BENCH_REPORT, 0);

  /* Hits: a fresh cache (a restart) loads what is left, newest first. */
  scan(dir);
  long n = dir_entries < 500 ? dir_entries : 500;
  double *hit_us = malloc(sizeof(double) * (size_t)n);
  double *read_us = malloc(sizeof(double) * (size_t)n);
  double *ratio = malloc(sizeof(double) * (size_t)n);
  c = open_over(dir, cap);
  static unsigned char buf[ENTRY];
  long got = 0;
  for (int i = total_puts - 1; i >= 0 && got < n; i--) {
    ccache_key k = bench_key(14, (uint64_t)i);
    char path[4400];
    key_path(dir, k, path, sizeof path);
    if (access(path, F_OK) != 0) continue;
    uint64_t t0 = bench_now_ns();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
    if (fd >= 0) close(fd);
    uint64_t t1 = bench_now_ns();
    BENCH_CHECK(r == (ssize_t)ENTRY, "read %zd bytes of %s", r, path);
    ccache_program *p = NULL;
    uint64_t before = s.tier_hits;
    BENCH_OK(ccache_program_get_or_compile(c, k, compile, NULL, &p));
    uint64_t t2 = bench_now_ns();
    ccache_program_release(c, p);
    ccache_stats_get(c, &s);
    BENCH_CHECK(s.tier_hits == before + 1, "key %d was on disk but not a tier hit", i);
    read_us[got] = (double)(t1 - t0) / 1e3;
    hit_us[got] = (double)(t2 - t1) / 1e3;
    ratio[got] = hit_us[got] / read_us[got];
    got++;
  }
  BENCH_CHECK(s.program_compiles == 0, "%llu compiles on reload",
              (unsigned long long)s.program_compiles);
  BENCH_OK(ccache_close(c));
  snprintf(fig, sizeof fig, "tier hit, 64 KiB entry (get, verify, decode, intern), %ld keys", got);
  bench_add(&rep, fig, bench_stats(hit_us, (int)got).med, "us", bench_stats(read_us, (int)got).med,
            "open+read+close", bench_stats(ratio, (int)got), "hit / plain read", BENCH_REPORT, 0);
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);

  writers_row(&rep, cap, o.quick ? 100 : 250);
  bench_note(&rep, "directory on %s; the cap counts entry file bytes (not directories or blocks)",
             "/tmp");
  if (o.quick) bench_note(&rep, "quick mode: 1,000 + 300 puts under a 4 MiB cap, 8 x 100 puts");
  free(put_us);
  free(hit_us);
  free(read_us);
  free(ratio);
  return bench_report_print(&rep, &o);
}
