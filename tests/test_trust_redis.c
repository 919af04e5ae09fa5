/*
 * test_trust_redis.c - signed tier entries on the Redis tier (issue 21),
 * against a real redis-server (tests/redis_support.*): a forged entry
 * rejected before the codec and never deleted, a squatting client's
 * unsigned lease that delays no one (every wait bounded), and one signer
 * with three readers, whose readers wait for the signer's signed lease and
 * load its entry (exact compile counts), and a signed writer that finds a
 * lease gone by the time it looks at it loads the entry its holder
 * published.
 *
 * TRUST_ON_MAIN builds it against a library without trust (see
 * trust_support.h): the first two then fail, which is what they guard.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis_support.h"
#include "trust_support.h"
#include "tier/tier.h"
#include "tier/redis/redis.h" /* ccache__redis_set_hook */

#define TAG     "trust-redis-tag"
#define PAYLOAD 512

static t_redis_server srv;
static char *keys;

static void need_redis(void) {
  const char *why = NULL;
#ifndef TRUST_ON_MAIN
  if (!ccache_trust_available()) {
    print_message("SKIPPED: this build has no libsodium (test_trust checks it fails closed)\n");
    skip();
  }
#endif
  if (t_redis_binary(&why)) return;
  if (t_redis_required()) fail_msg("redis-server required (CCACHE_TEST_REQUIRE_REDIS=1): %s", why);
  print_message("SKIPPED: %s\n", why);
  skip();
}

static int setup(void **state) {
  (void)state;
  keys = t_tempdir("trust-redis-keys");
#ifndef TRUST_ON_MAIN
  if (!ccache_trust_available()) return 0;
#endif
  tr_keys(keys, "signer");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  t_redis_stop(&srv);
  t_rmrf(keys);
  free(keys);
  return 0;
}

/* The documented Redis key of an entry (lease: its lease key). */
static void rkey(ccache_key k, int lease, char *out, size_t n) {
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash(TAG), ns);
  for (char *p = ns; *p; p++)
    if (*p == '/') *p = ':';
  snprintf(out, n, "ccache:%s:%016llx%016llx%s", ns, (unsigned long long)k.hi,
           (unsigned long long)k.lo, lease ? ":lease" : "");
}

typedef struct rcache {
  ccache *c;
  t_codec tc;
  _Atomic int tier_misses; /* TIER_MISS events */
  ccache__redis *r;        /* the tier's state, for a test hook */
} rcache;

static void on_event(void *ctx, const ccache_event *ev) {
  rcache *rc = ctx;
  if (ev->kind == CCACHE_EVENT_TIER_MISS) atomic_fetch_add(&rc->tier_misses, 1);
}

static void open_redis(rcache *rc, t_ctx *ctx, ccache_trust *t, uint64_t wait_ms) {
  memset(rc, 0, sizeof *rc);
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  o.servers = srv.addr;
  o.wait_ms = wait_ms;
  o.poll_ms = 2;
  o.poll_max_ms = 20;
  ccache_tier *tier = NULL;
  assert_int_equal(ccache_tier_redis(&o, &tier), CCACHE_OK);
  rc->r = tier->state;
  ccache_codec k = t_codec_make(&rc->tc, PAYLOAD);
  ccache_config cfg;
  t_config(&cfg, ctx);
  cfg.codec = &k;
  cfg.runtime_tag = TAG;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &tier;
  cfg.n_tiers = 1;
  cfg.on_event = on_event;
  cfg.event_ctx = rc;
  SET_TRUST(&cfg, t);
#ifdef CCACHE_TRUST_UNSIGNED
  if (!t) cfg.trust_flags = CCACHE_TRUST_UNSIGNED; /* the unsigned baseline, by name */
#endif
  assert_int_equal(ccache_open(&cfg, &rc->c), CCACHE_OK);
}

static ccache_trust *reader_trust(void) {
  const char *trusted[] = {"signer", NULL};
  return tr_trust(keys, NULL, trusted);
}

/* A forged entry (valid checksum, unsigned) stored under PK(1)'s key. */
static void forged_entry_rejected_redis(void **state) {
  (void)state;
  need_redis();
  assert_int_equal(t_redis_start(&srv, NULL), 0);
  size_t len = 0;
  unsigned char *e = t_entry(PK(1), TAG, 666, PAYLOAD, &len);
  char key[256];
  rkey(PK(1), 0, key, sizeof key);
  redisReply *r = t_redis_cmd(&srv, "SET %s %b", key, e, len);
  assert_non_null(r);
  freeReplyObject(r);
  t_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ccache_trust *t = reader_trust();
  rcache rd;
  open_redis(&rd, &ctx, t, 1000);
  ccache_trust_free(t);
  t_compiler comp = {0};
  assert_int_equal(t_goc(rd.c, PK(1), &comp, CCACHE_OK), 1); /* main: 666 */
  assert_int_equal(comp.calls, 1);
  assert_int_equal(rd.tc.decodes, 0);
  ccache_stats s = t_stats(rd.c);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_corrupt, 0);
#ifndef TRUST_ON_MAIN
  assert_int_equal(s.tier_rejected, 1);
  assert_int_equal(s.tier_unpublished, 1);
#endif
  t_close(rd.c);
  /* Never deleted, never replaced by a reader. */
  r = t_redis_cmd(&srv, "GET %s", key);
  assert_true(r && r->type == REDIS_REPLY_STRING && (size_t)r->len == len &&
              memcmp(r->str, e, len) == 0);
  freeReplyObject(r);
  free(e);
}

/* A squatter holds PK(2)'s lease with a value no trusted key signed, for
 * ten minutes: a reader with wait_ms 3000 does not wait for it, and
 * neither does a writer.  (Main's reader waits the whole 3 s.) */
static void squatter_lease_no_delay(void **state) {
  (void)state;
  need_redis();
  assert_int_equal(t_redis_start(&srv, NULL), 0);
  char lkey[256];
  rkey(PK(2), 1, lkey, sizeof lkey);
  redisReply *r =
      t_redis_cmd(&srv, "SET %s squatter-0123456789abcdef0123456789abcdef PX 600000", lkey);
  assert_non_null(r);
  freeReplyObject(r);
  t_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ccache_trust *t = reader_trust();
  rcache rd;
  open_redis(&rd, &ctx, t, 3000);
  ccache_trust_free(t);
  t_compiler comp = {0};
  unsigned long long t0 = t_redis_now_ms();
  assert_int_equal(t_goc(rd.c, PK(2), &comp, CCACHE_OK), 2);
  unsigned long long took = t_redis_now_ms() - t0;
  assert_int_equal(comp.calls, 1);
  if (took >= 2500) fail_msg("the reader waited %llu ms for a squatter's lease", took);
  assert_int_equal(t_stats(rd.c).tier_lock_waits, 0);
  t_close(rd.c);
#ifndef TRUST_ON_MAIN
  /* A writer cannot take the lease, and does not wait for it either. */
  ccache_trust *wt = tr_trust(keys, "signer", NULL);
  rcache w;
  open_redis(&w, &ctx, wt, 3000);
  ccache_trust_free(wt);
  t0 = t_redis_now_ms();
  assert_int_equal(t_goc(w.c, PK(2), &comp, CCACHE_OK), 2);
  took = t_redis_now_ms() - t0;
  assert_int_equal(comp.calls, 2);
  if (took >= 2500) fail_msg("the writer waited %llu ms for a squatter's lease", took);
  assert_int_equal(t_stats(w.c).tier_writes, 1);
  t_close(w.c);
#endif
}

#ifndef TRUST_ON_MAIN
/* One signer, three readers: the signer's compile waits until every reader
 * is polling (two TIER_MISS events each: its lookup, then a poll made
 * because it found the signer's signed lease); then all three load it. */
static rcache readers[3];
static _Atomic int signer_compiling;

static void wait_for_readers(t_compiler *tc, ccache *c, ccache_key k) {
  (void)tc, (void)c, (void)k;
  atomic_store(&signer_compiling, 1);
  unsigned long long t0 = t_redis_now_ms();
  for (;;) {
    int ready = 0;
    for (int i = 0; i < 3; i++) ready += atomic_load(&readers[i].tier_misses) >= 2;
    if (ready == 3 || t_redis_now_ms() - t0 > 30000) break; /* bounded: the test then fails */
    t_redis_poll_pause();
  }
}

static t_compiler reader_comp;

static void *reader_main(void *arg) {
  rcache *rd = arg;
  while (!atomic_load(&signer_compiling)) t_redis_poll_pause();
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(rd->c, PK(3), t_compile, &reader_comp, &p);
  if (rc == CCACHE_OK) ccache_program_release(rd->c, p);
  return (void *)(intptr_t)rc;
}

static void one_signer_three_readers_redis(void **state) {
  (void)state;
  need_redis();
  assert_int_equal(t_redis_start(&srv, NULL), 0);
  t_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  atomic_store(&signer_compiling, 0);
  memset(&reader_comp, 0, sizeof reader_comp);
  for (int i = 0; i < 3; i++) {
    ccache_trust *t = reader_trust();
    open_redis(&readers[i], &ctx, t, 60000);
    ccache_trust_free(t);
  }
  ccache_trust *wt = tr_trust(keys, "signer", NULL);
  rcache w;
  open_redis(&w, &ctx, wt, 60000);
  ccache_trust_free(wt);
  pthread_t th[3];
  for (int i = 0; i < 3; i++)
    assert_int_equal(pthread_create(&th[i], NULL, reader_main, &readers[i]), 0);
  t_compiler wc = {0};
  wc.during = wait_for_readers;
  assert_int_equal(t_goc(w.c, PK(3), &wc, CCACHE_OK), 3);
  for (int i = 0; i < 3; i++) {
    void *ret = NULL;
    pthread_join(th[i], &ret);
    assert_int_equal((intptr_t)ret, CCACHE_OK);
  }
  assert_int_equal(wc.calls, 1);
  assert_int_equal(reader_comp.calls, 0);
  for (int i = 0; i < 3; i++) {
    ccache_stats s = t_stats(readers[i].c);
    assert_int_equal(s.tier_hits, 1);
    assert_int_equal(s.tier_lock_waits, 1);
    assert_int_equal(s.tier_unpublished, 0);
    assert_int_equal(readers[i].tc.decodes, 1);
    t_close(readers[i].c);
  }
  assert_int_equal(t_stats(w.c).tier_writes, 1);
  t_close(w.c);
  /* The lease value was the signed token (after the backend's 32 digits). */
}

/* Two signed writers on one key, where the first lets go of its lease in
 * the gap between the second finding it taken (SET NX refused) and the
 * second looking at who holds it (GETRANGE, where a hook on the second's
 * tier lets the first finish): the lease is gone by then, and the entry
 * is published.  The second must load that entry, not take the empty
 * lease for a squatter's and compile again (4 signed writers on one
 * Redis once compiled 41 times for 40 kernels this way). */
static rcache holder;
static t_compiler holder_comp;
static _Atomic int holder_compiling, holder_done, hook_fired;

static void wait_flag(_Atomic int *flag) {
  unsigned long long t0 = t_redis_now_ms();
  while (!atomic_load(flag) && t_redis_now_ms() - t0 < 30000) /* bounded: the test then fails */
    t_redis_poll_pause();
}

static void hold_until_peeked(t_compiler *tc, ccache *c, ccache_key k) {
  (void)tc, (void)c, (void)k;
  atomic_store(&holder_compiling, 1);
  wait_flag(&hook_fired);
}

static _Atomic int peeks, peek_to_stall; /* GETRANGEs seen; the one that waits */

static void finish_holder_before_peek(void *arg, size_t server, const char *cmd) {
  (void)arg, (void)server;
  if (strcmp(cmd, "GETRANGE") != 0 || atomic_fetch_add(&peeks, 1) + 1 != peek_to_stall) return;
  atomic_store(&hook_fired, 1);
  wait_flag(&holder_done); /* published and released: the lease is gone */
}

static void *holder_main(void *arg) {
  (void)arg;
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(holder.c, PK(4), t_compile, &holder_comp, &p);
  if (rc == CCACHE_OK) ccache_program_release(holder.c, p);
  atomic_store(&holder_done, 1);
  return (void *)(intptr_t)rc;
}

/* The holder compiles PK(4) and lets go just before the other cache's
 * peek number `stall` (1: a writer's first, after its SET NX was refused;
 * 2: a reader's second, after it saw the signer's lease and polled);
 * returns the other cache's compiles, after checking the holder's. */
static int race_the_holder(rcache *other, int stall, ccache_stats *st) {
  t_compiler late_comp = {0};
  atomic_store(&peeks, 0);
  atomic_store(&peek_to_stall, stall);
  ccache__redis_set_hook(other->r, finish_holder_before_peek, NULL);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, holder_main, NULL), 0);
  wait_flag(&holder_compiling);
  assert_int_equal(t_goc(other->c, PK(4), &late_comp, CCACHE_OK), 4);
  void *ret = NULL;
  pthread_join(th, &ret);
  assert_int_equal((intptr_t)ret, CCACHE_OK);
  *st = t_stats(other->c);
  print_message("compiles: holder %d, other %d; other's tier_hits %llu\n",
                atomic_load(&holder_comp.calls), atomic_load(&late_comp.calls),
                (unsigned long long)st->tier_hits);
  assert_int_equal(atomic_load(&hook_fired), 1);
  assert_int_equal(holder_comp.calls, 1);
  assert_int_equal(t_stats(holder.c).tier_writes, 1);
  t_close(holder.c);
  return late_comp.calls;
}

static void open_holder(t_ctx *ctx) {
  atomic_store(&holder_compiling, 0);
  atomic_store(&holder_done, 0);
  atomic_store(&hook_fired, 0);
  memset(&holder_comp, 0, sizeof holder_comp);
  holder_comp.during = hold_until_peeked;
  ccache_trust *wt = tr_trust(keys, "signer", NULL);
  open_redis(&holder, ctx, wt, 10000);
  ccache_trust_free(wt);
}

/* A server, the holder, and the other cache (t: its trust, freed here). */
static void open_pair(t_ctx *ctx, rcache *other, ccache_trust *t) {
  need_redis();
  assert_int_equal(t_redis_start(&srv, NULL), 0);
  memset(ctx, 0, sizeof *ctx);
  open_holder(ctx);
  open_redis(other, ctx, t, 10000);
  ccache_trust_free(t);
}

static void lease_released_between_busy_and_peek_loads(void **state) {
  (void)state;
  t_ctx ctx;
  rcache late;
  open_pair(&ctx, &late, tr_trust(keys, "signer", NULL));
  ccache_stats s;
  assert_int_equal(race_the_holder(&late, 1, &s), 0);
  assert_int_equal(s.tier_hits, 1);
  assert_int_equal(s.tier_writes, 0);
  t_close(late.c);
}

/* The same gap for a reader: between its poll that missed and its next
 * look at the lease, the signer published and let go. */
static void lease_released_between_poll_and_peek_reader_loads(void **state) {
  (void)state;
  t_ctx ctx;
  rcache rd;
  open_pair(&ctx, &rd, reader_trust());
  ccache_stats s;
  assert_int_equal(race_the_holder(&rd, 2, &s), 0);
  assert_int_equal(s.tier_hits, 1);
  assert_int_equal(s.tier_lock_waits, 1);
  t_close(rd.c);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(forged_entry_rejected_redis, setup, teardown),
      cmocka_unit_test_setup_teardown(squatter_lease_no_delay, setup, teardown),
#ifndef TRUST_ON_MAIN
      cmocka_unit_test_setup_teardown(one_signer_three_readers_redis, setup, teardown),
      cmocka_unit_test_setup_teardown(lease_released_between_busy_and_peek_loads, setup, teardown),
      cmocka_unit_test_setup_teardown(lease_released_between_poll_and_peek_reader_loads, setup,
                                      teardown),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
