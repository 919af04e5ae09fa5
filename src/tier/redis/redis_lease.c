/*
 * redis_lease.c - the Redis tier's compile lease: SET NX PX to take it, a
 * script to renew it and one to release it, each acting only while the
 * stored value is still our token; the lease peek (whose value the
 * holder stored); and the time to live left on a busy lease (PTTL), for a
 * cache without keys (tier_lease.c).  See tier_redis.c for what is sent and why.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <hiredis/hiredis.h>

#include "tier/redis/tier_redis.h"

/* Each script acts only while the lease's first 32 bytes are our token
 * (ARGV[1]).  The token alone, not the whole value: a signed lease's value
 * changes at each renewal, and a renewal whose reply was lost (timed out
 * after sending) may have changed it without our knowing; the token stays
 * for the lease's life.  GETRANGE reads those 32 bytes only, whatever size
 * a planted value has.
 *
 * The renewals' ARGV[4] = "1" after the lease's server switched primary
 * since the lease was taken or last renewed (Sentinel): a lease missing
 * there (not yet replicated when the replica was promoted) is taken again
 * with SET NX and our whole value (ARGV[3]), and the script answers 2
 * (counted: leases_retaken).  Someone else's lease is never touched: 0, the
 * lease is lost.  Without a switch a missing lease stays lost (it lapsed:
 * another process may have compiled meanwhile). */
static const char RENEW_SCRIPT[] =
    "local v = redis.call('getrange', KEYS[1], 0, 31) "
    "if v == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end "
    "if v == '' and ARGV[4] == '1' and "
    "redis.call('set', KEYS[1], ARGV[3], 'NX', 'PX', ARGV[2]) then return 2 end return 0";
static const char RELEASE_SCRIPT[] =
    "if redis.call('getrange', KEYS[1], 0, 31) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) end return 0";
/* A signed lease's renewal replaces its value (a fresh token). */
static const char RENEW_VALUE_SCRIPT[] =
    "local v = redis.call('getrange', KEYS[1], 0, 31) "
    "if v == ARGV[1] then redis.call('set', KEYS[1], ARGV[3], 'PX', ARGV[2]) return 1 end "
    "if v == '' and ARGV[4] == '1' and "
    "redis.call('set', KEYS[1], ARGV[3], 'NX', 'PX', ARGV[2]) then return 2 end return 0";

/* The core's part of a lease value (a signed token), at most. */
#define LEASE_VALUE_MAX 160u

typedef struct rlock {
  size_t server;
  char token[33];
  /* The whole value stored: the token's 32 hex digits, then the core's
   * value (lock_value, renew_value), if any. */
  size_t vlen;
  unsigned char val[32 + LEASE_VALUE_MAX];
  bool renew_failed; /* the last renewal failed (no answer): lost if unlocked so */
  uint64_t epoch;    /* the server's failovers count when last taken or renewed */
  size_t klen;
  char key[];
} rlock;

const char *ccache__redis_lock_token(const void *lock) { return ((const rlock *)lock)->token; }

static int new_token(char out[33]) {
  unsigned char raw[16];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    got += (size_t)n;
  }
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof raw; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 15];
  }
  out[32] = '\0';
  return 0;
}

static int op_lock_value(void *state, ccache_key pkey, const void *value, size_t vlen,
                         void **lock) {
  ccache__redis *r = state;
  char key[CCACHE__REDIS_KEY_MAX], px[24];
  if (vlen > LEASE_VALUE_MAX) return CCACHE_EINVAL;
  size_t klen = ccache__redis_key(r, pkey, 1, key, sizeof key);
  rlock *l = malloc(sizeof *l + klen + 1);
  if (!l) return CCACHE_ENOMEM;
  if (new_token(l->token) != 0) {
    free(l);
    return CCACHE_EIO;
  }
  memcpy(l->val, l->token, 32);
  if (vlen) memcpy(l->val + 32, value, vlen);
  l->vlen = 32 + vlen;
  l->renew_failed = false;
  l->klen = klen;
  memcpy(l->key, key, klen + 1);
  const char *argv[6] = {"SET", l->key, (const char *)l->val, "NX", "PX", px};
  const size_t lens[6] = {3, klen, l->vlen, 2, 2, ccache__redis_udec(px, sizeof px, r->lease_ms)};
  /* The lease lives on the key's first live server, like its entry. */
  uint8_t order[CCACHE__REDIS_MAX_SERVERS];
  ccache__rendezvous_order(r->pool.servers, r->pool.n, pkey, order);
  redisReply *rep = NULL;
  int rc = CCACHE_EIO;
  for (size_t k = 0; k < r->pool.n; k++) {
    l->server = order[k];
    /* Before the SET: a switch it races with makes the first renewal check. */
    l->epoch = atomic_load_explicit(&r->pool.servers[l->server].failovers, memory_order_relaxed);
    rc = ccache__redis_try_server(r, l->server, 6, argv, lens, &rep);
    if (rc != CCACHE__REDIS_SKIPPED) break;
    rc = CCACHE_EIO;
  }
  if (rc == CCACHE_OK) {
    ccache__rserver *s = &r->pool.servers[l->server];
    if (rep->type == REDIS_REPLY_STATUS) {
      ccache__rreply_free(rep);
      ccache__rpool_note_write_ok(&r->pool, l->server);
      atomic_fetch_add_explicit(&s->leases_held, 1, memory_order_relaxed);
      if (l->server != order[0]) ccache__redis_note(&s->fallback_writes);
      *lock = l;
      return CCACHE_OK;
    }
    if (rep->type == REDIS_REPLY_NIL) {
      ccache__rreply_free(rep);
      atomic_fetch_add_explicit(&s->lock_waits, 1, memory_order_relaxed);
      rc = CCACHE_EBUSY;
    } else {
      rc = ccache__redis_unexpected(r, l->server, "SET NX", rep);
    }
  }
  free(l);
  return rc;
}

static int op_lock(void *state, ccache_key pkey, void **lock) {
  return op_lock_value(state, pkey, NULL, 0, lock);
}

/* Renew, replacing the core's part of the value when value is set. */
static int renew_with(ccache__redis *r, rlock *l, const void *value, size_t vlen) {
  char px[24];
  unsigned char nv[32 + LEASE_VALUE_MAX];
  if (value) {
    if (vlen > LEASE_VALUE_MAX) return CCACHE_EINVAL;
    memcpy(nv, l->token, 32);
    memcpy(nv + 32, value, vlen);
  }
  ccache__rserver *s = &r->pool.servers[l->server];
  /* Before sending: a switch seen later is re-checked at the next renewal. */
  uint64_t epoch = atomic_load_explicit(&s->failovers, memory_order_relaxed);
  const char *retake = epoch != l->epoch ? "1" : "0";
  const char *argv[8] = {
      "EVAL", value ? RENEW_VALUE_SCRIPT : RENEW_SCRIPT,       "1",   l->key, l->token,
      px,     value ? (const char *)nv : (const char *)l->val, retake};
  const size_t lens[8] = {4,
                          value ? sizeof RENEW_VALUE_SCRIPT - 1 : sizeof RENEW_SCRIPT - 1,
                          1,
                          l->klen,
                          32,
                          ccache__redis_udec(px, sizeof px, r->lease_ms),
                          value ? 32 + vlen : l->vlen,
                          1};
  redisReply *rep = NULL;
  int rc = ccache__rpool_command(&r->pool, l->server, 1, 8, argv, lens, &rep);
  if (rc == CCACHE_OK && value && rep->type == REDIS_REPLY_INTEGER &&
      (rep->integer == 1 || rep->integer == 2)) {
    memcpy(l->val, nv, 32 + vlen);
    l->vlen = 32 + vlen;
  }
  if (rc == CCACHE_OK) {
    if (rep->type != REDIS_REPLY_INTEGER) {
      rc = ccache__redis_unexpected(r, l->server, "EVAL renew", rep);
    } else {
      /* 1: extended; 2: re-taken on a new primary; 0: no longer ours */
      if (rep->integer == 2) atomic_fetch_add_explicit(&s->leases_retaken, 1, memory_order_relaxed);
      rc = rep->integer == 1 || rep->integer == 2 ? CCACHE_OK : CCACHE_EBUSY;
      if (rc == CCACHE_OK) l->epoch = epoch;
      ccache__rreply_free(rep);
    }
  }
  /* No answer: the core retries while the lease has time left, and an
   * unlock with this still set counts the lease lost; "no longer ours" is
   * final. */
  l->renew_failed = rc != CCACHE_OK && rc != CCACHE_EBUSY;
  if (rc == CCACHE_EBUSY) atomic_fetch_add_explicit(&s->leases_lost, 1, memory_order_relaxed);
  return rc;
}

static int op_renew(void *state, void *lock) { return renew_with(state, lock, NULL, 0); }

static int op_renew_value(void *state, void *lock, const void *value, size_t vlen) {
  return renew_with(state, lock, value, vlen);
}

/* The core's part of whoever holds pkey's lease: GETRANGE on the key's first
 * live server (where a holder that agrees which servers are down put it). */
static int op_lease_peek(void *state, ccache_key pkey, void *buf, size_t cap, size_t *len) {
  ccache__redis *r = state;
  char key[CCACHE__REDIS_KEY_MAX];
  size_t klen = ccache__redis_key(r, pkey, 1, key, sizeof key);
  /* Untrusted: at most the token and the largest value a holder stores,
   * plus one byte to know it is longer (a planted 512 MiB value costs the
   * same 193 bytes). */
  char end[24];
  const char *argv[4] = {"GETRANGE", key, "0", end};
  const size_t lens[4] = {8, klen, 1, ccache__redis_udec(end, sizeof end, 32 + LEASE_VALUE_MAX)};
  uint8_t order[CCACHE__REDIS_MAX_SERVERS];
  ccache__rendezvous_order(r->pool.servers, r->pool.n, pkey, order);
  redisReply *rep = NULL;
  int rc = CCACHE_EIO;
  size_t at = 0;
  for (size_t k = 0; k < r->pool.n; k++) {
    at = order[k];
    rc = ccache__redis_try_server(r, at, 4, argv, lens, &rep);
    if (rc != CCACHE__REDIS_SKIPPED) break;
    rc = CCACHE_EIO;
  }
  if (rc != CCACHE_OK) return rc;
  if (rep->type == REDIS_REPLY_STRING && rep->len == 0) { /* no lease ("" for no key) */
    rc = CCACHE_MISS;
  } else if (rep->type == REDIS_REPLY_STRING) {
    /* Not ours to judge: anything but 32 digits and a value of at most
     * LEASE_VALUE_MAX bytes is a holder with no value (length 0). */
    size_t n = rep->len > 32 && rep->len <= 32 + LEASE_VALUE_MAX ? (size_t)rep->len - 32 : 0;
    if (n) memcpy(buf, rep->str + 32, n < cap ? n : cap);
    *len = n;
  } else {
    return ccache__redis_unexpected(r, at, "GETRANGE lease", rep);
  }
  ccache__rreply_free(rep);
  return rc;
}

int ccache__redis_lease_ttl(void *state, ccache_key pkey, int64_t *ms) {
  ccache__redis *r = state;
  char key[CCACHE__REDIS_KEY_MAX];
  size_t klen = ccache__redis_key(r, pkey, 1, key, sizeof key);
  const char *argv[2] = {"PTTL", key};
  const size_t lens[2] = {4, klen};
  uint8_t order[CCACHE__REDIS_MAX_SERVERS];
  ccache__rendezvous_order(r->pool.servers, r->pool.n, pkey, order);
  redisReply *rep = NULL;
  int rc = CCACHE_EIO;
  size_t at = 0;
  for (size_t k = 0; k < r->pool.n; k++) { /* where lock() found it busy */
    at = order[k];
    rc = ccache__redis_try_server(r, at, 2, argv, lens, &rep);
    if (rc != CCACHE__REDIS_SKIPPED) break;
    rc = CCACHE_EIO;
  }
  if (rc != CCACHE_OK) return rc;
  if (rep->type != REDIS_REPLY_INTEGER) return ccache__redis_unexpected(r, at, "PTTL", rep);
  *ms = (int64_t)rep->integer;
  ccache__rreply_free(rep);
  return CCACHE_OK;
}

static uint32_t op_renew_group(void *state, const void *lock) {
  (void)state;
  return (uint32_t)((const rlock *)lock)->server;
}

static void op_unlock(void *state, void *lock) {
  ccache__redis *r = state;
  rlock *l = lock;
  if (!l) return;
  const char *argv[5] = {"EVAL", RELEASE_SCRIPT, "1", l->key, l->token};
  const size_t lens[5] = {4, sizeof RELEASE_SCRIPT - 1, 1, l->klen, 32};
  /* The core gave up on it after failed renewals: count it lost here. */
  if (l->renew_failed)
    atomic_fetch_add_explicit(&r->pool.servers[l->server].leases_lost, 1, memory_order_relaxed);
  redisReply *rep = NULL;
  /* A failure leaves the lease to expire by itself (lease_ms). */
  if (ccache__rpool_command(&r->pool, l->server, 0, 5, argv, lens, &rep) == CCACHE_OK)
    ccache__rreply_free(rep);
  atomic_fetch_sub_explicit(&r->pool.servers[l->server].leases_held, 1, memory_order_relaxed);
  free(l);
}

void ccache__redis_lease_ops(ccache_tier_ops *ops) {
  ops->lock = op_lock;
  ops->renew = op_renew;
  ops->unlock = op_unlock;
  ops->renew_group = op_renew_group;
  ops->lock_value = op_lock_value;
  ops->renew_value = op_renew_value;
  ops->lease_peek = op_lease_peek;
}
