/**
 * @file ccache/closure.h
 * @brief The closure table: put, fetch and leases, remove, clear, sweep.
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest,
 * as does ccache/cache.h; it may also be included alone.
 */
#ifndef CCACHE_CCACHE_CLOSURE_H
#define CCACHE_CCACHE_CLOSURE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_CLOSURE_H */
