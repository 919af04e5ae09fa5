/*
 * tier_renew.c - the lease-renewal thread.
 *
 * A tier whose compile locks expire (ops.lease_ms > 0, e.g. Redis's
 * SET NX PX) needs them renewed while the compile runs, but the compiling
 * thread is inside the user's callback.  One thread per cache renews every
 * registered lease each lease_ms/3: started the first time a lease is taken,
 * joined at close.  The compiling thread registers each lease (a record on
 * its own stack) and unregisters it before unlocking; a record being renewed
 * is marked busy, and unregistering waits for that renewal to end, so renew
 * and unlock never run at the same time on one lock.  A failed renewal loses
 * the lease: counted, never retried.
 *
 * Locks: r_mu guards the lease list and the thread's state; a leaf, never
 * held across an op or callback (docs/design.md's lock tree).
 */
#define _GNU_SOURCE 1 /* pthread_setname_np */

#include <string.h>
#include <time.h>

#include "tier/tier.h"

/* ------------------------------------------------------- the renewal thread */

static struct timespec mono_ts(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  return ts;
}

static uint64_t renew_period_ns(const ccache_tier *t) { return t->ops.lease_ms / 3 * 1000000u; }

/* The earliest lease due that is neither lost nor being renewed. */
static ccache__lease_rec *next_due(struct ccache__tiers *ts) {
  ccache__lease_rec *best = NULL;
  for (ccache__lease_rec *r = ts->leases; r; r = r->next)
    if (!r->busy && !r->lost && (!best || r->due_ns < best->due_ns)) best = r;
  return best;
}

static void *renewal_main(void *arg) {
  struct ccache__tiers *ts = arg;

  ccache__lock(&ts->r_mu);
  while (!ts->r_stop) {
    ccache__lease_rec *r = next_due(ts);
    if (!r) {
      ccache__cond_wait(&ts->r_cv, &ts->r_mu);
      continue;
    }
    uint64_t now = ccache__mono_ns();
    if (r->due_ns > now) {
      struct timespec until = mono_ts(r->due_ns);
      ccache__cond_timedwait(&ts->r_cv, &ts->r_mu, &until);
      continue; /* re-pick: the list may have changed */
    }
    /* busy keeps the record (on its compiling thread's stack) alive and
     * keeps unlock() from running while renew() does. */
    r->busy = 1;
    ccache__unlock(&ts->r_mu);
    int rc = CCACHE_OK;
    CCACHE__IN_FRAME(ts, rc = r->t->ops.renew(r->t->state, r->lock));
    if (rc != CCACHE_OK) ccache__tier_error(ts);
    ccache__lock(&ts->r_mu);
    r->busy = 0;
    if (rc != CCACHE_OK) r->lost = 1;
    r->due_ns = ccache__mono_ns() + renew_period_ns(r->t);
    ccache__cond_broadcast(&ts->r_cv);
  }
  ccache__unlock(&ts->r_mu);
  return NULL;
}

/* Register a lease taken by this thread; starts the renewal thread on first
 * use.  If it cannot start, the lease is not renewed (counted) and may lapse:
 * at worst another process compiles the same program too. */
void ccache__tier_lease_add(struct ccache__tiers *ts, ccache__lease_rec *r, ccache_tier *t,
                            void *lock) {
  memset(r, 0, sizeof *r);
  r->t = t;
  r->lock = lock;
  r->due_ns = ccache__mono_ns() + renew_period_ns(t);
  ccache__lock(&ts->r_mu);
  if (!ts->r_started && !ts->r_stop) {
    if (pthread_create(&ts->r_thread, NULL, renewal_main, ts) == 0) {
      ts->r_started = 1;
      /* A name that tools show (top -H, gdb, /proc/<pid>/task/<tid>/comm). */
      pthread_setname_np(ts->r_thread, CCACHE__RENEW_THREAD_NAME);
    } else {
      ccache__tier_error(ts);
    }
  }
  r->next = ts->leases;
  if (ts->leases) ts->leases->prev = r;
  ts->leases = r;
  ccache__cond_broadcast(&ts->r_cv);
  ccache__unlock(&ts->r_mu);
}

/* Unregister, waiting out a renew() in progress on it. */
void ccache__tier_lease_remove(struct ccache__tiers *ts, ccache__lease_rec *r) {
  ccache__lock(&ts->r_mu);
  while (r->busy) ccache__cond_wait(&ts->r_cv, &ts->r_mu);
  if (r->prev)
    r->prev->next = r->next;
  else
    ts->leases = r->next;
  if (r->next) r->next->prev = r->prev;
  ccache__cond_broadcast(&ts->r_cv);
  ccache__unlock(&ts->r_mu);
}

int ccache__tier_renewal_init(struct ccache__tiers *ts) {
  int rc = ccache__cond_init(&ts->r_cv, true);
  if (rc != CCACHE_OK) return rc;
  rc = ccache__mutex_init(&ts->r_mu);
  if (rc != CCACHE_OK) ccache__cond_destroy(&ts->r_cv);
  return rc;
}

void ccache__tier_renewal_stop(struct ccache__tiers *ts) {
  ccache__lock(&ts->r_mu);
  int started = ts->r_started;
  ts->r_stop = 1;
  ccache__cond_broadcast(&ts->r_cv);
  ccache__unlock(&ts->r_mu);
  if (started) ccache__join(ts->r_thread);
}

void ccache__tier_renewal_destroy(struct ccache__tiers *ts) {
  ccache__cond_destroy(&ts->r_cv);
  ccache__mutex_destroy(&ts->r_mu);
}
