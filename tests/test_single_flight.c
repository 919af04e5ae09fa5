/* test_single_flight.c - single-flight get-or-compile (closures and programs), nested
 * compiles and their EDEADLK cases; callbacks that close or call back in are in
 * test_single_flight_callbacks.c.  Workers record results; only the main thread asserts. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support.h"

#define NTHREADS 16
#define U        CCACHE_UNBOUNDED

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Waits (bounded) until the cache has counted `n` single-flight waiters. */
static void wait_for_waiters(ccache *c, uint64_t n, uint64_t bound_ms) {
  uint64_t end = mono_ms() + bound_ms;
  for (;;) {
    ccache_stats s = {.size = sizeof s};
    ccache_stats_get(c, &s);
    if (s.waits >= n || mono_ms() >= end) return;
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
}

typedef struct sf {
  ccache *c;
  t_ctx *t;
  pthread_barrier_t barrier;
  int fail; /* compile returns non-zero */
  _Atomic int compile_calls;
  int rc[NTHREADS];
  void *closure[NTHREADS];
  ccache_lease lease[NTHREADS];
} sf;

static int sf_compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                      ccache_program **program_out) {
  sf *s = ud;
  (void)key;
  atomic_fetch_add(&s->compile_calls, 1);
  wait_for_waiters(c, NTHREADS - 1, 2000); /* every other thread has joined */
  if (s->fail) return -1;
  ccache_program *p = NULL;
  if (ccache_program_intern(c, PK(1), t_native(100), 10, &p) != CCACHE_OK) return -1;
  *closure_out = t_closure(1);
  *program_out = p;
  return 0;
}

static void *sf_worker(void *arg) {
  void **a = arg;
  sf *s = a[0];
  int i = (int)(intptr_t)a[1];
  pthread_barrier_wait(&s->barrier);
  s->rc[i] = ccache_get_or_compile(s->c, K(1), sf_compile, s, &s->lease[i]);
  s->closure[i] = s->lease[i].closure;
  return NULL;
}

static void run_sf(sf *s) {
  pthread_t th[NTHREADS];
  void *args[NTHREADS][2];
  pthread_barrier_init(&s->barrier, NULL, NTHREADS);
  for (int i = 0; i < NTHREADS; i++) {
    args[i][0] = s;
    args[i][1] = (void *)(intptr_t)i;
    pthread_create(&th[i], NULL, sf_worker, args[i]);
  }
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&s->barrier);
}

static void single_flight_sixteen_threads_compile_once(void **state) {
  (void)state;
  t_ctx t = {0};
  sf s;
  memset(&s, 0, sizeof s);
  s.t = &t;
  s.c = t_open(&t, U, U, U);
  run_sf(&s);
  assert_int_equal(s.compile_calls, 1);
  for (int i = 0; i < NTHREADS; i++) {
    assert_int_equal(s.rc[i], CCACHE_OK);
    assert_ptr_equal(s.closure[i], s.closure[0]);
  }
  ccache_stats st = t_stats(s.c);
  assert_int_equal(st.compiles, 1);
  assert_int_equal(st.waits, NTHREADS - 1);
  /* Every caller missed: the owner compiled, the others waited (a waiter's
   * lease is not a hit). */
  assert_int_equal(st.misses, NTHREADS);
  assert_int_equal(st.hits, 0);
  assert_int_equal(st.leases_out, NTHREADS);
  assert_int_equal(st.items, 1);
  for (int i = 0; i < NTHREADS; i++) ccache_lease_release(s.c, &s.lease[i]);
  assert_int_equal(ccache_remove(s.c, K(1)), CCACHE_OK);
  assert_int_equal(t.programs_destroyed, 1);
  assert_int_equal(t.closures_destroyed, 1);
  t_check(s.c, &t);
  t_close(s.c);
  assert_int_equal(t.programs_destroyed, 1);
}

static void single_flight_failure_reaches_every_waiter(void **state) {
  (void)state;
  t_ctx t = {0};
  sf s;
  memset(&s, 0, sizeof s);
  s.t = &t;
  s.fail = 1;
  s.c = t_open(&t, U, U, U);
  run_sf(&s);
  assert_int_equal(s.compile_calls, 1);
  for (int i = 0; i < NTHREADS; i++) {
    assert_int_equal(s.rc[i], CCACHE_ECOMPILE);
    assert_null(s.closure[i]);
  }
  ccache_stats st = t_stats(s.c);
  assert_int_equal(st.compile_failures, 1);
  assert_int_equal(st.misses, NTHREADS);
  assert_int_equal(st.hits, 0);
  assert_int_equal(st.items, 0);
  assert_int_equal(t_fetch_id(s.c, 1), -1); /* errors are never cached */
  s.fail = 0;
  ccache_lease l;
  assert_int_equal(ccache_get_or_compile(s.c, K(1), sf_compile, &s, &l), CCACHE_OK);
  assert_int_equal(s.compile_calls, 2);
  assert_int_equal(t_stats(s.c).compiles, 2);
  ccache_lease_release(s.c, &l);
  t_close(s.c);
  assert_int_equal(t.closures_destroyed, 1);
  assert_int_equal(t.programs_destroyed, 1);
}

/* ---- nested compiles: compile(A) asks for B, compile(C) asks for D ---- */

typedef struct nest {
  ccache_key inner; /* key the outer compile asks for, or none */
  int has_inner;
  int inner_rc;
  _Atomic int *calls;
} nest;

static int leaf_compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                        ccache_program **program_out) {
  nest *n = ud;
  atomic_fetch_add(n->calls, 1);
  if (n->has_inner) {
    nest leaf = {.calls = n->calls};
    ccache_lease l;
    n->inner_rc = ccache_get_or_compile(c, n->inner, leaf_compile, &leaf, &l);
    ccache_lease_release(c, &l);
  }
  ccache_program *p = NULL;
  if (ccache_program_intern(c, key, t_native((int)key.hi), 1, &p) != CCACHE_OK) return -1;
  *closure_out = t_closure((int)key.hi);
  *program_out = p;
  return 0;
}

typedef struct nest_job {
  ccache *c;
  ccache_key outer;
  nest n;
  int rc;
} nest_job;

static void *nest_worker(void *arg) {
  nest_job *j = arg;
  ccache_lease l;
  j->rc = ccache_get_or_compile(j->c, j->outer, leaf_compile, &j->n, &l);
  ccache_lease_release(j->c, &l);
  return NULL;
}

static void compile_may_call_get_or_compile_for_other_keys(void **state) {
  (void)state;
  t_ctx t = {0};
  _Atomic int calls = 0;
  ccache *c = t_open(&t, U, U, U);
  nest_job a = {c, K(1), {K(2), 1, -99, &calls}, -99};
  nest_job b = {c, K(3), {K(4), 1, -99, &calls}, -99};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, nest_worker, &a);
  pthread_create(&tb, NULL, nest_worker, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  assert_int_equal(a.rc, CCACHE_OK);
  assert_int_equal(b.rc, CCACHE_OK);
  assert_int_equal(a.n.inner_rc, CCACHE_OK);
  assert_int_equal(b.n.inner_rc, CCACHE_OK);
  assert_int_equal(calls, 4);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.compiles, 4);
  assert_int_equal(s.items, 4);
  assert_int_equal(s.hits + s.misses, 4);
  t_check(c, &t);
  t_close(c);
  assert_int_equal(t.closures_destroyed, 4);
  assert_int_equal(t.programs_destroyed, 4);
}

static void compile_asking_for_its_own_key_gets_edeadlk(void **state) {
  (void)state;
  t_ctx t = {0};
  _Atomic int calls = 0;
  ccache *c = t_open(&t, U, U, U);
  /* Directly: compile(A) asks for A. */
  nest self = {K(1), 1, -99, &calls};
  ccache_lease l;
  assert_int_equal(ccache_get_or_compile(c, K(1), leaf_compile, &self, &l), CCACHE_OK);
  assert_int_equal(self.inner_rc, CCACHE_EDEADLK);
  ccache_lease_release(c, &l);
  assert_int_equal(calls, 1);
  t_close(c);
}

/* Through a cycle on one thread: compile(A) -> B, compile(B) -> A. */
static int cycle_compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                         ccache_program **program_out) {
  int *rcs = ud;
  ccache_key next = key.hi == 1 ? K(2) : K(1);
  ccache_lease l;
  rcs[key.hi] = ccache_get_or_compile(c, next, cycle_compile, ud, &l);
  ccache_lease_release(c, &l);
  ccache_program *p = NULL;
  if (ccache_program_intern(c, key, NULL, 1, &p) != CCACHE_OK) return -1;
  *closure_out = NULL;
  *program_out = p;
  return 0;
}

static void cycle_on_one_thread_gets_edeadlk(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  int rcs[3] = {-99, -99, -99};
  ccache_lease l;
  assert_int_equal(ccache_get_or_compile(c, K(1), cycle_compile, rcs, &l), CCACHE_OK);
  assert_int_equal(rcs[2], CCACHE_EDEADLK); /* B's compile asked for A */
  assert_int_equal(rcs[1], CCACHE_OK);      /* A's compile got B */
  ccache_lease_release(c, &l);
  assert_int_equal(t_stats(c).compiles, 2);
  t_close(c);
}

/* ---- two closure compiles asking for one program at the same time ---- */

typedef struct pshare {
  ccache *c;
  _Atomic int native_compiles;
  ccache_program *got[2];
  int rc[2];
  pthread_barrier_t barrier;
} pshare;

static int pshare_native(void *ud, ccache *c, ccache_key pkey, void **native_out,
                         uint64_t *cost_out) {
  pshare *s = ud;
  (void)pkey;
  atomic_fetch_add(&s->native_compiles, 1);
  wait_for_waiters(c, 1, 2000); /* the other closure compile has joined */
  *native_out = t_native(77);
  *cost_out = 5;
  return 0;
}

static int pshare_closure(void *ud, ccache *c, ccache_key key, void **closure_out,
                          ccache_program **program_out) {
  pshare *s = ud;
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(c, PK(9), pshare_native, s, &p);
  s->got[key.hi - 1] = p;
  s->rc[key.hi - 1] = rc;
  if (rc != CCACHE_OK) return -1;
  *closure_out = t_closure((int)key.hi);
  *program_out = p;
  return 0;
}

static void *pshare_worker(void *arg) {
  void **a = arg;
  pshare *s = a[0];
  uint64_t k = (uint64_t)(intptr_t)a[1];
  pthread_barrier_wait(&s->barrier);
  ccache_lease l;
  if (ccache_get_or_compile(s->c, K(k), pshare_closure, s, &l) == CCACHE_OK)
    ccache_lease_release(s->c, &l);
  return NULL;
}

static void program_single_flight_shared_by_two_closures(void **state) {
  (void)state;
  t_ctx t = {0};
  pshare s;
  memset(&s, 0, sizeof s);
  s.c = t_open(&t, U, U, U);
  pthread_barrier_init(&s.barrier, NULL, 2);
  pthread_t th[2];
  void *args[2][2] = {{&s, (void *)1}, {&s, (void *)2}};
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, pshare_worker, args[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&s.barrier);
  assert_int_equal(s.native_compiles, 1);
  assert_int_equal(s.rc[0], CCACHE_OK);
  assert_int_equal(s.rc[1], CCACHE_OK);
  assert_ptr_equal(s.got[0], s.got[1]);
  ccache_stats st = t_stats(s.c);
  assert_int_equal(st.program_compiles, 1);
  assert_int_equal(st.program_misses, 2); /* the owner and the waiter */
  assert_int_equal(st.program_hits, 0);
  assert_int_equal(st.program_waits, 1);
  assert_int_equal(st.waits, 0);
  assert_int_equal(st.compiles, 2);
  assert_int_equal(st.programs, 1);
  assert_int_equal(st.cost_bytes, 5);
  t_check(s.c, &t);
  t_close(s.c);
  assert_int_equal(t.programs_destroyed, 1);
  assert_int_equal(t.closures_destroyed, 2);
}

static int program_fail(void *ud, ccache *c, ccache_key pkey, void **native_out,
                        uint64_t *cost_out) {
  (void)ud, (void)c, (void)pkey, (void)native_out, (void)cost_out;
  return 7;
}

static void program_compile_failure_is_not_cached(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  ccache_program *p = (ccache_program *)&t;
  assert_int_equal(ccache_program_get_or_compile(c, PK(1), program_fail, NULL, &p),
                   CCACHE_ECOMPILE);
  assert_null(p);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.program_compiles, 1);
  assert_int_equal(s.program_compile_failures, 1);
  assert_int_equal(s.compile_failures, 0);
  assert_int_equal(s.programs, 0);
  assert_int_equal(ccache_program_get_or_compile(NULL, PK(1), program_fail, NULL, &p),
                   CCACHE_EINVAL);
  assert_int_equal(ccache_program_get_or_compile(c, PK(1), NULL, NULL, &p), CCACHE_EINVAL);
  assert_int_equal(ccache_get_or_compile(c, K(1), NULL, NULL, NULL), CCACHE_EINVAL);
  t_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(single_flight_sixteen_threads_compile_once),
      cmocka_unit_test(single_flight_failure_reaches_every_waiter),
      cmocka_unit_test(compile_may_call_get_or_compile_for_other_keys),
      cmocka_unit_test(compile_asking_for_its_own_key_gets_edeadlk),
      cmocka_unit_test(cycle_on_one_thread_gets_edeadlk),
      cmocka_unit_test(program_single_flight_shared_by_two_closures),
      cmocka_unit_test(program_compile_failure_is_not_cached),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
