/*
 * test_strong_keys.c - issue 22: keys that cannot be collided on purpose.
 *
 * The fast mode's XXH3-128 (default secret) falls to a construction with no
 * search at all: in XXH3's long-input loop each 8-byte word w of stripe s,
 * lane i, enters as acc[i ^ 1] += w and acc[i] += lo32(w ^ k) * hi32(w ^ k)
 * with k the secret's word at byte 8 * s + 8 * i.  When lo32(w) = lo32(k)
 * the product is 0 and w is a plain sum: raising one such word by 2^32 and
 * lowering another of the same lane (another stripe of the same 1 KiB
 * block) by 2^32 leaves every accumulator, hence the key, unchanged.  The
 * secret is libxxhash's own (XXH3_generateSecret_fromSeed() with seed 0 is
 * the default secret), so the pair is built from the hash's public
 * definition alone, here inside a constant tensor's bytes (plant() in
 * strong_keys_support.c).
 *
 * The tests show the pair colliding under ccache_fp_graph() and the builder
 * (the fast encoding is pinned by test_fingerprint_format.c, so it collides
 * on main's code too), the fast cache and its directory tier serving one
 * graph's program for the other, and the strong mode telling them apart:
 * different keys, different programs, different tier entries.  Then the
 * strong mode in a cache: keys equal in their first half, its namespaces,
 * its entry format and its refusals.  The strong fingerprint itself (pinned
 * vectors, streaming, graph invariances, libsodium required) is in
 * test_strong_keys_fingerprint.c.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strong_keys_support.h"
#include "tier_support.h"
#include "tier/tier.h"

/* ------------------------------------------------------------------------ */
/* The colliding pair. */

static void fast_mode_collides(void **state) {
  (void)state;
  make_pair();
  assert_memory_not_equal(w_a, w_b, CONST_LEN);
  ccache_key a = fast_graph(w_a), b = fast_graph(w_b);
  printf("fast keys: A %016llx%016llx  B %016llx%016llx\n", (unsigned long long)a.hi,
         (unsigned long long)a.lo, (unsigned long long)b.hi, (unsigned long long)b.lo);
  assert_true(key_eq(a, b));
  /* Not an accident of this one pattern: every delta collides. */
  unsigned char w_c[CONST_LEN];
  plant(w_c, CONST_LEN, NODE_PREFIX, 2, 1, 3, 77777);
  assert_true(key_eq(fast_graph(w_c), a));
}

static void fast_builder_collides(void **state) {
  (void)state;
  need_strong_fp();
  /* A 1000-byte bytes field: lane 3, stripes 2 and 5. */
  static unsigned char x[1000], y[1000];
  plant(x, sizeof x, BUILDER_PREFIX, 3, 2, 5, 0);
  plant(y, sizeof y, BUILDER_PREFIX, 3, 2, 5, 9);
  ccache_fp f;
  ccache_key kx, ky;
  ccache_fp_init(&f);
  assert_int_equal(ccache_fp_bytes(&f, x, sizeof x), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&f, &kx), CCACHE_OK);
  ccache_fp_init(&f);
  assert_int_equal(ccache_fp_bytes(&f, y, sizeof y), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&f, &ky), CCACHE_OK);
  assert_true(key_eq(kx, ky));

  ccache_strong_key sx, sy;
  assert_int_equal(ccache_fp_init_strong(&f), CCACHE_OK);
  assert_int_equal(ccache_fp_bytes(&f, x, sizeof x), CCACHE_OK);
  assert_int_equal(ccache_fp_final_strong(&f, &sx), CCACHE_OK);
  assert_int_equal(ccache_fp_init_strong(&f), CCACHE_OK);
  assert_int_equal(ccache_fp_bytes(&f, y, sizeof y), CCACHE_OK);
  assert_int_equal(ccache_fp_final_strong(&f, &sy), CCACHE_OK);
  assert_false(key_eq(sx.key, sy.key));
  assert_false(key_eq(sx.check, sy.check));
}

static void strong_mode_separates(void **state) {
  (void)state;
  need_strong_fp();
  make_pair();
  ccache_strong_key a = strong_graph(w_a), b = strong_graph(w_b);
  assert_false(key_eq(a.key, b.key));
  assert_false(key_eq(a.check, b.check));
}

/* ------------------------------------------------------------------------ */
/* The pair through a cache and its directory tier. */

/* A compile that makes program `id` whatever key it is asked for: which
 * program a lookup returns says which graph was compiled. */
typedef struct graph_compiler {
  int id;
  int calls;
} graph_compiler;

static int compile_graph(void *ud, ccache *c, ccache_key pkey, void **native, uint64_t *cost) {
  (void)c;
  (void)pkey;
  graph_compiler *g = ud;
  g->calls++;
  *native = t_native(g->id);
  *cost = 100;
  return 0;
}

static ccache_tier *disk_at(const char *dir) {
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_OK);
  return t;
}

static ccache *cache_on(t_ctx *ctx, t_codec *tc, const char *dir, uint32_t mode) {
  ccache_codec k = t_codec_make(tc, 64);
  ccache_tier *t = disk_at(dir);
  ccache_config cfg;
  t_config(&cfg, ctx);
  cfg.codec = &k;
  cfg.runtime_tag = "strong-test";
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &t;
  cfg.n_tiers = 1;
  cfg.key_mode = mode;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  return c;
}

/* Entry files (32 hex digits) under dir/ns, recursively one level. */
static int entries_under(const char *dir, const char *ns) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, ns);
  DIR *d = opendir(path);
  if (!d) return 0;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    char sub[1400];
    snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
    DIR *s = opendir(sub);
    if (!s) continue;
    struct dirent *f;
    while ((f = readdir(s)) != NULL)
      if (strlen(f->d_name) == 32) n++;
    closedir(s);
  }
  closedir(d);
  return n;
}

static int goc_fast(ccache *c, ccache_key k, graph_compiler *g) {
  ccache_program *p = NULL;
  assert_int_equal(ccache_program_get_or_compile(c, k, compile_graph, g, &p), CCACHE_OK);
  int id = t_id(ccache_program_native(p));
  ccache_program_release(c, p);
  return id;
}

static int goc_strong(ccache *c, const ccache_strong_key *k, graph_compiler *g) {
  ccache_program *p = NULL;
  assert_int_equal(ccache_program_get_or_compile_strong(c, k, compile_graph, g, &p), CCACHE_OK);
  int id = t_id(ccache_program_native(p));
  ccache_program_release(c, p);
  return id;
}

/* The same, keeping the handle. */
static ccache_program *goc_strong_h(ccache *c, const ccache_strong_key *k, graph_compiler *g) {
  ccache_program *p = NULL;
  assert_int_equal(ccache_program_get_or_compile_strong(c, k, compile_graph, g, &p), CCACHE_OK);
  return p;
}

static void ns_of(bool strong, char out[CCACHE__TIER_NS_MAX]) {
  ccache__tier_ns_mode(ccache__tier_tag_hash("strong-test"), strong, out);
}

/* The attack on the fast mode: graph B is served graph A's program, from
 * memory and from the directory tier (a "fresh process"). */
static void fast_cache_serves_the_wrong_program(void **state) {
  (void)state;
  make_pair();
  char *dir = t_tempdir("fastcoll");
  t_ctx ctx = {0};
  t_codec tc = {0};
  graph_compiler ga = {1, 0}, gb = {2, 0};
  ccache *c = cache_on(&ctx, &tc, dir, CCACHE_KEYS_FAST);
  assert_int_equal(goc_fast(c, fast_graph(w_a), &ga), 1);
  assert_int_equal(goc_fast(c, fast_graph(w_b), &gb), 1); /* A's program for B */
  assert_int_equal(gb.calls, 0);
  t_close(c);
  char ns[CCACHE__TIER_NS_MAX];
  ns_of(false, ns);
  assert_int_equal(entries_under(dir, ns), 1);

  t_ctx ctx2 = {0};
  t_codec tc2 = {0};
  c = cache_on(&ctx2, &tc2, dir, CCACHE_KEYS_FAST);
  assert_int_equal(goc_fast(c, fast_graph(w_b), &gb), 1); /* from the tier */
  assert_int_equal(gb.calls, 0);
  assert_int_equal(t_stats(c).tier_hits, 1);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

static void strong_cache_keeps_them_apart(void **state) {
  (void)state;
  need_strong_fp();
  make_pair();
  char *dir = t_tempdir("strongcoll");
  t_ctx ctx = {0};
  t_codec tc = {0};
  graph_compiler ga = {1, 0}, gb = {2, 0};
  ccache_strong_key ka = strong_graph(w_a), kb = strong_graph(w_b);
  ccache *c = cache_on(&ctx, &tc, dir, CCACHE_KEYS_STRONG);
  ccache_program *pa = goc_strong_h(c, &ka, &ga), *pb = goc_strong_h(c, &kb, &gb);
  assert_int_equal(t_id(ccache_program_native(pa)), 1);
  assert_int_equal(t_id(ccache_program_native(pb)), 2);
  assert_int_equal(ga.calls, 1);
  assert_int_equal(gb.calls, 1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.program_compiles, 2);
  assert_int_equal(s.tier_writes, 2);

  /* The closure table too: one entry per graph, each with its program. */
  ccache_program *fa = NULL;
  assert_int_equal(ccache_program_fetch_strong(c, &ka, &fa), CCACHE_OK);
  assert_ptr_equal(fa, pa);
  ccache_program_release(c, fa);
  assert_int_equal(ccache_put_strong(c, &ka, t_closure(11), pa), CCACHE_OK);
  assert_int_equal(ccache_put_strong(c, &kb, t_closure(12), pb), CCACHE_OK);
  ccache_lease la = {0}, lb = {0};
  assert_int_equal(ccache_fetch_strong(c, &ka, &la), CCACHE_OK);
  assert_int_equal(ccache_fetch_strong(c, &kb, &lb), CCACHE_OK);
  assert_int_equal(t_id(la.closure), 11);
  assert_int_equal(t_id(la.native), 1);
  assert_int_equal(t_id(lb.closure), 12);
  assert_int_equal(t_id(lb.native), 2);
  ccache_lease_release(c, &la);
  ccache_lease_release(c, &lb);
  ccache_program_release(c, pa);
  ccache_program_release(c, pb);
  assert_int_equal(t_stats(c).items, 2);
  t_check(c, &ctx);
  t_close(c);

  char ns[CCACHE__TIER_NS_MAX], fast_ns[CCACHE__TIER_NS_MAX];
  ns_of(true, ns);
  ns_of(false, fast_ns);
  assert_non_null(strstr(ns, "/strong-"));
  assert_int_equal(entries_under(dir, ns), 2);
  assert_int_equal(entries_under(dir, fast_ns), 0);

  /* A fresh strong cache loads each graph's own program from the tier. */
  t_ctx ctx2 = {0};
  t_codec tc2 = {0};
  graph_compiler none = {99, 0};
  c = cache_on(&ctx2, &tc2, dir, CCACHE_KEYS_STRONG);
  assert_int_equal(goc_strong(c, &kb, &none), 2);
  assert_int_equal(goc_strong(c, &ka, &none), 1);
  assert_int_equal(none.calls, 0);
  assert_int_equal(t_stats(c).tier_hits, 2);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* Two strong keys equal in their first 128 bits (as a 2^64 search could
 * make them) are two entries everywhere: the closure table, the program
 * table, the flights and the tier entry's header. */
static void same_first_half_is_another_key(void **state) {
  (void)state;
  char *dir = t_tempdir("halfcoll");
  t_ctx ctx = {0};
  t_codec tc = {0};
  ccache_strong_key k1 = {{5, 6}, {7, 8}}, k2 = {{5, 6}, {7, 9}};
  graph_compiler g1 = {1, 0}, g2 = {2, 0};
  ccache *c = cache_on(&ctx, &tc, dir, CCACHE_KEYS_STRONG);
  ccache_program *p = goc_strong_h(c, &k1, &g1);
  assert_int_equal(goc_strong(c, &k2, &g2), 2); /* not k1's program */
  assert_int_equal(t_id(ccache_program_native(p)), 1);
  assert_int_equal(ccache_put_strong(c, &k1, t_closure(1), p), CCACHE_OK);
  ccache_lease l = {0};
  assert_int_equal(ccache_fetch_strong(c, &k2, &l), CCACHE_MISS);
  assert_int_equal(ccache_remove_strong(c, &k2), CCACHE_MISS);
  assert_int_equal(ccache_fetch_strong(c, &k1, &l), CCACHE_OK);
  ccache_lease_release(c, &l);
  ccache_program_release(c, p);
  t_close(c);

  /* The tier stores both under the one 128-bit name (the disk tier names
   * files by key), so the second write replaced the first: a reader of k1
   * finds k2's entry, whose header says k2, and must not load it. */
  t_ctx ctx2 = {0};
  t_codec tc2 = {0};
  graph_compiler g3 = {3, 0};
  c = cache_on(&ctx2, &tc2, dir, CCACHE_KEYS_STRONG);
  assert_int_equal(goc_strong(c, &k1, &g3), 3); /* compiled, not k2's program */
  assert_int_equal(g3.calls, 1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_corrupt, 1);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* A fast cache and a strong one on one directory never see each other's
 * entries, whatever the keys. */
static void modes_have_separate_namespaces(void **state) {
  (void)state;
  char *dir = t_tempdir("nsmode");
  t_ctx ctx = {0};
  t_codec tc = {0};
  graph_compiler g1 = {1, 0}, g2 = {2, 0};
  ccache_strong_key sk = {{0x1234, 0x5678}, {0, 0}};
  ccache *c = cache_on(&ctx, &tc, dir, CCACHE_KEYS_FAST);
  assert_int_equal(goc_fast(c, sk.key, &g1), 1);
  t_close(c);
  t_ctx ctx2 = {0};
  t_codec tc2 = {0};
  c = cache_on(&ctx2, &tc2, dir, CCACHE_KEYS_STRONG);
  assert_int_equal(goc_strong(c, &sk, &g2), 2); /* compiled: the fast entry is elsewhere */
  assert_int_equal(g2.calls, 1);
  assert_int_equal(t_stats(c).tier_hits, 0);
  assert_int_equal(t_stats(c).tier_corrupt, 0);
  t_close(c);
  char ns[CCACHE__TIER_NS_MAX];
  ns_of(false, ns);
  assert_int_equal(entries_under(dir, ns), 1);
  ns_of(true, ns);
  assert_int_equal(entries_under(dir, ns), 1);
  t_rmrf(dir);
  free(dir);
}

/* A strong entry's header holds all 256 bits; a fast entry copied into the
 * strong namespace (or a strong one checked as fast) is not ours. */
static void strong_entry_format(void **state) {
  (void)state;
  ccache_strong_key k = {{0x0102030405060708ull, 0x1112131415161718ull},
                         {0x2122232425262728ull, 0x3132333435363738ull}};
  static const unsigned char payload[3] = {9, 8, 7};
  size_t n = ccache__tier_entry_len_mode(3, true);
  assert_int_equal(n, CCACHE__TIER_HDR_STRONG + 3 + CCACHE__TIER_SUM);
  unsigned char *e = malloc(n);
  ccache__tier_frame_mode(e, &k, true, 42, 1, payload, 3);
  assert_int_equal(e[12], CCACHE__TIER_HDR_STRONG);
  assert_int_equal(le64(e + 16), k.key.lo);
  assert_int_equal(le64(e + 24), k.key.hi);
  assert_int_equal(le64(e + 56), k.check.lo);
  assert_int_equal(le64(e + 64), k.check.hi);
  const void *p = NULL;
  size_t plen = 0;
  assert_int_equal(ccache__tier_verify_mode(e, n, &k, true, 42, &p, &plen), CCACHE__ENTRY_OK);
  assert_int_equal(plen, 3);
  assert_memory_equal(p, payload, 3);
  ccache_strong_key other = k;
  other.check.hi ^= 1;
  assert_int_equal(ccache__tier_verify_mode(e, n, &other, true, 42, &p, &plen),
                   CCACHE__ENTRY_CORRUPT);
  assert_int_equal(ccache__tier_verify_mode(e, n, &k, false, 42, &p, &plen), CCACHE__ENTRY_CORRUPT);
  free(e);
  size_t fn = ccache__tier_entry_len(3);
  unsigned char *f = malloc(fn);
  ccache__tier_frame(f, k.key, 42, 1, payload, 3);
  assert_int_equal(ccache__tier_verify_mode(f, fn, &k, true, 42, &p, &plen), CCACHE__ENTRY_CORRUPT);
  free(f);
}

/* ------------------------------------------------------------------------ */
/* Refusals: one cache, one kind of key. */

static int never_compile(void *ud, ccache *c, ccache_key key, void **closure,
                         ccache_program **program) {
  (void)ud, (void)c, (void)key, (void)closure, (void)program;
  fail_msg("a refused call ran its compile");
  return -1;
}

static void modes_refuse_the_other_kind(void **state) {
  (void)state;
  t_ctx ctx = {0};
  ccache_config cfg;
  t_config(&cfg, &ctx);
  cfg.key_mode = CCACHE_KEYS_STRONG;
  ccache *s = NULL;
  assert_int_equal(ccache_open(&cfg, &s), CCACHE_OK);
  ccache *f = t_open(&ctx, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache_strong_key sk = {{1, 2}, {3, 4}};
  ccache_program *p = NULL;
  graph_compiler g = {1, 0};
  ccache_lease l = {0};
  /* Fast calls on the strong cache. */
  assert_int_equal(ccache_program_intern(s, sk.key, t_native(1), 1, &p), CCACHE_EINVAL);
  assert_int_equal(ccache_program_fetch(s, sk.key, &p), CCACHE_EINVAL);
  assert_int_equal(ccache_program_get_or_compile(s, sk.key, compile_graph, &g, &p), CCACHE_EINVAL);
  assert_int_equal(ccache_program_intern_strong(s, &sk, t_native(1), 1, &p), CCACHE_OK);
  assert_int_equal(ccache_put(s, sk.key, t_closure(1), p), CCACHE_EINVAL);
  assert_int_equal(ccache_put_strong(s, &sk, t_closure(2), p), CCACHE_OK);
  assert_int_equal(ccache_fetch(s, sk.key, &l), CCACHE_EINVAL);
  assert_null(l.closure);
  assert_int_equal(ccache_remove(s, sk.key), CCACHE_EINVAL);
  assert_int_equal(ccache_get_or_compile(s, sk.key, never_compile, NULL, &l), CCACHE_EINVAL);
  assert_int_equal(ccache_get_or_compile_strong(f, &sk, never_compile, NULL, &l), CCACHE_EINVAL);
  assert_int_equal(ccache_fetch_strong(s, &sk, &l), CCACHE_OK);
  assert_int_equal(t_id(l.closure), 2);
  ccache_lease_release(s, &l);
  assert_int_equal(ccache_fetch_strong(s, NULL, &l), CCACHE_EINVAL);
  assert_int_equal(ccache_remove_strong(s, &sk), CCACHE_OK);
  /* Strong calls on the fast cache. */
  ccache_program *q = t_intern(f, 1, 5, 1);
  ccache_program *none = NULL;
  assert_int_equal(ccache_program_fetch_strong(f, &sk, &none), CCACHE_EINVAL);
  assert_int_equal(ccache_put_strong(f, &sk, t_closure(3), q), CCACHE_EINVAL);
  t_put(f, 1, 4, q);
  ccache_strong_key fk = {K(1), {0, 0}};
  assert_int_equal(ccache_fetch_strong(f, &fk, &l), CCACHE_EINVAL);
  assert_int_equal(ccache_remove_strong(f, &fk), CCACHE_EINVAL);
  assert_int_equal(t_fetch_id(f, 1), 4);
  ccache_program_release(f, q);
  ccache_program_release(s, p);
  t_close(f);
  t_close(s);
  /* A mode that is neither. */
  cfg.key_mode = 2;
  assert_int_equal(ccache_open(&cfg, &s), CCACHE_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fast_mode_collides),
      cmocka_unit_test(fast_cache_serves_the_wrong_program),
      cmocka_unit_test(fast_builder_collides),
      cmocka_unit_test(strong_mode_separates),
      cmocka_unit_test(strong_cache_keeps_them_apart),
      cmocka_unit_test(same_first_half_is_another_key),
      cmocka_unit_test(modes_have_separate_namespaces),
      cmocka_unit_test(strong_entry_format),
      cmocka_unit_test(modes_refuse_the_other_kind),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
