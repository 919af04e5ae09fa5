/**
 * @file ccache/tier_disk.h
 * @brief The directory tier: its options and ccache_tier_disk().
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest,
 * as does ccache/tier.h; it may also be included alone.
 */
#ifndef CCACHE_CCACHE_TIER_DISK_H
#define CCACHE_CCACHE_TIER_DISK_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/** @name The directory tier
 * @{ */

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
                                   plus one entry: a write puts its bytes into the total
                                   before it publishes, and over that line waits up to
                                   io_lock_ms for the cleaner, then is withheld (a tier
                                   error), as it is when the size file's lock cannot be had
                                   within io_lock_ms.  Since 0.2 */
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

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_TIER_DISK_H */
