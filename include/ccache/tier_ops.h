/**
 * @file ccache/tier_ops.h
 * @brief Custom tier backends: their ops, ccache_tier_custom(), ccache_tier_free().
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest,
 * as does ccache/tier.h; it may also be included alone.
 */
#ifndef CCACHE_CCACHE_TIER_OPS_H
#define CCACHE_CCACHE_TIER_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/** @name Custom tier backends
 * A tier made from your own backend's ops (ccache/tier.h: what a tier is).
 * @{ */

struct ccache_tier_health;

/**
 * Backend operations (ccache_tier_custom()).  Every op gets the @c state
 * given there, runs with no cache lock held, from any thread, concurrently
 * for different keys (get/put/remove also for one key); returns CCACHE_*
 * codes; never exits on an I/O failure.
 */
typedef struct ccache_tier_ops {
  uint32_t size;    /**< sizeof(ccache_tier_ops); below CCACHE_TIER_OPS_SIZE_V1 is
                         CCACHE_EINVAL */
  const char *name; /**< "disk", "redis", ...: a static string, or NULL ("custom") */
  /**
   * Called once per cache with a codec, at ccache_open(): the namespace of
   * its keys, `v<format>/<hash>` or `v<format>/strong-<hash>` (@ref tier_ops).
   * May be NULL.
   * @param state the backend's state.
   * @param ns the namespace; valid only during the call.
   * @return CCACHE_OK (or >= 0); negative disables the tier (tier_errors +1).
   */
  int (*attach)(void *state, const char *ns);
  /**
   * Look up the entry for @p pkey.
   * @param state the backend's state.
   * @param pkey the program key.
   * @param blob set on CCACHE_OK to the entry's bytes (yours; free_blob).
   * @param len set on CCACHE_OK to their length in bytes; over
   *        tier_max_entry_bytes is given back undecoded (tier_oversize):
   *        bound your own reads of an untrusted store.
   * @return CCACHE_OK; CCACHE_MISS; anything else is a miss, tier_errors +1.
   */
  int (*get)(void *state, ccache_key pkey, void **blob, size_t *len);
  /**
   * Give back a blob, once per get() that returned CCACHE_OK.
   * @param state the backend's state.
   * @param blob *blob as get() set it.
   * @param len *len as get() set it, in bytes.
   */
  void (*free_blob)(void *state, void *blob, size_t len);
  /**
   * Store (or replace) the entry for @p pkey, atomically if it can (a torn
   * entry costs a compile).
   * @param state the backend's state.
   * @param pkey the program key.
   * @param blob the framed entry, valid only during the call.
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
   * NULL: no locks (unlock and renew unused).
   * @param state the backend's state.
   * @param pkey the program key.
   * @param lock set on CCACHE_OK to your handle.
   * @return CCACHE_OK; CCACHE_EBUSY (held: the core waits, calls get() after
   *         each wait, and retries); else tier_errors +1 and the core goes
   *         on without it.
   */
  int (*lock)(void *state, ccache_key pkey, void **lock);
  /**
   * Extend a leased lock, every lease_ms/3 on a renewal thread, never with
   * unlock() on it.  Required when lease_ms > 0.
   * @param state the backend's state.
   * @param lock the handle lock() set.
   * @return CCACHE_OK; CCACHE_EBUSY (the lease is no longer this lock's:
   *         lost, tier_leases_lost +1); anything else (no answer: retried
   *         every lease_ms/10 while the lease holds by the last renewal that
   *         returned OK, counting from when it was called, lease_ms on; then
   *         lost).  Each failure is tier_errors +1.
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
  /* The optional ops: zero (NULL) keeps the behaviour of a backend
   * without them. */
  /**
   * Remove the entry for @p pkey only if it is still what get() returned;
   * used instead of remove() when set (@ref tier_ops).
   * @param state the backend's state.
   * @param pkey the program key.
   * @param blob @p len bytes get() returned (before free_blob).
   * @param len its length in bytes.
   * @return CCACHE_OK (removed); CCACHE_MISS (nothing removed); a negative
   *         status (tier_errors +1).
   */
  int (*remove_if)(void *state, ccache_key pkey, const void *blob, size_t len);
  /**
   * The renewal group of a leased lock, 0 .. renew_groups - 1 (taken
   * modulo): one renewal thread per group, so group what stalls together.
   * NULL: one group.
   * @param state the backend's state.
   * @param lock the handle lock() set.
   */
  uint32_t (*renew_group)(void *state, const void *lock);
  /** Number of renewal groups, 1 .. CCACHE_MAX_RENEW_GROUPS when renew_group
   *  is set (0 is taken as 1); ignored when it is NULL. */
  uint32_t renew_groups;
  /**
   * Fill in what the backend knows of one part of the tier, for
   * ccache_tier_health_get().  @p out arrives filled with the core's
   * counts for the whole tier (parts 1); the op may set parts (e.g. its
   * number of servers), where, status and, for that part alone, the counts
   * and last_error.  Runs on the caller's thread, no cache lock held; must
   * not block on I/O.  NULL: the core's counts are reported.
   * @param state the backend's state.
   * @param part 0 .. (the parts it reports) - 1.
   * @param out the report (never NULL; a library copy, out->size is
   *        sizeof(ccache_tier_health)); kind is set back after the op.
   * @return CCACHE_OK; CCACHE_MISS if @p part is past the last part.
   */
  int (*health)(void *state, uint32_t part, struct ccache_tier_health *out);
  /* Leases carrying the signed token of a cache with ccache_config::trust.
   * NULL: no value; no reader waits. */
  /**
   * lock() that stores @p value (up to 160 bytes) for lease_peek(); used
   * instead of lock() by a cache with a signing key.  Returns as lock().
   * @param state the backend's state.
   * @param pkey the program key.
   * @param value @p len bytes, valid only during the call.
   * @param len their length in bytes.
   * @param lock as lock().
   */
  int (*lock_value)(void *state, ccache_key pkey, const void *value, size_t len, void **lock);
  /**
   * renew() that also replaces the value; used for lock_value()'s locks.
   * @param state the backend's state.
   * @param lock the handle lock_value() set.
   * @param value @p len bytes, valid only during the call.
   * @param len their length in bytes.
   */
  int (*renew_value)(void *state, void *lock, const void *value, size_t len);
  /**
   * Show the value of whoever (any process) holds @p pkey's lease.
   * @param state the backend's state.
   * @param pkey the program key.
   * @param buf receives the first min(cap, value length) bytes.
   * @param cap bytes at @p buf.
   * @param len set on CCACHE_OK to the whole length (0: no value).
   * @return CCACHE_OK (held); CCACHE_MISS (not held); negative: tier_errors
   *         +1, taken as not held.
   */
  int (*lease_peek)(void *state, ccache_key pkey, void *buf, size_t cap, size_t *len);
  /** CCACHE_TIER_* flags; 0: a tier others can write. */
  uint32_t flags;
  /* The end of 0.2.0's layout (CCACHE_TIER_OPS_SIZE_V1); appended fields
   * go below. */
  /**
   * Hand over what tells this backend's store apart from another of its
   * kind that the same runtime could use (the Redis tier: its key prefix),
   * so that signatures and signed lease tokens bind it with the runtime
   * tag, key mode and format: a signed entry copied into another scope
   * (another tenant's prefix) is rejected there (ccache/trust.h).  Called
   * once, at ccache_open() of a cache with ccache_config::trust, after
   * attach, on the opening thread; never again.  NULL: an empty scope
   * (the directory tier: private, bound by its folder).  A scope change
   * makes every entry signed under the old one a rejection.
   * @param state the backend's state.
   * @param buf receives the scope's bytes (any bytes; the core copies what
   *        it needs during the call).
   * @param cap bytes at @p buf: CCACHE_TIER_SCOPE_MAX.
   * @param len set to the number of bytes written, 0 .. @p cap.
   * @return CCACHE_OK; any other status disables the tier for this cache
   *         (tier_errors +1), as a failed attach does.
   */
  int (*scope)(void *state, void *buf, size_t cap, size_t *len);
} ccache_tier_ops;

/** The room ccache_tier_ops::scope gets, in bytes. */
#define CCACHE_TIER_SCOPE_MAX 512u

/** ccache_tier_ops::flags: only the effective user can write this
 *  backend's store (like the directory tier, which refuses folders others
 *  can write), so a cache over it needs neither keys nor
 *  CCACHE_TRUST_UNSIGNED.  Declare it only if it is true: a tier without it
 *  is taken as shared, and a cache with a codec opens over it only with
 *  ccache_config::trust or CCACHE_TRUST_UNSIGNED. */
#define CCACHE_TIER_PRIVATE 0x1u

/** The size of 0.2.0's ccache_tier_ops (every field up to flags), the first
 *  layout: the smallest ccache_tier_ops::size ccache_tier_custom() accepts.
 *  A field appended after it is 0 (NULL) when a caller's size ends before
 *  it. */
#define CCACHE_TIER_OPS_SIZE_V1 (offsetof(ccache_tier_ops, flags) + sizeof(uint32_t))

/** Most renewal groups one tier may declare (ccache_tier_ops::renew_groups). */
#define CCACHE_MAX_RENEW_GROUPS 64u

/**
 * @brief Make a tier from your own backend.
 * @param ops copied (@c name must be static).  Required: get, free_blob,
 *        put; unlock with lock; renew with lock and lease_ms > 0; with lock,
 *        1 <= poll_ms <= poll_max_ms and lease_ms 0 or >= 3.
 * @param state passed to every op; freed by ops->close with the tier (yours
 *        on error).
 * @param out receives the tier, the caller's until a successful
 *        ccache_open() or ccache_default_init() takes it (else
 *        ccache_tier_free()).
 * @return CCACHE_OK; CCACHE_EINVAL; CCACHE_ENOMEM (malloc, not the hook).
  * @ingroup advanced
 */
CCACHE_API int ccache_tier_custom(const ccache_tier_ops *ops, void *state, ccache_tier **out);

/**
 * @brief Free a tier no cache owns (ops->close runs on this thread).
 * @param t a tier never handed to a successful ccache_open() or
 *        ccache_default_init(); NULL is a no-op.  Invalid afterwards.
 * Not concurrently with any other use of @p t.
 */
CCACHE_API void ccache_tier_free(ccache_tier *t);
/** @} */

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_TIER_OPS_H */
