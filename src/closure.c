/*
 * closure.c - the public closure-table calls: fetch, lease release, put,
 * remove, clear.  The mechanism behind them is table.c's.
 */
#include <string.h>

#include "internal.h"

int ccache_fetch(ccache *c, ccache_key key, ccache_lease *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!c || !out) return CCACHE_EINVAL;
  int gate = ccache__gate(c);
  if (gate != CCACHE_OK) return gate;
  uint64_t ttl = atomic_load_explicit(&c->ttl_ms, memory_order_relaxed);
  /* The clock is a user callback: read it before any lock, and only when a
   * TTL makes it matter. */
  uint64_t now = ttl == CCACHE_UNBOUNDED ? 0 : ccache__now_ms(c);
  int rc = ccache__lookup(c, key, now, ttl, true, out);
  if (rc == CCACHE__EXPIRED) {
    ccache__expire_key(c, key, now);
    rc = CCACHE_MISS;
  }
  return rc;
}

void ccache_lease_release(ccache *c, ccache_lease *lease) {
  if (!c || !lease || !lease->internal_[0] || ccache__forked(c)) return;
  ccache__entry *e = lease->internal_[0];
  memset(lease, 0, sizeof *lease);
  ccache__lease_drop(c, e);
}

int ccache_put(ccache *c, ccache_key key, void *closure, ccache_program *p) {
  if (!c) return CCACHE_EINVAL;
  int rc = ccache__gate(c);
  if (rc == CCACHE_OK && (!p || p->owner != c)) rc = CCACHE_EINVAL;
  if (rc == CCACHE_OK) {
    uint64_t now = ccache__now_ms(c);
    ccache__entry *e = ccache__entry_new(c);
    /* A failed entry allocation goes through the same in-use check below:
     * a re-put of the very closure the entry holds must not destroy it
     * (found by tests/test_alloc_fail.c: it was destroyed while still in
     * the table, then again when the entry left). */
    ccache__wsec w;
    ccache__wsec_begin(c, &w);
    rc = e ? ccache__insert_locked(c, &w, e, key, closure, p, now) : CCACHE_ENOMEM;
    bool in_use = rc != CCACHE_OK && ccache__closure_in_use_locked(c, key, closure);
    ccache__wsec_end(c, &w);
    if (rc == CCACHE_OK) return rc;
    ccache__entry_free(c, e);
    if (in_use) return rc;
  }
  ccache__destroy_closure(c, closure);
  return rc;
}

int ccache_remove(ccache *c, ccache_key key) {
  if (!c) return CCACHE_EINVAL;
  if (ccache__forked(c)) return CCACHE_EFORKED;
  ccache__wsec w;
  ccache__wsec_begin(c, &w);
  ccache__entry *e = ccache__find_locked(c, key);
  if (e) ccache__detach_locked(c, &w, e, &c->n.removed);
  ccache__wsec_end(c, &w);
  return e ? CCACHE_OK : CCACHE_MISS;
}

int ccache_clear(ccache *c) {
  if (!c) return CCACHE_EINVAL;
  if (ccache__forked(c)) return CCACHE_EFORKED;
  ccache__wsec w;
  ccache__wsec_begin(c, &w);
  ccache__clear_locked(c, &w, &c->n.cleared);
  ccache__wsec_end(c, &w);
  return CCACHE_OK;
}
