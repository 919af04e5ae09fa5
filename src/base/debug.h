/*
 * debug.h - internal asserts at levels (as mimalloc's).
 *
 *   0  release builds (NDEBUG): no check at all, nothing costs anything.
 *   1  debug builds: cheap invariants, and every *_locked function asserts
 *      that its caller holds the lock it needs.
 *   2  the test library (CCACHE_TESTING): level 1, plus the full consistency
 *      checker (check.c) after writer sections, every k-th one as the test
 *      asks (ccache__debug_check_every; the stress test and the TSan run set
 *      it, the CLOSURE_CACHE_DEBUG_CHECK_EVERY environment variable too).
 *
 * Asserts are never used for a user's error: those return statuses (or, in
 * the opt-in checked build, abort with one line; see misuse.h).
 */
#ifndef CCACHE_DEBUG_H
#define CCACHE_DEBUG_H

#define CCACHE__LIKELY(x)   __builtin_expect(!!(x), 1)
#define CCACHE__UNLIKELY(x) __builtin_expect(!!(x), 0)

#ifndef CCACHE_DEBUG
#if defined(CCACHE_TESTING)
#define CCACHE_DEBUG 2
#elif !defined(NDEBUG)
#define CCACHE_DEBUG 1
#else
#define CCACHE_DEBUG 0
#endif
#endif

#if CCACHE_DEBUG >= 1
/* Independent of NDEBUG, so the test library (built RelWithDebInfo) checks
 * too.  Prints "ccache: assertion failed: <expr> (<function>, <file>:<line>)"
 * and aborts. */
_Noreturn void ccache__assert_fail(const char *expr, const char *func, const char *file, int line);
#define ccache__assert(x) \
  (CCACHE__LIKELY(x) ? (void)0 : ccache__assert_fail(#x, __func__, __FILE__, __LINE__))
#else
/* Compiled (so what it names counts as used, and a typo fails the build)
 * but not evaluated: sizeof costs nothing at run time. */
#define ccache__assert(x) ((void)sizeof(!(x)))
#endif

#endif
