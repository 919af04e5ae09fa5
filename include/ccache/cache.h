/**
 * @file ccache/cache.h
 * @brief The cache: configuration, the program and closure tables,
 * single-flight get-or-compile, statistics, the default instance.
 *
 * The configuration, open and close, the bounds and the default instance
 * are declared here; the tables, single-flight and the statistics and
 * events in ccache/program.h, ccache/closure.h, ccache/flight.h and
 * ccache/stats.h, which this header includes.
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest;
 * it may also be included alone.
 */
#ifndef CCACHE_CCACHE_CACHE_H
#define CCACHE_CCACHE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
/* The parts split out of this header, included so that it still declares
 * everything it did. */
#include "closure.h" /* the closure table */
#include "flight.h"  /* single-flight get-or-compile */
#include "program.h" /* the program table */
#include "stats.h"   /* statistics, events */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/** @name Configuration
 * @{ */

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
