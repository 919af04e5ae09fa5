/*
 * test_trust_redis_edges.c - what a cache over a shared Redis copies and
 * waits for, against real redis-server processes (tests/redis_support.*):
 *  - a hit found on a fallback server is copied to the key's first server
 *    only once the core has verified it, and only by a cache that
 *    publishes: a forged or corrupt entry is never copied, a reader copies
 *    nothing, a writer's verified hit is copied once;
 *  - a cache without keys honours a lease whose time to live is longer
 *    than any holder sets (a squatter's) for lease_ms plus the skew at
 *    most, not for its whole wait_ms.
 * What it accepts across namespaces: test_trust_redis_edges_namespace.c.
 * Every wait is bounded; SIGPIPE stays at its default action.
 *
 * Built against a library that lacks these rules the same file compiles
 * (it uses no new API): the tests then fail, which is what they guard.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "tier/tier.h"
#include "trust_redis_support.h"

/* As if this cache had just seen the first server of the list fail: a
 * lookup that misses there reads on (the fallback rule: only a process that
 * saw a key's first server fail may find a copy past it), which is how an
 * entry on the second server is found while the first is up. */
static void saw_first_fail(tr_rcache *rc) {
  ccache__rserver *s = &rc->r->pool.servers[0];
  ccache__lock(&s->server_mu);
  s->down_seen_ms = ccache__rmono_ms();
  ccache__unlock(&s->server_mu);
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
  tr_rcache w;
  tr_open_c(&w, t_servers[1].addr, tr_writer_trust());
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
  tr_need();
  char list[80];
  uint64_t k = two_servers(list, sizeof list);
  t_redis_server *s = t_servers;
  char key[256];
  /* Forged: unsigned, for a writer with keys. */
  size_t len = 0;
  unsigned char *e = t_entry(PK(k), TR_TAG, 666, TR_PAYLOAD, &len);
  tr_rkey("ccache", TR_TAG, PK(k), 0, key, sizeof key);
  tr_set_value(&s[1], key, e, len);
  long long before = set_calls(&s[0]);
  tr_rcache w;
  tr_open_c(&w, list, tr_writer_trust());
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
  unsigned char *v = tr_get_value(&s[0], key, &got);
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
  tr_need();
  char list[80];
  uint64_t k = two_servers(list, sizeof list);
  t_redis_server *s = t_servers;
  size_t len = 0;
  unsigned char *e = t_entry(PK(k), TR_TAG, 777, TR_PAYLOAD, &len);
  e[CCACHE__TIER_HDR + 3] ^= 0x40; /* no reseal: the checksum fails */
  char key[256];
  tr_rkey("ccache", TR_TAG, PK(k), 0, key, sizeof key);
  tr_set_value(&s[1], key, e, len);
  long long before = set_calls(&s[0]);
  tr_rcache u;
  tr_open_c(&u, list, NULL);
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
  tr_need();
  char list[80];
  uint64_t k = two_servers(list, sizeof list);
  t_redis_server *s = t_servers;
  signed_entry_on_second(k);
  char key[256];
  tr_rkey("ccache", TR_TAG, PK(k), 0, key, sizeof key);
  long long before = set_calls(&s[0]);
  tr_rcache rd;
  tr_open_c(&rd, list, tr_reader_trust());
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
  tr_need();
  char list[80];
  uint64_t k = two_servers(list, sizeof list);
  t_redis_server *s = t_servers;
  signed_entry_on_second(k);
  char key[256];
  tr_rkey("ccache", TR_TAG, PK(k), 0, key, sizeof key);
  long long before = set_calls(&s[0]);
  for (int round = 0; round < 2; round++) {
    tr_rcache w;
    tr_open_c(&w, list, tr_writer_trust());
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
  unsigned char *va = tr_get_value(&s[0], key, &a), *vb = tr_get_value(&s[1], key, &b);
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
    tr_rkey("ccache", TR_TAG, PK(10 + v), 1, lkey, sizeof lkey);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "SET %s squatter-0123456789abcdef0123456789abcdef%s", lkey,
             squats[v]);
    redisReply *r = t_redis_cmd(&s[0], cmd);
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    tr_rcache u;
    tr_open_as(&u, s[0].addr, "ccache", TR_TAG, NULL, 1000, 20000);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(fallback_forged_entry_not_copied, tr_redis_setup,
                                      tr_redis_teardown),
      cmocka_unit_test_setup_teardown(fallback_corrupt_entry_not_copied, tr_redis_setup,
                                      tr_redis_teardown),
      cmocka_unit_test_setup_teardown(fallback_reader_copies_nothing, tr_redis_setup,
                                      tr_redis_teardown),
      cmocka_unit_test_setup_teardown(fallback_verified_hit_copied_once, tr_redis_setup,
                                      tr_redis_teardown),
      cmocka_unit_test_setup_teardown(squatter_lease_wait_bounded_without_keys, tr_redis_setup,
                                      tr_redis_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
