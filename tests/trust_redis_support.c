/* trust_redis_support.c - see trust_redis_support.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "tier/tier.h"
#include "trust_redis_support.h"

static char *keys;

void tr_need(void) {
  if (!ccache_trust_available()) {
    print_message("SKIPPED: this build has no libsodium (test_trust checks it fails closed)\n");
    skip();
  }
  t_need_redis();
}

int tr_redis_setup(void **state) {
  (void)state;
  keys = t_tempdir("trust-redis-edges-keys");
  if (ccache_trust_available()) {
    tr_keys(keys, "signer");
    tr_keys(keys, "other");
  }
  return 0;
}

int tr_redis_teardown(void **state) {
  t_stop_all(state);
  t_rmrf(keys);
  free(keys);
  return 0;
}

void tr_rkey(const char *prefix, const char *tag, ccache_key k, int lease, char *out, size_t n) {
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash(tag), ns);
  for (char *p = ns; *p; p++)
    if (*p == '/') *p = ':';
  snprintf(out, n, "%s:%s:%016llx%016llx%s", prefix, ns, (unsigned long long)k.hi,
           (unsigned long long)k.lo, lease ? ":lease" : "");
}

void tr_open_as(tr_rcache *rc, const char *servers, const char *prefix, const char *tag,
                ccache_trust *t, uint64_t lease_ms, uint64_t wait_ms) {
  memset(rc, 0, sizeof *rc);
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  o.servers = servers;
  o.prefix = prefix;
  o.lease_ms = lease_ms;
  o.wait_ms = wait_ms;
  o.poll_ms = 2;
  o.poll_max_ms = 20;
  o.reconnect_min_ms = 1;
  o.reconnect_max_ms = 20;
  ccache_tier *tier = NULL;
  assert_int_equal(ccache_tier_redis(&o, &tier), CCACHE_OK);
  rc->r = tier->state;
  ccache_codec k = t_codec_make(&rc->tc, TR_PAYLOAD); /* copied by the open */
  ccache_config cfg;
  t_config(&cfg, &rc->ctx);
  cfg.codec = &k;
  cfg.runtime_tag = tag;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &tier;
  cfg.n_tiers = 1;
  cfg.trust = t;
  if (!t) cfg.trust_flags = CCACHE_TRUST_UNSIGNED;
  assert_int_equal(ccache_open(&cfg, &rc->c), CCACHE_OK);
  ccache_trust_free(t);
}

void tr_open_c(tr_rcache *rc, const char *servers, ccache_trust *t) {
  tr_open_as(rc, servers, "ccache", TR_TAG, t, 10000, 3000);
}

ccache_trust *tr_writer_trust(void) { return tr_trust(keys, "signer", NULL); }
ccache_trust *tr_reader_trust(void) {
  const char *trusted[] = {"signer", NULL};
  return tr_trust(keys, NULL, trusted);
}

unsigned char *tr_get_value(t_redis_server *s, const char *key, size_t *len) {
  redisReply *r = t_redis_cmd(s, "GET %s", key);
  assert_non_null(r);
  unsigned char *v = NULL;
  *len = 0;
  if (r->type == REDIS_REPLY_STRING) {
    v = malloc(r->len ? r->len : 1);
    memcpy(v, r->str, r->len);
    *len = r->len;
  }
  freeReplyObject(r);
  return v;
}

void tr_set_value(t_redis_server *s, const char *key, const void *v, size_t len) {
  redisReply *r = t_redis_cmd(s, "SET %s %b", key, v, len);
  assert_true(r && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
}
