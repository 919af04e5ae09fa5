/*
 * test_strong_keys_fingerprint.c - issue 22: the strong fingerprint
 * (BLAKE2b-256 through libsodium) itself: pinned vectors for the graph
 * helper and the builder, the stream as documented in fp.h (hashed here with
 * libsodium directly), a builder's key independent of how its stream was
 * split, copies that go on independently, fast and strong finals refusing
 * each other's builders, the graph key's invariances (parameter order) and
 * its validation.  Without libsodium (the .ci/run stage) every strong call
 * is CCACHE_ENOTSUP: strong_mode_needs_libsodium checks that, the others
 * skip.  The colliding pair and the caches are in test_strong_keys.c.
 */
#include <string.h>

#if CCACHE_TEST_SODIUM
#include <sodium.h>
#endif

#include "strong_keys_support.h"

/* ------------------------------------------------------------------------ */
/* Pinned vectors: if one fails, the strong encoding changed (bump
 * CCACHE_FP_FORMAT_VERSION and re-pin). */

static void assert_skat(const char *what, const ccache_strong_key *k, uint64_t a, uint64_t b,
                        uint64_t c, uint64_t d) {
  if (k->key.lo != a || k->key.hi != b || k->check.lo != c || k->check.hi != d)
    fail_msg("%s: got {0x%016llxull, 0x%016llxull, 0x%016llxull, 0x%016llxull}", what,
             (unsigned long long)k->key.lo, (unsigned long long)k->key.hi,
             (unsigned long long)k->check.lo, (unsigned long long)k->check.hi);
}

static ccache_strong_key skat_builder(int which) {
  ccache_fp fp;
  ccache_strong_key k;
  static const int64_t d23[] = {2, 3};
  assert_int_equal(ccache_fp_init_strong(&fp), CCACHE_OK);
  switch (which) {
    case 0:
      break;
    case 1:
      assert_int_equal(ccache_fp_u64(&fp, 1), CCACHE_OK);
      assert_int_equal(ccache_fp_i64(&fp, -1), CCACHE_OK);
      assert_int_equal(ccache_fp_f64(&fp, 1.5), CCACHE_OK);
      break;
    case 2:
      assert_int_equal(ccache_fp_str(&fp, "matmul", 6), CCACHE_OK);
      assert_int_equal(ccache_fp_bytes(&fp, "\x00\x01\x02", 3), CCACHE_OK);
      assert_int_equal(ccache_fp_shape(&fp, 1, 2, d23), CCACHE_OK);
      break;
    case 3: { /* past the buffer: the streaming state */
      static unsigned char big[5000];
      for (unsigned i = 0; i < sizeof big; i++) big[i] = (unsigned char)i;
      assert_int_equal(ccache_fp_u64(&fp, 99), CCACHE_OK);
      assert_int_equal(ccache_fp_bytes(&fp, big, sizeof big), CCACHE_OK);
      assert_int_equal(ccache_fp_str(&fp, "tail", 4), CCACHE_OK);
      break;
    }
  }
  assert_int_equal(ccache_fp_final_strong(&fp, &k), CCACHE_OK);
  return k;
}

static void strong_known_answers(void **state) {
  (void)state;
  need_strong_fp();
  make_pair();
  ccache_strong_key g = strong_graph(w_a);
  assert_skat("graph A", &g, 0xd37947da1e29d868ull, 0xdd9a199bcbd538f7ull, 0x1a5a0e64fb5fe8abull,
              0xfb2d67f3d66ac248ull);
  ccache_strong_key b0 = skat_builder(0), b1 = skat_builder(1), b2 = skat_builder(2),
                    b3 = skat_builder(3);
  assert_skat("builder empty", &b0, 0x4b7c5d477eb33327ull, 0x5f357c097f151eeeull,
              0x246309ff7559e01cull, 0x87566341eba47983ull);
  assert_skat("builder ints", &b1, 0x9d14962c277473fdull, 0x6fbcf0bd5b030420ull,
              0xeaaed35faa000120ull, 0xeb20f21b48c2008cull);
  assert_skat("builder str/bytes/shape", &b2, 0x3ba618c1a42522daull, 0xf432679aa5cd681cull,
              0xa026c28d9972bdfeull, 0x4b05a1dbcee2a66cull);
  assert_skat("builder large", &b3, 0xd469e998c4cc595eull, 0x3ecab32336c73781ull,
              0xc846ed060a66190dull, 0x8deeaa3843bf9130ull);
}

#if CCACHE_TEST_SODIUM
/* The pins are BLAKE2b-256 of fp.h's documented stream, computed here with
 * libsodium directly from the bytes written out by hand. */
static void strong_stream_is_documented(void **state) {
  (void)state;
  unsigned char b[64], *p = b;
  memcpy(p, "ccache-fp", 9);
  p += 9;
  put64(p, CCACHE_FP_FORMAT_VERSION); /* u32: the next 4 bytes are overwritten */
  p += 4;
  *p++ = 0x53;
  *p++ = 0x01;
  put64(p, 1);
  p += 8;
  *p++ = 0x02;
  put64(p, UINT64_MAX);
  p += 8;
  *p++ = 0x03;
  put64(p, 0x3ff8000000000000ull); /* 1.5 */
  p += 8;
  unsigned char d[32];
  assert_int_equal(sodium_init() >= 0, 1);
  crypto_generichash(d, sizeof d, b, (unsigned long long)(p - b), NULL, 0);
  ccache_strong_key k = skat_builder(1);
  assert_int_equal(k.key.lo, le64(d));
  assert_int_equal(k.key.hi, le64(d + 8));
  assert_int_equal(k.check.lo, le64(d + 16));
  assert_int_equal(k.check.hi, le64(d + 24));
}
#endif

/* A build without libsodium: the strong fingerprints are CCACHE_ENOTSUP
 * (a strong cache still works with digests from elsewhere). */
static void strong_mode_needs_libsodium(void **state) {
  (void)state;
  ccache_fp fp;
  int rc = ccache_fp_init_strong(&fp);
  ccache_fp_node nodes[3];
  make_pair();
  graph_of(w_a, nodes);
  ccache_strong_key scratch[3], k;
  int grc = ccache_fp_graph_strong(nodes, 3, graph_out, 1, "cpu", scratch, &k);
#if CCACHE_TEST_SODIUM
  assert_int_equal(rc, CCACHE_OK);
  assert_int_equal(grc, CCACHE_OK);
#else
  assert_int_equal(rc, CCACHE_ENOTSUP);
  assert_int_equal(grc, CCACHE_ENOTSUP);
  assert_int_equal(ccache_fp_u64(&fp, 1), CCACHE_EINVAL); /* left unusable */
  assert_int_equal(ccache_fp_final_strong(&fp, &k), CCACHE_EINVAL);
#endif
}

/* The builder's strong key does not depend on how the stream was split,
 * and a strong builder copied by value goes on independently. */
static void strong_builder_streams(void **state) {
  (void)state;
  need_strong_fp();
  static unsigned char big[3000];
  for (unsigned i = 0; i < sizeof big; i++) big[i] = (unsigned char)(i * 13);
  ccache_fp a, b;
  assert_int_equal(ccache_fp_init_strong(&a), CCACHE_OK);
  for (int i = 0; i < 200; i++) assert_int_equal(ccache_fp_u64(&a, (uint64_t)i), CCACHE_OK);
  b = a; /* fork after a spill */
  assert_int_equal(ccache_fp_bytes(&a, big, sizeof big), CCACHE_OK);
  assert_int_equal(ccache_fp_bytes(&b, big, sizeof big - 1), CCACHE_OK);
  ccache_strong_key ka, kb, ka2;
  assert_int_equal(ccache_fp_final_strong(&a, &ka), CCACHE_OK);
  assert_int_equal(ccache_fp_final_strong(&b, &kb), CCACHE_OK);
  assert_false(skey_eq(&ka, &kb));
  assert_int_equal(ccache_fp_final_strong(&a, &ka2), CCACHE_OK); /* final leaves it */
  assert_true(skey_eq(&ka, &ka2));
  /* Fast and strong finals refuse each other's builders. */
  ccache_key fk;
  assert_int_equal(ccache_fp_final(&a, &fk), CCACHE_EINVAL);
  ccache_fp f;
  ccache_fp_init(&f);
  assert_int_equal(ccache_fp_final_strong(&f, &ka), CCACHE_EINVAL);
  assert_int_equal(ccache_fp_init_strong(NULL), CCACHE_EINVAL);
  /* Poisoning as in the fast mode. */
  assert_int_equal(ccache_fp_bytes(&a, NULL, 3), CCACHE_EINVAL);
  assert_int_equal(ccache_fp_final_strong(&a, &ka), CCACHE_EINVAL);
  /* The mode is in the domain: a strong builder's empty stream is not the
   * graph helper's, nor does its first half equal the fast key. */
  ccache_fp_init(&f);
  assert_int_equal(ccache_fp_final(&f, &fk), CCACHE_OK);
  ccache_strong_key e = skat_builder(0);
  assert_false(key_eq(e.key, fk));
}

/* Where parameter nodes sit does not matter (sorted digests), but which
 * parameters there are does. */
static void strong_graph_invariances(void **state) {
  (void)state;
  need_strong_fp();
  make_pair();
  ccache_fp_node nodes[3];
  graph_of(w_a, nodes);
  ccache_strong_key scratch[4], k1, k2, k3;
  assert_int_equal(ccache_fp_graph_strong(nodes, 3, graph_out, 1, "cpu", scratch, &k1), CCACHE_OK);
  /* Constant first, parameter second: renumbered operands, same graph. */
  ccache_fp_node re[3] = {nodes[1], nodes[0], nodes[2]};
  static const ccache_fp_ref ops[] = {{1, 0}, {0, 0}};
  re[2].operands = ops;
  assert_int_equal(ccache_fp_graph_strong(re, 3, graph_out, 1, "cpu", scratch, &k2), CCACHE_OK);
  assert_true(skey_eq(&k1, &k2));
  /* An unused second parameter changes the key. */
  ccache_fp_node more[4] = {nodes[0], nodes[1], nodes[2], nodes[0]};
  more[3].param_index = 1;
  assert_int_equal(ccache_fp_graph_strong(more, 4, graph_out, 1, "cpu", scratch, &k3), CCACHE_OK);
  assert_false(skey_eq(&k1, &k3));
  /* Validation is the fast helper's: nothing written on error. */
  static const ccache_fp_ref bad[] = {{7, 0}};
  ccache_strong_key untouched = {{1, 1}, {1, 1}}, o = untouched;
  assert_int_equal(ccache_fp_graph_strong(nodes, 3, bad, 1, "cpu", scratch, &o), CCACHE_EINVAL);
  assert_true(skey_eq(&o, &untouched));
  assert_int_equal(ccache_fp_graph_strong(nodes, 3, graph_out, 1, NULL, scratch, &o),
                   CCACHE_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(strong_mode_needs_libsodium),
    cmocka_unit_test(strong_known_answers),
#if CCACHE_TEST_SODIUM
    cmocka_unit_test(strong_stream_is_documented),
#endif
    cmocka_unit_test(strong_builder_streams),
    cmocka_unit_test(strong_graph_invariances),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
