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
  /** It has returned (level, key, status: what the call and its waiters
   *  get, duration_ns: the callback's wall time, nested compiles included). */
  CCACHE_EVENT_COMPILE_END = 2,
  /** A tier had a usable entry for the key (tier, tier_name, op "get"). */
  CCACHE_EVENT_TIER_HIT = 3,
  /** A tier had no entry (tier, tier_name, op "get"). */
  CCACHE_EVENT_TIER_MISS = 4,
  /** An entry was written to a tier (op "put"; reason "fill" when copied from
   *  a lower tier's hit, "store" for a fresh compile). */
  CCACHE_EVENT_TIER_WRITE = 5,
  /** A tier op or a codec call failed (op: "attach", "get", "put", "remove",
   *  "lock", "renew", "encode", "decode"; status; err: errno as the op left
   *  it, 0 when it set none; reason: a static text or NULL).  Never fails a
   *  fetch: the program compiles. */
  CCACHE_EVENT_TIER_ERROR = 6,
  /** An entry failed verification and was removed (op "get", reason). */
  CCACHE_EVENT_TIER_CORRUPT = 7,
  /** An intact entry was not used: another runtime tag's (reason "foreign
   *  runtime tag"), or one the codec refused to store (reason). */
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
 * One event, passed to ccache_config::on_event.  Fields that do not apply to
 * the kind are 0 / NULL.  The struct and every string in it are valid only
 * during the callback (the strings are static texts: copy them to keep
 * them); later versions may add fields at the end (`size` says how many
 * this library filled).
 */
typedef struct ccache_event {
  uint32_t size;         /**< sizeof(ccache_event) as the library was built */
  int kind;              /**< a ccache_event_kind */
  int level;             /**< a ccache_level: compile events; tier events are PROGRAM,
                              EVICT is CLOSURE */
  ccache_key key;        /**< the closure key (closure level) or program key */
  int status;            /**< COMPILE_END: the status the call returns (CCACHE_OK, or
                              the failure); TIER_ERROR: the op's status */
  int err;               /**< TIER_ERROR: errno right after the op failed (0: none) */
  int cause;             /**< EVICT: a ccache_cause */
  uint32_t tier;         /**< tier events: the tier's index in ccache_config::tiers
                              (n_tiers for the codec's "encode", no one tier's) */
  const char *tier_name; /**< tier events: ccache_tier_ops::name ("disk", "redis", ...) */
  const char *op;        /**< tier events: the op ("get", "put", ...) */
  const char *reason;    /**< a short static text, or NULL */
  uint64_t duration_ns;  /**< COMPILE_END: wall time of the callback, nanoseconds */
} ccache_event;

/**
 * The event hook (ccache_config::on_event).
 * @param ctx ccache_config::event_ctx.
 * @param ev the event (see ccache_event for its lifetime).
 * Runs synchronously, with no internal lock held, on the thread the event
 * happens on: compile and tier events on the single-flight owner (a "renew"
 * TIER_ERROR on a lease-renewal thread, "attach" on the ccache_open()
 * thread), EVICT events on the thread whose call made the entry leave (the
 * sweeper's, the closing thread's), after its locks are released.  It may
 * call into the cache (except ccache_close() on it).  Several threads may
 * run it at once: make it thread-safe, and short (a compile or a writer
 * waits for it).
 */
typedef void (*ccache_event_fn)(void *ctx, const ccache_event *ev);

/** Bound value meaning "no bound" (for max_items, ttl_ms, max_cost_bytes). */
#define CCACHE_UNBOUNDED UINT64_MAX

/** Largest `size` a ccache_config or ccache_stats may claim: a larger one
 *  is taken for a struct that was never set up (ccache_open() and
 *  ccache_default_init() refuse the config with CCACHE_EINVAL;
 *  ccache_stats_get() writes nothing).  The option structs
 *  (ccache_tier_ops, ccache_disk_options, ccache_redis_options) are checked
 *  only for a minimum size. */
#define CCACHE_STRUCT_SIZE_MAX 4096u

/** What ccache_config_init() writes in ccache_config::magic ("ccfg"). */
#define CCACHE_CONFIG_MAGIC 0x63636667u

/**
 * Destroy callback for a closure or a native program.
 * @param obj the closure (destroy_closure) or native program (destroy_program)
 *            pointer exactly as given to the cache; never NULL (a NULL
 *            closure or native is counted as destroyed but not passed here).
 *            It is yours again: free it.
 * @param ctx ccache_config::ctx.
 * Runs exactly once per object the cache owned, with no internal lock held,
 * on the thread whose call caused it (the sweeper thread for entries it
 * expires), before that call returns; a closure before the program it runs.
 * It may call any ccache function except ccache_close() on the same cache
 * (CCACHE_EBUSY); while ccache_close() runs it, calls that would add to the
 * cache return CCACHE_EBUSY.
 */
typedef void (*ccache_destroy_fn)(void *obj, void *ctx);

/**
 * Clock callback: current time in milliseconds of a monotonic clock.
 * @param ctx ccache_config::ctx.
 * @return the time, in milliseconds.
 * Called with no internal lock held, from any thread (the sweeper included).
 * Inserts (ccache_put(), a closure compile's result) always read it;
 * lookups (ccache_fetch(), ccache_get_or_compile()) and sweeps read it only
 * while ttl_ms is finite.  It may step back; the cache clamps insert times so
 * they never decrease.  It may call into the cache, except ccache_close() on
 * it.
 */
typedef uint64_t (*ccache_clock_fn)(void *ctx);

/**
 * Allocator hook, allocation half (set both alloc and free, or neither).
 * @param alloc_ctx ccache_config::alloc_ctx.
 * @param size bytes wanted.
 * @return at least @p size bytes aligned for any object type, or NULL (the
 *         call that needed them then fails with CCACHE_ENOMEM, or, for a
 *         thread's reader, takes the locked path).
 * Called from any thread, the sweeper's included, and possibly while the
 * cache holds an internal lock: it must never call into the cache.
 */
typedef void *(*ccache_alloc_fn)(void *alloc_ctx, size_t size);
/**
 * Allocator hook, release half.
 * @param alloc_ctx ccache_config::alloc_ctx.
 * @param ptr what alloc returned (never NULL), given back once.
 * Called from any thread, possibly while the cache holds an internal lock:
 * it must never call into the cache.  The cache keeps errno across it.
 */
typedef void (*ccache_free_fn)(void *alloc_ctx, void *ptr);

struct ccache_trust; /* ccache/trust.h */

/**
 * Options for ccache_open() (and ccache_default_init()).  Initialise with
 * ccache_config_init(), then set the fields you need.  The cache copies the
 * struct; it need not outlive ccache_open().  The pointers it copies (the
 * callbacks, ctx, alloc_ctx) must stay valid until ccache_close() returns
 * CCACHE_OK (for the default instance: until the process exits).
 */
typedef struct ccache_config {
  /** sizeof(ccache_config), set by ccache_config_init(); lets later versions
   *  grow the struct.  Below the fields up to alloc_ctx (a struct without the
   *  tier fields gets their defaults) or above CCACHE_STRUCT_SIZE_MAX is
   *  EINVAL. */
  uint32_t size;
  /** CCACHE_CONFIG_MAGIC, set by ccache_config_init(): a config that never
   *  went through it (stack garbage) is refused with EINVAL, never used.
   *  Since 0.2. */
  uint32_t magic;
  /** Whether a background sweeper thread removes expired entries.
   *  Non-zero (default 1): the thread starts the first time ttl_ms is
   *  finite (at ccache_open() or ccache_set_limits()) and runs until
   *  ccache_close(); it wakes at the oldest entry's deadline (never on a
   *  timer), removes the expired prefix (cause ttl; the destroys run on the
   *  sweeper thread, outside every lock) and counts the waits that ended at
   *  their deadline in ccache_stats::sweeper_wakeups.  0: no thread; expired
   *  entries leave when ccache_sweep() runs or a lookup finds them.  A lookup
   *  never returns an expired entry either way.  Mechanism: docs/design.md,
   *  "Bounds and expiry". */
  int sweeper_thread;
  /** Most closure entries kept, in items: CCACHE_UNBOUNDED (default) or
   *  >= 1.  Past it the oldest inserts leave first (FIFO in insertion order;
   *  a hit does not refresh an entry).
   *  Changeable with ccache_set_limits(). */
  uint64_t max_items;
  /** Time to live in milliseconds, from insert time (a hit never refreshes
   *  it): CCACHE_UNBOUNDED (default) or >= 1.  An entry inserted at t is
   *  expired from now >= t + ttl_ms on.  Changeable with
   *  ccache_set_limits(). */
  uint64_t ttl_ms;
  /** Cap in bytes on the summed cost of the programs referenced by closure
   *  entries in the table (each program counted once, however many entries
   *  share it): CCACHE_UNBOUNDED (default) or >= 1.  The sum is kept in 128
   *  bits, so it never wraps, and CCACHE_UNBOUNDED never evicts for cost
   *  whatever the sum.  Changeable with ccache_set_limits(). */
  uint64_t max_cost_bytes;
  /** Called once for every closure the cache owned, when it is destroyed
   *  (see ccache_destroy_fn); NULL: none. */
  ccache_destroy_fn destroy_closure;
  /** Called once for every native program the cache owned, when it is
   *  destroyed (see ccache_destroy_fn); NULL: none. */
  ccache_destroy_fn destroy_program;
  /** Passed to destroy_closure, destroy_program and clock_ms; never
   *  dereferenced by the cache. */
  void *ctx;
  /** Monotonic milliseconds; NULL (default) means CLOCK_MONOTONIC.  Expiry
   *  is judged on this clock; the sweeper waits the time left on it in real
   *  CLOCK_MONOTONIC time. */
  ccache_clock_fn clock_ms;
  /** Allocator hook, allocation half: set both alloc and free, or neither
   *  (else CCACHE_EINVAL); NULL: malloc.  Everything the cache allocates
   *  goes through it (tables, entries, programs, flights, the threads'
   *  readers, tier entry buffers); the tier objects made by
   *  ccache_tier_custom(), ccache_tier_disk() and ccache_tier_redis() and
   *  their backends use malloc. */
  ccache_alloc_fn alloc;
  /** Allocator hook, release half (see alloc); NULL: free. */
  ccache_free_fn free;
  /** Passed to alloc and free; never dereferenced by the cache. */
  void *alloc_ctx;
  /* ---- Persistent tiers (0.2; see "Persistent tiers").  A config whose
   * size ends before these fields (a 0.1 caller's) gets their defaults. ---- */
  /** Serialisation callbacks, copied at open (the struct need not outlive
   *  ccache_open()); NULL (default): no tiers (n_tiers > 0 without a codec
   *  is CCACHE_EINVAL: tiers store programs as bytes). */
  const ccache_codec *codec;
  /** The runtime's identity: everything a program depends on that its key
   *  does not hold - the compiler and its version, the flags it was given,
   *  the target (CPU features, GPU architecture), the runtime's own codegen
   *  version - e.g. "myrt 3.1 codegen 7; gcc 12.2 -O2 -march=x86-64-v3":
   *  entries made under another tag are never loaded.  Read (hashed) at open, not
   *  kept; NULL (default) is the same as "".  Any length. */
  const char *runtime_tag;
  /** Programs whose compile callback ran for less than this many
   *  microseconds are not written to the tiers (writing costs more than
   *  compiling them again).  Default 1000 (1 ms); 0 stores every program. */
  uint64_t tier_min_compile_us;
  /** @p n_tiers tiers, the one asked first (the fastest, e.g. the disk) at
   *  index 0.  On CCACHE_OK from ccache_open() the cache owns every one of
   *  them and closes them in ccache_close(); on any error the caller still
   *  owns them all.  The array itself is not retained.  NULL only when
   *  n_tiers is 0. */
  ccache_tier *const *tiers;
  /** Number of tiers, 0 (default) .. CCACHE_MAX_TIERS.  Tiers need a codec:
   *  n_tiers > 0 with a NULL codec is CCACHE_EINVAL. */
  uint32_t n_tiers;
  /** Which keys the cache takes, a ccache_key_mode (see ccache/common.h):
   *  CCACHE_KEYS_FAST (0, default: ccache_key calls) or CCACHE_KEYS_STRONG
   *  (the *_strong calls with 256-bit keys; its tiers use a namespace of
   *  their own).  Fixed for the cache's life.  Any other value is
   *  CCACHE_EINVAL; a config whose size ends before this field is fast.
   *  Since 0.2. */
  uint32_t key_mode;
  /* ---- First use (0.2): a config whose size ends before these fields gets
   * their defaults. ---- */
  /** The event hook (see ccache_event_fn); NULL (default): no events, and
   *  nothing is spent on them. */
  ccache_event_fn on_event;
  /** Passed to on_event; never dereferenced by the cache. */
  void *event_ctx;
  /* ---- Untrusted sizes (0.2, issue 21): a config whose size ends before
   * this field gets its default. ---- */
  /** Largest tier entry this cache reads or writes, in bytes of the whole
   *  framed entry (header, payload and checksum, what a tier stores):
   *  default CCACHE_TIER_MAX_ENTRY_DEFAULT (64 MiB); 1 .. CCACHE_UNBOUNDED
   *  (which means the format's own limit, a 2^40-byte payload); 0 is
   *  CCACHE_EINVAL.  A tier entry is untrusted input, so the bound is
   *  checked before a buffer of that size exists: the directory tier from
   *  the file's size, the Redis tier inside the server (one script answers
   *  the length instead of the value), a custom tier's get() result before
   *  it is verified or decoded (its backend has allocated it by then: bound
   *  your own reads).  An entry over it is a miss (tier_oversize +1, the
   *  program compiles; it is not removed: a cache with a larger bound may
   *  use it), and a compiled program whose entry would be over it is not
   *  written (tier_oversize +1).  Fixed for the cache's life. */
  uint64_t tier_max_entry_bytes;
  /* ---- Signed entries (0.2, issue 21): a config whose size ends before
   * this field has no trust object. ---- */
  /** Signing and trusted keys (see ccache/trust.h), copied at
   *  ccache_open() (the object may be freed after it returns; after
   *  ccache_default_init(), once the default instance exists); NULL
   *  (default): tiers are trusted by declaration.  Set, in a build without
   *  libsodium: CCACHE_ENOTSUP at open; with no key in it: CCACHE_EINVAL.
   *  Since 0.2. */
  const struct ccache_trust *trust;
} ccache_config;

/** Default ccache_config::tier_max_entry_bytes: 64 MiB.  A compiled kernel
 *  is kilobytes to a few megabytes (kernel_jit's shared objects are about
 *  15 KiB, a oneDNN primitive's cache blob is under 1 MiB); 64 MiB holds a
 *  large fused program with room to spare and keeps what a planted entry
 *  can cost a reader to that. */
#define CCACHE_TIER_MAX_ENTRY_DEFAULT ((uint64_t)64 << 20)

/** Most tiers one cache may have (ccache_config::n_tiers). */
#define CCACHE_MAX_TIERS 8u

/**
 * @brief Fill @p cfg with the defaults: size = sizeof *cfg, magic =
 * CCACHE_CONFIG_MAGIC, every bound CCACHE_UNBOUNDED, sweeper_thread 1, no
 * callbacks, no allocator hook, CLOCK_MONOTONIC, no codec, no tiers,
 * tier_min_compile_us 1000, key_mode CCACHE_KEYS_FAST, tier_max_entry_bytes
 * CCACHE_TIER_MAX_ENTRY_DEFAULT.
 * @param cfg caller-owned; NULL is a no-op.  Thread-safe.
 */
CCACHE_API void ccache_config_init(ccache_config *cfg);

/**
 * @brief Create a cache.
 * @param cfg options, copied (see ccache_config for the pointers it keeps);
 *            must come from ccache_config_init().
 * @param out receives the new cache, owned by the caller until
 *            ccache_close() returns CCACHE_OK.  Untouched on error.
 * @return CCACHE_OK; CCACHE_EINVAL, each with a ccache_error_detail() line
 *         (NULL cfg or out; a size or magic that never went through
 *         ccache_config_init(), refused before any other field is read; a
 *         bound of 0; alloc without free or the reverse; a bad tier array
 *         (over CCACHE_MAX_TIERS, NULL, a NULL or repeated tier, one another
 *         cache owns); a codec with a NULL callback, or tiers without a
 *         codec; a trust object with no key); CCACHE_ENOTSUP (a trust object
 *         in a build without libsodium: fail closed); CCACHE_ENOMEM; CCACHE_ETHREAD (a thread or lock could not
 *         be created).  On every error the caller keeps its tiers and
 *         nothing is left running.
 * Thread-safe.  If ttl_ms is finite and sweeper_thread is non-zero, the
 * sweeper thread starts here.  With a codec, each tier's attach op runs here
 * (its failure disables that tier for this cache and counts in tier_errors;
 * it is not an error of the open).
 */
CCACHE_API int ccache_open(const ccache_config *cfg, ccache **out);

/**
 * @brief Close a cache: stop and join its sweeper thread (at once, whatever
 * the TTL) and its lease-renewal threads, destroy every closure and program
 * it still holds (closures first), close its tiers (each tier's close op,
 * in tier order), and free it.
 * @param c the cache; NULL is a no-op returning CCACHE_OK.
 * @return CCACHE_OK (c is freed); CCACHE_EBUSY, nothing changed and the cache
 *         still usable, while any lease or program handle is outstanding,
 *         while a compile is in flight, or when called from inside any
 *         callback of this cache (ccache_error_detail() gives the counts;
 *         the checked build also lists each lease and handle on stderr);
 *         CCACHE_EINVAL for the default instance (ccache_default()), which
 *         lives until the process exits; CCACHE_EFORKED in a child process.
 * Must not run concurrently with any other call on @p c, nor be followed
 * by one (caller error: undefined behaviour in the default build; the
 * checked build aborts on a later call, this one included, see "Checked
 * build").  The threads' readers of @p c are freed here.  The destroy
 * callbacks it runs may still call in, but every call that would add to the
 * cache (fetch, put, program intern/fetch, get-or-compile at both levels,
 * set_limits) returns CCACHE_EBUSY (put and intern still destroy what they
 * were given), so nothing outlives the cache.
 */
CCACHE_API int ccache_close(ccache *c);

/** ccache_close_ex() flag: close even while leases or program handles are
 *  out, abandoning them. */
#define CCACHE_CLOSE_ABANDON 1u

/**
 * @brief ccache_close(), with flags.
 *
 * With CCACHE_CLOSE_ABANDON the caller declares that no lease or handle of
 * @p c will be used or released again (e.g. their holders' threads exited
 * without releasing them; the checked build's EBUSY lists them): close then
 * proceeds as if they had been released, destroying every closure and
 * program still held (each once, closures first).  Releasing an abandoned
 * lease or handle afterwards is a use after free (the checked build aborts).
 * Why the cache cannot find lost leases itself: docs/design.md, "Leases
 * nobody can release".
 * @param c the cache; NULL is a no-op returning CCACHE_OK.
 * @param flags 0 (exactly ccache_close()) or CCACHE_CLOSE_ABANDON; other bits
 *        are CCACHE_EINVAL.
 * @return as ccache_close(), except that with CCACHE_CLOSE_ABANDON
 *         outstanding leases and handles no longer make it CCACHE_EBUSY; a
 *         compile in flight, or a call from inside a callback, still does.
 * Same threading rules as ccache_close().  Since 0.2.
 */
CCACHE_API int ccache_close_ex(ccache *c, unsigned flags);

/**
 * @brief Change the bounds at runtime.
 *
 * All three are validated first: any value of 0 returns CCACHE_EINVAL with
 * nothing changed.  A finite ttl_ms starts the sweeper thread if the config
 * allows one and it is not running.  Then, in one writer section, the new
 * ttl_ms applies at once to the entries present (from their insert times),
 * and the oldest entries leave while items exceed max_items (cause
 * capacity) or the charged cost exceeds max_cost_bytes (cause cost); their
 * destroys run on this thread before it returns.  The sweeper is woken for
 * the new deadline (see ccache_config::sweeper_thread).
 * @param c the cache.
 * @param max_items items, CCACHE_UNBOUNDED or >= 1.
 * @param ttl_ms milliseconds, CCACHE_UNBOUNDED or >= 1.
 * @param max_cost_bytes bytes, CCACHE_UNBOUNDED or >= 1.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL c or a bound of 0);
 *         CCACHE_ETHREAD or CCACHE_ENOMEM (the sweeper thread could not be
 *         started: nothing changed); CCACHE_EBUSY (from a destroy callback
 *         run by ccache_close()); CCACHE_EFORKED.  Thread-safe.  Checked
 *         build: aborts on a closed cache.
 */
CCACHE_API int ccache_set_limits(ccache *c, uint64_t max_items, uint64_t ttl_ms,
                                 uint64_t max_cost_bytes);

/**
 * @brief Read the current bounds (one consistent set, read under the
 * writer lock).
 * @param c the cache.
 * @param max_items receives the item bound (CCACHE_UNBOUNDED for none); may
 *        be NULL.  Caller-owned.
 * @param ttl_ms receives the TTL in milliseconds (CCACHE_UNBOUNDED for
 *        none); may be NULL.  Caller-owned.
 * @param max_cost_bytes receives the cost cap in bytes (CCACHE_UNBOUNDED
 *        for none); may be NULL.  Caller-owned.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL c; nothing written);
 *         CCACHE_EFORKED (nothing written).  Thread-safe.  Checked build:
 *         aborts on a closed cache.
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
 *
 * Ownership of @p native passes to the cache whenever @p c is not NULL, on
 * error too.  If @p pkey is already interned, the existing program is
 * returned (+1) and @p native is destroyed once with destroy_program, unless
 * it is the very pointer already interned.  Interning one native pointer
 * under two pkeys is a caller error (it would be destroyed twice: undefined
 * behaviour in the default build; the checked build aborts, see "Checked
 * build").  A new program counts as a program_miss, an existing one as a
 * program_hit.  The program stays interned while any handle, closure entry
 * or lease refers to it; destroy_program runs when the last one lets go.
 * @param c the cache.
 * @param pkey the program's structural key (by value).
 * @param native the native program (may be NULL; then nothing is destroyed).
 * @param cost_bytes caller's estimate of the native memory the program holds,
 *        in bytes; charged against max_cost_bytes once, while at least one
 *        closure entry in the table refers to it.  Ignored when @p pkey
 *        exists.
 * @param out receives the handle on CCACHE_OK (NULL on CCACHE_ENOMEM,
 *        untouched on the other errors); give it back with
 *        ccache_program_release().  Caller-owned.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL c or out: @p native is destroyed if
 *         c is non-NULL); CCACHE_ENOMEM (native destroyed, cache unchanged);
 *         CCACHE_EBUSY (from a destroy callback run by ccache_close(): native
 *         destroyed); CCACHE_EFORKED (native destroyed).  Thread-safe (takes
 *         the program table's lock).  Checked build: aborts on a closed cache
 *         or a native the cache already owns under another key.
 */
CCACHE_API int ccache_program_intern(ccache *c, ccache_key pkey, void *native, uint64_t cost_bytes,
                                     ccache_program **out);

/**
 * @brief Look up a program by key (never asks the tiers, never compiles).
 * @param c the cache.
 * @param pkey the program's key (by value).
 * @param out receives a handle (+1) on CCACHE_OK, to give back with
 *        ccache_program_release(); NULL on every other status when @p c is
 *        not NULL.  Caller-owned.
 * @return CCACHE_OK; CCACHE_MISS; CCACHE_EINVAL (NULL c or out);
 *         CCACHE_EBUSY (from a destroy callback run by ccache_close());
 *         CCACHE_EFORKED.  Counts program_hits / program_misses.  Thread-safe
 *         (takes the program table's lock).  Checked build: aborts on a
 *         closed cache.
 */
CCACHE_API int ccache_program_fetch(ccache *c, ccache_key pkey, ccache_program **out);

/**
 * @brief The native program behind a handle.
 * @param p a live handle; NULL returns NULL.
 * @return the native pointer (still the cache's: never free it), valid while
 *         @p p is held.  Thread-safe; touches no cache state.
 */
CCACHE_API void *ccache_program_native(const ccache_program *p);

/**
 * @brief Give back one program handle.  If it was the last reference (no
 * other handle, closure entry or lease refers to the program), the program
 * leaves the table and destroy_program runs on this thread, with no lock
 * held, before this returns.
 * @param c the cache the handle came from; NULL is a no-op.
 * @param p the handle; NULL is a no-op.  Using it afterwards, or releasing
 *        it twice, is a caller error (undefined behaviour in the default
 *        build; the checked build aborts, see "Checked build").  A handle a
 *        compile callback hands to the cache (*program_out on success) is
 *        the cache's: releasing it too is the same error.
 * In a fork child this does nothing.  Thread-safe (takes the program table's
 * lock).  Checked build: aborts on a closed cache, or on a handle not out.
 */
CCACHE_API void ccache_program_release(ccache *c, ccache_program *p);

/**
 * @brief ccache_program_intern() for a strong cache (see ccache_key_mode):
 * interned under, and later found by, all 256 bits of @p pkey.
 * @param c the cache.
 * @param pkey the strong key (read during the call only).
 * @param native as ccache_program_intern() (ownership passes to the cache).
 * @param cost_bytes as ccache_program_intern() (bytes).
 * @param out as ccache_program_intern().
 * @return as ccache_program_intern(); CCACHE_EINVAL also for a NULL @p pkey
 *         or a fast cache (native destroyed).  Thread-safe.
 */
CCACHE_API int ccache_program_intern_strong(ccache *c, const ccache_strong_key *pkey, void *native,
                                            uint64_t cost_bytes, ccache_program **out);

/**
 * @brief ccache_program_fetch() for a strong cache: all 256 bits match.
 * @param c the cache.
 * @param pkey the strong key (read during the call only).
 * @param out as ccache_program_fetch().
 * @return as ccache_program_fetch(); CCACHE_EINVAL also for a NULL @p pkey
 *         or a fast cache.  Thread-safe.
 */
CCACHE_API int ccache_program_fetch_strong(ccache *c, const ccache_strong_key *pkey,
                                           ccache_program **out);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Closure table
 * @{ */

/**
 * @brief Store @p closure under @p key, running @p p.
 *
 * The entry takes its own reference on @p p; the caller keeps its handle.
 * Its insert time is max(clock now, previous insert time).  A present
 * @p key is replaced (the later insert wins; counts `replaced`; leases on
 * the old entry stay valid).  Then the oldest entries leave while items >
 * max_items (cause capacity) or the charged cost > max_cost_bytes (cause
 * cost), never the entry just inserted.  Destroys caused by this call run
 * on this thread before it returns.
 *
 * Ownership of @p closure passes to the cache whenever @p c is not NULL: on
 * error it is destroyed once.  The one pointer the cache already owns that
 * may be put again is the closure of the entry now under @p key (it is not
 * destroyed); putting any other pointer the cache still owns (stored under
 * another key, or held by a lease after its entry left) is a caller error,
 * a double destroy (the checked build aborts, see "Checked build").  The
 * same holds for what a compile returns.
 * @param c the cache.
 * @param key the closure key (call site fingerprint; by value).
 * @param closure the runtime's callable (may be NULL: stored as is, never
 *        passed to destroy_closure).
 * @param p a live handle of this cache (not consumed: release it when done).
 * @return CCACHE_OK; CCACHE_EINVAL (NULL c: @p closure is not destroyed; NULL
 *         p or a handle of another cache: @p closure is destroyed);
 *         CCACHE_ENOMEM (cache unchanged; @p closure destroyed unless the
 *         entry under @p key holds that very pointer); CCACHE_EBUSY (from a
 *         destroy callback run by ccache_close(): @p closure destroyed);
 *         CCACHE_EFORKED (@p closure destroyed).  Thread-safe; takes the
 *         writer lock, and briefly holds off the threads' hits while the
 *         table changes.  Checked build: aborts on a closed cache or a
 *         closure the cache already owns (other than the closure of the
 *         entry now under @p key).
 */
CCACHE_API int ccache_put(ccache *c, ccache_key key, void *closure, ccache_program *p);

/**
 * @brief ccache_put() for a strong cache: stored under, and replacing only
 * an entry with, all 256 bits of @p key.
 * @param c the cache.
 * @param key the strong key (read during the call only).
 * @param closure as ccache_put() (ownership passes to the cache).
 * @param p as ccache_put() (not consumed).
 * @return as ccache_put(); CCACHE_EINVAL (closure destroyed) also for a
 *         NULL @p key or a fast cache.  Thread-safe.
 */
CCACHE_API int ccache_put_strong(ccache *c, const ccache_strong_key *key, void *closure,
                                 ccache_program *p);

/**
 * @brief Look up a closure.  On a hit, @p out holds a lease on the entry.
 *
 * Never returns an expired entry (now >= insert time + ttl_ms), whether or not
 * a sweep has run; an expired entry found here counts a miss and is removed
 * (cause ttl; its destroys, unless a lease holds it, run on this thread
 * before this returns).  A hit does not refresh the entry's TTL or FIFO
 * place and does not touch the program's reference count.  The clock is
 * read only while ttl_ms is finite.
 * @param c the cache.
 * @param key the closure key (by value).
 * @param out caller-owned lease; set on CCACHE_OK (release it with
 *        ccache_lease_release()), zeroed otherwise.
 * @return CCACHE_OK (counts a hit); CCACHE_MISS (counts a miss); CCACHE_EINVAL
 *         (NULL c or out); CCACHE_EBUSY (from a destroy callback run by
 *         ccache_close()); CCACHE_EFORKED.
 *
 * Thread-safe, and hits scale with threads: a hit takes no lock and writes
 * only memory its own thread owns (its reader: about 512 bytes from the
 * allocator hook, made on the thread's first call on this cache and freed
 * when the thread exits or the cache closes; without it the thread takes a
 * locked path, still correct).  A hit waits only for a writer changing the
 * table.  Which leases count on the entry's shared count instead:
 * docs/design.md, "Hits that write nothing shared".  Checked build: aborts
 * on a closed cache, and always takes the general (slower) path.
 */
CCACHE_API int ccache_fetch(ccache *c, ccache_key key, ccache_lease *out);

/**
 * @brief ccache_fetch() for a strong cache (ccache_config::key_mode
 * CCACHE_KEYS_STRONG): a hit needs all 256 bits of @p key equal to the
 * entry's.
 *
 * The same common path as ccache_fetch() (no lock, nothing shared written),
 * with 32 bytes compared instead of 16.
 * @param c the cache.
 * @param key the strong key (read during the call; NULL is CCACHE_EINVAL).
 * @param out as ccache_fetch().
 * @return as ccache_fetch(); CCACHE_EINVAL also on a fast cache (and
 *         ccache_fetch() returns CCACHE_EINVAL on a strong cache).
 *         Thread-safe, as ccache_fetch().
 */
CCACHE_API int ccache_fetch_strong(ccache *c, const ccache_strong_key *key, ccache_lease *out);

/**
 * @brief Release a lease.  If the entry has left the table and this was its
 * last lease, destroy_closure then (if it was the program's last reference)
 * destroy_program run on this thread, with no lock held, before this returns.
 * @param c the cache the lease came from; NULL is a no-op (the lease is left
 *        as it is).
 * @param lease the caller's lease, zeroed on return; NULL or an
 *        already-zeroed lease is a no-op.  A copy of a lease already
 *        released, a lease no call filled, or a lease of another cache is a
 *        caller error (undefined behaviour in the default build; the checked
 *        build aborts with "lease released twice" or "lease not taken from
 *        this cache", see "Checked build"; it also aborts on a closed
 *        cache).
 * In a fork child this does nothing.  Thread-safe, on any thread: a lease
 * in a slot of this thread's reader whose entry is still in the table frees
 * the slot and writes nothing shared (see ccache_fetch()); any other lease
 * counts on the entry's shared reference count.
 */
CCACHE_API void ccache_lease_release(ccache *c, ccache_lease *lease);

/**
 * @brief Remove the entry for @p key (counts `removed`; an expired entry
 * still in the table is removed too).  Leases on it stay valid; its destroys
 * (once no lease holds it) run on this thread before this returns.
 * @param c the cache.
 * @param key the closure key (by value).
 * @return CCACHE_OK; CCACHE_MISS (no such key); CCACHE_EINVAL (NULL c);
 *         CCACHE_EFORKED.  Thread-safe (takes the writer lock).  Checked
 *         build: aborts on a closed cache.
 */
CCACHE_API int ccache_remove(ccache *c, ccache_key key);

/** @brief ccache_remove() for a strong cache (all 256 bits must match).
 *  @param c the cache.
 *  @param key the strong key (read during the call).
 *  @return as ccache_remove(); CCACHE_EINVAL also for a NULL key and on a
 *          fast cache (and ccache_remove() returns it on a strong one). */
CCACHE_API int ccache_remove_strong(ccache *c, const ccache_strong_key *key);

/**
 * @brief Remove every closure entry (counts `cleared`, one per entry).
 * Leases on them stay valid.  Programs held by caller handles stay interned;
 * the others are destroyed once no entry or lease refers to them.  Destroys
 * run on this thread before return.
 * @param c the cache.
 * @return CCACHE_OK (also when the table was already empty); CCACHE_EINVAL
 *         (NULL c); CCACHE_EFORKED.  Thread-safe (takes the writer lock).
 *         Checked build: aborts on a closed cache.  (Returned void before
 *         0.2.)
 */
CCACHE_API int ccache_clear(ccache *c);

/**
 * @brief Remove every entry that has expired by now on the configured clock
 * (cause ttl), in one writer section.  Costs O(expired): expired entries are
 * always a prefix of the FIFO.  With an unbounded ttl_ms it does nothing and
 * returns 0 (the clock is not read).
 * @param c the cache.
 * @return how many entries this call removed (>= 0, items), or CCACHE_EINVAL
 *         (NULL c) / CCACHE_EFORKED.  Destroys run on this thread before
 *         return.
 * Thread-safe (takes the writer lock).  The sweeper thread runs the same
 * sweep at each deadline (see ccache_config::sweeper_thread for when it
 * wakes); call this yourself when sweeper_thread is 0.  Checked build:
 * aborts on a closed cache.
 */
CCACHE_API int64_t ccache_sweep(ccache *c);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Single-flight get-or-compile
 * Concurrent misses on one key compile once: one caller runs the compile
 * callback with no lock held, every other caller for that key waits and then
 * gets the same result.  Errors are never cached.
 *
 * A compile callback may call any ccache function, get-or-compile for other
 * keys included.  Asking for its own key, directly or through a cycle of
 * compiles on the same thread, returns CCACHE_EDEADLK.  A cycle *across*
 * threads (A's compile waits for B while B's compile waits for A) is a
 * caller bug that no cache can resolve: it blocks both threads forever.
 * @{ */

/**
 * Closure compile callback, run by ccache_get_or_compile() on the thread that
 * owns the miss, once per miss, with no cache lock held.
 * @param ud the caller's pointer given to ccache_get_or_compile() (never
 *        dereferenced by the cache).
 * @param c the cache.
 * @param key the closure key being compiled.
 * @param closure_out points to NULL on entry; set it to the new closure
 *        (ownership passes to the cache on success, see
 *        ccache_get_or_compile()).  Valid only during the call.
 * @param program_out points to NULL on entry; set it to a program handle of
 *        @p c (the reference passes to the cache on success: do not release
 *        it; usually from ccache_program_intern() or
 *        ccache_program_get_or_compile()).  Valid only during the call.
 * @return 0 on success; non-zero on failure, in which case the cache takes
 *         nothing from the out-pointers: the callback cleans up what it made
 *         (releases the handle, frees the closure).  To say why, return
 *         ccache_compile_fail(status, fmt, ...): the caller and every
 *         waiter get that status and message.  A failure keeps its own
 *         status only when it is the negative ccache status of a failure
 *         recorded while the compile ran (by ccache_compile_fail(), or by a
 *         nested ccache call whose status the compile returns as it is);
 *         anything else non-zero is CCACHE_ECOMPILE, with the detail of the
 *         last failure recorded during the compile, or a line naming the key
 *         and the value returned.
 */
typedef int (*ccache_compile_fn)(void *ud, ccache *c, ccache_key key, void **closure_out,
                                 ccache_program **program_out);

/**
 * @brief Fetch @p key, or compile it once whatever the number of concurrent
 * callers.
 *
 * Hit (a live entry, as ccache_fetch() would return): a lease, no callback.
 * Miss: exactly one caller (the owner) runs @p compile on its own thread
 * with no lock held; its result is inserted as by ccache_put() (a remove or
 * clear during the compile does not cancel it), and the owner and every
 * waiter get a lease on that entry, even if it is evicted before they wake.
 * Counts: a hit `hits`; the owner a miss and `compiles`; each waiter a miss
 * and `waits`; nothing when this thread's last ccache_fetch() on @p c missed
 * @p key (that fetch counted it); `compile_ns` the compile's own time.  The
 * owner reports COMPILE_START and COMPILE_END to ccache_config::on_event.
 * On success the closure and the program handle the compile returned belong
 * to the cache (ccache_put()'s ownership rule applies to the closure).
 * @param c the cache.
 * @param key the closure key (by value).
 * @param compile the callback (must not be NULL); called at most once per
 *        call, only on the thread that owns the miss, before this returns.
 * @param ud passed to @p compile; never dereferenced by the cache; must stay
 *        valid until this returns.
 * @param out caller-owned lease, zeroed unless CCACHE_OK; release it with
 *        ccache_lease_release().
 * @return CCACHE_OK; CCACHE_EINVAL (NULL c, compile or out; or a compile
 *         that returned 0 without a program handle of this cache: its
 *         closure is destroyed and its handle released, nothing is cached,
 *         and every waiter gets CCACHE_EINVAL too);
 *         CCACHE_ECOMPILE, or the compile's own status (see
 *         ccache_compile_fn: the compile returned non-zero; to the caller
 *         and every waiter, with the same ccache_error_detail(); nothing
 *         cached; `compile_failures` +1);
 *         CCACHE_ENOMEM (before the compile: no compile ran and a miss is
 *         counted; or inserting failed, to the caller and every waiter: the
 *         compiled closure is destroyed unless the entry in the table holds
 *         that very pointer, and the program reference is dropped);
 *         CCACHE_EDEADLK (this thread is already compiling @p key, directly
 *         or through a cycle of nested compiles; counts a miss);
 *         CCACHE_EBUSY (from a destroy callback run by ccache_close());
 *         CCACHE_EFORKED.  Thread-safe.  Checked build: aborts on a closed
 *         cache; the lease gets a token.
 */
CCACHE_API int ccache_get_or_compile(ccache *c, ccache_key key, ccache_compile_fn compile, void *ud,
                                     ccache_lease *out);

/**
 * @brief ccache_get_or_compile() for a strong cache: hits, single-flight
 * joins and the entry inserted go by all 256 bits of @p key.
 * @param c the cache.
 * @param key the strong key (read during the call only); @p compile gets
 *        key->key as its `key`.
 * @param compile as ccache_get_or_compile().
 * @param ud as ccache_get_or_compile().
 * @param out as ccache_get_or_compile().
 * @return as ccache_get_or_compile(); CCACHE_EINVAL also for a NULL @p key
 *         or a fast cache.  Thread-safe.
 */
CCACHE_API int ccache_get_or_compile_strong(ccache *c, const ccache_strong_key *key,
                                            ccache_compile_fn compile, void *ud, ccache_lease *out);

/**
 * Program compile callback, run by ccache_program_get_or_compile() on the
 * thread that owns the miss, once per miss that no tier served, with no
 * cache lock held (a tier's compile locks may be held).
 * @param ud the caller's pointer given to ccache_program_get_or_compile()
 *        (never dereferenced by the cache).
 * @param c the cache.
 * @param pkey the program key being compiled.
 * @param native_out points to NULL on entry; set it to the native program
 *        (ownership passes to the cache on success, even if the cache then
 *        destroys it).  Valid only during the call.
 * @param cost_out points to 0 on entry; set it to the program's cost in
 *        bytes (see ccache_program_intern()).  Valid only during the call.
 * @return 0 on success; non-zero on failure, in which case the cache takes
 *         nothing: the callback frees what it made.
 */
typedef int (*ccache_program_compile_fn)(void *ud, ccache *c, ccache_key pkey, void **native_out,
                                         uint64_t *cost_out);

/**
 * @brief Look up the program interned under @p pkey, or make it once
 * whatever the number of concurrent callers, and return a handle (+1).
 *
 * Hit (@p pkey is interned): a handle, no callback, no tier asked
 * (program_hits +1).  Miss (program_misses +1): exactly one caller owns it;
 * every other caller for @p pkey waits (program_waits +1) and gets the
 * owner's result, a handle or the owner's status and detail.  The owner,
 * with no cache lock held, asks the tiers (if any, with a codec; a hit is
 * decoded, tier_hits +1, and @p compile is not called), else runs @p compile
 * (program_compiles +1, `program_compile_ns`, COMPILE_START/END events; the
 * result is stored in the tiers when it took at least tier_min_compile_us),
 * then interns the native as ccache_program_intern() does (if @p pkey was
 * interned meanwhile, the existing program is returned and the new native
 * destroyed unless it is that very pointer).  No closure entry is made, so
 * nothing is charged against max_cost_bytes until one refers to the
 * program.  Tier failures never change the status returned here.
 * @param c the cache.
 * @param pkey the program key (by value).
 * @param compile the callback (must not be NULL); called at most once per
 *        call, only on the owner's thread, before this returns.
 * @param ud passed to @p compile; never dereferenced by the cache; must stay
 *        valid until this returns.
 * @param out receives a handle (+1) on CCACHE_OK, to give back with
 *        ccache_program_release() (or to hand to the cache from a closure
 *        compile); NULL otherwise.  Caller-owned.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL c, compile or out);
 *         CCACHE_ECOMPILE, or the compile's own status (as for
 *         ccache_compile_fn: to the owner and every waiter, with the same
 *         ccache_error_detail(); nothing interned;
 *         `program_compile_failures` +1);
 *         CCACHE_ENOMEM (no memory for the single-flight record, before any
 *         compile; or interning failed, to the owner and every waiter: the
 *         native program was destroyed); CCACHE_EDEADLK (this thread is
 *         already making @p pkey, directly or through nested compiles; counts
 *         program_misses +1); CCACHE_EBUSY (from a destroy callback run by
 *         ccache_close()); CCACHE_EFORKED.  Thread-safe.  Checked build:
 *         aborts on a closed cache, or when the native the compile (or a
 *         decode) returned is one the cache already owns under another key.
 */
CCACHE_API int ccache_program_get_or_compile(ccache *c, ccache_key pkey,
                                             ccache_program_compile_fn compile, void *ud,
                                             ccache_program **out);

/**
 * @brief ccache_program_get_or_compile() for a strong cache: the program
 * table, the single-flight and the tiers go by all 256 bits of @p pkey (its
 * tiers' namespace is the strong one, and an entry whose 256 bits differ is
 * never decoded: tier_corrupt).
 * @param c the cache.
 * @param pkey the strong key (read during the call only); @p compile, the
 *        codec and the tier ops get pkey->key as their key.
 * @param compile as ccache_program_get_or_compile().
 * @param ud as ccache_program_get_or_compile().
 * @param out as ccache_program_get_or_compile().
 * @return as ccache_program_get_or_compile(); CCACHE_EINVAL also for a NULL
 *         @p pkey or a fast cache.  Thread-safe.
 */
CCACHE_API int ccache_program_get_or_compile_strong(ccache *c, const ccache_strong_key *pkey,
                                                    ccache_program_compile_fn compile, void *ud,
                                                    ccache_program **out);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Statistics
 *
 * Every counter is 64 bits wide and wraps modulo 2^64; the gauges never
 * wrap (cost_bytes saturates at UINT64_MAX; leases_out reads 0, not a
 * wrapped value, after a caller error).  What happens at each edge:
 * docs/design.md, "Bounds and expiry".
 * @{ */

/**
 * Counters (monotonic since open, wrapping modulo 2^64) and gauges (current
 * values).  All uint64_t.  Fields past the caller's `size` are not written.
 */
typedef struct ccache_stats {
  uint32_t size;               /**< set to sizeof(ccache_stats) by the caller;
                                    ccache_stats_get() leaves it as set */
  uint64_t hits;               /**< closure lookups that found a live entry and returned a
                                    lease (ccache_fetch(), ccache_get_or_compile()); a
                                    single-flight waiter's lease is not a hit.  Changed
                                    in 0.2 */
  uint64_t misses;             /**< closure lookups that found no live entry (expired
                                    included); a get-or-compile right after a fetch of
                                    the same key that missed on the same thread counts
                                    nothing more.  hits + misses = lookups.  Changed in
                                    0.2 */
  uint64_t inserts;            /**< puts/compiles that stored an entry, replacements included */
  uint64_t replaced;           /**< inserts that replaced an entry under the same key */
  uint64_t evicted_capacity;   /**< entries evicted by max_items */
  uint64_t evicted_ttl;        /**< entries removed because they expired (found by a fetch
                                    or a get-or-compile, or swept) */
  uint64_t evicted_cost;       /**< entries evicted by max_cost_bytes */
  uint64_t removed;            /**< entries removed by ccache_remove() */
  uint64_t cleared;            /**< entries removed by ccache_clear() */
  uint64_t items;              /**< gauge: closure entries in the table */
  uint64_t programs;           /**< gauge: programs alive (interned, not yet destroyed) */
  uint64_t programs_destroyed; /**< native programs that left the cache for good (interned
                                    ones whose last reference went, duplicates and natives
                                    refused at intern); NULL ones count but are never
                                    passed to destroy_program */
  uint64_t closures_destroyed; /**< closures that left the cache for good (NULL ones count
                                    but are never passed to destroy_closure) */
  uint64_t leases_out;         /**< gauge: leases not yet released (0, never a wrapped
                                    value, after a caller released one twice) */
  uint64_t cost_bytes;         /**< gauge: charged cost, bytes (each program referenced by
                                    an entry in the table once); UINT64_MAX when the sum
                                    is at or past 2^64 - 1 */
  uint64_t program_hits;       /**< program lookups that found the program interned
                                    (intern, fetch, get-or-compile); a waiter's handle is
                                    not a hit.  Changed in 0.2 */
  uint64_t program_misses;     /**< program lookups that did not: the owner of a
                                    get-or-compile miss (even if it then makes the
                                    program) and each waiter.  Changed in 0.2 */
  uint64_t compiles;           /**< closure compile callbacks that ran (failed ones included) */
  uint64_t program_compiles;   /**< program compile callbacks that ran (failed ones included;
                                    a tier hit is not one) */
  uint64_t compile_failures;   /**< closure compile callbacks that failed (program ones:
                                    program_compile_failures).  Changed in 0.2 */
  uint64_t waits;              /**< closure-level single-flight joins (program level:
                                    program_waits).  Changed in 0.2 */
  uint64_t compile_ns;         /**< nanoseconds in closure compile callbacks, without the
                                    nested get-or-compile calls that compiled or waited.
                                    Changed in 0.2 */
  uint64_t sweeper_wakeups;    /**< sweeper waits that ended at their deadline (not a
                                  wake-up by an insert or ccache_set_limits()).  Since 0.2. */
  /* ---- Persistent tiers (0.2).  Each program miss that asks the tiers
   * ends in exactly one of tier_hits / tier_misses. ---- */
  uint64_t tier_hits;          /**< program misses served by a tier (decoded, no compile) */
  uint64_t tier_misses;        /**< program misses that asked the tiers and got nothing
                                    usable (then the compile callback ran) */
  uint64_t tier_writes;        /**< successful puts, one per tier written (fills included) */
  uint64_t tier_errors;        /**< failed tier ops (attach, get, put, remove, lock, renew)
                                    and failed codec calls; never a failed fetch */
  uint64_t tier_corrupt;       /**< entries that failed verification (removed; a foreign
                                    runtime tag is a miss, not counted here) */
  uint64_t tier_bytes_read;    /**< bytes of entries returned by tier gets (framing included) */
  uint64_t tier_bytes_written; /**< bytes of entries successfully put (framing included) */
  uint64_t tier_lock_waits;    /**< program misses that found a tier's compile lock held
                                    (CCACHE_EBUSY) and waited */
  uint64_t tier_wait_ms_max;   /**< longest such wait, milliseconds */
  uint64_t tier_leases_lost;   /**< compile leases whose renewal failed (the server did not
                                    answer in time, or the lease had lapsed and another
                                    process took it): no more renewals for it; each also
                                    counts in tier_errors.  Since 0.2. */
  uint64_t tier_lock_timeouts; /**< directory-tier writes and removes whose size
                                    accounting was deferred: the size file's lock
                                    was held past io_lock_ms (or, after such a
                                    timeout, at the one try; see
                                    ccache_disk_options) */
  /* ---- First use (0.2; one block: fields move together) ---- */
  uint64_t handles_out;              /**< gauge: program handles not yet released */
  uint64_t program_waits;            /**< program-level single-flight joins */
  uint64_t program_compile_failures; /**< program compile callbacks that failed */
  uint64_t program_compile_ns;       /**< nanoseconds in program compile callbacks,
                                          without nested get-or-compile calls that
                                          compiled or waited, and without tier I/O */
  uint64_t misses_evicted;           /**< misses (counted in misses) on a key that is
                                          among the last 64 keys evicted for capacity
                                          or cost: a bound that thrashes.  A few in
                                          misses is normal; a large share means
                                          max_items (or max_cost_bytes) is below the
                                          working set (see the README's sizing note) */
  /* ---- Untrusted sizes (0.2, issue 21) ---- */
  /** Tier entries over ccache_config::tier_max_entry_bytes: each lookup
   *  that found one (a miss, refused before it was read whole; not removed;
   *  a program miss asks a tier again after taking its compile lock, so one
   *  entry usually counts twice) and each program whose entry would have
   *  been over it (not written). */
  uint64_t tier_oversize;
  /* ---- Signed entries (0.2, issue 21) ---- */
  uint64_t tier_rejected;    /**< intact entries refused by ccache_config::trust (unsigned,
                                  signed by a key not trusted, or a signature that does not
                                  verify): never decoded, never copied, never removed */
  uint64_t tier_unpublished; /**< programs a reader (trusted keys, no signing key) compiled
                                  and did not write to its tiers */
} ccache_stats;

/**
 * @brief Prepare a stats struct: zero it and set its size (sizeof *s).
 * @param s caller-owned; NULL is a no-op.  Thread-safe.  Since 0.2.
 */
CCACHE_API void ccache_stats_init(ccache_stats *s);

/**
 * @brief Snapshot the statistics.
 * @param c the cache; NULL zeroes the fields (returns CCACHE_EINVAL); a cache
 *        created before fork(), in the child, zeroes them too
 *        (CCACHE_EFORKED).
 * @param out caller-owned, from ccache_stats_init() (or with out->size =
 *        sizeof *out set by hand): only the first out->size bytes are
 *        written (a later, larger library never writes past an older
 *        caller's struct; out->size itself is kept).
 * @return CCACHE_OK; CCACHE_EINVAL, nothing written, with a detail line, for
 *         NULL out or an out->size that was never set: below
 *         offsetof(ccache_stats, hits) + 8 (a zeroed struct, size 0) or above
 *         CCACHE_STRUCT_SIZE_MAX; CCACHE_EINVAL with zeroes for NULL c;
 *         CCACHE_EFORKED with zeroes.  (Returned void before 0.2.)
 * Thread-safe (takes the writer lock, then the program table's lock); each
 * field is exact, the set is a near-simultaneous snapshot (the closure and
 * program counters under those locks, the destroy counts, sweeper_wakeups
 * and the tier counters just after).  Checked build: aborts on a closed
 * cache.
 */
CCACHE_API int ccache_stats_get(ccache *c, ccache_stats *out);

/**
 * @brief Format a stats snapshot as one line of `name=value` pairs (every
 * field within s->size, in struct order, space-separated, no newline), for
 * logs.
 * @param s a snapshot from ccache_stats_get() (read only).
 * @param buf caller-owned, receives the line, NUL-terminated and truncated
 *        to @p len - 1 bytes; may be NULL when @p len is 0 (to ask for the
 *        length).
 * @param len bytes at @p buf.
 * @return the line's length without the NUL (as snprintf: a return >= len
 *         means it was truncated), or CCACHE_EINVAL (NULL s, a size as
 *         ccache_stats_get() refuses, NULL buf with len > 0).  Thread-safe.
 *         Since 0.2.
 */
CCACHE_API int ccache_stats_format(const ccache_stats *s, char *buf, size_t len);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Default instance
 * One process-wide cache for runtimes that do not want to pass a handle
 * around.
 * @{ */

/**
 * @brief Supply the default instance's configuration before first use.
 * Environment variables still override its bounds (see ccache_default()).
 * May be called again, replacing the configuration, until the instance
 * exists.
 * @param cfg copied, with its codec, runtime tag and tier array (none of
 *        them need outlive the call; only the first cfg->size bytes are
 *        read, later fields keep their defaults); the callbacks, ctx and
 *        alloc_ctx it points to must stay valid until the process exits.
 *        On CCACHE_OK its tiers belong to the library: the default instance
 *        takes them when it is created, and a later ccache_default_init()
 *        that does not list one again frees it.  On error the caller keeps
 *        them.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL cfg, or a config ccache_open()
 *         refuses with CCACHE_EINVAL); CCACHE_ENOMEM (copying the runtime
 *         tag); CCACHE_EBUSY (the default instance already exists).  On
 *         error nothing is kept.  Unlike ccache_open() it starts nothing:
 *         the sweeper thread and the tiers' attach ops wait for the
 *         instance.  Thread-safe.
 */
CCACHE_API int ccache_default_init(const ccache_config *cfg);

/**
 * @brief The process-wide cache, created on first use (thread-safe).
 *
 * Bounds come from ccache_default_init()'s config (or the defaults), each
 * overridden by an environment variable when set: CLOSURE_CACHE_MAX_ITEMS,
 * CLOSURE_CACHE_TTL_MS (milliseconds), CLOSURE_CACHE_MAX_COST (bytes) (not
 * CCACHE_*: the ccache compiler cache rejects unknown CCACHE_* variables).
 * Accepted: a decimal integer >= 1 (no sign, spaces or suffix, at most
 * UINT64_MAX - 1), or "unbounded" / "infinity"; anything else (empty
 * included) makes this call return CCACHE_EINVAL, with a detail naming the
 * variable and value, at every call until the instance exists.
 * CLOSURE_CACHE_REDIS (the servers value of ccache_redis_options) adds a
 * Redis tier with default options below the configured tiers, if
 * ccache_default_init() supplied a codec (else, or when empty, it is
 * ignored); a down server is not an error here.  CLOSURE_CACHE_REDIS_USER
 * and CLOSURE_CACHE_REDIS_PASSWORD_FILE (its first line; CCACHE_EPERM unless
 * only its owner may read it) give that tier's AUTH;
 * CLOSURE_CACHE_SIGNING_KEY_FILE and CLOSURE_CACHE_TRUSTED_KEYS (key files,
 * comma-separated) make a trust object (ccache/trust.h) that replaces the
 * config's (a refused key file: that call's status, with a detail naming the
 * variable).  All are read with secure_getenv() (a set-user-ID or
 * set-group-ID process ignores them).  The instance lives until
 * the process exits (ccache_close() on it is CCACHE_EINVAL); in a fork()
 * child the parent's instance refuses every call (CCACHE_EFORKED) and the
 * child's first ccache_default() creates its own.
 * @param out receives the cache on CCACHE_OK (not owned by the caller: never
 *        close it); untouched on error.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL out; a bad CLOSURE_CACHE_MAX_ITEMS,
 *         CLOSURE_CACHE_TTL_MS or CLOSURE_CACHE_MAX_COST; a bad
 *         CLOSURE_CACHE_REDIS, or CLOSURE_CACHE_REDIS with
 *         ccache_default_init()'s config already at CCACHE_MAX_TIERS tiers);
 *         CCACHE_ENOTSUP (CLOSURE_CACHE_REDIS in a build without hiredis);
 *         CCACHE_ENOMEM / CCACHE_ETHREAD (creation failed).  Every failure
 *         leaves no instance, and the next call tries again.
 */
CCACHE_API int ccache_default(ccache **out);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_CACHE_H */
