/*
 * tier_redis.h - the Redis tier backend's state, shared by its files:
 * tier_redis.c (keys, entries, the fallback walk), redis_lease.c (the
 * compile lease) and tier_redis_open.c (creation, health, close).
 */
#ifndef CCACHE_TIER_REDIS_H
#define CCACHE_TIER_REDIS_H

#include "tier/redis/redis.h"

#define CCACHE__REDIS_KEY_MAX (2 * CCACHE__REDIS_MAX_PREFIX + 64)

/* A GET reply handed to the core as a blob (its string, uncopied) until
 * free_blob gives it back. */
typedef struct ccache__rlent {
  struct ccache__rlent *next;
  struct redisReply *rep;
  size_t copy_to; /* a fallback hit: the key's first live server, to be given
                     the entry once the core accepts it (pool.n: none) */
} ccache__rlent;

struct ccache__redis {
  ccache__rpool pool;
  ccache__mutex lent_mu;
  ccache__rlent *lent; /* under lent_mu: a few at most (one per concurrent miss) */
  char *prefix;
  char kprefix[2 * CCACHE__REDIS_MAX_PREFIX + 4]; /* "<prefix>:<ns>:" (set by attach) */
  size_t kprefix_len;
  uint64_t entry_ttl_ms, lease_ms;
};
/* The key prefix "<prefix>:<ns with '/' as ':'>:" (ns NULL: none). */
void ccache__redis_set_kprefix(ccache__redis *r, const char *ns);
/* A decimal for a command argument: its length. */
size_t ccache__redis_udec(char *buf, size_t len, uint64_t v);
/* Records an unexpected reply of cmd's from server as an error, frees rep:
 * CCACHE_EIO. */
int ccache__redis_unexpected(ccache__redis *r, size_t server, const char *cmd,
                             struct redisReply *rep);
/* ccache__redis_try_server: the server is down, go on to the next. */
#define CCACHE__REDIS_SKIPPED 1000
/* argv on server i: CCACHE__REDIS_SKIPPED if i is down (refused at once
 * inside its backoff window, or failed on this command: connection, I/O,
 * timeout); otherwise what the command returned (an error reply is an
 * answer: the server is up, and its keys stay with it). */
int ccache__redis_try_server(ccache__redis *r, size_t i, int argc, const char **argv,
                             const size_t *lens, struct redisReply **rep);
static inline void ccache__redis_note(_Atomic uint64_t *counter) {
  atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}
/* The ops of entries (attach, get, free_blob, put, remove_if) and of the
 * lease (lock, renew, unlock, renew_group, lock_value, renew_value,
 * lease_peek). */
void ccache__redis_entry_ops(ccache_tier_ops *ops);
void ccache__redis_lease_ops(ccache_tier_ops *ops);
/* ccache_tier::get_bounded and ::get_poll. */
int ccache__redis_get_bounded(void *state, ccache_key pkey, uint64_t max_len, void **blob,
                              size_t *len);
/* ccache_tier::accepted: the lookup's first round may ask for this many
 * bytes from now on (ccache__rprefix_seen); and, may_copy, copy a fallback
 * hit the core verified to the key's first live server (once; a failure is
 * no matter). */
void ccache__redis_accepted(void *state, ccache_key pkey, const void *blob, size_t len,
                            int may_copy);
/* ccache_tier::lease_ttl: PTTL of pkey's lease on its first live server. */
int ccache__redis_lease_ttl(void *state, ccache_key pkey, int64_t *ms);
int ccache__redis_get_poll(void *state, ccache_key pkey, uint64_t max_len, void **blob,
                           size_t *len);

#endif
