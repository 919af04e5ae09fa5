/*
 * bounds.c - the three bounds, changed and read at runtime, and the public
 * sweep: max_items (FIFO by insert index), TTL from insert time (a hit
 * never refreshes it), and a cap on the cost of the programs the table
 * references.  The evictions themselves are
 * table.c's.
 */
#include "core/internal.h"
#include "core/readers.h"

int64_t ccache_sweep(ccache *c) {
  if (!c) return CCACHE_EINVAL;
  CCACHE__CHECK_CACHE(c);
  if (ccache__forked(c)) return CCACHE_EFORKED;
  if (atomic_load(&c->ttl_ms) == CCACHE_UNBOUNDED) return 0;
  return ccache__sweep(c, ccache__now_ms(c), NULL);
}

int ccache_set_limits(ccache *c, uint64_t max_items, uint64_t ttl_ms, uint64_t max_cost_bytes) {
  CCACHE__CHECK_CACHE(c);
  if (!c || max_items == 0 || ttl_ms == 0 || max_cost_bytes == 0) return CCACHE_EINVAL;
  int gate = ccache__gate(c);
  if (gate != CCACHE_OK) return gate;
  /* Start the sweeper before changing anything, so a failure changes nothing. */
  int rc = ccache__sweeper_kick(c, ttl_ms);
  if (rc != CCACHE_OK) return rc;
  ccache__wsec w;
  ccache__wsec_begin(c, &w);
  atomic_store(&c->ttl_ms, ttl_ms);
  ccache__readers_publish(c); /* a finite TTL: fetches read the clock */
  ccache__set_bounds_locked(c, &w, max_items, max_cost_bytes);
  ccache__wsec_end(c, &w);
  /* Wake it again now the new TTL is visible: the next tick uses it.  A
   * shorter TTL applies to entries already present: fetch enforces it from
   * now on and the sweeper's next tick removes them. */
  ccache__sweeper_kick(c, ttl_ms);
  return CCACHE_OK;
}

int ccache_get_limits(ccache *c, uint64_t *max_items, uint64_t *ttl_ms, uint64_t *max_cost_bytes) {
  if (!c) return CCACHE_EINVAL;
  CCACHE__CHECK_CACHE(c);
  if (ccache__forked(c)) return CCACHE_EFORKED;
  ccache__lock(&c->wlock);
  if (max_items) *max_items = c->max_items;
  if (ttl_ms) *ttl_ms = atomic_load(&c->ttl_ms);
  if (max_cost_bytes) *max_cost_bytes = c->max_cost;
  ccache__unlock(&c->wlock);
  return CCACHE_OK;
}
