/**
 * @file ccache/stats.h
 * @brief The statistics of a cache and its event hook's events.
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest,
 * as does ccache/cache.h; it may also be included alone.
 */
#ifndef CCACHE_CCACHE_STATS_H
#define CCACHE_CCACHE_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/** @name Events
 * What the event hook (ccache_config::on_event) is given: @ref events.
 * @{ */

/** What a ccache_event reports (ccache_event::kind).  Pinned values. */
typedef enum ccache_event_kind {
  /** A compile callback is about to run (level, key). */
  CCACHE_EVENT_COMPILE_START = 1,
  /** It has returned (level, key, status the callers get, duration_ns). */
  CCACHE_EVENT_COMPILE_END = 2,
  /** A tier had a usable entry for the key (tier, tier_name, op "get"). */
  CCACHE_EVENT_TIER_HIT = 3,
  /** A tier had no entry (tier, tier_name, op "get"). */
  CCACHE_EVENT_TIER_MISS = 4,
  /** An entry was written to a tier (op "put"; reason "fill" or "store"). */
  CCACHE_EVENT_TIER_WRITE = 5,
  /** A tier op or codec call failed (op, status, err, reason); never fails a
   *  fetch.  The ops: @ref events. */
  CCACHE_EVENT_TIER_ERROR = 6,
  /** An entry failed verification and was removed (op "get", reason). */
  CCACHE_EVENT_TIER_CORRUPT = 7,
  /** An intact entry not used: a foreign runtime tag, or refused by the codec. */
  CCACHE_EVENT_TIER_REJECTED = 8,
  /** A closure entry left the table (key, cause: a ccache_cause). */
  CCACHE_EVENT_EVICT = 9
} ccache_event_kind;

/** Which table an event is about (ccache_event::level). */
typedef enum ccache_level {
  CCACHE_LEVEL_CLOSURE = 1, /**< the closure table (ccache_get_or_compile()) */
  CCACHE_LEVEL_PROGRAM = 2  /**< the program table (ccache_program_get_or_compile(), tiers) */
} ccache_level;

/** Why a closure entry left the table (ccache_event::cause).  Pinned. */
typedef enum ccache_cause {
  CCACHE_CAUSE_CAPACITY = 1, /**< max_items (counted in evicted_capacity) */
  CCACHE_CAUSE_TTL = 2,      /**< expired (evicted_ttl) */
  CCACHE_CAUSE_COST = 3,     /**< max_cost_bytes (evicted_cost) */
  CCACHE_CAUSE_REMOVED = 4,  /**< ccache_remove() (removed) */
  CCACHE_CAUSE_CLEARED = 5,  /**< ccache_clear() (cleared) */
  CCACHE_CAUSE_REPLACED = 6, /**< a later insert under the same key (replaced) */
  CCACHE_CAUSE_CLOSED = 7    /**< ccache_close() */
} ccache_cause;

/**
 * One event, passed to ccache_config::on_event; fields that do not apply are
 * 0 / NULL.  Valid only during the callback (strings are static: copy them).
 * Later versions may add fields at the end (`size`).
 */
typedef struct ccache_event {
  uint32_t size;         /**< sizeof(ccache_event) as the library was built */
  int kind;              /**< a ccache_event_kind */
  int level;             /**< a ccache_level (tier events PROGRAM, EVICT CLOSURE) */
  ccache_key key;        /**< the closure key (closure level) or program key */
  int status;            /**< COMPILE_END: what the call returns; TIER_ERROR: the op's */
  int err;               /**< TIER_ERROR: errno right after the op failed (0: none) */
  int cause;             /**< EVICT: a ccache_cause */
  uint32_t tier;         /**< tier events: index in ccache_config::tiers (n_tiers: "encode") */
  const char *tier_name; /**< tier events: ccache_tier_ops::name ("disk", "redis", ...) */
  const char *op;        /**< tier events: the op ("get", "put", ...) */
  const char *reason;    /**< a short static text, or NULL */
  uint64_t duration_ns;  /**< COMPILE_END: wall time of the callback, nested compiles included */
} ccache_event;

/**
 * The event hook (ccache_config::on_event).
 * @param ctx ccache_config::event_ctx.
 * @param ev the event (see ccache_event for its lifetime).
 * Runs with no lock held on the thread the event happens on (which:
 * @ref events), possibly on several at once: keep it
 * thread-safe and short.  It may call in, except ccache_close() on the cache.
 */
typedef void (*ccache_event_fn)(void *ctx, const ccache_event *ev);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Statistics
 * Counters are 64 bits and wrap modulo 2^64; gauges never wrap
 * (docs/design.md, "Bounds and expiry"; each field in full: @ref statistics).
 * @{ */

/** ccache_stats::read_side: hits enter without a fence; writers issue
 *  membarrier(2) (MEMBARRIER_CMD_PRIVATE_EXPEDITED).  Since 0.2. */
#define CCACHE_READ_SIDE_MEMBARRIER 1u
/** ccache_stats::read_side: membarrier(2) was refused (or turned off): a
 *  StoreLoad fence on every hit and release.  Since 0.2. */
#define CCACHE_READ_SIDE_FENCED     2u
/** In membarrier mode, the entries a put evicts or replaces while other
 *  threads read are destroyed (destroy callback, CCACHE_EVENT_EVICT) in
 *  batches of at most this many, by a later put, or at once by any other
 *  writing call (remove, clear, sweep, set_limits, close) or once no other
 *  thread has used the cache.  Since 0.2. */
#define CCACHE_RECLAIM_BATCH        128u

/** Counters (monotonic since open) and gauges (current values).  Fields past
 *  the caller's `size` are not written. */
typedef struct ccache_stats {
  uint32_t size;               /**< sizeof(ccache_stats), set by the caller; kept */
  uint64_t hits;               /**< closure lookups that returned a lease (not a waiter's).
                                    Changed in 0.2 */
  uint64_t misses;             /**< closure lookups without a live entry; hits + misses =
                                    lookups.  Changed in 0.2 */
  uint64_t inserts;            /**< puts/compiles that stored an entry, replacements included */
  uint64_t replaced;           /**< inserts that replaced an entry under the same key */
  uint64_t evicted_capacity;   /**< entries evicted by max_items */
  uint64_t evicted_ttl;        /**< entries removed because they expired */
  uint64_t evicted_cost;       /**< entries evicted by max_cost_bytes */
  uint64_t removed;            /**< entries removed by ccache_remove() */
  uint64_t cleared;            /**< entries removed by ccache_clear() */
  uint64_t items;              /**< gauge: closure entries in the table */
  uint64_t programs;           /**< gauge: programs alive (interned, not yet destroyed) */
  uint64_t programs_destroyed; /**< native programs that left the cache for good */
  uint64_t closures_destroyed; /**< closures that left the cache for good */
  uint64_t leases_out;         /**< gauge: leases not yet released */
  uint64_t cost_bytes;         /**< gauge: charged cost, bytes (saturates at UINT64_MAX) */
  uint64_t program_hits;       /**< program lookups that found it interned.  Changed in 0.2 */
  uint64_t program_misses;     /**< program lookups that did not.  Changed in 0.2 */
  uint64_t compiles;           /**< closure compile callbacks that ran (failed ones included) */
  uint64_t program_compiles;   /**< program compile callbacks that ran (failed included) */
  uint64_t compile_failures;   /**< closure compile callbacks that failed.  Changed in 0.2 */
  uint64_t waits;              /**< closure-level single-flight joins.  Changed in 0.2 */
  uint64_t compile_ns;         /**< ns in closure compiles, nested slow paths excluded.
                                    Changed in 0.2 */
  uint64_t sweeper_wakeups;    /**< sweeper waits that ended at their deadline.  Since 0.2 */
  /* ---- Persistent tiers.  Each program miss that asks the tiers ends in
   * exactly one of tier_hits / tier_misses. ---- */
  uint64_t tier_hits;          /**< program misses served by a tier (decoded, no compile) */
  uint64_t tier_misses;        /**< program misses the tiers did not serve (then compiled) */
  uint64_t tier_writes;        /**< successful puts, one per tier written (fills included) */
  uint64_t tier_errors;        /**< failed tier ops and codec calls; never a failed fetch */
  uint64_t tier_corrupt;       /**< entries that failed verification (removed) */
  uint64_t tier_bytes_read;    /**< bytes of entries returned by tier gets (framing included) */
  uint64_t tier_bytes_written; /**< bytes of entries successfully put (framing included) */
  uint64_t tier_lock_waits;    /**< program misses that waited on a tier's held compile lock */
  uint64_t tier_wait_ms_max;   /**< longest such wait, milliseconds */
  uint64_t tier_leases_lost;   /**< compile leases whose renewal failed.  Since 0.2 */
  uint64_t tier_lock_timeouts; /**< directory-tier size updates deferred past io_lock_ms,
                                    and writes withheld at its cap's bound */
  /* ---- Handles, program-level single-flight, misses of evicted keys ---- */
  uint64_t handles_out;              /**< gauge: program handles not yet released */
  uint64_t program_waits;            /**< program-level single-flight joins */
  uint64_t program_compile_failures; /**< program compile callbacks that failed */
  uint64_t program_compile_ns;       /**< ns in program compiles, nested slow paths
                                          and tier I/O excluded */
  uint64_t misses_evicted;           /**< misses on a key among the last 64 evicted
                                          for capacity or cost: a large share of
                                          misses means a bound below the working set */
  /* ---- Untrusted sizes ---- */
  /** Tier entries over ccache_config::tier_max_entry_bytes found (a miss;
   *  often counted twice per miss), and programs not written for it. */
  uint64_t tier_oversize;
  /* ---- Signed entries ---- */
  uint64_t tier_rejected;    /**< lookups that found an intact entry ccache_config::trust
                                  refused (not decoded, copied or removed; a writer looks
                                  again after its compile lock, so often twice per miss) */
  uint64_t tier_unpublished; /**< programs a reader (trusted keys, no signing key) compiled
                                  and did not write to its tiers */
  /* ---- Read side ---- */
  /** How hits are ordered against writers, the same for every cache of the
   *  process (decided at its first ccache_open()): CCACHE_READ_SIDE_MEMBARRIER
   *  (no fence on the hit path; writers use Linux's membarrier(2)) or
   *  CCACHE_READ_SIDE_FENCED (the kernel refused membarrier, or
   *  CLOSURE_CACHE_MEMBARRIER=off was set: one fence per hit, as before). */
  uint64_t read_side;
  uint64_t reader_blocks;  /**< times a writer stopped this cache's hits to change or
                                reclaim the table: in membarrier mode about one per
                                CCACHE_RECLAIM_BATCH evicting or replacing puts while
                                other threads read; in fenced mode one per change */
  uint64_t heavy_barriers; /**< of those, the ones that issued membarrier(2) (another
                                thread had a reader of this cache) */
} ccache_stats;

/**
 * @brief Every field of ccache_stats after `size`, in struct order, as
 *        `X(name)`: for code that mirrors the struct (ccache_stats_format()
 *        and the bindings use it), so a field appended to ccache_stats,
 *        and appended here, reaches them all.  Since 0.2.
 */
// clang-format off
#define CCACHE_STATS_FIELDS(X) \
  X(hits) \
  X(misses) \
  X(inserts) \
  X(replaced) \
  X(evicted_capacity) \
  X(evicted_ttl) \
  X(evicted_cost) \
  X(removed) \
  X(cleared) \
  X(items) \
  X(programs) \
  X(programs_destroyed) \
  X(closures_destroyed) \
  X(leases_out) \
  X(cost_bytes) \
  X(program_hits) \
  X(program_misses) \
  X(compiles) \
  X(program_compiles) \
  X(compile_failures) \
  X(waits) \
  X(compile_ns) \
  X(sweeper_wakeups) \
  X(tier_hits) \
  X(tier_misses) \
  X(tier_writes) \
  X(tier_errors) \
  X(tier_corrupt) \
  X(tier_bytes_read) \
  X(tier_bytes_written) \
  X(tier_lock_waits) \
  X(tier_wait_ms_max) \
  X(tier_leases_lost) \
  X(tier_lock_timeouts) \
  X(handles_out) \
  X(program_waits) \
  X(program_compile_failures) \
  X(program_compile_ns) \
  X(misses_evicted) \
  X(tier_oversize) \
  X(tier_rejected) \
  X(tier_unpublished) \
  X(read_side) \
  X(reader_blocks) \
  X(heavy_barriers)
// clang-format on

/**
 * @brief Prepare a stats struct: zero it and set its size (sizeof *s).
 * @param s caller-owned.  Since 0.2.
 */
CCACHE_API void ccache_stats_init(ccache_stats *s);

/**
 * @brief Snapshot the statistics: each field exact, the set near-simultaneous.
 * @param c the cache; NULL (CCACHE_EINVAL) or a forked one (CCACHE_EFORKED)
 *        zeroes the fields.
 * @param out from ccache_stats_init(): only its first out->size bytes are
 *        written (out->size kept).
 * @return CCACHE_OK; CCACHE_EINVAL with a detail, nothing written, for NULL
 *         out or a size never set (below offsetof(ccache_stats, hits) + 8 or
 *         above CCACHE_STRUCT_SIZE_MAX); CCACHE_EFORKED.  (void before 0.2.)
  * @ingroup basic
 */
CCACHE_API int ccache_stats_get(ccache *c, ccache_stats *out);

/**
 * @brief Format a snapshot as one line of space-separated `name=value` pairs
 * (every field within s->size, in struct order, no newline), for logs.
 * @param s a snapshot from ccache_stats_get().
 * @param buf receives the line, NUL-terminated, truncated to @p len - 1
 *        bytes; may be NULL when @p len is 0.
 * @param len bytes at @p buf.
 * @return the line's length (as snprintf: >= len means truncated), or
 *         CCACHE_EINVAL (also a size ccache_stats_get() refuses).  Since 0.2.
 */
CCACHE_API int ccache_stats_format(const ccache_stats *s, char *buf, size_t len);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_STATS_H */
