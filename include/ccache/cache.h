/**
 * @file ccache/cache.h
 * @brief The cache: configuration, the program and closure tables,
 * single-flight get-or-compile, statistics, the default instance.
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest;
 * it may also be included alone.
 */
#ifndef CCACHE_CCACHE_CACHE_H
#define CCACHE_CCACHE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/** @name Configuration
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

/** Bound value meaning "no bound" (for max_items, ttl_ms, max_cost_bytes). */
#define CCACHE_UNBOUNDED UINT64_MAX

/** Largest `size` a ccache_config or ccache_stats may claim (more: never set
 *  up, refused).  Option structs are checked only for a minimum size. */
#define CCACHE_STRUCT_SIZE_MAX 4096u

/** What ccache_config_init() writes in ccache_config::magic ("ccfg"). */
#define CCACHE_CONFIG_MAGIC 0x63636667u

/**
 * Destroy callback for a closure or a native program.
 * @param obj the closure or native program exactly as given; never NULL
 *            (NULL ones are counted, not passed).  Yours again: free it.
 * @param ctx ccache_config::ctx.
 * Runs once per object the cache owned, with no lock held, on the thread
 * whose call caused it (the sweeper's for expiry), before that call returns;
 * a closure before its program.  It may call in, except ccache_close() on
 * the same cache (CCACHE_EBUSY).
 */
typedef void (*ccache_destroy_fn)(void *obj, void *ctx);

/**
 * Clock callback: current time in milliseconds of a monotonic clock.
 * @param ctx ccache_config::ctx.
 * @return the time, in milliseconds.
 * Called with no lock held, from any thread; read by inserts always, by
 * lookups and sweeps only while ttl_ms is finite (docs/design.md, "Bounds and
 * expiry").  May step back (insert times are clamped).  It may call in,
 * except ccache_close().
 */
typedef uint64_t (*ccache_clock_fn)(void *ctx);

/**
 * Allocator hook, allocation half (set both alloc and free, or neither).
 * @param alloc_ctx ccache_config::alloc_ctx.
 * @param size bytes wanted.
 * @return at least @p size bytes aligned for any object type, or NULL
 *         (CCACHE_ENOMEM, or a thread's reader takes the locked path).
 * Called from any thread, possibly under an internal lock: never call in.
 */
typedef void *(*ccache_alloc_fn)(void *alloc_ctx, size_t size);
/**
 * Allocator hook, release half.
 * @param alloc_ctx ccache_config::alloc_ctx.
 * @param ptr what alloc returned (never NULL), given back once.
 * As alloc: never call in.  The cache keeps errno across it.
 */
typedef void (*ccache_free_fn)(void *alloc_ctx, void *ptr);

struct ccache_trust; /* ccache/trust.h */

/** ccache_config::trust_flags: accept unsigned entries from tiers that
 *  others can write (a Redis tier; a custom tier that does not declare
 *  CCACHE_TIER_PRIVATE), with no trust object.  Without it, and without
 *  ccache_config::trust, such a cache fails ccache_open() with
 *  CCACHE_EINVAL.  Since 0.2. */
#define CCACHE_TRUST_UNSIGNED 0x1u

/**
 * Options for ccache_open() (and ccache_default_init()).  Initialise with
 * ccache_config_init(), then set the fields you need.  The cache copies the
 * struct; it need not outlive ccache_open().  The pointers it copies (the
 * callbacks, ctx, alloc_ctx) must stay valid until ccache_close() returns
 * CCACHE_OK (for the default instance: until the process exits).
 */
typedef struct ccache_config {
  /** sizeof(ccache_config), from ccache_config_init(): lets the struct grow.
   *  0.2.0's layout (every field up to trust_flags) is the first with a size
   *  and a magic and the smallest accepted; a field appended after it gets
   *  its default when a caller's size ends before it. */
  uint32_t size;
  /** CCACHE_CONFIG_MAGIC, from ccache_config_init().  Since 0.2. */
  uint32_t magic;
  /** Non-zero (default 1): a sweeper thread removes expired entries at each
   *  deadline, from the first finite ttl_ms until ccache_close(); 0: only
   *  ccache_sweep() and lookups do (docs/design.md, "Bounds and expiry"). */
  int sweeper_thread;
  /** Most closure entries, items: CCACHE_UNBOUNDED (default) or >= 1; the
   *  oldest inserts leave first (FIFO; hits do not refresh).  Changeable. */
  uint64_t max_items;
  /** Time to live from insert time, ms: CCACHE_UNBOUNDED (default) or >= 1;
   *  expired from now >= t + ttl_ms (hits do not refresh).  Changeable. */
  uint64_t ttl_ms;
  /** Cap on the summed cost of the programs the entries reference (each
   *  once), bytes: CCACHE_UNBOUNDED (default) or >= 1.  Changeable. */
  uint64_t max_cost_bytes;
  ccache_destroy_fn destroy_closure; /**< closure destructor (ccache_destroy_fn); NULL: none */
  ccache_destroy_fn destroy_program; /**< native program destructor; NULL: none */
  void *ctx;                         /**< passed to the destroys and clock_ms */
  /** Monotonic milliseconds; NULL (default): CLOCK_MONOTONIC. */
  ccache_clock_fn clock_ms;
  /** Allocator for everything the cache allocates (set both or neither);
   *  NULL: malloc.  Tier objects use malloc (@ref configuration). */
  ccache_alloc_fn alloc;
  ccache_free_fn free; /**< its release half; NULL: free */
  void *alloc_ctx;     /**< passed to alloc and free */
  /** Serialisation callbacks, copied at open; NULL (default): no tiers. */
  const ccache_codec *codec;
  /** Everything a program depends on that its key does not hold (compiler,
   *  flags, target, codegen version), e.g. "myrt 3.1; gcc 12.2 -O2": entries
   *  of another tag are never loaded.  Hashed at open; NULL means "". */
  const char *runtime_tag;
  /** Programs that compiled in less than this are not written to the tiers,
   *  microseconds.  Default 1000; 0 stores every program. */
  uint64_t tier_min_compile_us;
  /** The tiers, fastest first; the cache owns them after a CCACHE_OK open
   *  (closed by ccache_close()), the caller on error.  Array not kept. */
  ccache_tier *const *tiers;
  /** Number of tiers, 0 (default) .. CCACHE_MAX_TIERS; > 0 needs a codec. */
  uint32_t n_tiers;
  /** A ccache_key_mode, fixed for the cache's life: CCACHE_KEYS_FAST (0,
   *  default) or CCACHE_KEYS_STRONG.  Since 0.2. */
  uint32_t key_mode;
  /** The event hook (see ccache_event_fn); NULL (default): no events, and
   *  nothing is spent on them. */
  ccache_event_fn on_event;
  /** Passed to on_event; never dereferenced by the cache. */
  void *event_ctx;
  /** Largest tier entry read or written (the whole framed entry), bytes:
   *  default CCACHE_TIER_MAX_ENTRY_DEFAULT, 1 .. CCACHE_UNBOUNDED (the
   *  format's own 2^40-byte limit).  Checked before a buffer of that size
   *  exists; an entry over it is a miss and a program over it is not written
   *  (tier_oversize +1; @ref untrusted_sizes).  Fixed. */
  uint64_t tier_max_entry_bytes;
  /** Signing and trusted keys (ccache/trust.h), copied at ccache_open() (at
   *  the default instance's creation after ccache_default_init()); NULL
   *  (default): tiers are trusted by declaration.  Since 0.2. */
  const struct ccache_trust *trust;
  /** CCACHE_TRUST_* flags (0 default).  Since 0.2.  With a codec, a cache
   *  whose tiers include one that others can write (any tier but the
   *  directory tier and custom tiers declaring CCACHE_TIER_PRIVATE) opens
   *  only with ccache_config::trust (entries must be signed) or with
   *  CCACHE_TRUST_UNSIGNED here (whoever can write that tier can hand this
   *  process a program to run).  Ignored when ccache_config::trust is set:
   *  signatures are then checked on every tier. */
  uint32_t trust_flags;
  /* The end of 0.2.0's layout.  Fields appended after it go below, each
   * read only when the caller's size covers it (else its default). */
} ccache_config;

/** Default ccache_config::tier_max_entry_bytes: 64 MiB, room to spare over a
 *  large fused program (sizes: @ref untrusted_sizes). */
#define CCACHE_TIER_MAX_ENTRY_DEFAULT ((uint64_t)64 << 20)

/** Most tiers one cache may have (ccache_config::n_tiers). */
#define CCACHE_MAX_TIERS 8u

/**
 * @brief Fill @p cfg with the defaults: size = sizeof *cfg, magic =
 * CCACHE_CONFIG_MAGIC, every bound CCACHE_UNBOUNDED, sweeper_thread 1, no
 * callbacks, no allocator hook, CLOCK_MONOTONIC, no codec, no tiers,
 * tier_min_compile_us 1000, key_mode CCACHE_KEYS_FAST, tier_max_entry_bytes
 * CCACHE_TIER_MAX_ENTRY_DEFAULT, trust_flags 0.
 * @param cfg caller-owned.
  * @ingroup basic
 */
CCACHE_API void ccache_config_init(ccache_config *cfg);

/**
 * @brief Create a cache; with a codec, each tier's attach op runs here (a
 * failed one disables that tier: tier_errors +1, not an error of the open);
 * a finite ttl_ms with sweeper_thread starts the sweeper.
 * @param cfg options from ccache_config_init(), copied (see ccache_config for
 *        the pointers it keeps).
 * @param out receives the cache, the caller's until ccache_close() returns
 *        CCACHE_OK.  Untouched on error.
 * @return CCACHE_OK; CCACHE_EINVAL with a detail (a NULL cfg or out; size
 *         or magic, then a bound of 0, one allocator hook, a bad tier array, a codec with a
 *         NULL callback or tiers without one, a trust object with no key,
 *         a tier others can write with neither ccache_config::trust nor
 *         CCACHE_TRUST_UNSIGNED: the detail names the tier and both ways);
 *         CCACHE_ENOTSUP (a trust object without libsodium: fail closed);
 *         CCACHE_ENOMEM; CCACHE_ETHREAD (a thread or lock).  On every error
 *         the caller keeps its tiers and nothing is left running.
  * @ingroup basic
 */
CCACHE_API int ccache_open(const ccache_config *cfg, ccache **out);

/**
 * @brief Close a cache: join its threads, destroy every closure and program
 * it holds (closures first), close its tiers in order, free it.
 * @param c the cache; NULL is a no-op returning CCACHE_OK.
 * @return CCACHE_OK (c is freed); CCACHE_EBUSY, nothing changed, while a
 *         lease, handle or compile is out or from inside a callback of this
 *         cache (with a detail; the checked build lists them);
 *         CCACHE_EINVAL for the default instance.
 * Not concurrently with, nor followed by, any other call on @p c.  Destroys
 * it runs may call in; calls that would add get CCACHE_EBUSY (docs/design.md,
 * "Close and fork").
  * @ingroup basic
 */
CCACHE_API int ccache_close(ccache *c);

/** ccache_close_ex() flag: close even while leases or program handles are
 *  out, abandoning them. */
#define CCACHE_CLOSE_ABANDON 1u

/**
 * @brief ccache_close(), with flags.  CCACHE_CLOSE_ABANDON: the caller
 * declares no lease or handle of @p c will be used again; close proceeds as
 * if they were released (using one later is a use after free).  Why:
 * docs/design.md, "Leases nobody can release".
 * @param c the cache; NULL is a no-op returning CCACHE_OK.
 * @param flags 0 (exactly ccache_close()) or CCACHE_CLOSE_ABANDON.
 * @return as ccache_close(), but with CCACHE_CLOSE_ABANDON leases and handles
 *         out are no EBUSY (a compile in flight or a callback still is).
 *         Since 0.2.
 */
CCACHE_API int ccache_close_ex(ccache *c, unsigned flags);

/**
 * @brief Change the bounds at runtime: all validated first, then applied at
 * once in one writer section (entries over them leave, destroys on this
 * thread); a finite ttl_ms starts the sweeper if allowed.
 * @param c the cache.
 * @param max_items items, CCACHE_UNBOUNDED or >= 1.
 * @param ttl_ms milliseconds, CCACHE_UNBOUNDED or >= 1.
 * @param max_cost_bytes bytes, CCACHE_UNBOUNDED or >= 1.
 * @return CCACHE_OK; CCACHE_EINVAL; CCACHE_ETHREAD or CCACHE_ENOMEM (the
 *         sweeper could not start: nothing changed); CCACHE_EBUSY;
 *         CCACHE_EFORKED.
 */
CCACHE_API int ccache_set_limits(ccache *c, uint64_t max_items, uint64_t ttl_ms,
                                 uint64_t max_cost_bytes);

/**
 * @brief Read the current bounds (one consistent set).
 * @param c the cache.
 * @param max_items receives the item bound; may be NULL.
 * @param ttl_ms receives the TTL, ms; may be NULL.
 * @param max_cost_bytes receives the cost cap, bytes; may be NULL.
 * @return CCACHE_OK; CCACHE_EINVAL; CCACHE_EFORKED (nothing written).
 */
CCACHE_API int ccache_get_limits(ccache *c, uint64_t *max_items, uint64_t *ttl_ms,
                                 uint64_t *max_cost_bytes);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Program table
 * Programs are interned under their own structural key (the "dispatch" key:
 * op, shapes, dtypes, attributes, target; never a call site), so many
 * closure entries share one program.
 * @{ */

/**
 * @brief Intern a native program under @p pkey and return a handle (+1).
 * An existing @p pkey returns its program (+1, program_hits) and destroys
 * @p native unless it is that pointer; a new one counts program_misses.  The
 * program lives while a handle, entry or lease refers to it.
 * @param c the cache.
 * @param pkey the program's structural key.
 * @param native the native program, owned by the cache from now on whenever
 *        @p c is not NULL, on error too (destroyed); may be NULL.
 * @param cost_bytes estimate of its native memory, bytes; charged against
 *        max_cost_bytes while an entry refers to it.  Ignored if @p pkey exists.
 * @param out receives the handle on CCACHE_OK (NULL on CCACHE_ENOMEM);
 *        release it with ccache_program_release().
 * @return CCACHE_OK; CCACHE_EINVAL; CCACHE_ENOMEM; CCACHE_EBUSY;
 *         CCACHE_EFORKED.
 */
CCACHE_API int ccache_program_intern(ccache *c, ccache_key pkey, void *native, uint64_t cost_bytes,
                                     ccache_program **out);

/**
 * @brief Look up a program by key (no tier, no compile); counts
 * program_hits / program_misses.
 * @param c the cache.
 * @param pkey the program's key.
 * @param out receives a handle (+1) on CCACHE_OK, NULL otherwise; release it
 *        with ccache_program_release().
 * @return CCACHE_OK; CCACHE_MISS; CCACHE_EINVAL; CCACHE_EBUSY; CCACHE_EFORKED.
 */
CCACHE_API int ccache_program_fetch(ccache *c, ccache_key pkey, ccache_program **out);

/**
 * @brief The native program behind a handle.
 * @param p a live handle; NULL returns NULL.
 * @return the native pointer (the cache's: never free it), valid while
 *         @p p is held.
 */
CCACHE_API void *ccache_program_native(const ccache_program *p);

/**
 * @brief Give back one program handle; on the last reference the program
 * leaves and destroy_program runs on this thread before this returns.
 * @param c the cache the handle came from; NULL is a no-op.
 * @param p the handle; NULL is a no-op.  Invalid afterwards; a handle a
 *        compile handed to the cache is the cache's (do not release it).
  * @ingroup basic
 */
CCACHE_API void ccache_program_release(ccache *c, ccache_program *p);

/**
 * @brief ccache_program_intern() for a strong cache.
 * @param c the cache.
 * @param pkey the strong key.
 * @param native as ccache_program_intern() (the cache's, on error too).
 * @param cost_bytes as ccache_program_intern() (bytes).
 * @param out as ccache_program_intern().
 * @return as ccache_program_intern().
  * @ingroup advanced
 */
CCACHE_API int ccache_program_intern_strong(ccache *c, const ccache_strong_key *pkey, void *native,
                                            uint64_t cost_bytes, ccache_program **out);

/**
 * @brief ccache_program_fetch() for a strong cache.
 * @param c the cache.
 * @param pkey the strong key.
 * @param out as ccache_program_fetch().
 * @return as ccache_program_fetch().
  * @ingroup advanced
 */
CCACHE_API int ccache_program_fetch_strong(ccache *c, const ccache_strong_key *pkey,
                                           ccache_program **out);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Closure table
 * @{ */

/**
 * @brief Store @p closure under @p key, running @p p (the entry takes its own
 * reference).  A present key is replaced (`replaced`; its leases stay
 * valid); then the oldest entries leave while over a bound, never this one;
 * destroys run on this thread - while other threads have used the cache and
 * the read side runs on membarrier(2), up to CCACHE_RECLAIM_BATCH puts later
 * (on the thread of the put, or other writing call, that reclaims them;
 * ccache_stats::read_side).  Re-putting a closure the cache owns under
 * another key is a caller error (@ref cache_calls).
 * @param c the cache.
 * @param key the closure key (call site fingerprint).
 * @param closure the callable, the cache's from now on whenever @p c is not
 *        NULL (destroyed on error; on ENOMEM not if it is the closure
 *        already under @p key); may be NULL.
 * @param p a live handle of this cache (not consumed).
 * @return CCACHE_OK; CCACHE_EINVAL (also a handle of another cache);
 *         CCACHE_ENOMEM; CCACHE_EBUSY; CCACHE_EFORKED.
  * @ingroup basic
 */
CCACHE_API int ccache_put(ccache *c, ccache_key key, void *closure, ccache_program *p);

/**
 * @brief ccache_put() for a strong cache.
 * @param c the cache.
 * @param key the strong key.
 * @param closure as ccache_put() (the cache's, on error too).
 * @param p as ccache_put() (not consumed).
 * @return as ccache_put().
  * @ingroup advanced
 */
CCACHE_API int ccache_put_strong(ccache *c, const ccache_strong_key *key, void *closure,
                                 ccache_program *p);

/**
 * @brief Look up a closure; on a hit @p out holds a lease.  Never returns an
 * expired entry (one found is removed: a miss).  A hit refreshes nothing,
 * takes no lock and writes only this thread's reader (docs/design.md, "Hits
 * that write nothing shared").
 * @param c the cache.
 * @param key the closure key.
 * @param out lease, set on CCACHE_OK (release with ccache_lease_release()).
 * @return CCACHE_OK (a hit); CCACHE_MISS (a miss); CCACHE_EINVAL;
 *         CCACHE_EBUSY; CCACHE_EFORKED.
  * @ingroup basic
 */
CCACHE_API int ccache_fetch(ccache *c, ccache_key key, ccache_lease *out);

/**
 * @brief ccache_fetch() for a strong cache (the same lock-free hit).
 * @param c the cache.
 * @param key the strong key.
 * @param out as ccache_fetch().
 * @return as ccache_fetch().
  * @ingroup advanced
 */
CCACHE_API int ccache_fetch_strong(ccache *c, const ccache_strong_key *key, ccache_lease *out);

/**
 * @brief Release a lease; if its entry left and this was the last lease, the
 * closure (then, if last, its program) is destroyed on this thread.
 * @param c the cache the lease came from; NULL is a no-op.
 * @param lease the lease, zeroed on return; NULL or zeroed is a no-op.
  * @ingroup basic
 */
CCACHE_API void ccache_lease_release(ccache *c, ccache_lease *lease);

/**
 * @brief Remove the entry for @p key (`removed`; expired ones too).  Leases
 * stay valid; destroys run on this thread once none holds it.
 * @param c the cache.
 * @param key the closure key.
 * @return CCACHE_OK; CCACHE_MISS; CCACHE_EINVAL; CCACHE_EFORKED.
 */
CCACHE_API int ccache_remove(ccache *c, ccache_key key);

/** @brief ccache_remove() for a strong cache (all 256 bits must match).
 *  @param c the cache.
 *  @param key the strong key.
 *  @return as ccache_remove(). 
 * @ingroup advanced
 */
CCACHE_API int ccache_remove_strong(ccache *c, const ccache_strong_key *key);

/**
 * @brief Remove every closure entry (`cleared`, one each); leases stay valid,
 * programs without handles go; destroys run on this thread.
 * @param c the cache.
 * @return CCACHE_OK; CCACHE_EINVAL; CCACHE_EFORKED.  (void before 0.2.)
 */
CCACHE_API int ccache_clear(ccache *c);

/**
 * @brief Remove every expired entry (cause ttl), O(expired), as the sweeper
 * does at each deadline; for sweeper_thread 0.  Destroys run on this thread.
 * @param c the cache.
 * @return entries removed (>= 0; 0 with an unbounded ttl_ms), or
 *         CCACHE_EINVAL / CCACHE_EFORKED.
 */
CCACHE_API int64_t ccache_sweep(ccache *c);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Single-flight get-or-compile
 * Concurrent misses on one key compile once, with no lock held; the others
 * wait for the same result.  Errors are never cached.  A compile may call
 * any ccache function; its own key (directly or through a cycle on the same
 * thread) is CCACHE_EDEADLK; a cycle across threads blocks them forever
 * (docs/design.md, "Single-flight").
 * @{ */

/**
 * Closure compile callback, run once per miss by its owner, no lock held.
 * @param ud ccache_get_or_compile()'s @p ud.
 * @param c the cache.
 * @param key the closure key being compiled.
 * @param closure_out points to NULL; set the new closure (the cache's on
 *        success).  Valid only during the call.
 * @param program_out points to NULL; set a handle of @p c (the reference is
 *        the cache's on success: do not release it).  Valid during the call.
 * @return 0 on success; else the cache takes nothing (free what you made).
 *         Return ccache_compile_fail() to choose the status and detail; any
 *         other value is CCACHE_ECOMPILE (docs/design.md, "Errors that
 *         travel").
 */
typedef int (*ccache_compile_fn)(void *ud, ccache *c, ccache_key key, void **closure_out,
                                 ccache_program **program_out);

/**
 * @brief Fetch @p key, or compile it once whatever the number of concurrent
 * callers.  A hit is a lease; on a miss one owner runs @p compile, its result
 * is inserted as by ccache_put(), and the owner and every waiter get a lease
 * on it.  Counts, events and ownership: @ref get_or_compile.
 * @param c the cache.
 * @param key the closure key.
 * @param compile the callback; at most once, on the owner's thread.
 * @param ud passed to @p compile; valid until this returns.
 * @param out lease, zeroed unless CCACHE_OK.
 * @return CCACHE_OK; CCACHE_EINVAL (also a compile that gave no handle of
 *         this cache, to every waiter); CCACHE_ECOMPILE or the compile's own
 *         status (to every waiter, same detail; nothing cached);
 *         CCACHE_ENOMEM; CCACHE_EDEADLK (this thread is already compiling
 *         @p key); CCACHE_EBUSY; CCACHE_EFORKED.
  * @ingroup basic
 */
CCACHE_API int ccache_get_or_compile(ccache *c, ccache_key key, ccache_compile_fn compile, void *ud,
                                     ccache_lease *out);

/**
 * @brief ccache_get_or_compile() for a strong cache.
 * @param c the cache.
 * @param key the strong key.
 * @param compile as ccache_get_or_compile() (its key is key->key).
 * @param ud as ccache_get_or_compile().
 * @param out as ccache_get_or_compile().
 * @return as ccache_get_or_compile().
  * @ingroup advanced
 */
CCACHE_API int ccache_get_or_compile_strong(ccache *c, const ccache_strong_key *key,
                                            ccache_compile_fn compile, void *ud, ccache_lease *out);

/**
 * Program compile callback, run once per miss no tier served, by its owner,
 * with no cache lock held (a tier's compile locks may be).
 * @param ud ccache_program_get_or_compile()'s @p ud.
 * @param c the cache.
 * @param pkey the program key being compiled.
 * @param native_out points to NULL; set the native program (the cache's on
 *        success).  Valid only during the call.
 * @param cost_out points to 0; set its cost, bytes.  Valid during the call.
 * @return 0 on success; else the cache takes nothing (as ccache_compile_fn).
 */
typedef int (*ccache_program_compile_fn)(void *ud, ccache *c, ccache_key pkey, void **native_out,
                                         uint64_t *cost_out);

/**
 * @brief Look up the program interned under @p pkey, or make it once
 * whatever the number of concurrent callers: the owner asks the tiers, else
 * runs @p compile (storing the result in the tiers), then interns it as
 * ccache_program_intern().  Waiters get its result.  No closure entry, so no
 * cost is charged.  Tier failures never change the status (@ref get_or_compile;
 * docs/tiers.md, "Lifecycle of one program miss").
 * @param c the cache.
 * @param pkey the program key.
 * @param compile the callback; at most once, on the owner's thread.
 * @param ud passed to @p compile; valid until this returns.
 * @param out receives a handle (+1) on CCACHE_OK, NULL otherwise.
 * @return as ccache_get_or_compile(), at the program level (no handle to
 *         check: its EINVAL is for NULL arguments only).
  * @ingroup basic
 */
CCACHE_API int ccache_program_get_or_compile(ccache *c, ccache_key pkey,
                                             ccache_program_compile_fn compile, void *ud,
                                             ccache_program **out);

/**
 * @brief ccache_program_get_or_compile() for a strong cache (an entry whose
 * 256 bits differ is never decoded: tier_corrupt).
 * @param c the cache.
 * @param pkey the strong key (compile, codec and tier ops get pkey->key).
 * @param compile as ccache_program_get_or_compile().
 * @param ud as ccache_program_get_or_compile().
 * @param out as ccache_program_get_or_compile().
 * @return as ccache_program_get_or_compile().
  * @ingroup advanced
 */
CCACHE_API int ccache_program_get_or_compile_strong(ccache *c, const ccache_strong_key *pkey,
                                                    ccache_program_compile_fn compile, void *ud,
                                                    ccache_program **out);

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

/* ------------------------------------------------------------------------ */
/** @name Default instance
 * One process-wide cache for runtimes that do not want to pass a handle
 * around.
 * @{ */

/**
 * @brief Supply (or, until the instance exists, replace) the default
 * instance's configuration; environment variables still override its bounds
 * (see ccache_default()).  Starts nothing.
 * @param cfg copied with its codec, tag and tier array; its callbacks and
 *        contexts must stay valid until the process exits.  On CCACHE_OK its
 *        tiers are the library's (@ref default_instance).
 * @return CCACHE_OK; CCACHE_EINVAL (also any config ccache_open() refuses);
 *         CCACHE_ENOMEM; CCACHE_EBUSY (the instance exists).  On error
 *         nothing is kept and the caller keeps its tiers.
 */
CCACHE_API int ccache_default_init(const ccache_config *cfg);

/**
 * @brief The process-wide cache, created on first use; it lives until the
 * process exits (a fork() child makes its own).  Environment variables, read
 * with secure_getenv() (@ref default_instance):
 * CLOSURE_CACHE_MAX_ITEMS, CLOSURE_CACHE_TTL_MS, CLOSURE_CACHE_MAX_COST
 * override the bounds (a decimal >= 1, "unbounded" or "infinity");
 * CLOSURE_CACHE_REDIS adds a Redis tier below the configured ones (with a
 * codec), CLOSURE_CACHE_REDIS_USER and CLOSURE_CACHE_REDIS_PASSWORD_FILE its
 * AUTH; CLOSURE_CACHE_SIGNING_KEY_FILE and CLOSURE_CACHE_TRUSTED_KEYS
 * (comma-separated public key files) extend the program's trust object
 * (ccache_config::trust): their trusted keys are added to the program's,
 * and the variable's signing key replaces the program's (whose public half
 * stays trusted).  CLOSURE_CACHE_TRUST=unsigned sets CCACHE_TRUST_UNSIGNED
 * (any other value is refused).  Safe by default: a CLOSURE_CACHE_REDIS
 * tier with no trusted key and no CCACHE_TRUST_UNSIGNED is kept in the
 * cache as CCACHE_TIER_DISABLED, never used, its health's last_error
 * saying why (ccache_tier_health_get()); a tier the program configured is
 * checked as by ccache_open().
 * @param out receives the cache on CCACHE_OK (never close it).
 * @return CCACHE_OK; CCACHE_EINVAL (also a refused variable, with a detail
 *         naming it); CCACHE_ENOTSUP (no hiredis, or no libsodium, for them);
 *         CCACHE_EPERM or CCACHE_EIO (a refused key or password file);
 *         CCACHE_ENOMEM; CCACHE_ETHREAD.  A failure leaves no instance; the
 *         next call tries again.
 */
CCACHE_API int ccache_default(ccache **out);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_CACHE_H */
