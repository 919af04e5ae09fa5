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
 *    one line in the checked build (see "Checked build", ccache/common.h).
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
 *   if (!*native_out)                       // the caller and every waiter
 *     return ccache_compile_fail(CCACHE_ECOMPILE, "%s", my_compiler_log(ud));
 *   return 0;                               // 0: *native_out is the cache's
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
 *   return 0;    // both are the cache's now: do not release it on success
 * }
 *
 * ccache_config cfg;
 * ccache_config_init(&cfg);                 // always first (size, magic)
 * // A closure key must include its program key (see ccache_key's key rule):
 * //   ccache_fp_init(&fp); ccache_fp_key(&fp, pkey); ccache_fp_i64(&fp, layer);
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
 *    ECOMPILE (the callback returned non-zero; ccache_error_detail() says
 *    why, on every waiting thread too), ENOMEM, EDEADLK (a compile asked for
 *    its own key), EBUSY, EFORKED.
 *  - ccache_close(): OK, EBUSY (ccache_error_detail() counts what is out),
 *    EINVAL (the default instance), EFORKED.
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
/**
 * @defgroup basic The basic calls
 * @brief The dozen calls a runtime needs first: a configuration, open and
 * close, get-or-compile (closure and program), fetch and release, put, a
 * fingerprint, the statistics, the status and error texts.
 */

/**
 * @defgroup advanced Advanced calls
 * @brief What only some runtimes need: the strong-key twins of the calls
 * (256-bit keys, ccache_config::key_mode), custom tier backends
 * (ccache_tier_custom() and ccache_tier_ops) and the trust object of signed
 * tier entries (ccache/trust.h).
 */

#ifndef CCACHE_H
#define CCACHE_H

#include "ccache/common.h"     /* export macro, versions, status codes, keys, handles */
#include "ccache/cache.h"      /* configuration, open and close, bounds, default instance */
#include "ccache/program.h"    /* the program table */
#include "ccache/closure.h"    /* the closure table */
#include "ccache/flight.h"     /* single-flight get-or-compile */
#include "ccache/stats.h"      /* statistics, events */
#include "ccache/tier.h"       /* persistent tiers: codec, health */
#include "ccache/tier_ops.h"   /* custom tier backends */
#include "ccache/tier_disk.h"  /* the directory tier */
#include "ccache/tier_redis.h" /* the Redis tier */
#include "ccache/fp.h"         /* structural fingerprints */
#include "ccache/trust.h"      /* signed tier entries: keys */

#endif /* CCACHE_H */
