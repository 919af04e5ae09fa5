/**
 * @file ccache/common.h
 * @brief What every part of the API shares: the export macro, versions, status
 * codes, error detail, the checked build, keys and handles.
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest;
 * it may also be included alone.
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
 * @brief One line of detail about the most recent failed call on this
 * thread that records one.
 *
 * **Read it only after a call failed**: a success neither clears nor sets
 * it (that would cost every hit), so after a success it may hold an older
 * failure's text.  Recorded, in thread-local storage, by: ccache_open() and
 * ccache_default_init() (every EINVAL for a bad config); both
 * get-or-compile calls (every failure; a failed compile's
 * ccache_compile_fail() message, on the owner's thread and every waiter's);
 * ccache_close() / ccache_close_ex() (EBUSY, with what is out);
 * ccache_stats_get() (EINVAL); ccache_tier_disk() (EPERM, EIO, ENOTSUP);
 * ccache_tier_redis() (a refused option, ENOTSUP); ccache_default() (a
 * refused CLOSURE_CACHE_* variable, naming it and its value).  Calls that
 * record nothing leave it unchanged; the library never prints it.
 * @return a NUL-terminated string owned by the library ("" if nothing was
 *         recorded on this thread; at most 511 bytes); never NULL.  Valid
 *         until the next ccache call on this thread; never free it.
 *         Thread-safe: each thread has its own.
 */
CCACHE_API const char *ccache_error_detail(void);

/**
 * @brief Record why a compile failed, for its caller and every single-flight
 * waiter of its key, and return the status they get.
 *
 * Call it from a compile callback (either level) as its return value:
 * `return ccache_compile_fail(CCACHE_ECOMPILE, "cc: %s", first_error_line);`.
 * The message becomes this thread's ccache_error_detail() at once, and the
 * owner's ccache_get_or_compile() / ccache_program_get_or_compile() copies it
 * to each thread waiting on that compile, whose call then returns the same
 * status with the same detail.  @p status is what they return: a negative
 * ccache status (CCACHE_ENOMEM, CCACHE_EIO, ...) is kept as it is; 0, a
 * positive value or an unknown code becomes CCACHE_ECOMPILE.
 * @param status the status to report (see above).
 * @param fmt printf format of the message (one line, truncated at 511
 *        bytes), or NULL for the status's text.
 * @return the status the compile's callers get (never 0): return it.
 * Thread-safe (it writes only this thread's detail).  Outside a compile it
 * just records the detail.
 */
CCACHE_API int ccache_compile_fail(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
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
 * aborts the process on each error above, and on a program handle released
 * twice or released by a compile that then hands it to the cache, after
 * exactly one line on stderr, `ccache: <misuse> (<function>)`, e.g.
 * `ccache: lease released twice (ccache_lease_release)`; a refused
 * ccache_close() prints one line per lease and handle still out (its key,
 * the thread that took it, whether that thread exited), without aborting.
 * NULL closures and natives are exempt; a pointer the cache destroyed is
 * forgotten, so an address the allocator reuses is new.  It is slower (one
 * process-wide mutex; ccache_fetch() always takes its general path): a
 * build for tests and debugging.  The header, the ABI, the target and file
 * names are the same in both builds; the application needs no macro.
 * Mechanism: docs/design.md, "Asserts and errors".
 * @{ */
/** @} */

/* ------------------------------------------------------------------------ */
/** @name Keys and handles
 * @{ */

/**
 * A 128-bit fingerprint.  The cache never interprets it: equal keys are the
 * same entry, whatever produced them (see the fingerprint builder, ccache/fp.h).
 *
 * **The key rule.**  A closure entry hands out its closure *and* the program
 * it was stored with, so a closure key must determine the program: build it
 * from the program key plus what tells the call sites apart (layer, weights
 * bound), e.g. ccache_fp_key(&fp, program_key) then the site's fields.  A
 * closure key that leaves out something the program key holds (a shape, a
 * dtype, a target) makes two programs meet under one closure key, and the
 * cache then serves one of them to the other's calls: wrong results, no
 * error.
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
 * @return 1 if equal, 0 if not.  Thread-safe; no side effects.  Since 0.2.
 */
CCACHE_API int ccache_key_eq(ccache_key a, ccache_key b);

/**
 * @brief A key as 32 lowercase hex digits, key.hi then key.lo, most
 * significant digit first: the form the directory tier uses in its file
 * names and the Redis tier in its keys.
 * @param key the key.
 * @param out caller-owned buffer of CCACHE_KEY_HEX_LEN bytes; receives the
 *        digits and a NUL.  NULL writes nothing.
 * @return @p out (NULL when @p out is NULL).  Thread-safe.  Since 0.2.
 */
CCACHE_API char *ccache_key_hex(ccache_key key, char out[CCACHE_KEY_HEX_LEN]);

/**
 * A 256-bit strong key: a cryptographic digest (BLAKE2b-256 from
 * ccache_fp_final_strong() / ccache_fp_graph_strong(), or any 256-bit
 * collision-resistant digest of the caller's own) for a cache opened with
 * ccache_config::key_mode = CCACHE_KEYS_STRONG.
 *
 * The tables stay keyed by @c key (the bucket); every entry of a strong
 * cache stores all 256 bits, and every match (a hit, a replacing insert, a
 * single-flight join, a program lookup, a tier entry loaded) compares all
 * of them, so two inputs with one match take 2^128 work.  Cost: 16 bytes
 * more per closure entry and per program of a strong cache only; the
 * ccache_key calls are unchanged (docs/design.md, "Strong keys").
 * Digest bytes map little-endian: key.lo = bytes 0..7, key.hi = 8..15,
 * check.lo = 16..23, check.hi = 24..31.
 */
typedef struct ccache_strong_key {
  ccache_key key;   /**< digest bits 0..127: the table key (bucket) */
  ccache_key check; /**< digest bits 128..255: stored beside it and compared on every match */
} ccache_strong_key;

/**
 * Which keys a cache takes (ccache_config::key_mode), fixed at open.
 *
 * CCACHE_KEYS_FAST (the default): ccache_key (128 bits, e.g. XXH3-128 from
 * ccache_fp_final()).  Fast and not collision-resistant: safe only when
 * every graph (and every byte in it: constants, attributes) comes from a
 * trusted party, since anyone who can choose a graph can make another with
 * its key and have the cache serve one's program for the other.
 *
 * CCACHE_KEYS_STRONG: ccache_strong_key (256 bits) through the *_strong
 * calls; the ccache_key calls that take a key return CCACHE_EINVAL on such a
 * cache (and the *_strong calls on a fast one), so one cache never mixes the
 * two.  Its tiers use a namespace of their own and their entries carry the
 * full 256 bits, compared on load: a fast-mode writer can never place an
 * entry where strong-mode readers look.  The cache itself computes no
 * digest, so it works in a build without libsodium (with digests from
 * elsewhere); the strong fingerprint calls need libsodium.
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
 * the lease is released with ccache_lease_release(), even if the entry
 * leaves the table meanwhile; while any lease is out, ccache_close()
 * returns CCACHE_EBUSY.  The struct is the caller's (stack is fine; the
 * cache keeps no pointer to it); taking one allocates nothing; it may be
 * released on any thread.  A zero-initialised lease is "no lease"
 * (releasing it is a no-op); ccache_lease_release() zeroes it, and so does
 * every call that fills one when it returns anything but CCACHE_OK.
 * Releasing two copies of one lease, or one no call filled, is a caller
 * error (undefined behaviour; the checked build aborts).
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

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_COMMON_H */
