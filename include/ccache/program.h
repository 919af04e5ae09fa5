/**
 * @file ccache/program.h
 * @brief The program table: interning, fetching and releasing programs.
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest,
 * as does ccache/cache.h; it may also be included alone.
 */
#ifndef CCACHE_CCACHE_PROGRAM_H
#define CCACHE_CCACHE_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_PROGRAM_H */
