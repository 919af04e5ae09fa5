/* test_hj_procs.c: halide_jit as processes - its command line, warm
 * restarts from the directory tier, processes sharing a directory or a
 * Redis (a fleet compiles each pipeline once), foreign runtime tags.
 * Runs are small (2 layers, 8 tokens: 10 call sites, 5 pipelines). */
#include "kj_test.h"

#include <inttypes.h>
#include <stdlib.h>

#include "harness.h"

#ifndef HALIDE_JIT_EXE
#error "HALIDE_JIT_EXE: the path of the halide_jit binary (set by CMake)"
#endif
#define EXE HALIDE_JIT_EXE
#define P   5 /* distinct pipelines */

typedef struct out {
  uint64_t compiles, tier_hits, tier_misses, tier_writes, tier_errors, tier_corrupt, mismatches;
  char checksum[40];
} out;

static void parse(const kj_child *c, out *r) {
  if (c->status != 0) fprintf(stderr, "halide_jit exited %d:\n%s%s", c->status, c->out, c->err);
  assert_int_equal(c->status, 0);
  struct {
    const char *name;
    uint64_t *v;
  } f[] = {{"compiles", &r->compiles},       {"tier_hits", &r->tier_hits},
           {"tier_misses", &r->tier_misses}, {"tier_writes", &r->tier_writes},
           {"tier_errors", &r->tier_errors}, {"tier_corrupt", &r->tier_corrupt},
           {"mismatches", &r->mismatches}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    if (kj_json_u64(c->out, f[i].name, f[i].v) != 0)
      fprintf(stderr, "no %s: %s\n", f[i].name, c->out);
    assert_int_equal(kj_json_u64(c->out, f[i].name, f[i].v), 0);
  }
  assert_int_equal(kj_json_str(c->out, "checksum", r->checksum, sizeof r->checksum), 0);
  assert_int_equal(r->mismatches, 0);
}

static void argv_for(char **argv, const char *a1, const char *a2, const char *a3, const char *a4) {
  /* Unsigned by name (redis_without_keys_refused tests the refusal). */
  const char *v[] = {EXE, "--json", "--layers", "2", "--tokens", "8", "--trust-unsigned",
                     a1,  a2,       a3,         a4,  NULL};
  size_t n = 0;
  for (size_t i = 0; i < sizeof v / sizeof v[0] && v[i]; i++) argv[n++] = (char *)v[i];
  argv[n] = NULL;
}

static void run(out *r, const char *a1, const char *a2, const char *a3, const char *a4) {
  char *argv[12];
  argv_for(argv, a1, a2, a3, a4);
  kj_child c;
  kj_run(&c, argv);
  parse(&c, r);
  kj_child_free(&c);
}

static void assert_cold(const out *r, const char *ref, uint64_t writes) {
  assert_int_equal(r->compiles, P);
  assert_int_equal(r->tier_hits, 0);
  assert_int_equal(r->tier_misses, P);
  assert_int_equal(r->tier_writes, writes);
  assert_int_equal(r->tier_errors, 0);
  assert_int_equal(r->tier_corrupt, 0);
  if (ref) assert_string_equal(r->checksum, ref);
}

static void assert_warm(const out *r, const char *ref) {
  assert_int_equal(r->compiles, 0);
  assert_int_equal(r->tier_hits, P);
  assert_int_equal(r->tier_misses, 0);
  assert_int_equal(r->tier_writes, 0);
  assert_int_equal(r->tier_errors, 0);
  assert_int_equal(r->tier_corrupt, 0);
  assert_string_equal(r->checksum, ref);
}

typedef struct fixture {
  char dir[256];
  int has_redis;
  kj_redis redis;
} fixture;

static int dir_setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  if (!fx || kj_scratch(fx->dir, sizeof fx->dir, "hjp") != 0) {
    free(fx);
    return -1;
  }
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  if (!fx) return 0;
  if (fx->has_redis) {
    kj_redis_stop(&fx->redis);
    kj_redis_free(&fx->redis);
  }
  kj_scratch_remove(fx->dir);
  free(fx);
  return 0;
}

static const char *sub(const fixture *fx, const char *name, char *path, size_t n) {
  snprintf(path, n, "%s/%s", fx->dir, name);
  return path;
}

static void bad_flags_exit_2(void **state) {
  (void)state;
  char *cases[][6] = {
      {EXE, "--bogus", NULL},         {EXE, "--layers", NULL},
      {EXE, "--layers", "0", NULL},   {EXE, "--layers", "31", NULL},
      {EXE, "--tokens", "0", NULL},   {EXE, "--tokens", "1025", NULL},
      {EXE, "--threads", "65", NULL}, {EXE, "--threads", "x", NULL},
      {EXE, "--repeat", "0", NULL},   {EXE, "--max-items", "0", NULL},
      {EXE, "--seed", "-1", NULL},    {EXE, "--cache-dir", "", NULL},
      {EXE, "--redis", "host", NULL}, {EXE, "--redis", "h:0", NULL},
      {EXE, "--runtime-tag", NULL},   {EXE, "json", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kj_child c;
    int status = kj_run(&c, cases[i]);
    size_t lines = 0;
    for (const char *p = c.err; *p; p++) lines += *p == '\n';
    if (status != 2 || c.out_len != 0 || lines != 1)
      fprintf(stderr, "%s %s: exit %d, stdout '%s', stderr '%s'\n", cases[i][1],
              cases[i][2] ? cases[i][2] : "", status, c.out, c.err);
    assert_int_equal(status, 2);
    assert_int_equal(c.out_len, 0);
    assert_int_equal(lines, 1);
    assert_true(strncmp(c.err, "halide_jit: ", 12) == 0);
    kj_child_free(&c);
  }
  char *help[] = {EXE, "--help", NULL};
  kj_child c;
  assert_int_equal(kj_run(&c, help), 0);
  assert_non_null(strstr(c.out, "usage: halide_jit"));
  kj_child_free(&c);
}

/* A second process on the same directory compiles nothing and computes
 * the same outputs as one with no tier at all. */
static void warm_restart_compiles_nothing(void **state) {
  char dir[300];
  sub(*state, "cache", dir, sizeof dir);
  out none, cold, warm;
  run(&none, NULL, NULL, NULL, NULL);
  assert_int_equal(none.compiles, P);
  assert_int_equal(none.tier_misses, 0);
  run(&cold, "--cache-dir", dir, NULL, NULL);
  assert_cold(&cold, none.checksum, P);
  run(&warm, "--cache-dir", dir, NULL, NULL);
  assert_warm(&warm, none.checksum);
}

/* 4 processes released together on a directory that does not exist yet:
 * each pipeline compiled by exactly one of them. */
static void four_processes_compile_once(void **state) {
  char cache[300], *argv[12];
  sub(*state, "cache", cache, sizeof cache);
  argv_for(argv, "--cache-dir", cache, NULL, NULL);
  kj_child c[4];
  assert_int_equal(kj_run_together(c, 4, argv), 0);
  uint64_t compiles = 0;
  char sum[40] = "";
  for (int i = 0; i < 4; i++) {
    out r;
    parse(&c[i], &r);
    fprintf(stderr, "process %d: %" PRIu64 " compiles, %" PRIu64 " tier hits\n", i, r.compiles,
            r.tier_hits);
    assert_int_equal(r.compiles + r.tier_hits, P);
    assert_int_equal(r.tier_errors, 0);
    assert_int_equal(r.tier_corrupt, 0);
    if (i == 0) strcpy(sum, r.checksum);
    assert_string_equal(r.checksum, sum);
    compiles += r.compiles;
    kj_child_free(&c[i]);
  }
  assert_int_equal(compiles, P);
}

/* Another runtime tag never loads this one's pipelines, nor overwrites them. */
static void foreign_runtime_tag_compiles_again(void **state) {
  char dir[300];
  sub(*state, "cache", dir, sizeof dir);
  out r, ref;
  run(&ref, "--cache-dir", dir, NULL, NULL);
  assert_cold(&ref, NULL, P);
  run(&r, "--cache-dir", dir, "--runtime-tag", "another-runtime");
  assert_cold(&r, ref.checksum, P);
  run(&r, "--cache-dir", dir, NULL, NULL);
  assert_warm(&r, ref.checksum);
  run(&r, "--cache-dir", dir, "--runtime-tag", "another-runtime");
  assert_warm(&r, ref.checksum);
}

#ifdef KJ_REDIS_SERVER

static int redis_setup(void **state) {
  if (dir_setup(state) != 0) return -1;
  fixture *fx = *state;
  if (kj_redis_start(&fx->redis, KJ_REDIS_SERVER) != 0) {
    teardown(state);
    return -1;
  }
  fx->has_redis = 1;
  return 0;
}

/* A fleet: 4 processes (4 machines, no disk tier) released together on one
 * Redis compile each pipeline once between them; a fifth compiles nothing. */
static void redis_fleet_compiles_once(void **state) {
  kj_redis *srv = &((fixture *)*state)->redis;
  char *argv[12];
  argv_for(argv, "--redis", srv->addr, NULL, NULL);
  kj_child c[4];
  assert_int_equal(kj_run_together(c, 4, argv), 0);
  uint64_t compiles = 0;
  char sum[40] = "";
  for (int i = 0; i < 4; i++) {
    out r;
    parse(&c[i], &r);
    fprintf(stderr, "process %d: %" PRIu64 " compiles, %" PRIu64 " tier hits\n", i, r.compiles,
            r.tier_hits);
    assert_int_equal(r.compiles + r.tier_hits, P);
    assert_int_equal(r.tier_errors, 0);
    if (i == 0) strcpy(sum, r.checksum);
    assert_string_equal(r.checksum, sum);
    compiles += r.compiles;
    kj_child_free(&c[i]);
  }
  assert_int_equal(compiles, P);
  out fifth;
  run(&fifth, "--redis", srv->addr, NULL, NULL);
  assert_warm(&fifth, sum);
}

/* Disk above Redis: a machine with an empty directory loads from Redis and
 * fills its directory, which then serves it alone. */
static void redis_fills_disk_tier_above(void **state) {
  kj_redis *srv = &((fixture *)*state)->redis;
  char one[300], two[300];
  sub(*state, "one", one, sizeof one);
  sub(*state, "two", two, sizeof two);
  out r, ref;
  run(&ref, "--cache-dir", one, "--redis", srv->addr);
  assert_cold(&ref, NULL, 2 * P);
  run(&r, "--cache-dir", two, "--redis", srv->addr);
  assert_int_equal(r.compiles, 0);
  assert_int_equal(r.tier_hits, P);
  assert_int_equal(r.tier_writes, P); /* the fills of the directory above */
  assert_int_equal(r.tier_errors, 0);
  assert_string_equal(r.checksum, ref.checksum);
  run(&r, "--cache-dir", two, NULL, NULL);
  assert_warm(&r, ref.checksum);
}

/* Safe by default (issue 35): --redis with neither keys nor --trust-unsigned
 * is refused before anything runs: exit 2, one line naming the ways out. */
static void redis_without_keys_refused(void **state) {
  (void)state;
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", kj_free_port());
  char *plain[] = {EXE, "--layers", "1", "--tokens", "1", "--redis", addr, NULL};
  kj_child c;
  int status = kj_run(&c, plain);
  if (status != 2) fprintf(stderr, "exit %d, stdout '%s', stderr '%s'\n", status, c.out, c.err);
  assert_int_equal(status, 2);
  assert_int_equal(c.out_len, 0);
  assert_true(strncmp(c.err, "halide_jit: --redis without keys", 32) == 0);
  assert_non_null(strstr(c.err, "--trust-unsigned"));
  kj_child_free(&c);
}

#define REDIS_TESTS                                                                      \
  cmocka_unit_test(redis_without_keys_refused),                                          \
      cmocka_unit_test_setup_teardown(redis_fleet_compiles_once, redis_setup, teardown), \
      cmocka_unit_test_setup_teardown(redis_fills_disk_tier_above, redis_setup, teardown),
#else
#define REDIS_TESTS
#endif

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bad_flags_exit_2),
      cmocka_unit_test_setup_teardown(warm_restart_compiles_nothing, dir_setup, teardown),
      cmocka_unit_test_setup_teardown(four_processes_compile_once, dir_setup, teardown),
      cmocka_unit_test_setup_teardown(foreign_runtime_tag_compiles_again, dir_setup, teardown),
      REDIS_TESTS};
  return KJ_RUN("halide_jit_procs", tests, argc, argv);
}
