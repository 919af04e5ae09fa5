/* test_sweeper.c - the TTL sweeper thread, and fork().  Waits are on
 * conditions with generous bounds, never fixed sleeps for time to pass. */
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

#define U CCACHE_UNBOUNDED

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Polls until `*counter >= want` or `bound_ms` pass; returns the time taken. */
static uint64_t wait_count(_Atomic uint64_t *counter, uint64_t want, uint64_t bound_ms) {
  uint64_t t0 = mono_ms();
  while (atomic_load(counter) < want && mono_ms() - t0 < bound_ms) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return mono_ms() - t0;
}

/* Real clock (clock_ms NULL) with the counting destroys and the sweeper on. */
static ccache *open_real(t_ctx *t, uint64_t ttl) {
  ccache_config cfg;
  t_config(&cfg, t);
  cfg.clock_ms = NULL;
  cfg.sweeper_thread = 1;
  cfg.ttl_ms = ttl;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  return c;
}

static void sweeper_expires_without_any_call(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = open_real(&t, 30);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  ccache_program_release(c, p);
  wait_count(&t.programs_destroyed, 1, 10000);
  assert_int_equal(t.closures_destroyed, 1); /* gone with no other call */
  assert_int_equal(t.programs_destroyed, 1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_ttl, 1);
  assert_int_equal(s.items, 0);
  t_close(c);
}

static void close_does_not_wait_out_a_long_ttl(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = open_real(&t, 3600u * 1000u);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  ccache_program_release(c, p);
  uint64_t t0 = mono_ms();
  t_close(c);
  assert_true(mono_ms() - t0 < 5000); /* an hour's TTL, closed at once */
  assert_int_equal(t.closures_destroyed, 1);
}

static void set_limits_starts_the_sweeper(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = open_real(&t, U); /* no thread while unbounded */
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  ccache_program_release(c, p);
  assert_int_equal(ccache_set_limits(c, U, 30, U), CCACHE_OK);
  wait_count(&t.closures_destroyed, 1, 10000);
  assert_int_equal(t.closures_destroyed, 1);
  assert_int_equal(t_stats(c).evicted_ttl, 1);
  /* Back to unbounded parks it; a new entry then stays. */
  assert_int_equal(ccache_set_limits(c, U, U, U), CCACHE_OK);
  t_put(c, 2, 2, t_intern(c, 2, 200, 1));
  ccache_program *h = NULL;
  assert_int_equal(ccache_program_fetch(c, PK(2), &h), CCACHE_OK);
  ccache_program_release(c, h);
  ccache_program_release(c, h);
  assert_int_equal(t_fetch_id(c, 2), 2);
  t_close(c);
}

/* The sweeper judges expiry with the injected clock, not real time. */
static void sweeper_uses_configured_clock(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache_config cfg;
  t_config(&cfg, &t);
  cfg.sweeper_thread = 1;
  cfg.ttl_ms = 2; /* the deadline, 2 ms away on the fake clock, is waited for in real time */
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  ccache_program_release(c, p);
  /* Real time passes, the fake clock does not: the sweeper keeps waking at
   * its deadline (reading the clock) but nothing expires. */
  uint64_t calls = atomic_load(&t.clock_calls);
  wait_count(&t.clock_calls, calls + 20, 10000);
  assert_true(atomic_load(&t.clock_calls) >= calls + 20);
  assert_int_equal(t.closures_destroyed, 0);
  t.now_ms = 2; /* now it has expired */
  wait_count(&t.closures_destroyed, 1, 10000);
  assert_int_equal(t.closures_destroyed, 1);
  t_close(c);
}

static void no_sweeper_thread_mode_sweeps_by_hand(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, 10, U); /* t_config sets sweeper_thread = 0 */
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  ccache_program_release(c, p);
  t.now_ms = 50;
  assert_int_equal(t.closures_destroyed, 0); /* no thread swept it */
  assert_int_equal(ccache_sweep(c), 1);
  assert_int_equal(t.closures_destroyed, 1);
  t_close(c);
}

/* A clock that steps in 100 ms: entries inserted within one step share an
 * insert time, hence one deadline.  Real time underneath, so the sweeper's
 * waits end when the step turns. */
static uint64_t step_clock(void *ctx) {
  t_ctx *t = ctx;
  atomic_fetch_add(&t->clock_calls, 1);
  return mono_ms() / 100 * 100;
}

static ccache *open_stepped(t_ctx *t, uint64_t ttl) {
  ccache_config cfg;
  t_config(&cfg, t);
  cfg.clock_ms = step_clock;
  cfg.sweeper_thread = 1;
  cfg.ttl_ms = ttl;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  return c;
}

/* 100 entries inserted early in one 100 ms step, TTL 100: one deadline, so
 * the sweeper wakes once and removes all of them; with the table empty it
 * then sleeps until the next insert.  A second batch costs one more wake-up,
 * whatever time passed in between (a ticking sweeper, as EMLX's ttl/2, would
 * have woken at least twice per batch). */
static void batch_with_one_deadline_costs_one_wakeup(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = open_stepped(&t, 100);
  ccache_program *p = t_intern(c, 1, 100, 1);
  for (uint64_t batch = 1; batch <= 2; batch++) {
    while (mono_ms() % 100 > 50) {
    } /* start early in a step: the batch takes far less than 50 ms */
    uint64_t step = mono_ms() / 100;
    for (uint64_t k = 0; k < 100; k++) t_put(c, batch * 1000 + k, (int)k, p);
    assert_int_equal(mono_ms() / 100, step);
    wait_count(&t.closures_destroyed, 100 * batch, 10000);
    assert_int_equal(t.closures_destroyed, 100 * batch);
    ccache_stats s = t_stats(c);
    assert_int_equal(s.evicted_ttl, 100 * batch);
    assert_int_equal(s.items, 0);
    assert_int_equal(s.sweeper_wakeups, batch);
  }
  ccache_program_release(c, p);
  t_close(c);
}

/* An empty cache with a 1 ms TTL: its sweeper never wakes.  Time is let pass
 * by waiting for another cache's entry to expire (a 50 ms TTL). */
static void empty_cache_sweeper_never_wakes(void **state) {
  (void)state;
  t_ctx idle = {0}, other = {0};
  ccache *c = open_real(&idle, 1);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p); /* starts and exercises the thread once */
  ccache_program_release(c, p);
  wait_count(&idle.closures_destroyed, 1, 10000);
  assert_int_equal(idle.closures_destroyed, 1);
  uint64_t woke = t_stats(c).sweeper_wakeups;
  assert_true(woke <= 1);
  ccache *o = open_real(&other, 50);
  ccache_program *q = t_intern(o, 1, 100, 1);
  t_put(o, 1, 1, q);
  ccache_program_release(o, q);
  wait_count(&other.closures_destroyed, 1, 10000);
  assert_int_equal(other.closures_destroyed, 1);
  assert_int_equal(t_stats(c).sweeper_wakeups, woke); /* ~50 with a 1 ms tick */
  t_close(o);
  t_close(c);
}

/* Deadlines past the end of the clock: a TTL of UINT64_MAX - 1 (the sum
 * saturates: no deadline) and of 2^62 ms (a finite deadline centuries away,
 * waited for a day at a time): no overflow (UBSan), no wake-up, and close
 * returns at once. */
static void far_deadlines_do_not_overflow(void **state) {
  (void)state;
  uint64_t ttls[] = {UINT64_MAX - 1, UINT64_C(1) << 62};
  for (int i = 0; i < 2; i++) {
    t_ctx t = {0};
    ccache *c = open_real(&t, ttls[i]);
    ccache_program *p = t_intern(c, 1, 100, 1);
    t_put(c, 1, 1, p);
    ccache_program_release(c, p);
    assert_int_equal(t_fetch_id(c, 1), 1);
    assert_int_equal(t_stats(c).sweeper_wakeups, 0);
    uint64_t t0 = mono_ms();
    t_close(c);
    assert_true(mono_ms() - t0 < 5000);
    assert_int_equal(t.closures_destroyed, 1);
  }
}

/* A child must not use a cache created before fork(): every call returns
 * CCACHE_EFORKED there.  A cache opened in the child works normally. */
static void child_refuses_caches_from_before_fork(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = open_real(&t, 60000); /* with a sweeper thread running */
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int bad = 0;
    ccache_lease l;
    ccache_program *q = NULL;
    bad |= ccache_fetch(c, K(1), &l) != CCACHE_EFORKED;
    bad |= ccache_program_fetch(c, PK(1), &q) != CCACHE_EFORKED;
    bad |= ccache_remove(c, K(1)) != CCACHE_EFORKED;
    bad |= ccache_sweep(c) != CCACHE_EFORKED;
    bad |= ccache_set_limits(c, 1, 1, 1) != CCACHE_EFORKED;
    bad |= ccache_close(c) != CCACHE_EFORKED;
    ccache *fresh = NULL;
    ccache_config cfg;
    ccache_config_init(&cfg); /* no TTL: TSan cannot start threads after a fork */
    bad |= ccache_open(&cfg, &fresh) != CCACHE_OK;
    ccache_program *fp = NULL;
    bad |= ccache_program_intern(fresh, PK(1), NULL, 1, &fp) != CCACHE_OK;
    bad |= ccache_put(fresh, K(1), NULL, fp) != CCACHE_OK;
    bad |= ccache_fetch(fresh, K(1), &l) != CCACHE_OK;
    ccache_lease_release(fresh, &l);
    ccache_program_release(fresh, fp);
    bad |= ccache_close(fresh) != CCACHE_OK;
    _exit(bad ? 1 : 0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  /* The parent's cache is untouched. */
  assert_int_equal(t_fetch_id(c, 1), 1);
  ccache_program_release(c, p);
  t_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sweeper_expires_without_any_call),
      cmocka_unit_test(close_does_not_wait_out_a_long_ttl),
      cmocka_unit_test(set_limits_starts_the_sweeper),
      cmocka_unit_test(sweeper_uses_configured_clock),
      cmocka_unit_test(no_sweeper_thread_mode_sweeps_by_hand),
      cmocka_unit_test(child_refuses_caches_from_before_fork),
      cmocka_unit_test(batch_with_one_deadline_costs_one_wakeup),
      cmocka_unit_test(empty_cache_sweeper_never_wakes),
      cmocka_unit_test(far_deadlines_do_not_overflow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
