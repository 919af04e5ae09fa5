/* test_stress.c - a deterministic-per-thread multi-threaded stress test
 * (scaled down for TSan and valgrind by CCACHE_TEST_SCALE): random put,
 * fetch, remove, get-or-compile at both levels, set_limits, clear, sweep and
 * clock steps over a small key space, with programs shared between closures
 * and leases held across other calls.  At the end every closure and native
 * program made is destroyed exactly once, and hits + misses equals the
 * lookups the threads made. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "support.h"

#define NT    4
#define KEYS  48
#define PKEYS 6
#define HELD  4
#define OPS   (200000 / CCACHE_TEST_SCALE)

static _Atomic uint64_t made_closures, made_natives, lookups, check_failures;

typedef struct worker {
  ccache *c;
  t_ctx *t;
  uint64_t rng;
  ccache_lease held[HELD];
  ccache_program *handle;
  /* The key of this thread's last fetch miss since its last get-or-compile
   * (-1: none): a get-or-compile of it counts no lookup of its own. */
  int64_t fetch_missed;
} worker;

static uint32_t next_rand(worker *w) { /* xorshift64*: test-local PRNG */
  w->rng ^= w->rng >> 12;
  w->rng ^= w->rng << 25;
  w->rng ^= w->rng >> 27;
  return (uint32_t)((w->rng * 0x2545F4914F6CDD1Dull) >> 32);
}

static int native_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                          uint64_t *cost_out) {
  worker *w = ud;
  (void)c;
  if (next_rand(w) % 16 == 0) return 1; /* some compiles fail */
  atomic_fetch_add(&made_natives, 1);
  *native_out = t_native((int)pkey.lo);
  *cost_out = 10 + pkey.lo * 7;
  return 0;
}

static int closure_compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                           ccache_program **program_out) {
  worker *w = ud;
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(c, PK(next_rand(w) % PKEYS), native_compile, w, &p);
  if (rc != CCACHE_OK) return 1;
  if (next_rand(w) % 32 == 0) { /* fail after making a handle: clean up */
    ccache_program_release(c, p);
    return 2;
  }
  atomic_fetch_add(&made_closures, 1);
  *closure_out = t_closure((int)key.hi);
  *program_out = p;
  return 0;
}

static ccache_lease *free_slot(worker *w) {
  for (int i = 0; i < HELD; i++)
    if (!w->held[i].internal_[0]) return &w->held[i];
  ccache_lease *l = &w->held[next_rand(w) % HELD];
  ccache_lease_release(w->c, l);
  return l;
}

static void op_put(worker *w) {
  ccache_program *p = NULL;
  if (next_rand(w) % 2) {
    atomic_fetch_add(&made_natives, 1);
    uint64_t pk = next_rand(w) % PKEYS;
    if (ccache_program_intern(w->c, PK(pk), t_native((int)pk), 10 + pk * 7, &p) != CCACHE_OK)
      return;
  } else if (ccache_program_get_or_compile(w->c, PK(next_rand(w) % PKEYS), native_compile, w, &p) !=
             CCACHE_OK) {
    return;
  }
  atomic_fetch_add(&made_closures, 1);
  uint64_t k = next_rand(w) % KEYS;
  ccache_put(w->c, K(k), t_closure((int)k), p);
  if (w->handle) ccache_program_release(w->c, w->handle);
  w->handle = p; /* hold one handle across other calls */
}

static void op_limits(worker *w) {
  uint32_t r = next_rand(w);
  uint64_t items = r % 3 ? 4 + r % 40 : CCACHE_UNBOUNDED;
  uint64_t ttl = (r >> 8) % 3 ? CCACHE_UNBOUNDED : 5 + (r >> 10) % 50;
  uint64_t cost = (r >> 16) % 3 ? CCACHE_UNBOUNDED : 40 + (r >> 18) % 200;
  ccache_set_limits(w->c, items, ttl, cost);
}

static void step(worker *w) {
  uint32_t op = next_rand(w) % 100;
  uint64_t k = next_rand(w) % KEYS;
  if (op < 25) {
    op_put(w);
  } else if (op < 55) {
    atomic_fetch_add(&lookups, 1);
    if (ccache_fetch(w->c, K(k), free_slot(w)) == CCACHE_MISS) w->fetch_missed = (int64_t)k;
  } else if (op < 75) {
    if (w->fetch_missed != (int64_t)k) atomic_fetch_add(&lookups, 1);
    w->fetch_missed = -1;
    ccache_get_or_compile(w->c, K(k), closure_compile, w, free_slot(w));
  } else if (op < 83) {
    ccache_remove(w->c, K(k));
  } else if (op < 88) {
    ccache_lease_release(w->c, &w->held[next_rand(w) % HELD]);
  } else if (op < 91) {
    op_limits(w);
  } else if (op < 94) {
    ccache_sweep(w->c);
  } else if (op < 97) {
    atomic_fetch_add(&w->t->now_ms, 1 + next_rand(w) % 8);
  } else if (op < 98) {
    ccache_clear(w->c);
  } else if (ccache__check(w->c, UINT64_MAX) != 0) {
    atomic_fetch_add(&check_failures, 1);
  }
}

static void *run_worker(void *arg) {
  worker *w = arg;
  for (int i = 0; i < OPS; i++) step(w);
  for (int i = 0; i < HELD; i++) ccache_lease_release(w->c, &w->held[i]);
  ccache_program_release(w->c, w->handle);
  return NULL;
}

static void stress_every_object_destroyed_once(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache_config cfg;
  t_config(&cfg, &t);
  cfg.sweeper_thread = 1; /* the sweeper races with everything else too */
  cfg.ttl_ms = 20;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  worker w[NT];
  pthread_t th[NT];
  memset(w, 0, sizeof w);
  for (int i = 0; i < NT; i++) {
    w[i].c = c;
    w[i].t = &t;
    w[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
    w[i].fetch_missed = -1;
    pthread_create(&th[i], NULL, run_worker, &w[i]);
  }
  for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
  assert_int_equal(check_failures, 0);
  t_check(c, NULL);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.hits + s.misses, lookups);
  assert_int_equal(s.leases_out, 0);
  assert_true(s.compiles > 0 && s.program_compiles > 0 && s.inserts > 0);
  printf(
      "stress: %d threads x %d ops: hits %llu misses %llu compiles %llu waits %llu "
      "evicted cap/ttl/cost %llu/%llu/%llu\n",
      NT, OPS, (unsigned long long)s.hits, (unsigned long long)s.misses,
      (unsigned long long)s.compiles, (unsigned long long)s.waits,
      (unsigned long long)s.evicted_capacity, (unsigned long long)s.evicted_ttl,
      (unsigned long long)s.evicted_cost);
  assert_int_equal(s.items + s.evicted_capacity + s.evicted_ttl + s.evicted_cost + s.removed +
                       s.cleared + s.replaced,
                   s.inserts);
  t_close(c);
  assert_int_equal(t.closures_destroyed, made_closures);
  assert_int_equal(t.programs_destroyed, made_natives);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(stress_every_object_destroyed_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
