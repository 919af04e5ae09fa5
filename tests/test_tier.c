/*
 * test_tier.c - the tier stack (tier_stack.c) and the entry format, over an
 * in-memory tier whose every op is counted and logged and can be made to
 * fail or publish an entry "from another process" (mem_tier_support.h): a
 * miss compiles once and stores in every tier, a lower hit fills the tiers
 * above, the codec's SKIP, the minimum compile time, codec and op failures
 * never fail a fetch, corrupt against foreign entries, the entry format and
 * namespace pinned, and a bad entry removed only if it is still the one
 * read (the memory tier's remove_if and the directory tier's).  The lock
 * protocol is test_tier_locks.c, leases and their renewal threads
 * test_tier_leases.c, the validation and reporting calls test_tier_api.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem_tier_support.h"
#include "tier/tier.h"

static void miss_compiles_once_and_stores_in_every_tier(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 2, false);
  assert_int_equal(t_goc(r.c, PK(7), &r.comp, CCACHE_OK), 7);
  assert_int_equal(r.comp.calls, 1);
  assert_string_equal(op_log, "g0 g1 P0 P1");
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.program_misses, 1);
  assert_int_equal(s.program_compiles, 1);
  assert_int_equal(s.tier_misses, 1);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_writes, 2);
  assert_int_equal(s.tier_bytes_written, 2 * ccache__tier_entry_len(64));
  assert_int_equal(s.tier_errors, 0);
  /* Each tier holds exactly the entry the format defines. */
  size_t len;
  unsigned char *want = t_entry(PK(7), "rt-1", 7, 64, &len);
  for (int i = 0; i < 2; i++) {
    mem_entry *e = mem_find(r.m[i], PK(7));
    assert_non_null(e);
    assert_int_equal(e->len, len);
    /* bytes 48..55 hold the creation time, which differs */
    assert_memory_equal(e->blob, want, 48);
    assert_memory_equal(e->blob + 56, want + 56, 64);
  }
  free(want);
  /* t_goc released the only handle, so the program left the table: the
   * next fetch is a program miss that tier 0 serves, without compiling. */
  op_log[0] = '\0';
  assert_int_equal(t_goc(r.c, PK(7), &r.comp, CCACHE_OK), 7);
  assert_string_equal(op_log, "g0");
  assert_int_equal(r.comp.calls, 1);
  s = t_stats(r.c);
  assert_int_equal(s.program_misses, 2);
  assert_int_equal(s.program_compiles, 1);
  assert_int_equal(s.tier_hits, 1);
  /* While a handle is held, a fetch is a program hit: no tier is asked. */
  ccache_program *held = NULL;
  assert_int_equal(ccache_program_get_or_compile(r.c, PK(7), t_compile, &r.comp, &held), CCACHE_OK);
  op_log[0] = '\0';
  assert_int_equal(t_goc(r.c, PK(7), &r.comp, CCACHE_OK), 7);
  assert_string_equal(op_log, "");
  ccache_program_release(r.c, held);
  rig_close(&r);
}

static void namespace_is_format_and_tag_hash(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 1, false);
  char want[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash("rt-1"), want);
  assert_string_equal(r.m[0]->ns, want);
  assert_int_equal(strlen(want), 3 + 16);
  assert_memory_equal(want, "v1/", 3);
  rig_close(&r);
}

static void hit_in_lower_tier_fills_above_without_compiling(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 3, false);
  seed(r.m[2], PK(9), "rt-1", 9);
  assert_int_equal(t_goc(r.c, PK(9), &r.comp, CCACHE_OK), 9);
  assert_string_equal(op_log, "g0 g1 g2 P0 P1");
  assert_int_equal(r.comp.calls, 0);
  assert_int_equal(r.codec.decodes, 1);
  assert_int_equal(r.codec.encodes, 0);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.program_misses, 1);
  assert_int_equal(s.program_compiles, 0);
  assert_int_equal(s.tier_hits, 1);
  assert_int_equal(s.tier_misses, 0);
  assert_int_equal(s.tier_writes, 2);
  assert_int_equal(s.tier_bytes_read, ccache__tier_entry_len(64));
  assert_int_equal(s.compile_ns, 0);
  /* The filled copies are the very bytes of the lower tier's entry. */
  mem_entry *low = mem_find(r.m[2], PK(9));
  for (int i = 0; i < 2; i++) {
    mem_entry *e = mem_find(r.m[i], PK(9));
    assert_non_null(e);
    assert_int_equal(e->len, low->len);
    assert_memory_equal(e->blob, low->blob, low->len);
  }
  /* A hit in the top tier asks nothing below it. */
  seed(r.m[0], PK(10), "rt-1", 10);
  op_log[0] = '\0';
  assert_int_equal(t_goc(r.c, PK(10), &r.comp, CCACHE_OK), 10);
  assert_string_equal(op_log, "g0");
  rig_close(&r);
}

static void codec_skip_and_min_compile_time_store_nothing(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(false, 0);
  /* SKIP: compiled, not stored, not an error. */
  rig_open_ops(&r, 1, &o, "rt-1", 0);
  r.codec.encode_rc = CCACHE_CODEC_SKIP;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(r.codec.encodes, 1);
  assert_int_equal(r.m[0]->puts, 0);
  assert_int_equal(s.tier_writes + s.tier_errors, 0);
  assert_int_equal(s.tier_misses, 1);
  rig_close(&r);
  /* A threshold no compile reaches: never encoded, never stored. */
  rig_open_ops(&r, 1, &o, "rt-1", UINT64_MAX);
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  assert_int_equal(r.codec.encodes, 0);
  assert_int_equal(r.m[0]->puts, 0);
  s = t_stats(r.c);
  assert_int_equal(s.program_compiles, 1);
  assert_int_equal(s.tier_writes, 0);
  rig_close(&r);
  /* Threshold 0: every compile is stored. */
  rig_open_ops(&r, 1, &o, "rt-1", 0);
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  assert_int_equal(r.m[0]->puts, 1);
  rig_close(&r);
}

static void codec_failures_never_fail_a_fetch(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 1, false);
  r.codec.encode_rc = -5;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_errors, 1);
  assert_int_equal(s.tier_writes, 0);
  assert_int_equal(r.codec.frees, 0); /* a failed encode gave nothing back */
  r.codec.encode_rc = 0;
  /* decode fails on a good entry: compiled instead, and the store replaces it. */
  seed(r.m[0], PK(2), "rt-1", 2);
  r.codec.decode_rc = -1;
  assert_int_equal(t_goc(r.c, PK(2), &r.comp, CCACHE_OK), 2);
  s = t_stats(r.c);
  assert_int_equal(s.tier_errors, 2);
  assert_int_equal(s.tier_corrupt, 0);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.program_compiles, 2);
  assert_int_equal(r.comp.calls, 2);
  assert_int_equal(r.m[0]->removes, 0);
  assert_int_equal(r.m[0]->puts, 1);
  r.codec.decode_rc = 0;
  rig_close(&r);
}

static void op_failures_never_fail_a_fetch(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 2, true);
  r.m[0]->get_rc = CCACHE_EIO;
  r.m[0]->put_rc = CCACHE_EIO;
  r.m[0]->lock_rc = CCACHE_EIO;
  seed(r.m[1], PK(3), "rt-1", 3);
  /* tier 0 fails its get, its lock (taken before tier 1 is asked) and its
   * re-check; tier 1 hits; filling tier 0 fails. */
  assert_int_equal(t_goc(r.c, PK(3), &r.comp, CCACHE_OK), 3);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_errors, 4);
  assert_int_equal(s.tier_hits, 1);
  assert_int_equal(s.tier_writes, 0);
  /* A miss: get fails, lock fails (proceeds without it), put fails. */
  op_log[0] = '\0';
  assert_int_equal(t_goc(r.c, PK(4), &r.comp, CCACHE_OK), 4);
  assert_string_equal(op_log, "g0 L0 g0 g1 L1 g1 P0 P1 U1");
  s = t_stats(r.c);
  assert_int_equal(s.tier_errors, 4 + 4);
  assert_int_equal(s.tier_writes, 1);
  assert_int_equal(s.program_compiles, 1);
  rig_close(&r);

  /* A tier whose attach fails is never asked. */
  ccache_tier_ops o = mem_ops(false, 0);
  memset(&r, 0, sizeof r);
  mem_tier *bad = mem_new(0), *good = mem_new(1);
  bad->attach_rc = CCACHE_EIO;
  ccache_codec k = t_codec_make(&r.codec, 64);
  ccache_tier *tiers[2] = {mem_tier_of(bad, &o), mem_tier_of(good, &o)};
  ccache_config cfg;
  t_config(&cfg, &r.t);
  cfg.codec = &k;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = tiers;
  cfg.n_tiers = 2;
  assert_int_equal(ccache_open(&cfg, &r.c), CCACHE_OK);
  assert_int_equal(t_stats(r.c).tier_errors, 1);
  assert_int_equal(t_goc(r.c, PK(5), &r.comp, CCACHE_OK), 5);
  assert_int_equal(bad->gets + bad->puts, 0);
  assert_int_equal(good->gets, 1);
  assert_int_equal(good->puts, 1);
  r.m[0] = bad, r.m[1] = good, r.n = 2;
  rig_close(&r);
}

static void corrupt_entry_is_counted_removed_and_recompiled(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 1, false);
  /* A flipped payload bit, a truncated entry, an entry under another key. */
  size_t len;
  unsigned char *e = t_entry(PK(1), "rt-1", 1, 64, &len);
  e[CCACHE__TIER_HDR + 10] ^= 0x01;
  mem_store(r.m[0], PK(1), e, len);
  free(e);
  e = t_entry(PK(2), "rt-1", 2, 64, &len);
  mem_store(r.m[0], PK(2), e, len - 1);
  free(e);
  e = t_entry(PK(99), "rt-1", 3, 64, &len);
  mem_store(r.m[0], PK(3), e, len);
  free(e);
  for (int k = 1; k <= 3; k++) assert_int_equal(t_goc(r.c, PK(k), &r.comp, CCACHE_OK), k);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_corrupt, 3);
  assert_int_equal(s.tier_errors, 0);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_misses, 3);
  assert_int_equal(r.m[0]->removes, 3);
  assert_int_equal(r.codec.decodes, 0); /* no bad byte reached the codec */
  assert_int_equal(r.comp.calls, 3);
  assert_int_equal(r.m[0]->puts, 3); /* and good entries replaced them */
  rig_close(&r);
}

static void foreign_tag_is_a_miss_not_corrupt(void **state) {
  (void)state;
  rig r;
  rig_open(&r, 1, false);
  seed(r.m[0], PK(1), "rt-2", 1); /* intact, another runtime's */
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_corrupt, 0);
  assert_int_equal(s.tier_errors, 0);
  assert_int_equal(s.tier_misses, 1);
  assert_int_equal(r.m[0]->removes, 0);
  assert_int_equal(r.codec.decodes, 0);
  assert_int_equal(r.comp.calls, 1);
  rig_close(&r);
}

static void entry_format_is_pinned(void **state) {
  (void)state;
  unsigned char payload[3] = {0xAA, 0xBB, 0xCC};
  ccache_key k = {0x0102030405060708ull, 0x1112131415161718ull};
  unsigned char e[CCACHE__TIER_HDR + 3 + CCACHE__TIER_SUM];
  assert_int_equal(ccache__tier_entry_len(3), sizeof e);
  ccache__tier_frame(e, k, 0x2122232425262728ull, 0x3132333435363738ull, payload, 3);
  static const unsigned char hdr[CCACHE__TIER_HDR] = {
      'C',  'C',  'T',  'I',  'E',  'R',  0,    '\n', 1,    0,    0,    0,    56,   0,
      0,    0,    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x18, 0x17, 0x16, 0x15,
      0x14, 0x13, 0x12, 0x11, 0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21, 3,    0,
      0,    0,    0,    0,    0,    0,    0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31};
  assert_memory_equal(e, hdr, sizeof hdr);
  assert_memory_equal(e + CCACHE__TIER_HDR, payload, 3);
  const void *p = NULL;
  size_t n = 0;
  assert_int_equal(ccache__tier_verify(e, sizeof e, k, 0x2122232425262728ull, &p, &n),
                   CCACHE__ENTRY_OK);
  assert_ptr_equal(p, e + CCACHE__TIER_HDR);
  assert_int_equal(n, 3);
  assert_int_equal(ccache__tier_verify(e, sizeof e, k, 1, &p, &n), CCACHE__ENTRY_FOREIGN);
  /* Every single-bit flip anywhere, and every truncation, is corrupt. */
  for (size_t i = 0; i < sizeof e; i++) {
    for (int bit = 0; bit < 8; bit++) {
      e[i] ^= (unsigned char)(1u << bit);
      assert_int_equal(ccache__tier_verify(e, sizeof e, k, 0x2122232425262728ull, &p, &n),
                       CCACHE__ENTRY_CORRUPT);
      e[i] ^= (unsigned char)(1u << bit);
    }
  }
  for (size_t cut = 0; cut < sizeof e; cut++)
    assert_int_equal(ccache__tier_verify(e, cut, k, 0x2122232425262728ull, &p, &n),
                     CCACHE__ENTRY_CORRUPT);
  assert_int_equal(ccache__tier_verify(NULL, 0, k, 0, &p, &n), CCACHE__ENTRY_CORRUPT);
}

/* ---------------------------------------------------- issue 20: tier faults */

/* Item 4: a bad entry is removed through remove_if with the bytes read; an
 * entry published between the read and the removal survives and is loaded
 * (no compile); remove() is never called when remove_if is there. */
static void bad_entry_removed_only_if_still_the_one_read(void **state) {
  (void)state;
  rig r;
  ccache_tier_ops o = mem_ops(true, 0);
  o.remove_if = m_remove_if;
  rig_open_ops(&r, 1, &o, "rt-1", 0);
  size_t len;
  unsigned char *bad = t_entry(PK(1), "rt-1", 1, 64, &len);
  bad[CCACHE__TIER_HDR + 10] ^= 0x01;
  mem_store(r.m[0], PK(1), bad, len);
  /* Another process publishes a good entry just before the removal. */
  r.m[0]->pending = t_entry(PK(1), "rt-1", 1, 64, &r.m[0]->pending_len);
  r.m[0]->pending_key = PK(1);
  r.m[0]->publish_at_remove_if = 1;
  assert_int_equal(t_goc(r.c, PK(1), &r.comp, CCACHE_OK), 1);
  ccache_stats s = t_stats(r.c);
  assert_int_equal(s.tier_corrupt, 1);
  assert_int_equal(r.m[0]->remove_ifs, 1);
  assert_int_equal(r.m[0]->removes, 0);
  assert_int_equal(s.tier_hits, 1); /* the survivor, loaded after the lock */
  assert_int_equal(r.comp.calls, 0);
  assert_string_equal(op_log, "g0 r0 L0 g0 U0");
  /* Without a race the bad entry goes. */
  r.m[0]->publish_at_remove_if = 0;
  mem_store(r.m[0], PK(2), bad, len); /* bad for PK(2) too: its key is PK(1) */
  assert_int_equal(t_goc(r.c, PK(2), &r.comp, CCACHE_OK), 2);
  assert_int_equal(r.m[0]->remove_ifs, 2);
  assert_int_equal(t_stats(r.c).tier_corrupt, 2);
  assert_int_equal(r.comp.calls, 1);
  free(bad);
  rig_close(&r);
}

/* The directory tier's remove_if, alone: only the bytes read go. */
static void disk_remove_if_only_the_bytes_read(void **state) {
  (void)state;
  char *dir = t_tempdir("rmif");
  ccache_disk_options d;
  ccache_disk_options_init(&d);
  d.dir = dir;
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_disk(&d, &t), CCACHE_OK);
  assert_non_null(t->ops.remove_if);
  assert_int_equal(t->ops.attach(t->state, "v1/00000000000000aa"), CCACHE_OK);
  size_t la, lb;
  unsigned char *a = t_entry(PK(1), "x", 1, 500, &la), *b = t_entry(PK(1), "x", 2, 500, &lb);
  assert_int_equal(t->ops.put(t->state, PK(1), a, la), CCACHE_OK);
  /* Replaced by another process after our read of a: */
  assert_int_equal(t->ops.put(t->state, PK(1), b, lb), CCACHE_OK);
  assert_int_equal(t->ops.remove_if(t->state, PK(1), a, la), CCACHE_MISS);
  void *blob = NULL;
  size_t len = 0;
  assert_int_equal(t->ops.get(t->state, PK(1), &blob, &len), CCACHE_OK);
  assert_true(len == lb && memcmp(blob, b, lb) == 0); /* put back */
  t->ops.free_blob(t->state, blob, len);
  assert_int_equal(t->ops.remove_if(t->state, PK(1), b, lb), CCACHE_OK);
  assert_int_equal(t->ops.get(t->state, PK(1), &blob, &len), CCACHE_MISS);
  assert_int_equal(t->ops.remove_if(t->state, PK(1), b, lb), CCACHE_MISS);
  /* Nothing left aside: the subdirectory holds no file at all. */
  char cmd[512];
  snprintf(cmd, sizeof cmd, "test -z \"$(find '%s/v1/00000000000000aa' -type f)\"", dir);
  assert_int_equal(system(cmd), 0);
  free(a);
  free(b);
  ccache_tier_free(t);
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(miss_compiles_once_and_stores_in_every_tier),
      cmocka_unit_test(namespace_is_format_and_tag_hash),
      cmocka_unit_test(hit_in_lower_tier_fills_above_without_compiling),
      cmocka_unit_test(codec_skip_and_min_compile_time_store_nothing),
      cmocka_unit_test(codec_failures_never_fail_a_fetch),
      cmocka_unit_test(op_failures_never_fail_a_fetch),
      cmocka_unit_test(corrupt_entry_is_counted_removed_and_recompiled),
      cmocka_unit_test(foreign_tag_is_a_miss_not_corrupt),
      cmocka_unit_test(entry_format_is_pinned),
      cmocka_unit_test(bad_entry_removed_only_if_still_the_one_read),
      cmocka_unit_test(disk_remove_if_only_the_bytes_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
