/*
 * bounds.c - the three bounds and their evictions: max_items (FIFO by insert
 * index, as EMLX's CompileCache since PR #140), TTL from insert time (a hit
 * never refreshes it), and a cap on the cost of the programs the table
 * references.  All of it runs under the writer lock; destroys are left in a
 * graveyard for the caller to drain after unlocking.
 */
#include "internal.h"

bool ccache__expired(uint64_t ins_ms, uint64_t now, uint64_t ttl) {
  /* Inserted at t: a hit for now < t + ttl, a miss for now >= t + ttl.
   * Written without t + ttl, which could overflow. */
  return ttl != CCACHE_UNBOUNDED && now >= ins_ms && now - ins_ms >= ttl;
}

/* Items first (each insert evicts at most what it added), then cost: the
 * oldest entries (the table's head) leave until the charged total fits, but
 * never `keep`, the entry just inserted.  Evicting one of several entries that
 * share a program frees nothing, so the loop simply goes on.  O(evicted). */
void ccache__enforce_wlocked(ccache *c, const ccache__entry *keep, ccache__graveyard *gy) {
  while (c->items > c->max_items && c->table && c->table != keep)
    ccache__detach_wlocked(c, c->table, &c->n.evicted_capacity, gy);
  while ((c->cost.hi || c->cost.lo > c->max_cost) && c->table && c->table != keep)
    ccache__detach_wlocked(c, c->table, &c->n.evicted_cost, gy);
}

int64_t ccache__sweep(ccache *c, uint64_t now) {
  ccache__graveyard gy = {NULL, NULL};
  int64_t n = 0;
  pthread_mutex_lock(&c->wlock);
  uint64_t ttl = atomic_load(&c->ttl_ms);
  /* Expired entries are a prefix of the FIFO: stop at the first live one.
   * The readers are only taken when there is something to remove. */
  if (c->table && ccache__expired(c->table->ins_ms, now, ttl)) {
    ccache__readers_lock(c);
    while (c->table && ccache__expired(c->table->ins_ms, now, ttl)) {
      ccache__detach_wlocked(c, c->table, &c->n.evicted_ttl, &gy);
      n++;
    }
    ccache__readers_unlock(c);
  }
  pthread_mutex_unlock(&c->wlock);
  ccache__graveyard_drain(c, &gy);
  return n;
}

int64_t ccache_sweep(ccache *c) {
  if (!c) return CCACHE_EINVAL;
  if (ccache__forked(c)) return CCACHE_EFORKED;
  if (atomic_load(&c->ttl_ms) == CCACHE_UNBOUNDED) return 0;
  return ccache__sweep(c, ccache__now_ms(c));
}

int ccache_set_limits(ccache *c, uint64_t max_items, uint64_t ttl_ms, uint64_t max_cost_bytes) {
  if (!c || max_items == 0 || ttl_ms == 0 || max_cost_bytes == 0) return CCACHE_EINVAL;
  int gate = ccache__gate(c);
  if (gate != CCACHE_OK) return gate;
  /* Start the sweeper before changing anything, so a failure changes nothing. */
  int rc = ccache__sweeper_kick(c, ttl_ms);
  if (rc != CCACHE_OK) return rc;
  ccache__graveyard gy = {NULL, NULL};
  pthread_mutex_lock(&c->wlock);
  c->max_items = max_items;
  c->max_cost = max_cost_bytes;
  atomic_store(&c->ttl_ms, ttl_ms);
  ccache__readers_lock(c);
  ccache__enforce_wlocked(c, NULL, &gy);
  ccache__readers_unlock(c);
  pthread_mutex_unlock(&c->wlock);
  ccache__graveyard_drain(c, &gy);
  /* Wake it again now the new TTL is visible: the next tick uses it. */
  ccache__sweeper_kick(c, ttl_ms);
  /* A shorter TTL applies to entries already present: fetch enforces it
   * from now on and the sweeper's next tick removes them. */
  return CCACHE_OK;
}

int ccache_get_limits(ccache *c, uint64_t *max_items, uint64_t *ttl_ms, uint64_t *max_cost_bytes) {
  if (!c) return CCACHE_EINVAL;
  if (ccache__forked(c)) return CCACHE_EFORKED;
  pthread_mutex_lock(&c->wlock);
  if (max_items) *max_items = c->max_items;
  if (ttl_ms) *ttl_ms = atomic_load(&c->ttl_ms);
  if (max_cost_bytes) *max_cost_bytes = c->max_cost;
  pthread_mutex_unlock(&c->wlock);
  return CCACHE_OK;
}
