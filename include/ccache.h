/**
 * @file ccache.h
 * @brief ccache: a compile-closure cache for ML runtimes (the whole public API).
 *
 * ccache is an embeddable C library that an ML runtime links into its JIT
 * path.  It maps a 128-bit structural fingerprint of a traced graph (or of
 * one primitive call site) to the *closure* the runtime calls, and every
 * closure to a reference-counted *program* (the native compiled code), so
 * that many call sites share one program.  It is not the ccache compiler
 * cache.
 *
 * Two tables:
 *  - the **closure table**: closure key -> (closure, program reference,
 *    64-bit insert index, insert time).  Bounded by item count (FIFO by
 *    insert index), TTL (from insert time) and the cost of the programs it
 *    references.
 *  - the **program table**: program key -> (native program, cost in bytes,
 *    reference count).  A program is destroyed exactly once, when the last
 *    closure entry, lease and handle referring to it let go.
 *
 * Conventions used by every call:
 *  - Status codes are `int`: CCACHE_OK (0), CCACHE_MISS (1, not an error) or
 *    a negative CCACHE_E* code; ccache_strerror() gives the text.
 *  - Times are milliseconds of a monotonic clock; costs are bytes.
 *  - Every call is safe from any thread at the same time as any other call
 *    on the same cache, except ccache_close(): closing a cache while another
 *    thread is still calling into it (or may do so later) is a caller error
 *    with undefined behaviour, as freeing any object still in use is.
 *  - User callbacks (compile, destroy, clock) never run while the cache
 *    holds an internal lock, so they may call back into the cache (except
 *    ccache_close() on the same cache).  They run synchronously on the thread
 *    whose call caused them, before that call returns; the one exception is
 *    the sweeper thread, which runs the destroys its sweeps cause.
 *    The allocator hook is the one callback that may run under an internal
 *    lock; it must never call into the cache.
 *  - A cache created before fork() must not be used in the child: every
 *    call on it there returns CCACHE_EFORKED (ccache_close() included; the
 *    child's copy of its memory is simply abandoned).  Caches opened in the
 *    child work normally, and ccache_default() there makes a new instance.
 *
 * Before sharing compiled programs between threads, read
 * @ref sharing_contract "Sharing a program between threads".
 */

/**
 * @page sharing_contract Sharing a program between threads
 *
 * **What the cache does.**  A closure and its program are handed to every
 * thread that holds a lease on the closure's entry, possibly at the same
 * moment: two threads that look up one key get the same closure and the
 * same native program, and many closures (call sites) share one program,
 * so one native program may be running on several threads at once.  The
 * compile ran on whichever thread missed first; the program then runs on
 * any thread.  A lease carries no thread state: it may be released on a
 * thread other than the one that took it.  The destroy callbacks run once,
 * on whichever thread lets go of the last reference (a lease release, an
 * eviction, a remove, close, or the sweeper thread), never while a lease
 * is out.  The cache never serialises execution: nothing it does makes
 * running a program safe.
 *
 * **What the runtime must guarantee**, for every closure and program it
 * puts in a cache used from more than one thread:
 *  - *Reentrant execution.*  Running a program (through any of its
 *    closures) from several threads at the same time must be safe.
 *    Execution must not write to the closure or the program, or to any
 *    state they share, unless the runtime synchronises that itself.
 *  - *No thread affinity.*  A program may run on a thread other than the
 *    one that compiled it; a lease may be released, and a closure or
 *    program destroyed, on yet another thread.  Nothing in them may depend
 *    on the creating thread's thread-local storage, per-thread allocators
 *    or per-thread runtime state.
 *  - *Per-worker mutable state.*  Whatever execution writes besides its
 *    outputs (scratch buffers, workspaces, streams or queues, profiling
 *    counters) belongs to the executing worker and is passed in with each
 *    execution, never kept in the closure or program.
 *  - *Settings captured at creation are part of the program.*  Whatever the
 *    compile reads from the compiling thread's environment (thread count,
 *    device, floating-point mode) is baked in: make it the same on every
 *    worker, or put it into the program key.
 *
 * **oneDNN 2.6, the worked example** (examples/onednn_serving does exactly
 * this).  A primitive's default scratchpad mode, dnnl_scratchpad_mode_library,
 * depends on the build option DNNL_ENABLE_CONCURRENT_EXEC.  It is off in
 * oneDNN's default build and in Debian's libdnnl-dev: then every primitive
 * uses one scratchpad global to the thread that created it, so a primitive
 * must not even move to another thread, let alone run on two at once (with
 * the option on, the scratchpad is private to the primitive, which still
 * must not run concurrently).  Sharing primitives through the cache in that
 * mode gives wrong results, silently.  The recipe:
 *  1. Create every primitive with dnnl_primitive_attr_set_scratchpad_mode(
 *     attr, dnnl_scratchpad_mode_user), and put the scratchpad mode into the
 *     program key.
 *  2. Give each serving worker its own dnnl_stream_t and its own scratchpad
 *     buffer, grown to the largest size any primitive it runs asks for
 *     (dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0), then
 *     dnnl_memory_desc_get_size(); for a cached primitive, get its
 *     descriptor with dnnl_primitive_get_primitive_desc(), or store the
 *     size in the closure at compile time).
 *  3. Pass that buffer as DNNL_ARG_SCRATCHPAD on every
 *     dnnl_primitive_execute(), and wait on the worker's stream before
 *     releasing the lease.  No lock around execution is needed: in user
 *     mode a primitive is safe to run concurrently as long as no two
 *     executions use the same scratchpad buffer.
 *  4. Keep the OpenMP thread count the same on every worker: oneDNN sizes
 *     a CPU primitive's work split and scratchpad for the thread count of
 *     the thread that creates it (the example's largest scratchpad is
 *     260 KiB at 2 OpenMP threads, 132 KiB at 1).  If workers differ, put
 *     the count into the program key.
 */
#ifndef CCACHE_H
#define CCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @name Symbol export
 *  CCACHE_API marks every public function.  The shared library is built
 *  with hidden visibility, so only the calls declared here are exported.
 *  @{ */
#if defined(CCACHE_BUILDING) && defined(__GNUC__)
#define CCACHE_API __attribute__((visibility("default")))
#else
#define CCACHE_API
#endif
/** @} */

/** @name Versions
 *  Semantic version of the library.  0.x: no ABI promise yet (SOVERSION 0).
 *  CCACHE_VERSION_NUMBER is MAJOR*10000 + MINOR*100 + PATCH.
 *  @{ */
#define CCACHE_VERSION_MAJOR 0
#define CCACHE_VERSION_MINOR 2
#define CCACHE_VERSION_PATCH 0
#define CCACHE_VERSION_NUMBER \
  (CCACHE_VERSION_MAJOR * 10000 + CCACHE_VERSION_MINOR * 100 + CCACHE_VERSION_PATCH)
/** @} */

/**
 * @brief The library's version number as MAJOR*10000 + MINOR*100 + PATCH.
 *
 * Compare with CCACHE_VERSION_NUMBER to detect a header/library mismatch.
 * Thread-safe; no side effects.
 * @return the runtime library's version number.
 */
CCACHE_API unsigned ccache_version(void);

/* ------------------------------------------------------------------------ */
/** @name Status codes
 * Pinned integers generated from one list (as libuv's UV_ERRNO_MAP):
 * the value of a code never changes between versions.
 * @{ */
#define CCACHE_STATUS_MAP(X)                                                  \
  X(OK, 0, "success")                                                         \
  X(MISS, 1, "not found in the cache (not an error)")                         \
  X(EINVAL, -1, "invalid argument")                                           \
  X(ENOMEM, -2, "out of memory; the cache is unchanged")                      \
  X(EBUSY, -3,                                                                \
    "busy: leases, handles or compiles are outstanding, or the "              \
    "call came from inside a callback of this cache")                         \
  X(ECOMPILE, -4, "the compile callback failed; nothing was cached")          \
  X(EDEADLK, -5,                                                              \
    "a compile asked for its own key (directly or through a "                 \
    "cycle on the same thread)")                                              \
  X(EFORKED, -6, "the cache was created in the parent process before fork()") \
  X(ETHREAD, -7, "the sweeper thread could not be started")                   \
  X(ENOTSUP, -8,                                                              \
    "not supported by this build (e.g. the Redis tier without "               \
    "hiredis)")                                                               \
  X(EPERM, -9, "refused: a tier's directory is not private to this user")     \
  X(EIO, -10, "a tier could not be opened or used (I/O error)")

/** Status codes returned by ccache calls. */
typedef enum ccache_status {
#define CCACHE__STATUS_ENUM(name, value, text) CCACHE_##name = (value),
  CCACHE_STATUS_MAP(CCACHE__STATUS_ENUM)
#undef CCACHE__STATUS_ENUM
} ccache_status;

/**
 * @brief Text for a status code.
 * @param status any int; unknown values get "unknown ccache status".
 * @return a static, NUL-terminated, non-empty string; never NULL.  Never
 *         free it.  Thread-safe.
 */
CCACHE_API const char *ccache_strerror(int status);

/**
 * @brief One line of detail about the most recent failed call on this
 * thread that records one.
 *
 * Calls whose failure is worth a name (the path of a refused tier
 * directory, a bad server list) record a line of text in thread-local
 * storage before returning their status: ccache_tier_disk() and
 * ccache_tier_redis() do.  Calls that record nothing leave it unchanged, and
 * a later success does not clear it; compare with the status you got.
 * @return a NUL-terminated string owned by the library ("" if nothing was
 *         recorded on this thread); never NULL.  Valid until the next ccache
 *         call on this thread; never free it.  Thread-safe (per thread).
 */
CCACHE_API const char *ccache_error_detail(void);
/** @} */

/* ------------------------------------------------------------------------ */
/** @name Keys and handles
 * @{ */

/**
 * A 128-bit fingerprint.  The cache never interprets it: equal keys are the
 * same entry, whatever produced them (see the fingerprint builder below).
 */
typedef struct ccache_key {
  uint64_t lo; /**< low 64 bits */
  uint64_t hi; /**< high 64 bits */
} ccache_key;

/** An open cache.  Opaque; create with ccache_open(). */
typedef struct ccache ccache;

/** Serialisation callbacks for tiers (see "Persistent tiers" below). */
typedef struct ccache_codec ccache_codec;

/** A persistent tier (a backend plus the cache's state for it).  Opaque;
 *  see "Persistent tiers" below. */
typedef struct ccache_tier ccache_tier;

/**
 * A program handle.  Opaque.  Every handle returned by ccache_program_intern(),
 * ccache_program_fetch() or ccache_program_get_or_compile() is one counted
 * reference, to be given back with ccache_program_release().
 */
typedef struct ccache_program ccache_program;

/**
 * What a hit returns: the closure and its native program, both valid until
 * the lease is released with ccache_lease_release(), even if the entry is
 * evicted, replaced, removed or expires meanwhile.  A lease pins its closure
 * entry, which pins its program.  Taking a lease allocates nothing.
 *
 * A zero-initialised lease (`ccache_lease l = {0};`) is "no lease": releasing
 * it is a no-op.  ccache_lease_release() zeroes the lease.  Do not copy a
 * lease and release both copies.
 */
typedef struct ccache_lease {
  void *closure;      /**< the runtime's closure, as given to ccache_put() */
  void *native;       /**< the native program pointer the closure runs (what
                      ccache_program_native() returns for its program;
                      named `program` before 0.2) */
  void *internal_[2]; /**< private; do not touch */
} ccache_lease;

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Configuration
 * @{ */

/** Bound value meaning "no bound" (for max_items, ttl_ms, max_cost_bytes). */
#define CCACHE_UNBOUNDED UINT64_MAX

/** Largest `size` any versioned struct of this API may claim (config, stats,
 *  options): a larger one is taken for a struct that was never set up. */
#define CCACHE_STRUCT_SIZE_MAX 4096u

/** What ccache_config_init() writes in ccache_config::magic ("ccfg"). */
#define CCACHE_CONFIG_MAGIC 0x63636667u

/**
 * Destroy callback for a closure or a native program.
 * @param obj the closure (destroy_closure) or native program (destroy_program)
 *            pointer exactly as given to the cache.
 * @param ctx ccache_config::ctx.
 * Runs exactly once per object, with no internal lock held, on the thread
 * whose call caused it (the sweeper thread for entries it expires).  It may
 * call any ccache function except ccache_close() on the same cache.
 */
typedef void (*ccache_destroy_fn)(void *obj, void *ctx);

/**
 * Clock callback: current time in milliseconds of a monotonic clock.
 * @param ctx ccache_config::ctx.
 * Called with no internal lock held, from any thread (the sweeper included).
 * It may step back; the cache clamps insert times so they never decrease.
 */
typedef uint64_t (*ccache_clock_fn)(void *ctx);

/**
 * Allocator hook (both alloc and free, or neither).
 * alloc returns at least `size` bytes aligned for any object type, or NULL;
 * free takes what alloc returned (never NULL).
 * Called from any thread, the sweeper's included, and possibly while the
 * cache holds an internal lock: it must never call into the cache.
 */
typedef void *(*ccache_alloc_fn)(void *alloc_ctx, size_t size);
/** @copydoc ccache_alloc_fn */
typedef void (*ccache_free_fn)(void *alloc_ctx, void *ptr);

/**
 * Options for ccache_open().  Initialise with ccache_config_init(), then set
 * the fields you need.  The cache copies the struct; it need not outlive
 * ccache_open().
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
  /** 1 (default): a background sweeper thread expires entries every ttl/2
   *  while ttl_ms is finite.  0: no thread is ever started; call
   *  ccache_sweep() yourself (fetch still never returns an expired entry). */
  int sweeper_thread;
  /** Most closure entries kept: CCACHE_UNBOUNDED (default) or >= 1.
   *  FIFO eviction by insert index, as EMLX's CompileCache (PR #140).
   *  Changeable with ccache_set_limits(). */
  uint64_t max_items;
  /** Time to live in milliseconds, from insert time (a hit never refreshes
   *  it): CCACHE_UNBOUNDED (default) or >= 1.  Changeable at runtime. */
  uint64_t ttl_ms;
  /** Cap in bytes on the summed cost of the programs referenced by closure
   *  entries: CCACHE_UNBOUNDED (default) or >= 1.  Changeable at runtime. */
  uint64_t max_cost_bytes;
  /** Called once for every closure that leaves the cache; NULL: none. */
  ccache_destroy_fn destroy_closure;
  /** Called once for every native program that leaves the cache; NULL: none. */
  ccache_destroy_fn destroy_program;
  /** Passed to destroy_closure, destroy_program and clock_ms. */
  void *ctx;
  /** Monotonic milliseconds; NULL (default) means CLOCK_MONOTONIC.  Tests
   *  inject a fake clock here.  The sweeper thread still *waits* on real
   *  CLOCK_MONOTONIC time but judges expiry with this clock. */
  ccache_clock_fn clock_ms;
  /** Allocator hook: both or neither (else EINVAL); NULL: malloc/free.
   *  Everything the cache allocates goes through it. */
  ccache_alloc_fn alloc;
  /** @copydoc alloc */
  ccache_free_fn free;
  /** Passed to alloc and free. */
  void *alloc_ctx;
  /* ---- Persistent tiers (0.2; see "Persistent tiers").  A config whose
   * size ends before these fields (a 0.1 caller's) gets their defaults. ---- */
  /** Serialisation callbacks, copied at open (the struct need not outlive
   *  ccache_open()); NULL (default): the tiers are never used (they are
   *  still owned and closed by the cache). */
  const ccache_codec *codec;
  /** The runtime's identity (its version, target, compile flags): entries
   *  made under another tag are never loaded.  Copied at open; NULL (default)
   *  is the same as "".  Any length. */
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
  /** Number of tiers, 0 (default) .. CCACHE_MAX_TIERS. */
  uint32_t n_tiers;
} ccache_config;

/** Most tiers one cache may have (ccache_config::n_tiers). */
#define CCACHE_MAX_TIERS 8u

/**
 * @brief Fill @p cfg with the defaults: size = sizeof *cfg, magic =
 * CCACHE_CONFIG_MAGIC, every bound CCACHE_UNBOUNDED, sweeper_thread 1, no
 * callbacks, no allocator hook, CLOCK_MONOTONIC, no codec, no tiers,
 * tier_min_compile_us 1000.
 * @param cfg caller-owned; NULL is a no-op.  Thread-safe.
 */
CCACHE_API void ccache_config_init(ccache_config *cfg);

/**
 * @brief Create a cache.
 * @param cfg options (copied); must come from ccache_config_init().
 * @param out receives the new cache, owned by the caller until
 *            ccache_close() returns CCACHE_OK.  Untouched on error.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL cfg or out; cfg->size below the
 *         struct up to alloc_ctx (the fields before the tiers, which then
 *         take their defaults) or above CCACHE_STRUCT_SIZE_MAX, or cfg->magic
 *         not CCACHE_CONFIG_MAGIC: a config that never went through
 *         ccache_config_init(); a bound of 0; alloc without free or free
 *         without alloc; n_tiers over CCACHE_MAX_TIERS, NULL tiers with
 *         n_tiers > 0, a NULL tier, a tier listed twice or already owned by
 *         another cache, a codec with a NULL callback);
 *         CCACHE_ENOMEM; CCACHE_ETHREAD (the sweeper thread could not start).
 *         On every error the caller keeps its tiers.
 * Thread-safe.  If ttl_ms is finite and sweeper_thread is 1, the sweeper
 * thread starts here.  With a codec, each tier's attach op runs here (its
 * failure disables that tier for this cache and counts in tier_errors; it is
 * not an error of the open).
 */
CCACHE_API int ccache_open(const ccache_config *cfg, ccache **out);

/**
 * @brief Close a cache: stop and join its sweeper thread (at once, whatever
 * the TTL) and its lease-renewal thread, destroy every closure and program
 * it still holds (closures first), close its tiers (each tier's close op,
 * in tier order), and free it.
 * @param c the cache; NULL is a no-op returning CCACHE_OK.
 * @return CCACHE_OK (c is freed); CCACHE_EBUSY, nothing changed and the cache
 *         still usable, while any lease or program handle is outstanding,
 *         while a compile is in flight, or when called from inside any
 *         callback of this cache; CCACHE_EINVAL for the default instance
 *         (ccache_default()), which lives until the process exits;
 *         CCACHE_EFORKED in a child process.
 * Must not run concurrently with any other call on @p c (caller error).
 * The destroy callbacks it runs may still call in, but every call that would
 * add to the cache (fetch, put, program intern/fetch, get-or-compile at both
 * levels, set_limits) returns CCACHE_EBUSY (put and intern still destroy
 * what they were given), so nothing outlives the cache.
 */
CCACHE_API int ccache_close(ccache *c);

/**
 * @brief Change the bounds at runtime.
 *
 * All three are validated first: any value of 0 returns CCACHE_EINVAL with
 * nothing changed.  Then, under the writer lock: shrinking max_items evicts
 * the oldest entries at once (FIFO, cause capacity); a new ttl_ms applies to
 * entries already present (counted from their insert times) and to the
 * sweeper's next tick; a finite ttl_ms starts or wakes the sweeper thread, an
 * unbounded one parks it; if the charged cost exceeds max_cost_bytes the
 * oldest entries leave (cause cost).  Destroys run before this returns.
 * @param c the cache.
 * @param max_items CCACHE_UNBOUNDED or >= 1.
 * @param ttl_ms milliseconds, CCACHE_UNBOUNDED or >= 1.
 * @param max_cost_bytes bytes, CCACHE_UNBOUNDED or >= 1.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL c or a bound of 0);
 *         CCACHE_ETHREAD (the sweeper thread could not start: nothing
 *         changed); CCACHE_EFORKED.  Thread-safe.
 */
CCACHE_API int ccache_set_limits(ccache *c, uint64_t max_items, uint64_t ttl_ms,
                                 uint64_t max_cost_bytes);

/**
 * @brief Read the current bounds.
 * @param c the cache.
 * @param max_items, ttl_ms, max_cost_bytes receive the bounds (items,
 *        milliseconds, bytes; CCACHE_UNBOUNDED for none); each may be NULL.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL c); CCACHE_EFORKED.  Thread-safe.
 */
CCACHE_API int ccache_get_limits(ccache *c, uint64_t *max_items, uint64_t *ttl_ms,
                                 uint64_t *max_cost_bytes);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Program table
 * Programs are interned under their own structural key (the "dispatch" key:
 * op, shapes, dtypes, attributes, target; never a call site), as EMLX's
 * native dispatch cache, so many closure entries share one program.
 * @{ */

/**
 * @brief Intern a native program under @p pkey and return a handle (+1).
 *
 * Ownership of @p native always passes to the cache, on error too.  If
 * @p pkey is already interned, the existing program is returned (+1) and
 * @p native is destroyed once with destroy_program, unless it is the very
 * pointer already interned.  Interning one native pointer under two pkeys is
 * a caller error (it would be destroyed twice).
 * A new program counts as a program_miss, an existing one as a program_hit.
 * @param c the cache.
 * @param pkey the program's structural key.
 * @param native the native program (may be NULL; then nothing is destroyed).
 * @param cost_bytes caller's estimate of the native memory the program holds,
 *        in bytes; charged against max_cost_bytes while a closure entry in
 *        the table refers to it.  Ignored when @p pkey exists.
 * @param out receives the handle; release with ccache_program_release().
 * @return CCACHE_OK; CCACHE_EINVAL (NULL c or out: @p native is destroyed if
 *         c is non-NULL); CCACHE_ENOMEM (native destroyed, cache unchanged);
 *         CCACHE_EFORKED.  Thread-safe.
 */
CCACHE_API int ccache_program_intern(ccache *c, ccache_key pkey, void *native, uint64_t cost_bytes,
                                     ccache_program **out);

/**
 * @brief Look up a program by key.
 * @param c the cache.
 * @param pkey the program's key.
 * @param out receives a handle (+1) on CCACHE_OK, NULL on CCACHE_MISS.
 * @return CCACHE_OK; CCACHE_MISS; CCACHE_EINVAL (NULL c or out);
 *         CCACHE_EFORKED.  Counts program_hits / program_misses.  Thread-safe.
 */
CCACHE_API int ccache_program_fetch(ccache *c, ccache_key pkey, ccache_program **out);

/**
 * @brief The native program behind a handle.
 * @param p a live handle; NULL returns NULL.
 * @return the native pointer, valid while @p p is held.  Thread-safe.
 */
CCACHE_API void *ccache_program_native(const ccache_program *p);

/**
 * @brief Give back one program handle.  If it was the last reference, the
 * program leaves the table and destroy_program runs on this thread, with no
 * lock held, before this returns.
 * @param c the cache the handle came from; @p p NULL (or @p c NULL) is a no-op.
 * Thread-safe.  Using @p p afterwards is a caller error.
 */
CCACHE_API void ccache_program_release(ccache *c, ccache_program *p);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Closure table
 * @{ */

/**
 * @brief Store @p closure under @p key, running @p p.
 *
 * The entry takes its own reference on @p p; the caller keeps its handle.
 * The entry gets the next 64-bit insert index and the insert time
 * max(clock now, previous insert time).  If @p key is present the entry is
 * replaced (the later insert wins; counts as an insert and as `replaced`; no
 * capacity eviction).  Putting the very closure pointer the entry already
 * holds does not destroy it.  Then, while items > max_items the oldest entry
 * leaves (cause capacity), and while the charged cost > max_cost_bytes the
 * oldest entries leave (cause cost), never the entry just inserted.  Destroys
 * caused by this call run on this thread before it returns.
 *
 * Ownership of @p closure passes to the cache in every case where @p c is not
 * NULL: on error it is destroyed once with destroy_closure.  The one pointer
 * the cache already owns that may be put again is the closure of the entry
 * now in the table under @p key.  Putting any other pointer the cache still
 * owns (one stored under another key, or one whose entry has left the table
 * but is still held by a lease, e.g. taken from a lease) is a caller error:
 * it would be destroyed twice.  The same holds for what a compile returns.
 * @param c the cache.
 * @param key the closure key (call site fingerprint).
 * @param closure the runtime's callable (may be NULL).
 * @param p a live handle of this cache.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL c or p); CCACHE_ENOMEM (cache
 *         unchanged); CCACHE_EFORKED.  Thread-safe.
 */
CCACHE_API int ccache_put(ccache *c, ccache_key key, void *closure, ccache_program *p);

/**
 * @brief Look up a closure.  On a hit, @p out holds a lease on the entry.
 *
 * Never returns an expired entry (now >= insert time + ttl_ms), whether or not
 * a sweep has run; an expired entry found here counts a miss and is removed
 * (cause ttl).  The hit path allocates nothing and does not touch the
 * program's reference count.
 * @param c the cache.
 * @param key the closure key.
 * @param out caller-owned lease; set on CCACHE_OK, zeroed otherwise.
 * @return CCACHE_OK; CCACHE_MISS; CCACHE_EINVAL (NULL c or out);
 *         CCACHE_EFORKED.  Thread-safe; a hit locks and counts only on its
 *         thread's own reader stripe, so hits from different threads on
 *         different keys share no lock and no written cache line (the first
 *         16 threads get a stripe each; more threads share stripes).
 */
CCACHE_API int ccache_fetch(ccache *c, ccache_key key, ccache_lease *out);

/**
 * @brief Release a lease.  If the entry has left the table and this was its
 * last lease, destroy_closure then (if it was the program's last reference)
 * destroy_program run on this thread, with no lock held, before this returns.
 * @param c the cache the lease came from; NULL is a no-op.
 * @param lease zeroed on return; NULL or an already-zeroed lease is a no-op.
 * Thread-safe.
 */
CCACHE_API void ccache_lease_release(ccache *c, ccache_lease *lease);

/**
 * @brief Remove the entry for @p key.  Its destroys (unless a lease holds it)
 * run on this thread before this returns.  Counts `removed`.
 * @return CCACHE_OK; CCACHE_MISS (no such key); CCACHE_EINVAL (NULL c);
 *         CCACHE_EFORKED.  Thread-safe.
 */
CCACHE_API int ccache_remove(ccache *c, ccache_key key);

/**
 * @brief Remove every closure entry (counts `cleared`).  Programs held by
 * caller handles stay interned.  Destroys run on this thread before return.
 * @param c the cache.
 * @return CCACHE_OK (also when the table was already empty); CCACHE_EINVAL
 *         (NULL c); CCACHE_EFORKED.  Thread-safe.  (Returned void before 0.2.)
 */
CCACHE_API int ccache_clear(ccache *c);

/**
 * @brief Remove every entry that has expired by now (cause ttl).  Costs
 * O(expired): expired entries are always a prefix of the FIFO.
 * @param c the cache.
 * @return how many entries this call removed (>= 0), or CCACHE_EINVAL (NULL
 *         c) / CCACHE_EFORKED.  Destroys run on this thread before return.
 * Thread-safe.  The sweeper thread calls this every ttl/2.
 */
CCACHE_API int64_t ccache_sweep(ccache *c);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Single-flight get-or-compile
 * Concurrent misses on one key compile once: one caller runs the compile
 * callback with no lock held, every other caller for that key waits and then
 * gets the same result (oneDNN's primitive cache does this with a shared
 * future, JAX with a notification).  Errors are never cached.
 *
 * A compile callback may call any ccache function, get-or-compile for other
 * keys included.  Asking for its own key, directly or through a cycle of
 * compiles on the same thread, returns CCACHE_EDEADLK.  A cycle *across*
 * threads (A's compile waits for B while B's compile waits for A) is a
 * caller bug that no cache can resolve: it blocks both threads forever.
 * @{ */

/**
 * Closure compile callback.
 * @param ud the caller's pointer given to ccache_get_or_compile().
 * @param c the cache.
 * @param key the closure key being compiled.
 * @param closure_out set to the new closure (ownership passes to the cache
 *        on success).
 * @param program_out set to a program handle of @p c (the reference passes
 *        to the cache on success; usually from ccache_program_intern() or
 *        ccache_program_get_or_compile()).
 * @return 0 on success; non-zero on failure, in which case the cache takes
 *         nothing from the out-pointers: the callback cleans up what it made.
 */
typedef int (*ccache_compile_fn)(void *ud, ccache *c, ccache_key key, void **closure_out,
                                 ccache_program **program_out);

/**
 * @brief Fetch @p key, or compile it once whatever the number of concurrent
 * callers.
 *
 * Hit: a lease, no callback.  Miss: exactly one caller runs @p compile on its
 * own thread with no lock held; the entry is inserted like ccache_put()
 * (later inserts win; a remove or clear during the compile does not cancel
 * it) and the caller and every waiter get a lease on that entry, even if it
 * is evicted or expires before they wake.  Counts: the compiling caller one
 * miss and one `compiles`; each waiter one `waits` and a hit (lease) or a
 * miss (error); `compile_ns` adds the time spent in @p compile.
 * @param c the cache.
 * @param key the closure key.
 * @param compile the callback (must not be NULL).
 * @param ud passed to @p compile.
 * @param out the lease, zeroed unless CCACHE_OK.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL c, compile or out; or a compile
 *         that returned 0 without a program handle of this cache: its
 *         closure is destroyed and its handle released, nothing is cached);
 *         CCACHE_ECOMPILE (the compile returned non-zero: to the caller and
 *         every waiter; nothing cached; `compile_failures` +1);
 *         CCACHE_ENOMEM (inserting failed; to the caller and every waiter;
 *         the compiled closure is destroyed unless the entry in the table
 *         holds that very pointer, and the program reference is dropped);
 *         CCACHE_EDEADLK (see above); CCACHE_EFORKED.  Thread-safe.
 */
CCACHE_API int ccache_get_or_compile(ccache *c, ccache_key key, ccache_compile_fn compile, void *ud,
                                     ccache_lease *out);

/**
 * Program compile callback.
 * @param ud the caller's pointer.
 * @param c the cache.
 * @param pkey the program key being compiled.
 * @param native_out set to the native program (ownership passes to the cache
 *        on success).
 * @param cost_out set to its cost in bytes (see ccache_program_intern()).
 * @return 0 on success, non-zero on failure (nothing is taken).
 */
typedef int (*ccache_program_compile_fn)(void *ud, ccache *c, ccache_key pkey, void **native_out,
                                         uint64_t *cost_out);

/**
 * @brief ccache_program_fetch(), or compile the program once whatever the
 * number of concurrent callers; same contract as ccache_get_or_compile() at
 * the program level (program_hits, program_misses, program_compiles, waits).
 * With tiers and a codec (see "Persistent tiers"), the owner of a miss asks
 * the tiers before compiling: a tier hit counts program_misses +1 and
 * tier_hits +1, never program_compiles (which counts only compile callbacks
 * that really ran), and the compile callback is not called.  Tier failures
 * never change the status returned here.
 * @param out receives a handle (+1) on CCACHE_OK, NULL otherwise.
 * @return CCACHE_OK; CCACHE_EINVAL; CCACHE_ECOMPILE; CCACHE_ENOMEM (the
 *         native program was destroyed); CCACHE_EDEADLK; CCACHE_EFORKED.
 * Thread-safe.
 */
CCACHE_API int ccache_program_get_or_compile(ccache *c, ccache_key pkey,
                                             ccache_program_compile_fn compile, void *ud,
                                             ccache_program **out);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Persistent tiers
 *
 * Tiers let compiled programs outlive the process and be shared between
 * processes: a directory on this machine (ccache_tier_disk()), a Redis
 * server for a fleet (ccache_tier_redis()), or a backend of your own
 * (ccache_tier_custom()).
 *
 * **Model.**  Tiers sit behind the *program* table only; the closure table
 * and every hit path (ccache_fetch(), ccache_program_fetch(), a program
 * already interned) never touch a tier.  When ccache_program_get_or_compile()
 * misses, the one thread that owns the miss (the single-flight owner; the
 * other threads for that key wait for it as usual):
 *  1. asks the tiers top-down (tiers[0] first).  A usable entry in tier i is
 *     decoded into a native program and written to tiers 0..i-1 ("fills the
 *     tiers above"); nothing is compiled.
 *  2. otherwise takes each tier's compile lock in tier order.  A lock another
 *     process holds (CCACHE_EBUSY) is retried with a backoff from the tier's
 *     poll_ms doubling up to poll_max_ms, and after every failed attempt that
 *     tier is asked again: when the other process publishes, this one loads
 *     its entry instead of compiling.  Past the tier's wait_ms it stops
 *     waiting and compiles without the remaining locks.  After taking a lock
 *     the tier is asked once more (the holder may have published just before
 *     letting go).
 *  3. runs the compile callback (no cache lock held; the tier locks are),
 *     and if it ran for at least tier_min_compile_us and the codec does not
 *     answer CCACHE_CODEC_SKIP, encodes the program once and writes the entry
 *     to every tier;
 *  4. releases the locks in reverse order.
 * Leased locks (lease_ms > 0, e.g. Redis) are renewed every lease_ms/3 by
 * one library thread per cache, started the first time a leased lock is
 * taken and joined by ccache_close(); the compiling thread never renews.
 *
 * **Failures never fail a fetch.**  A tier op that fails (I/O error, full
 * disk, vanished directory, unreachable server) and a codec call that fails
 * count in tier_errors, and the cache proceeds as if that tier were absent:
 * the program is compiled.  Every entry is verified in full before the codec
 * sees a byte; one that fails (torn, truncated, bit-flipped, not an entry)
 * counts in tier_corrupt, is removed through the tier's remove op, and the
 * program is compiled.  An intact entry written under another runtime tag is
 * a miss (never loaded, never tier_corrupt).
 *
 * **Entry format** (the core writes and checks it; backends store opaque
 * blobs).  Little-endian:
 *   magic "CCTIER\0\n" (8 bytes), u32 format version (CCACHE_TIER_FORMAT),
 *   u32 header length (56), u64 key.lo, u64 key.hi, u64 XXH3-64 of the
 *   runtime tag, u64 payload length, u64 creation time (ms since the Unix
 *   epoch), the payload (the codec's bytes), then XXH3-128 of header and
 *   payload (u64 low half, u64 high half).
 *
 * **Keys must be stable across processes.**  An entry is found by its
 * program key alone, in another process, maybe after a restart or on another
 * machine: derive program keys from what the program *is* (the fingerprint
 * builder's keys of op, shapes, dtypes, attributes, target are), never from
 * anything that differs between processes (pointers, addresses, handles,
 * counters, ASLR-dependent values).  Whatever the program depends on that
 * the key does not hold (the compiler's version, the CPU features targeted,
 * compile flags) belongs in ccache_config::runtime_tag.
 *
 * **Trust.**  A tier is trusted: whoever can write to it can hand every
 * process that uses it a program to run (the checksum detects accidents, not
 * attacks).  The directory tier therefore refuses a directory that is not
 * private to the user (see ccache_tier_disk()); a Redis server must be
 * writable only by parties you trust, over a network path you trust (no TLS:
 * see ccache_redis_options).
 *
 * **Lock order.**  Tier ops and codec callbacks are never called while the
 * cache holds any of its own locks; they may call into the cache (except
 * ccache_close() on it).  The tier compile locks are held across the compile
 * callback, which may itself miss on other program keys (nested compiles):
 * backends must not make a thread wait on a lock it already holds.
 * @{ */

/** Version of the entry format, in every entry and in every namespace. */
#define CCACHE_TIER_FORMAT 1u

/** What ccache_codec::encode returns for a program that must never reach a
 *  tier (not an error: nothing is counted). */
#define CCACHE_CODEC_SKIP 1

/**
 * Serialisation callbacks, one set per cache (ccache_config::codec),
 * supplied by the runtime.  Each runs on the thread that owns the miss (a
 * caller of ccache_program_get_or_compile()), with no cache lock held; it
 * may be called from several threads at once for different keys.  Each may
 * call into the cache, except ccache_close() on it.
 */
struct ccache_codec {
  /**
   * Serialise a program just compiled.
   * @param ctx ccache_codec::ctx.
   * @param pkey its program key.
   * @param native the native program the compile callback returned, not yet
   *        interned: read it, do not keep or free it.
   * @param bytes set to the serialised bytes (any allocation of yours;
   *        given back once through free_bytes after they are written).
   * @param len set to their length in bytes, at most 2^40.
   * @return 0 with *bytes and *len set; CCACHE_CODEC_SKIP (this program is
   *         never stored; *bytes is not read); anything else is a failure
   *         (tier_errors +1, nothing stored, the fetch still succeeds).
   */
  int (*encode)(void *ctx, ccache_key pkey, void *native, void **bytes, size_t *len);
  /**
   * Give back what encode() returned in *bytes (once per successful encode).
   * @param ctx ccache_codec::ctx.
   * @param bytes, len as encode() set them.
   */
  void (*free_bytes)(void *ctx, void *bytes, size_t len);
  /**
   * Build a native program from verified bytes (an entry whose checksum,
   * key, length and runtime tag all matched).
   * @param ctx ccache_codec::ctx.
   * @param pkey the program key.
   * @param bytes @p len bytes, owned by the library, valid only during the
   *        call (copy what you keep).
   * @param native_out set to the new native program: on 0, ownership passes
   *        to the cache, which destroys it with destroy_program like a
   *        compiled one.
   * @param cost_out set to its cost in bytes (see ccache_program_intern()).
   * @return 0 on success; non-zero: tier_errors +1, nothing is taken, and
   *         the program is compiled instead.
   */
  int (*decode)(void *ctx, ccache_key pkey, const void *bytes, size_t len, void **native_out,
                uint64_t *cost_out);
  void *ctx; /**< passed to the three callbacks */
};

/**
 * Backend operations, for your own backends (ccache_tier_custom()); the
 * library's backends use the same table.  Every op receives the @c state
 * given to ccache_tier_custom().  Ops may be called from any thread,
 * concurrently with each other for different keys (and get/put/remove
 * concurrently for the same key); renew() runs on the library's renewal
 * thread.  No op is called with a cache lock held.  Status returns use the
 * CCACHE_* codes; an op must never call exit() or abort() on an I/O failure.
 */
typedef struct ccache_tier_ops {
  uint32_t size;    /**< sizeof(ccache_tier_ops); smaller is CCACHE_EINVAL */
  const char *name; /**< "disk", "redis", ...: a static string, or NULL ("custom") */
  /**
   * Called once per cache, at ccache_open() (only if the cache has a codec):
   * the namespace every key of this cache lives in, "v<format>/<hash>" with
   * the hash the XXH3-64 of the runtime tag as 16 lowercase hex digits (e.g.
   * "v1/3f2a9c0d11e2b4a7").  Two runtime tags never share a namespace.  The
   * disk tier maps it to <dir>/v1/<hash>/, the Redis tier to
   * <prefix>:v1:<hash>:.  @p ns is valid only during the call.
   * May be NULL.  A negative status disables the tier for this cache
   * (tier_errors +1).
   */
  int (*attach)(void *state, const char *ns);
  /**
   * Look up the entry for @p pkey.
   * @return CCACHE_OK with *blob and *len set (given back once through
   *         free_blob); CCACHE_MISS; or a negative status (tier_errors +1,
   *         treated as a miss).
   */
  int (*get)(void *state, ccache_key pkey, void **blob, size_t *len);
  /** Give back a blob returned by get(). */
  void (*free_blob)(void *state, void *blob, size_t len);
  /**
   * Store (or replace) the entry for @p pkey; @p blob (@p len bytes) is
   * valid only during the call.  Should be atomic: a concurrent get() sees
   * the old entry, the new one or none, never a mix (a torn entry is caught
   * by the checksum, but costs a compile).
   * @return CCACHE_OK or a negative status (tier_errors +1).
   */
  int (*put)(void *state, ccache_key pkey, const void *blob, size_t len);
  /** Remove the entry for @p pkey (it failed verification).
   *  @return CCACHE_OK, CCACHE_MISS or a negative status.  May be NULL. */
  int (*remove)(void *state, ccache_key pkey);
  /**
   * Try once, without blocking, to take the compile lock for @p pkey.
   * @param lock set on CCACHE_OK to a handle of yours, passed to renew()
   *        and unlock().
   * @return CCACHE_OK; CCACHE_EBUSY (another holder has it: the core waits
   *         and retries); or another negative status (tier_errors +1: the
   *         core proceeds without this tier's lock).
   * NULL: this tier has no locks (then unlock and renew are unused).
   */
  int (*lock)(void *state, ccache_key pkey, void **lock);
  /**
   * Extend a leased lock; called every lease_ms/3 from the renewal thread
   * while the compile runs.  Never called concurrently with unlock() on the
   * same handle.
   * @return CCACHE_OK, or a negative status (the lease is lost:
   *         tier_errors +1, no more renewals for it; the compile goes on).
   * Required when lease_ms > 0; unused (may be NULL) when lease_ms is 0
   * (locks that never expire, e.g. ones the kernel drops when their holder
   * dies).
   */
  int (*renew)(void *state, void *lock);
  /** Release a lock taken by lock().  Required when lock is set. */
  void (*unlock)(void *state, void *lock);
  /** Free the backend and @c state: once, from ccache_close() or
   *  ccache_tier_free().  May be NULL. */
  void (*close)(void *state);
  uint64_t lease_ms;    /**< lock lease, ms: 0 (locks do not expire) or >= 3 */
  uint64_t poll_ms;     /**< first wait between lock attempts while EBUSY, ms, >= 1 */
  uint64_t poll_max_ms; /**< backoff cap, ms, >= poll_ms */
  uint64_t wait_ms;     /**< total wait for a busy lock before compiling without
                             it, ms (0: never wait) */
} ccache_tier_ops;

/**
 * @brief Make a tier from your own backend.
 * @param ops copied (need not outlive the call).  Required: get, free_blob,
 *        put; unlock whenever lock is set; renew whenever lease_ms > 0.  When
 *        lock is set: 1 <= poll_ms <= poll_max_ms.
 * @param state passed to every op; freed by ops->close when the tier is
 *        freed (not on error: on error it stays yours).
 * @param out receives the tier, owned by the caller until a successful
 *        ccache_open() takes it (or ccache_tier_free()).  Untouched on error.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL ops or out, ops->size too small, a
 *         required op missing, lease_ms 1 or 2, bad poll bounds);
 *         CCACHE_ENOMEM.  Thread-safe.
 */
CCACHE_API int ccache_tier_custom(const ccache_tier_ops *ops, void *state, ccache_tier **out);

/**
 * @brief Free a tier that no cache owns (ops->close runs).
 * @param t a tier from ccache_tier_custom(), ccache_tier_disk() or
 *        ccache_tier_redis() that was never handed to a successful
 *        ccache_open() (a cache frees its own tiers); NULL is a no-op.
 * Freeing a tier a cache owns is a caller error.
 */
CCACHE_API void ccache_tier_free(ccache_tier *t);

/**
 * Options of the directory tier.  Initialise with ccache_disk_options_init().
 *
 * **Layout.**  One file per program at
 * <dir>/v<format>/<runtime-tag hash>/<2 hex>/<32 hex key> (the 2 hex digits
 * are the key's first two; the key is key.hi then key.lo, 16 lowercase hex
 * digits each), so two runtime versions never overwrite each other.  Also in
 * <dir>/v<format>/: "lock" (the compile locks: byte-range locks, see below)
 * and "size" (the running total of entry bytes).  Writers create
 * ".tmp.<pid>.<n>" in the entry's directory and publish it with one
 * rename(); a stale temporary file (its writer dead, or over an hour old) is
 * removed by the next writer in that directory or by the cleaner.
 *
 * **One compile per machine.**  The compile lock of a key is an
 * open-file-description byte-range lock (F_OFD_SETLK) on byte (key.lo mod
 * 4096) of the lock file, which is opened O_CLOEXEC: the kernel drops it
 * when its holder dies, and only the holder's own unlock or death releases
 * it (unlike classic POSIX record locks, which any close() of the file in the
 * process drops).  The lock file never grows.  Two keys that share a byte
 * only make one wait for the other, since a waiter looks for the entry again
 * after each attempt.  Within one process, threads that miss on keys sharing
 * a byte (a nested compile included) do not wait for each other, and the
 * byte stays locked until the last of them unlocks.  A child fork()ed from a
 * process holding such a lock does not keep it alive (it closes its copy of
 * the lock file); a tier made before fork() is not usable in the child.
 * Bytes 4096 and 4097 of the lock file guard the size file and elect the
 * one cleaner.
 *
 * **Size cap.**  Sizes are the entry files' lengths (directories and
 * filesystem blocks not counted).  Every write adds to the shared running
 * total; when it exceeds max_bytes, one process (the others skip) lists
 * every entry and removes the least recently used first (age = the file's
 * modification time, refreshed by a hit at most once per
 * touch_interval_ms), down to 90 % of the cap, then corrects the total.  So
 * the directory stays under the cap plus the entries written while a
 * clean-up runs (one, for a single writer).  The cap covers every runtime
 * tag under <dir>/v<format>/.  Files changed behind the library's back make
 * the running total drift until the next clean-up recounts.
 *
 * Needs a local filesystem with open-file-description locks (Linux >= 3.15;
 * not NFS).
 */
typedef struct ccache_disk_options {
  uint32_t size;              /**< sizeof, set by ccache_disk_options_init() */
  const char *dir;            /**< the directory (NUL-terminated, non-empty), copied;
                          created 0700 (with missing parents) if absent */
  uint64_t max_bytes;         /**< size cap, bytes: CCACHE_UNBOUNDED (default) or >= 1 */
  int fsync;                  /**< 1: fsync the file before publishing it and its
                          directory after; 0 (default): no fsync (the checksum
                          catches a file torn by a crash) */
  uint64_t lock_poll_ms;      /**< first wait between lock attempts, ms (>= 1; default 10) */
  uint64_t lock_poll_max_ms;  /**< backoff cap, ms (>= lock_poll_ms; default 100) */
  uint64_t lock_wait_ms;      /**< total wait for another process's compile before
                                   compiling here, ms (default 60000) */
  uint64_t touch_interval_ms; /**< a hit refreshes an entry's age at most once per
                                   interval, ms (default 60000; 0: every hit) */
} ccache_disk_options;

/**
 * @brief Fill @p o with the defaults (dir NULL: set it).
 * @param o caller-owned; NULL is a no-op.  Thread-safe.
 */
CCACHE_API void ccache_disk_options_init(ccache_disk_options *o);

/**
 * @brief Make a directory tier.
 *
 * Creates @p o->dir (mode 0700, and missing parents 0700) if absent, then
 * checks that it is private: a directory owned by another user than the
 * effective user, or writable by group or others, is refused (the check is
 * the library's own, so it holds for root too).  The directory is opened
 * once here; everything later happens relative to that descriptor, so a
 * directory removed or replaced under a running process is never followed:
 * its writes fail (tier_errors) and it compiles.
 * @param o options (copied).
 * @param out receives the tier (owned as with ccache_tier_custom()).
 * @return CCACHE_OK; CCACHE_EINVAL (NULL o or out, o->size too small, NULL or
 *         empty dir, max_bytes 0, bad poll bounds); CCACHE_EPERM (owned by
 *         another user, or writable by group or others: the detail names the
 *         path); CCACHE_EIO (cannot create it or open it as a directory: the
 *         detail names the path and the reason); CCACHE_ENOTSUP (no
 *         open-file-description locks on this system); CCACHE_ENOMEM.  On
 *         error ccache_error_detail() says why.  Thread-safe.
 */
CCACHE_API int ccache_tier_disk(const ccache_disk_options *o, ccache_tier **out);

/**
 * Options of the Redis tier (a fleet shares compiled programs through one or
 * more Redis servers).  Initialise with ccache_redis_options_init(), then
 * set servers.  Built only with hiredis (Debian: libhiredis-dev); otherwise
 * ccache_tier_redis() returns CCACHE_ENOTSUP.
 *
 * **What is sent.**  Every key lives under
 * `<prefix>:<namespace>:`, the namespace being the one attach() receives
 * with '/' written as ':' (e.g. "ccache:v1:3f2a9c0d11e2b4a7:"), followed by
 * the program key as 32 lowercase hex digits, key.hi then key.lo.  The
 * commands, all with binary-safe arguments:
 *  - `GET <k>` (lookup), `SET <k> <entry> [PX entry_ttl_ms]` (store),
 *    `DEL <k>` (an entry that failed verification).  The value is the
 *    core's checksummed entry (see "Entry format" above): the codec's bytes,
 *    framed; nothing else of the process is sent.
 *  - the compile lease, under `<k>:lease`: `SET <k>:lease <token> NX PX
 *    lease_ms` takes it (the token is 16 bytes from getrandom(), as 32 hex
 *    digits); `EVAL "if redis.call('get', KEYS[1]) == ARGV[1] then return
 *    redis.call('pexpire', KEYS[1], ARGV[2]) end return 0" 1 <k>:lease
 *    <token> lease_ms` renews it; the same script with `del` instead of
 *    `pexpire` (and no ARGV[2]) releases it.  Both scripts act only while the
 *    lease still holds this holder's token, so a process whose lease lapsed
 *    can neither extend nor delete the lease another process took since.
 *  - `AUTH [user] password` on each new connection when a password is set.
 * The server needs GET, SET, DEL, EVAL and, inside the scripts, PEXPIRE
 * (AUTH is always allowed) on keys matching `<prefix>:*`; an ACL user can
 * be limited to exactly that, e.g.
 * `user ccache on >secret ~ccache:* +get +set +del +eval +pexpire`.
 *
 * **One compile per fleet.**  A process that misses everywhere takes the
 * lease, compiles, stores the entry, then releases the lease.  The library's
 * renewal thread renews it every lease_ms/3 on a connection of its own, so
 * a long compile keeps it however busy the other connections are.  Others
 * find it taken (CCACHE_EBUSY), poll the entry with a backoff from poll_ms
 * doubling to poll_max_ms, and load the entry when it appears; if the
 * holder dies its lease lapses within lease_ms and one waiter takes over;
 * after wait_ms a waiter compiles locally.
 *
 * **Several servers.**  Each key goes to one server by rendezvous
 * (highest-random-weight) hashing: the largest XXH3-64 of the key seeded
 * with the XXH3-64 of the server's name as written ("host:port" or
 * "unix:/path").  Every process given the same names, in any order, picks
 * the same server; a server that is down loses only its own share of the
 * keys (those fetches compile locally: there is no fail-over, so a key's
 * lease never moves between servers).
 *
 * **Connections.**  Blocking hiredis connections, made on first use (never
 * by ccache_tier_redis()).  Each server keeps up to 8 idle connections; a
 * thread that misses takes an idle one or connects a new one, so misses on
 * different threads never wait for each other's round trips.  Connect time
 * is bounded by connect_timeout_ms, each read or write of a command by
 * command_timeout_ms.  A host name is resolved (getaddrinfo) at each
 * connect, outside those bounds: give addresses for predictable timing.
 *
 * **Faults never fail a fetch.**  A server absent at start, killed, slow
 * past the timeouts, a dropped connection, an error reply (`OOM command not
 * allowed` under maxmemory, NOAUTH, WRONGPASS, ...) each fail that one op
 * (tier_errors +1; the program compiles).  A failed connect or a connection
 * that breaks puts the server in reconnect backoff: no new connection is
 * tried for reconnect_min_ms, doubling on each further failure up to
 * reconnect_max_ms, and ops on its keys fail at once meanwhile; the first
 * successful connect ends it.  An error reply does not (the connection is
 * fine).
 *
 * **Signals.**  hiredis writes with write(2), which raises SIGPIPE on a
 * connection the server has reset.  The library never changes the process's
 * signal disposition: it blocks SIGPIPE in the calling thread around each
 * command (pthread_sigmask), consumes a SIGPIPE raised meanwhile
 * (sigtimedwait with a zero timeout) and restores the thread's mask; a
 * SIGPIPE already pending before the call is left pending.
 *
 * **fork().**  A tier made before fork() never uses the parent's
 * connections in the child: its ops return CCACHE_EFORKED there (and a
 * cache from before the fork is unusable in the child anyway).
 *
 * **Trust and transport.**  A shared Redis is trusted: anyone who can write
 * to it (or to the network path to it) can hand every process that uses it a
 * program to run; the checksum catches accidents, not attacks.  hiredis 0.14
 * has no TLS: traffic, passwords included, is plain text.  Use it on
 * loopback, a unix socket, or a private network you trust (or a TLS tunnel
 * such as stunnel to a local port).
 */
typedef struct ccache_redis_options {
  uint32_t size; /**< sizeof, set by ccache_redis_options_init() */
  /** "host:port[,host:port...]" (port 1..65535; IPv6 as "[addr]:port") or
   *  "unix:/absolute/path" entries, comma-separated, at most 64, no
   *  duplicates, no spaces; copied.  Required (the default NULL is
   *  CCACHE_EINVAL). */
  const char *servers;
  /** Key prefix, 1..256 bytes, default "ccache"; NULL means the default;
   *  copied.  Caches (or applications) sharing a server are kept apart by
   *  it; runtime tags are kept apart by the namespace anyway. */
  const char *prefix;
  /** ACL user (AUTH user password; needs a password), or NULL; copied. */
  const char *user;
  /** Password (AUTH password, or AUTH user password), or NULL; copied and
   *  wiped from memory when the tier is freed. */
  const char *password;
  uint64_t connect_timeout_ms; /**< bound on one connect, ms (>= 1; default 200) */
  uint64_t command_timeout_ms; /**< bound on each read/write of a command, ms (>= 1;
                                    default 1000) */
  uint64_t entry_ttl_ms;       /**< PX on stored entries, ms: CCACHE_UNBOUNDED (default:
                                    entries stay until evicted by the server's own
                                    maxmemory policy) or >= 1 */
  uint64_t lease_ms;           /**< compile lease, ms (3 .. 2^50; default 10000);
                                    renewed every lease_ms/3 while the compile runs */
  uint64_t poll_ms;            /**< waiter backoff start, ms (>= 1; default 5) */
  uint64_t poll_max_ms;        /**< waiter backoff cap, ms (>= poll_ms; default 200) */
  uint64_t wait_ms;            /**< total wait for another process's compile before
                                    compiling locally, ms (default 120000; 0: never wait) */
  uint64_t reconnect_min_ms;   /**< reconnect backoff start, ms (>= 1; default 100) */
  uint64_t reconnect_max_ms;   /**< reconnect backoff cap, ms (>= reconnect_min_ms;
                                    default 5000) */
} ccache_redis_options;

/**
 * @brief Fill @p o with the defaults listed with each field (servers NULL:
 * set it).
 * @param o caller-owned; NULL is a no-op.  Thread-safe.
 */
CCACHE_API void ccache_redis_options_init(ccache_redis_options *o);

/**
 * @brief Make a Redis tier (see ccache_redis_options for what it sends and
 * how it behaves).  No connection is made here: a server absent at start is
 * a tier error at the first miss, never a failure of this call.
 * @param o options (copied, strings included: none need outlive the call).
 * @param out receives the tier (owned as with ccache_tier_custom()).
 *        Untouched on error.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL o or out, o->size too small, a bad
 *         server list, an empty or over-long prefix, a user without a
 *         password, a timeout or reconnect bound of 0, entry_ttl_ms 0,
 *         lease_ms outside 3..2^50, bad poll or reconnect bounds: the
 *         detail, ccache_error_detail(), says which); CCACHE_ENOTSUP (built
 *         without hiredis: install libhiredis-dev and rebuild);
 *         CCACHE_ENOMEM.  Thread-safe.
 */
CCACHE_API int ccache_tier_redis(const ccache_redis_options *o, ccache_tier **out);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Statistics
 * @{ */

/**
 * Counters (monotonic since open) and gauges (current values).  All uint64_t.
 */
typedef struct ccache_stats {
  uint32_t size;               /**< set to sizeof(ccache_stats) by the caller */
  uint64_t hits;               /**< closure lookups that returned a lease */
  uint64_t misses;             /**< closure lookups that did not (expired included) */
  uint64_t inserts;            /**< puts/compiles that stored an entry, replacements included */
  uint64_t replaced;           /**< inserts that replaced an entry under the same key */
  uint64_t evicted_capacity;   /**< entries evicted by max_items */
  uint64_t evicted_ttl;        /**< entries removed because they expired (fetch or sweep) */
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
  uint64_t leases_out;         /**< gauge: leases not yet released */
  uint64_t cost_bytes;         /**< gauge: charged cost, bytes */
  uint64_t program_hits;       /**< program lookups that found the program */
  uint64_t program_misses;     /**< program lookups that did not */
  uint64_t compiles;           /**< closure compile callbacks that ran */
  uint64_t program_compiles;   /**< program compile callbacks that ran (a tier hit is not one) */
  uint64_t compile_failures;   /**< compile callbacks (both levels) that failed */
  uint64_t waits;              /**< single-flight joins (both levels) */
  uint64_t compile_ns;         /**< nanoseconds spent in compile callbacks (both levels; a
                                  program compile nested in a closure compile counts in both) */
  uint64_t sweeper_wakeups;    /**< times the sweeper thread woke at a deadline it had set (the
                                  oldest entry's insert time + ttl_ms, or a day when that is
                                  further); its re-arming after an insert into an empty table or
                                  a new TTL is not counted.  Since 0.2. */
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
} ccache_stats;

/**
 * @brief Snapshot the statistics.
 * @param c the cache; NULL (or a child-process cache) zeroes the fields.
 * @param out caller-owned; set out->size = sizeof *out first: only the first
 *        out->size bytes are written, none if out->size is above
 *        CCACHE_STRUCT_SIZE_MAX (a struct never set up) (a later, larger library never writes
 *        past an older caller's struct).  NULL is a no-op.
 * Thread-safe; each field is exact, the set is a near-simultaneous snapshot.
 */
CCACHE_API void ccache_stats_get(ccache *c, ccache_stats *out);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Default instance
 * One process-wide cache for runtimes that do not want to pass a handle
 * around (as EMLX calls default to its one named process).
 * @{ */

/**
 * @brief Supply the default instance's configuration before first use.
 * Environment variables still override its bounds (see ccache_default()).
 * @param cfg copied, with its codec, runtime tag and tier array (none of
 *        them need outlive the call); NULL is EINVAL.  On CCACHE_OK its tiers
 *        belong to the library: the default instance takes them when it is
 *        created, and a later ccache_default_init() that does not list one
 *        again frees it.  On error the caller keeps them.
 * @return CCACHE_OK; CCACHE_EINVAL (invalid cfg, as for ccache_open());
 *         CCACHE_ENOMEM; CCACHE_EBUSY (the default instance already exists).
 *         Thread-safe.
 */
CCACHE_API int ccache_default_init(const ccache_config *cfg);

/**
 * @brief The process-wide cache, created on first use (thread-safe).
 *
 * Bounds come from ccache_default_init()'s config (or the defaults), each
 * overridden by an environment variable when set: CLOSURE_CACHE_MAX_ITEMS,
 * CLOSURE_CACHE_TTL_MS (milliseconds), CLOSURE_CACHE_MAX_COST (bytes).  The
 * CCACHE_ prefix is deliberately not used: the ccache compiler cache reports
 * unknown CCACHE_* variables as errors.  Accepted forms: a decimal integer
 * >= 1 (no sign, no spaces, no suffix, at most UINT64_MAX - 1), or
 * "unbounded" / "infinity".  Anything else makes this call return
 * CCACHE_EINVAL every time.  CLOSURE_CACHE_REDIS=host:port[,host:port...]
 * (or unix:/path; the server list of ccache_redis_options) adds a Redis tier
 * with the default options below the configured tiers, if
 * ccache_default_init() supplied a codec (without one it is ignored); a bad
 * list makes this call return CCACHE_EINVAL, a build without hiredis
 * CCACHE_ENOTSUP, each with ccache_error_detail() naming the variable.  A
 * server that is down is not an error here (see ccache_tier_redis()).
 * The instance lives until the process exits;
 * ccache_close() on it returns CCACHE_EINVAL.  In a child process after
 * fork(), the parent's instance refuses every call (CCACHE_EFORKED) and the
 * child's first ccache_default() creates the child's own instance.
 * @param out receives the cache (not owned by the caller).
 * @return CCACHE_OK; CCACHE_EINVAL (NULL out or a bad variable, or
 *         CLOSURE_CACHE_REDIS with ccache_default_init()'s config already at
 *         CCACHE_MAX_TIERS tiers); CCACHE_ENOTSUP (CLOSURE_CACHE_REDIS in a
 *         build without hiredis); CCACHE_ENOMEM / CCACHE_ETHREAD (creation
 *         failed; retried next call).
 */
CCACHE_API int ccache_default(ccache **out);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Structural fingerprints (XXH3-128)
 *
 * A streaming builder over xxHash's XXH3-128.  Every field is framed with a
 * one-byte type tag and (for variable-length fields) a 64-bit length, so no
 * two different sequences of fields hash the same bytes ("ab"+"c" differs
 * from "a"+"bc"; the u64 1 differs from the 8 bytes 01 00 .. 00).  Integers
 * are encoded little-endian at fixed width, so a key is the same on every
 * machine and in every process.  CCACHE_FP_FORMAT_VERSION is mixed in first:
 * a change in encoding bumps it.
 *
 * Exact encoding.  A builder key is XXH3-128 (unseeded, default secret; lo =
 * low64, hi = high64) of the byte stream
 *
 *     "ccache-fp" (9 ASCII bytes), u32 CCACHE_FP_FORMAT_VERSION, fields...
 *
 * with one field per append (all integers little-endian):
 *  - u64:   0x01, u64 value
 *  - i64:   0x02, u64 two's complement of the value
 *  - f64:   0x03, u64 IEEE-754 bit pattern
 *  - bytes: 0x04, u64 length, the bytes
 *  - str:   0x05, u64 length, the bytes
 *  - shape: 0x06, i32 dtype, u32 rank, rank x i64 dims
 *
 * How the stream is fed to XXH3 (batched, direct) never changes the key.
 * ccache_fp_graph() uses the same conventions; its streams are described
 * there.
 *
 * Collision model: XXH3-128 is a fast *non-cryptographic* hash.  Accidental
 * collisions between honest graphs are negligible (~2^-64 at 2^32 keys), but
 * someone who can choose graphs can construct collisions on purpose.  Do not
 * key a cache shared across trust boundaries on these fingerprints alone.
 *
 * Errors: an append that fails on an initialised builder (NULL data with a
 * non-zero length, a bad shape) *poisons* it: later appends do nothing and
 * return CCACHE_EINVAL, and ccache_fp_final() returns CCACHE_EINVAL, until
 * ccache_fp_init() starts over.  So a sequence of appends may be checked once,
 * at ccache_fp_final().  A builder that never saw ccache_fp_init() is refused
 * (EINVAL) by every call rather than hashed.
 *
 * The builder allocates nothing and is not thread-safe (one builder per
 * thread); all functions are reentrant.  A builder may be copied by value
 * (e.g. to fork a common prefix): the copy continues independently.
 * @{ */

/** Version of the key encoding, mixed into every key. */
#define CCACHE_FP_FORMAT_VERSION 1u
/** Largest rank accepted by ccache_fp_shape() and the graph helper. */
#define CCACHE_FP_MAX_RANK       16u

/**
 * Builder state.  Opaque: holds the XXH3 streaming state and a small buffer
 * that batches small fields.  Caller-owned (stack is fine), no cleanup.
 */
typedef struct ccache_fp {
#if defined(__cplusplus)
  alignas(64) unsigned char opaque_[1024];
#else
  _Alignas(64) unsigned char opaque_[1024];
#endif
} ccache_fp;

/** @brief Start (or restart) a fingerprint: clears any poisoning.
 *  @param fp caller-owned; NULL is a no-op. */
CCACHE_API void ccache_fp_init(ccache_fp *fp);
/** @brief Append an unsigned 64-bit integer (tag + 8 bytes LE).
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp). */
CCACHE_API int ccache_fp_u64(ccache_fp *fp, uint64_t v);
/** @brief Append a signed 64-bit integer (own tag + 8 bytes LE, two's complement).
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp). */
CCACHE_API int ccache_fp_i64(ccache_fp *fp, int64_t v);
/** @brief Append a double by its IEEE-754 bit pattern (so -0.0 != 0.0 and
 *  NaN payloads differ).
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp). */
CCACHE_API int ccache_fp_f64(ccache_fp *fp, double v);
/** @brief Append @p len bytes (tag + 64-bit length + bytes).  The contents are
 *  hashed, never the address.
 *  @param data may be NULL only when @p len is 0 (the same as any empty buffer).
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp, or
 *          NULL data with len > 0: the builder is then poisoned and
 *          ccache_fp_final() returns EINVAL). */
CCACHE_API int ccache_fp_bytes(ccache_fp *fp, const void *data, size_t len);
/** @brief Append a string of @p len bytes (own tag, distinct from bytes; no
 *  terminator is read or hashed).
 *  @return as ccache_fp_bytes(). */
CCACHE_API int ccache_fp_str(ccache_fp *fp, const char *s, size_t len);
/** @brief Append a tensor type: dtype, rank, then each dim (LE 64-bit).
 *  @param dtype the runtime's dtype code (any int32).
 *  @param rank 0..CCACHE_FP_MAX_RANK.
 *  @param dims @p rank dims; may be NULL only when rank is 0.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp;
 *          rank too large or NULL dims with rank > 0: the builder is
 *          poisoned). */
CCACHE_API int ccache_fp_shape(ccache_fp *fp, int32_t dtype, uint32_t rank, const int64_t *dims);
/** @brief Finish: the key of everything appended so far.  The builder is
 *  unchanged and may take more fields (appending after a final continues
 *  the same stream).
 *  @param out receives the key; untouched on error.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL fp or out, an uninitialised
 *          builder, or an earlier append failed: no key). */
CCACHE_API int ccache_fp_final(const ccache_fp *fp, ccache_key *out);

/** An operand or output reference: output slot @c slot of node @c node. */
typedef struct ccache_fp_ref {
  uint32_t node; /**< index into the node array */
  uint32_t slot; /**< output slot of that node */
} ccache_fp_ref;

/** One output slot's tensor type. */
typedef struct ccache_fp_tensor {
  int32_t dtype;       /**< the runtime's dtype code */
  uint32_t rank;       /**< 0..CCACHE_FP_MAX_RANK */
  const int64_t *dims; /**< @c rank dims (NULL only when rank is 0) */
} ccache_fp_tensor;

/**
 * One node of a graph, for ccache_fp_graph().  What enters its digest: the op
 * (op_name bytes if non-NULL, else op_id, under different tags so the name
 * "3" and the id 3 differ), the attribute bytes, each output slot's dtype and
 * shape, each operand's digest *in operand order* with its slot, whether
 * there is a constant (non-NULL @c constant) and its bytes, and whether the
 * node is a parameter and its position.  What never does: the node's index
 * in the array, any address, and the order in which independent nodes were
 * built.  NULL attrs with length 0 equals empty attrs; a NULL constant
 * ("no constant") differs from a non-NULL empty one.
 */
typedef struct ccache_fp_node {
  const char *op_name;             /**< op name (NUL-terminated), or NULL to use op_id */
  uint64_t op_id;                  /**< numeric op id, used when op_name is NULL */
  const void *attrs;               /**< attribute bytes (serialised by the runtime) */
  size_t attrs_len;                /**< bytes at attrs (NULL attrs needs 0) */
  const ccache_fp_tensor *outputs; /**< output slots (NULL only when n_outputs is 0) */
  uint32_t n_outputs;              /**< number of output slots */
  uint32_t n_operands;             /**< number of operands */
  const ccache_fp_ref *operands;   /**< operands; each must name an earlier node
                                      (NULL only when n_operands is 0) */
  const void *constant;            /**< constant bytes (weights baked in), or NULL */
  size_t constant_len;             /**< bytes at constant (NULL constant needs 0) */
  int64_t param_index;             /**< >= 0: graph input number param_index; -1: not
                                  an input; below -1 is EINVAL */
} ccache_fp_node;

/**
 * @brief Structural (Merkle) fingerprint of a graph.
 *
 * Each node's digest hashes its own fields and its operands' digests in
 * operand order; a graph input is identified by its parameter position; the
 * key hashes the device string, a summary of all parameter nodes and the
 * outputs' digests (with their slots) in output order.  Nodes must be
 * topologically ordered (operands point to earlier nodes).
 *
 * Only what an output depends on enters the key, plus every parameter node:
 * an op node no output reaches is ignored, but an unused parameter is not
 * (f(x, y) = x and f(x) = x are called differently).  The parameter summary
 * is order-independent (count and sums mod 2^64 of the parameters' digest
 * halves), so parameter nodes may sit anywhere in the array; distinct
 * positions are expected but not checked.
 *
 * Exact streams (integers little-endian), each hashed with XXH3-128:
 *  - node:  0x10; op as 0x11, u64 len, name bytes or as 0x12, u64 op_id;
 *    u64 attrs_len, attrs; u32 n_outputs, per output (i32 dtype, u32 rank,
 *    rank x i64 dims); u32 n_operands, per operand (u64 lo, u64 hi of its
 *    node's digest, u32 slot); u8 flags (0x01: constant != NULL, 0x02:
 *    param_index >= 0); if 0x01, u64 constant_len and the bytes; if 0x02,
 *    u64 param_index.
 *  - graph: "ccache-fp", u32 CCACHE_FP_FORMAT_VERSION, 0x20; u64 device
 *    length, device bytes; u64 parameter count, u64 sum of their digests' lo,
 *    u64 sum of their hi; u64 n_outputs, per output (u64 lo, u64 hi, u32 slot).
 *
 * @param nodes @p n_nodes nodes (read only, not retained).
 * @param n_nodes number of nodes.
 * @param outputs @p n_outputs graph outputs in order.
 * @param n_outputs number of outputs (>= 1).
 * @param device target/device string (NUL-terminated; NULL is EINVAL).
 * @param scratch caller-provided workspace of @p n_nodes keys (receives each
 *        node's digest; the call allocates nothing).
 * @param out receives the key.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL arguments, an operand pointing
 *         forward, to itself or out of range, or to a slot its node lacks, an
 *         output out of range or to a slot its node lacks, a rank over
 *         CCACHE_FP_MAX_RANK, NULL data with a non-zero length or count, a
 *         param_index below -1): everything is validated first, and on error
 *         neither @p out nor @p scratch is written.  Thread-safe, reentrant.
 */
CCACHE_API int ccache_fp_graph(const ccache_fp_node *nodes, size_t n_nodes,
                               const ccache_fp_ref *outputs, size_t n_outputs, const char *device,
                               ccache_key *scratch, ccache_key *out);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_H */
