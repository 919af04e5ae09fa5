/*
 * tier_redis_open.c - the Redis tier's options check, creation (the ops
 * table: entries from tier_redis.c, the lease from redis_lease.c), health
 * (one part per server, from the pool's per-server state and the lease
 * counts) and close.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "base/detail.h"
#include "tier/redis/tier_redis.h"

static int op_health(void *state, uint32_t part, ccache_tier_health *out) {
  ccache__redis *r = state;
  if (part >= r->pool.n) return CCACHE_MISS;
  ccache__rserver *s = &r->pool.servers[part];
  ccache__rserver_state st;
  ccache__rpool_server_state(&r->pool, part, &st);
  out->parts = (uint32_t)r->pool.n;
  if (s->sentinel) {
    ccache__lock(&s->server_mu);
    if (s->at_port)
      snprintf(out->where, sizeof out->where, "%.120s (%.120s:%d)", s->name, s->at_host,
               s->at_port);
    else
      snprintf(out->where, sizeof out->where, "%s", s->name);
    ccache__unlock(&s->server_mu);
  } else {
    snprintf(out->where, sizeof out->where, "%s", s->name);
  }
  if (out->status != CCACHE_TIER_DISABLED)
    out->status = st.failing        ? CCACHE_TIER_DOWN
                  : st.write_denied ? CCACHE_TIER_DEGRADED
                                    : CCACHE_TIER_UP;
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

static void op_close(void *state) {
  ccache__redis *r = state;
  if (!r) return;
  while (r->lent) { /* blobs never given back (a caller error): freed here */
    ccache__rlent *l = r->lent;
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
  ccache__redis_set_kprefix(r, NULL);

  memset(ops, 0, sizeof *ops);
  ops->size = sizeof *ops;
  ops->name = "redis";
  ccache__redis_entry_ops(ops);
  ccache__redis_lease_ops(ops);
  ops->close = op_close;
  ops->lease_ms = o->lease_ms;
  ops->poll_ms = o->poll_ms;
  ops->poll_max_ms = o->poll_max_ms;
  ops->wait_ms = o->wait_ms;
  ops->renew_groups = (uint32_t)n;
  ops->health = op_health;
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
    (*out)->get_bounded = ccache__redis_get_bounded;
    (*out)->get_poll = ccache__redis_get_poll;
  }
  return rc;
}
