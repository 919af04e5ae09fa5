/*
 * sweeper.c - the TTL sweeper thread.
 *
 * Insert times never decrease along the FIFO, so the oldest entry always
 * expires first and the next deadline is known: the thread sleeps until the
 * oldest entry's insert time + ttl, sweeps the expired prefix, and sleeps
 * until the new oldest entry's deadline.  With no entry, or an unbounded TTL,
 * it sleeps until its alarm rings (alarm.c: an insert into an empty table, a
 * new TTL) or close stops it; it never wakes just to find nothing to do.
 *
 * It waits on a condition variable over CLOCK_MONOTONIC but judges expiry with
 * the cache's configured clock, like every other call; the wait is the
 * remaining time on that clock.  Destroys caused by its sweeps run on this
 * thread, outside every lock.  The thread starts the first time the TTL is
 * finite (at open or at set_limits), never when config.sweeper_thread is 0;
 * its lifecycle is base/worker.h's.
 */
#include "core/internal.h"

/* Longest single wait (a day): a far deadline is reached in several waits,
 * so the wait's arithmetic never overflows. */
#define MAX_WAIT_MS (24u * 3600u * 1000u)

/* Sleep (sw_mu held) until `next` on the cache's clock, read as `now`, or
 * until the alarm rings; UINT64_MAX: no deadline.  Counts the wake-ups that
 * a deadline caused. */
static void sleep_until(ccache *c, uint64_t now, uint64_t next) {
  if (next == UINT64_MAX) {
    ccache__worker_sleep_locked(&c->sw, UINT64_MAX);
    return;
  }
  uint64_t ms = next > now ? next - now : 0;
  if (ms > MAX_WAIT_MS) ms = MAX_WAIT_MS;
  if (!ccache__worker_sleep_locked(&c->sw, ccache__mono_ns() + ms * 1000000u))
    atomic_fetch_add_explicit(&c->sweeper_wakeups, 1, memory_order_relaxed);
}

static void *sweeper_main(void *arg) {
  ccache *c = arg;
  ccache__lock(&c->sw_mu);
  while (!c->sw.stop) {
    uint64_t gen = c->sw_gen;
    ccache__unlock(&c->sw_mu);
    uint64_t now = ccache__now_ms(c); /* a user callback: no lock held */
    uint64_t next;
    ccache__sweep(c, now, &next);
    ccache__lock(&c->sw_mu);
    /* Rung while we swept: the deadline may be earlier; look again. */
    if (c->sw.stop || gen != c->sw_gen) continue;
    sleep_until(c, now, next);
  }
  ccache__unlock(&c->sw_mu);
  return NULL;
}

int ccache__sweeper_kick(ccache *c, uint64_t ttl) {
  if (!c->sweeper_enabled) return CCACHE_OK;
  int rc = CCACHE_OK;
  ccache__lock(&c->sw_mu);
  /* Never a new thread once close has begun: it would outlive the cache. */
  if (ttl != CCACHE_UNBOUNDED && !ccache__closing(c))
    rc = ccache__worker_start_locked(&c->sw, sweeper_main, c, NULL);
  ccache__unlock(&c->sw_mu);
  ccache__alarm_ring(c);
  return rc;
}

void ccache__sweeper_stop(ccache *c) {
  ccache__lock(&c->sw_mu);
  ccache__worker_stop_locked(&c->sw);
  ccache__unlock(&c->sw_mu);
  ccache__worker_join(&c->sw);
}
