/**
 * @file ccache/tier.h
 * @brief Persistent tiers: the codec, custom backends, the directory and Redis
 * tiers.
 *
 * What a tier is, the codec and the tiers' health are declared here; custom
 * backends in ccache/tier_ops.h, the directory tier in ccache/tier_disk.h
 * and the Redis tier in ccache/tier_redis.h, which this header includes.
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest;
 * it may also be included alone.
 */
#ifndef CCACHE_CCACHE_TIER_H
#define CCACHE_CCACHE_TIER_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
/* The parts split out of this header, included so that it still declares
 * everything it did. */
#include "tier_disk.h"  /* the directory tier */
#include "tier_ops.h"   /* custom backends: ccache_tier_ops */
#include "tier_redis.h" /* the Redis tier */

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
  uint64_t fallback_reads;  /**< hits here for keys whose first server is another */
  uint64_t fallback_writes; /**< writes here because the keys' earlier servers were down */
  uint64_t failovers;       /**< new primary addresses followed (Sentinel; 0 otherwise) */
  /** Compile leases held across a switch of primary (Sentinel) that were
   *  missing on the new primary and were taken there again by their renewal
   *  (a lease held by another there is lost instead: leases_lost).  Since
   *  0.2, appended after failovers. */
  uint64_t leases_retaken;
} ccache_tier_health;

/** The size of 0.2.0's ccache_tier_health (every field up to failovers), the
 *  first layout: the smallest out->size ccache_tier_health_get() accepts.
 *  A field appended after it is not written when out->size ends before it. */
#define CCACHE_TIER_HEALTH_SIZE_V1 (offsetof(ccache_tier_health, failovers) + sizeof(uint64_t))

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

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_TIER_H */
