/**
 * @file ccache/flight.h
 * @brief Single-flight get-or-compile, of closures and of programs.
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest,
 * as does ccache/cache.h; it may also be included alone.
 */
#ifndef CCACHE_CCACHE_FLIGHT_H
#define CCACHE_CCACHE_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_FLIGHT_H */
