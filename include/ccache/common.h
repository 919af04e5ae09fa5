/**
 * @file ccache/common.h
 * @brief What every part of the API shares: the export macro, versions, status
 * codes, error detail, the checked build, keys and handles.
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest;
 * it may also be included alone.
 *
 * **Conventions.**  What holds for every call of every header unless its
 * comment says otherwise; each comment states only what is particular to it.
 *  - CCACHE_EINVAL, nothing changed: a NULL required pointer, a struct whose
 *    size or magic never went through its init call, a value outside its
 *    stated range.  NULL is a no-op for void calls and inits.
 *  - CCACHE_ENOMEM: an allocation failed; the cache is unchanged.
 *  - CCACHE_EFORKED: a cache made before fork(), used in the child (a void
 *    call does nothing there).
 *  - CCACHE_EBUSY: a call that adds to a cache (fetch, put, program intern
 *    and fetch, get-or-compile, set_limits) made from a destroy callback that
 *    ccache_close() runs.  There is no "closed" status: a cache used after
 *    ccache_close() is a caller error (see "Checked build").
 *  - Thread-safe: any thread, concurrently with any call on the same cache.
 *  - Pointer arguments are read during the call only, never retained;
 *    out-parameters are caller-owned; strings are NUL-terminated.
 *  - Units: sizes and costs in bytes, times in milliseconds (`_ms`), `_us`
 *    microseconds, `_ns` nanoseconds; counts in items.
 *  - "with a detail": the failure records a line for ccache_error_detail().
 *  - A `*_strong` call is its fast call keyed by all 256 bits of a
 *    ccache_strong_key (read during the call only; the callbacks and tiers
 *    get its first half, key->key); CCACHE_EINVAL also for a NULL key or a
 *    fast cache (and the fast call on a strong cache).
 *  - "Since 0.2" marks what 0.1 lacked; "Changed in 0.2" a changed meaning.
 * What a comment leaves out for callers is in the pages of this reference
 * (@ref contract_errors, @ref contract_keys, @ref contract_cache,
 * @ref contract_tiers); the mechanism behind it is in docs/design.md and,
 * for the tiers, docs/tiers.md (the section is named).
 */
#ifndef CCACHE_CCACHE_COMMON_H
#define CCACHE_CCACHE_COMMON_H

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
/** Major version: changes that break the API or ABI (none promised in 0.x). */
#define CCACHE_VERSION_MAJOR 0
/** Minor version: additions (in 0.x, also API/ABI changes, in CHANGELOG.md). */
#define CCACHE_VERSION_MINOR 2
/** Patch version: fixes only. */
#define CCACHE_VERSION_PATCH 0
/** The version as one number, MAJOR*10000 + MINOR*100 + PATCH (ccache_version()). */
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
/** The status codes, one X(name, value, text) per code: CCACHE_<name> is
 *  `value` and ccache_strerror() returns `text`. */
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
 * @brief One line of detail about this thread's most recent failed call that
 * records one (which do: @ref error_detail).  Read it only after
 * a failure: a success neither sets nor clears it.  Never printed.
 * @return the line ("" if none; at most 511 bytes), owned by the library,
 *         valid until this thread's next ccache call; never NULL.  Each
 *         thread has its own.
 */
CCACHE_API const char *ccache_error_detail(void);

/**
 * @brief Record why a compile failed, for its caller and every waiter of its
 * key; return it from the compile callback:
 * `return ccache_compile_fail(CCACHE_ECOMPILE, "cc: %s", line);`.
 * A negative ccache status is kept; 0, positive or unknown becomes
 * CCACHE_ECOMPILE.  Outside a compile it only records this thread's detail
 * (docs/design.md, "Errors that travel").
 * @param status the status to report.
 * @param fmt printf format of the one-line message (truncated at 511 bytes),
 *        or NULL for the status's text.
 * @return the status the compile's callers get (never 0).
 */
CCACHE_API int ccache_compile_fail(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/** @} */

/* ------------------------------------------------------------------------ */
/** @name Checked build
 * Cheap caller errors get a status in every build (NULL arguments, an
 * uninitialised config or stats struct).  These are undefined behaviour in
 * the default build and abort, after one line `ccache: <misuse>
 * (<function>)` on stderr, in the checked build (`-DCCACHE_CHECKED=ON`):
 * a lease released twice, never taken or with another cache; a program
 * handle released twice or after a compile handed it to the cache; a cache
 * used after ccache_close() or never opened; one closure put under two keys
 * (or again after its entry left while a lease holds it); one native
 * interned under two keys.  Same header, ABI and names; slower, for tests.
 * What it prints and checks: docs/design.md, "Asserts and errors" and
 * "Checked build, in full".
 * @{ */
/** @} */

/* ------------------------------------------------------------------------ */
/** @name Keys and handles
 * @{ */

/**
 * A 128-bit fingerprint; equal keys are the same entry.  **Key rule**: a
 * closure key must determine its program (build it from the program key plus
 * the call site, ccache_fp_key()), else two programs meet under one key and
 * one is served for the other, silently (@ref keys).
 */
typedef struct ccache_key {
  uint64_t lo; /**< low 64 bits */
  uint64_t hi; /**< high 64 bits */
} ccache_key;

/** Bytes ccache_key_hex() writes: 32 hex digits and a NUL. */
#define CCACHE_KEY_HEX_LEN 33

/**
 * @brief Whether two keys are equal (both halves).
 * @param a a key (by value).
 * @param b another key (by value).
 * @return 1 if equal, 0 if not.  Since 0.2.
 */
CCACHE_API int ccache_key_eq(ccache_key a, ccache_key b);

/**
 * @brief A key as 32 lowercase hex digits, key.hi then key.lo (as tier
 * file names and Redis keys show it).
 * @param key the key.
 * @param out caller-owned buffer of CCACHE_KEY_HEX_LEN bytes; receives the
 *        digits and a NUL.  NULL writes nothing.
 * @return @p out.  Since 0.2.
 */
CCACHE_API char *ccache_key_hex(ccache_key key, char out[CCACHE_KEY_HEX_LEN]);

/**
 * A 256-bit strong key (a BLAKE2b-256 digest from ccache_fp_final_strong(),
 * or any collision-resistant one) for a CCACHE_KEYS_STRONG cache; every match
 * compares all 256 bits.  Bytes map little-endian: key.lo = 0..7, key.hi =
 * 8..15, check.lo = 16..23, check.hi = 24..31 (docs/design.md, "Strong keys").
 */
typedef struct ccache_strong_key {
  ccache_key key;   /**< digest bits 0..127: the table key (bucket) */
  ccache_key check; /**< digest bits 128..255: stored beside it and compared on every match */
} ccache_strong_key;

/**
 * Which keys a cache takes (ccache_config::key_mode), fixed at open.  FAST is
 * not collision-resistant: only for graphs from trusted parties.  A STRONG
 * cache takes only the *_strong calls and has its own tier namespace; it
 * computes no digest, so it needs no libsodium (docs/design.md, "Strong keys").
 */
typedef enum ccache_key_mode {
  CCACHE_KEYS_FAST = 0,  /**< 128-bit ccache_key (default) */
  CCACHE_KEYS_STRONG = 1 /**< 256-bit ccache_strong_key */
} ccache_key_mode;

/** An open cache.  Opaque; create with ccache_open(). */
typedef struct ccache ccache;

/** Serialisation callbacks for tiers (see "Persistent tiers" in ccache/tier.h). */
typedef struct ccache_codec ccache_codec;

/** A persistent tier (a backend plus the cache's state for it).  Opaque;
 *  see "Persistent tiers" in ccache/tier.h. */
typedef struct ccache_tier ccache_tier;

/**
 * A program handle (opaque): one counted reference from
 * ccache_program_intern(), ccache_program_fetch() or
 * ccache_program_get_or_compile(), given back once with
 * ccache_program_release() on its cache, on any thread (or handed to the
 * cache by a compile).  While held, the program stays alive and
 * ccache_close() is CCACHE_EBUSY.
 */
typedef struct ccache_program ccache_program;

/**
 * What a hit returns: closure and native, valid until ccache_lease_release()
 * (on any thread), even if the entry leaves; while any is out ccache_close()
 * is CCACHE_EBUSY.  Caller's memory (stack is fine); zeroed means "no
 * lease", and every call that fills one zeroes it unless CCACHE_OK.
 */
typedef struct ccache_lease {
  void *closure;      /**< the closure, as ccache_put() or a compile gave it */
  void *native;       /**< its native program (ccache_program_native()); `program` before 0.2 */
  void *internal_[2]; /**< private; do not touch (@ref keys) */
} ccache_lease;

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_COMMON_H */
