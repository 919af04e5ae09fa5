/*
 * test_tier_leases.c - leased tier locks and the renewal threads: renewed
 * by one lazily started thread (never the compiling one) and joined at
 * close, a lost lease counted and never renewed again while the compile
 * goes on, close refused from inside a compile that holds a lock, and (over
 * a tier whose renew() can be blocked) a renew blocked in one tier or one
 * renewal group never delaying the renewal of a lease elsewhere.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "mem_tier_support.h"
#include "tier/tier.h"

/* The compile holds a leased lock until the renewal thread has renewed it
 * renewals_wanted times (a condition wait, bounded at 30 s). */
static int renewals_wanted;
static void wait_for_renewals(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)c;
  (void)pkey;
  mem_tier *m = comp->arg;
  int target = atomic_load(&m->renews) + renewals_wanted;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 30;
  pthread_mutex_lock(&m->rmu);
  while (atomic_load(&m->renews) < target)
    if (pthread_cond_timedwait(&m->rcv, &m->rmu, &until) != 0) break;
  pthread_mutex_unlock(&m->rmu);
}

static void renewal_thread_renews_leases(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(true, 30); /* renewed every 10 ms */
  rig_open_ops(&r, 1, &o, "rt-1", 0);
  assert_int_equal(t_threads_named(CCACHE__RENEW_THREAD_NAME), 0); /* started lazily */
  r.comp.during = wait_for_renewals;
  r.comp.arg = r.m[0];
  renewals_wanted = 3;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  assert_true(r.m[0]->renews >= 3);
  assert_int_equal(r.m[0]->renewers_seen, 1);
  assert_false(pthread_equal(r.m[0]->renewer, pthread_self())); /* never the compiler */
  assert_int_equal(t_threads_named(CCACHE__RENEW_THREAD_NAME), 1);
  /* A second compile: the same one thread renews. */
  assert_int_equal(t_goc(r.c, PK(2), &r.comp, CCACHE_OK), 2);
  assert_true(r.m[0]->renews >= 6);
  assert_int_equal(r.m[0]->renewers_seen, 1);
  assert_int_equal(t_threads_named(CCACHE__RENEW_THREAD_NAME), 1);
  assert_int_equal(r.m[0]->unlocks, 2);
  assert_int_equal(t_stats(r.c).tier_errors, 0);
  rig_close(&r);
  assert_int_equal(t_threads_named_gone(CCACHE__RENEW_THREAD_NAME), 0); /* joined at close */
}

/* Waits (bounded, as wait_for_renewals) until lost_tier's lease has had
 * its first renewal, then for renewals_wanted more of comp->arg's. */
static mem_tier *lost_tier;
static void wait_for_loss_then_renewals(t_compiler *comp, ccache *c, ccache_key pkey) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 30;
  pthread_mutex_lock(&lost_tier->rmu);
  while (atomic_load(&lost_tier->renews) < 1)
    if (pthread_cond_timedwait(&lost_tier->rcv, &lost_tier->rmu, &until) != 0) break;
  pthread_mutex_unlock(&lost_tier->rmu);
  wait_for_renewals(comp, c, pkey);
}

static void lost_lease_is_counted_and_the_compile_goes_on(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(true, 3); /* both renewed every 1 ms */
  rig_open_ops(&r, 2, &o, "rt-1", 0);
  /* Tier 0's lease is lost at its first renewal: "no longer yours" (a
   * renewal that got no answer would be retried while the lease holds). */
  r.m[0]->renew_rc = CCACHE_EBUSY;
  /* The compile runs until tier 0's lease was lost (its first renewal: on
   * a loaded machine that can come after tier 1's fifth), then until tier
   * 1's healthy lease was renewed 5 more times: time for tier 0's to be
   * renewed as often, were a lost lease renewed. */
  lost_tier = r.m[0];
  r.comp.during = wait_for_loss_then_renewals;
  r.comp.arg = r.m[1];
  renewals_wanted = 5;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  assert_true(r.m[1]->renews >= 5);
  /* One failed renewal, counted, never retried; the program was still
   * compiled, stored and unlocked. */
  assert_int_equal(r.m[0]->renews, 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_errors, 1);
  assert_int_equal(s.tier_leases_lost, 1);
  assert_int_equal(s.program_compiles, 1);
  assert_int_equal(r.m[0]->puts + r.m[1]->puts, 2);
  assert_int_equal(r.m[0]->unlocks + r.m[1]->unlocks, 2);
  rig_close(&r);
}

/* Closing from inside a compile that holds tier locks is refused; the locks
 * are released when the compile ends, and then close works. */
static ccache *close_target;
static int close_rc;
static void try_close(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)comp;
  (void)pkey;
  close_rc = ccache_close(c);
  close_target = c;
}

static void close_while_a_compile_holds_a_lock(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(true, 300);
  rig_open_ops(&r, 1, &o, "rt-1", 0);
  r.comp.during = try_close;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  assert_ptr_equal(close_target, r.c);
  assert_int_equal(close_rc, CCACHE_EBUSY);
  assert_int_equal(r.m[0]->locks, 1);
  assert_int_equal(r.m[0]->unlocks, 1);
  assert_int_equal(r.m[0]->closes, 0);
  assert_int_equal(t_threads_named(CCACHE__RENEW_THREAD_NAME), 1); /* the renewal thread */
  rig_close(&r); /* closes the tier once, joins the thread */
  assert_int_equal(t_threads_named_gone(CCACHE__RENEW_THREAD_NAME), 0);
}

/* ---------------------------------------------------- issue 20: tier faults */

/* A tier whose renew() blocks, per renewal group, until released: what a
 * stopped server does to a blocking renew. */
typedef struct stall_tier {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int blocked_group; /* -1: none */
  int stalled;       /* a renew is blocked right now */
  int renews[2];     /* by group */
  int groups;        /* 0: no renew_group op */
} stall_tier;

static uint32_t st_group(void *s, const void *lock) {
  (void)s;
  return (uint32_t)(((uintptr_t)lock - 1) % 2);
}

static int st_renew(void *s, void *lock) {
  stall_tier *t = s;
  int g = t->groups ? (int)st_group(s, lock) : 0;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 30;
  pthread_mutex_lock(&t->mu);
  t->renews[g]++;
  pthread_cond_broadcast(&t->cv);
  while (t->blocked_group == g) {
    t->stalled = 1;
    pthread_cond_broadcast(&t->cv);
    if (pthread_cond_timedwait(&t->cv, &t->mu, &until) != 0) break;
  }
  t->stalled = 0;
  pthread_mutex_unlock(&t->mu);
  return CCACHE_OK;
}

static int st_lock(void *s, ccache_key k, void **lock) {
  (void)s;
  *lock = (void *)(uintptr_t)(k.lo + 1);
  return CCACHE_OK;
}
static void st_unlock(void *s, void *lock) { (void)s, (void)lock; }
static int st_get(void *s, ccache_key k, void **blob, size_t *len) {
  (void)s, (void)k, (void)blob, (void)len;
  return CCACHE_MISS;
}
static void st_free_blob(void *s, void *blob, size_t len) { (void)s, (void)blob, (void)len; }
static int st_put(void *s, ccache_key k, const void *blob, size_t len) {
  (void)s, (void)k, (void)blob, (void)len;
  return CCACHE_OK;
}

static ccache_tier *stall_tier_make(stall_tier *t, int groups) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  t->blocked_group = -1;
  t->groups = groups;
  ccache_tier_ops o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.name = "stall";
  o.flags = CCACHE_TIER_PRIVATE;
  o.get = st_get;
  o.free_blob = st_free_blob;
  o.put = st_put;
  o.lock = st_lock;
  o.unlock = st_unlock;
  o.renew = st_renew;
  o.lease_ms = 30; /* renewed every 10 ms */
  o.poll_ms = 1;
  o.poll_max_ms = 4;
  o.wait_ms = 1000;
  if (groups) {
    o.renew_group = st_group;
    o.renew_groups = (uint32_t)groups;
  }
  ccache_tier *out = NULL;
  assert_int_equal(ccache_tier_custom(&o, t, &out), CCACHE_OK);
  return out;
}

/* The nested compiles of the test: the outer one (a lease in the stalled
 * place) runs the inner one (a lease elsewhere), which waits until the
 * stalled renew is blocked and then for 5 renewals elsewhere (bounded). */
static stall_tier *stall_a, *stall_b; /* where the stall is, where it must not reach */
static int stall_ga, stall_gb;        /* their groups */
static int stall_seen;                /* renewals seen elsewhere during the stall */
static int stall_inner(void *ud, ccache *c, ccache_key pkey, void **native_out,
                       uint64_t *cost_out) {
  (void)ud, (void)c;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 5;
  pthread_mutex_lock(&stall_a->mu);
  stall_a->blocked_group = stall_ga;
  while (!stall_a->stalled)
    if (pthread_cond_timedwait(&stall_a->cv, &stall_a->mu, &until) != 0) break;
  pthread_mutex_unlock(&stall_a->mu);
  pthread_mutex_lock(&stall_b->mu);
  int start = stall_b->renews[stall_gb];
  while (stall_b->renews[stall_gb] < start + 5)
    if (pthread_cond_timedwait(&stall_b->cv, &stall_b->mu, &until) != 0) break;
  stall_seen = stall_b->renews[stall_gb] - start;
  pthread_mutex_unlock(&stall_b->mu);
  pthread_mutex_lock(&stall_a->mu); /* the stall ends */
  stall_a->blocked_group = -1;
  pthread_cond_broadcast(&stall_a->cv);
  pthread_mutex_unlock(&stall_a->mu);
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return 0;
}

static uint64_t stall_inner_key;
static int stall_outer(void *ud, ccache *c, ccache_key pkey, void **native_out,
                       uint64_t *cost_out) {
  (void)ud;
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(c, PK(stall_inner_key), stall_inner, NULL, &p);
  if (rc == CCACHE_OK) ccache_program_release(c, p);
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return rc;
}

static ccache *stall_open(t_ctx *ctx, t_codec *tc, ccache_tier **tiers, uint32_t n) {
  memset(tc, 0, sizeof *tc);
  ccache_codec k = t_codec_make(tc, 64);
  ccache_config cfg;
  t_config(&cfg, ctx);
  cfg.codec = &k;
  cfg.runtime_tag = "rt-1";
  cfg.tier_min_compile_us = 0;
  cfg.tiers = tiers;
  cfg.n_tiers = n;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  return c;
}

/* Item 1 for any tier: a renew blocked in one tier (two tiers), or in one
 * renewal group of a tier (two groups of one tier), never delays the
 * renewal of a lease elsewhere; one thread per (tier, group), started
 * lazily, joined at close. */
static void blocked_renew_never_delays_other_leases(void **state) {
  (void)state;
  for (int mode = 0; mode < 2; mode++) {
    stall_tier a, b;
    t_ctx ctx = {0};
    t_codec tc;
    ccache *c;
    if (mode == 0) { /* two tiers, one group each */
      ccache_tier *tiers[2] = {stall_tier_make(&a, 0), stall_tier_make(&b, 0)};
      c = stall_open(&ctx, &tc, tiers, 2);
      stall_a = &a, stall_b = &b, stall_ga = stall_gb = 0;
      stall_inner_key = 2; /* the outer key is 1 */
    } else {               /* one tier, keys in groups 0 and 1 */
      ccache_tier *tiers[1] = {stall_tier_make(&a, 2)};
      c = stall_open(&ctx, &tc, tiers, 1);
      stall_a = stall_b = &a, stall_ga = 0, stall_gb = 1;
      stall_inner_key = 3; /* group 1 (key.lo % 2); the outer key 2: group 0 */
    }
    assert_int_equal(t_threads_named(CCACHE__RENEW_THREAD_NAME), 0);
    stall_seen = 0;
    ccache_program *p = NULL;
    assert_int_equal(ccache_program_get_or_compile(c, PK(mode ? 2 : 1), stall_outer, NULL, &p),
                     CCACHE_OK);
    ccache_program_release(c, p);
    print_message("%s: %d renewals elsewhere while one renew was blocked\n",
                  mode ? "two groups of one tier" : "two tiers", stall_seen);
    assert_true(stall_seen >= 5); /* (the wait may wake after two at once) */
    assert_int_equal(t_threads_named(CCACHE__RENEW_THREAD_NAME), 2); /* one per lane */
    ccache_stats s = t_stats(c);
    assert_int_equal(s.tier_errors + s.tier_leases_lost, 0);
    t_close(c);
    assert_int_equal(t_threads_named_gone(CCACHE__RENEW_THREAD_NAME), 0);
    pthread_mutex_destroy(&a.mu);
    pthread_cond_destroy(&a.cv);
    if (mode == 0) {
      pthread_mutex_destroy(&b.mu);
      pthread_cond_destroy(&b.cv);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(renewal_thread_renews_leases),
      cmocka_unit_test(lost_lease_is_counted_and_the_compile_goes_on),
      cmocka_unit_test(close_while_a_compile_holds_a_lock),
      cmocka_unit_test(blocked_renew_never_delays_other_leases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
