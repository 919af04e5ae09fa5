/*
 * tier_renew.c - the lease-renewal threads.
 *
 * A tier whose compile locks expire (ops.lease_ms > 0, e.g. Redis's
 * SET NX PX) needs them renewed while the compile runs, but the compiling
 * thread is inside the user's callback.  Renewals run on library threads,
 * one per lane: a lane is a (tier, renewal group) pair, the group being
 * what the tier's renew_group op says (the Redis tier: the lease's server;
 * no op: one group).  A renew() blocks for as long as its backend lets it
 * (the Redis command timeout may be longer than the lease), so one thread
 * for all leases would let a stalled server starve the leases of every
 * other server and tier; with a thread per lane, a stall only delays the
 * leases that share its fate.  A lane and its thread are made the first
 * time a lease of that lane is taken and live until close: at most
 * CCACHE_MAX_TIERS x CCACHE_MAX_RENEW_GROUPS threads, in practice one per
 * Redis server the cache has taken a lease on.
 *
 * Each lane's thread renews its leases each lease_ms/3, the earliest due
 * first.  The compiling thread registers each lease (a record on its own
 * stack) and unregisters it before unlocking; a record being renewed is
 * marked busy, and unregistering waits for that renewal to end, so renew
 * and unlock never run at the same time on one lock.
 *
 * A renewal that fails without an answer (timed out, connection lost, the
 * server in backoff: anything but CCACHE_EBUSY, "no longer yours") is
 * retried every lease_ms/10 (at least 1 ms) for as long as the lease still
 * holds by the last *confirmed* renewal: while now + lease_ms/10 is before
 * sent + lease_ms, where sent is when that renewal (or the lock) was sent.
 * A short stall of the server (shorter than lease_ms minus the renewal
 * period) so costs a tier error per failed try but not the lease.  The
 * lease is lost (counted: tier_leases_lost, tier_errors) on CCACHE_EBUSY or
 * when that time has run out.
 *
 * Locks: r_mu guards the lanes, their lists and r_stop; a leaf, never held
 * across an op or callback (docs/design.md's lock tree).
 */
#include <string.h>

#include "tier/tier.h"
#include "tier/tier_trust.h"

/* ------------------------------------------------------- the renewal threads */

static uint64_t renew_period_ns(const ccache_tier *t) { return t->ops.lease_ms / 3 * 1000000u; }

/* The spacing of retries after a renewal that failed without an answer. */
static uint64_t retry_ns(const ccache_tier *t) {
  uint64_t ms = t->ops.lease_ms / 10;
  return (ms ? ms : 1) * 1000000u;
}

/* The earliest lease of the lane due that is neither lost nor being renewed. */
static ccache__lease_rec *next_due(ccache__renew_lane *ln) {
  ccache__lease_rec *best = NULL;
  for (ccache__lease_rec *r = ln->leases; r; r = r->next)
    if (!r->busy && !r->lost && (!best || r->due_ns < best->due_ns)) best = r;
  return best;
}

static void *renewal_main(void *arg) {
  ccache__renew_lane *ln = arg;
  struct ccache__tiers *ts = ln->ts;

  ccache__lock(&ts->r_mu);
  while (!ln->w.stop) {
    ccache__lease_rec *r = next_due(ln);
    if (!r) {
      ccache__worker_sleep_locked(&ln->w, UINT64_MAX);
      continue;
    }
    uint64_t now = ccache__mono_ns();
    if (r->due_ns > now) {
      ccache__worker_sleep_locked(&ln->w, r->due_ns);
      continue; /* re-pick: the list may have changed */
    }
    /* busy keeps the record (on its compiling thread's stack) alive and
     * keeps unlock() from running while renew() does. */
    r->busy = 1;
    ccache__unlock(&ts->r_mu);
    uint64_t sent = ccache__mono_ns();
    int rc = CCACHE_OK;
    if (r->token) { /* a fresh token at each renewal */
      unsigned char tok[CCACHE__LEASE_TOKEN];
      ccache__trust_lease_token(ts->trust, r->key, ts->ns[r->tier], ccache__realtime_ms(), tok);
      CCACHE__IN_FRAME(ts, rc = r->t->ops.renew_value(r->t->state, r->lock, tok, sizeof tok));
    } else {
      CCACHE__IN_FRAME(ts, rc = r->t->ops.renew(r->t->state, r->lock));
    }
    uint64_t end = ccache__mono_ns();
    /* Retry while the lease holds by the last confirmed renewal. */
    int retry = rc != CCACHE_OK && rc != CCACHE_EBUSY &&
                end + retry_ns(r->t) < r->ok_ns + r->t->ops.lease_ms * 1000000u;
    if (rc != CCACHE_OK) {
      ccache__tier_fail(
          ts, r->tier, r->key, "renew", rc, 0,
          retry ? "a renewal failed: retried while the lease holds" : "the compile lease was lost");
      if (!retry) {
        atomic_fetch_add(&ts->leases_lost, 1);
        atomic_fetch_add(&ts->per[r->tier].leases_lost, 1);
      }
    } else {
      ccache__tier_ok(ts, r->tier);
    }
    ccache__lock(&ts->r_mu);
    r->busy = 0;
    if (rc == CCACHE_OK) r->ok_ns = sent;
    if (rc != CCACHE_OK && !retry) r->lost = 1;
    r->due_ns = end + (retry ? retry_ns(r->t) : renew_period_ns(r->t));
    ccache__worker_wake_locked(&ln->w);
  }
  ccache__unlock(&ts->r_mu);
  return NULL;
}

/* Tier i's lane for group g, made (and its thread started) if new.  NULL if
 * it cannot be: no memory or no thread (the caller counts it).  r_mu held. */
static ccache__renew_lane *lane_for(struct ccache__tiers *ts, uint32_t i, uint32_t g) {
  for (ccache__renew_lane *ln = ts->lanes; ln; ln = ln->next)
    if (ln->tier == i && ln->group == g) return ln;
  if (ts->r_stop) return NULL;
  ccache__renew_lane *ln = ccache__calloc(&ts->mem, sizeof *ln);
  if (!ln) return NULL;
  ln->ts = ts;
  ln->tier = i;
  ln->group = g;
  if (ccache__worker_init(&ln->w, &ts->r_mu) != CCACHE_OK) {
    ccache__free(&ts->mem, ln);
    return NULL;
  }
  if (ccache__worker_start_locked(&ln->w, renewal_main, ln, CCACHE__RENEW_THREAD_NAME) !=
      CCACHE_OK) {
    ccache__worker_destroy(&ln->w);
    ccache__free(&ts->mem, ln);
    return NULL;
  }
  ln->next = ts->lanes;
  ts->lanes = ln;
  return ln;
}

/* The renewal group of a lease: what the tier says, in range. */
static uint32_t group_of(const ccache_tier *t, const void *lock) {
  if (!t->ops.renew_group) return 0;
  uint32_t n = t->ops.renew_groups ? t->ops.renew_groups : 1;
  return t->ops.renew_group(t->state, lock) % n;
}

/* Register a lease taken by this thread; starts its lane's thread on first
 * use.  If that cannot start, the lease is not renewed (counted) and may
 * lapse: at worst another process compiles the same program too. */
void ccache__tier_lease_add(struct ccache__tiers *ts, ccache__lease_rec *r, uint32_t i, void *lock,
                            ccache_key key) {
  ccache_tier *t = ts->t[i];
  memset(r, 0, sizeof *r);
  r->t = t;
  r->tier = i;
  r->lock = lock;
  r->key = key;
  r->token = ts->trust && t->ops.lock_value && t->ops.renew_value;
  /* The lock was sent a little earlier, so the lease ends a little before
   * ok_ns + lease_ms: a retry sent past its end finds it gone (EBUSY). */
  r->ok_ns = ccache__mono_ns();
  r->due_ns = r->ok_ns + renew_period_ns(t);
  uint32_t g = 0;
  CCACHE__IN_FRAME(ts, g = group_of(t, lock));
  ccache__lock(&ts->r_mu);
  ccache__renew_lane *ln = lane_for(ts, i, g);
  if (ln) {
    r->lane = ln;
    r->next = ln->leases;
    if (ln->leases) ln->leases->prev = r;
    ln->leases = r;
    ccache__worker_wake_locked(&ln->w);
  }
  ccache__unlock(&ts->r_mu);
  if (!ln)
    ccache__tier_fail(ts, i, key, "renew", CCACHE_ETHREAD, 0,
                      "the lease-renewal thread could not start");
}

/* Unregister, waiting out a renew() in progress on it. */
void ccache__tier_lease_remove(struct ccache__tiers *ts, ccache__lease_rec *r) {
  ccache__renew_lane *ln = r->lane;
  if (!ln) return;
  ccache__lock(&ts->r_mu);
  while (r->busy) ccache__cond_wait(&ln->w.cv, &ts->r_mu);
  if (r->prev)
    r->prev->next = r->next;
  else
    ln->leases = r->next;
  if (r->next) r->next->prev = r->prev;
  ccache__worker_wake_locked(&ln->w);
  ccache__unlock(&ts->r_mu);
}

int ccache__tier_renewal_init(struct ccache__tiers *ts) { return ccache__mutex_init(&ts->r_mu); }

void ccache__tier_renewal_stop(struct ccache__tiers *ts) {
  ccache__lock(&ts->r_mu);
  ts->r_stop = 1;
  for (ccache__renew_lane *ln = ts->lanes; ln; ln = ln->next) ccache__worker_stop_locked(&ln->w);
  ccache__unlock(&ts->r_mu);
  /* No lane is added once r_stop is set: the list is stable. */
  for (ccache__renew_lane *ln = ts->lanes; ln; ln = ln->next) ccache__worker_join(&ln->w);
}

void ccache__tier_renewal_destroy(struct ccache__tiers *ts) {
  while (ts->lanes) {
    ccache__renew_lane *ln = ts->lanes;
    ts->lanes = ln->next;
    ccache__worker_destroy(&ln->w);
    ccache__free(&ts->mem, ln);
  }
  ccache__mutex_destroy(&ts->r_mu);
}
