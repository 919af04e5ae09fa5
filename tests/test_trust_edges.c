/*
 * test_trust_edges.c - safe by default (issue 35): a shared tier without
 * keys refuses the open (a custom tier unless it declares itself private;
 * the Redis tier; the default instance keeps its CLOSURE_CACHE_REDIS tier
 * disabled), and without libsodium the trust calls fail closed.  Key files
 * checked like secrets, CLOSURE_CACHE_TRUSTED_KEYS and "nothing signed
 * before T": test_trust_edges_keys.c.
 *
 * Built against a library without issue 35 (ON_MAIN: no
 * CCACHE_TRUST_UNSIGNED in the headers), the same tests compile with the
 * new settings left out: they then fail, which is what they guard against.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disk_support.h"
#include "trust_support.h"

#ifndef CCACHE_TRUST_UNSIGNED
#define ON_MAIN           1
#define SET_UNSIGNED(cfg) ((void)(cfg))
#define SET_PRIVATE(ops)  ((void)(ops))
#else
#define SET_UNSIGNED(cfg) ((cfg)->trust_flags = CCACHE_TRUST_UNSIGNED)
#define SET_PRIVATE(ops)  ((ops)->flags = CCACHE_TIER_PRIVATE)
#endif

#define PAYLOAD 64
#define TAG     "edges-tag"

/* ------------------------------------------------ a backend of our own */

static int nop_get(void *s, ccache_key k, void **blob, size_t *len) {
  (void)s, (void)k, (void)blob, (void)len;
  return CCACHE_MISS;
}
static void nop_free(void *s, void *blob, size_t len) { (void)s, (void)blob, (void)len; }
static int nop_put(void *s, ccache_key k, const void *blob, size_t len) {
  (void)s, (void)k, (void)blob, (void)len;
  return CCACHE_OK;
}

static ccache_tier *custom_tier(int private_) {
  ccache_tier_ops ops;
  memset(&ops, 0, sizeof ops);
  ops.size = sizeof ops;
  ops.name = "shared-store";
  ops.get = nop_get;
  ops.free_blob = nop_free;
  ops.put = nop_put;
  if (private_) SET_PRIVATE(&ops);
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_custom(&ops, NULL, &t), CCACHE_OK);
  return t;
}

/* ccache_open over one tier with a codec; flags: set CCACHE_TRUST_UNSIGNED. */
static int open_one(ccache_tier *t, int unsigned_, ccache **out) {
  static t_ctx ctx;
  static t_codec tc;
  static ccache_codec k;
  k = t_codec_make(&tc, PAYLOAD);
  ccache_config cfg;
  t_config(&cfg, &ctx);
  cfg.codec = &k;
  cfg.runtime_tag = TAG;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &t;
  cfg.n_tiers = 1;
  if (unsigned_) SET_UNSIGNED(&cfg);
  *out = NULL;
  return ccache_open(&cfg, out);
}

/* Item 1: a custom tier that does not declare itself private, with a codec
 * and neither keys nor the flag: CCACHE_EINVAL naming both ways out, the
 * caller keeps the tier.  The flag, or the declaration, opens it; the
 * directory tier is private by construction. */
static void shared_tier_refused_without_keys(void **state) {
  (void)state;
  ccache_tier *t = custom_tier(0);
  ccache *c = NULL;
  int rc = open_one(t, 0, &c);
  print_message("shared custom tier, no keys, no flag: ccache_open %d (%s)\n", rc,
                ccache_error_detail());
  assert_int_equal(rc, CCACHE_EINVAL);
  assert_null(c);
  assert_non_null(strstr(ccache_error_detail(), "CCACHE_TRUST_UNSIGNED"));
  assert_non_null(strstr(ccache_error_detail(), "ccache_config::trust"));
  assert_non_null(strstr(ccache_error_detail(), "shared-store"));
  /* Still the caller's: the same tier opens with the flag. */
  assert_int_equal(open_one(t, 1, &c), CCACHE_OK);
  t_close(c);
  assert_int_equal(open_one(custom_tier(1), 0, &c), CCACHE_OK); /* declared private */
  t_close(c);
  char *dir = t_tempdir("edges-disk");
  assert_int_equal(open_one(t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), 0, &c), CCACHE_OK);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* Item 1, the Redis tier (no server needed: the open is refused first). */
static void redis_tier_refused_without_keys(void **state) {
  (void)state;
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  o.servers = "127.0.0.1:1";
  ccache_tier *t = NULL;
  if (ccache_tier_redis(&o, &t) == CCACHE_ENOTSUP) {
    print_message("SKIPPED: no Redis tier in this build\n");
    skip();
  }
  ccache *c = NULL;
  int rc = open_one(t, 0, &c);
  print_message("Redis tier, no keys, no flag: ccache_open %d\n", rc);
  assert_int_equal(rc, CCACHE_EINVAL);
  assert_non_null(strstr(ccache_error_detail(), "\"redis\""));
  assert_int_equal(open_one(t, 1, &c), CCACHE_OK);
  t_close(c);
}

/* The default instance with CLOSURE_CACHE_REDIS and no keys: it opens, its
 * Redis tier kept disabled with the reason in its health, never touched
 * (no tier error for a server that does not exist); CLOSURE_CACHE_TRUST
 * accepts "unsigned" only. */
static void default_child(const void *arg) {
  const char *trust = arg;
  setenv("CLOSURE_CACHE_REDIS", "127.0.0.1:1,127.0.0.1:2", 1);
  unsetenv("CLOSURE_CACHE_TRUSTED_KEYS");
  unsetenv("CLOSURE_CACHE_SIGNING_KEY_FILE");
  if (trust)
    setenv("CLOSURE_CACHE_TRUST", trust, 1);
  else
    unsetenv("CLOSURE_CACHE_TRUST");
  static t_codec tc;
  static ccache_codec k;
  k = t_codec_make(&tc, PAYLOAD);
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.codec = &k;
  cfg.runtime_tag = TAG;
  cfg.tier_min_compile_us = 0;
  CHILD_CHECK(ccache_default_init(&cfg) == CCACHE_OK);
  ccache *c = NULL;
  int rc = ccache_default(&c);
  if (trust && strcmp(trust, "unsigned") != 0) {
    CHILD_CHECK(rc == CCACHE_EINVAL && strstr(ccache_error_detail(), "CLOSURE_CACHE_TRUST"));
    return;
  }
  CHILD_CHECK(rc == CCACHE_OK);
  ccache_tier_health h;
  memset(&h, 0, sizeof h);
  h.size = sizeof h;
  CHILD_CHECK(ccache_tier_health_get(c, 0, 0, &h) == CCACHE_OK);
  fprintf(stderr,
          "CLOSURE_CACHE_TRUST=%s: tier 0 (%s) status %u, where \"%s\", last_error \"%s\"\n",
          trust ? trust : "(unset)", h.kind, h.status, h.where, h.last_error);
  t_compiler comp = {0};
  CHILD_CHECK(t_goc(c, PK(1), &comp, CCACHE_OK) == 1);
  ccache_stats s = t_stats(c);
  if (!trust) {
    CHILD_CHECK(h.status == CCACHE_TIER_DISABLED);
    CHILD_CHECK(strstr(h.last_error, "CLOSURE_CACHE_TRUSTED_KEYS") != NULL);
    CHILD_CHECK(h.parts == 1);
    CHILD_CHECK(strcmp(h.where, "127.0.0.1:1, 127.0.0.1:2") == 0); /* the servers it was given */
    CHILD_CHECK(s.tier_errors == 0);                               /* never asked */
  } else {
    CHILD_CHECK(h.status != CCACHE_TIER_DISABLED);
    CHILD_CHECK(s.tier_errors >= 1); /* asked, nothing listens */
  }
}

static void default_redis_kept_disabled(void **state) {
  (void)state;
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  o.servers = "127.0.0.1:1";
  ccache_tier *t = NULL;
  if (ccache_tier_redis(&o, &t) == CCACHE_ENOTSUP) {
    print_message("SKIPPED: no Redis tier in this build\n");
    skip();
  }
  ccache_tier_free(t);
  assert_int_equal(tr_run_child(default_child, NULL), 0);
  assert_int_equal(tr_run_child(default_child, "unsigned"), 0);
  assert_int_equal(tr_run_child(default_child, "yes"), 0);
}

/* Item 5 (and item 1) without libsodium: trust calls are CCACHE_ENOTSUP,
 * and a shared tier opens only with the flag. */
static void without_sodium_fails_closed(void **state) {
  (void)state;
  ccache_trust *t = NULL;
  assert_int_equal(ccache_trust_new(&t), CCACHE_OK);
#ifndef ON_MAIN
  assert_int_equal(ccache_trust_set_not_before(t, 1), CCACHE_ENOTSUP);
#endif
  assert_int_equal(ccache_trust_add_key_file(t, "/nonexistent"), CCACHE_ENOTSUP);
  ccache_trust_free(t);
}

int main(void) {
  if (!ccache_trust_available()) {
    const struct CMUnitTest closed[] = {
        cmocka_unit_test(without_sodium_fails_closed),
        cmocka_unit_test(shared_tier_refused_without_keys),
        cmocka_unit_test(redis_tier_refused_without_keys),
        cmocka_unit_test(default_redis_kept_disabled),
    };
    print_message("this build has no libsodium: the fail-closed tests run\n");
    return cmocka_run_group_tests(closed, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shared_tier_refused_without_keys),
      cmocka_unit_test(redis_tier_refused_without_keys),
      cmocka_unit_test(default_redis_kept_disabled),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
