/**
 * @file ccache/tier.h
 * @brief Persistent tiers: the codec, custom backends, the directory and Redis
 * tiers.
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest;
 * it may also be included alone.
 */
#ifndef CCACHE_CCACHE_TIER_H
#define CCACHE_CCACHE_TIER_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/** @name Persistent tiers
 *
 * Tiers let compiled programs outlive the process and be shared between
 * processes: a directory on this machine (ccache_tier_disk()), a Redis
 * server for a fleet (ccache_tier_redis()), or a backend of your own
 * (ccache_tier_custom()).  They sit behind the program table only: no hit
 * path touches one.  The single-flight owner of a program miss asks them
 * top-down, fills the tiers above a hit, and otherwise compiles under their
 * compile locks (leased ones renewed on library threads) and stores the
 * entry in each (docs/tiers.md, "Persistent tiers").
 *  - A failed tier op or codec call never fails a fetch (tier_errors +1, the
 *    program compiles).  Entries are verified in full, and bounded by
 *    ccache_config::tier_max_entry_bytes, before the codec sees a byte
 *    (docs/tiers.md, "Failures never fail a fetch").
 *  - Program keys must be stable across processes (never pointers or
 *    counters); what else a program depends on goes in the runtime tag.
 *  - Whoever can write to a tier can hand every process that uses it a
 *    program to run (the checksum catches accidents, not attacks).  The
 *    directory tier refuses a directory, or any level below it, that is a
 *    link or not private to the user (ccache_tier_disk()), and is
 *    *private*; so is a custom tier declaring CCACHE_TIER_PRIVATE.  Any
 *    other tier (Redis) is *shared*: a cache with a codec opens over one
 *    only with keys (ccache_config::trust, ccache/trust.h: writers sign
 *    their entries and every entry is checked before the codec sees it) or
 *    with CCACHE_TRUST_UNSIGNED in ccache_config::trust_flags; otherwise
 *    ccache_open() is CCACHE_EINVAL.
 *  - Tier ops and codec calls run with no cache lock held and may call into
 *    the cache (except ccache_close() on it).  Compile locks are held across
 *    the compile callback, which may miss on other keys: a backend must not
 *    make a thread wait on a lock it already holds.
 * @{ */

/** Version of the entry format, in every entry and in every namespace. */
#define CCACHE_TIER_FORMAT 1u

/** What ccache_codec::encode returns for a program that must never reach a
 *  tier (not an error: nothing is counted). */
#define CCACHE_CODEC_SKIP 1

/** What ccache_codec::decode returns for bytes that passed the checksum but
 *  are no program this codec can ever load: tier_corrupt, entry removed.
 *  Any other failure is local (tier_errors, entry kept).  Since 0.2. */
#define CCACHE_CODEC_CORRUPT 2

/**
 * Serialisation callbacks, one set per cache (ccache_config::codec).  Each
 * runs on the miss's owner, no cache lock held, possibly on several threads
 * for different keys; each may call in, except ccache_close() on the cache.
 */
struct ccache_codec {
  /**
   * Serialise a program just compiled.
   * @param ctx ccache_codec::ctx.
   * @param pkey its program key.
   * @param native the native program the compile callback returned, not yet
   *        interned: read it, do not keep or free it.
   * @param bytes set to the bytes: yours, or lent from inside @p native
   *        (valid until free_bytes, which comes before any destroy).
   * @param len set to their length in bytes, at most 2^40.
   * @return 0 with *bytes and *len set; CCACHE_CODEC_SKIP (never stored);
   *         anything else fails (tier_errors +1, nothing stored).
   */
  int (*encode)(void *ctx, ccache_key pkey, void *native, void **bytes, size_t *len);
  /**
   * Give back what encode() returned in *bytes, once per encode() that
   * returned 0.
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
   * @param native_out set to the new native program (the cache's on 0).
   * @param cost_out set to its cost in bytes (see ccache_program_intern()).
   * @return 0; CCACHE_CODEC_CORRUPT (bad bytes); any other non-zero (a local
   *         failure).  On failure nothing is taken; the program compiles.
   */
  int (*decode)(void *ctx, ccache_key pkey, const void *bytes, size_t len, void **native_out,
                uint64_t *cost_out);
  void *ctx; /**< passed to the three callbacks */
};

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
  /* ---- Appended in 0.2; zero (NULL) keeps the behaviour a
   * backend without them had. ---- */
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
  /* ---- Appended in 0.2: leases carrying the signed token of a
   * cache with ccache_config::trust.  NULL: no value; no reader waits. ---- */
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
  /* ---- Appended in 0.2: safe by default (ccache_config::trust_flags).  An
   * ops struct whose size ends before flags gets 0. ---- */
  /** CCACHE_TIER_* flags; 0: a tier others can write. */
  uint32_t flags;
} ccache_tier_ops;

/** ccache_tier_ops::flags: only the effective user can write this
 *  backend's store (like the directory tier, which refuses folders others
 *  can write), so a cache over it needs neither keys nor
 *  CCACHE_TRUST_UNSIGNED.  Declare it only if it is true: a tier without it
 *  is taken as shared, and a cache with a codec opens over it only with
 *  ccache_config::trust or CCACHE_TRUST_UNSIGNED. */
#define CCACHE_TIER_PRIVATE 0x1u

/** The size of ccache_tier_ops before flags: the smallest
 *  ccache_tier_ops::size ccache_tier_custom() accepts. */
#define CCACHE_TIER_OPS_SIZE_V1 (offsetof(ccache_tier_ops, flags))

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
 */
CCACHE_API int ccache_tier_custom(const ccache_tier_ops *ops, void *state, ccache_tier **out);

/**
 * @brief Free a tier no cache owns (ops->close runs on this thread).
 * @param t a tier never handed to a successful ccache_open() or
 *        ccache_default_init(); NULL is a no-op.  Invalid afterwards.
 * Not concurrently with any other use of @p t.
 */
CCACHE_API void ccache_tier_free(ccache_tier *t);

/** @name Tier health
 * What ccache_tier_health_get() reports of a part of a tier: one part per
 * server of a Redis tier, one for any other tier.
 * @{ */
#define CCACHE_TIER_UP       0u /**< in use, and its most recent op succeeded (or none failed) */
#define CCACHE_TIER_DOWN     1u /**< its most recent op failed (a server: in backoff) */
#define CCACHE_TIER_DISABLED 2u /**< not used: its attach failed, or no codec */
/** In use and answering, but refusing writes: a Redis server whose last
 *  write was answered READONLY (a replica: a stale Sentinel), NOPERM (the
 *  ACL) or OOM (maxmemory), with no write accepted since.  Reads may still
 *  hit; entries are not shared meanwhile.  Since 0.2. */
#define CCACHE_TIER_DEGRADED 3u

/** One part of a tier, as ccache_tier_health_get() fills it. */
typedef struct ccache_tier_health {
  uint32_t size;            /**< set to sizeof(ccache_tier_health) by the caller */
  uint32_t parts;           /**< parts of this tier (servers of a Redis tier; 1 otherwise) */
  const char *kind;         /**< the backend's name ("disk", "redis", "custom"): static */
  char where[256];          /**< "host:port", "unix:/path", "NAME (host:port)" of a
                             Sentinel primary, a disk tier's directory, or "" */
  uint32_t status;          /**< CCACHE_TIER_UP, CCACHE_TIER_DOWN, CCACHE_TIER_DISABLED or
                                 CCACHE_TIER_DEGRADED */
  uint64_t backoff_ms;      /**< a server's current reconnect backoff step, ms (0: healthy) */
  uint64_t backoff_left_ms; /**< ms until it may be connected again (0: now) */
  uint64_t errors;          /**< failed ops on this part (its share of tier_errors) */
  char last_error[256];     /**< its most recent failure, one line ("" if none) */
  uint64_t leases_held;     /**< gauge: compile locks this cache holds on it now */
  uint64_t leases_lost;     /**< leases whose renewal failed (tier_leases_lost, per part) */
  uint64_t lock_waits;      /**< lock attempts answered CCACHE_EBUSY */
  /* Appended in 0.2: a caller whose size ends before them gets the fields above. */
  uint64_t fallback_reads;  /**< hits here for keys whose first server is another */
  uint64_t fallback_writes; /**< writes here because the keys' earlier servers were down */
  uint64_t failovers;       /**< new primary addresses followed (Sentinel; 0 otherwise) */
} ccache_tier_health;

/** The size of ccache_tier_health before fallback_reads: the smallest
 * out->size ccache_tier_health_get() accepts. */
#define CCACHE_TIER_HEALTH_SIZE_V1 (offsetof(ccache_tier_health, fallback_reads))

/**
 * @brief Report the health of one part (a server) of one of a cache's tiers;
 * iterate tier 0.., part 0..out->parts - 1 until CCACHE_MISS.  No I/O: cheap
 * to poll (docs/tiers.md, "Health").
 * @param c the cache.
 * @param tier index into ccache_config::tiers.
 * @param part 0 .. out->parts - 1 (servers in list order).
 * @param out set out->size = sizeof *out first; its first out->size bytes
 *        are filled on CCACHE_OK, untouched otherwise.
 * @return CCACHE_OK; CCACHE_MISS (past the last tier or part); CCACHE_EINVAL
 *         (also out->size below CCACHE_TIER_HEALTH_SIZE_V1); CCACHE_EFORKED.
 */
CCACHE_API int ccache_tier_health_get(ccache *c, uint32_t tier, uint32_t part,
                                      ccache_tier_health *out);

/** @} */

/**
 * Options of the directory tier (ccache_disk_options_init()): one file per
 * program, published by rename; one compile per machine and key (an OFD
 * lock, which another thread of the same process waits for too, and
 * which only the thread holding it may take again: a nested compile); an
 * exact size total with an LRU cleaner.  No wait on another
 * process exceeds io_lock_ms or lock_wait_ms.  Not usable after fork() in
 * the child; needs a local filesystem with OFD locks (Linux >= 3.15, not
 * NFS).  Layout and mechanism: docs/tiers.md, "The directory tier".
 */
typedef struct ccache_disk_options {
  uint32_t size;              /**< sizeof, set by ccache_disk_options_init() */
  const char *dir;            /**< the directory (NUL-terminated, non-empty), copied;
                          created 0700 (with missing parents) if absent */
  uint64_t max_bytes;         /**< size cap, bytes: CCACHE_UNBOUNDED (default) or >= 1.
                                   Cleaned (LRU, to 90 %) off the miss path from the cap
                                   up; the entry files stay under max_bytes + max_bytes/10
                                   plus one entry per write in progress: a write over that
                                   waits up to io_lock_ms for the cleaner, then is withheld
                                   (a tier error).  Since 0.2 */
  int fsync;                  /**< 1: fsync file and directory on publish; 0 (default) */
  uint64_t lock_poll_ms;      /**< first wait between lock attempts, ms (>= 1; default 10) */
  uint64_t lock_poll_max_ms;  /**< backoff cap, ms (>= lock_poll_ms; default 100) */
  uint64_t lock_wait_ms;      /**< total wait for another process's compile before
                                   compiling here, ms (default 60000) */
  uint64_t touch_interval_ms; /**< a hit refreshes an entry's age at most once per
                                   interval, ms (default 60000; 0: every hit) */
  uint64_t io_lock_ms;        /**< longest wait for the size file's lock, and for the
                                   cleaner at the cap's bound, ms (default 2000; 0: one
                                   try).  Since 0.2 */
} ccache_disk_options;

/**
 * @brief Fill @p o with the defaults listed with each field (dir NULL).
 * @param o caller-owned.
 */
CCACHE_API void ccache_disk_options_init(ccache_disk_options *o);

/**
 * @brief Make a directory tier: create @p o->dir (0700, with parents) if
 * absent and open it once; it must be private to the effective user, as
 * must each level below it, checked level by level and never followed
 * through a link (docs/tiers.md, "The directory tier").
 * @param o options (copied, dir included).
 * @param out receives the tier, as ccache_tier_custom().
 * @return CCACHE_OK; CCACHE_EINVAL (no detail); CCACHE_EPERM (not private,
 *         detail names the path); CCACHE_EIO (cannot create or open it, with
 *         a detail); CCACHE_ENOTSUP (no OFD locks, with a detail);
 *         CCACHE_ENOMEM.
 */
CCACHE_API int ccache_tier_disk(const ccache_disk_options *o, ccache_tier **out);

/**
 * Options of the Redis tier, shared by a fleet (ccache_redis_options_init(),
 * then set servers; needs hiredis, else ccache_tier_redis() is ENOTSUP).
 * Keys live under `<prefix>:v<format>:<runtime-tag hash>:`; values are the
 * core's entries.  One compile per fleet (a renewed `SET NX PX` lease); keys
 * sharded by rendezvous hashing, moving on while a server is down; a waiter
 * polls only the key's first live server.  Commands, ACL, guarantees,
 * Sentinel, timeouts: docs/tiers.md, "The Redis tier".
 *  - Faults (absent, killed, stopped or slow servers, error replies) fail
 *    only the op (tier_errors +1), never a fetch; ccache_tier_health_get()
 *    reports each server.
 *  - Sockets are close-on-exec from their creation; SIGPIPE is blocked in
 *    the calling thread around each command and a raised one consumed: the
 *    process's signal disposition is never changed.
 *  - A pooled connection the server closed while idle (its `timeout`, a
 *    proxy's idle limit) is dropped before use and the command sent on a
 *    fresh one: no error.  A renewal that gets no answer is retried while
 *    the lease holds (ccache_tier_ops::renew); the lease's scripts compare
 *    its token alone, so a renewal whose reply was lost leaves it ours.
 *  - Lease values read from Redis are bounded (193 bytes), and so is every
 *    lookup (STRLEN + GETRANGE, the reader's tier_max_entry_bytes).
 *  - Fallback: a hit found past the key's first live server is copied to
 *    that server by the lookup itself, before the core has verified it
 *    (issue 33 item 6, open).
 *  - Sentinel: each address a Sentinel answers is checked with ROLE (a
 *    stale Sentinel is passed over); with no Sentinel answering, the last
 *    primary is kept while ROLE says master.  A server whose writes are
 *    refused (READONLY, NOPERM, OOM) reports CCACHE_TIER_DEGRADED.
 *  - A tier made before fork() returns CCACHE_EFORKED in the child.
 *  - A shared Redis is trusted; hiredis 0.14 has no TLS (passwords travel
 *    as plain text): use loopback, a unix socket, a private network or a
 *    TLS tunnel.  Signed entries (ccache/trust.h) close the integrity half
 *    whatever the transport; the password and confidentiality still need
 *    the tunnel or the socket.
 */
typedef struct ccache_redis_options {
  uint32_t size; /**< sizeof, set by ccache_redis_options_init() */
  /** "host:port[,...]" ("[v6]:port") or "unix:/path" items, at most 64; or
   *  "sentinel:HOST:PORT[,...]/NAME[,...]" (syntax: @ref tier_options).
   *  Required; copied. */
  const char *servers;
  /** Key prefix, 1..256 bytes, default "ccache" (also for NULL); copied:
   *  keeps caches sharing a server apart. */
  const char *prefix;
  /** ACL user (AUTH user password; needs a password), or NULL; copied. */
  const char *user;
  /** Password (AUTH password, or AUTH user password), or NULL; copied and
   *  wiped from memory when the tier is freed. */
  const char *password;
  uint64_t connect_timeout_ms; /**< bound on one connect, ms (>= 1; default 200) */
  uint64_t command_timeout_ms; /**< bound on one whole command, sending it and reading
                                    all of its reply, ms (>= 1; default 1000) */
  uint64_t entry_ttl_ms;       /**< PX on stored entries, ms: CCACHE_UNBOUNDED (default) or
                                    >= 1 */
  uint64_t lease_ms;           /**< compile lease, ms (3 .. 2^50; default 10000);
                                    renewed every lease_ms/3 while the compile runs */
  uint64_t poll_ms;            /**< waiter backoff start, ms (>= 1; default 5) */
  uint64_t poll_max_ms;        /**< waiter backoff cap, ms (>= poll_ms; default 200) */
  uint64_t wait_ms;            /**< total wait for another process's compile before
                                    compiling locally, ms (default 120000; 0: never wait) */
  uint64_t reconnect_min_ms;   /**< reconnect backoff start, ms (>= 1; default 100) */
  uint64_t reconnect_max_ms;   /**< reconnect backoff cap, ms (>= reconnect_min_ms;
                                    default 5000) */
  /** Sentinel mode: the Sentinels' own ACL user (needs sentinel_password),
   *  or NULL; copied.  user/password above are the primaries'. */
  const char *sentinel_user;
  /** Sentinel mode: the Sentinels' password (their requirepass), or NULL;
   *  copied and wiped when the tier is freed. */
  const char *sentinel_password;
} ccache_redis_options;

/**
 * @brief Fill @p o with the defaults listed with each field (servers NULL).
 * @param o caller-owned.
 */
CCACHE_API void ccache_redis_options_init(ccache_redis_options *o);

/**
 * @brief Make a Redis tier.  No connection is made here: a server absent at
 * start is a tier error at the first miss.
 * @param o options (copied, strings included).
 * @param out receives the tier, as ccache_tier_custom().
 * @return CCACHE_OK; CCACHE_EINVAL (an option out of range, with a detail
 *         saying which); CCACHE_ENOTSUP (built without hiredis, with a
 *         detail); CCACHE_ENOMEM.
 */
CCACHE_API int ccache_tier_redis(const ccache_redis_options *o, ccache_tier **out);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_TIER_H */
