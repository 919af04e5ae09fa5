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
 * (ccache_tier_custom()).
 *
 * **Model.**  Tiers sit behind the *program* table only; the closure table
 * and every hit path (ccache_fetch(), ccache_program_fetch(), a program
 * already interned) never touch a tier.  When ccache_program_get_or_compile()
 * misses, the one thread that owns the miss (the single-flight owner; the
 * other threads for that key wait for it as usual):
 *  1. asks the tiers top-down (tiers[0] first).  A usable entry in tier i is
 *     decoded into a native program and written to tiers 0..i-1 ("fills the
 *     tiers above"); nothing is compiled.
 *  2. otherwise takes each tier's compile lock in tier order.  A lock another
 *     process holds (CCACHE_EBUSY) is retried with a backoff from the tier's
 *     poll_ms doubling up to poll_max_ms, and after every failed attempt that
 *     tier is asked again: when the other process publishes, this one loads
 *     its entry instead of compiling.  Past the tier's wait_ms it stops
 *     waiting and compiles without the remaining locks.  After taking a lock
 *     the tier is asked once more (the holder may have published just before
 *     letting go).
 *  3. runs the compile callback (no cache lock held; the tier locks are),
 *     and if it ran for at least tier_min_compile_us and the codec does not
 *     answer CCACHE_CODEC_SKIP, encodes the program once and writes the entry
 *     to every tier;
 *  4. releases the locks in reverse order.
 * Leased locks (lease_ms > 0, e.g. Redis) are renewed every lease_ms/3 by
 * library threads, never by the compiling thread: one renewal thread per
 * tier and renewal group (ccache_tier_ops::renew_group; the Redis tier has
 * one group per server), started the first time a lease of that group is
 * taken and joined by ccache_close().  So a renew blocked on one server or
 * tier (up to its command timeout, however long that is against lease_ms)
 * never delays the renewal of a lease held anywhere else.  The thread
 * budget: at most CCACHE_MAX_TIERS x CCACHE_MAX_RENEW_GROUPS per cache, in
 * practice one per Redis server this cache took a lease on (none for the
 * directory tier, whose locks do not expire).  A renewal that fails loses
 * the lease (tier_leases_lost; the compile goes on, and another process may
 * compile the same program meanwhile).
 *
 * **Failures never fail a fetch.**  A tier op that fails (I/O error, full
 * disk, vanished directory, unreachable server) and a codec call that fails
 * count in tier_errors, and the cache proceeds as if that tier were absent:
 * the program is compiled.  Every entry is verified in full before the codec
 * sees a byte; one that fails (torn, truncated, bit-flipped, not an entry)
 * counts in tier_corrupt, is removed through the tier's remove_if op (only
 * if it is still the entry read; remove where a backend has no remove_if),
 * and the program is compiled.  An intact entry written under another runtime tag is
 * a miss (never loaded, never tier_corrupt).
 *
 * **Entry format** (the core writes and checks it; backends store opaque
 * blobs).  Little-endian:
 *   magic "CCTIER\0\n" (8 bytes), u32 format version (CCACHE_TIER_FORMAT),
 *   u32 header length (56), u64 key.lo, u64 key.hi, u64 XXH3-64 of the
 *   runtime tag, u64 payload length, u64 creation time (ms since the Unix
 *   epoch), the payload (the codec's bytes), then XXH3-128 of header and
 *   payload (u64 low half, u64 high half).  A strong-key cache's entries
 *   (ccache_config::key_mode CCACHE_KEYS_STRONG) have a 72-byte header: the
 *   same 56 bytes, then the key's check half (u64 check.lo, u64 check.hi),
 *   so the whole 256-bit key is in the header and must match on load.
 *   A signed entry (a cache with a signing key, ccache/trust.h) has an
 *   80-byte signature block between the payload and the checksum, which
 *   covers it; both forms are format 1.
 *
 * **Keys must be stable across processes.**  An entry is found by its
 * program key alone, in another process, maybe after a restart or on another
 * machine: derive program keys from what the program *is* (the fingerprint
 * builder's keys of op, shapes, dtypes, attributes, target are), never from
 * anything that differs between processes (pointers, addresses, handles,
 * counters, ASLR-dependent values).  Whatever the program depends on that
 * the key does not hold (the compiler's version, the CPU features targeted,
 * compile flags) belongs in ccache_config::runtime_tag.
 *
 * **Trust.**  A tier is trusted: whoever can write to it can hand every
 * process that uses it a program to run (the checksum detects accidents, not
 * attacks).  The directory tier therefore refuses a directory that is not
 * private to the user (see ccache_tier_disk()); a Redis server must be
 * writable only by parties you trust, over a network path you trust (no TLS:
 * see ccache_redis_options).  To trust only what a known compiler published,
 * give caches keys (ccache_config::trust, ccache/trust.h): entries are then
 * signed by writers and checked by everyone before the codec sees them.
 *
 * **Lock order.**  Tier ops and codec callbacks are never called while the
 * cache holds any of its own locks; they may call into the cache (except
 * ccache_close() on it).  The tier compile locks are held across the compile
 * callback, which may itself miss on other program keys (nested compiles):
 * backends must not make a thread wait on a lock it already holds.
 * @{ */

/** Version of the entry format, in every entry and in every namespace. */
#define CCACHE_TIER_FORMAT 1u

/** What ccache_codec::encode returns for a program that must never reach a
 *  tier (not an error: nothing is counted). */
#define CCACHE_CODEC_SKIP 1

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
   * @return 0 on success; non-zero: tier_errors +1, nothing is taken, and
   *         the program is compiled instead.
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
   * the namespace every key of this cache lives in, `v<format>/<hash>` with
   * the hash the XXH3-64 of the runtime tag as 16 lowercase hex digits (e.g.
   * "v1/3f2a9c0d11e2b4a7"), or `v<format>/strong-<hash>` for a strong-key
   * cache.  Two runtime tags, or two key modes, never share a namespace.
   * The disk tier maps it to `<dir>/v1/<hash>/`, the Redis tier to
   * `<prefix>:v1:<hash>:`.  In a strong-key cache the ops' key is the strong
   * key's first half (ccache_strong_key::key).
   * May be NULL.
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
   * @param len set on CCACHE_OK to the entry's length in bytes.
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
   * @return CCACHE_OK; CCACHE_EBUSY (another holder has it: the core waits
   *         and retries); anything else (tier_errors +1: the core proceeds
   *         without this tier's lock).
   */
  int (*lock)(void *state, ccache_key pkey, void **lock);
  /**
   * Extend a leased lock; called every lease_ms/3 from a renewal thread
   * (the one of its tier and renewal group, see renew_group)
   * while the compile runs.  Never called concurrently with unlock() on the
   * same handle.
   * Required when lease_ms > 0; unused (may be NULL) when lease_ms is 0
   * (locks that never expire, e.g. ones the kernel drops when their holder
   * dies).
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
  /* ---- Appended in 0.2 (issue 20); zero (NULL) keeps the behaviour a
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
   * The renewal group of a leased lock, 0 .. renew_groups - 1.  Each group
   * of each tier has its own renewal thread, so a renew() blocked on one
   * group (a server that stopped answering) never delays the renewal of a
   * lease in another group or tier.  Group leases by what can stall
   * together (the Redis tier: by server).  NULL: one group.  A value out of
   * range is taken modulo renew_groups.
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
  /* Appended (issue 23): a caller whose size ends before them gets the fields above. */
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
 * **Layout.**  One file per program at
 * `<dir>/v<format>/<runtime-tag hash>/<2 hex>/<32 hex key>` (the 2 hex digits
 * are the key's first two; the key is key.hi then key.lo, 16 lowercase hex
 * digits each), so two runtime versions never overwrite each other.  Also in
 * `<dir>/v<format>/`: "lock" (two bytes of it guard the size file and elect
 * the one cleaner) and "size" (the running total of entry bytes), and in
 * each `<2 hex>` folder a "lock" file (the compile locks of its keys).
 * Writers create `.tmp.<pid>.<word>.<n>` in the entry's folder (word: 16 hex
 * digits drawn at random per tier object, so a new process never draws a
 * dead one's name; a name that is taken anyway is skipped, never an error)
 * and publish it with one rename.  A stale temporary file (its writer dead
 * and the file over 60 s old, or any file over an hour old) is removed by
 * the cleaner, and by each tier object's first write into its folder and
 * its first write there an hour after its last sweep: so a leftover two
 * hours old is gone by the next write into its folder.
 * An entry that failed verification is moved aside (renamed to such a
 * temporary name), compared with the bytes read, and deleted, or linked
 * back if it is not what was read (another process published it in
 * between); link() never replaces an entry published after the move.  The
 * residual race: for the instant between the move and the link, a reader of
 * that key finds no entry (it takes the compile lock and may compile once
 * more).
 *
 * **One compile per machine.**  The compile lock of a key is an
 * open-file-description byte-range lock (F_OFD_SETLK) on one byte of its
 * folder's lock file (at offset XXH3-64 of the key, shifted right once),
 * opened O_CLOEXEC: the kernel drops it when its holder dies, and only the
 * holder's own unlock or death releases it (unlike classic POSIX record
 * locks, which any close() of the file in the process drops).  The lock
 * files never grow.  Two keys share a lock only if they share the runtime
 * tag, the folder and those 63 bits (about 2^-71 per pair, sequential keys
 * included): a miss does not wait for the compile of another key.
 * Within one process a held lock is shared, not waited for: threads and
 * caches (two tiers over one directory included) that miss on a key whose
 * lock the process holds, a nested compile included, go on (each cache's
 * single-flight still makes one compile per key per cache), and the byte
 * stays locked until the last of them unlocks.  A child fork()ed from a
 * process holding such a lock does not keep it alive (it closes its copies
 * of the lock files); a tier made before fork() is not usable in the child.
 *
 * **No wait on a stopped process.**  The size file is updated under a
 * byte-range lock that another process holds only for one small read and
 * write, waited for at most io_lock_ms: a holder that is stopped (a
 * debugger, ^Z, a cgroup freezer) delays a write by io_lock_ms once per
 * tier object, after which writes only try the lock until it is free again.
 * A write that cannot have it still publishes its entry; its size delta
 * stays pending in the tier object and is written by the next write or
 * remove of that object that gets the lock, by its cleaner's next pass, or
 * at ccache_close() (one more try, io_lock_ms at most); each deferred delta
 * counts one tier_lock_timeouts.  Attaching (ccache_open()) waits for no one
 * and never scans the directory.
 *
 * **Size cap.**  Sizes are the entry files' lengths (directories and
 * filesystem blocks not counted).  Every write and remove adds exactly what
 * it changed to the shared running total (a rename over an existing entry
 * is an exchange that measures the replaced file), so with no crash and no
 * outside change the total equals the entry files' sizes, however many
 * processes write and clean at once.  When a write takes the total over
 * max_bytes, it hands the clean to the tier object's cleaner thread
 * (started then; ccache_close() gives a clean in progress io_lock_ms to
 * finish, then stops it and joins the thread) and returns: no program miss
 * pays for a scan.  One cleaner per machine at a time (the others skip)
 * lists every entry and removes the least recently used first (age = the
 * file's modification time, refreshed by a hit at most once per
 * touch_interval_ms), down to 90 % of the cap.  So the directory stays
 * under the cap plus what is written while a clean runs.  The cap covers
 * every runtime tag under `<dir>/v<format>/`.  A missing or damaged size file
 * is rebuilt by counting (by the cleaner, never while holding the lock); a
 * write that lands during that count may be counted twice or not at all.  A process killed between
 * a rename and its size update, a delta still pending when a process exits,
 * and files changed behind the library's back leave the total off by their
 * sizes: delete `<dir>/v<format>/size` to have it recounted.  A cleaner that
 * is stopped keeps the others from cleaning until it runs again.
 *
 * Needs a local filesystem with open-file-description locks (Linux >= 3.15;
 * not NFS).
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
 * its writes fail (tier_errors) and it compiles.
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
 * **What is sent.**  Every key lives under
 * `<prefix>:<namespace>:`, the namespace being the one attach() receives
 * with '/' written as ':' (e.g. "ccache:v1:3f2a9c0d11e2b4a7:"), followed by
 * the program key as 32 lowercase hex digits, key.hi then key.lo.  The
 * commands, all with binary-safe arguments:
 *  - `GET <k>` (lookup), `SET <k> <entry> [PX entry_ttl_ms]` (store).  The
 *    value is the core's checksummed entry (see "Entry format" above): the
 *    codec's bytes, framed; nothing else of the process is sent.
 *  - an entry that failed verification is deleted only if it is still the
 *    one read: `EVAL <script> 1 <k> <value>`, the value being the bytes
 *    read and the script `if redis.call('get', KEYS[1]) == ARGV[1] then
 *    return redis.call('del', KEYS[1]) end return 0`, so an entry another
 *    process stored since stays.  The whole value is
 *    compared, not only its length and checksum trailer: an entry damaged in
 *    its body keeps the trailer of the intact entry it was, and so does a
 *    verbatim copy of that entry filled in from a lower tier.
 *  - the compile lease, under `<k>:lease`: `SET <k>:lease <token> NX PX
 *    lease_ms` takes it (the token is 16 bytes from getrandom(), as 32 hex
 *    digits); `EVAL <script> 1 <k>:lease <token> lease_ms` renews it, the
 *    script being `if redis.call('get', KEYS[1]) == ARGV[1] then return
 *    redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`; the same script
 *    with `del` instead of `pexpire` (and no ARGV[2]) releases it.  Both scripts act only while the
 *    lease still holds this holder's token, so a process whose lease lapsed
 *    can neither extend nor delete the lease another process took since.
 *  - `AUTH [user] password` on each new connection when a password is set.
 * The server needs GET, SET (SET NX PX included), EVAL and, inside the three
 * scripts, GET, PEXPIRE and DEL (AUTH is always allowed) on keys matching
 * `<prefix>:*`; no other command is sent.  An ACL user can be limited to
 * exactly that, e.g.
 * `user ccache on >secret ~ccache:* +get +set +del +eval +pexpire`.
 *
 * **One compile per fleet.**  A process that misses everywhere takes the
 * lease, compiles, stores the entry, then releases the lease.  A renewal
 * thread of the lease's server (one per server this cache has taken a lease
 * on) renews it every lease_ms/3 on a connection of its own, so a long
 * compile keeps it however busy the other connections are, and however
 * long another server takes to answer (or time out).  Others
 * find it taken (CCACHE_EBUSY), poll the entry with a backoff from poll_ms
 * doubling to poll_max_ms, and load the entry when it appears; if the
 * holder dies its lease lapses within lease_ms and one waiter takes over;
 * after wait_ms a waiter compiles locally.
 *
 * **Several servers.**  Each key goes to one server by rendezvous
 * (highest-random-weight) hashing: the largest XXH3-64 of the key seeded
 * with the XXH3-64 of the server's name as written ("host:port" or
 * "unix:/path").  Every process given the same names, in any order, picks
 * the same server.  Sorting the same weights gives each key its
 * rendezvous order over all the servers.
 *
 * **Fallback.**  A server is down from a failed connect or a broken
 * command until a command it answers (see "Faults" below).  A key's entry
 * and its compile lease go to the first server of its rendezvous order that
 * is not down, so processes that agree which servers are down agree where
 * each key lives: with one server dead, a fleet still compiles each program
 * once.  (Removing a server moves only its keys: the fallback of a key is
 * where it would live without its first server.)  A lookup reads the
 * servers in the key's order, skipping those that are down; the first hit
 * wins, and a hit after the first live server is copied to that server, so
 * entries written to a fallback stay readable after their server comes back,
 * and move back to it as they are read.  A server that comes back (its
 * backoff over, a command answered) takes its keys back at once.  A miss
 * costs one GET per live server; a bad entry's conditional delete goes to
 * every live server.  An error reply (OOM, NOPERM) is an answer: the key
 * stays with that server (the op is a tier error).
 *
 * **The guarantee.**  While every process sees the same servers down, each
 * key is compiled at most once in the fleet (lease_ms and wait_ms aside).
 * While they disagree (a server just died or came back, and some processes
 * have not yet failed a command on it or seen it answer), two processes may
 * look for a key's lease on different servers: a waiter whose lease holder's
 * server died falls back, finds no lease there and compiles.  So a server
 * lost or regained costs at most one extra compile per process per key
 * whose first live server changed, and none for any other key.
 *
 * **Sentinel.**  With servers = "sentinel:HOST:PORT[,...]/NAME[,...]" each
 * primary name takes the place of a server: keys are sharded over the names
 * by the rendezvous rule (seeded by the name, so a failover moves no key),
 * with the same fallback.  Before its first connect, after a connection
 * fails, and after a primary answers `-READONLY` (it was demoted while this
 * process held connections to it), the tier asks the Sentinels in list
 * order `SENTINEL get-master-addr-by-name NAME` on a fresh connection each
 * (`AUTH [sentinel_user] sentinel_password` first when set) and connects to
 * the first address answered; a new address counts as a failover followed
 * (ccache_tier_health::failovers).  The -READONLY op itself is a tier error;
 * the next op goes to the new primary, with no backoff.  No Sentinel
 * answering, or none knowing the name, is a connect failure (backoff, tier
 * errors), never a failed fetch.  There is no `+switch-master` subscriber:
 * a primary is followed when it fails or refuses a write.  The Sentinels
 * are sent nothing else, so their ACL user can be limited to exactly
 * `user watcher on >secret +sentinel|get-master-addr-by-name` (a line of
 * sentinel.conf); the primaries need the ACL below.  Between the
 * primary's death and the Sentinels' failover (down-after-milliseconds plus
 * the election) its keys are tier errors unless another primary name is
 * listed to fall back to; entries not yet replicated when it died are gone
 * (compiled again once).
 *
 * **Connections.**  hiredis connections over sockets the library makes
 * itself, close-on-exec from their creation (SOCK_CLOEXEC: a child that
 * another thread fork()s and exec()s never inherits one), made on first use
 * (never by ccache_tier_redis()).  Each server keeps up to 8 idle
 * connections; a thread that misses takes an idle one or connects a new
 * one, so misses on different threads never wait for each other's round
 * trips.  Connect time is bounded by connect_timeout_ms; a whole command,
 * from sending it to the last byte of its reply, by command_timeout_ms.
 * (Not each read: a server trickling its reply a byte at a time, each
 * inside the bound, would otherwise hold the command, and the fetch, for
 * as long as it liked.)  A host name is resolved (getaddrinfo) at each
 * connect, outside those bounds: give addresses for predictable timing.
 *
 * **Faults never fail a fetch.**  A server absent at start, killed, slow
 * past the timeouts, a dropped connection, an error reply (`OOM command not
 * allowed` under maxmemory, NOAUTH, WRONGPASS, ...) each fail that one op
 * (tier_errors +1; the program compiles) when no other server can take
 * it.  A failed connect or a connection that breaks puts the server in
 * reconnect backoff: no new connection is tried for reconnect_min_ms,
 * doubling on each further failure up to reconnect_max_ms, and ops on its
 * keys go to their fallback meanwhile (a tier error if every server is
 * down).  Only a
 * command the server answers ends it: a connect alone does not, since a
 * stopped server (SIGSTOP, a debugger, a frozen cgroup) whose listen backlog
 * is open still accepts connections and answers nothing; it is backed off
 * like an unreachable one.  An error reply does not start a backoff (the
 * connection is fine, and the server answered).  ccache_tier_health_get()
 * reports each server: up or down (backed off, for how long), its errors
 * and last error line, the leases held and lost on it, the lock waits, and
 * the fallback reads and writes it served for other servers' keys.
 *
 * **Signals.**  hiredis writes with write(2), which raises SIGPIPE on a
 * connection the server has reset.  The library never changes the process's
 * signal disposition: it blocks SIGPIPE in the calling thread around each
 * command (pthread_sigmask), consumes a SIGPIPE raised meanwhile
 * (sigtimedwait with a zero timeout) and restores the thread's mask; a
 * SIGPIPE already pending before the call is left pending.
 *
 * **fork().**  A tier made before fork() never uses the parent's
 * connections in the child: its ops return CCACHE_EFORKED there (and a
 * cache from before the fork is unusable in the child anyway).
 *
 * **Trust and transport.**  A shared Redis is trusted: anyone who can write
 * to it (or to the network path to it) can hand every process that uses it a
 * program to run; the checksum catches accidents, not attacks.  hiredis 0.14
 * has no TLS: traffic, passwords included, is plain text.  Use it on
 * loopback, a unix socket, or a private network you trust (or a TLS tunnel
 * such as stunnel to a local port).  Signed entries (ccache/trust.h) close
 * the integrity half whatever the transport: a reader with trusted keys
 * loads only what a trusted writer signed, and waits only on a signed
 * lease; the password and the entries' confidentiality still need the
 * tunnel or the socket.
 */
typedef struct ccache_redis_options {
  uint32_t size; /**< sizeof, set by ccache_redis_options_init() */
  /** "host:port[,host:port...]" (port 1..65535; IPv6 as "[addr]:port") or
   *  "unix:/absolute/path" entries, comma-separated, at most 64, no
   *  duplicates, no spaces; or, as the whole value,
   *  "sentinel:HOST:PORT[,HOST:PORT...]/NAME[,NAME...]": Redis Sentinels
   *  (same item syntax) and up to 64 primary names (1..128 printable bytes,
   *  no spaces), the primaries sharded by name as servers are (see
   *  "Sentinel" above); copied.  Required (the default NULL is
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
