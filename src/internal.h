/*
 * internal.h - shared internal structures of ccache.  Not installed.
 *
 * Locking (always taken in this order, never the other way round):
 *   1. c->wlock   the writer lock: every change to the closure tables'
 *                 structure, the FIFO, the bounds, the cost total, the
 *                 single-flight tables and the global counters.
 *   2. stripe->mu one per reader stripe, a big-reader lock: a reader
 *                 (ccache_fetch) takes only its own thread's stripe, so hits
 *                 from different threads share no lock and no written line;
 *                 a writer changing the closure table takes all of them, in
 *                 index order.
 *   3. c->pmu     the program table, its reference counts and counters.
 * The sweeper's own c->sw_mu is never held together with any of these.
 * No user callback (compile, destroy, clock) runs under any of them; only the
 * allocator hook may.
 */
#ifndef CCACHE_INTERNAL_H
#define CCACHE_INTERNAL_H

#include "ccache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "mem.h" /* must precede uthash: it routes uthash's allocator */

/* ---------------------------------------------------------------- asserts */
/* Levelled asserts (as mimalloc): level 1 checks cheap invariants in debug
 * builds; level 2 (tests) adds expensive ones.  Never active in release
 * builds, and never used for user errors (those return statuses). */
#ifndef CCACHE_DEBUG
#if defined(CCACHE_TESTING)
#define CCACHE_DEBUG 2
#elif !defined(NDEBUG)
#define CCACHE_DEBUG 1
#else
#define CCACHE_DEBUG 0
#endif
#endif
#if CCACHE_DEBUG >= 1
#include <assert.h>
#define ccache__assert(x) assert(x)
#else
#define ccache__assert(x) ((void)0)
#endif

#define CCACHE__LIKELY(x) __builtin_expect(!!(x), 1)
#define CCACHE__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CCACHE__CACHELINE 64

/* ------------------------------------------------------------- structures */

/* A program: one native compiled program, interned under its structural key.
 * refs counts every holder: caller handles plus closure entries (in the table
 * or kept alive by a lease).  table_refs counts only the closure entries that
 * are in the table; the cost is charged while it is non-zero. */
struct ccache_program {
  UT_hash_handle hh;   /* program table, under c->pmu */
  ccache_key pkey;
  void *native;
  uint64_t cost;       /* bytes */
  uint64_t refs;       /* under c->pmu */
  uint64_t table_refs; /* under c->wlock */
  ccache *owner;       /* the cache it belongs to (put validates it) */
};

/* Entry flags. */
#define CCACHE__E_BORROWED 1u /* closure field holds the owning entry, see closure.c */

/* A closure entry.  refs counts: 1 while it is in the table, 1 per lease,
 * 1 per entry that borrows its closure.  The last one to drop it runs the
 * destroys (closure first, then the program reference). */
typedef struct ccache__entry {
  UT_hash_handle hh;   /* closure table; app order = insert order: the FIFO */
  ccache_key key;
  void *closure;       /* or the owning entry, if CCACHE__E_BORROWED */
  ccache_program *program;
  uint64_t idx;        /* insert index, global, strictly increasing */
  uint64_t ins_ms;     /* insert time, never decreasing along the FIFO */
  _Atomic uint32_t refs;
  uint32_t flags;
} ccache__entry;

/* A reader stripe: a big-reader lock, split by thread.  Each thread uses
 * one stripe (assigned round-robin on first use), so a hit locks and counts
 * on a line no other thread writes; writers take every stripe.  The first
 * CCACHE__NSTRIPES threads of the process get a stripe each; more threads
 * share, which stays correct and only costs contention. */
typedef struct ccache__stripe {
  pthread_mutex_t mu;
  uint64_t hits, misses;         /* under mu */
  _Atomic uint64_t leases_out;   /* +1 where a lease is taken, -1 where it is
                                    released: only the sum over stripes
                                    (mod 2^64) is the count */
} ccache__stripe;

/* Two lines per stripe (the adjacent-line prefetcher pairs lines), and the
 * cache itself is placed on a CCACHE__STRIPE_ALIGN boundary (cache.c). */
#define CCACHE__STRIPE_ALIGN (2 * CCACHE__CACHELINE)
typedef struct {
  _Alignas(CCACHE__STRIPE_ALIGN) ccache__stripe s;
} ccache__stripe_slot;

#define CCACHE__NSTRIPES 16u

/* A single-flight record: one compile in progress for one key. */
typedef struct ccache__flight {
  UT_hash_handle hh;
  ccache_key key;
  pthread_t owner;       /* the thread running the compile */
  uint32_t waiters;      /* threads waiting for the result */
  uint32_t left;         /* waiters that have not yet taken the result */
  int done;
  int status;
  ccache__entry *entry;   /* closure level: the entry (one ref per waiter) */
  ccache_program *program;/* program level: the program (one ref per waiter) */
} ccache__flight;

/* Global counters under c->wlock. */
typedef struct ccache__counters {
  uint64_t inserts, replaced, evicted_capacity, evicted_ttl, evicted_cost, removed, cleared;
  uint64_t compiles;
} ccache__counters;

struct ccache {
  ccache__stripe_slot stripes[CCACHE__NSTRIPES];

  /* Read by every hit and written only by open and set_limits: kept on a
   * line of its own so puts and counters do not invalidate it. */
  _Alignas(CCACHE__CACHELINE) uint64_t fork_gen;
  _Atomic int closing;          /* ccache_close() is tearing the cache down */
  _Atomic uint64_t ttl_ms;      /* read without a lock by fetch */
  ccache_clock_fn clock_ms;
  void *ctx;
  ccache_destroy_fn destroy_closure, destroy_program;
  ccache__mem mem;

  _Alignas(CCACHE__CACHELINE) pthread_mutex_t wlock;
  ccache__entry *table;         /* the closure table; its head is the oldest entry */
  pthread_cond_t flight_cv;     /* closure flights finished (with wlock) */
  ccache__flight *flights;      /* closure-level flights, under wlock */
  uint64_t items;               /* entries in the table */
  uint64_t next_idx;            /* next insert index */
  uint64_t last_ins_ms;         /* insert time of the newest insert */
  struct { uint64_t lo, hi; } cost; /* charged cost, bytes: 128 bits wide so
                                    a sum of 64-bit costs cannot wrap */
  uint64_t max_items, max_cost; /* bounds, under wlock */
  ccache__counters n;
  _Atomic uint32_t inflight;    /* compiles in progress, both levels */
  /* Counted by both levels, so under neither level's lock. */
  _Atomic uint64_t waits, compile_failures, compile_ns;

  pthread_mutex_t pmu;
  pthread_cond_t pflight_cv;    /* program flights finished (with pmu) */
  ccache_program *programs;     /* program table */
  ccache__flight *pflights;     /* program-level flights, under pmu */
  uint64_t nprograms, handles_out, program_hits, program_misses, program_compiles;

  _Atomic uint64_t closures_destroyed, programs_destroyed;

  /* sweeper */
  pthread_mutex_t sw_mu;
  pthread_cond_t sw_cv;
  pthread_t sw_thread;
  int sw_started, sw_stop;
  uint64_t sw_gen; /* bumped by set_limits to restart the tick */
  int sweeper_enabled;

  int is_default;
  void *raw; /* what the allocator returned; the cache is aligned inside it */

  struct ccache__tiers *tiers; /* persistent tiers (tier.c), NULL if none */
};

/* A list of detached entries waiting for their table reference to be
 * dropped outside every lock.  Linked through hh.next, free after delete. */
typedef struct ccache__graveyard {
  ccache__entry *head, *tail; /* destroyed in the order they left */
} ccache__graveyard;

/* --------------------------------------------------------------- cache.c */
extern _Atomic uint64_t ccache__fork_generation;
/* CCACHE_EFORKED if c was created before a fork() in this (child) process. */
static inline int ccache__forked(const ccache *c) {
  return CCACHE__UNLIKELY(c->fork_gen !=
                          atomic_load_explicit(&ccache__fork_generation, memory_order_relaxed));
}
/* The charged cost, saturated to 64 bits for the stats. */
static inline uint64_t ccache__cost_bytes(const ccache *c) {
  return c->cost.hi ? UINT64_MAX : c->cost.lo;
}

/* Calls that add to the cache (fetch, put, intern, get-or-compile,
 * set_limits) pass this gate: EFORKED in a fork child, EBUSY while
 * ccache_close() tears the cache down (its destroy callbacks may call in). */
static inline int ccache__gate(ccache *c) {
  if (ccache__forked(c)) return CCACHE_EFORKED;
  if (CCACHE__UNLIKELY(atomic_load_explicit(&c->closing, memory_order_relaxed))) return CCACHE_EBUSY;
  return CCACHE_OK;
}
void ccache__register_atfork(void);
/* Every ccache_config accepted by ccache_open() is at least this long (the
 * struct as of 0.1: the fields before the tier fields). */
#define CCACHE__CONFIG_MIN_SIZE offsetof(ccache_config, codec)
int ccache__config_valid(const ccache_config *cfg); /* 1 if ccache_open would accept it */
/* default.c: in a fork child, forget the parent's default instance (it
 * refuses every call there) so the child's first ccache_default() makes its
 * own. */
void ccache__default_after_fork(void);

/* ------------------------------------------------------------ callback.c */
/* Every user callback runs through these, with no lock held; each pushes a
 * thread-local frame so ccache_close() can refuse to run inside one. */
uint64_t ccache__now_ms(ccache *c);
uint64_t ccache__mono_ns(void);
void ccache__destroy_closure(ccache *c, void *closure);
void ccache__destroy_program(ccache *c, void *native);
typedef struct ccache__frame {
  const ccache *c;
  struct ccache__frame *prev;
} ccache__frame;
void ccache__frame_push(ccache__frame *f, const ccache *c);
void ccache__frame_pop(ccache__frame *f);
bool ccache__in_callback(const ccache *c);

/* ------------------------------------------------------------- program.c */
/* Drop one reference; destroys the program (no lock held) if it was the last. */
void ccache__program_unref(ccache *c, ccache_program *p, bool is_handle);
/* Take one more entry reference (not a handle).  Caller holds no pmu. */
void ccache__program_ref(ccache *c, ccache_program *p);
/* Interning shared by ccache_program_intern and the program flights:
 * takes ownership of native; *out +1 handle. */
int ccache__program_intern(ccache *c, ccache_key pkey, void *native, uint64_t cost,
                           ccache_program **out, bool count_lookup);
/* Look up under pmu (held by caller); +1 handle on hit. */
ccache_program *ccache__program_find_locked(ccache *c, ccache_key pkey);

/* ------------------------------------------------------------- closure.c */
unsigned ccache__key_hash(ccache_key key);
ccache__stripe *ccache__my_stripe(ccache *c);
void ccache__readers_lock(ccache *c);   /* every stripe: wlock held first */
void ccache__readers_unlock(ccache *c);
ccache__entry *ccache__entry_new(ccache *c);
void ccache__entry_free(ccache *c, ccache__entry *e);
void ccache__entry_unref(ccache *c, ccache__entry *e);
void *ccache__entry_closure(const ccache__entry *e);
void ccache__lease_fill(ccache_lease *out, ccache__entry *e);
/* Look up key under the thread's stripe lock; on a live hit take a lease
 * (counted as a hit).  Returns OK, MISS, or 2 when the entry found has
 * expired. */
int ccache__lookup(ccache *c, ccache_key key, uint64_t now, uint64_t ttl, bool count_miss,
                   ccache_lease *out);
/* Insert e (fresh, from ccache__entry_new) under wlock (it takes the readers
 * itself); e takes one program
 * reference, borrows or owns closure; runs the bounds; detached entries go to
 * gy.  Returns OK or ENOMEM (then e is untouched and still the caller's). */
int ccache__insert_locked(ccache *c, ccache__entry *e, ccache_key key, void *closure,
                          ccache_program *p, uint64_t now, ccache__graveyard *gy);
ccache__entry *ccache__find_locked(ccache *c, ccache_key key); /* wlock held */
bool ccache__closure_in_use_locked(ccache *c, ccache_key key, const void *closure);
/* The _wlocked functions below need wlock and every reader stripe held. */
void ccache__detach_wlocked(ccache *c, ccache__entry *e, uint64_t *cause, ccache__graveyard *gy);
void ccache__clear_wlocked(ccache *c, uint64_t *cause, ccache__graveyard *gy);
void ccache__graveyard_drain(ccache *c, ccache__graveyard *gy);

/* -------------------------------------------------------------- bounds.c */
bool ccache__expired(uint64_t ins_ms, uint64_t now, uint64_t ttl);
void ccache__enforce_wlocked(ccache *c, const ccache__entry *keep, ccache__graveyard *gy);
int64_t ccache__sweep(ccache *c, uint64_t now);

/* ------------------------------------------------------------- sweeper.c */
int ccache__sweeper_init(ccache *c);
int ccache__sweeper_kick(ccache *c, uint64_t ttl); /* start or wake */
void ccache__sweeper_stop(ccache *c);
void ccache__sweeper_destroy(ccache *c);

/* ---------------------------------------------------------------- check.c */
#ifdef CCACHE_TESTING
/* Walks every table and verifies counts, reference counts, FIFO order, cost
 * totals and that no expired entry is in reach at `now` (pass UINT64_MAX to
 * skip that).  Returns 0, or -1 after printing what is wrong to stderr. */
CCACHE_API int ccache__check(ccache *c, uint64_t now);
#endif

#endif /* CCACHE_INTERNAL_H */
