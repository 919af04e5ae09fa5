/* test_sharing.c - the sharing contract of ccache.h ("Sharing a program
 * between threads"), step by step and deterministic: a closure compiled on
 * one thread is leased by two threads at the same moment, both see the same
 * closure and program, a lease is released on a thread other than the one
 * that took it, and the destroys run exactly once, on the releasing thread.
 *
 * Threads A and B move through phases in lock step with the main thread (a
 * three-party barrier twice per phase: the workers are done, the main
 * thread has checked); the main thread asserts while the workers wait, the
 * workers only record (cmocka is not thread-safe). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define U CCACHE_UNBOUNDED

/* Which thread ran each destroy, recorded around support.c's callbacks. */
typedef struct sharing {
  t_ctx t; /* first: support.c's t_clock gets this struct as its t_ctx */
  ccache *c;
  pthread_barrier_t step;
  pthread_t compiled_on, closure_destroyed_on, program_destroyed_on;
  _Atomic int compile_calls;
  int rc_a, rc_b;
  ccache_lease lease_a, lease_b;
  pthread_t thread_a, thread_b;
} sharing;

static void destroy_closure_where(void *obj, void *ctx) {
  sharing *s = ctx;
  s->closure_destroyed_on = pthread_self();
  t_destroy_closure(obj, &s->t);
}

static void destroy_program_where(void *obj, void *ctx) {
  sharing *s = ctx;
  s->program_destroyed_on = pthread_self();
  t_destroy_program(obj, &s->t);
}

static int compile_on_a(void *ud, ccache *c, ccache_key key, void **closure_out,
                        ccache_program **program_out) {
  sharing *s = ud;
  (void)key;
  atomic_fetch_add(&s->compile_calls, 1);
  s->compiled_on = pthread_self();
  ccache_program *p = NULL;
  if (ccache_program_intern(c, PK(7), t_native(700), 64, &p) != CCACHE_OK) return -1;
  *closure_out = t_closure(70);
  *program_out = p;
  return 0;
}

static void wait_step(sharing *s) { pthread_barrier_wait(&s->step); }

/* Workers end each phase here: "done" (the main thread then checks), then
 * "go" (the main thread has finished checking). */
static void phase_end(sharing *s) {
  wait_step(s);
  wait_step(s);
}

/* The main thread's side: wait until the workers are done with a phase. */
static void phase_done(sharing *s) { wait_step(s); }
/* ... and let them start the next one. */
static void phase_go(sharing *s) { wait_step(s); }

/* Phases:
 *  1. A compiles K(1) and keeps its lease.
 *  2. B gets K(1) (a hit) and keeps its lease: both hold one now; then the
 *     main thread removes K(1) while both leases are out.
 *  3. B releases the lease A took.
 *  4. B releases its own lease: the last one, so the destroys run on B. */
static void *thread_a(void *arg) {
  sharing *s = arg;
  s->rc_a = ccache_get_or_compile(s->c, K(1), compile_on_a, s, &s->lease_a);
  for (int phase = 1; phase <= 4; phase++) phase_end(s);
  return NULL;
}

static void *thread_b(void *arg) {
  sharing *s = arg;
  phase_end(s); /* 1 */
  s->rc_b = ccache_get_or_compile(s->c, K(1), compile_on_a, s, &s->lease_b);
  phase_end(s);                            /* 2 */
  ccache_lease_release(s->c, &s->lease_a); /* taken on A */
  phase_end(s);                            /* 3 */
  ccache_lease_release(s->c, &s->lease_b);
  phase_end(s); /* 4 */
  return NULL;
}

static void two_threads_share_one_closure_and_release_across_threads(void **state) {
  (void)state;
  sharing *s = calloc(1, sizeof *s);
  assert_non_null(s);
  ccache_config cfg;
  t_config(&cfg, &s->t);
  cfg.destroy_closure = destroy_closure_where;
  cfg.destroy_program = destroy_program_where;
  cfg.ctx = s;
  assert_int_equal(ccache_open(&cfg, &s->c), CCACHE_OK);
  assert_int_equal(pthread_barrier_init(&s->step, NULL, 3), 0);
  assert_int_equal(pthread_create(&s->thread_a, NULL, thread_a, s), 0);
  assert_int_equal(pthread_create(&s->thread_b, NULL, thread_b, s), 0);

  phase_done(s); /* 1: A compiled and holds a lease */
  assert_int_equal(s->rc_a, CCACHE_OK);
  assert_int_equal(s->compile_calls, 1);
  assert_true(pthread_equal(s->compiled_on, s->thread_a));
  ccache_stats st = t_stats(s->c);
  assert_int_equal(st.misses, 1);
  assert_int_equal(st.hits, 0);
  assert_int_equal(st.leases_out, 1);
  phase_go(s);

  phase_done(s); /* 2: both hold a lease on the one closure, at this moment */
  assert_int_equal(s->rc_b, CCACHE_OK);
  assert_int_equal(s->compile_calls, 1); /* B's get was a hit */
  assert_non_null(s->lease_a.closure);
  assert_ptr_equal(s->lease_b.closure, s->lease_a.closure);
  assert_ptr_equal(s->lease_b.native, s->lease_a.native);
  assert_int_equal(t_id(s->lease_a.closure), 70);
  assert_int_equal(t_id(s->lease_b.native), 700);
  st = t_stats(s->c);
  assert_int_equal(st.hits, 1);
  assert_int_equal(st.misses, 1);
  assert_int_equal(st.compiles, 1);
  assert_int_equal(st.waits, 0);
  assert_int_equal(st.leases_out, 2);
  assert_int_equal(st.items, 1);
  assert_int_equal(st.programs, 1);
  t_check(s->c, &s->t);
  /* The entry leaves the table; the two leases keep closure and program. */
  assert_int_equal(ccache_remove(s->c, K(1)), CCACHE_OK);
  st = t_stats(s->c);
  assert_int_equal(st.items, 0);
  assert_int_equal(st.programs, 1);
  assert_int_equal(st.leases_out, 2);
  assert_int_equal(s->t.closures_destroyed, 0);
  assert_int_equal(s->t.programs_destroyed, 0);
  phase_go(s);

  phase_done(s);                   /* 3: B released the lease A took */
  assert_null(s->lease_a.closure); /* zeroed by the release */
  st = t_stats(s->c);
  assert_int_equal(st.leases_out, 1);
  assert_int_equal(st.closures_destroyed, 0);
  assert_int_equal(s->t.closures_destroyed, 0);
  assert_int_equal(s->t.programs_destroyed, 0);
  phase_go(s);

  phase_done(s); /* 4: B released the last lease */
  st = t_stats(s->c);
  assert_int_equal(st.leases_out, 0);
  assert_int_equal(st.programs, 0);
  assert_int_equal(st.closures_destroyed, 1);
  assert_int_equal(st.programs_destroyed, 1);
  assert_int_equal(s->t.closures_destroyed, 1);
  assert_int_equal(s->t.programs_destroyed, 1);
  assert_true(pthread_equal(s->closure_destroyed_on, s->thread_b));
  assert_true(pthread_equal(s->program_destroyed_on, s->thread_b));
  phase_go(s);

  assert_int_equal(pthread_join(s->thread_a, NULL), 0);
  assert_int_equal(pthread_join(s->thread_b, NULL), 0);
  pthread_barrier_destroy(&s->step);
  t_check(s->c, &s->t);
  t_close(s->c);
  /* Closing destroyed nothing more. */
  assert_int_equal(s->t.closures_destroyed, 1);
  assert_int_equal(s->t.programs_destroyed, 1);
  free(s);
}

/* The same contract while the entry stays in the table: a lease taken on
 * one thread and released on another never leaves the table's count wrong,
 * whichever thread later takes or releases, and the destroys wait for the
 * entry to leave.  Phases:
 *  1. A compiles K(2) and keeps its lease.
 *  2. B releases that lease (the entry is still in the table).
 *  3. A and B each fetch K(2) again (hits): both hold a lease.
 *  4. A releases B's lease, B releases A's.
 * Then the main thread, with no lease out, removes K(2): the destroys run
 * there, once. */
static void *thread_a2(void *arg) {
  sharing *s = arg;
  s->rc_a = ccache_get_or_compile(s->c, K(2), compile_on_a, s, &s->lease_a);
  phase_end(s); /* 1 */
  phase_end(s); /* 2 */
  s->rc_a = ccache_fetch(s->c, K(2), &s->lease_a);
  phase_end(s);                            /* 3 */
  ccache_lease_release(s->c, &s->lease_b); /* taken on B */
  phase_end(s);                            /* 4 */
  return NULL;
}

static void *thread_b2(void *arg) {
  sharing *s = arg;
  phase_end(s);                            /* 1 */
  ccache_lease_release(s->c, &s->lease_a); /* taken on A */
  phase_end(s);                            /* 2 */
  s->rc_b = ccache_fetch(s->c, K(2), &s->lease_b);
  phase_end(s);                            /* 3 */
  ccache_lease_release(s->c, &s->lease_a); /* taken on A */
  phase_end(s);                            /* 4 */
  return NULL;
}

static void cross_thread_releases_while_the_entry_stays(void **state) {
  (void)state;
  sharing *s = calloc(1, sizeof *s);
  assert_non_null(s);
  ccache_config cfg;
  t_config(&cfg, &s->t);
  cfg.destroy_closure = destroy_closure_where;
  cfg.destroy_program = destroy_program_where;
  cfg.ctx = s;
  assert_int_equal(ccache_open(&cfg, &s->c), CCACHE_OK);
  assert_int_equal(pthread_barrier_init(&s->step, NULL, 3), 0);
  assert_int_equal(pthread_create(&s->thread_a, NULL, thread_a2, s), 0);
  assert_int_equal(pthread_create(&s->thread_b, NULL, thread_b2, s), 0);

  phase_done(s); /* 1: A compiled K(2) and holds a lease */
  assert_int_equal(s->rc_a, CCACHE_OK);
  assert_int_equal(s->compile_calls, 1);
  ccache_stats st = t_stats(s->c);
  assert_int_equal(st.misses, 1);
  assert_int_equal(st.leases_out, 1);
  phase_go(s);

  phase_done(s); /* 2: B released A's lease; the entry is still in */
  assert_null(s->lease_a.closure);
  st = t_stats(s->c);
  assert_int_equal(st.leases_out, 0);
  assert_int_equal(st.items, 1);
  assert_int_equal(st.programs, 1);
  assert_int_equal(s->t.closures_destroyed, 0);
  assert_int_equal(s->t.programs_destroyed, 0);
  t_check(s->c, &s->t);
  phase_go(s);

  phase_done(s); /* 3: both hit and hold a lease */
  assert_int_equal(s->rc_a, CCACHE_OK);
  assert_int_equal(s->rc_b, CCACHE_OK);
  assert_int_equal(s->compile_calls, 1);
  assert_ptr_equal(s->lease_a.closure, s->lease_b.closure);
  assert_ptr_equal(s->lease_a.native, s->lease_b.native);
  assert_int_equal(t_id(s->lease_b.closure), 70);
  st = t_stats(s->c);
  assert_int_equal(st.hits, 2);
  assert_int_equal(st.misses, 1);
  assert_int_equal(st.leases_out, 2);
  t_check(s->c, &s->t);
  phase_go(s);

  phase_done(s); /* 4: each released the other's lease */
  assert_null(s->lease_a.closure);
  assert_null(s->lease_b.closure);
  st = t_stats(s->c);
  assert_int_equal(st.leases_out, 0);
  assert_int_equal(st.items, 1);
  assert_int_equal(s->t.closures_destroyed, 0);
  assert_int_equal(s->t.programs_destroyed, 0);
  t_check(s->c, &s->t);
  phase_go(s);

  assert_int_equal(pthread_join(s->thread_a, NULL), 0);
  assert_int_equal(pthread_join(s->thread_b, NULL), 0);
  pthread_barrier_destroy(&s->step);
  /* No lease out: removing the entry destroys both, here, once. */
  assert_int_equal(ccache_remove(s->c, K(2)), CCACHE_OK);
  st = t_stats(s->c);
  assert_int_equal(st.items, 0);
  assert_int_equal(st.programs, 0);
  assert_int_equal(st.leases_out, 0);
  assert_int_equal(st.closures_destroyed, 1);
  assert_int_equal(st.programs_destroyed, 1);
  assert_int_equal(s->t.closures_destroyed, 1);
  assert_int_equal(s->t.programs_destroyed, 1);
  assert_true(pthread_equal(s->closure_destroyed_on, pthread_self()));
  t_check(s->c, &s->t);
  t_close(s->c);
  assert_int_equal(s->t.closures_destroyed, 1);
  assert_int_equal(s->t.programs_destroyed, 1);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(two_threads_share_one_closure_and_release_across_threads),
      cmocka_unit_test(cross_thread_releases_while_the_entry_stays),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
