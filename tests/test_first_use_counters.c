/*
 * test_first_use_counters.c - what a runtime author meets first (issue 29):
 * counters with one meaning each (one miss per miss in the README's
 * fetch-then-get-or-compile pattern, compile time per level, the one-line
 * ccache_stats_format()), the key helpers (hex, equality, ccache_fp_key's
 * documented stream), and the signal of a bound that thrashes
 * (misses_evicted).  Exact counts throughout.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "support.h"

#define U CCACHE_UNBOUNDED

/* -------------------------------------------------- counters that mean one thing */

static int simple_compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                          ccache_program **program_out) {
  (void)ud;
  *program_out = t_intern(c, key.hi + 1000, (int)key.hi, 1);
  *closure_out = t_closure((int)key.hi);
  return 0;
}

/* The README's pattern: fetch, and on a miss get-or-compile. */
static int readme_lookup(ccache *c, uint64_t k) {
  ccache_lease l;
  int rc = ccache_fetch(c, K(k), &l);
  if (rc == CCACHE_MISS) rc = ccache_get_or_compile(c, K(k), simple_compile, NULL, &l);
  if (rc == CCACHE_OK) ccache_lease_release(c, &l);
  return rc;
}

static void readme_pattern_counts_one_miss_per_miss(void **state) {
  (void)state;
  t_ctx tc = {0};
  ccache *c = t_open(&tc, U, U, U);
  for (int round = 0; round < 3; round++)
    for (uint64_t k = 0; k < 10; k++) assert_int_equal(readme_lookup(c, k), CCACHE_OK);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.misses, 10);
  assert_int_equal(s.hits, 20);
  assert_int_equal(s.compiles, 10);
  /* get-or-compile alone still counts its lookup. */
  ccache_lease l;
  assert_int_equal(ccache_get_or_compile(c, K(0), simple_compile, NULL, &l), CCACHE_OK);
  ccache_lease_release(c, &l);
  assert_int_equal(ccache_get_or_compile(c, K(50), simple_compile, NULL, &l), CCACHE_OK);
  ccache_lease_release(c, &l);
  s = t_stats(c);
  assert_int_equal(s.hits, 21);
  assert_int_equal(s.misses, 11);
  t_close(c);
}

/* compile_ns is the closure level's own time; program_compile_ns the
 * program level's.  The program compile works (spins) for 20 ms of the
 * monotonic clock; the closure compile around it does next to nothing. */
static int slow_program(void *ud, ccache *c, ccache_key pkey, void **native_out,
                        uint64_t *cost_out) {
  (void)ud, (void)c;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec) < 20000000ll);
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return 0;
}

static int closure_over_slow(void *ud, ccache *c, ccache_key key, void **closure_out,
                             ccache_program **program_out) {
  (void)ud;
  if (ccache_program_get_or_compile(c, PK(1), slow_program, NULL, program_out) != CCACHE_OK)
    return -1;
  *closure_out = t_closure((int)key.hi);
  return 0;
}

static void compile_time_counts_once_per_level(void **state) {
  (void)state;
  t_ctx tc = {0};
  ccache *c = t_open(&tc, U, U, U);
  ccache_lease l;
  assert_int_equal(ccache_get_or_compile(c, K(1), closure_over_slow, NULL, &l), CCACHE_OK);
  ccache_lease_release(c, &l);
  ccache_stats s = t_stats(c);
  assert_true(s.program_compile_ns >= 20000000u);
  /* Before, the closure level counted the nested 20 ms too. */
  assert_true(s.compile_ns < 10000000u);
  t_close(c);
}

static void stats_format_is_one_line(void **state) {
  (void)state;
  t_ctx tc = {0};
  ccache *c = t_open(&tc, U, U, U);
  assert_int_equal(readme_lookup(c, 1), CCACHE_OK);
  assert_int_equal(readme_lookup(c, 1), CCACHE_OK);
  ccache_stats s;
  ccache_stats_init(&s);
  assert_int_equal(ccache_stats_get(c, &s), CCACHE_OK);
  char line[2048];
  int n = ccache_stats_format(&s, line, sizeof line);
  assert_true(n > 0 && (size_t)n < sizeof line);
  assert_int_equal(strlen(line), (size_t)n);
  assert_null(strchr(line, '\n'));
  assert_true(strncmp(line, "hits=1 misses=1 inserts=1 ", 26) == 0);
  assert_non_null(strstr(line, " compiles=1 "));
  assert_non_null(strstr(line, " handles_out=0 "));
  assert_non_null(strstr(line, " misses_evicted=0 "));
  assert_non_null(strstr(line, " tier_unpublished=0 "));
  assert_true(strstr(line, " heavy_barriers=0") == line + n - strlen(" heavy_barriers=0"));
  /* Truncated like snprintf; the length is the whole line's. */
  char small[10];
  assert_int_equal(ccache_stats_format(&s, small, sizeof small), n);
  assert_string_equal(small, "hits=1 mi");
  assert_int_equal(ccache_stats_format(&s, NULL, 0), n);
  /* An older caller's shorter struct: only its fields. */
  s.size = (uint32_t)(offsetof(ccache_stats, misses) + sizeof s.misses);
  assert_int_equal(ccache_stats_format(&s, line, sizeof line), (int)strlen("hits=1 misses=1"));
  assert_string_equal(line, "hits=1 misses=1");
  s.size = 0;
  assert_int_equal(ccache_stats_format(&s, line, sizeof line), CCACHE_EINVAL);
  t_close(c);
}

/* -------------------------------------------------------------- keys */

static void key_helpers(void **state) {
  (void)state;
  ccache_key k = {0x0123456789abcdefull, 0xfedcba9876543210ull};
  char hex[CCACHE_KEY_HEX_LEN];
  assert_ptr_equal(ccache_key_hex(k, hex), hex);
  assert_string_equal(hex, "fedcba98765432100123456789abcdef");
  assert_null(ccache_key_hex(k, NULL));
  ccache_key same = k, other = {k.lo, k.hi ^ 1};
  assert_int_equal(ccache_key_eq(k, same), 1);
  assert_int_equal(ccache_key_eq(k, other), 0);
  /* ccache_fp_key: tag 0x07, u64 lo, u64 hi, exactly as documented. */
  ccache_fp fp;
  ccache_fp_init(&fp);
  assert_int_equal(ccache_fp_key(&fp, k), CCACHE_OK);
  ccache_key got;
  assert_int_equal(ccache_fp_final(&fp, &got), CCACHE_OK);
  unsigned char stream[9 + 4 + 17];
  memcpy(stream, "ccache-fp", 9);
  uint32_t v = CCACHE_FP_FORMAT_VERSION;
  for (int i = 0; i < 4; i++) stream[9 + i] = (unsigned char)(v >> (8 * i));
  stream[13] = 0x07;
  for (int i = 0; i < 8; i++) {
    stream[14 + i] = (unsigned char)(k.lo >> (8 * i));
    stream[22 + i] = (unsigned char)(k.hi >> (8 * i));
  }
  XXH128_hash_t h = XXH3_128bits(stream, sizeof stream);
  assert_true(got.lo == h.low64 && got.hi == h.high64);
  /* It differs from the two halves appended as integers. */
  ccache_fp_init(&fp);
  ccache_fp_u64(&fp, k.lo);
  ccache_fp_u64(&fp, k.hi);
  ccache_key as_ints;
  ccache_fp_final(&fp, &as_ints);
  assert_int_equal(ccache_key_eq(got, as_ints), 0);
  assert_int_equal(ccache_fp_key(NULL, k), CCACHE_EINVAL);
}

/* ----------------------------------------------- a bound that thrashes */

static void walk(ccache *c, int sites, int rounds) {
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < sites; k++) assert_int_equal(readme_lookup(c, (uint64_t)k), CCACHE_OK);
}

static void thrashing_bound_is_flagged(void **state) {
  (void)state;
  t_ctx tc = {0};
  /* 24 call sites walked in order through max_items 16: FIFO evicts each
   * site before it comes round again, so after the first walk every miss is
   * on a key the bound just evicted. */
  ccache *c = t_open(&tc, 16, U, U);
  walk(c, 24, 10);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.hits, 0);
  assert_int_equal(s.misses, 240);
  assert_int_equal(s.misses_evicted, 216);
  assert_int_equal(s.evicted_capacity, 240 - 16);
  t_close(c);
  /* Sized to the working set: no thrash, nothing flagged. */
  c = t_open(&tc, 32, U, U);
  walk(c, 24, 10);
  s = t_stats(c);
  assert_int_equal(s.hits, 216);
  assert_int_equal(s.misses, 24);
  assert_int_equal(s.misses_evicted, 0);
  t_close(c);
  /* A removed key is no eviction by a bound: not flagged. */
  c = t_open(&tc, U, U, U);
  walk(c, 4, 1);
  for (uint64_t k = 0; k < 4; k++) assert_int_equal(ccache_remove(c, K(k)), CCACHE_OK);
  walk(c, 4, 1);
  s = t_stats(c);
  assert_int_equal(s.misses, 8);
  assert_int_equal(s.misses_evicted, 0);
  t_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(readme_pattern_counts_one_miss_per_miss),
      cmocka_unit_test(compile_time_counts_once_per_level),
      cmocka_unit_test(stats_format_is_one_line),
      cmocka_unit_test(key_helpers),
      cmocka_unit_test(thrashing_bound_is_flagged),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
