/*
 * test_tier_api.c - the calls around the tier stack, over the in-memory
 * tier (mem_tier_support.h): ccache_tier_custom()'s and ccache_open()'s
 * validation of tiers and codec (a tier belongs to one cache), a config
 * ending before the tier fields refused (0.2.0's size opens), the Redis
 * options and the stub build, the per-thread error detail, the default
 * instance taking its tiers, and the health report of each tier.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/detail.h"
#include "mem_tier_support.h"
#include "tier/tier.h"

/* A renew_group op, for the validation below: test_tier_leases.c's stall
 * tier groups its leases the same way. */
static uint32_t st_group(void *s, const void *lock) {
  (void)s;
  return (uint32_t)(((uintptr_t)lock - 1) % 2);
}

static void tier_custom_validates_ops(void **state) {
  (void)state;
  mem_tier *m = mem_new(0);
  ccache_tier *t = NULL;
  ccache_tier_ops o = mem_ops(true, 30);
  assert_int_equal(ccache_tier_custom(NULL, m, &t), CCACHE_EINVAL);
  assert_int_equal(ccache_tier_custom(&o, m, NULL), CCACHE_EINVAL);
  ccache_tier_ops b = o;
  b.size = CCACHE_TIER_OPS_SIZE_V1 - 1;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.get = NULL;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.put = NULL;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.free_blob = NULL;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.unlock = NULL;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.poll_ms = 0;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.poll_max_ms = 0;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.lease_ms = 2;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.renew = NULL;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  b = o, b.renew_group = st_group, b.renew_groups = CCACHE_MAX_RENEW_GROUPS + 1;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_EINVAL);
  assert_null(t);
  assert_int_equal(m->closes, 0); /* refused: the state is still ours */
  /* Without lock, the lock parameters do not matter; name defaults. */
  b = o, b.lock = NULL, b.unlock = NULL, b.renew = NULL, b.poll_ms = 0, b.name = NULL;
  assert_int_equal(ccache_tier_custom(&b, m, &t), CCACHE_OK);
  assert_string_equal(t->ops.name, "custom");
  ccache_tier_free(t);
  assert_int_equal(m->closes, 1);
  ccache_tier_free(NULL);
  mem_free(m);
}

static void open_validates_tiers_and_codec(void **state) {
  (void)state;
  t_ctx t = {0};
  t_codec tc;
  ccache_codec k = t_codec_make(&tc, 64);
  mem_tier *m = mem_new(0);
  ccache_tier_ops o = mem_ops(false, 0);
  ccache_tier *a = mem_tier_of(m, &o), *b = mem_tier_of(m, &o);
  ccache_tier *list[CCACHE_MAX_TIERS + 1];
  for (unsigned i = 0; i <= CCACHE_MAX_TIERS; i++) list[i] = a;
  ccache_config cfg;
  t_config(&cfg, &t);
  cfg.codec = &k;
  ccache *c = NULL;
  cfg.tiers = NULL, cfg.n_tiers = 1;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  ccache_tier *withnull[2] = {a, NULL};
  cfg.tiers = withnull, cfg.n_tiers = 2;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  cfg.tiers = list, cfg.n_tiers = 2; /* a twice */
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  ccache_tier *many[CCACHE_MAX_TIERS + 1];
  for (unsigned i = 0; i <= CCACHE_MAX_TIERS; i++) many[i] = mem_tier_of(m, &o);
  cfg.tiers = many, cfg.n_tiers = CCACHE_MAX_TIERS + 1;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  for (unsigned i = 0; i <= CCACHE_MAX_TIERS; i++) ccache_tier_free(many[i]);
  ccache_codec bad = k;
  bad.decode = NULL;
  cfg.codec = &bad, cfg.tiers = &a, cfg.n_tiers = 1;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  assert_null(c);
  assert_int_equal(m->closes, CCACHE_MAX_TIERS + 1); /* only the 9 freed above */
  assert_int_equal(m->attaches, 0);

  /* a goes to one cache; a second cache cannot take it. */
  cfg.codec = &k;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  assert_int_equal(m->attaches, 1);
  ccache *c2 = NULL;
  assert_int_equal(ccache_open(&cfg, &c2), CCACHE_EINVAL);
  ccache_tier *ab[2] = {b, a};
  cfg.tiers = ab, cfg.n_tiers = 2;
  assert_int_equal(ccache_open(&cfg, &c2), CCACHE_EINVAL);
  /* ...and b, refused along with a, is still the caller's and unclaimed. */
  cfg.tiers = &b, cfg.n_tiers = 1;
  assert_int_equal(ccache_open(&cfg, &c2), CCACHE_OK);
  t_close(c2);
  t_close(c);
  assert_int_equal(m->closes, CCACHE_MAX_TIERS + 3);
  mem_free(m);
}

/* 0.2.0's layout is the first with a size and a magic, so a struct that ends
 * before the tier fields was never released: refused (CCACHE_EINVAL), and
 * nothing past its end is read (the struct sits alone in a heap block of
 * exactly that size, so ASan would see it).  A struct of 0.2.0's size (up
 * to trust_flags) opens. */
static void config_from_before_the_tiers(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache_config full;
  t_config(&full, &t);
  const size_t old = offsetof(ccache_config, codec);
  unsigned char *raw = malloc(old);
  assert_non_null(raw);
  memcpy(raw, &full, old);
  uint32_t size = (uint32_t)old;
  memcpy(raw + offsetof(ccache_config, size), &size, sizeof size);
  const ccache_config *cfg = (const ccache_config *)(void *)raw;
  ccache *c = NULL;
  assert_int_equal(ccache_open(cfg, &c), CCACHE_EINVAL);
  assert_null(c);
  size = (uint32_t)old - 1;
  memcpy(raw + offsetof(ccache_config, size), &size, sizeof size);
  assert_int_equal(ccache_open(cfg, &c), CCACHE_EINVAL);
  free(raw);
  /* 0.2.0's size, alone in its block: opens, no tiers. */
  const size_t v020 = offsetof(ccache_config, trust_flags) + sizeof full.trust_flags;
  raw = malloc(v020);
  assert_non_null(raw);
  memcpy(raw, &full, v020);
  size = (uint32_t)v020;
  memcpy(raw + offsetof(ccache_config, size), &size, sizeof size);
  cfg = (const ccache_config *)(void *)raw;
  assert_int_equal(ccache_open(cfg, &c), CCACHE_OK);
  t_compiler comp = {0};
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.program_compiles, 1);
  assert_int_equal(s.tier_misses + s.tier_hits + s.tier_errors, 0);
  t_close(c);
  free(raw);
}

static void redis_stub_and_error_detail(void **state) {
  (void)state;
  ccache_redis_options o;
  memset(&o, 0x5A, sizeof o);
  ccache_redis_options_init(&o);
  assert_int_equal(o.size, sizeof o);
  assert_null(o.servers);
  assert_string_equal(o.prefix, "ccache");
  assert_true(o.connect_timeout_ms == 200 && o.command_timeout_ms == 1000);
  assert_true(o.entry_ttl_ms == CCACHE_UNBOUNDED && o.lease_ms == 10000);
  assert_true(o.poll_ms == 5 && o.poll_max_ms == 200 && o.wait_ms == 120000);
  assert_true(o.reconnect_min_ms == 100 && o.reconnect_max_ms == 5000);
  ccache_redis_options_init(NULL);
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_redis(NULL, &t), CCACHE_EINVAL);
  assert_int_equal(ccache_tier_redis(&o, NULL), CCACHE_EINVAL);
  o.servers = "127.0.0.1:6379";
  int rc = ccache_tier_redis(&o, &t);
  if (rc == CCACHE_ENOTSUP) { /* the stub build */
    assert_null(t);
    assert_non_null(strstr(ccache_error_detail(), "hiredis"));
  } else {
    assert_int_equal(rc, CCACHE_OK);
    ccache_tier_free(t);
  }
  assert_string_not_equal(ccache_strerror(CCACHE_ENOTSUP), ccache_strerror(12345));
  assert_string_not_equal(ccache_strerror(CCACHE_EPERM), ccache_strerror(12345));
  assert_string_not_equal(ccache_strerror(CCACHE_EIO), ccache_strerror(12345));
}

/* Another thread's detail: a copy, since its storage ends with the thread. */
static void *detail_thread(void *p) {
  (void)p;
  return strdup(ccache_error_detail());
}

static void error_detail_is_per_thread(void **state) {
  (void)state;
  ccache__detail("first %d", 1);
  assert_string_equal(ccache_error_detail(), "first 1");
  pthread_t th;
  char *other = NULL;
  assert_int_equal(pthread_create(&th, NULL, detail_thread, NULL), 0);
  pthread_join(th, (void **)&other);
  assert_non_null(other);
  assert_string_equal(other, ""); /* nothing recorded on that thread */
  free(other);
  assert_string_equal(ccache_error_detail(), "first 1");
  char big[2000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  ccache__detail("%s", big);
  assert_true(strlen(ccache_error_detail()) < sizeof big - 1); /* truncated, terminated */
}

static void default_instance_takes_its_tiers(void **state) {
  (void)state;
  static t_codec tc;
  static t_compiler comp;
  ccache_codec k = t_codec_make(&tc, 64);
  mem_tier *m1 = mem_new(0), *m2 = mem_new(1);
  ccache_tier_ops o = mem_ops(false, 0);
  ccache_tier *t1 = mem_tier_of(m1, &o), *t2 = mem_tier_of(m2, &o);
  static t_ctx t;
  ccache_config cfg;
  t_config(&cfg, &t); /* (its destroy callbacks free the decoded native) */
  cfg.codec = &k;
  cfg.tier_min_compile_us = 0;
  cfg.runtime_tag = "default-tag";
  cfg.tiers = &t1;
  cfg.n_tiers = 1;
  assert_int_equal(ccache_default_init(&cfg), CCACHE_OK);
  /* Replacing the configuration frees a tier it no longer lists. */
  cfg.tiers = &t2;
  assert_int_equal(ccache_default_init(&cfg), CCACHE_OK);
  assert_int_equal(m1->closes, 1);
  seed(m2, PK(11), "default-tag", 11);
  ccache *d = NULL;
  assert_int_equal(ccache_default(&d), CCACHE_OK);
  assert_int_equal(m2->attaches, 1);
  assert_int_equal(t_goc(d, PK(11), &comp, CCACHE_OK), 11);
  assert_int_equal(comp.calls, 0);
  assert_int_equal(t_stats(d).tier_hits, 1);
  cfg.tiers = NULL; /* (t2 is the instance's now: listing it again is EINVAL) */
  cfg.n_tiers = 0;
  assert_int_equal(ccache_default_init(&cfg), CCACHE_EBUSY);
  mem_free(m1);
  /* m2 belongs to the default instance for the life of the process. */
}

/* ---------------------------------------------------- issue 20: tier faults */

/* Item 10 over the generic path (a backend without a health op) and the
 * directory tier's. */
static void tier_health_reports_each_tier(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(true, 0);
  rig_open_ops(&r, 2, &o, "rt-1", 0);
  ccache_tier_health h;
  memset(&h, 0, sizeof h);
  h.size = sizeof h;
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, &h), CCACHE_OK);
  assert_int_equal(h.size, sizeof h);
  assert_string_equal(h.kind, "mem");
  assert_int_equal(h.parts, 1);
  assert_int_equal(h.status, CCACHE_TIER_UP);
  assert_int_equal(h.errors + h.leases_held + h.leases_lost + h.lock_waits, 0);
  assert_string_equal(h.where, "");
  assert_string_equal(h.last_error, "");
  /* Tier 0 fails every op. */
  r.m[0]->get_rc = r.m[0]->lock_rc = r.m[0]->put_rc = CCACHE_EIO;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, &h), CCACHE_OK);
  assert_int_equal(h.status, CCACHE_TIER_DOWN);
  assert_int_equal(h.errors, 4); /* get, lock, the get after the lock step, put */
  assert_string_equal(h.last_error, "put: a tier could not be opened or used (I/O error) (-10)");
  assert_int_equal(h.leases_held, 0);
  assert_int_equal(ccache_tier_health_get(r.c, 1, 0, &h), CCACHE_OK);
  assert_int_equal(h.status, CCACHE_TIER_UP);
  assert_int_equal(h.errors, 0);
  assert_int_equal(h.leases_held, 0); /* tier 1's lock was released */
  /* Another process holds tier 1's lock for a while: lock waits. */
  r.m[0]->get_rc = r.m[0]->lock_rc = r.m[0]->put_rc = 0; /* tier 0 recovers */
  r.m[1]->busy = 1;
  r.m[1]->pending = t_entry(PK(2), "rt-1", 2, 64, &r.m[1]->pending_len);
  r.m[1]->pending_key = PK(2);
  r.m[1]->publish_at_get = r.m[1]->gets + 4; /* the lookup, then one per busy answer */
  assert_int_equal(t_goc(r.c, PK(2), &r.comp, CCACHE_OK), 2);
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, &h), CCACHE_OK);
  assert_int_equal(h.status, CCACHE_TIER_UP); /* the next op that works */
  assert_int_equal(h.errors, 4);              /* counts stay */
  assert_int_equal(ccache_tier_health_get(r.c, 1, 0, &h), CCACHE_OK);
  assert_int_equal(h.lock_waits, 3);
  /* The end of the iteration, and bad calls. */
  assert_int_equal(ccache_tier_health_get(r.c, 0, 1, &h), CCACHE_MISS);
  assert_int_equal(ccache_tier_health_get(r.c, 2, 0, &h), CCACHE_MISS);
  h.size = CCACHE_TIER_HEALTH_SIZE_V1 - 1;
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, &h), CCACHE_EINVAL);
  /* 0.2.0's layout, the first (every field up to failovers), is the
   * smallest accepted, and its fields are all written; leases_retaken is
   * appended right after it. */
  assert_int_equal(CCACHE_TIER_HEALTH_SIZE_V1, offsetof(ccache_tier_health, leases_retaken));
  memset(&h, 0xAB, sizeof h);
  h.size = CCACHE_TIER_HEALTH_SIZE_V1;
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, &h), CCACHE_OK);
  assert_int_equal(h.size, CCACHE_TIER_HEALTH_SIZE_V1);
  assert_int_equal(h.errors, 4);
  assert_int_equal(h.fallback_reads, 0);
  assert_int_equal(h.failovers, 0);
  h.size = sizeof h;
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, &h), CCACHE_OK);
  assert_int_equal(h.fallback_reads + h.fallback_writes + h.failovers, 0);
  assert_int_equal(ccache_tier_health_get(r.c, 0, 0, NULL), CCACHE_EINVAL);
  free(r.m[1]->pending);
  r.m[1]->pending = NULL;
  rig_close(&r);

  /* The directory tier names its directory (a cache without a codec is
   * refused at open: test_first_use). */
  char *dir = t_tempdir("health");
  ccache_disk_options d;
  ccache_disk_options_init(&d);
  d.dir = dir;
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_disk(&d, &t), CCACHE_OK);
  t_ctx ctx = {0};
  ccache_config cfg;
  t_config(&cfg, &ctx);
  t_codec tc = {0};
  ccache_codec k = t_codec_make(&tc, 64);
  cfg.codec = &k;
  cfg.tiers = &t;
  cfg.n_tiers = 1;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  assert_int_equal(ccache_tier_health_get(c, 0, 0, &h), CCACHE_OK);
  assert_string_equal(h.kind, "disk");
  assert_string_equal(h.where, dir);
  assert_int_equal(h.status, CCACHE_TIER_UP);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tier_custom_validates_ops),
      cmocka_unit_test(open_validates_tiers_and_codec),
      cmocka_unit_test(config_from_before_the_tiers),
      cmocka_unit_test(redis_stub_and_error_detail),
      cmocka_unit_test(error_detail_is_per_thread),
      cmocka_unit_test(default_instance_takes_its_tiers),
      cmocka_unit_test(tier_health_reports_each_tier),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
