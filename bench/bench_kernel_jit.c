/*
 * bench_kernel_jit.c - the persistent tiers' goals, measured on the
 * kernel_jit example (issues 14 and 15), by running its binary:
 *
 *  - warm restart: a second process with the same --cache-dir obtains every
 *    kernel >= 20x faster than the cold one (acquire_ms, cold / warm), with
 *    0 compiles;
 *  - a kernel fetched from the disk tier and loaded costs <= 1/100 of its
 *    compile (medians of one run each: compile_ms of the cold run,
 *    tier_load_us of the warm run);
 *  - the same from Redis (no disk tier) <= 1/50;
 *  - 4 processes started together on an empty directory compile each kernel
 *    once (total compiles / distinct kernels = 1);
 *  - the same disk, Redis and restart goals with signed entries (issue 21):
 *    both runs with --signing-key, so the cold run signs every entry and
 *    the warm run checks every signature before loading.
 *
 * Each repetition is a cold run and a warm run back to back on a fresh
 * directory (and a fresh redis-server), so each ratio compares two runs of
 * the same repetition.  A wrong count (a warm compile, a checksum that
 * differs) is a real error: exit 2.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench_util.h"
#include "harness.h"

#ifndef KERNEL_JIT_EXE
#error "KERNEL_JIT_EXE: the kernel_jit binary (set by CMake)"
#endif
#ifndef KJ_REDIS_SERVER
#define KJ_REDIS_SERVER ""
#endif

#define MAX_REPS 16

typedef struct run {
  uint64_t compiles, tier_hits;
  double acquire_ms, compile_ms, load_us; /* NAN when absent (null) */
  char checksum[40];
} run;

/* --signing-key's file for the signed series ("": unsigned runs). */
static char signing_key[300];

/* kernel_jit --json --kernels N <tier flag> <tier value> [--signing-key F];
 * the unsigned series says --trust-unsigned (Redis without keys). */
static void jit(run *r, const char *kernels, const char *flag, const char *value) {
  char *argv[] = {KERNEL_JIT_EXE,  "--json",     "--kernels",
                  (char *)kernels, (char *)flag, (char *)value,
                  "--signing-key", signing_key,  NULL};
  if (!signing_key[0]) argv[6] = "--trust-unsigned", argv[7] = NULL;
  kj_child c;
  int st = kj_run(&c, argv);
  BENCH_CHECK(st == 0, "kernel_jit %s %s exited %d: %s", flag, value, st, c.err);
  BENCH_CHECK(kj_json_u64(c.out, "compiles", &r->compiles) == 0 &&
                  kj_json_u64(c.out, "tier_hits", &r->tier_hits) == 0 &&
                  kj_json_num(c.out, "acquire_ms", &r->acquire_ms) == 0 &&
                  kj_json_str(c.out, "checksum", r->checksum, sizeof r->checksum) == 0,
              "unexpected output: %s", c.out);
  if (kj_json_num(c.out, "compile_ms_median", &r->compile_ms) != 0) r->compile_ms = NAN;
  if (kj_json_num(c.out, "tier_load_us_median", &r->load_us) != 0) r->load_us = NAN;
  kj_child_free(&c);
}

/* The counts that make the timing meaningful. */
static void check_pair(const run *cold, const run *warm, uint64_t n) {
  BENCH_CHECK(cold->compiles == n && cold->tier_hits == 0, "cold: %" PRIu64 " compiles",
              cold->compiles);
  BENCH_CHECK(warm->compiles == 0 && warm->tier_hits == n,
              "warm: %" PRIu64 " compiles, %" PRIu64 " tier hits", warm->compiles, warm->tier_hits);
  BENCH_CHECK(strcmp(cold->checksum, warm->checksum) == 0, "checksums differ");
}

typedef struct series {
  double cold_ms[MAX_REPS], warm_ms[MAX_REPS], restart[MAX_REPS];
  double compile_us[MAX_REPS], load_us[MAX_REPS], load_ratio[MAX_REPS];
  int n;
} series;

static void add(series *s, const run *cold, const run *warm) {
  int i = s->n++;
  s->cold_ms[i] = cold->acquire_ms;
  s->warm_ms[i] = warm->acquire_ms;
  s->restart[i] = cold->acquire_ms / warm->acquire_ms;
  s->compile_us[i] = cold->compile_ms * 1e3;
  s->load_us[i] = warm->load_us;
  s->load_ratio[i] = s->compile_us[i] / warm->load_us;
}

static void disk_reps(series *s, int reps, const char *kernels, uint64_t n) {
  for (int r = 0; r < reps; r++) {
    char dir[256];
    BENCH_CHECK(kj_scratch(dir, sizeof dir, "bench") == 0, "scratch directory");
    run cold, warm;
    jit(&cold, kernels, "--cache-dir", dir);
    jit(&warm, kernels, "--cache-dir", dir);
    check_pair(&cold, &warm, n);
    add(s, &cold, &warm);
    kj_scratch_remove(dir);
  }
}

/* 0 if this build has the Redis tier and a redis-server was found. */
static int redis_available(char *why, size_t n) {
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  o.servers = "127.0.0.1:1";
  ccache_tier *t = NULL;
  int rc = ccache_tier_redis(&o, &t);
  ccache_tier_free(t);
  if (rc != CCACHE_OK) {
    snprintf(why, n, "Redis rows not measured: ccache_tier_redis: %s", ccache_strerror(rc));
    return -1;
  }
  if (!KJ_REDIS_SERVER[0]) {
    snprintf(why, n, "Redis rows not measured: no redis-server found at configure time");
    return -1;
  }
  return 0;
}

static void redis_reps(series *s, int reps, const char *kernels, uint64_t n) {
  for (int r = 0; r < reps; r++) {
    kj_redis srv;
    BENCH_CHECK(kj_redis_start(&srv, KJ_REDIS_SERVER) == 0, "redis-server did not start");
    run cold, warm;
    jit(&cold, kernels, "--redis", srv.addr);
    jit(&warm, kernels, "--redis", srv.addr);
    check_pair(&cold, &warm, n);
    add(s, &cold, &warm);
    kj_redis_stop(&srv);
    kj_redis_free(&srv);
  }
}

/* 4 processes released together on a directory that does not exist yet. */
static uint64_t four_processes(const char *kernels, uint64_t n) {
  char dir[256], cache[300];
  BENCH_CHECK(kj_scratch(dir, sizeof dir, "bench4") == 0, "scratch directory");
  snprintf(cache, sizeof cache, "%s/cache", dir);
  char *argv[] = {KERNEL_JIT_EXE, "--json", "--kernels", (char *)kernels,
                  "--cache-dir",  cache,    NULL};
  kj_child c[4];
  BENCH_CHECK(kj_run_together(c, 4, argv) == 0, "could not start 4 processes");
  uint64_t total = 0;
  for (int i = 0; i < 4; i++) {
    uint64_t compiles = 0, hits = 0;
    BENCH_CHECK(c[i].status == 0 && kj_json_u64(c[i].out, "compiles", &compiles) == 0 &&
                    kj_json_u64(c[i].out, "tier_hits", &hits) == 0,
                "process %d: exit %d: %s", i, c[i].status, c[i].err);
    BENCH_CHECK(compiles + hits == n, "process %d: %" PRIu64 " + %" PRIu64, i, compiles, hits);
    total += compiles;
    kj_child_free(&c[i]);
  }
  kj_scratch_remove(dir);
  return total;
}

static void restart_row(bench_report *rep, const series *s, const char *tier, uint64_t n,
                        bench_target_kind kind) {
  char fig[96];
  snprintf(fig, sizeof fig, "kernel_jit warm restart, %s: obtaining %" PRIu64 " kernels", tier, n);
  bench_row *row = bench_add(rep, fig, bench_stats(s->warm_ms, s->n).med, "ms",
                             bench_stats(s->cold_ms, s->n).med, "cold run, empty tier",
                             bench_stats(s->restart, s->n), "cold / warm", kind, 20.0);
  snprintf(row->note, sizeof row->note,
           "acquire_ms (lookups + tier + compiles + waits); warm: 0 compiles, %" PRIu64
           " tier hits, same checksum, every rep",
           n);
}

/* The compile-avoidance figure's points: a kernel's compile (cold) and its
 * fetch + load from the tier (warm), medians, us. */
static void points(const bench_opts *o, const series *s, const char *category) {
  bench_point(o, "compile_avoidance", "cold: compile", category,
              bench_stats(s->compile_us, s->n).med, "us");
  bench_point(o, "compile_avoidance", "warm: tier hit", category, bench_stats(s->load_us, s->n).med,
              "us");
}

static void load_row(bench_report *rep, const series *s, const char *tier, double target) {
  char fig[96];
  snprintf(fig, sizeof fig, "kernel_jit %s fetch + load of a kernel vs its compile", tier);
  bench_row *row = bench_add(
      rep, fig, bench_stats(s->load_us, s->n).med, "us", bench_stats(s->compile_us, s->n).med,
      "compile (codegen + cc + load), median", bench_stats(s->load_ratio, s->n),
      "compile / (fetch + load)", BENCH_RATIO_GE, target);
  snprintf(
      row->note, sizeof row->note,
      "per rep: median compile of the cold run / median get served by the tier in the warm run");
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(argc, argv, &o, "kernel_jit: warm restart, tier fetch + load vs compile, 4 processes",
              false);
  bench_report rep;
  bench_report_init(&rep, "bench_kernel_jit",
                    "what do the persistent tiers save the kernel_jit example? (disk, Redis)");
  const char *kernels = o.quick ? "10" : "40";
  uint64_t n = o.quick ? 10 : 40;
  int reps = o.quick ? 1 : 5;

  series disk = {0};
  disk_reps(&disk, reps, kernels, n);
  restart_row(&rep, &disk, "disk tier", n, BENCH_RATIO_GE);
  load_row(&rep, &disk, "disk tier", 100.0);
  points(&o, &disk, "directory, kernel_jit");

  uint64_t total = four_processes(kernels, n);
  bench_stat one = {(double)total / (double)n, (double)total / (double)n, (double)total / (double)n,
                    1};
  bench_row *row = bench_add(
      &rep, "kernel_jit 4 processes together on an empty directory: compiles", (double)total,
      "compiles", (double)n, "distinct kernels", one, "total / distinct", BENCH_RATIO_LE, 1.0);
  snprintf(row->note, sizeof row->note, "exact count, one run (not a timing)");

  char why[160];
  bool have_redis = redis_available(why, sizeof why) == 0;
  if (have_redis) {
    series redis = {0};
    redis_reps(&redis, reps, kernels, n);
    load_row(&rep, &redis, "Redis tier (no disk tier)", 50.0);
    points(&o, &redis, "Redis, kernel_jit");
    restart_row(&rep, &redis, "Redis tier (no disk tier)", n, BENCH_REPORT);
  } else {
    bench_note(&rep, "%s", why);
  }

  /* Signed entries: a key pair in a scratch directory, both runs signing
   * (a writer checks what it loads against its own key). */
  char kdir[256], pub[300];
  if (ccache_trust_available() && kj_scratch(kdir, sizeof kdir, "benchkeys") == 0) {
    snprintf(signing_key, sizeof signing_key, "%s/bench.sec", kdir);
    snprintf(pub, sizeof pub, "%s/bench.pub", kdir);
    BENCH_OK(ccache_trust_generate("bench", signing_key, pub));
    series sdisk = {0};
    disk_reps(&sdisk, reps, kernels, n);
    load_row(&rep, &sdisk, "disk tier, signed", 100.0);
    restart_row(&rep, &sdisk, "disk tier, signed", n, BENCH_RATIO_GE);
    if (have_redis) {
      series sredis = {0};
      redis_reps(&sredis, reps, kernels, n);
      load_row(&rep, &sredis, "Redis tier, signed", 50.0);
    }
    signing_key[0] = '\0';
    kj_scratch_remove(kdir);
  } else {
    bench_note(&rep, "signed rows not measured: no libsodium in this build");
  }
  bench_note(&rep,
             "%d rep(s) of a cold and a warm kernel_jit run (--kernels %s), each on a fresh "
             "directory / redis-server",
             reps, kernels);
  return bench_report_print(&rep, &o);
}
