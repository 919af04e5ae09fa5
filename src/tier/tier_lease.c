/*
 * tier_lease.c - how long a cache without keys honours a busy lease.
 *
 * A cache without keys cannot tell who holds a lease: any value may be a
 * holder's.  What it can check is the lease's time to live.  Every holder
 * of the tier sets it to lease_ms and renews it to lease_ms, so a lease
 * with no expiry, or with more than lease_ms + CCACHE__LEASE_SKEW_MS left
 * (the skew covering a fleet whose lease_ms differ a little), was set by
 * none of them: it is honoured that long at most, then the waiter
 * compiles without the lock.  A squatter who sets lease_ms itself and
 * keeps renewing it is not told apart (that takes keys: tier_trust.c).
 * Asked once per wait, on the first busy answer; runs on the miss's owner
 * with no lock held.
 */
#include <errno.h>

#include "tier/tier.h"
#include "tier/tier_trust.h"

uint64_t ccache__tier_wait_bound(struct ccache__tiers *ts, uint32_t i, ccache_key key) {
  ccache_tier *t = ts->t[i];
  uint64_t cap = t->ops.lease_ms + CCACHE__LEASE_SKEW_MS;
  /* With keys only a signed, recent token is waited for (tier.c). */
  if (ts->trust || !t->lease_ttl || !t->ops.lease_ms || t->ops.wait_ms <= cap)
    return t->ops.wait_ms;
  int64_t ttl = -2;
  int rc;
  errno = 0;
  CCACHE__IN_FRAME(ts, rc = t->lease_ttl(t->state, key, &ttl));
  if (rc < 0) {
    ccache__tier_fail(ts, i, key, "lease", rc, errno, NULL);
    return t->ops.wait_ms;
  }
  if (ttl == -2 || (ttl >= 0 && (uint64_t)ttl <= cap))
    return t->ops.wait_ms; /* gone, or a holder's */
  if (ts->on_event)
    ccache__tier_event(ts, CCACHE_EVENT_TIER_REJECTED, i, key, "lease", CCACHE_OK, 0,
                       "a lease longer than lease_ms + skew: honoured that long at most");
  return cap;
}
