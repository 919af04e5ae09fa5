/*
 * test_trust_redis_edges_namespace.c - signatures and lease tokens bind the
 * namespace (runtime tag, Redis prefix, key mode), against real
 * redis-server processes (tests/redis_support.*): a signed entry or token
 * copied into another prefix or tag is rejected there; the private
 * directory tier above a Redis tier takes the Redis tier's signed hit.
 * Split from test_trust_redis_edges.c (the fallback copy, squatters'
 * leases).  Every wait is bounded; SIGPIPE stays at its default action.
 *
 * Built against a library that lacks these rules the same file compiles
 * (it uses no new API): the tests then fail, which is what they guard.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "tier/tier.h"
#include "tier/tier_trust.h" /* CCACHE__LEASE_TOKEN */
#include "trust_redis_support.h"

/* ------------------------------------------------------- the namespace */

/* A writer's signed entry for PK(21) under prefix "tenant-a", copied byte
 * for byte under "tenant-b" (same server, tag and key): a reader of
 * "tenant-b" that trusts the same signer rejects it and compiles. */
static void signed_entry_moved_to_another_prefix_rejected(void **state) {
  (void)state;
  tr_need();
  t_redis_server *s = t_servers;
  t_must_start(&s[0], NULL);
  tr_rcache w;
  tr_open_as(&w, s[0].addr, "tenant-a", TR_TAG, tr_writer_trust(), 10000, 3000);
  t_compiler comp = {0};
  assert_int_equal(t_goc(w.c, PK(21), &comp, CCACHE_OK), 21);
  t_close(w.c);
  char ka[256], kb[256];
  tr_rkey("tenant-a", TR_TAG, PK(21), 0, ka, sizeof ka);
  tr_rkey("tenant-b", TR_TAG, PK(21), 0, kb, sizeof kb);
  size_t len = 0;
  unsigned char *v = tr_get_value(&s[0], ka, &len);
  assert_non_null(v);
  tr_set_value(&s[0], kb, v, len);
  free(v);
  tr_rcache rd;
  tr_open_as(&rd, s[0].addr, "tenant-b", TR_TAG, tr_reader_trust(), 10000, 3000);
  comp.calls = 0;
  int id = t_goc(rd.c, PK(21), &comp, CCACHE_OK);
  ccache_stats st = t_stats(rd.c);
  print_message(
      "entry moved from prefix tenant-a to tenant-b: id %d, compiles %d, tier_hits %llu, "
      "tier_rejected %llu\n",
      id, (int)comp.calls, (unsigned long long)st.tier_hits, (unsigned long long)st.tier_rejected);
  assert_int_equal(comp.calls, 1);
  assert_int_equal(st.tier_hits, 0);
  assert_int_equal(st.tier_rejected, 1);
  t_close(rd.c);
}

/* The lease value a writer's compile holds, copied (while it compiles)
 * under another prefix's and another tag's lease for the same key. */
static char copy_to[2][256];
static void copy_lease_while_compiling(t_compiler *tc, ccache *c, ccache_key pkey) {
  (void)tc, (void)c;
  char lk[256];
  tr_rkey("tenant-a", TR_TAG, pkey, 1, lk, sizeof lk);
  size_t len = 0;
  unsigned char *v = tr_get_value(&t_servers[0], lk, &len);
  assert_non_null(v);
  assert_int_equal(len, 32 + CCACHE__LEASE_TOKEN); /* our token, then the signed one */
  for (int i = 0; i < 2; i++) {
    redisReply *r = t_redis_cmd(&t_servers[0], "SET %s %b PX 60000", copy_to[i], v, len);
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
  }
  free(v);
}

/* A signed lease token copied into another namespace's lease (which:
 * 0 another prefix, 1 another tag) stalls no reader there (wait_ms 5000;
 * the token is fresh, by a trusted key, for the same program key). */
static void token_copied(int which) {
  tr_need();
  t_redis_server *s = t_servers;
  t_must_start(&s[0], NULL);
  tr_rkey("tenant-b", TR_TAG, PK(22), 1, copy_to[0], sizeof copy_to[0]);
  tr_rkey("tenant-a", "another-tag", PK(22), 1, copy_to[1], sizeof copy_to[1]);
  tr_rcache w;
  tr_open_as(&w, s[0].addr, "tenant-a", TR_TAG, tr_writer_trust(), 10000, 3000);
  t_compiler comp = {0};
  comp.during = copy_lease_while_compiling;
  assert_int_equal(t_goc(w.c, PK(22), &comp, CCACHE_OK), 22);
  t_close(w.c);
  static const char *const prefix[2] = {"tenant-b", "tenant-a"};
  static const char *const tag[2] = {TR_TAG, "another-tag"};
  assert_int_equal(t_redis_int(&s[0], "EXISTS %s", copy_to[which]), 1);
  tr_rcache rd;
  tr_open_as(&rd, s[0].addr, prefix[which], tag[which], tr_reader_trust(), 10000, 5000);
  t_compiler rc = {0};
  unsigned long long t0 = t_redis_now_ms();
  assert_int_equal(t_goc(rd.c, PK(22), &rc, CCACHE_OK), 22);
  unsigned long long took = t_redis_now_ms() - t0;
  print_message("token copied to prefix %s, tag %s: compiled after %llu ms, lock waits %llu\n",
                prefix[which], tag[which], took, (unsigned long long)t_stats(rd.c).tier_lock_waits);
  assert_int_equal(rc.calls, 1);
  assert_int_equal(t_stats(rd.c).tier_lock_waits, 0);
  assert_true(took < 2500);
  t_close(rd.c);
}

static void lease_token_copied_to_another_prefix_stalls_no_one(void **state) {
  (void)state;
  token_copied(0);
}

static void lease_token_copied_to_another_tag_stalls_no_one(void **state) {
  (void)state;
  token_copied(1);
}

/* A cache over a directory tier above a Redis tier (both signed for their
 * own namespace); NULL dir: Redis alone. */
static void open_disk_redis(tr_rcache *rc, const char *dir, const char *servers, ccache_trust *t) {
  memset(rc, 0, sizeof *rc);
  ccache_disk_options d;
  ccache_disk_options_init(&d);
  d.dir = dir;
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  o.servers = servers;
  ccache_tier *tiers[2] = {NULL, NULL};
  assert_int_equal(ccache_tier_disk(&d, &tiers[0]), CCACHE_OK);
  assert_int_equal(ccache_tier_redis(&o, &tiers[1]), CCACHE_OK);
  ccache_codec k = t_codec_make(&rc->tc, TR_PAYLOAD);
  ccache_config cfg;
  t_config(&cfg, &rc->ctx);
  cfg.codec = &k;
  cfg.runtime_tag = TR_TAG;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = tiers;
  cfg.n_tiers = 2;
  cfg.trust = t;
  assert_int_equal(ccache_open(&cfg, &rc->c), CCACHE_OK);
  ccache_trust_free(t);
}

/* STRLEN calls a server has executed: one per lookup that reached it. */
static long long strlen_calls(t_redis_server *s) {
  redisReply *r = t_redis_cmd(s, "INFO commandstats");
  assert_true(r && r->type == REDIS_REPLY_STRING);
  const char *p = strstr(r->str, "cmdstat_strlen:calls=");
  long long n = p ? atoll(p + strlen("cmdstat_strlen:calls=")) : 0;
  freeReplyObject(r);
  return n;
}

/* The private directory tier accepts an entry signed for the Redis tier's
 * namespace (it holds copies of what the tiers below it had): a reader's
 * Redis hit fills its directory tier, and the next reader over the same
 * tiers loads from the directory without asking Redis. */
static void signed_redis_hit_fills_the_directory_tier_above(void **state) {
  (void)state;
  tr_need();
  t_redis_server *s = t_servers;
  t_must_start(&s[0], NULL);
  tr_rcache w;
  tr_open_c(&w, s[0].addr, tr_writer_trust());
  t_compiler comp = {0};
  assert_int_equal(t_goc(w.c, PK(31), &comp, CCACHE_OK), 31);
  t_close(w.c);
  char *dir = t_tempdir("trust-redis-edges-disk");
  for (int round = 0; round < 2; round++) {
    tr_rcache rd;
    open_disk_redis(&rd, dir, s[0].addr, tr_reader_trust());
    long long before = strlen_calls(&s[0]);
    comp.calls = 0;
    assert_int_equal(t_goc(rd.c, PK(31), &comp, CCACHE_OK), 31);
    ccache_stats st = t_stats(rd.c);
    long long asked = strlen_calls(&s[0]) - before;
    print_message(
        "reader %d over directory + Redis: compiles %d, tier_hits %llu, tier_writes "
        "%llu, tier_rejected %llu, Redis lookups %lld\n",
        round, (int)comp.calls, (unsigned long long)st.tier_hits,
        (unsigned long long)st.tier_writes, (unsigned long long)st.tier_rejected, asked);
    assert_int_equal(comp.calls, 0);
    assert_int_equal(st.tier_hits, 1);
    assert_int_equal(st.tier_rejected, 0);
    assert_int_equal(st.tier_writes, round == 0 ? 1 : 0); /* the fill of the directory */
    assert_int_equal(asked, round == 0 ? 1 : 0);
    t_close(rd.c);
  }
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(signed_entry_moved_to_another_prefix_rejected, tr_redis_setup,
                                      tr_redis_teardown),
      cmocka_unit_test_setup_teardown(lease_token_copied_to_another_prefix_stalls_no_one,
                                      tr_redis_setup, tr_redis_teardown),
      cmocka_unit_test_setup_teardown(lease_token_copied_to_another_tag_stalls_no_one,
                                      tr_redis_setup, tr_redis_teardown),
      cmocka_unit_test_setup_teardown(signed_redis_hit_fills_the_directory_tier_above,
                                      tr_redis_setup, tr_redis_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
