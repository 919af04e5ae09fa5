/*
 * bench_halide_jit.c - what ccache saves a runtime that builds Halide
 * pipelines at its call sites (issue 28), on the halide_jit example:
 *
 *  - per pipeline: obtaining it at a call site through ccache (builder
 *    parameters -> program and site keys -> ccache_get_or_compile hit +
 *    release) against Halide's own path (a fresh Func + compile_jit, which
 *    Halide reuses only for the same Pipeline object);
 *  - 30 call sites x 5 pipelines, each built independently: compiles with
 *    Halide alone (150 compile_jit calls, timed) and through ccache (5);
 *  - 4 threads asking for one pipeline at once: compiles (1);
 *  - warm restart from the directory tier (runs the halide_jit binary):
 *    obtain_ms cold / warm, with 0 compiles warm;
 *  - a pipeline's compile (Halide compile_to_object + cc + load) against its
 *    fetch + load from the disk tier and from Redis (medians of a run each).
 *
 * In-process parts link halide_jit_core (so the executable carries the one
 * Halide runtime); Halide's JIT path uses libHalide's own JIT runtime.
 * Wrong counts (a warm compile, a checksum that differs) are real errors:
 * exit 2.
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "bench_util.h"
#include "halide_build.h"
#include "harness.h"
#include "jit.h"
#include "runner.h"
#include "walk.h"

#ifndef HALIDE_JIT_EXE
#error "HALIDE_JIT_EXE: the halide_jit binary (set by CMake)"
#endif
#ifndef KJ_REDIS_SERVER
#define KJ_REDIS_SERVER ""
#endif

#define MAX_REPS 8

static hj_jit jit; /* large: static */

static double ms_since(uint64_t t0) { return (double)(bench_now_ns() - t0) / 1e6; }

static void open_jit(const char *dir, uint64_t max_items) {
  char err[640] = "";
  hj_jit_options o = {.cache_dir = dir, .max_items = max_items};
  BENCH_CHECK(hj_jit_open(&jit, &o, err, sizeof err) == 0, "hj_jit_open: %s", err);
}

static ccache_stats stats(void) {
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(jit.cache, &st);
  return st;
}

/* Halide's own path at one call site: fresh Func + compile_jit, ms. */
static double halide_path_ms(const hj_spec *s) {
  char err[512] = "";
  uint64_t t0 = bench_now_ns();
  BENCH_CHECK(hj_halide_jit(s, err, sizeof err) == 0, "compile_jit: %s", err);
  return ms_since(t0);
}

/* ccache's hit at a call site whose closure exists: us per call. */
static double ccache_hit_us(const hj_spec *s, uint32_t slot, int n) {
  char err[640] = "";
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < n; i++) {
    hj_spec site = *s; /* the builder's parameters, as at each call */
    ccache_lease l = {0};
    BENCH_CHECK(hj_jit_site(&jit, 0, slot, &site, &l, err, sizeof err) == CCACHE_OK, "get: %s",
                err);
    ccache_lease_release(jit.cache, &l);
  }
  return (double)(bench_now_ns() - t0) / 1e3 / n;
}

/* The compile-avoidance figure's points (us): cold = a compile, warm = the
 * tier's answer; the memory tier's from per_pipeline_rows. */
static void points(const bench_opts *o, const char *category, double cold_us, double warm_us) {
  bench_point(o, "compile_avoidance", "cold: compile", category, cold_us, "us");
  bench_point(o, "compile_avoidance", "warm: tier hit", category, warm_us, "us");
}

static void per_pipeline_rows(bench_report *rep, const bench_opts *o, int reps, int hits) {
  double kind_jit_us[HJ_SLOTS], kind_hit_us[HJ_SLOTS];
  open_jit(NULL, 0);
  hj_spec warm = hj_spec_default(HJ_RMSNORM);
  halide_path_ms(&warm); /* the first compile_jit of a process also sets up Halide's JIT */
  for (uint32_t slot = 0; slot < HJ_SLOTS; slot++) {
    hj_spec s = hj_spec_default(hj_slot_kind(slot));
    double jit_ms[MAX_REPS], hit_us[MAX_REPS], ratio[MAX_REPS];
    ccache_hit_us(&s, slot, 1); /* the site's closure: compiled once here */
    for (int r = 0; r < reps; r++) {
      jit_ms[r] = halide_path_ms(&s);
      hit_us[r] = ccache_hit_us(&s, slot, hits);
      ratio[r] = jit_ms[r] * 1e3 / hit_us[r];
    }
    char fig[96];
    snprintf(fig, sizeof fig,
             "halide_jit %s at a call site: ccache hit vs fresh Func + compile_jit",
             hj_kind_name(s.kind));
    kind_hit_us[slot] = bench_stats(hit_us, reps).med;
    kind_jit_us[slot] = bench_stats(jit_ms, reps).med * 1e3;
    bench_row *row = bench_add(rep, fig, bench_stats(hit_us, reps).med, "us",
                               bench_stats(jit_ms, reps).med * 1e3, "Halide's own path (us)",
                               bench_stats(ratio, reps), "Halide / ccache", BENCH_REPORT, 0);
    snprintf(row->note, sizeof row->note,
             "hit: keys from the builder's parameters + ccache_get_or_compile + release, mean of "
             "%d; Halide: one compile_jit per rep",
             hits);
  }
  hj_jit_close(&jit);
  /* One memory-tier pair for the figure: the medians over the pipelines. */
  points(o, "memory, halide_jit", bench_stats(kind_jit_us, HJ_SLOTS).med,
         bench_stats(kind_hit_us, HJ_SLOTS).med);
}

/* layers x 5 call sites, each building its pipeline afresh: Halide's
 * compile_jit at every one, against one walk through ccache. */
static void call_site_rows(bench_report *rep, uint32_t layers) {
  uint64_t t0 = bench_now_ns();
  for (uint32_t l = 0; l < layers; l++)
    for (uint32_t slot = 0; slot < HJ_SLOTS; slot++) {
      hj_spec s = hj_spec_default(hj_slot_kind(slot));
      halide_path_ms(&s);
    }
  double halide_ms = ms_since(t0);
  uint64_t halide_compiles = (uint64_t)layers * HJ_SLOTS;
  open_jit(NULL, 0);
  hj_walk_options o = {layers, 8, 1, 1, 1, (float)HJ_RMS_EPS};
  hj_walk_result w;
  BENCH_CHECK(hj_walk(&jit, &o, &w) == 0 && w.mismatches == 0, "walk: %s", w.err);
  ccache_stats st = stats();
  BENCH_CHECK(st.program_compiles == HJ_N_KINDS, "%" PRIu64 " compiles", st.program_compiles);
  hj_jit_close(&jit);
  char fig[96];
  snprintf(fig, sizeof fig,
           "halide_jit %" PRIu32 " call sites x 5 pipelines built independently: compiles", layers);
  double r = (double)halide_compiles / (double)st.program_compiles;
  bench_row *row =
      bench_add(rep, fig, (double)st.program_compiles, "compiles", (double)halide_compiles,
                "Halide alone (compile_jit per site)", (bench_stat){r, r, r, 1}, "Halide / ccache",
                BENCH_RATIO_GE, (double)layers);
  snprintf(row->note, sizeof row->note,
           "exact counts; time: Halide alone %.0f ms, ccache %.0f ms obtaining (walk, 8 tokens)",
           halide_ms, w.obtain_ms);
}

typedef struct asker {
  pthread_rwlock_t *gate;
  int rc;
} asker;

static void *ask(void *arg) {
  asker *a = arg;
  pthread_rwlock_rdlock(a->gate);
  pthread_rwlock_unlock(a->gate);
  hj_spec s = hj_spec_default(HJ_SOFTMAX);
  ccache_program *p = NULL;
  char err[640];
  a->rc = hj_jit_program(&jit, &s, &p, err, sizeof err);
  ccache_program_release(jit.cache, p);
  return NULL;
}

static void four_threads_row(bench_report *rep) {
  open_jit(NULL, 0);
  pthread_rwlock_t gate;
  pthread_rwlock_init(&gate, NULL);
  pthread_rwlock_wrlock(&gate);
  asker a[4];
  pthread_t t[4];
  for (int i = 0; i < 4; i++) {
    a[i] = (asker){&gate, -1};
    BENCH_CHECK(pthread_create(&t[i], NULL, ask, &a[i]) == 0, "pthread_create");
  }
  pthread_rwlock_unlock(&gate);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  pthread_rwlock_destroy(&gate);
  for (int i = 0; i < 4; i++) BENCH_CHECK(a[i].rc == CCACHE_OK, "thread %d: %d", i, a[i].rc);
  ccache_stats st = stats();
  hj_jit_close(&jit);
  double c = (double)st.program_compiles;
  bench_row *row = bench_add(rep, "halide_jit 4 threads building one pipeline at once: compiles", c,
                             "compiles", 1, "pipelines", (bench_stat){c, c, c, 1},
                             "compiles / pipelines", BENCH_RATIO_LE, 1.0);
  snprintf(row->note, sizeof row->note, "exact count; %" PRIu64 " of the 3 others waited",
           st.waits);
}

/* ------------------------------------------------ the binary, with tiers */

typedef struct run {
  uint64_t compiles, tier_hits;
  double obtain_ms, compile_ms, load_us;
  char checksum[40];
} run;

static void hj(run *r, const char *layers, const char *flag, const char *value) {
  char *argv[] = {HALIDE_JIT_EXE, "--json",      "--layers",         (char *)layers,
                  (char *)flag,   (char *)value, "--trust-unsigned", NULL};
  kj_child c;
  int st = kj_run(&c, argv);
  BENCH_CHECK(st == 0, "halide_jit %s %s exited %d: %s", flag, value, st, c.err);
  BENCH_CHECK(kj_json_u64(c.out, "compiles", &r->compiles) == 0 &&
                  kj_json_u64(c.out, "tier_hits", &r->tier_hits) == 0 &&
                  kj_json_num(c.out, "obtain_ms", &r->obtain_ms) == 0 &&
                  kj_json_str(c.out, "checksum", r->checksum, sizeof r->checksum) == 0,
              "unexpected output: %s", c.out);
  if (kj_json_num(c.out, "compile_ms_median", &r->compile_ms) != 0) r->compile_ms = NAN;
  if (kj_json_num(c.out, "tier_load_us_median", &r->load_us) != 0) r->load_us = NAN;
  kj_child_free(&c);
}

typedef struct series {
  double cold_ms[MAX_REPS], warm_ms[MAX_REPS], restart[MAX_REPS];
  double compile_us[MAX_REPS], load_us[MAX_REPS], load_ratio[MAX_REPS];
  int n;
} series;

static void add_pair(series *s, const run *cold, const run *warm) {
  BENCH_CHECK(cold->compiles == HJ_N_KINDS && cold->tier_hits == 0, "cold: %" PRIu64 " compiles",
              cold->compiles);
  BENCH_CHECK(warm->compiles == 0 && warm->tier_hits == HJ_N_KINDS,
              "warm: %" PRIu64 " compiles, %" PRIu64 " tier hits", warm->compiles, warm->tier_hits);
  BENCH_CHECK(strcmp(cold->checksum, warm->checksum) == 0, "checksums differ");
  int i = s->n++;
  s->cold_ms[i] = cold->obtain_ms;
  s->warm_ms[i] = warm->obtain_ms;
  s->restart[i] = cold->obtain_ms / warm->obtain_ms;
  s->compile_us[i] = cold->compile_ms * 1e3;
  s->load_us[i] = warm->load_us;
  s->load_ratio[i] = s->compile_us[i] / warm->load_us;
}

static void restart_row(bench_report *rep, const series *s, const char *tier, const char *layers,
                        bench_target_kind kind) {
  char fig[96];
  snprintf(fig, sizeof fig, "halide_jit warm restart, %s: obtaining %s x 5 call sites' pipelines",
           tier, layers);
  bench_row *row = bench_add(rep, fig, bench_stats(s->warm_ms, s->n).med, "ms",
                             bench_stats(s->cold_ms, s->n).med, "cold run, empty tier",
                             bench_stats(s->restart, s->n), "cold / warm", kind, 100.0);
  snprintf(row->note, sizeof row->note,
           "obtain_ms of a halide_jit process; warm: 0 compiles, 5 tier hits, same checksum");
}

static void load_row(bench_report *rep, const series *s, const char *tier, double target) {
  char fig[96];
  snprintf(fig, sizeof fig, "halide_jit %s fetch + load of a pipeline vs its compile", tier);
  bench_row *row = bench_add(rep, fig, bench_stats(s->load_us, s->n).med, "us",
                             bench_stats(s->compile_us, s->n).med, "compile_to_object + cc + load",
                             bench_stats(s->load_ratio, s->n), "compile / (fetch + load)",
                             BENCH_RATIO_GE, target);
  snprintf(row->note, sizeof row->note,
           "per rep: median compile of the cold run / median tier-served get of the warm run");
}

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

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(argc, argv, &o,
              "halide_jit: ccache hit vs Halide's compile_jit per call site, compiles, tiers",
              false);
  bench_report rep;
  bench_report_init(&rep, "bench_halide_jit",
                    "what does ccache save a runtime building Halide pipelines at its call sites?");
  hj_runtime_init();
  int reps = o.quick ? 1 : 5;
  const char *layers = o.quick ? "2" : "30";

  per_pipeline_rows(&rep, &o, o.quick ? 1 : 3, o.quick ? 1000 : 20000);
  call_site_rows(&rep, o.quick ? 2 : HJ_LAYERS);
  four_threads_row(&rep);

  series disk = {0};
  for (int r = 0; r < reps; r++) {
    char dir[256];
    BENCH_CHECK(kj_scratch(dir, sizeof dir, "bench-hj") == 0, "scratch directory");
    run cold, warm;
    hj(&cold, layers, "--cache-dir", dir);
    hj(&warm, layers, "--cache-dir", dir);
    add_pair(&disk, &cold, &warm);
    kj_scratch_remove(dir);
  }
  restart_row(&rep, &disk, "disk tier", layers, BENCH_RATIO_GE);
  load_row(&rep, &disk, "disk tier", 100.0);
  points(&o, "directory, halide_jit", bench_stats(disk.compile_us, disk.n).med,
         bench_stats(disk.load_us, disk.n).med);

  char why[160];
  if (redis_available(why, sizeof why) == 0) {
    series redis = {0};
    for (int r = 0; r < reps; r++) {
      kj_redis srv;
      BENCH_CHECK(kj_redis_start(&srv, KJ_REDIS_SERVER) == 0, "redis-server did not start");
      run cold, warm;
      hj(&cold, layers, "--redis", srv.addr);
      hj(&warm, layers, "--redis", srv.addr);
      add_pair(&redis, &cold, &warm);
      kj_redis_stop(&srv);
      kj_redis_free(&srv);
    }
    load_row(&rep, &redis, "Redis tier (no disk tier)", 50.0);
    points(&o, "Redis, halide_jit", bench_stats(redis.compile_us, redis.n).med,
           bench_stats(redis.load_us, redis.n).med);
    restart_row(&rep, &redis, "Redis tier (no disk tier)", layers, BENCH_REPORT);
  } else {
    bench_note(&rep, "%s", why);
  }
  bench_note(&rep,
             "%d rep(s) of a cold and a warm halide_jit run (--layers %s, 32 tokens), each on a "
             "fresh directory / redis-server; Halide %s",
             reps, layers, HJ_HALIDE_VERSION);
  return bench_report_print(&rep, &o);
}
