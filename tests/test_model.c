/*
 * test_model.c - model-based random test: seeded random sequences of every
 * single-threaded call, run on a real cache and on the reference model of
 * tests/model*.c, comparing every observable after every step and running
 * ccache__check() after every step.
 *
 * SEEDS x STEPS = 2,000,000 steps at full scale (divided by
 * CCACHE_TEST_SCALE).  A failing seed is shrunk to the shortest failing
 * prefix (binary search on the step count), whose calls are printed; it can
 * be replayed with
 *     CCACHE_MODEL_SEED=<seed> CCACHE_MODEL_STEPS=<n> [CCACHE_MODEL_TRACE=1] test_model
 */
#include <stdio.h>
#include <stdlib.h>

#include "model.h"
#include "support.h"

#define STEPS     4000
#define SEEDS     (500 / CCACHE_TEST_SCALE > 0 ? 500 / CCACHE_TEST_SCALE : 1)
#define SEED_BASE 0xC0FFEE0000ull

static int run_seed(uint64_t seed, size_t steps, int trace, m_result *r) {
  m_src src;
  m_src_seed(&src, seed);
  m_opts o = {.max_steps = steps, .check_every = 1, .trace = trace};
  return m_run(&src, &o, r);
}

/* The shortest prefix of the seed's sequence that still fails. */
static size_t shrink(uint64_t seed, size_t failing) {
  size_t lo = 1, hi = failing; /* hi fails */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    m_result r;
    if (run_seed(seed, mid, 0, &r) != 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return hi;
}

static void report_failure(uint64_t seed, const m_result *r) {
  size_t n = r->fail_step > r->steps ? r->steps : r->fail_step;
  if (n == 0) n = 1;
  size_t min = shrink(seed, n);
  fprintf(stderr, "model mismatch, seed 0x%llx: %s\n", (unsigned long long)seed, r->msg);
  fprintf(stderr, "shortest failing prefix: %zu steps; the calls:\n", min);
  m_result r2;
  run_seed(seed, min, 1, &r2);
  fprintf(stderr,
          "=> %s\nreplay: CCACHE_MODEL_SEED=0x%llx CCACHE_MODEL_STEPS=%zu "
          "CCACHE_MODEL_TRACE=1 ./test_model\n",
          r2.msg[0] ? r2.msg : "(passed on replay?)", (unsigned long long)seed, min);
}

static void model_random_sequences(void **state) {
  (void)state;
  const char *env_seed = getenv("CCACHE_MODEL_SEED");
  if (env_seed) { /* replay one seed */
    uint64_t seed = strtoull(env_seed, NULL, 0);
    const char *env_steps = getenv("CCACHE_MODEL_STEPS");
    const char *env_trace = getenv("CCACHE_MODEL_TRACE");
    size_t steps = env_steps ? (size_t)strtoull(env_steps, NULL, 0) : STEPS;
    m_result r;
    int rc = run_seed(seed, steps, env_trace && *env_trace == '1', &r);
    if (rc != 0) report_failure(seed, &r);
    assert_int_equal(rc, 0);
    return;
  }
  size_t steps = 0, calls = 0, borrowed = 0, deadlocks = 0;
  ccache_stats sum = {0};
  for (int i = 0; i < SEEDS; i++) {
    uint64_t seed = SEED_BASE + (uint64_t)i;
    m_result r;
    if (run_seed(seed, STEPS, 0, &r) != 0) {
      report_failure(seed, &r);
      fail_msg("seed 0x%llx: %s", (unsigned long long)seed, r.msg);
    }
    steps += r.steps;
    calls += r.calls;
    borrowed += r.borrowed;
    deadlocks += r.deadlocks;
#define SUM(f) sum.f += r.stats.f
    SUM(hits);
    SUM(misses);
    SUM(inserts);
    SUM(replaced);
    SUM(evicted_capacity);
    SUM(evicted_ttl);
    SUM(evicted_cost);
    SUM(removed);
    SUM(cleared);
    SUM(compiles);
    SUM(program_compiles);
    SUM(compile_failures);
    SUM(program_compile_failures);
    SUM(program_hits);
    SUM(program_misses);
#undef SUM
  }
  printf(
      "model: %d seeds, %zu steps, %zu cache calls (nested included), "
      "ccache__check after every step\n",
      SEEDS, steps, calls);
  printf(
      "model: hits %llu misses %llu inserts %llu replaced %llu (closure reused %zu) "
      "evicted capacity %llu ttl %llu cost %llu removed %llu cleared %llu compiles %llu "
      "program compiles %llu failures %llu EDEADLK %zu\n",
      (unsigned long long)sum.hits, (unsigned long long)sum.misses, (unsigned long long)sum.inserts,
      (unsigned long long)sum.replaced, borrowed, (unsigned long long)sum.evicted_capacity,
      (unsigned long long)sum.evicted_ttl, (unsigned long long)sum.evicted_cost,
      (unsigned long long)sum.removed, (unsigned long long)sum.cleared,
      (unsigned long long)sum.compiles, (unsigned long long)sum.program_compiles,
      (unsigned long long)(sum.compile_failures + sum.program_compile_failures), deadlocks);
  assert_true(steps >= (size_t)SEEDS * STEPS / 2);
}

/* The byte-string source (the fuzzer's) on a few fixed strings. */
static void model_byte_sources(void **state) {
  (void)state;
  uint8_t buf[4096];
  for (int round = 0; round < 32; round++) {
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 131u + (unsigned)round * 7u);
    m_src src;
    m_src_bytes(&src, buf, sizeof buf >> (round % 4));
    m_opts o = {.max_steps = 100000, .check_every = 1, .trace = 0};
    m_result r;
    int rc = m_run(&src, &o, &r);
    if (rc != 0) fprintf(stderr, "byte source %d: %s\n", round, r.msg);
    assert_int_equal(rc, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(model_byte_sources),
      cmocka_unit_test(model_random_sequences),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
