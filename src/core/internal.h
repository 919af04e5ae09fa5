/*
 * internal.h - the cache's internal structures, and each file's internal
 * calls grouped by floor.  Not installed.  docs/design.md explains the why.
 *
 * Floors: a file calls only files on its own floor or below, and files never
 * call each other in a circle.  The floors are listed in docs/design.md (the
 * one list; .ci/layers.py checks the call graph against it); the prototypes
 * below are grouped by them.
 *
 * Locking: the lock tree at the top of docs/design.md names every mutex and
 * how they nest (here: readers.c's readers_mu, then c->wlock, then the reader
 * side, then c->pmu; c->sw_mu with none of them).  No user callback runs
 * under any of them; only the allocator hook may.
 */
#ifndef CCACHE_INTERNAL_H
#define CCACHE_INTERNAL_H

#include "ccache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/callback.h"
#include "base/debug.h"
#include "base/detail.h"
#include "base/keyhash.h"
#include "base/mem.h" /* must precede uthash: it routes uthash's allocator */
#include "core/misuse.h"
#include "base/sync.h"
#include "base/worker.h"

#define CCACHE__CACHELINE  64
/* Evicted keys remembered for ccache_stats::misses_evicted. */
#define CCACHE__EVICT_RING 64u

/* ------------------------------------------------------------- structures */

/* A program: one native compiled program, interned under its structural key.
 * refs counts every holder: caller handles plus closure entries (in the table
 * or kept alive by a lease).  table_refs counts only the closure entries that
 * are in the table; the cost is charged while it is non-zero. */
struct ccache_program {
  UT_hash_handle hh; /* program table, under c->pmu */
  void *native;
  uint64_t cost;       /* bytes */
  uint64_t refs;       /* under c->pmu */
  uint64_t table_refs; /* under c->wlock (table.c's charging) */
  ccache *owner;       /* the cache it belongs to (put validates it) */
  /* The key, last: hashed, and c->klen bytes from it compared, so in a
   * strong cache (whose programs are allocated with pcheck[0]) all 256
   * bits. */
  ccache_key pkey;
  ccache_key pcheck[];
};

/* Entry flags. */
#define CCACHE__E_BORROWED    1u /* closure field holds the owning entry, see table.c */
/* Left the table and reclaimed: refs is exact, releases count there.  Set
 * with the reader side blocked (table.c's reclaim). */
#define CCACHE__E_DETACHED    2u
/* An entry's `gone`: it left the table (written and read by writers only,
 * under wlock), and why (a ccache_cause), for the eviction event: bits 8..15. */
#define CCACHE__E_GONE        1u
#define CCACHE__E_CAUSE_SHIFT 8u

/* A closure entry.  Its references: 1 while it is in the table, 1 per
 * lease, 1 per entry that borrows its closure.  While it is in the table,
 * leases taken by hits sit in the readers' slots and refs holds the rest
 * (mod 2^32: a lease released on another thread than its taker's subtracts
 * here, so refs alone may read low); when it leaves, the slots are folded in
 * and refs is exact.  The last reference runs the destroys (closure first,
 * then the program reference). */
typedef struct ccache__entry {
  UT_hash_handle hh; /* closure table; app order = insert order: the FIFO */
  void *closure;     /* or the owning entry, if CCACHE__E_BORROWED */
  ccache_program *program;
  uint64_t idx;    /* insert index, global, increasing (mod 2^64) */
  uint64_t ins_ms; /* insert time, never decreasing along the FIFO */
  _Atomic uint32_t refs;
  uint16_t flags; /* CCACHE__E_BORROWED, _DETACHED: read by sections */
  uint16_t gone;  /* CCACHE__E_GONE | cause: writers only */
  /* The table key, last: a strong cache's entries are allocated with
   * check[0] too, the rest of the 256-bit digest, right after it, and the
   * table compares c->klen bytes from key on (both halves); a fast cache's
   * entries stay at their size. */
  ccache_key key;
  ccache_key check[];
} ccache__entry;
_Static_assert(offsetof(ccache__entry, check) == offsetof(ccache__entry, key) + sizeof(ccache_key),
               "an entry's check must follow its key");
_Static_assert(offsetof(struct ccache_program, pcheck) ==
                   offsetof(struct ccache_program, pkey) + sizeof(ccache_key),
               "a program's check must follow its key");

/* A thread's reader of one cache, and its TLS array: readers.h. */
typedef struct ccache__reader ccache__reader;

/* A single-flight record: one compile in progress for one key (flight.c). */
typedef struct ccache__flight {
  UT_hash_handle hh;
  ccache_strong_key key; /* its first klen bytes are the flight's key */
  pthread_t owner;       /* the thread running the compile */
  uint32_t waiters;      /* threads waiting for the result */
  uint32_t left;         /* waiters that have not yet taken the result */
  int done;
  int status;
  ccache__entry *entry;    /* closure level: the entry (one ref per waiter) */
  ccache_program *program; /* program level: the program (one ref per waiter) */
  char *detail;            /* on failure: the owner's error detail, copied to each waiter */
} ccache__flight;

/* One level's single-flight state (flight.c): its lock, the condition its
 * waiters sleep on, and its flights in progress, by key. */
typedef struct ccache__flights {
  ccache__mutex *mu;      /* the level's lock (wlock or pmu), not owned */
  const ccache__mem *mem; /* the cache's allocator */
  pthread_cond_t cv;      /* a flight of this level finished */
  ccache__flight *table;  /* keys compared over their first klen bytes */
  uint32_t klen;          /* c->klen */
} ccache__flights;

/* A list of detached entries waiting for their table reference to be
 * dropped outside every lock.  Linked through hh.next, free after delete. */
typedef struct ccache__graveyard {
  ccache__entry *head, *tail; /* destroyed in the order they left */
} ccache__graveyard;

/* Global counters under c->wlock. */
typedef struct ccache__counters {
  uint64_t inserts, replaced, evicted_capacity, evicted_ttl, evicted_cost, removed, cleared;
  uint64_t compiles;
} ccache__counters;

struct ccache {
  /* Read by every hit, written only by writers, open and set_limits: on a
   * line of its own so puts and counters do not invalidate it. */
  _Alignas(CCACHE__CACHELINE) uint64_t fork_gen;
  /* Unique per open, and again when close begins: keys the threads' TLS
   * arrays of readers, so a fresh id sends every thread's next call down the
   * general path, which checks the gate (readers.c). */
  _Atomic uint64_t id;
  /* id while ttl_ms is unbounded, else CCACHE__NO_ID: the fetch fast path
   * compares its TLS entry with this one word, so it needs no TTL test. */
  _Atomic uint64_t fast_id;
  _Atomic uint32_t writer_waiting; /* a writer blocks the read side (readers.c) */
  /* fork_gen while the cache is open; CCACHE__GATE_CLOSED while close tears
   * it down.  One compare lets every adding call past (ccache__gate). */
  _Atomic uint64_t gate;
  _Atomic uint64_t ttl_ms; /* read without a lock by fetch */
  ccache_clock_fn clock_ms;
  void *ctx;
  ccache_destroy_fn destroy_closure, destroy_program;
  ccache__mem mem;
  /* The key mode (ccache_config::key_mode), fixed at open: the bytes of a
   * ccache_strong_key every table compares, 16 (fast) or 32 (strong).  The
   * fast hit path never reads it: a strong entry's uthash key length (32)
   * never matches its 16-byte lookups. */
  uint32_t klen;
  bool strong;

  _Alignas(CCACHE__CACHELINE) ccache__mutex wlock;
  ccache__entry *table;    /* the closure table; its head is the oldest entry */
  ccache__flights flights; /* closure-level flights, under wlock */
  uint64_t items;          /* entries in the table */
  uint64_t next_idx;       /* next insert index */
  uint64_t last_ins_ms;    /* insert time of the newest insert */
  struct {
    uint64_t lo, hi;
  } cost;                       /* charged cost, bytes: 128 bits wide so
                                    a sum of 64-bit costs cannot wrap */
  uint64_t max_items, max_cost; /* bounds, under wlock */
  ccache__counters n;
  _Atomic uint32_t inflight; /* compiles in progress, both levels */
  /* Per level, counted outside the levels' locks. */
  _Atomic uint64_t waits, compile_failures, compile_ns;
  _Atomic uint64_t program_waits, program_compile_failures, program_compile_ns;
  /* Misses on keys among the last CCACHE__EVICT_RING evicted for capacity or
   * cost (table.c): written under wlock, read by misses without it. */
  _Atomic uint64_t misses_evicted;
  _Atomic uint64_t evict_ring[CCACHE__EVICT_RING];
  uint32_t evict_next; /* under wlock */
  /* Entries that left the table and are not yet destroyed (held by leases):
   * what ccache_close_ex(CCACHE_CLOSE_ABANDON) destroys.  Linked through
   * their bucket-chain pointers, free once an entry is out of the table. */
  ccache__mutex limbo_mu;
  ccache__entry *limbo;
  /* Detached, not yet reclaimed (table.c's writer's rule), linked through
   * hh.next; the blockings of the reader side, and the heavy barriers among
   * them.  Under wlock. */
  ccache__graveyard pending;
  uint32_t npending;
  uint64_t reader_blocks, heavy_barriers;
  /* The event hook (ccache_config::on_event), NULL when unset. */
  ccache_event_fn on_event;
  void *event_ctx;

  ccache__mutex pmu;
  ccache_program *programs; /* program table */
  ccache__flights pflights; /* program-level flights, under pmu */
  uint64_t nprograms, handles_out, program_hits, program_misses, program_compiles;

  _Atomic uint64_t closures_destroyed, programs_destroyed;
  /* The readers (readers.c): a packed array, so a writer blocking them walks
   * pointers on a few lines and then one line per reader.  And the counts of
   * readers gone (threads that exited, calls that found no reader).  All
   * under wlock. */
  ccache__reader **readers;
  uint32_t nreaders, readers_cap;
  uint64_t hits_retired, misses_retired, leases_retired;

  /* sweeper (sweeper.c) */
  ccache__mutex sw_mu;
  ccache__worker sw; /* under sw_mu */
  uint64_t sw_gen;   /* bumped by the alarm: the next deadline may be earlier */
  int sweeper_enabled;
  _Atomic uint64_t sweeper_wakeups; /* waits that ended at their deadline */

  int is_default;
  void *raw; /* what the allocator returned; the cache is aligned inside it */

  struct ccache__tiers *tiers; /* persistent tiers (tier.c), NULL if none */
};

/* A writer section (table.c): wlock held from begin to end; the reader side
 * is blocked from the first structural change on; the destroys it caused run
 * at end, after every lock is released, on the calling thread. */
typedef struct ccache__wsec {
  ccache__graveyard gy;
  bool readers_blocked;
  bool defer;      /* a put: what it detaches may wait for the next batch (table.c) */
  bool ring_alarm; /* an insert into an empty table: the sweeper's next
                      deadline is now this entry's */
  const char *api; /* the public call, for the checked build's messages */
} ccache__wsec;

/* ================================================================ floor 0 */

/* ----------------------------------------------------------------- fork.c */
extern _Atomic uint64_t ccache__fork_generation;
void ccache__fork_register(void);
/* CCACHE_EFORKED if c was created before a fork() in this (child) process. */
static inline int ccache__forked(const ccache *c) {
  return CCACHE__UNLIKELY(c->fork_gen !=
                          atomic_load_explicit(&ccache__fork_generation, memory_order_relaxed));
}
/* ----------------------------------------------------------- membarrier.c */
/* true: membarrier(2) registered, read-side sections need no fence; set by
 * the first ccache__read_side_init() (every open), again in a fork child. */
extern bool ccache__asym;
void ccache__read_side_init(void);
/* Every running thread of the process executes a full fence (asym only). */
void ccache__heavy_barrier(void);

/* Calls that add to the cache (fetch, put, intern, get-or-compile,
 * set_limits) pass this gate: EFORKED in a fork child, EBUSY while
 * ccache_close() tears the cache down (its destroy callbacks may call in). */
#define CCACHE__GATE_CLOSED UINT64_MAX
static inline int ccache__gate(ccache *c) {
  if (CCACHE__LIKELY(atomic_load_explicit(&c->gate, memory_order_relaxed) ==
                     atomic_load_explicit(&ccache__fork_generation, memory_order_relaxed)))
    return CCACHE_OK;
  return ccache__forked(c) ? CCACHE_EFORKED : CCACHE_EBUSY;
}
static inline bool ccache__closing(const ccache *c) {
  return atomic_load_explicit(&c->gate, memory_order_relaxed) == CCACHE__GATE_CLOSED;
}
/* The charged cost, saturated to 64 bits for the stats. */
static inline uint64_t ccache__cost_bytes(const ccache *c) {
  return c->cost.hi ? UINT64_MAX : c->cost.lo;
}

/* A fast call's key as the tables take it (the check is not compared). */
static inline ccache_strong_key ccache__fast_key(ccache_key key) {
  ccache_strong_key k = {key, {0, 0}};
  return k;
}
/* Whether a call of this kind of key (strong or not) suits the cache: a
 * fast cache takes ccache_key calls only, a strong one the *_strong calls. */
static inline bool ccache__mode_ok(const ccache *c, bool strong) { return c->strong == strong; }

/* Every ccache_config accepted by ccache_open() is at least this long (the
 * struct as of 0.1: the fields before the tier fields). */
#define CCACHE__CONFIG_MIN_SIZE offsetof(ccache_config, codec)
/* The key mode of a config (fast when its size ends before the field). */
static inline uint32_t ccache__config_key_mode(const ccache_config *cfg) {
  return cfg->size >= offsetof(ccache_config, key_mode) + sizeof cfg->key_mode ? cfg->key_mode
                                                                               : CCACHE_KEYS_FAST;
}

/* ================================================================ floor 1 */

/* --------------------------------------------------------------- invoke.c */
/* The clock and destroy callbacks run through these, with no lock held; each
 * pushes a callback frame (base/callback.h) so ccache_close() can refuse to
 * run inside one. */
uint64_t ccache__now_ms(ccache *c);
void ccache__destroy_closure(ccache *c, void *closure);
void ccache__destroy_program(ccache *c, void *native);
/* The event hook, with no lock held; callers test c->on_event first, so an
 * unset hook costs one test off the hit path. */
void ccache__event_emit(ccache *c, ccache_event *ev);
void ccache__event_compile(ccache *c, int kind, int level, ccache_key key, int status,
                           uint64_t duration_ns);

/* ---------------------------------------------------------------- alarm.c */
int ccache__alarm_init(ccache *c);
void ccache__alarm_destroy(ccache *c);
/* Wake the sweeper: its next deadline may have moved earlier. */
void ccache__alarm_ring(ccache *c);

/* --------------------------------------------------------------- flight.c */
/* Single-flight records, for both levels; the caller of every *_locked
 * function here holds the level's lock (fl->mu). */
/* A level's state, empty; CCACHE_OK, or a status of ccache__cond_init. */
int ccache__flights_init(ccache__flights *fl, ccache__mutex *mu, const ccache__mem *mem,
                         uint32_t klen);
void ccache__flights_destroy(ccache__flights *fl);
ccache__flight *ccache__flight_find_locked(ccache__flights *fl, const ccache_strong_key *key);
/* A new flight owned by this thread, added to the table; NULL on ENOMEM. */
ccache__flight *ccache__flight_start_locked(ccache__flights *fl, const ccache_strong_key *key);
bool ccache__flight_mine(const ccache__flight *f);
/* Join: count the wait in *waits and sleep until the owner publishes;
 * returns the flight's status with the lock held.  Take the result, then
 * flight_leave. */
int ccache__flight_wait_locked(ccache__flights *fl, ccache__flight *f, _Atomic uint64_t *waits);
/* The last waiter to take its result frees the flight. */
void ccache__flight_leave_locked(ccache__flights *fl, ccache__flight *f);
/* The owner's side, results for the waiters already in place: end the
 * flight and wake the waiters.  Returns true if the caller must free f
 * (nobody waits) with ccache__flight_free() once it has unlocked. */
bool ccache__flight_publish_locked(ccache__flights *fl, ccache__flight *f, int status);
void ccache__flight_free(const ccache__mem *mem, ccache__flight *f);
/* The owner: keep a copy of this thread's detail for the waiters (before
 * publishing a failure; without memory they get a shorter line). */
void ccache__flight_keep_detail(const ccache__mem *mem, ccache__flight *f);
/* A waiter that got a failure: the owner's detail becomes this thread's. */
void ccache__flight_take_detail(const ccache__flight *f);

/* One compile callback run, either level, around the callback itself (run
 * by CCACHE__USER_CALL, timed): its time without the nested get-or-compile
 * calls that compiled or waited (so no time counts at two levels, nor a
 * wait as a compile), and whether it recorded an error detail. */
typedef struct ccache__run {
  struct ccache__run *prev; /* the compile this one is nested in */
  uint64_t nested_ns, seq0;
} ccache__run;
/* Emits COMPILE_START when the hook is set. */
void ccache__run_begin(ccache *c, ccache__run *r, int level, ccache_key key);
/* Given the callback's wall time, returns its own time in ns. */
uint64_t ccache__run_end(ccache__run *r, uint64_t wall_ns);
/* The time of a get-or-compile slow path that may run inside a compile:
 * start returns 0 when no compile runs on this thread (nothing to charge). */
uint64_t ccache__nested_start(void);
void ccache__nested_end(uint64_t start);
/* What a failed compile's callers get: its own status when it returned the
 * status of a failure recorded while it ran (a nested ccache call's, or
 * ccache_compile_fail()'s), else CCACHE_ECOMPILE; and a detail line saying
 * why in every case. */
int ccache__run_status(const ccache__run *r, int crc, const char *api, ccache_key key);
/* At the end of a public get-or-compile: a failure without a detail
 * recorded since `seq0` gets one; the detail stands for rc either way. */
int ccache__goc_finish(int rc, uint64_t seq0, const char *api, ccache_key key);

/* ================================================================ floor 2 */

/* -------------------------------------------------------------- program.c */
/* Drop one reference; destroys the program (no lock held) if it was the last. */
void ccache__program_unref(ccache *c, ccache_program *p, bool is_handle);
/* An abandoning close: destroys every program still interned. */
void ccache__abandon_programs(ccache *c);
/* Take one more entry reference (not a handle).  Caller holds no pmu. */
void ccache__program_ref(ccache *c, ccache_program *p);

/* ================================================================ floor 3 */

/* -------------------------------------------------------------- readers.c */
/* In core/readers.h (it needs struct ccache, above). */

/* ---------------------------------------------------------------- entry.c */
ccache__entry *ccache__entry_new(ccache *c);
void ccache__entry_free(ccache *c, ccache__entry *e);
/* Drop one reference; the last destroys the entry (no lock held). */
void ccache__entry_unref(ccache *c, ccache__entry *e);
/* A detached entry joins the limbo (wlock held). */
void ccache__limbo_link_locked(ccache *c, ccache__entry *e);
/* An abandoning close: destroys the entries only abandoned leases hold. */
uint64_t ccache__abandon_entries(ccache *c);

/* ================================================================ floor 4 */

/* ---------------------------------------------------------------- table.c */
void ccache__wsec_begin_(ccache *c, ccache__wsec *w, const char *api);
#define ccache__wsec_begin(c, w) ccache__wsec_begin_((c), (w), __func__)
/* Unblock the reader side early (e.g. before waiting on a condition with
 * wlock); the next structural change blocks it again. */
void ccache__wsec_unblock(ccache *c, ccache__wsec *w);
void ccache__wsec_end(ccache *c, ccache__wsec *w);

/* Inserted at t: a hit for now < t + ttl, a miss for now >= t + ttl.  Written
 * without t + ttl, which could overflow. */
static inline bool ccache__expired(uint64_t ins_ms, uint64_t now, uint64_t ttl) {
  return ttl != CCACHE_UNBOUNDED && now >= ins_ms && now - ins_ms >= ttl;
}
/* The closure an entry runs (its own, or its owner's when borrowed). */
static inline void *ccache__entry_closure(const ccache__entry *e) {
  if (e->flags & CCACHE__E_BORROWED) return ((const ccache__entry *)e->closure)->closure;
  return e->closure;
}
/* Fill a lease on e.  @p slot is its second word: the reader and slot index
 * holding it (table_inline.h's ccache__claim_slot), or NULL when it is counted in
 * e->refs. */
static inline void ccache__lease_fill(ccache_lease *out, ccache__entry *e, void *slot) {
  out->closure = ccache__entry_closure(e);
  out->native = e->program->native;
  out->internal_[0] = e;
  out->internal_[1] = slot;
}
/* Look up key; on a live hit take a lease (counted as a hit).  Returns OK,
 * MISS, or CCACHE__EXPIRED.  The hit path proper is table_inline.h's, inlined into
 * ccache_fetch(); these are its out-of-line forms and slow paths. */
#define CCACHE__EXPIRED    2
/* What a lookup counts: a hit, a miss (either, both or neither). */
#define CCACHE__COUNT_HIT  1u
#define CCACHE__COUNT_MISS 2u
int ccache__lookup(ccache *c, const ccache_strong_key *key, uint64_t now, uint64_t ttl,
                   unsigned count, ccache_lease *out);
int ccache__lookup_slow(ccache *c, ccache__reader *r, const ccache_strong_key *key, unsigned hv,
                        uint64_t now, uint64_t ttl, unsigned count, ccache_lease *out);
/* A release that is not its own reader's slot, or met a writer: destroys run
 * here if it was the last reference of an entry that has left the table. */
void ccache__release_slow(ccache *c, ccache__reader *r, ccache__entry *e, void *slot);
/* The rest need a writer section (wlock held). */
ccache__entry *ccache__find_locked_k(ccache *c, const ccache_strong_key *key);
/* The same for a fast key. */
ccache__entry *ccache__find_locked(ccache *c, ccache_key key);
bool ccache__closure_in_use_locked(ccache *c, const ccache_strong_key *key, const void *closure);
/* n leases on an entry in the table; fills out (if not NULL) with one. */
void ccache__lease_locked(ccache *c, ccache__entry *e, uint32_t n, ccache_lease *out);
/* Insert e (fresh, from ccache__entry_new): it takes one program reference,
 * borrows or owns closure; then the bounds run.  OK or ENOMEM (then e is
 * untouched and still the caller's). */
int ccache__insert_locked(ccache *c, ccache__wsec *w, ccache__entry *e,
                          const ccache_strong_key *key, void *closure, ccache_program *p,
                          uint64_t now);
void ccache__detach_locked(ccache *c, ccache__wsec *w, ccache__entry *e, uint64_t *cause);
/* A miss on key: counts misses_evicted if a bound evicted it recently. */
void ccache__count_miss_evicted(ccache *c, ccache_key key);
void ccache__clear_locked(ccache *c, ccache__wsec *w, uint64_t *cause);
/* New bounds: evicts what no longer fits (capacity, then cost). */
void ccache__set_bounds_locked(ccache *c, ccache__wsec *w, uint64_t max_items, uint64_t max_cost);
/* Removes key if it is still there and expired at now (a fetch saw it). */
void ccache__expire_key(ccache *c, const ccache_strong_key *key, uint64_t now);
/* Removes the expired prefix of the FIFO; returns how many left.  If next is
 * not NULL it receives the new oldest entry's deadline on the cache's clock
 * (insert time + ttl, saturated), or UINT64_MAX when there is none. */
int64_t ccache__sweep(ccache *c, uint64_t now, uint64_t *next);
#ifdef CCACHE_TESTING
/* Called after every writer section when set (check.c sets it). */
extern void (*ccache__after_write_hook)(ccache *c);
#endif

/* ================================================================ floor 5 */

/* -------------------------------------------------------------- sweeper.c */
int ccache__sweeper_kick(ccache *c, uint64_t ttl); /* start if needed, and ring */
void ccache__sweeper_stop(ccache *c);

/* -------------------------------------------------------------- closure.c */
/* Whether this thread's last fetch on c missed key (and forget it): a
 * get-or-compile right after it does not count the miss again. */
bool ccache__took_fetch_miss(ccache *c, ccache_key key);

/* ================================================================ floor 7 */

/* ---------------------------------------------------------------- cache.c */
/* Everything ccache_open() checks of a config (default.c checks the same). */
bool ccache__config_valid(const ccache_config *cfg);

/* ========================================================== test-only, top */

/* ---------------------------------------------------------------- check.c */
#ifdef CCACHE_TESTING
/* Walks every table and verifies counts, reference counts, FIFO order, cost
 * totals and that no expired entry is in reach at `now` (pass UINT64_MAX to
 * skip that).  Returns 0, or -1 after printing what is wrong to stderr. */
CCACHE_API int ccache__check(ccache *c, uint64_t now);
/* Set a counter to v (test-only: drives counters near 2^64 that calls could
 * never reach).  field: "next_idx", "last_ins_ms", "hits", "misses", or a
 * ccache_stats counter name.  Returns 0, or -1 for an unknown field. */
CCACHE_API int ccache__seed(ccache *c, const char *field, uint64_t v);
/* Run the checker after every k-th writer section of every cache (0: never);
 * a failure aborts.  Also set from CLOSURE_CACHE_DEBUG_CHECK_EVERY at start-up. */
CCACHE_API void ccache__debug_check_every(uint64_t k);
#endif

#endif /* CCACHE_INTERNAL_H */
