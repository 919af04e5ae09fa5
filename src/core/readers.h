/*
 * readers.h - the closure table's reader side (readers.c): the per-thread
 * reader, the TLS array that finds it, and the inline pieces of a read-side
 * section that the hit path (table.h, closure.c) needs.  Included by
 * the files that use the reader side, after (or instead of) internal.h.
 */
#ifndef CCACHE_READERS_H
#define CCACHE_READERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"

/* Store 1 to *flag, then a StoreLoad fence (a writer's, and a reader's in
 * the fenced mode); and the load that follows it on the other side of the
 * pairing.  ThreadSanitizer does not model fences, so its builds use
 * sequentially consistent accesses instead: the same ordering, which it
 * understands. */
static inline void ccache__store_fence(_Atomic uint32_t *flag, uint32_t v) {
#if defined(__SANITIZE_THREAD__)
  atomic_store_explicit(flag, v, memory_order_seq_cst);
#else
  atomic_store_explicit(flag, v, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
#endif
}
static inline uint32_t ccache__load_fenced(_Atomic uint32_t *flag) {
#if defined(__SANITIZE_THREAD__)
  return atomic_load_explicit(flag, memory_order_seq_cst);
#else
  return atomic_load_explicit(flag, memory_order_acquire);
#endif
}

/* A cache's writer_waiting: bit 0, a writer blocks the read side; bit 1,
 * the fenced mode (membarrier refused: set at open for the cache's life).
 * So in membarrier mode a section's one test of the word for 0 is all it
 * pays, and the fenced mode costs no instruction there: its bit sends every
 * section to the fence in ccache__reader_enter_fenced(). */
#define CCACHE__WW_WRITER 1u
#define CCACHE__WW_FENCED 2u

/* Whether c's read side uses fences (the fallback); fixed at open. */
static inline bool ccache__fenced(ccache *c) {
  return atomic_load_explicit(&c->writer_waiting, memory_order_relaxed) & CCACHE__WW_FENCED;
}

/* A reader's half: store 1 to *flag, ordered before the load that follows
 * only by the compiler: the processor may still let the load pass the
 * store, and the writer's heavy barrier (membarrier.c) is what orders them
 * when it matters.  ThreadSanitizer builds: a sequentially consistent
 * store, in both modes (it does not see membarrier; docs/design.md). */
static inline void ccache__reader_announce(_Atomic uint32_t *flag) {
#if defined(__SANITIZE_THREAD__)
  atomic_store_explicit(flag, 1, memory_order_seq_cst);
#else
  atomic_store_explicit(flag, 1, memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* A reader: one per (thread, cache), made on the thread's first call on the
 * cache (readers.c).  Everything a hit writes is here, on lines only its
 * thread writes: the read-side flag, the counts, and the lease slots.
 *
 * A lease taken by a hit sits in one of this reader's slots instead of in
 * the entry's shared reference count (as Linux's percpu_ref keeps counts per
 * CPU while the object is live).  When an entry leaves the table, the writer
 * (with every reader outside its section) folds the slots that hold it into
 * the entry's refs; from then on releases count on refs, exactly. */
#define CCACHE__SLOTS        32u
#define CCACHE__SLOT_MASK    ((UINT64_C(1) << CCACHE__SLOTS) - 1)
/* Readers are aligned to two lines (the adjacent-line prefetcher pairs
 * lines), so a lease can name its reader and slot in one word (reader |
 * index) and a release tells its own reader's slot from the address alone.
 * What a writer reads of every reader - `active`, `free`, the link to the
 * next - is on the first line, so blocking n readers touches n lines. */
#define CCACHE__READER_ALIGN 128u
struct ccache__reader {
  _Alignas(CCACHE__READER_ALIGN) _Atomic uint32_t active; /* in a read-side section */
  uint32_t pad_;
  /* Bit i: slot i is free.  Written by the owner (and by writers while it is
   * outside its sections) with plain stores; read by stats. */
  _Atomic uint64_t free;
  _Atomic uint64_t hits, misses; /* written by the owner only, read by stats */
  /* Outstanding leases this thread counts outside its slots: taken into an
   * entry's refs (+1) or released from one (-1), mod 2^64.  The leases out
   * are these, plus the occupied slots, over every reader. */
  _Atomic uint64_t leases;
  ccache *cache;
  uint32_t index;                            /* in the cache's array of readers, under wlock */
  struct ccache__entry *slot[CCACHE__SLOTS]; /* a lease each */
  /* Registry (readers.c), not touched by hits or writers' sections. */
  void *raw;                              /* what the allocator returned */
  struct ccache__reader *tnext, **tpprev; /* its thread's readers, under the registry lock */
};
_Static_assert(__builtin_offsetof(ccache__reader, leases) < CCACHE__CACHELINE,
               "what writers read of a reader must fit its first line");
_Static_assert(CCACHE__SLOTS <= CCACHE__READER_ALIGN, "slot index must fit the alignment");

/* The calling thread's last few readers, by cache id (readers.c).  Initial
 * exec TLS: one instruction to reach it, also from the shared library. */
#define CCACHE__TLS_READERS 4u
typedef struct ccache__tls {
  uint64_t id[CCACHE__TLS_READERS];
  ccache__reader *r[CCACHE__TLS_READERS];
  unsigned next; /* round-robin replacement */
} ccache__tls;
extern _Thread_local ccache__tls ccache__tls_readers __attribute__((tls_model("initial-exec")));

void ccache__readers_init(ccache *c);
/* When close begins: a new id, so no thread finds its reader in its TLS any
 * more and every call takes the general path (which checks the gate). */
void ccache__readers_renew_id(ccache *c);
/* After ttl_ms changed: whether fetches may take the fast path (fast_id). */
void ccache__readers_publish(ccache *c);
/* At close: forget every reader of c (they are freed). */
void ccache__readers_destroy(ccache *c);
/* The calling thread's reader for c, made on first use; NULL when that
 * allocation failed (the caller then counts under wlock). */
ccache__reader *ccache__reader_find(ccache *c);
/* The rest of the array, moving what it finds to the front (readers.c). */
ccache__reader *ccache__reader_peek_rest(uint64_t id);
/* Only the front of the array: what the fast paths look at (no call, so
 * they need no stack frame); the general paths then move the reader there. */
static inline ccache__reader *ccache__reader_front(ccache *c) {
  if (CCACHE__LIKELY(ccache__tls_readers.id[0] ==
                     atomic_load_explicit(&c->id, memory_order_relaxed))) {
    ccache__reader *r = ccache__tls_readers.r[0];
    if (!r) __builtin_unreachable(); /* only found readers are remembered */
    return r;
  }
  return NULL;
}
/* The same, for the fetch fast path: no reader while the TTL is finite (the
 * clock must be read), whatever the TLS holds. */
#define CCACHE__NO_ID UINT64_MAX
static inline ccache__reader *ccache__reader_front_untimed(ccache *c) {
  if (CCACHE__LIKELY(ccache__tls_readers.id[0] ==
                     atomic_load_explicit(&c->fast_id, memory_order_relaxed))) {
    ccache__reader *r = ccache__tls_readers.r[0];
    if (!r) __builtin_unreachable(); /* ids are never CCACHE__NO_ID */
    return r;
  }
  return NULL;
}
/* Only the TLS array: never registers (for callers holding wlock). */
static inline ccache__reader *ccache__reader_peek(ccache *c) {
  ccache__reader *r = ccache__reader_front(c);
  return r ? r : ccache__reader_peek_rest(atomic_load_explicit(&c->id, memory_order_relaxed));
}
static inline ccache__reader *ccache__reader_get(ccache *c) {
  ccache__reader *r = ccache__reader_peek(c);
  return CCACHE__LIKELY(r != NULL) ? r : ccache__reader_find(c);
}
/* A read-side section: inside one, entries are not freed, and the table
 * changes only as readers may see it change (docs/design.md, "The writer's
 * rule").  The store and load pair with the writer's (Dekker): either the
 * writer sees this reader active and waits, or the reader sees the writer
 * and takes the slow path (false: not entered; use wlock instead). */
static inline bool ccache__reader_enter_fenced(ccache *c, ccache__reader *r, uint32_t ww) {
  if (ww == CCACHE__WW_FENCED) {  /* the fallback, and no writer seen yet: fence, look again */
#if !defined(__SANITIZE_THREAD__) /* there the store and loads are seq_cst */
    atomic_thread_fence(memory_order_seq_cst);
#endif
    if (!(ccache__load_fenced(&c->writer_waiting) & CCACHE__WW_WRITER)) return true;
  }
  atomic_store_explicit(&r->active, 0, memory_order_release);
  return false;
}
static inline bool ccache__reader_enter(ccache *c, ccache__reader *r) {
  ccache__reader_announce(&r->active);
  uint32_t ww = ccache__load_fenced(&c->writer_waiting);
  if (CCACHE__LIKELY(ww == 0)) return true;
  return ccache__reader_enter_fenced(c, r, ww);
}
static inline void ccache__reader_exit(ccache__reader *r) {
  atomic_store_explicit(&r->active, 0, memory_order_release);
}
/* Private counters: a plain load and store, no read-modify-write. */
static inline void ccache__bump(_Atomic uint64_t *n, uint64_t d) {
  atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + d, memory_order_relaxed);
}

/* Mark slot i of r free (only its owner thread, in a section, or a writer
 * with readers outside theirs).  The entry pointer stays: a release matches
 * a lease to its slot by that pointer, so whoever must stop a lease's
 * release from matching (a fold) clears it too. */
static inline void ccache__free_slot(ccache__reader *r, unsigned i) {
  atomic_store_explicit(&r->free,
                        atomic_load_explicit(&r->free, memory_order_relaxed) | (UINT64_C(1) << i),
                        memory_order_relaxed);
}
/* Count a lookup, or n leases taken (negative: released), on this thread's
 * reader, or under wlock when it has none.  The _locked ones need wlock. */
void ccache__reader_count(ccache *c, bool hit);
void ccache__reader_leases_locked(ccache *c, int64_t n);
/* Writers (wlock held): block / unblock every read-side section.  Blocking
 * counts in c->reader_blocks; in membarrier mode it issues the heavy
 * barrier (counted in c->heavy_barriers) unless no other thread has a
 * reader of c. */
void ccache__readers_block(ccache *c);
void ccache__readers_unblock(ccache *c);
/* Whether a thread other than the caller has a reader of c (wlock held: no
 * thread can make one meanwhile). */
bool ccache__readers_others(ccache *c);
/* Readers blocked: the leases in slots on entries that have left the table
 * (E_DETACHED) move into those entries' refs. */
void ccache__readers_fold_locked(ccache *c);
/* Sums over every reader and the retired counts (wlock held). */
void ccache__readers_sum(ccache *c, uint64_t *hits, uint64_t *misses, uint64_t *leases);
/* How many slots of every reader hold e (wlock held, readers blocked; the
 * checker's). */
uint64_t ccache__readers_slots_of(ccache *c, const struct ccache__entry *e);

#endif
