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
 *    64-bit insert index, insert time).  Bounded by item count (FIFO: the
 *    oldest insert leaves first), TTL (from insert time) and the cost of the
 *    programs it references.
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
 *    call on it there that returns a status returns CCACHE_EFORKED
 *    (ccache_close() included; the child's copy of its memory is simply
 *    abandoned); ccache_lease_release() and ccache_program_release() do
 *    nothing there and ccache_stats_get() reports zeroes.  Caches opened in
 *    the child work normally, and ccache_default() there makes a new
 *    instance.
 *  - Caller errors that are cheap to catch get a status in every build;
 *    the others are undefined behaviour in the default build and abort with
 *    one line in the checked build (see "Checked build" below).
 *
 * Start with @ref simple_use "Simple use".  Before sharing compiled programs
 * between threads, read @ref sharing_contract "Sharing a program between
 * threads".
 */

/**
 * @page simple_use Simple use
 *
 * Open a cache, give it a program and a closure that runs it, fetch the
 * closure on every call, close.  `pkey` is a program key (what the program
 * is: op, shapes, dtypes, target), `site` a closure key (one call site);
 * both are 128-bit fingerprints (see "Structural fingerprints").  `native`,
 * `closure`, `args` and the names starting with `my_` are the runtime's.
 *
 * @code
 * static void drop_closure(void *obj, void *ctx) { my_closure_free(obj); }
 * static void drop_native(void *obj, void *ctx) { my_native_free(obj); }
 *
 * // Compile callbacks for the one-call form (run once per key, no lock held).
 * static int compile_native(void *ud, ccache *c, ccache_key pkey,
 *                           void **native_out, uint64_t *cost_out) {
 *   *native_out = my_compile(ud, cost_out); // *cost_out: bytes it holds
 *   return *native_out ? 0 : -1;            // 0: *native_out is the cache's
 * }
 * static int compile_site(void *ud, ccache *c, ccache_key site,
 *                         void **closure_out, ccache_program **program_out) {
 *   struct my_site *s = ud;
 *   if (ccache_program_get_or_compile(c, s->pkey, compile_native, s,
 *                                     program_out) != CCACHE_OK)
 *     return -1;
 *   if (!(*closure_out = my_closure_new(s))) {
 *     ccache_program_release(c, *program_out); // failed: undo what you made
 *     return -1;
 *   }
 *   return 0;                               // both are the cache's now
 * }
 *
 * ccache_config cfg;
 * ccache_config_init(&cfg);                 // always first (size, magic)
 * cfg.max_items = 4096;                     // entries; oldest leave first
 * cfg.destroy_closure = drop_closure;
 * cfg.destroy_program = drop_native;
 * ccache *c;
 * if (ccache_open(&cfg, &c) != CCACHE_OK) return;
 *
 * // By hand: intern the program, put a closure running it.
 * ccache_program *p;
 * if (ccache_program_intern(c, pkey, native, native_bytes, &p) == CCACHE_OK) {
 *   ccache_put(c, site, closure, p);        // the entry takes its own ref
 *   ccache_program_release(c, p);           // so give this handle back
 * }
 * // Every call: a hit is a lease, which pins the closure and its program.
 * ccache_lease lease;
 * if (ccache_fetch(c, site, &lease) == CCACHE_OK) {
 *   my_run(lease.closure, lease.native, args);
 *   ccache_lease_release(c, &lease);
 * }
 *
 * // Or both steps in one call: a miss compiles once, however many threads
 * // miss.  site2 is another call site of the same program: compile_site runs
 * // once, finds pkey's program and makes only the closure.
 * if (ccache_get_or_compile(c, site2, compile_site, &my_site2_info, &lease) ==
 *     CCACHE_OK) {
 *   my_run(lease.closure, lease.native, args);
 *   ccache_lease_release(c, &lease);
 * }
 *
 * ccache_close(c);                          // EBUSY while a lease/handle is out
 * @endcode
 *
 * What each can return (EBUSY from an adding call only ever comes from inside
 * a destroy callback that ccache_close() runs; EFORKED only in a fork child):
 *  - ccache_open(): OK, EINVAL (config not from ccache_config_init(), a bound
 *    of 0, ...), ENOMEM, ETHREAD.
 *  - ccache_program_intern(): OK, EINVAL, ENOMEM, EBUSY, EFORKED; given a
 *    cache, it owns @c native even on error.
 *  - ccache_put(): OK, EINVAL, ENOMEM, EBUSY, EFORKED; given a cache, it
 *    owns @c closure even on error.
 *  - ccache_fetch(): OK, MISS, EINVAL, EBUSY, EFORKED.
 *  - ccache_get_or_compile() and ccache_program_get_or_compile(): OK, EINVAL,
 *    ECOMPILE (the callback returned non-zero), ENOMEM, EDEADLK (a compile
 *    asked for its own key), EBUSY, EFORKED.
 *  - ccache_close(): OK, EBUSY, EINVAL (the default instance), EFORKED.
 *  - ccache_lease_release() and ccache_program_release() return nothing.
 *
 * The sections that follow, in order: Status codes; Checked build; Keys and
 * handles; Configuration (bounds, callbacks, the sweeper); Program table;
 * Closure table; Single-flight get-or-compile; Persistent tiers; Statistics
 * (and what happens past 2^64); Default instance; Structural fingerprints.
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
 * any thread.  A lease may be released on a thread other than the one that
 * took it (that costs one shared write, see ccache_fetch()).  The destroy
 * callbacks run once, on whichever thread lets go of the last reference (a
 * lease release, an eviction, a remove, close, or the sweeper thread), never
 * while a lease is out.  The cache never serialises execution: nothing it
 * does makes running a program safe.
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
 * directory, a bad server list, a refused environment variable) record a
 * line of text in thread-local storage before returning their status:
 * ccache_tier_disk() (for CCACHE_EPERM, CCACHE_EIO and CCACHE_ENOTSUP, not
 * for CCACHE_EINVAL or CCACHE_ENOMEM), ccache_tier_redis() (for a refused
 * option or server list, and for CCACHE_ENOTSUP) and ccache_default() (for
 * a refused CLOSURE_CACHE_* variable, naming it and its value) do.  The
 * library never prints it.  Calls that record nothing leave it unchanged,
 * and a later success does not clear it; compare with the status you got.
 * @return a NUL-terminated string owned by the library ("" if nothing was
 *         recorded on this thread; at most 511 bytes); never NULL.  Valid
 *         until the next ccache call on this thread; never free it.
 *         Thread-safe: each thread has its own.
 */
CCACHE_API const char *ccache_error_detail(void);
/** @} */

/* ------------------------------------------------------------------------ */
/** @name Checked build
 * Caller errors that are cheap to catch are refused in every build: NULL
 * arguments (CCACHE_EINVAL), a ccache_config that never went through
 * ccache_config_init() (its size and magic; CCACHE_EINVAL), a ccache_stats
 * whose size is above CCACHE_STRUCT_SIZE_MAX (nothing written).  The others
 * below cost nothing in the default build, where they are undefined
 * behaviour (a wrong count, a double destroy, a use after free):
 *  - a lease released twice (e.g. a copy released after the original),
 *    never taken (uninitialised), or released with another cache than the
 *    one it came from;
 *  - a cache used after ccache_close(), or a pointer that was never a cache
 *    (by any call that takes a `ccache *`; NULL gets its status);
 *  - one closure pointer put under two keys (of this cache or another), or
 *    put again after its entry left the table while a lease still holds it;
 *  - one native program pointer interned under two program keys.
 *
 * The checked build, `cmake -DCCACHE_CHECKED=ON` (or the `checked` preset),
 * builds libccache with registries of the open caches, of the leases out
 * (each lease gets a token in its internal_ words) and of the closures and
 * natives each cache owns.  Each error above then aborts the process after
 * exactly one line on stderr, `ccache: <misuse> (<function>)`, e.g.
 * `ccache: lease released twice (ccache_lease_release)`.  NULL closures and
 * natives are exempt (any number of them may be given); a pointer is
 * forgotten once the cache has destroyed it (run its destroy callback, or
 * would have with none set), so an address the allocator reuses is new.
 * The registries sit behind one process-wide mutex, and ccache_fetch() and
 * ccache_lease_release() always take their general (slower) paths: a build
 * for tests and debugging.  Program handles are not tracked: releasing one
 * twice is undefined behaviour in both builds.  Nothing of it is compiled
 * into the default build.
 *
 * The header, the ABI, the target and file names (ccache::ccache,
 * libccache.a, libccache.so) are the same in both builds: an application
 * links against the checked build by building the library with the option
 * and linking it as usual; it needs no macro of its own.
 * @{ */
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
 * reference, to be given back once with ccache_program_release() on the
 * cache it came from (or handed to the cache by a compile callback, see
 * ccache_compile_fn).  While it is held the program stays interned and its
 * native program alive, and ccache_close() returns CCACHE_EBUSY.  A handle
 * may be used and released on any thread.
 */
typedef struct ccache_program ccache_program;

/**
 * What a hit returns: the closure and its native program, both valid until
 * the lease is released with ccache_lease_release(), even if the entry is
 * evicted, replaced, removed or expires meanwhile.  A lease pins its closure
 * entry, which pins its program; while any lease is out, ccache_close()
 * returns CCACHE_EBUSY.  The lease struct is the caller's (stack is fine);
 * the cache keeps no pointer to it.  Taking a lease allocates nothing (a
 * thread's first ccache_fetch(), ccache_get_or_compile() or
 * ccache_lease_release() on a cache allocates that thread's reader, see
 * ccache_fetch(); the checked build allocates a token per lease).  A lease
 * may be released on any thread.
 *
 * A zero-initialised lease (`ccache_lease l = {0};`) is "no lease": releasing
 * it is a no-op.  ccache_lease_release() zeroes the lease, and so does every
 * call that fills one when it returns anything but CCACHE_OK.  Do not copy a
 * lease and release both copies, and do not release a lease that no call
 * filled (uninitialised memory): in the default build either is undefined
 * behaviour (a wrong lease count, then a use after free); the checked build
 * aborts (see "Checked build").
 */
typedef struct ccache_lease {
  void *closure;      /**< the runtime's closure, as given to ccache_put() or
                           returned by a compile callback */
  void *native;       /**< the native program pointer the closure runs (what
                      ccache_program_native() returns for its program;
                      named `program` before 0.2) */
  void *internal_[2]; /**< private; do not touch: the entry, and where the
                           lease is counted (a slot of the taking thread's
                           reader, or the entry's shared count; a token in
                           the checked build) */
} ccache_lease;

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Configuration
 * @{ */

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
   *
   *  Non-zero (default 1): the thread starts the first time ttl_ms is
   *  finite (at ccache_open(), or later at ccache_set_limits()) and runs
   *  until ccache_close().  Its wake-up rule: insert times never decrease
   *  along the FIFO, so the oldest entry always expires first, and the
   *  thread sleeps until that entry's deadline, its insert time + ttl_ms on
   *  the configured clock (saturated at UINT64_MAX, which means no
   *  deadline; a single wait lasts at most a day, then it looks again).  It
   *  then removes the expired prefix in one writer section (cause ttl; the
   *  destroys run on the sweeper thread, outside every lock) and sleeps
   *  until the new oldest entry's deadline.  With no entry, or an unbounded
   *  ttl_ms, it sleeps with no deadline until an insert into an empty table
   *  or a ccache_set_limits() call wakes it; each wake-up sweeps and
   *  computes the deadline again.  ccache_stats::sweeper_wakeups counts the
   *  waits that ended at their deadline.
   *
   *  0: no thread is ever started.  Expired entries then leave when
   *  ccache_sweep() runs or when a lookup finds them; a lookup never returns
   *  an expired entry either way. */
  int sweeper_thread;
  /** Most closure entries kept, in items: CCACHE_UNBOUNDED (default) or
   *  >= 1.  Past it the oldest inserts leave first (FIFO in insertion order;
   *  a hit does not refresh an entry), as EMLX's CompileCache (PR #140).
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
  /** Monotonic milliseconds; NULL (default) means CLOCK_MONOTONIC.  Tests
   *  inject a fake clock here.  The sweeper thread still *waits* on real
   *  CLOCK_MONOTONIC time (for the time left until its deadline, as read on
   *  this clock) but judges expiry with this clock. */
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
   *  ccache_open()); NULL (default): the tiers are never used (they are
   *  still owned and closed by the cache). */
  const ccache_codec *codec;
  /** The runtime's identity (its version, target, compile flags): entries
   *  made under another tag are never loaded.  Read (hashed) at open, not
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
 * @param cfg options, copied (see ccache_config for the pointers it keeps);
 *            must come from ccache_config_init().
 * @param out receives the new cache, owned by the caller until
 *            ccache_close() returns CCACHE_OK.  Untouched on error.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL cfg or out; cfg->size below the
 *         struct up to alloc_ctx (the fields before the tiers, which then
 *         take their defaults) or above CCACHE_STRUCT_SIZE_MAX, or cfg->magic
 *         not CCACHE_CONFIG_MAGIC: a config that never went through
 *         ccache_config_init() is refused before any of its other fields is
 *         used; a bound of 0; alloc without free or free without alloc;
 *         n_tiers over CCACHE_MAX_TIERS, NULL tiers with n_tiers > 0, a NULL
 *         tier, a tier listed twice or already owned by another cache, a
 *         codec with a NULL callback); CCACHE_ENOMEM; CCACHE_ETHREAD (the
 *         sweeper thread, or a lock, could not be created; pthread's ENOMEM
 *         there is CCACHE_ENOMEM).  On every error the caller keeps its
 *         tiers and nothing is left running.
 * Thread-safe.  If ttl_ms is finite and sweeper_thread is non-zero, the
 * sweeper thread starts here.  With a codec, each tier's attach op runs here
 * (its failure disables that tier for this cache and counts in tier_errors;
 * it is not an error of the open).
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

/**
 * @brief Change the bounds at runtime.
 *
 * All three are validated first: any value of 0 returns CCACHE_EINVAL with
 * nothing changed.  If ttl_ms is finite and the config allowed a sweeper
 * thread, the thread is started now if it was not yet running.  Then, in one
 * writer section: the new ttl_ms applies at once to entries already present
 * (counted from their insert times: fetch never returns one expired under
 * it); shrinking max_items evicts the oldest entries (FIFO, cause capacity);
 * if the charged cost exceeds max_cost_bytes the oldest entries leave (cause
 * cost).  Destroys caused by these evictions run on this thread before it
 * returns.  Then the sweeper is woken: it removes the entries already
 * expired under the new ttl_ms and sleeps until the new oldest deadline, or
 * with no deadline if ttl_ms is unbounded (see
 * ccache_config::sweeper_thread).  Without a sweeper thread, entries expired
 * under the new ttl_ms stay until ccache_sweep() or a lookup finds them.
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
 * op, shapes, dtypes, attributes, target; never a call site), as EMLX's
 * native dispatch cache, so many closure entries share one program.
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
 *        it twice, is a caller error (undefined behaviour in every build:
 *        handles are not tracked by the checked build).
 * In a fork child this does nothing.  Thread-safe (takes the program table's
 * lock).  Checked build: aborts on a closed cache.
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
 * The entry gets the next 64-bit insert index (it wraps past 2^64 - 1 with
 * no effect: the FIFO is the insertion order) and the insert time
 * max(clock now, previous insert time).  If @p key is present the entry is
 * replaced (the later insert wins; counts as an insert and as `replaced`; no
 * capacity eviction; leases on the old entry stay valid).  Putting the very
 * closure pointer the entry already holds does not destroy it.  Then, while
 * items > max_items the oldest entry leaves (cause capacity), and while the
 * charged cost > max_cost_bytes the oldest entries leave (cause cost), never
 * the entry just inserted (so when this entry's program alone costs more
 * than the cap, every other entry leaves).  An insert into an empty table
 * wakes the sweeper.  Destroys caused by this call run on this thread before
 * it returns.
 *
 * Ownership of @p closure passes to the cache in every case where @p c is not
 * NULL: on error it is destroyed once with destroy_closure.  The one pointer
 * the cache already owns that may be put again is the closure of the entry
 * now in the table under @p key.  Putting any other pointer the cache still
 * owns (one stored under another key, or one whose entry has left the table
 * but is still held by a lease, e.g. taken from a lease) is a caller error:
 * it would be destroyed twice (undefined behaviour in the default build; the
 * checked build aborts, see "Checked build").  The same holds for what a
 * compile returns.
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
 * Thread-safe, and hits scale with threads: each thread has one reader per
 * cache it uses, made on the thread's first ccache_fetch(),
 * ccache_get_or_compile() or ccache_lease_release() on that cache (about 512
 * bytes from the allocator hook, plus room in the cache's array of readers;
 * if that fails, the thread's calls take a locked path instead, still
 * correct) and freed when the thread exits or the cache closes.  A hit writes
 * only memory its own thread owns: its reader's flag, a lease slot, its hit
 * count.  It takes no lock and does no atomic read-modify-write on shared
 * memory, so hits from any number of threads, on the same key or different
 * keys, share no written cache line.  A lease counts on the entry's shared
 * reference count instead (still correct, just one shared write) when it is
 * taken while the thread already holds 32 leases in its reader's slots on
 * this cache, when it is released on another thread than the one that took it
 * or after its entry left the table, and when ccache_get_or_compile() hands
 * it out after a miss (to the compiling caller and to each single-flight
 * waiter).  A hit that meets a writer changing the table (an insert, a
 * removal, an eviction, a sweep) waits for it on the writer lock.  Checked
 * build: aborts on a closed cache, and always takes the general (slower)
 * path.
 */
CCACHE_API int ccache_fetch(ccache *c, ccache_key key, ccache_lease *out);

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
 *         (releases the handle, frees the closure).
 */
typedef int (*ccache_compile_fn)(void *ud, ccache *c, ccache_key key, void **closure_out,
                                 ccache_program **program_out);

/**
 * @brief Fetch @p key, or compile it once whatever the number of concurrent
 * callers.
 *
 * Hit (a live entry, as ccache_fetch() would return): a lease, no callback;
 * counts a hit.  Miss: an expired entry found is removed (cause ttl), and
 * exactly one caller runs @p compile on its own thread with no lock held;
 * the entry is inserted like ccache_put() (later inserts win; a remove or
 * clear during the compile does not cancel it; then items over max_items
 * and cost over max_cost_bytes evict the oldest entries, never this one)
 * and the caller and every waiter get a lease on that entry, even if it is
 * evicted or expires before they wake.  Counts: the compiling caller one
 * miss and one `compiles`; each waiter one `waits` and a hit (lease) or a
 * miss (error); `compile_ns` adds the time spent in @p compile.
 *
 * On success the closure and the program handle the compile returned belong
 * to the cache: the entry takes its own program reference and the cache
 * drops the compile's handle.  What a compile returns follows ccache_put()'s
 * rule: a closure the cache already owns (under another key, or one whose
 * entry left the table while a lease holds it) is a caller error
 * (undefined behaviour in the default build; the checked build aborts, see
 * "Checked build").
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
 *         CCACHE_ECOMPILE (the compile returned non-zero: to the caller and
 *         every waiter; nothing cached; `compile_failures` +1);
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
 * Hit (@p pkey is interned): a handle, no callback, no tier asked; counts
 * program_hits +1.  Miss: counts program_misses +1, and exactly one caller
 * owns it (the single-flight owner); every other caller for @p pkey waits
 * (counts `waits` +1) and then gets the owner's result: a handle (counted
 * program_hits +1) or the owner's error (counted program_misses +1).  The
 * owner, with no cache lock held:
 *  - with usable tiers and a codec (see "Persistent tiers"), first asks them
 *    (taking their compile locks in turn); a tier hit decodes the program
 *    (counts tier_hits +1, never program_compiles) and @p compile is not
 *    called;
 *  - otherwise runs @p compile on its own thread (program_compiles +1
 *    whether it succeeds or not; `compile_ns` adds its time; with tiers, a
 *    successful result is written to them when the compile took at least
 *    tier_min_compile_us);
 *  - then interns the native program under @p pkey with the cost from
 *    `cost_out` (or the codec's decode), as ccache_program_intern() does
 *    without counting a lookup: the native it got always belongs to the
 *    cache; if @p pkey was interned meanwhile (by another call, or by the
 *    compile itself), the existing program is returned and the new native
 *    is destroyed unless it is that very pointer.
 *
 * Unlike ccache_get_or_compile() this makes no closure entry, so nothing is
 * charged against max_cost_bytes until a closure entry refers to the
 * program, and no lease is involved: the handle pins the program until
 * ccache_program_release().  Tier failures never change the status returned
 * here (they count in tier_errors and the program is compiled).
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
 *         CCACHE_ECOMPILE (the compile returned non-zero: to the owner and
 *         every waiter; nothing interned; `compile_failures` +1);
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
   *        given back once through free_bytes after they are framed).
   * @param len set to their length in bytes, at most 2^40 (a longer one, or
   *        NULL bytes with a non-zero length, is not stored: tier_errors
   *        +1).
   * @return 0 with *bytes and *len set; CCACHE_CODEC_SKIP (this program is
   *         never stored; *bytes is not read); anything else is a failure
   *         (tier_errors +1, nothing stored, the fetch still succeeds).
   */
  int (*encode)(void *ctx, ccache_key pkey, void *native, void **bytes, size_t *len);
  /**
   * Give back what encode() returned in *bytes: once per encode() that
   * returned 0 (never after CCACHE_CODEC_SKIP or a failure, so encode()
   * keeps nothing allocated then).
   * @param ctx ccache_codec::ctx.
   * @param bytes *bytes as encode() set it.
   * @param len *len as encode() set it, in bytes.
   */
  void (*free_bytes)(void *ctx, void *bytes, size_t len);
  /**
   * Build a native program from verified bytes (an entry whose checksum,
   * key, length and runtime tag all matched).
   * @param ctx ccache_codec::ctx.
   * @param pkey the program key.
   * @param bytes @p len bytes, owned by the library, valid only during the
   *        call (copy what you keep).
   * @param len their length in bytes (what encode() produced).
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
   * <prefix>:v1:<hash>:.
   * May be NULL.
   * @param state the backend's state.
   * @param ns the namespace, NUL-terminated; valid only during the call.
   * @return CCACHE_OK (or any non-negative value); a negative status
   *         disables the tier for this cache (tier_errors +1).
   */
  int (*attach)(void *state, const char *ns);
  /**
   * Look up the entry for @p pkey.
   * @param state the backend's state.
   * @param pkey the program key.
   * @param blob set on CCACHE_OK to the entry's bytes, an allocation of
   *        yours, given back once through free_blob.
   * @param len set on CCACHE_OK to the entry's length in bytes.
   * @return CCACHE_OK with *blob and *len set; CCACHE_MISS; anything else
   *         is a failure (tier_errors +1, treated as a miss; *blob is not
   *         read).
   */
  int (*get)(void *state, ccache_key pkey, void **blob, size_t *len);
  /**
   * Give back a blob returned by get(): once per get() that returned
   * CCACHE_OK, whatever the entry turned out to be.
   * @param state the backend's state.
   * @param blob *blob as get() set it.
   * @param len *len as get() set it, in bytes.
   */
  void (*free_blob)(void *state, void *blob, size_t len);
  /**
   * Store (or replace) the entry for @p pkey.  Should be atomic: a
   * concurrent get() sees the old entry, the new one or none, never a mix (a
   * torn entry is caught by the checksum, but costs a compile).
   * @param state the backend's state.
   * @param pkey the program key.
   * @param blob the framed entry, owned by the library, valid only during
   *        the call (copy what you keep).
   * @param len its length in bytes.
   * @return CCACHE_OK or a negative status (tier_errors +1).
   */
  int (*put)(void *state, ccache_key pkey, const void *blob, size_t len);
  /**
   * Remove the entry for @p pkey (it failed verification).  May be NULL.
   * @param state the backend's state.
   * @param pkey the program key.
   * @return CCACHE_OK, CCACHE_MISS or a negative status (tier_errors +1).
   */
  int (*remove)(void *state, ccache_key pkey);
  /**
   * Try once, without blocking, to take the compile lock for @p pkey.
   * NULL: this tier has no locks (then unlock and renew are unused).
   * @param state the backend's state.
   * @param pkey the program key.
   * @param lock set on CCACHE_OK to a handle of yours, passed to renew()
   *        and unlock().
   * @return CCACHE_OK; CCACHE_EBUSY (another holder has it: the core waits
   *         and retries); anything else (tier_errors +1: the core proceeds
   *         without this tier's lock).
   */
  int (*lock)(void *state, ccache_key pkey, void **lock);
  /**
   * Extend a leased lock; called every lease_ms/3 from the renewal thread
   * while the compile runs.  Never called concurrently with unlock() on the
   * same handle.
   * Required when lease_ms > 0; unused (may be NULL) when lease_ms is 0
   * (locks that never expire, e.g. ones the kernel drops when their holder
   * dies).
   * @param state the backend's state.
   * @param lock the handle lock() set.
   * @return CCACHE_OK, or anything else (the lease is lost: tier_errors +1,
   *         no more renewals for it; the compile goes on).
   */
  int (*renew)(void *state, void *lock);
  /**
   * Release a lock taken by lock(), once, on the thread that took it.
   * Required when lock is set.
   * @param state the backend's state.
   * @param lock the handle lock() set; yours to free.
   */
  void (*unlock)(void *state, void *lock);
  /**
   * Free the backend and @c state: once, from ccache_close() or
   * ccache_tier_free().  May be NULL.
   * @param state the backend's state.
   */
  void (*close)(void *state);
  uint64_t lease_ms;    /**< lock lease, ms: 0 (locks do not expire) or >= 3 */
  uint64_t poll_ms;     /**< first wait between lock attempts while EBUSY, ms, >= 1 */
  uint64_t poll_max_ms; /**< backoff cap, ms, >= poll_ms */
  uint64_t wait_ms;     /**< total wait for a busy lock before compiling without
                             it, ms (0: never wait) */
} ccache_tier_ops;

/**
 * @brief Make a tier from your own backend.
 * @param ops copied (need not outlive the call; @c name must be a static
 *        string).  Required: get, free_blob, put; unlock whenever lock is
 *        set; renew whenever lock is set and lease_ms > 0.  When lock is set:
 *        1 <= poll_ms <= poll_max_ms, lease_ms 0 or >= 3.  Without lock,
 *        lease_ms is taken as 0.
 * @param state passed to every op; freed by ops->close when the tier is
 *        freed (not on error: on error it stays yours).
 * @param out receives the tier, owned by the caller until a successful
 *        ccache_open() or ccache_default_init() takes it (free an unused one
 *        with ccache_tier_free()).  Untouched on error.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL ops or out, ops->size below
 *         sizeof(ccache_tier_ops), a required op missing, lease_ms 1 or 2,
 *         bad poll bounds); CCACHE_ENOMEM (malloc, not the allocator hook).
 *         Thread-safe.
 */
CCACHE_API int ccache_tier_custom(const ccache_tier_ops *ops, void *state, ccache_tier **out);

/**
 * @brief Free a tier that no cache owns (ops->close runs, on this thread).
 * @param t a tier from ccache_tier_custom(), ccache_tier_disk() or
 *        ccache_tier_redis() that was never handed to a successful
 *        ccache_open() or ccache_default_init() (those free their own
 *        tiers); NULL is a no-op.  Invalid afterwards.
 * Freeing a tier a cache (or the default instance's configuration) owns, or
 * freeing one twice, is a caller error.  Not to be called concurrently with
 * any other use of @p t.
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
 * rename(); a stale temporary file (its writer dead and the file over 60 s
 * old, or any file over an hour old) is removed by the next writer in that
 * directory or by the cleaner.
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
 * @brief Fill @p o with the defaults listed with each field (size = sizeof
 * *o; dir NULL: set it).
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
 * @param o options (copied, dir included: none of it need outlive the call).
 * @param out receives the tier, owned by the caller until a successful
 *        ccache_open() or ccache_default_init() takes it (free an unused one
 *        with ccache_tier_free()).  Untouched on error.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL o or out, o->size below
 *         sizeof(ccache_disk_options), NULL or empty dir, max_bytes 0,
 *         lock_poll_ms 0 or lock_poll_max_ms below it; no detail);
 *         CCACHE_EPERM (owned by another user, or writable by group or
 *         others: the detail names the path); CCACHE_EIO (cannot create it or
 *         open it as a directory: the detail names the path and the reason);
 *         CCACHE_ENOTSUP (no open-file-description locks on this system: the
 *         detail says so); CCACHE_ENOMEM (no detail).  The detail is
 *         ccache_error_detail().  Thread-safe.
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
 * @param out receives the tier, owned by the caller until a successful
 *        ccache_open() or ccache_default_init() takes it (free an unused one
 *        with ccache_tier_free()).  Untouched on error.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL o or out (no detail), o->size too
 *         small, a bad server list, an empty or over-long prefix, a user
 *         without a password, a timeout or reconnect bound of 0, entry_ttl_ms
 *         0, lease_ms outside 3..2^50, bad poll or reconnect bounds: the
 *         detail, ccache_error_detail(), says which); CCACHE_ENOTSUP (built
 *         without hiredis, whatever the options past size: install
 *         libhiredis-dev and rebuild; the detail says so); CCACHE_ENOMEM.
 *         Thread-safe.
 */
CCACHE_API int ccache_tier_redis(const ccache_redis_options *o, ccache_tier **out);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Statistics
 *
 * **Past 2^64.**  Every counter and bound is 64 bits wide; what happens at
 * the edge:
 *  - the monotonic counters of ccache_stats (hits, inserts, compile_ns, the
 *    tier counters, ...) wrap modulo 2^64;
 *  - the charged cost is a 128-bit sum inside, so no sum of program costs
 *    ever wraps and a CCACHE_UNBOUNDED max_cost_bytes never evicts for cost;
 *    the `cost_bytes` gauge reports it saturated at UINT64_MAX;
 *  - the 64-bit insert index of closure entries wraps with no effect: the
 *    FIFO order is the table's insertion order, never an index comparison;
 *  - a TTL deadline (insert time + ttl_ms) saturates at UINT64_MAX, which
 *    means no deadline, and expiry is tested without computing the sum;
 *  - the `leases_out` gauge never wraps: in the default build, a count that
 *    a caller error drove below zero (a lease released twice) reads 0; the
 *    checked build aborts at the second release instead.
 * @{ */

/**
 * Counters (monotonic since open, wrapping modulo 2^64) and gauges (current
 * values).  All uint64_t.  Fields past the caller's `size` are not written.
 */
typedef struct ccache_stats {
  uint32_t size;               /**< set to sizeof(ccache_stats) by the caller;
                                    ccache_stats_get() leaves it as set */
  uint64_t hits;               /**< closure lookups that returned a lease */
  uint64_t misses;             /**< closure lookups that did not (expired included; the
                                    owner of a get-or-compile miss counts one, a waiter
                                    one if it gets an error) */
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
  uint64_t program_hits;       /**< program lookups that found the program */
  uint64_t program_misses;     /**< program lookups that did not (the owner of a
                                    get-or-compile miss counts one even if it then makes
                                    the program; a waiter, one if it gets an error) */
  uint64_t compiles;           /**< closure compile callbacks that ran (failed ones included) */
  uint64_t program_compiles;   /**< program compile callbacks that ran (failed ones included;
                                    a tier hit is not one) */
  uint64_t compile_failures;   /**< compile callbacks (both levels) that failed */
  uint64_t waits;              /**< single-flight joins (both levels) */
  uint64_t compile_ns;         /**< nanoseconds spent in compile callbacks (both levels; a
                                  program compile nested in a closure compile counts in both) */
  uint64_t sweeper_wakeups;    /**< waits of the sweeper thread that ended at their deadline
                                  (the oldest entry's insert time + ttl_ms, or a day when that
                                  is further; see ccache_config::sweeper_thread); a wake-up by
                                  an insert into an empty table or by ccache_set_limits() is
                                  not counted.  Since 0.2. */
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
 * @param c the cache; NULL (or a cache created before fork(), in the child)
 *        zeroes the fields.
 * @param out caller-owned; set out->size = sizeof *out first: only the first
 *        out->size bytes are written (a later, larger library never writes
 *        past an older caller's struct; out->size itself is kept), and
 *        nothing at all if out->size is above CCACHE_STRUCT_SIZE_MAX (taken
 *        for a struct that was never set up).  NULL is a no-op.
 * Thread-safe (takes the writer lock, then the program table's lock); each
 * field is exact, the set is a near-simultaneous snapshot (the closure and
 * program counters under those locks, the destroy counts, sweeper_wakeups
 * and the tier counters just after).  Checked build: aborts on a closed
 * cache.
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
 * @return CCACHE_OK; CCACHE_EINVAL (nothing kept: NULL cfg; cfg->size below
 *         the struct up to alloc_ctx or above CCACHE_STRUCT_SIZE_MAX, or
 *         cfg->magic not CCACHE_CONFIG_MAGIC, i.e. a config that never went
 *         through ccache_config_init(), refused before any other field is
 *         used; a bound of 0; alloc without free or free without alloc;
 *         n_tiers over CCACHE_MAX_TIERS, NULL tiers with n_tiers > 0, a NULL
 *         tier, a tier listed twice or already owned by a cache, a codec
 *         with a NULL callback); CCACHE_ENOMEM (copying the runtime tag;
 *         nothing kept); CCACHE_EBUSY (the default instance already exists;
 *         nothing kept).  Unlike ccache_open() it starts nothing: the
 *         sweeper thread and the tiers' attach ops wait for the instance.
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
 * "unbounded" / "infinity".  Anything else (an empty value included) makes
 * this call return CCACHE_EINVAL, with ccache_error_detail() naming the
 * variable and the value refused (the library prints nothing); the
 * variables are read again at each call until the instance exists, so a bad
 * value fails every call.  CLOSURE_CACHE_REDIS=host:port[,host:port...]
 * (or unix:/path; the server list of ccache_redis_options) adds a Redis tier
 * with the default options below the configured tiers, if
 * ccache_default_init() supplied a codec (without one, or when it is empty,
 * it is ignored); a bad list makes this call return CCACHE_EINVAL, a build
 * without hiredis CCACHE_ENOTSUP, each with ccache_error_detail() naming the
 * variable.  A server that is down is not an error here (see
 * ccache_tier_redis()).  The instance lives until the process exits;
 * ccache_close() on it returns CCACHE_EINVAL.  In a child process after
 * fork(), the parent's instance refuses every call (CCACHE_EFORKED) and the
 * child's first ccache_default() creates the child's own instance.
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
 *  @param fp caller-owned builder; NULL is a no-op.
 *  Allocates nothing; not to be called concurrently with another call on
 *  the same builder. */
CCACHE_API void ccache_fp_init(ccache_fp *fp);
/** @brief Append an unsigned 64-bit integer (tag + 8 bytes LE).
 *  @param fp an initialised builder (caller-owned).
 *  @param v the value.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp;
 *          nothing appended).  One builder per thread. */
CCACHE_API int ccache_fp_u64(ccache_fp *fp, uint64_t v);
/** @brief Append a signed 64-bit integer (own tag + 8 bytes LE, two's complement).
 *  @param fp an initialised builder (caller-owned).
 *  @param v the value.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp;
 *          nothing appended).  One builder per thread. */
CCACHE_API int ccache_fp_i64(ccache_fp *fp, int64_t v);
/** @brief Append a double by its IEEE-754 bit pattern (so -0.0 != 0.0 and
 *  NaN payloads differ).
 *  @param fp an initialised builder (caller-owned).
 *  @param v the value.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp;
 *          nothing appended).  One builder per thread. */
CCACHE_API int ccache_fp_f64(ccache_fp *fp, double v);
/** @brief Append @p len bytes (tag + 64-bit length + bytes).  The contents are
 *  hashed, never the address.
 *  @param fp an initialised builder (caller-owned).
 *  @param data the bytes, read during the call only (not retained); may be
 *         NULL only when @p len is 0 (the same as any empty buffer).
 *  @param len their length in bytes.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp, or
 *          NULL data with len > 0: the builder is then poisoned and
 *          ccache_fp_final() returns EINVAL).  One builder per thread. */
CCACHE_API int ccache_fp_bytes(ccache_fp *fp, const void *data, size_t len);
/** @brief Append a string of @p len bytes.  It is encoded exactly as
 *  ccache_fp_bytes() encodes a buffer except for the tag (0x05 instead of
 *  0x04), so the string "ab" and the bytes "ab" give different keys.  No
 *  terminator is read or hashed: embedded NULs count as bytes.
 *  @param fp an initialised builder (caller-owned).
 *  @param s the characters, read during the call only (not retained); may be
 *         NULL only when @p len is 0.
 *  @param len the string's length in bytes.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp, or
 *          NULL s with len > 0: the builder is then poisoned and
 *          ccache_fp_final() returns EINVAL).  One builder per thread. */
CCACHE_API int ccache_fp_str(ccache_fp *fp, const char *s, size_t len);
/** @brief Append a tensor type: dtype, rank, then each dim (LE 64-bit).
 *  @param fp an initialised builder (caller-owned).
 *  @param dtype the runtime's dtype code (any int32).
 *  @param rank number of dims, 0..CCACHE_FP_MAX_RANK.
 *  @param dims @p rank dims (element counts; read during the call only);
 *         may be NULL only when rank is 0.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp:
 *          nothing appended; rank too large or NULL dims with rank > 0: the
 *          builder is poisoned).  One builder per thread. */
CCACHE_API int ccache_fp_shape(ccache_fp *fp, int32_t dtype, uint32_t rank, const int64_t *dims);
/** @brief Finish: the key of everything appended so far.  The builder is
 *  unchanged and may take more fields (appending after a final continues
 *  the same stream).
 *  @param fp the builder (read only).
 *  @param out receives the key; untouched on error.  Caller-owned.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL fp or out, an uninitialised
 *          builder, or an earlier append failed: no key).  Does not write
 *          the builder, so several threads may finish one builder at once
 *          while none appends to it. */
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
 * @param nodes @p n_nodes nodes (read only, not retained; NULL only when
 *        n_nodes is 0).
 * @param n_nodes number of nodes (items).
 * @param outputs @p n_outputs graph outputs in order (read only, not
 *        retained).
 * @param n_outputs number of outputs (items, >= 1).
 * @param device target/device string (NUL-terminated, read only; NULL is
 *        EINVAL).
 * @param scratch caller-provided workspace of @p n_nodes keys, never NULL
 *        (receives each node's digest; the call allocates nothing).
 * @param out receives the key.  Caller-owned.
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
