/*
 * closure.c - the public closure-table calls: fetch, lease release, put,
 * remove, clear.  The mechanism behind them is table.c's.
 */
#include <string.h>

#include "core/table.h"

/* The README's pattern is a fetch, then on a miss a get-or-compile of the
 * same key: one miss, so the get-or-compile must not count it again.  The
 * thread remembers its last fetch miss (cache id and key) until its next
 * get-or-compile, which does not count a lookup when it is for that key. */
static _Thread_local struct {
  uint64_t id;
  ccache_key key;
} last_miss;

static void fetch_missed(ccache *c, ccache_key key) {
  last_miss.id = atomic_load_explicit(&c->id, memory_order_relaxed);
  last_miss.key = key;
  ccache__count_miss_evicted(c, key);
}

bool ccache__took_fetch_miss(ccache *c, ccache_key key) {
  bool same = last_miss.id == atomic_load_explicit(&c->id, memory_order_relaxed) &&
              last_miss.key.lo == key.lo && last_miss.key.hi == key.hi;
  last_miss.id = 0; /* any get-or-compile ends the pattern */
  return same;
}

/* Every fetch that is not the common case: a TTL (the clock is read), no
 * reader yet, a writer at work, a miss, an expired entry, a closed gate, bad
 * arguments.  Out of line so the common case below needs no stack frame. */
__attribute__((noinline)) static int fetch_general_k(ccache *c, const ccache_strong_key *key,
                                                     bool strong, ccache_lease *out,
                                                     const char *api) {
  CCACHE__MISUSE(ccache__misuse_cache(c, api));
  (void)api;
  if (!c || !out || !key) {
    if (out) memset(out, 0, sizeof *out);
    return CCACHE_EINVAL;
  }
  int rc = ccache__mode_ok(c, strong) ? ccache__gate(c) : CCACHE_EINVAL;
  if (CCACHE__LIKELY(rc == CCACHE_OK)) {
    uint64_t ttl = atomic_load_explicit(&c->ttl_ms, memory_order_relaxed);
    /* The clock is a user callback: read it before any lock, and only when a
     * TTL makes it matter. */
    uint64_t now = ttl == CCACHE_UNBOUNDED ? 0 : ccache__now_ms(c);
    rc = ccache__hit_lookup(c, key, now, ttl, CCACHE__COUNT_HIT | CCACHE__COUNT_MISS,
                            out); /* fills out on a hit */
    if (CCACHE__LIKELY(rc == CCACHE_OK)) {
      CCACHE__MISUSE(ccache__misuse_lease_out(c, out, key->key, api));
      return rc;
    }
    if (rc == CCACHE__EXPIRED) {
      ccache__expire_key(c, key, now);
      rc = CCACHE_MISS;
    }
    if (rc == CCACHE_MISS) fetch_missed(c, key->key);
  }
  memset(out, 0, sizeof *out);
  return rc;
}

__attribute__((noinline)) static int fetch_general(ccache *c, ccache_key key, ccache_lease *out) {
  ccache_strong_key k = ccache__fast_key(key);
  return fetch_general_k(c, &k, false, out, "ccache_fetch");
}

/* The common case - no TTL, this thread's reader known, no writer, a hit
 * with a free slot - writes the reader's flag, slot, free bit and hit count;
 * everything else goes to fetch_general (a miss is looked up again there).
 * The gate needs no test here: a thread finds its reader in its TLS array
 * only while the cache is open and not forked away (readers.c). */
int ccache_fetch(ccache *c, ccache_key key, ccache_lease *out) {
#ifdef CCACHE_CHECKED
  return fetch_general(c, key, out); /* every lease gets a token there */
#endif
  ccache__reader *r;
  unsigned hv = ccache__key_hash(key);
  if (CCACHE__UNLIKELY(!c || !out || !(r = ccache__reader_front_untimed(c)) ||
                       !ccache__reader_enter(c, r)))
    return fetch_general(c, key, out);
  ccache__entry *e;
  HASH_FIND_BYHASHVALUE(hh, c->table, &key, sizeof key, hv, e);
  uint64_t free = atomic_load_explicit(&r->free, memory_order_relaxed);
  if (CCACHE__UNLIKELY(e == NULL || free == 0)) { /* a miss, or no free slot */
    ccache__reader_exit(r);
    return fetch_general(c, key, out);
  }
  ccache__lease_fill(out, e, ccache__claim_slot(r, free, e));
  ccache__bump(&r->hits, 1);
  ccache__reader_exit(r);
  return CCACHE_OK;
}

/* ccache_fetch()'s common case for a strong cache: the same steps, with
 * all 32 bytes of the key compared.  On a fast cache nothing matches (its
 * entries' keys are 16 bytes long) and fetch_general_k refuses the call. */
int ccache_fetch_strong(ccache *c, const ccache_strong_key *key, ccache_lease *out) {
#ifdef CCACHE_CHECKED
  return fetch_general_k(c, key, true, out, "ccache_fetch_strong");
#endif
  ccache__reader *r;
  if (CCACHE__UNLIKELY(!c || !out || !key || !(r = ccache__reader_front_untimed(c)) ||
                       !ccache__reader_enter(c, r)))
    return fetch_general_k(c, key, true, out, "ccache_fetch_strong");
  unsigned hv = ccache__key_hash(key->key);
  ccache__entry *e;
  HASH_FIND_BYHASHVALUE(hh, c->table, key, sizeof *key, hv, e);
  uint64_t free = atomic_load_explicit(&r->free, memory_order_relaxed);
  if (CCACHE__UNLIKELY(e == NULL || free == 0)) {
    ccache__reader_exit(r);
    return fetch_general_k(c, key, true, out, "ccache_fetch_strong");
  }
  ccache__lease_fill(out, e, ccache__claim_slot(r, free, e));
  ccache__bump(&r->hits, 1);
  ccache__reader_exit(r);
  return CCACHE_OK;
}

__attribute__((noinline)) static void release_general(ccache *c, ccache_lease *lease) {
  CCACHE__MISUSE(ccache__misuse_cache(c, "ccache_lease_release"));
  CCACHE__MISUSE(if (c) ccache__misuse_lease_back(c, lease, "ccache_lease_release"));
  if (!c || !lease || !lease->internal_[0] || ccache__forked(c)) return;
  ccache__entry *e = lease->internal_[0];
  void *slot = lease->internal_[1];
  memset(lease, 0, sizeof *lease);
  ccache__release_slow(c, ccache__reader_get(c), e, slot);
}

/* The common case: this thread took the lease into its own reader's slot,
 * the entry is still in the table and no writer is at work: free the slot.
 * Everything else (a lease in an entry's refs, taken on another thread, a
 * slot folded since, a zeroed lease) goes to release_general.  A fork child
 * never gets here: its TLS has no reader (readers.c forgets them). */
void ccache_lease_release(ccache *c, ccache_lease *lease) {
#ifdef CCACHE_CHECKED
  release_general(c, lease);
  return;
#endif
  ccache__reader *r;
  if (CCACHE__LIKELY(c && lease && (r = ccache__reader_front(c)) != NULL)) {
    void *v = lease->internal_[1];
    ccache__entry *e = lease->internal_[0];
    if (CCACHE__LIKELY(ccache__slot_reader(v) == r && ccache__reader_enter(c, r))) {
      unsigned i = ccache__slot_index(v);
      if (CCACHE__LIKELY(r->slot[i] == e)) {
        ccache__free_slot(r, i);
        ccache__reader_exit(r);
        memset(lease, 0, sizeof *lease);
        return;
      }
      ccache__reader_exit(r);
    }
  }
  release_general(c, lease);
}

static int put_k(ccache *c, const ccache_strong_key *key, bool strong, void *closure,
                 ccache_program *p, const char *api) {
  (void)api;
  if (!c) return CCACHE_EINVAL;
  CCACHE__MISUSE(ccache__misuse_cache(c, api));
  int rc = ccache__gate(c);
  if (rc == CCACHE_OK && (!p || p->owner != c || !key || !ccache__mode_ok(c, strong)))
    rc = CCACHE_EINVAL;
  if (rc == CCACHE_OK) {
    uint64_t now = ccache__now_ms(c);
    ccache__entry *e = ccache__entry_new(c);
    /* A failed entry allocation goes through the same in-use check below:
     * the closure of the entry now under this key is that entry's, so a
     * failed re-put of it must not destroy it. */
    ccache__wsec w;
    ccache__wsec_begin_(c, &w, api);
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

int ccache_put(ccache *c, ccache_key key, void *closure, ccache_program *p) {
  ccache_strong_key k = ccache__fast_key(key);
  return put_k(c, &k, false, closure, p, __func__);
}

int ccache_put_strong(ccache *c, const ccache_strong_key *key, void *closure, ccache_program *p) {
  return put_k(c, key, true, closure, p, __func__);
}

static int remove_k(ccache *c, const ccache_strong_key *key, bool strong, const char *api) {
  (void)api;
  if (!c) return CCACHE_EINVAL;
  CCACHE__MISUSE(ccache__misuse_cache(c, api));
  if (!key || !ccache__mode_ok(c, strong)) return CCACHE_EINVAL;
  if (ccache__forked(c)) return CCACHE_EFORKED;
  ccache__wsec w;
  ccache__wsec_begin_(c, &w, api);
  ccache__entry *e = ccache__find_locked_k(c, key);
  if (e) ccache__detach_locked(c, &w, e, &c->n.removed);
  ccache__wsec_end(c, &w);
  return e ? CCACHE_OK : CCACHE_MISS;
}

int ccache_remove(ccache *c, ccache_key key) {
  ccache_strong_key k = ccache__fast_key(key);
  return remove_k(c, &k, false, __func__);
}

int ccache_remove_strong(ccache *c, const ccache_strong_key *key) {
  return remove_k(c, key, true, __func__);
}

int ccache_clear(ccache *c) {
  if (!c) return CCACHE_EINVAL;
  CCACHE__CHECK_CACHE(c);
  if (ccache__forked(c)) return CCACHE_EFORKED;
  ccache__wsec w;
  ccache__wsec_begin(c, &w);
  ccache__clear_locked(c, &w, &c->n.cleared);
  ccache__wsec_end(c, &w);
  return CCACHE_OK;
}
