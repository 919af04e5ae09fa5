/*
 * table.h - the hit path: the lookup inside ccache_fetch() and the release of
 * a lease taken by one, inlined into closure.c's public calls so a hit is one
 * call deep.  Part of the closure table's mechanism (table.c owns the slow
 * paths and everything that changes the table).
 *
 * What a hit writes: its thread's reader - the `active` word, one slot and
 * its free bit, the hit count - and nothing else.  No atomic
 * read-modify-write on shared memory; the one serialising instruction is the
 * StoreLoad fence of ccache__reader_enter() (on the thread's own stack).
 */
#ifndef CCACHE_HIT_H
#define CCACHE_HIT_H

#include "core/internal.h"
#include "core/readers.h"

/* Claim the lowest free slot of r (free: r->free as just loaded, non-zero)
 * for a lease on e.  @return the lease's second word: r | slot index
 * (readers are 128-aligned). */
static inline void *ccache__claim_slot(ccache__reader *r, uint64_t free, ccache__entry *e) {
  unsigned i = (unsigned)__builtin_ctzll(free);
  atomic_store_explicit(&r->free, free & (free - 1), memory_order_relaxed);
  r->slot[i] = e;
  return (void *)((uintptr_t)r | i);
}

/* A lease on e, taken inside a read-side section or under wlock: in one of
 * the reader's slots if one is free, else in e->refs (counted on the reader).
 * Filled here, while e's flags cannot change. */
static inline void ccache__take_lease(ccache__reader *r, ccache__entry *e, ccache_lease *out) {
  uint64_t free = r ? atomic_load_explicit(&r->free, memory_order_relaxed) : 0;
  void *slot = NULL;
  if (CCACHE__LIKELY(free != 0)) {
    slot = ccache__claim_slot(r, free, e);
  } else {
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    if (r) ccache__bump(&r->leases, 1);
  }
  ccache__lease_fill(out, e, slot);
}

/* The general lookup: key's first c->klen bytes are compared (all 256 bits
 * in a strong cache). */
static inline int ccache__hit_lookup(ccache *c, const ccache_strong_key *key, uint64_t now,
                                     uint64_t ttl, unsigned count, ccache_lease *out) {
  unsigned hv = ccache__key_hash(key->key);
  ccache__reader *r = ccache__reader_get(c);
  if (CCACHE__UNLIKELY(!r || !ccache__reader_enter(c, r)))
    return ccache__lookup_slow(c, r, key, hv, now, ttl, count, out);
  ccache__entry *e;
  HASH_FIND_BYHASHVALUE(hh, c->table, key, c->klen, hv, e);
  if (CCACHE__LIKELY(e != NULL) && !ccache__expired(e->ins_ms, now, ttl)) {
    ccache__take_lease(r, e, out);
    if (count & CCACHE__COUNT_HIT) ccache__bump(&r->hits, 1);
    ccache__reader_exit(r);
    return CCACHE_OK;
  }
  if (count & CCACHE__COUNT_MISS) ccache__bump(&r->misses, 1);
  ccache__reader_exit(r);
  return e ? CCACHE__EXPIRED : CCACHE_MISS;
}

/* A lease's second internal word: its reader and slot, or NULL (in refs). */
static inline ccache__reader *ccache__slot_reader(const void *v) {
  return (ccache__reader *)((uintptr_t)v & ~(uintptr_t)(CCACHE__READER_ALIGN - 1));
}
static inline unsigned ccache__slot_index(const void *v) {
  return (unsigned)((uintptr_t)v & (CCACHE__READER_ALIGN - 1));
}

/* In a section or under wlock: if the lease is in r's own slot, free it.  A
 * slot folded into its entry's refs (the entry left the table) was cleared,
 * and one taken since holds another entry: neither matches. */
static inline bool ccache__own_slot(ccache__reader *r, ccache__entry *e, const void *v) {
  if (!r || !v || ccache__slot_reader(v) != r) return false;
  unsigned i = ccache__slot_index(v);
  if (r->slot[i] != e) return false;
  ccache__free_slot(r, i);
  r->slot[i] = NULL;
  return true;
}

#endif
