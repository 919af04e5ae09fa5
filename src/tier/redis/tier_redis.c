/*
 * tier_redis.c - the Redis tier backend: one Redis (or several, by
 * rendezvous hashing) shared by every process of a fleet.
 *
 * What is sent (all binary-safe, through hiredis' argv interface):
 *   entry:  EVAL GET_BOUNDED_SCRIPT 1 <k> <max bytes>;  SET <k> <blob> [PX entry_ttl_ms];
 *           EVAL REMOVE_IF_SCRIPT 1 <k> <the value read>
 *   lease:  SET <k>:lease <token> NX PX lease_ms
 *           EVAL RENEW_SCRIPT 1 <k>:lease <token> lease_ms
 *           EVAL RELEASE_SCRIPT 1 <k>:lease <token>
 *   where <k> = <prefix>:<namespace with '/' as ':'>:<32 hex digits of the
 *   program key, hi then lo>, e.g. "ccache:v1:3f2a9c0d11e2b4a7:00ab...", the
 *   blob is the core's checksummed entry, and the token 16 random bytes from
 *   getrandom() in hex.  Connections may also send AUTH [user] password.
 *
 * The lease: SET NX PX takes it only if nobody holds it; the two scripts
 * extend or delete it only while it still holds our token, so a holder whose
 * lease expired (and was taken by another process) can neither extend nor
 * delete the new holder's lease.  Renewal runs on the server's dedicated
 * renewal connection (redis_conn.c), and each server is its own renewal
 * group (ops.renew_group), so the core renews the leases of each server on a
 * thread of its own.  Scripts are sent with EVAL (Redis caches them by hash;
 * there is no NOSCRIPT case to handle after a restart).
 *
 * A bad entry is deleted only while it is still the value read: the
 * remove-if script compares the whole value inside the server, so an entry
 * another process stored after the read stays.  (Comparing the length and
 * the 16-byte checksum trailer alone is not enough: an entry damaged in its
 * body keeps the trailer of the intact entry it was, and a verbatim copy of
 * that intact entry, filled in from a lower tier, has the same one.  Bad
 * entries are rare, so sending one back once costs nothing that matters.)
 *
 * Fallback: every op walks the key's rendezvous order, passing over servers
 * that are down (try_server); entries and leases go to the first server
 * that answers, lookups read on past a miss and copy a later hit back to
 * that first server (see the header's "Fallback" and docs/design.md).  The
 * polls of a process waiting on a lease read that first server alone
 * (op_get_poll): the holder publishes nowhere else.
 *
 * Health (ops.health): one part per server, from the pool's per-server
 * state and the lease counts kept here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <hiredis/hiredis.h>

#include "base/detail.h"
#include "tier/redis/redis.h"

static const char RENEW_SCRIPT[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0";
static const char RELEASE_SCRIPT[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) end return 0";
/* The lookup: the value, or (an integer reply) its length when that is over
 * ARGV[1], so an entry over the reader's bound never crosses the network
 * and hiredis never allocates it.  A missing key: STRLEN 0, GET nil. */
static const char GET_BOUNDED_SCRIPT[] =
    "-- GET bounded\n"
    "local n = redis.call('strlen', KEYS[1]) "
    "if n > tonumber(ARGV[1]) then return n end "
    "return redis.call('get', KEYS[1])";
/* A signed lease's renewal replaces its value (a fresh token). */
static const char RENEW_VALUE_SCRIPT[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "redis.call('set', KEYS[1], ARGV[3], 'PX', ARGV[2]) return 1 end return 0";
static const char REMOVE_IF_SCRIPT[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) end return 0";

#define KEY_MAX (2 * CCACHE__REDIS_MAX_PREFIX + 64)

/* A GET reply handed to the core as a blob (its string, uncopied) until
 * free_blob gives it back. */
typedef struct lent_reply {
  struct lent_reply *next;
  redisReply *rep;
} lent_reply;

struct ccache__redis {
  ccache__rpool pool;
  ccache__mutex lent_mu;
  lent_reply *lent; /* under lent_mu: a few at most (one per concurrent miss) */
  char *prefix;
  char kprefix[2 * CCACHE__REDIS_MAX_PREFIX + 4]; /* "<prefix>:<ns>:" (set by attach) */
  size_t kprefix_len;
  uint64_t entry_ttl_ms, lease_ms;
};

/* A held lease. */
/* The core's part of a lease value (a signed token), at most. */
#define LEASE_VALUE_MAX 160u

typedef struct rlock {
  size_t server;
  char token[33];
  /* The whole value stored: the token's 32 hex digits, then the core's
   * value (lock_value, renew_value), if any. */
  size_t vlen;
  unsigned char val[32 + LEASE_VALUE_MAX];
  size_t klen;
  char key[];
} rlock;

/* ------------------------------------------------------------------ keys */
static void set_kprefix(ccache__redis *r, const char *ns) {
  size_t n = (size_t)snprintf(r->kprefix, sizeof r->kprefix, "%s:", r->prefix);
  if (ns && *ns) {
    for (const char *p = ns; *p; p++) r->kprefix[n++] = *p == '/' ? ':' : *p;
    r->kprefix[n++] = ':';
    r->kprefix[n] = '\0';
  }
  r->kprefix_len = n;
}

size_t ccache__redis_key(const ccache__redis *r, ccache_key pkey, int lease, char *buf,
                         size_t len) {
  size_t need = r->kprefix_len + 32 + (lease ? 6 : 0);
  if (need + 1 > len) return 0;
  memcpy(buf, r->kprefix, r->kprefix_len);
  snprintf(buf + r->kprefix_len, len - r->kprefix_len, "%016llx%016llx%s",
           (unsigned long long)pkey.hi, (unsigned long long)pkey.lo, lease ? ":lease" : "");
  return need;
}

size_t ccache__redis_server_of(const ccache__redis *r, ccache_key pkey) {
  return ccache__rendezvous(r->pool.servers, r->pool.n, pkey);
}

ccache__rpool *ccache__redis_pool(ccache__redis *r) { return &r->pool; }

void ccache__redis_set_hook(ccache__redis *r, ccache__rhook_fn fn, void *arg) {
  r->pool.hook = fn;
  r->pool.hook_arg = arg;
}

const char *ccache__redis_lock_token(const void *lock) { return ((const rlock *)lock)->token; }

/* A decimal for a command argument. */
static size_t udec(char *buf, size_t len, uint64_t v) {
  return (size_t)snprintf(buf, len, "%llu", (unsigned long long)v);
}

static int unexpected(ccache__redis *r, size_t server, const char *cmd, redisReply *rep) {
  char line[160];
  snprintf(line, sizeof line, "redis %s: %s: unexpected reply type %d",
           r->pool.servers[server].name, cmd, rep->type);
  ccache__rpool_note_error(&r->pool, server, line);
  ccache__rreply_free(rep);
  return CCACHE_EIO;
}

/* ------------------------------------------------------------ fallback */
#define SKIPPED 1000 /* try_server: the server is down, go on to the next */

/* argv on server i: SKIPPED if i is down (refused at once inside its
 * backoff window, counted as such, or failed on this command: connection,
 * I/O, timeout); otherwise what the command returned (an error reply is an
 * answer: the server is up, and its keys stay with it). */
static int try_server(ccache__redis *r, size_t i, int argc, const char **argv, const size_t *lens,
                      redisReply **rep) {
  int rc = ccache__rpool_command(&r->pool, i, 0, argc, argv, lens, rep);
  if (rc == CCACHE_EIO && ccache__rpool_down(&r->pool, i)) return SKIPPED;
  return rc;
}

static void note(_Atomic uint64_t *counter) {
  atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

/* SET <k> <blob> [PX ttl] on the first live server of order[] (a write
 * goes where the lease goes).  *at: the server written, or n. */
static int put_at(ccache__redis *r, const uint8_t *order, size_t n, const char *key, size_t klen,
                  const void *blob, size_t len, size_t *at) {
  char ttl[24];
  const char *argv[5] = {"SET", key, blob ? (const char *)blob : "", "PX", ttl};
  size_t lens[5] = {3, klen, len, 2, 0};
  int argc = 3;
  if (r->entry_ttl_ms != CCACHE_UNBOUNDED) {
    lens[4] = udec(ttl, sizeof ttl, r->entry_ttl_ms);
    argc = 5;
  }
  *at = r->pool.n;
  for (size_t k = 0; k < n; k++) {
    size_t i = order[k];
    redisReply *rep = NULL;
    int rc = try_server(r, i, argc, argv, lens, &rep);
    if (rc == SKIPPED) continue;
    if (rc != CCACHE_OK) return rc;
    *at = i;
    if (rep->type != REDIS_REPLY_STATUS) return unexpected(r, i, "SET", rep);
    ccache__rreply_free(rep);
    return CCACHE_OK;
  }
  return CCACHE_EIO; /* every server down */
}

/* ------------------------------------------------------------------- ops */
static int op_attach(void *state, const char *ns) {
  ccache__redis *r = state;
  if (ns && strlen(ns) > CCACHE__REDIS_MAX_PREFIX) return CCACHE_EINVAL;
  set_kprefix(r, ns);
  return CCACHE_OK;
}

/* Read in rendezvous order, skipping servers that are down: the first hit
 * wins.  A hit on a server after the first live one (an entry written while
 * the earlier servers were down) is copied to that first live server, where
 * the key's writes and lease now go.  home_only: the first live server's
 * answer is the answer (a waiting poll: the lease holder publishes there). */
static int get_from(ccache__redis *r, ccache_key pkey, uint64_t max_len, bool home_only,
                    void **blob, size_t *len) {
  char key[KEY_MAX], max[24];
  size_t klen = ccache__redis_key(r, pkey, 0, key, sizeof key);
  uint8_t order[CCACHE__REDIS_MAX_SERVERS];
  ccache__rendezvous_order(r->pool.servers, r->pool.n, pkey, order);
  const char *argv[5] = {"EVAL", GET_BOUNDED_SCRIPT, "1", key, max};
  const size_t lens[5] = {4, sizeof GET_BOUNDED_SCRIPT - 1, 1, klen,
                          udec(max, sizeof max, max_len)};
  redisReply *rep = NULL;
  size_t k, home = r->pool.n;
  int rc = CCACHE_EIO;
  for (k = 0; k < r->pool.n; k++) {
    /* Past the key's live server a lookup only looks for fallback copies:
     * a server in backoff is passed over without counting a refusal. */
    if (home != r->pool.n && ccache__rpool_refusing(&r->pool, order[k])) continue;
    int got = try_server(r, order[k], 5, argv, lens, &rep);
    if (got == SKIPPED) continue;                        /* rc stays: MISS if a server answered */
    if (got != CCACHE_OK && home != r->pool.n) continue; /* a fallback's error: still a miss */
    rc = got;
    if (rc != CCACHE_OK) return rc;
    if (home == r->pool.n) home = order[k];
    if (rep->type == REDIS_REPLY_STRING) break;
    if (rep->type == REDIS_REPLY_INTEGER) { /* over the bound: its length, not its bytes */
      ccache__rreply_free(rep);
      return CCACHE__TIER_OVERSIZE;
    }
    if (rep->type != REDIS_REPLY_NIL) return unexpected(r, order[k], "EVAL get", rep);
    ccache__rreply_free(rep);
    rep = NULL;
    rc = CCACHE_MISS;
    if (home_only) break;
  }
  if (!rep) return rc; /* MISS if any server answered, EIO if none did */
  size_t at = order[k];
  if (k > 0) note(&r->pool.servers[at].fallback_reads);
  if (home != at) { /* fill the key's first live server; a failure is no matter */
    uint8_t only[1] = {(uint8_t)home};
    size_t wrote;
    (void)put_at(r, only, 1, key, klen, rep->str, rep->len, &wrote);
  }
  /* The reply's own string is the blob: no copy of a possibly large entry
   * (a copy doubled the cost of a 1 MiB fetch, mostly in page faults). */
  lent_reply *l = malloc(sizeof *l);
  if (!l) {
    ccache__rreply_free(rep);
    return CCACHE_ENOMEM;
  }
  l->rep = rep;
  ccache__lock(&r->lent_mu);
  l->next = r->lent;
  r->lent = l;
  ccache__unlock(&r->lent_mu);
  *blob = rep->str;
  *len = rep->len;
  return CCACHE_OK;
}

static int op_get_bounded(void *state, ccache_key pkey, uint64_t max_len, void **blob,
                          size_t *len) {
  return get_from(state, pkey, max_len, false, blob, len);
}

/* ccache_tier::get_poll: one command per poll, not one per live server. */
static int op_get_poll(void *state, ccache_key pkey, uint64_t max_len, void **blob, size_t *len) {
  return get_from(state, pkey, max_len, true, blob, len);
}

/* ops.get: bounded only by the format (Redis's own 512 MB cap is lower);
 * the core uses op_get_bounded (ccache_tier::get_bounded). */
static int op_get(void *state, ccache_key pkey, void **blob, size_t *len) {
  int rc = op_get_bounded(state, pkey, CCACHE__TIER_MAX_ENTRY, blob, len);
  return rc == CCACHE__TIER_OVERSIZE ? CCACHE_EIO : rc;
}

static void op_free_blob(void *state, void *blob, size_t len) {
  ccache__redis *r = state;
  (void)len;
  lent_reply *found = NULL;
  ccache__lock(&r->lent_mu);
  for (lent_reply **pp = &r->lent; *pp; pp = &(*pp)->next)
    if ((*pp)->rep->str == blob) {
      found = *pp;
      *pp = found->next;
      break;
    }
  ccache__unlock(&r->lent_mu);
  if (found) {
    ccache__rreply_free(found->rep);
    free(found);
  }
}

static int op_put(void *state, ccache_key pkey, const void *blob, size_t len) {
  ccache__redis *r = state;
  char key[KEY_MAX];
  size_t klen = ccache__redis_key(r, pkey, 0, key, sizeof key);
  uint8_t order[CCACHE__REDIS_MAX_SERVERS];
  ccache__rendezvous_order(r->pool.servers, r->pool.n, pkey, order);
  size_t at;
  int rc = put_at(r, order, r->pool.n, key, klen, blob, len, &at);
  if (rc == CCACHE_OK && at != order[0]) note(&r->pool.servers[at].fallback_writes);
  return rc;
}

/* On every live server: a copy may sit on a fallback as well as on the
 * first server. */
static int op_remove_if(void *state, ccache_key pkey, const void *blob, size_t len) {
  ccache__redis *r = state;
  char key[KEY_MAX];
  size_t klen = ccache__redis_key(r, pkey, 0, key, sizeof key);
  const char *argv[5] = {"EVAL", REMOVE_IF_SCRIPT, "1", key, blob ? (const char *)blob : ""};
  const size_t lens[5] = {4, sizeof REMOVE_IF_SCRIPT - 1, 1, klen, len};
  int out = CCACHE_EIO;
  for (size_t i = 0; i < r->pool.n; i++) {
    redisReply *rep = NULL;
    int rc = try_server(r, i, 5, argv, lens, &rep);
    if (rc == SKIPPED) continue;
    if (rc == CCACHE_OK && rep->type != REDIS_REPLY_INTEGER)
      rc = unexpected(r, i, "EVAL remove-if", rep);
    else if (rc == CCACHE_OK) {
      rc = rep->integer > 0 ? CCACHE_OK : CCACHE_MISS; /* 0: absent, or not the value read */
      ccache__rreply_free(rep);
    }
    if (rc == CCACHE_OK || (rc == CCACHE_MISS && out != CCACHE_OK)) out = rc;
  }
  return out;
}

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
  char key[KEY_MAX], px[24];
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
  l->klen = klen;
  memcpy(l->key, key, klen + 1);
  const char *argv[6] = {"SET", l->key, (const char *)l->val, "NX", "PX", px};
  const size_t lens[6] = {3, klen, l->vlen, 2, 2, udec(px, sizeof px, r->lease_ms)};
  /* The lease lives on the key's first live server, like its entry. */
  uint8_t order[CCACHE__REDIS_MAX_SERVERS];
  ccache__rendezvous_order(r->pool.servers, r->pool.n, pkey, order);
  redisReply *rep = NULL;
  int rc = CCACHE_EIO;
  for (size_t k = 0; k < r->pool.n; k++) {
    l->server = order[k];
    rc = try_server(r, l->server, 6, argv, lens, &rep);
    if (rc != SKIPPED) break;
    rc = CCACHE_EIO;
  }
  if (rc == CCACHE_OK) {
    ccache__rserver *s = &r->pool.servers[l->server];
    if (rep->type == REDIS_REPLY_STATUS) {
      ccache__rreply_free(rep);
      atomic_fetch_add_explicit(&s->leases_held, 1, memory_order_relaxed);
      if (l->server != order[0]) note(&s->fallback_writes);
      *lock = l;
      return CCACHE_OK;
    }
    if (rep->type == REDIS_REPLY_NIL) {
      ccache__rreply_free(rep);
      atomic_fetch_add_explicit(&s->lock_waits, 1, memory_order_relaxed);
      rc = CCACHE_EBUSY;
    } else {
      rc = unexpected(r, l->server, "SET NX", rep);
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
  const char *argv[7] = {"EVAL",
                         value ? RENEW_VALUE_SCRIPT : RENEW_SCRIPT,
                         "1",
                         l->key,
                         (const char *)l->val,
                         px,
                         (const char *)nv};
  const size_t lens[7] = {4,        value ? sizeof RENEW_VALUE_SCRIPT - 1 : sizeof RENEW_SCRIPT - 1,
                          1,        l->klen,
                          l->vlen,  udec(px, sizeof px, r->lease_ms),
                          32 + vlen};
  redisReply *rep = NULL;
  int rc = ccache__rpool_command(&r->pool, l->server, 1, value ? 7 : 6, argv, lens, &rep);
  if (rc == CCACHE_OK && value && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1) {
    memcpy(l->val, nv, 32 + vlen);
    l->vlen = 32 + vlen;
  }
  if (rc == CCACHE_OK) {
    if (rep->type != REDIS_REPLY_INTEGER) {
      rc = unexpected(r, l->server, "EVAL renew", rep);
    } else {
      rc = rep->integer == 1 ? CCACHE_OK : CCACHE_EBUSY; /* 0: no longer ours */
      ccache__rreply_free(rep);
    }
  }
  if (rc != CCACHE_OK)
    atomic_fetch_add_explicit(&r->pool.servers[l->server].leases_lost, 1, memory_order_relaxed);
  return rc;
}

static int op_renew(void *state, void *lock) { return renew_with(state, lock, NULL, 0); }

static int op_renew_value(void *state, void *lock, const void *value, size_t vlen) {
  return renew_with(state, lock, value, vlen);
}

/* The core's part of whoever holds pkey's lease: GET on the key's first
 * live server (where a holder that agrees which servers are down put it). */
static int op_lease_peek(void *state, ccache_key pkey, void *buf, size_t cap, size_t *len) {
  ccache__redis *r = state;
  char key[KEY_MAX];
  size_t klen = ccache__redis_key(r, pkey, 1, key, sizeof key);
  const char *argv[2] = {"GET", key};
  const size_t lens[2] = {3, klen};
  uint8_t order[CCACHE__REDIS_MAX_SERVERS];
  ccache__rendezvous_order(r->pool.servers, r->pool.n, pkey, order);
  redisReply *rep = NULL;
  int rc = CCACHE_EIO;
  size_t at = 0;
  for (size_t k = 0; k < r->pool.n; k++) {
    at = order[k];
    rc = try_server(r, at, 2, argv, lens, &rep);
    if (rc != SKIPPED) break;
    rc = CCACHE_EIO;
  }
  if (rc != CCACHE_OK) return rc;
  if (rep->type == REDIS_REPLY_NIL) {
    rc = CCACHE_MISS;
  } else if (rep->type == REDIS_REPLY_STRING) {
    /* Not ours to judge: anything but 32 digits and a value is a holder
     * with no value (length 0). */
    size_t n = rep->len > 32 ? (size_t)rep->len - 32 : 0;
    if (n) memcpy(buf, rep->str + 32, n < cap ? n : cap);
    *len = n;
  } else {
    return unexpected(r, at, "GET lease", rep);
  }
  ccache__rreply_free(rep);
  return rc;
}

static uint32_t op_renew_group(void *state, const void *lock) {
  (void)state;
  return (uint32_t)((const rlock *)lock)->server;
}

static int op_health(void *state, uint32_t part, ccache_tier_health *out) {
  ccache__redis *r = state;
  if (part >= r->pool.n) return CCACHE_MISS;
  ccache__rserver *s = &r->pool.servers[part];
  ccache__rserver_state st;
  ccache__rpool_server_state(&r->pool, part, &st);
  out->parts = (uint32_t)r->pool.n;
  if (s->sentinel) {
    ccache__lock(&s->mu);
    if (s->at_port)
      snprintf(out->where, sizeof out->where, "%.120s (%.120s:%d)", s->name, s->at_host,
               s->at_port);
    else
      snprintf(out->where, sizeof out->where, "%s", s->name);
    ccache__unlock(&s->mu);
  } else {
    snprintf(out->where, sizeof out->where, "%s", s->name);
  }
  if (out->status != CCACHE_TIER_DISABLED)
    out->status = st.failing ? CCACHE_TIER_DOWN : CCACHE_TIER_UP;
  out->backoff_ms = st.backoff_ms;
  out->backoff_left_ms = st.backoff_left_ms;
  out->errors = st.errors;
  snprintf(out->last_error, sizeof out->last_error, "%s", st.last_error);
  out->leases_held = atomic_load_explicit(&s->leases_held, memory_order_relaxed);
  out->leases_lost = atomic_load_explicit(&s->leases_lost, memory_order_relaxed);
  out->lock_waits = atomic_load_explicit(&s->lock_waits, memory_order_relaxed);
  out->fallback_reads = atomic_load_explicit(&s->fallback_reads, memory_order_relaxed);
  out->fallback_writes = atomic_load_explicit(&s->fallback_writes, memory_order_relaxed);
  out->failovers = atomic_load_explicit(&s->failovers, memory_order_relaxed);
  return CCACHE_OK;
}

static void op_unlock(void *state, void *lock) {
  ccache__redis *r = state;
  rlock *l = lock;
  if (!l) return;
  const char *argv[5] = {"EVAL", RELEASE_SCRIPT, "1", l->key, (const char *)l->val};
  const size_t lens[5] = {4, sizeof RELEASE_SCRIPT - 1, 1, l->klen, l->vlen};
  redisReply *rep = NULL;
  /* A failure leaves the lease to expire by itself (lease_ms). */
  if (ccache__rpool_command(&r->pool, l->server, 0, 5, argv, lens, &rep) == CCACHE_OK)
    ccache__rreply_free(rep);
  atomic_fetch_sub_explicit(&r->pool.servers[l->server].leases_held, 1, memory_order_relaxed);
  free(l);
}

static void op_close(void *state) {
  ccache__redis *r = state;
  if (!r) return;
  while (r->lent) { /* blobs never given back (a caller error): freed here */
    lent_reply *l = r->lent;
    r->lent = l->next;
    ccache__rreply_free(l->rep);
    free(l);
  }
  ccache__mutex_destroy(&r->lent_mu);
  ccache__rpool_destroy(&r->pool);
  free(r->prefix);
  free(r);
}

/* --------------------------------------------------------------- create */
static int check_options(const ccache_redis_options *o, char *why, size_t why_len) {
#define BAD(...) return snprintf(why, why_len, __VA_ARGS__), CCACHE_EINVAL
  if (o->size < sizeof *o) BAD("options.size %u: call ccache_redis_options_init()", o->size);
  if (o->prefix && (!*o->prefix || strlen(o->prefix) > CCACHE__REDIS_MAX_PREFIX))
    BAD("prefix must be 1..%d bytes", CCACHE__REDIS_MAX_PREFIX);
  if (o->user && !o->password) BAD("an ACL user needs a password");
  if (o->sentinel_user && !o->sentinel_password) BAD("a Sentinel ACL user needs a password");
  if (o->connect_timeout_ms == 0 || o->command_timeout_ms == 0)
    BAD("connect_timeout_ms and command_timeout_ms must be >= 1");
  if (o->entry_ttl_ms == 0) BAD("entry_ttl_ms must be >= 1 or CCACHE_UNBOUNDED");
  if (o->lease_ms < 3 || o->lease_ms > ((uint64_t)1 << 50)) BAD("lease_ms must be 3..2^50");
  if (o->poll_ms == 0 || o->poll_max_ms < o->poll_ms) BAD("want 1 <= poll_ms <= poll_max_ms");
  if (o->reconnect_min_ms == 0 || o->reconnect_max_ms < o->reconnect_min_ms)
    BAD("want 1 <= reconnect_min_ms <= reconnect_max_ms");
  return CCACHE_OK;
#undef BAD
}

int ccache__redis_new(const ccache_redis_options *o, ccache_tier_ops *ops, ccache__redis **out,
                      char *why, size_t why_len) {
  if (why_len) why[0] = '\0';
  if (!o || !ops || !out) return CCACHE_EINVAL;
  int rc = check_options(o, why, why_len);
  if (rc != CCACHE_OK) return rc;
  ccache__rserver *servers = NULL, *sentinels = NULL;
  size_t n = 0, n_sentinels = 0;
  if (o->servers && strncmp(o->servers, "sentinel:", 9) == 0)
    rc = ccache__rservers_parse_sentinel(o->servers, &servers, &n, &sentinels, &n_sentinels, why,
                                         why_len);
  else
    rc = ccache__rservers_parse(o->servers, &servers, &n, why, why_len);
  if (rc != CCACHE_OK) return rc;
  ccache__redis *r = calloc(1, sizeof *r);
  if (!r || !(r->prefix = strdup(o->prefix ? o->prefix : "ccache"))) {
    free(r);
    ccache__rservers_free(servers, n);
    ccache__rservers_free(sentinels, n_sentinels);
    return CCACHE_ENOMEM;
  }
  rc = ccache__rpool_init(&r->pool, servers, n, o->user, o->password, o->connect_timeout_ms,
                          o->command_timeout_ms, o->reconnect_min_ms, o->reconnect_max_ms);
  if (rc != CCACHE_OK) {
    ccache__rservers_free(servers, n);
    ccache__rservers_free(sentinels, n_sentinels);
    free(r->prefix);
    free(r);
    return rc;
  }
  /* From here the pool owns the Sentinels (freed by ccache__rpool_destroy). */
  rc = ccache__rpool_set_sentinels(&r->pool, sentinels, n_sentinels, o->sentinel_user,
                                   o->sentinel_password);
  if (rc != CCACHE_OK || ccache__mutex_init(&r->lent_mu) != CCACHE_OK) {
    ccache__rpool_destroy(&r->pool);
    free(r->prefix);
    free(r);
    return CCACHE_ENOMEM;
  }
  r->entry_ttl_ms = o->entry_ttl_ms;
  r->lease_ms = o->lease_ms;
  set_kprefix(r, NULL);

  memset(ops, 0, sizeof *ops);
  ops->size = sizeof *ops;
  ops->name = "redis";
  ops->attach = op_attach;
  ops->get = op_get;
  ops->free_blob = op_free_blob;
  ops->put = op_put;
  ops->remove_if = op_remove_if;
  ops->lock = op_lock;
  ops->renew = op_renew;
  ops->unlock = op_unlock;
  ops->close = op_close;
  ops->lease_ms = o->lease_ms;
  ops->poll_ms = o->poll_ms;
  ops->poll_max_ms = o->poll_max_ms;
  ops->wait_ms = o->wait_ms;
  ops->renew_group = op_renew_group;
  ops->renew_groups = (uint32_t)n;
  ops->health = op_health;
  ops->lock_value = op_lock_value;
  ops->renew_value = op_renew_value;
  ops->lease_peek = op_lease_peek;
  *out = r;
  return CCACHE_OK;
}

int ccache_tier_redis(const ccache_redis_options *o, ccache_tier **out) {
  if (!o || !out) return CCACHE_EINVAL;
  char why[256];
  ccache_tier_ops ops;
  ccache__redis *r = NULL;
  int rc = ccache__redis_new(o, &ops, &r, why, sizeof why);
  if (rc == CCACHE_EINVAL) ccache__detail("ccache_tier_redis: %s", why);
  if (rc != CCACHE_OK) return rc;
  rc = ccache_tier_custom(&ops, r, out);
  if (rc != CCACHE_OK)
    op_close(r);
  else {
    (*out)->get_bounded = op_get_bounded;
    (*out)->get_poll = op_get_poll;
  }
  return rc;
}
