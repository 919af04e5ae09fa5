/*
 * tier_redis.c - the Redis tier backend's entries: one Redis (or several, by
 * rendezvous hashing) shared by every process of a fleet.
 *
 * What is sent (all binary-safe, through hiredis' argv interface):
 *   entry:  STRLEN <k> + GETRANGE <k> 0 <max bytes> (pipelined);  SET <k> <blob> [PX entry_ttl_ms];
 *           EVAL REMOVE_IF_SCRIPT 1 <k> <the value read>
 *   lease:  SET <k>:lease <token> NX PX lease_ms
 *           EVAL RENEW_SCRIPT 1 <k>:lease <token> lease_ms
 *           EVAL RELEASE_SCRIPT 1 <k>:lease <token>
 *           PTTL <k>:lease (a cache without keys, once per wait on a busy lease)
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
 * that answers, lookups read on past a miss, and a later hit is copied back
 * to that first server once the core has verified it, in a cache that
 * publishes (see the header's "Fallback" and docs/tiers.md).  The
 * polls of a process waiting on a lease read that first server alone
 * (op_get_poll): the holder publishes nowhere else.
 *
 * The lease ops are redis_lease.c; creation, health and close are
 * tier_redis_open.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "tier/redis/tier_redis.h"

static const char REMOVE_IF_SCRIPT[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) end return 0";

/* ------------------------------------------------------------------ keys */
void ccache__redis_set_kprefix(ccache__redis *r, const char *ns) {
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

/* A decimal for a command argument. */
size_t ccache__redis_udec(char *buf, size_t len, uint64_t v) {
  return (size_t)snprintf(buf, len, "%llu", (unsigned long long)v);
}

int ccache__redis_unexpected(ccache__redis *r, size_t server, const char *cmd, redisReply *rep) {
  char line[160];
  snprintf(line, sizeof line, "redis %s: %s: unexpected reply type %d",
           r->pool.servers[server].name, cmd, rep->type);
  ccache__rpool_note_error(&r->pool, server, line);
  ccache__rreply_free(rep);
  return CCACHE_EIO;
}

/* ------------------------------------------------------------ fallback */
/* argv on server i: CCACHE__REDIS_SKIPPED if i is down (refused at once inside its
 * backoff window, counted as such, or failed on this command: connection,
 * I/O, timeout); otherwise what the command returned (an error reply is an
 * answer: the server is up, and its keys stay with it). */
int ccache__redis_try_server(ccache__redis *r, size_t i, int argc, const char **argv,
                             const size_t *lens, redisReply **rep) {
  int rc = ccache__rpool_command(&r->pool, i, 0, argc, argv, lens, rep);
  if (rc == CCACHE_EIO && ccache__rpool_down(&r->pool, i)) return CCACHE__REDIS_SKIPPED;
  return rc;
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
    lens[4] = ccache__redis_udec(ttl, sizeof ttl, r->entry_ttl_ms);
    argc = 5;
  }
  *at = r->pool.n;
  for (size_t k = 0; k < n; k++) {
    size_t i = order[k];
    redisReply *rep = NULL;
    int rc = ccache__redis_try_server(r, i, argc, argv, lens, &rep);
    if (rc == CCACHE__REDIS_SKIPPED) continue;
    if (rc != CCACHE_OK) return rc;
    *at = i;
    if (rep->type != REDIS_REPLY_STATUS) return ccache__redis_unexpected(r, i, "SET", rep);
    ccache__rpool_note_write_ok(&r->pool, i);
    ccache__rreply_free(rep);
    return CCACHE_OK;
  }
  return CCACHE_EIO; /* every server down */
}

/* ------------------------------------------------------------------- ops */
static int op_attach(void *state, const char *ns) {
  ccache__redis *r = state;
  if (ns && strlen(ns) > CCACHE__REDIS_MAX_PREFIX) return CCACHE_EINVAL;
  ccache__redis_set_kprefix(r, ns);
  return CCACHE_OK;
}

/* Whether an entry may sit past server i, the key's first live server:
 * only if it was written while i was down, and this process saw i fail
 * within CCACHE__REDIS_FALLBACK_WINDOW_MS.  Otherwise i's miss is the
 * answer: one server read per miss.  An entry written past i that this
 * process cannot know of costs one compile, on i under i's lease (the
 * fallback's guarantee: at most one extra compile per process per key
 * whose first live server changed). */
static bool fallback_possible(ccache__redis *r, size_t i) {
  ccache__rserver *s = &r->pool.servers[i];
  ccache__lock(&s->server_mu);
  uint64_t seen = s->down_seen_ms;
  ccache__unlock(&s->server_mu);
  return seen && ccache__rmono_ms() - seen < CCACHE__REDIS_FALLBACK_WINDOW_MS;
}

/* Read in rendezvous order, skipping servers that are down: the first hit
 * wins.  Past a miss on the first live server only if fallback_possible.
 * A hit on a server after the first live one (an entry written while
 * the earlier servers were down) is remembered with its blob: it is copied
 * to that first live server, where the key's writes and lease now go, only
 * when the core has verified it and publishes (ccache__redis_accepted).
 * home_only: the first live server's answer is the answer (a waiting poll:
 * the lease holder publishes there). */
static int get_from(ccache__redis *r, ccache_key pkey, uint64_t max_len, bool home_only,
                    void **blob, size_t *len) {
  char key[CCACHE__REDIS_KEY_MAX];
  size_t klen = ccache__redis_key(r, pkey, 0, key, sizeof key);
  uint8_t order[CCACHE__REDIS_MAX_SERVERS];
  ccache__rendezvous_order(r->pool.servers, r->pool.n, pkey, order);
  redisReply *rep = NULL;
  size_t k, home = r->pool.n;
  int rc = CCACHE_EIO;
  for (k = 0; k < r->pool.n; k++) {
    /* Past the key's live server a lookup only looks for fallback copies:
     * a server in backoff is passed over without counting a refusal. */
    if (home != r->pool.n && ccache__rpool_refusing(&r->pool, order[k])) continue;
    /* STRLEN + GETRANGE pipelined: an entry over the reader's bound never
     * crosses into this process (its reply is dropped with the connection),
     * and the value is not copied through a Lua script (which cost up to 3
     * times a GET at 64 KiB). */
    int got = ccache__rpool_get_bounded(&r->pool, order[k], key, klen, max_len, &rep);
    if (got == CCACHE_EIO && ccache__rpool_down(&r->pool, order[k])) got = CCACHE__REDIS_SKIPPED;
    if (got == CCACHE__REDIS_SKIPPED) continue;          /* rc stays: MISS if a server answered */
    if (got != CCACHE_OK && home != r->pool.n) continue; /* a fallback's error: still a miss */
    rc = got;
    if (rc != CCACHE_OK) return rc;
    if (home == r->pool.n) home = order[k];
    if (rep->type == REDIS_REPLY_STRING && rep->len > 0) break; /* no entry is empty */
    if (rep->type != REDIS_REPLY_NIL && rep->type != REDIS_REPLY_STRING)
      return ccache__redis_unexpected(r, order[k], "GET", rep);
    ccache__rreply_free(rep);
    rep = NULL;
    rc = CCACHE_MISS;
    if (home_only || !fallback_possible(r, home)) break;
  }
  if (!rep) return rc; /* MISS if any server answered, EIO if none did */
  size_t at = order[k];
  if (k > 0) ccache__redis_note(&r->pool.servers[at].fallback_reads);
  /* The reply's own string is the blob: no copy of a possibly large entry
   * (a copy doubled the cost of a 1 MiB fetch, mostly in page faults). */
  ccache__rlent *l = malloc(sizeof *l);
  if (!l) {
    ccache__rreply_free(rep);
    return CCACHE_ENOMEM;
  }
  l->rep = rep;
  l->copy_to = home != at ? home : r->pool.n;
  ccache__lock(&r->lent_mu);
  l->next = r->lent;
  r->lent = l;
  ccache__unlock(&r->lent_mu);
  *blob = rep->str;
  *len = rep->len;
  return CCACHE_OK;
}

int ccache__redis_get_bounded(void *state, ccache_key pkey, uint64_t max_len, void **blob,
                              size_t *len) {
  return get_from(state, pkey, max_len, false, blob, len);
}

/* ccache_tier::get_poll: one command per poll, not one per live server. */
int ccache__redis_get_poll(void *state, ccache_key pkey, uint64_t max_len, void **blob,
                           size_t *len) {
  return get_from(state, pkey, max_len, true, blob, len);
}

void ccache__redis_accepted(void *state, ccache_key pkey, const void *blob, size_t len,
                            int may_copy) {
  ccache__redis *r = state;
  ccache__rprefix_seen(&r->pool.prefix_read, len);
  if (!may_copy) return;
  size_t to = r->pool.n;
  ccache__lock(&r->lent_mu);
  for (ccache__rlent *l = r->lent; l; l = l->next)
    if (l->rep->str == blob) {
      to = l->copy_to;
      l->copy_to = r->pool.n; /* once */
      break;
    }
  ccache__unlock(&r->lent_mu);
  if (to == r->pool.n) return;
  char key[CCACHE__REDIS_KEY_MAX];
  size_t klen = ccache__redis_key(r, pkey, 0, key, sizeof key);
  uint8_t only[1] = {(uint8_t)to};
  size_t wrote;
  (void)put_at(r, only, 1, key, klen, blob, len, &wrote);
}

/* ops.get: bounded only by the format (Redis's own 512 MB cap is lower);
 * the core uses op_get_bounded (ccache_tier::get_bounded). */
static int op_get(void *state, ccache_key pkey, void **blob, size_t *len) {
  int rc = ccache__redis_get_bounded(state, pkey, CCACHE__TIER_MAX_ENTRY, blob, len);
  return rc == CCACHE__TIER_OVERSIZE ? CCACHE_EIO : rc;
}

static void op_free_blob(void *state, void *blob, size_t len) {
  ccache__redis *r = state;
  (void)len;
  ccache__rlent *found = NULL;
  ccache__lock(&r->lent_mu);
  for (ccache__rlent **pp = &r->lent; *pp; pp = &(*pp)->next)
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
  char key[CCACHE__REDIS_KEY_MAX];
  size_t klen = ccache__redis_key(r, pkey, 0, key, sizeof key);
  uint8_t order[CCACHE__REDIS_MAX_SERVERS];
  ccache__rendezvous_order(r->pool.servers, r->pool.n, pkey, order);
  size_t at;
  int rc = put_at(r, order, r->pool.n, key, klen, blob, len, &at);
  if (rc == CCACHE_OK && at != order[0]) ccache__redis_note(&r->pool.servers[at].fallback_writes);
  return rc;
}

/* On every live server: a copy may sit on a fallback as well as on the
 * first server. */
static int op_remove_if(void *state, ccache_key pkey, const void *blob, size_t len) {
  ccache__redis *r = state;
  char key[CCACHE__REDIS_KEY_MAX];
  size_t klen = ccache__redis_key(r, pkey, 0, key, sizeof key);
  const char *argv[5] = {"EVAL", REMOVE_IF_SCRIPT, "1", key, blob ? (const char *)blob : ""};
  const size_t lens[5] = {4, sizeof REMOVE_IF_SCRIPT - 1, 1, klen, len};
  int out = CCACHE_EIO;
  for (size_t i = 0; i < r->pool.n; i++) {
    redisReply *rep = NULL;
    int rc = ccache__redis_try_server(r, i, 5, argv, lens, &rep);
    if (rc == CCACHE__REDIS_SKIPPED) continue;
    if (rc == CCACHE_OK && rep->type != REDIS_REPLY_INTEGER)
      rc = ccache__redis_unexpected(r, i, "EVAL remove-if", rep);
    else if (rc == CCACHE_OK) {
      rc = rep->integer > 0 ? CCACHE_OK : CCACHE_MISS; /* 0: absent, or not the value read */
      ccache__rreply_free(rep);
    }
    if (rc == CCACHE_OK || (rc == CCACHE_MISS && out != CCACHE_OK)) out = rc;
  }
  return out;
}

/* ops.scope: the key prefix keeps tenants of one server apart, so a
 * signature binds it (the namespace below it is the core's own). */
static int op_scope(void *state, void *buf, size_t cap, size_t *len) {
  ccache__redis *r = state;
  int n = snprintf(buf, cap, "redis:%s", r->prefix);
  if (n < 0 || (size_t)n >= cap) return CCACHE_EINVAL;
  *len = (size_t)n;
  return CCACHE_OK;
}

void ccache__redis_entry_ops(ccache_tier_ops *ops) {
  ops->scope = op_scope;
  ops->attach = op_attach;
  ops->get = op_get;
  ops->free_blob = op_free_blob;
  ops->put = op_put;
  ops->remove_if = op_remove_if;
}
