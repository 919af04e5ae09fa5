/**
 * @file ccache/tier_redis.h
 * @brief The Redis tier: its options and ccache_tier_redis().
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest,
 * as does ccache/tier.h; it may also be included alone.
 */
#ifndef CCACHE_CCACHE_TIER_REDIS_H
#define CCACHE_CCACHE_TIER_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/** @name The Redis tier
 * @{ */

/**
 * Options of the Redis tier, shared by a fleet (ccache_redis_options_init(),
 * then set servers; needs hiredis, else ccache_tier_redis() is ENOTSUP).
 * Keys live under `<prefix>:v<format>:<runtime-tag hash>:`; values are the
 * core's entries.  One compile per fleet (a renewed `SET NX PX` lease); keys
 * sharded by rendezvous hashing, moving on while a server is down; a miss
 * reads only the key's first live server (and the servers after it only if
 * this process saw that one fail in the last 10 minutes); a waiter polls
 * only the key's first live server.  Commands, ACL, guarantees,
 * Sentinel, timeouts: docs/tiers.md, "The Redis tier".
 *  - Faults (absent, killed, stopped or slow servers, error replies) fail
 *    only the op (tier_errors +1), never a fetch; ccache_tier_health_get()
 *    reports each server.
 *  - Sockets are close-on-exec from their creation; SIGPIPE is blocked in
 *    the calling thread around each command and a raised one consumed: the
 *    process's signal disposition is never changed.
 *  - A pooled connection the server closed while idle (its `timeout`, a
 *    proxy's idle limit) is dropped before use and the command sent on a
 *    fresh one: no error.  One unused for idle_close_ms is closed by the
 *    tier itself.  A renewal that gets no answer is retried while
 *    the lease holds (ccache_tier_ops::renew); the lease's scripts compare
 *    its token alone, so a renewal whose reply was lost leaves it ours.
 *  - Lease values read from Redis are bounded (193 bytes), and so is every
 *    lookup (STRLEN + GETRANGE, the reader's tier_max_entry_bytes).
 *  - A cache without keys honours a lease with no expiry, or with more
 *    than lease_ms + 2 s left (PTTL, asked once per wait), for lease_ms +
 *    2 s at most: no holder sets one, a squatter does.  With keys only a
 *    signed, recent token for this namespace is waited for.
 *  - Fallback: a hit found past the key's first live server is copied to
 *    that server once the core has verified it (checksum, key, tag and,
 *    with keys, signature) and decoded it; never by a reader (keys without
 *    a signing key), which writes to no shared tier.
 *  - Namespace: with keys, signatures and lease tokens bind the prefix
 *    (ccache_tier_ops::scope: "redis:<prefix>") with the runtime tag, key
 *    mode and format, so a signed entry or lease copied to another prefix
 *    is rejected there.
 *  - Sentinel: each address a Sentinel answers is checked with ROLE (a
 *    stale Sentinel is passed over); with no Sentinel answering, the last
 *    primary is kept while ROLE says master.  A server whose writes are
 *    refused (READONLY, NOPERM, OOM) reports CCACHE_TIER_DEGRADED.
 *  - Sentinel, a switch of primary (SENTINEL FAILOVER): followed without
 *    waiting for an error.  One library thread per tier (started by the
 *    first connect, joined by close, never run in a fork child) subscribes
 *    to +switch-master on one Sentinel and asks again at once when a
 *    message names a primary of the tier; it also re-asks every 60 s (every
 *    5 s while no Sentinel takes the subscription).  So a switch is
 *    followed when the Sentinel announces it, at worst 60 s (5 s) and one
 *    ask later.  A lease held across the switch is renewed on the new
 *    primary, taken again there if missing (health: leases_retaken) or, if
 *    another holds it there, lost (leases_lost); later writes go to the new
 *    primary.
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
  /** A pooled or renewal connection unused this long is closed (by a library
   *  thread of the tier), ms: 1 .. 2^50 (default 20000), or CCACHE_UNBOUNDED
   *  (kept until the tier is freed).  A process so holds connections only
   *  to servers it used recently.  Since 0.2. */
  uint64_t idle_close_ms;
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

#endif /* CCACHE_CCACHE_TIER_REDIS_H */
