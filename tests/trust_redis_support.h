/*
 * trust_redis_support.h - helpers shared by test_trust_redis_edges*.c over
 * the private servers of redis_tier_support.h: the signer's key pair in a
 * scratch directory and the fixture that stops the servers, the documented
 * Redis keys of an entry and its lease, caches over a Redis tier with a
 * writer's or a reader's trust, and raw GET and SET of a value.
 */
#ifndef CCACHE_TEST_TRUST_REDIS_SUPPORT_H
#define CCACHE_TEST_TRUST_REDIS_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "redis_tier_support.h"
#include "tier/redis/tier_redis.h" /* ccache__redis: saw_first_fail */
#include "trust_support.h"

#define TR_TAG     "edges-redis-tag"
#define TR_PAYLOAD 512

/* Skips the test without libsodium, then as t_need_redis. */
void tr_need(void);
/* cmocka setup: key pairs signer and other in a scratch directory (when
 * libsodium is there); teardown: t_stop_all, the directory removed. */
int tr_redis_setup(void **state);
int tr_redis_teardown(void **state);

/* The documented Redis key of key k's entry (lease: its lease key) under
 * prefix and runtime tag. */
void tr_rkey(const char *prefix, const char *tag, ccache_key k, int lease, char *out, size_t n);

typedef struct tr_rcache {
  ccache *c;
  t_codec tc;
  t_ctx ctx;
  ccache__redis *r; /* the tier's state, for saw_first_fail */
} tr_rcache;

/* A cache over a Redis tier on servers (prefix; tag; t: trust, NULL for
 * unsigned by name); t is freed. */
void tr_open_as(tr_rcache *rc, const char *servers, const char *prefix, const char *tag,
                ccache_trust *t, uint64_t lease_ms, uint64_t wait_ms);
/* tr_open_as with prefix "ccache", TR_TAG, lease_ms 10000, wait_ms 3000. */
void tr_open_c(tr_rcache *rc, const char *servers, ccache_trust *t);

/* Trust signing with "signer"; trust in "signer" alone. */
ccache_trust *tr_writer_trust(void);
ccache_trust *tr_reader_trust(void);

/* The value of key on s (caller frees; NULL if absent), its length in *len. */
unsigned char *tr_get_value(t_redis_server *s, const char *key, size_t *len);
void tr_set_value(t_redis_server *s, const char *key, const void *v, size_t len);

#endif
