/*
 * test_trust_redis_edges.c - what a cache over a shared Redis copies,
 * waits for and accepts, against real redis-server processes
 * (tests/redis_support.*):
 *  - a hit found on a fallback server is copied to the key's first server
 *    only once the core has verified it, and only by a cache that
 *    publishes: a forged or corrupt entry is never copied, a reader copies
 *    nothing, a writer's verified hit is copied once;
 *  - a cache without keys honours a lease whose time to live is longer
 *    than any holder sets (a squatter's) for lease_ms plus the skew at
 *    most, not for its whole wait_ms;
 *  - signatures and lease tokens bind the namespace (runtime tag, Redis
 *    prefix, key mode): a signed entry or token copied into another
 *    prefix or tag is rejected there.
 * Every wait is bounded; SIGPIPE stays at its default action.
 *
 * Built against a library that lacks these rules the same file compiles
 * (it uses no new API): the tests then fail, which is what they guard.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis_tier_support.h"
#include "tier/tier.h"
#include "tier/redis/tier_redis.h" /* ccache__redis: saw_first_fail */
#include "tier/tier_trust.h"       /* CCACHE__LEASE_TOKEN */
#include "trust_support.h"

#define TAG     "edges-redis-tag"
#define PAYLOAD 512

static char *keys;

static void need(void) {
  if (!ccache_trust_available()) {
    print_message("SKIPPED: this build has no libsodium (test_trust checks it fails closed)\n");
    skip();
  }
  t_need_redis();
}

static int setup(void **state) {
  (void)state;
  keys = t_tempdir("trust-redis-edges-keys");
  if (ccache_trust_available()) {
    tr_keys(keys, "signer");
    tr_keys(keys, "other");
  }
  return 0;
}

static int teardown(void **state) {
  t_stop_all(state);
  t_rmrf(keys);
  free(keys);
  return 0;
}

/* The documented Redis key of key k's entry (lease: its lease key) under
 * prefix and runtime tag. */
static void rkey(const char *prefix, const char *tag, ccache_key k, int lease, char *out,
                 size_t n) {
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash(tag), ns);
  for (char *p = ns; *p; p++)
    if (*p == '/') *p = ':';
  snprintf(out, n, "%s:%s:%016llx%016llx%s", prefix, ns, (unsigned long long)k.hi,
           (unsigned long long)k.lo, lease ? ":lease" : "");
}

typedef struct rcache {
  ccache *c;
  t_codec tc;
  t_ctx ctx;
  ccache__redis *r; /* the tier's state, for saw_first_fail */
} rcache;

/* A cache over a Redis tier on servers (prefix; tag; t: trust, NULL for
 * unsigned by name). */
static void open_as(rcache *rc, const char *servers, const char *prefix, const char *tag,
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
  ccache_codec k = t_codec_make(&rc->tc, PAYLOAD); /* copied by the open */
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

static void open_c(rcache *rc, const char *servers, ccache_trust *t) {
  open_as(rc, servers, "ccache", TAG, t, 10000, 3000);
}

/* As if this cache had just seen the first server of the list fail: a
 * lookup that misses there reads on (the fallback rule: only a process that
 * saw a key's first server fail may find a copy past it), which is how an
 * entry on the second server is found while the first is up. */
static void saw_first_fail(rcache *rc) {
  ccache__rserver *s = &rc->r->pool.servers[0];
  ccache__lock(&s->server_mu);
  s->down_seen_ms = ccache__rmono_ms();
  ccache__unlock(&s->server_mu);
}

static ccache_trust *writer_trust(void) { return tr_trust(keys, "signer", NULL); }
static ccache_trust *reader_trust(void) {
  const char *trusted[] = {"signer", NULL};
  return tr_trust(keys, NULL, trusted);
}

/* SET calls a server has executed (INFO commandstats). */
static long long set_calls(t_redis_server *s) {
  redisReply *r = t_redis_cmd(s, "INFO commandstats");
  assert_true(r && r->type == REDIS_REPLY_STRING);
  const char *p = strstr(r->str, "cmdstat_set:calls=");
  long long n = p ? atoll(p + strlen("cmdstat_set:calls=")) : 0;
  freeReplyObject(r);
  return n;
}

/* The value of key on s (caller frees; NULL if absent), its length in *len. */
static unsigned char *get_value(t_redis_server *s, const char *key, size_t *len) {
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

static void set_value(t_redis_server *s, const char *key, const void *v, size_t len) {
  redisReply *r = t_redis_cmd(s, "SET %s %b", key, v, len);
  assert_true(r && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
}

/* Two servers s[0], s[1]; list "s0,s1"; a key whose first server is s[0]. */
static uint64_t two_servers(char *list, size_t n) {
  t_redis_server *s = t_servers;
  t_must_start(&s[0], NULL);
  t_must_start(&s[1], NULL);
  snprintf(list, n, "%.31s,%.31s", s[0].addr, s[1].addr);
  t_be b;
  t_be_open_simple(&b, list);
  uint64_t k = 1;
  while (ccache__redis_server_of(b.r, PK(k)) != 0) k++;
  t_be_close(&b);
  return k;
}

/* A signed entry for PK(k) on s[1] alone, written by a writer over s[1]. */
static void signed_entry_on_second(uint64_t k) {
  rcache w;
  open_c(&w, t_servers[1].addr, writer_trust());
  t_compiler comp = {0};
  assert_int_equal(t_goc(w.c, PK(k), &comp, CCACHE_OK), (int)k);
  assert_int_equal(comp.calls, 1);
  assert_int_equal(t_stats(w.c).tier_writes, 1);
  t_close(w.c);
}

/* ------------------------------------------------- the fallback copy */

/* A forged entry (intact, unsigned) on the fallback server: the writer
 * that finds it compiles and stores its own entry on the first server,
 * and nothing it read is copied there.  SETs on s[0]: the lease's SET NX and the writer's own
 * entry, two (a copy of what was read would add one per lookup that
 * found it: the first, and the one after taking the lease). */
static void fallback_forged_entry_not_copied(void **state) {
  (void)state;
  need();
  char list[80];
  uint64_t k = two_servers(list, sizeof list);
  t_redis_server *s = t_servers;
  char key[256];
  /* Forged: unsigned, for a writer with keys. */
  size_t len = 0;
  unsigned char *e = t_entry(PK(k), TAG, 666, PAYLOAD, &len);
  rkey("ccache", TAG, PK(k), 0, key, sizeof key);
  set_value(&s[1], key, e, len);
  long long before = set_calls(&s[0]);
  rcache w;
  open_c(&w, list, writer_trust());
  saw_first_fail(&w);
  t_compiler comp = {0};
  int id = t_goc(w.c, PK(k), &comp, CCACHE_OK);
  ccache_stats st = t_stats(w.c);
  long long sets = set_calls(&s[0]) - before;
  print_message(
      "forged on the fallback: id %d, compiles %d, rejected %llu, SETs on the first %lld\n", id,
      (int)comp.calls, (unsigned long long)st.tier_rejected, sets);
  assert_int_equal(id, (int)k);
  assert_int_equal(comp.calls, 1);
  assert_int_equal(st.tier_rejected, 2); /* the lookup, and again under the lease */
  assert_int_equal(sets, 2);             /* SET NX of the lease, the writer's entry */
  size_t got = 0;
  unsigned char *v = get_value(&s[0], key, &got);
  assert_non_null(v);
  assert_true(got != len || memcmp(v, e, len) != 0);
  free(v);
  t_close(w.c);
  free(e);
}

/* The same for a corrupt entry, found by a cache without keys (unsigned
 * by name): removed, compiled, stored; never copied. */
static void fallback_corrupt_entry_not_copied(void **state) {
  (void)state;
  need();
  char list[80];
  uint64_t k = two_servers(list, sizeof list);
  t_redis_server *s = t_servers;
  size_t len = 0;
  unsigned char *e = t_entry(PK(k), TAG, 777, PAYLOAD, &len);
  e[CCACHE__TIER_HDR + 3] ^= 0x40; /* no reseal: the checksum fails */
  char key[256];
  rkey("ccache", TAG, PK(k), 0, key, sizeof key);
  set_value(&s[1], key, e, len);
  long long before = set_calls(&s[0]);
  rcache u;
  open_c(&u, list, NULL);
  saw_first_fail(&u);
  t_compiler comp = {0};
  int id = t_goc(u.c, PK(k), &comp, CCACHE_OK);
  ccache_stats st = t_stats(u.c);
  long long sets = set_calls(&s[0]) - before;
  print_message(
      "corrupt on the fallback: id %d, compiles %d, corrupt %llu, SETs on the first %lld\n", id,
      (int)comp.calls, (unsigned long long)st.tier_corrupt, sets);
  assert_int_equal(id, (int)k);
  assert_int_equal(comp.calls, 1);
  assert_int_equal(st.tier_corrupt, 1); /* removed: the second lookup misses */
  assert_int_equal(sets, 2);            /* SET NX of the lease, the entry compiled */
  t_close(u.c);
  free(e);
}

/* A reader's fallback hit loads, and copies nothing to the first server. */
static void fallback_reader_copies_nothing(void **state) {
  (void)state;
  need();
  char list[80];
  uint64_t k = two_servers(list, sizeof list);
  t_redis_server *s = t_servers;
  signed_entry_on_second(k);
  char key[256];
  rkey("ccache", TAG, PK(k), 0, key, sizeof key);
  long long before = set_calls(&s[0]);
  rcache rd;
  open_c(&rd, list, reader_trust());
  saw_first_fail(&rd);
  t_compiler comp = {0};
  int id = t_goc(rd.c, PK(k), &comp, CCACHE_OK);
  long long sets = set_calls(&s[0]) - before;
  long long there = t_redis_int(&s[0], "EXISTS %s", key);
  print_message(
      "reader's fallback hit: id %d, compiles %d, tier_hits %llu, SETs on the first "
      "%lld, entry there %lld\n",
      id, (int)comp.calls, (unsigned long long)t_stats(rd.c).tier_hits, sets, there);
  assert_int_equal(id, (int)k);
  assert_int_equal(comp.calls, 0);
  assert_int_equal(t_stats(rd.c).tier_hits, 1);
  assert_int_equal(sets, 0);
  assert_int_equal(there, 0);
  t_close(rd.c);
}

/* A writer's verified fallback hit is copied to the first server once
 * (one SET: a hit takes no lease): the next cache hits there, and nothing
 * more is written. */
static void fallback_verified_hit_copied_once(void **state) {
  (void)state;
  need();
  char list[80];
  uint64_t k = two_servers(list, sizeof list);
  t_redis_server *s = t_servers;
  signed_entry_on_second(k);
  char key[256];
  rkey("ccache", TAG, PK(k), 0, key, sizeof key);
  long long before = set_calls(&s[0]);
  for (int round = 0; round < 2; round++) {
    rcache w;
    open_c(&w, list, writer_trust());
    saw_first_fail(&w);
    t_compiler comp = {0};
    assert_int_equal(t_goc(w.c, PK(k), &comp, CCACHE_OK), (int)k);
    assert_int_equal(comp.calls, 0);
    assert_int_equal(t_stats(w.c).tier_hits, 1);
    t_close(w.c);
    long long sets = set_calls(&s[0]) - before;
    print_message("writer round %d: SETs on the first %lld\n", round, sets);
    assert_int_equal(sets, 1);
  }
  size_t a = 0, b = 0;
  unsigned char *va = get_value(&s[0], key, &a), *vb = get_value(&s[1], key, &b);
  assert_true(va && vb && a == b && memcmp(va, vb, a) == 0);
  free(va);
  free(vb);
}

/* ------------------------------------------- leases of unknown holders */

/* A squatter's lease that never expires (no PX) or lives ten minutes, on
 * a cache without keys (lease_ms 1000, wait_ms 20000): honoured for
 * lease_ms + 2 s at most, not the whole wait.  (A holder's own lease, PX
 * lease_ms and renewed, keeps the whole wait: the Redis fleet tests.) */
static void squatter_lease_wait_bounded_without_keys(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = t_servers;
  t_must_start(&s[0], NULL);
  static const char *const squats[2] = {"", " PX 600000"};
  for (int v = 0; v < 2; v++) {
    char lkey[256];
    rkey("ccache", TAG, PK(10 + v), 1, lkey, sizeof lkey);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "SET %s squatter-0123456789abcdef0123456789abcdef%s", lkey,
             squats[v]);
    redisReply *r = t_redis_cmd(&s[0], cmd);
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    rcache u;
    open_as(&u, s[0].addr, "ccache", TAG, NULL, 1000, 20000);
    t_compiler comp = {0};
    unsigned long long t0 = t_redis_now_ms();
    assert_int_equal(t_goc(u.c, PK(10 + v), &comp, CCACHE_OK), 10 + v);
    unsigned long long took = t_redis_now_ms() - t0;
    print_message("squatter's lease (%s): compiled after %llu ms (lease_ms 1000, wait_ms 20000)\n",
                  v ? "PX 600000" : "no expiry", took);
    assert_int_equal(comp.calls, 1);
    assert_true(took >= 2500); /* lease_ms + 2 s, less the first poll's rounding */
    assert_true(took < 10000); /* not the whole wait_ms (20 s) */
    assert_int_equal(t_stats(u.c).tier_lock_waits, 1);
    t_close(u.c);
  }
}

/* ------------------------------------------------------- the namespace */

/* A writer's signed entry for PK(21) under prefix "tenant-a", copied byte
 * for byte under "tenant-b" (same server, tag and key): a reader of
 * "tenant-b" that trusts the same signer rejects it and compiles. */
static void signed_entry_moved_to_another_prefix_rejected(void **state) {
  (void)state;
  need();
  t_redis_server *s = t_servers;
  t_must_start(&s[0], NULL);
  rcache w;
  open_as(&w, s[0].addr, "tenant-a", TAG, writer_trust(), 10000, 3000);
  t_compiler comp = {0};
  assert_int_equal(t_goc(w.c, PK(21), &comp, CCACHE_OK), 21);
  t_close(w.c);
  char ka[256], kb[256];
  rkey("tenant-a", TAG, PK(21), 0, ka, sizeof ka);
  rkey("tenant-b", TAG, PK(21), 0, kb, sizeof kb);
  size_t len = 0;
  unsigned char *v = get_value(&s[0], ka, &len);
  assert_non_null(v);
  set_value(&s[0], kb, v, len);
  free(v);
  rcache rd;
  open_as(&rd, s[0].addr, "tenant-b", TAG, reader_trust(), 10000, 3000);
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
  rkey("tenant-a", TAG, pkey, 1, lk, sizeof lk);
  size_t len = 0;
  unsigned char *v = get_value(&t_servers[0], lk, &len);
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
  need();
  t_redis_server *s = t_servers;
  t_must_start(&s[0], NULL);
  rkey("tenant-b", TAG, PK(22), 1, copy_to[0], sizeof copy_to[0]);
  rkey("tenant-a", "another-tag", PK(22), 1, copy_to[1], sizeof copy_to[1]);
  rcache w;
  open_as(&w, s[0].addr, "tenant-a", TAG, writer_trust(), 10000, 3000);
  t_compiler comp = {0};
  comp.during = copy_lease_while_compiling;
  assert_int_equal(t_goc(w.c, PK(22), &comp, CCACHE_OK), 22);
  t_close(w.c);
  static const char *const prefix[2] = {"tenant-b", "tenant-a"};
  static const char *const tag[2] = {TAG, "another-tag"};
  assert_int_equal(t_redis_int(&s[0], "EXISTS %s", copy_to[which]), 1);
  rcache rd;
  open_as(&rd, s[0].addr, prefix[which], tag[which], reader_trust(), 10000, 5000);
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
static void open_disk_redis(rcache *rc, const char *dir, const char *servers, ccache_trust *t) {
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
  ccache_codec k = t_codec_make(&rc->tc, PAYLOAD);
  ccache_config cfg;
  t_config(&cfg, &rc->ctx);
  cfg.codec = &k;
  cfg.runtime_tag = TAG;
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
  need();
  t_redis_server *s = t_servers;
  t_must_start(&s[0], NULL);
  rcache w;
  open_c(&w, s[0].addr, writer_trust());
  t_compiler comp = {0};
  assert_int_equal(t_goc(w.c, PK(31), &comp, CCACHE_OK), 31);
  t_close(w.c);
  char *dir = t_tempdir("trust-redis-edges-disk");
  for (int round = 0; round < 2; round++) {
    rcache rd;
    open_disk_redis(&rd, dir, s[0].addr, reader_trust());
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
      cmocka_unit_test_setup_teardown(fallback_forged_entry_not_copied, setup, teardown),
      cmocka_unit_test_setup_teardown(fallback_corrupt_entry_not_copied, setup, teardown),
      cmocka_unit_test_setup_teardown(fallback_reader_copies_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(fallback_verified_hit_copied_once, setup, teardown),
      cmocka_unit_test_setup_teardown(squatter_lease_wait_bounded_without_keys, setup, teardown),
      cmocka_unit_test_setup_teardown(signed_entry_moved_to_another_prefix_rejected, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(lease_token_copied_to_another_prefix_stalls_no_one, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(lease_token_copied_to_another_tag_stalls_no_one, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(signed_redis_hit_fills_the_directory_tier_above, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
