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
 * entry in each (docs/design.md, "Persistent tiers").
 *  - A failed tier op or codec call never fails a fetch: tier_errors +1 and
 *    the program compiles.  Every entry is verified in full before the
 *    codec sees a byte (a bad one counts in tier_corrupt and is removed); an
 *    entry of another runtime tag is a miss.  An entry longer than
 *    ccache_config::tier_max_entry_bytes is a miss (tier_oversize), refused
 *    before a buffer of its size exists.  A decode answering
 *    CCACHE_CODEC_CORRUPT is a bad entry (tier_corrupt, removed); any other
 *    decode failure counts in tier_errors and leaves the entry in place.
 *  - Program keys must be stable across processes: derive them from what
 *    the program is, never from pointers, handles or counters; what it
 *    depends on that the key does not hold belongs in
 *    ccache_config::runtime_tag.
 *  - A tier is trusted: whoever can write to it can hand every process that
 *    uses it a program to run (the checksum catches accidents, not attacks).
 *    The directory tier refuses a directory, or any level below it, that is
 *    a link or not private to the user (ccache_tier_disk()).  To load only
 *    what a known compiler published, give caches keys
 *    (ccache_config::trust, ccache/trust.h): writers sign their entries and
 *    every entry is checked before the codec sees it.
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

/** What ccache_codec::decode returns for bytes that are bad: they passed
 *  the entry checksum but are not a program this codec can ever load (a
 *  truncated or malformed object, a version of its own it does not read).
 *  Counted in tier_corrupt, and the entry is removed (through
 *  ccache_tier_ops::remove_if, so only if it is still the entry read), as
 *  for an entry that failed verification.  Any other non-zero return means
 *  "I failed here" (no memory, a host that cannot load what is a good
 *  program elsewhere): tier_errors +1 and the entry stays, so one machine's
 *  local failure never deletes an entry for the fleet.  Since 0.2 (issue
 *  21). */
#define CCACHE_CODEC_CORRUPT 2

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
   * @param bytes set to the serialised bytes: any allocation of yours, or
   *        bytes lent from inside @p native (e.g. a shared object's image
   *        it keeps), which must then stay valid until free_bytes is called
   *        for them (it is, before the program can be destroyed); given
   *        back once through free_bytes after they are framed.
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
   * @return 0 on success; CCACHE_CODEC_CORRUPT: these bytes are bad
   *         (tier_corrupt +1, the entry is removed); any other non-zero:
   *         this process failed to load them (tier_errors +1, the entry
   *         stays).  Either way nothing is taken and the program is
   *         compiled instead.
   */
  int (*decode)(void *ctx, ccache_key pkey, const void *bytes, size_t len, void **native_out,
                uint64_t *cost_out);
  void *ctx; /**< passed to the three callbacks */
};

struct ccache_tier_health;

/**
 * Backend operations, for your own backends (ccache_tier_custom()); the
 * library's backends use the same table.  Every op receives the @c state
 * given to ccache_tier_custom().  Ops may be called from any thread,
 * concurrently with each other for different keys (and get/put/remove
 * concurrently for the same key); renew() runs on the library's renewal
 * threads.  No op is called with a cache lock held.  Status returns use the
 * CCACHE_* codes; an op must never call exit() or abort() on an I/O failure.
 */
typedef struct ccache_tier_ops {
  uint32_t size;    /**< sizeof(ccache_tier_ops); smaller is CCACHE_EINVAL */
  const char *name; /**< "disk", "redis", ...: a static string, or NULL ("custom") */
  /**
   * Called once per cache, at ccache_open() (only if the cache has a codec):
   * the namespace every key of this cache lives in, `v<format>/<hash>` (the
   * runtime tag's XXH3-64 as 16 lowercase hex digits, e.g.
   * "v1/3f2a9c0d11e2b4a7"), or `v<format>/strong-<hash>` for a strong-key
   * cache, whose ops get the strong key's first half as their key.  Two
   * runtime tags, or two key modes, never share a namespace.  May be NULL.
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
   * @param len set on CCACHE_OK to the entry's length in bytes.  One longer
   *        than the cache's ccache_config::tier_max_entry_bytes is given
   *        back at once (free_blob), never verified or decoded, and counts
   *        in tier_oversize: the core checks it before the codec, but only
   *        after your get() has read it, so a backend over an untrusted
   *        store should bound its own reads too (the library's directory
   *        and Redis tiers refuse an entry over the bound before reading
   *        it).
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
   * @return CCACHE_OK; CCACHE_EBUSY (another holder has it: the core waits,
   *         calls get() after each wait, and retries); anything else (tier_errors +1: the core proceeds
   *         without this tier's lock).
   */
  int (*lock)(void *state, ccache_key pkey, void **lock);
  /**
   * Extend a leased lock; called every lease_ms/3 from the renewal thread
   * of its tier and renewal group while the compile runs, never concurrently
   * with unlock() on the same handle.  Required when lease_ms > 0; unused
   * (may be NULL) when lease_ms is 0 (locks that never expire).
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
  /* ---- Appended in 0.2; zero (NULL) keeps the behaviour a
   * backend without them had. ---- */
  /**
   * Remove the entry for @p pkey only if it is still the one get() just
   * returned (it failed verification): an entry another process published
   * since the read is left alone.  Used instead of remove() whenever set,
   * on every path that removes a bad entry; NULL: remove() is used (and may
   * delete an entry published between the read and the remove).
   * @param state the backend's state.
   * @param pkey the program key.
   * @param blob @p len bytes, what get() returned (still lent: called before
   *        free_blob); valid only during the call.
   * @param len its length in bytes.
   * @return CCACHE_OK (removed); CCACHE_MISS (absent, or another entry is
   *         there now: nothing removed); a negative status (tier_errors +1).
   */
  int (*remove_if)(void *state, ccache_key pkey, const void *blob, size_t len);
  /**
   * The renewal group of a leased lock, 0 .. renew_groups - 1 (out of range:
   * taken modulo renew_groups).  Each group of each tier has its own
   * renewal thread, so group leases by what can stall together (the Redis
   * tier: by server).  NULL: one group.
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
  /* ---- Appended in 0.2 (issue 21): leases whose value a cache with
   * ccache_config::trust signs (see ccache/trust.h).  NULL: the backend's
   * leases carry no value, and a reader never waits on them. ---- */
  /**
   * lock() that stores @p value (up to 160 bytes, the core's signed lease
   * token) as what lease_peek() shows of the lease.  Used instead of lock()
   * by a cache with a signing key.  Returns as lock().
   * @param state the backend's state.
   * @param pkey the program key.
   * @param value @p len bytes, valid only during the call.
   * @param len their length in bytes.
   * @param lock as lock().
   */
  int (*lock_value)(void *state, ccache_key pkey, const void *value, size_t len, void **lock);
  /**
   * renew() that also replaces the lease's value (a fresh token at each
   * renewal).  Used instead of renew() for a lock taken by lock_value().
   * Returns as renew().
   * @param state the backend's state.
   * @param lock the handle lock_value() set.
   * @param value @p len bytes, valid only during the call.
   * @param len their length in bytes.
   */
  int (*renew_value)(void *state, void *lock, const void *value, size_t len);
  /**
   * Show the value of whoever holds @p pkey's lease (any process).
   * @param state the backend's state.
   * @param pkey the program key.
   * @param buf receives the first min(cap, value length) bytes.
   * @param cap bytes at @p buf.
   * @param len set on CCACHE_OK to the value's whole length (0: a lease
   *        with no value, e.g. one lock() took).
   * @return CCACHE_OK (held); CCACHE_MISS (nobody holds it); a negative
   *         status (tier_errors +1; taken as not held).
   */
  int (*lease_peek)(void *state, ccache_key pkey, void *buf, size_t cap, size_t *len);
} ccache_tier_ops;

/** Most renewal groups one tier may declare (ccache_tier_ops::renew_groups). */
#define CCACHE_MAX_RENEW_GROUPS 64u

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
 *         bad poll bounds, renew_groups over CCACHE_MAX_RENEW_GROUPS); CCACHE_ENOMEM (malloc, not the allocator hook).
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

/** @name Tier health
 * What ccache_tier_health_get() reports of a part of a tier: one part per
 * server of a Redis tier, one for any other tier.
 * @{ */
#define CCACHE_TIER_UP 0u /**< in use, and its most recent op succeeded (or none failed) */
#define CCACHE_TIER_DOWN \
  1u /**< its most recent op failed; a Redis server is then in
                                     reconnect backoff (backoff_left_ms) and its keys go to
                                     the next server of their rendezvous order until a
                                     command it answers brings it back */
#define CCACHE_TIER_DISABLED \
  2u /**< not used by this cache: its attach failed, or the
                                     cache has no codec */

/** One part of a tier, as ccache_tier_health_get() fills it. */
typedef struct ccache_tier_health {
  uint32_t size;            /**< set to sizeof(ccache_tier_health) by the caller */
  uint32_t parts;           /**< parts of this tier (servers of a Redis tier; 1 otherwise) */
  const char *kind;         /**< the backend's name ("disk", "redis", "custom"): static */
  char where[256];          /**< this part: "host:port" or "unix:/path" of a server,
                             "NAME (host:port)" of a Sentinel primary (its address last
                             answered; "NAME" before any), the directory of a disk
                             tier; "" if the backend does not say */
  uint32_t status;          /**< CCACHE_TIER_UP, CCACHE_TIER_DOWN or CCACHE_TIER_DISABLED */
  uint64_t backoff_ms;      /**< a server's current reconnect backoff step, ms (0: healthy) */
  uint64_t backoff_left_ms; /**< ms until it may be connected again (0: now) */
  uint64_t errors;          /**< failed ops on this part (what tier_errors counts, per part;
                             for a Redis server also ops refused during backoff) */
  char last_error[256];     /**< its most recent failure, one line ("" if none) */
  uint64_t leases_held;     /**< gauge: compile locks this cache holds on it now */
  uint64_t leases_lost;     /**< leases whose renewal failed (tier_leases_lost, per part) */
  uint64_t lock_waits;      /**< lock attempts that found the lock held by another
                             process (each CCACHE_EBUSY answer) */
  /* Appended in 0.2: a caller whose size ends before them gets the fields above. */
  uint64_t fallback_reads;  /**< hits on this server for keys whose first server (in their
                             rendezvous order) is another: entries written while it was down */
  uint64_t fallback_writes; /**< entries and compile leases written here because the keys'
                             earlier servers were down */
  uint64_t failovers;       /**< new primary addresses this server slot followed (Sentinel);
                             0 for a plain server */
} ccache_tier_health;

/** The size of ccache_tier_health before fallback_reads: the smallest
 * out->size ccache_tier_health_get() accepts. */
#define CCACHE_TIER_HEALTH_SIZE_V1 (offsetof(ccache_tier_health, fallback_reads))

/**
 * @brief Report the health of one part of one of a cache's tiers, for
 * operators (which server is down, since when it fails and why, who holds
 * and loses leases).
 *
 * Iterate: for tier 0.., for part 0..out->parts - 1, until CCACHE_MISS.
 * @param c the cache.
 * @param tier index into the cache's tiers (ccache_config::tiers order).
 * @param part 0 .. out->parts - 1 (servers in the order of the server list).
 * @param out caller-owned; set out->size = sizeof *out first.  Its first
 *        out->size bytes (at most sizeof) are filled on CCACHE_OK (kind
 *        points to a static string); untouched otherwise.
 * @return CCACHE_OK; CCACHE_MISS (@p tier is not one of the cache's tiers,
 *         or @p part is past its last part: the end of an iteration);
 *         CCACHE_EINVAL (NULL @p c or @p out, out->size below
 *         CCACHE_TIER_HEALTH_SIZE_V1); CCACHE_EFORKED (a cache created
 *         before fork(), in the child).  Checked build: aborts on a closed
 *         cache.
 * Thread-safe, and cheap enough to poll (no I/O: it reads counters and the
 * backoff state under short internal locks, never a cache lock); the fields
 * are each exact, together a near-simultaneous snapshot.  A custom backend's
 * health op runs on the calling thread.
 */
CCACHE_API int ccache_tier_health_get(ccache *c, uint32_t tier, uint32_t part,
                                      ccache_tier_health *out);

/** @} */

/**
 * Options of the directory tier.  Initialise with ccache_disk_options_init().
 *
 * One file per program under `<dir>/v<format>/<runtime-tag hash>/`,
 * published with one rename, so readers see a whole entry or none; a
 * crashed writer's temporary files are removed later.  One compile per
 * machine and key: a byte-range lock (F_OFD_SETLK) the kernel drops when its
 * holder dies; within one process a held lock is shared, not waited for.
 * The total of entry bytes is kept exact across processes; a write that
 * takes it over max_bytes wakes the tier's cleaner thread (joined at close),
 * which removes the least recently used entries down to 90 % of the cap.  No
 * call waits on another process for more than io_lock_ms (the size file) or
 * lock_wait_ms (a compile lock).  Delete `<dir>/v<format>/size` to have the
 * total recounted after files changed behind the library's back.  A tier
 * made before fork() is not usable in the child.  Needs a local filesystem
 * with open-file-description locks (Linux >= 3.15; not NFS).  Layout and
 * mechanism: docs/design.md, "The directory tier".
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
  uint64_t io_lock_ms;        /**< longest wait for the size file's lock, which
                                   another process holds only briefly unless it is
                                   stopped, ms (default 2000; 0: one try).  Not the
                                   compile lock (lock_wait_ms).  Since 0.2. */
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
 * its writes fail (tier_errors) and it compiles.  Below it every op walks
 * down one level at a time (openat with O_NOFOLLOW | O_DIRECTORY from the
 * level above) and checks each level as the top is checked: a level that
 * is a symbolic link, not a directory, owned by another user or writable
 * by group or others is refused, never followed.  The format and
 * runtime-tag levels (`v1/<hash>`) are checked at ccache_open() (a refused
 * one disables the tier for that cache: tier_errors +1, every program
 * compiles); an entry folder (`<2 hex>`) at each get, put, remove and lock
 * (tier_errors +1 for that op; nothing is read from or written through
 * it).  Entries are opened with O_NOFOLLOW inside their checked folder (an
 * entry that is a link is a tier error, never followed) and refused from
 * their size (fstat of the opened file) before they are read when over
 * ccache_config::tier_max_entry_bytes.
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
 * Keys live under `<prefix>:v<format>:<runtime-tag hash>:`; values are the
 * core's checksummed entries (nothing else of the process is sent).  One
 * compile per fleet: a token-checked lease (`SET NX PX`) renewed every
 * lease_ms/3 by a renewal thread of its server.  Keys are sharded over the
 * servers (or Sentinel primary names) by rendezvous hashing, and go to the
 * next server of their order while theirs is down (reconnect backoff after
 * a failed connect or a broken command; only an answered command ends it).
 * A lookup is one script that answers an oversize value's length instead
 * of the value (ccache_config::tier_max_entry_bytes); a miss reads every
 * live server in the key's order, but a process waiting on another's lease
 * polls only the key's first live server, where the holder publishes.  Commands sent, the
 * ACL they need, the fleet guarantee while servers go
 * down and come back, Sentinel, connections and timeouts: docs/design.md,
 * "The Redis tier".
 *  - Faults (absent, killed, stopped or slow servers, error replies) fail
 *    only the op (tier_errors +1), never a fetch; ccache_tier_health_get()
 *    reports each server.
 *  - Sockets are close-on-exec from their creation; SIGPIPE is blocked in
 *    the calling thread around each command and a raised one consumed: the
 *    process's signal disposition is never changed.
 *  - A tier made before fork() returns CCACHE_EFORKED in the child.
 *  - A shared Redis is trusted; hiredis 0.14 has no TLS (passwords travel
 *    as plain text): use loopback, a unix socket, a private network or a
 *    TLS tunnel.  Signed entries (ccache/trust.h) close the integrity half
 *    whatever the transport; the password and confidentiality still need
 *    the tunnel or the socket.
 */
typedef struct ccache_redis_options {
  uint32_t size; /**< sizeof, set by ccache_redis_options_init() */
  /** "host:port[,host:port...]" (port 1..65535; IPv6 as "[addr]:port") or
   *  "unix:/absolute/path" entries, comma-separated, at most 64, no
   *  duplicates, no spaces; or, as the whole value,
   *  "sentinel:HOST:PORT[,HOST:PORT...]/NAME[,NAME...]": Redis Sentinels
   *  (same item syntax) and up to 64 primary names (1..128 printable bytes,
   *  no spaces), the primaries sharded by name as servers are; copied.  Required (the default NULL is
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
  uint64_t command_timeout_ms; /**< bound on one whole command, sending it and reading
                                    all of its reply, ms (>= 1; default 1000) */
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
  /** Sentinel mode: the Sentinels' own ACL user (needs sentinel_password),
   *  or NULL; copied.  user/password above are the primaries'. */
  const char *sentinel_user;
  /** Sentinel mode: the Sentinels' password (their requirepass), or NULL;
   *  copied and wiped when the tier is freed. */
  const char *sentinel_password;
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

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_TIER_H */
