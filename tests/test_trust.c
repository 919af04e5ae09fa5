/*
 * test_trust.c - signed tier entries on the directory tier (issue 21): a
 * forged entry (valid checksum, unsigned or signed by a key not trusted)
 * rejected before the codec, an entry moved to another key's place
 * rejected, a strong entry's check half rewritten, key rotation, and the
 * roles (one signer, three readers) with exact compile counts; a build
 * without libsodium fails closed.  Key files, the key tool, the default
 * instance's key variables and lease tokens: test_trust_keys.c.
 *
 * TRUST_ON_MAIN builds the entry tests against a library without trust
 * (trust_support.h): they then fail, which is what they guard against.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_support.h"
#include "tier/tier.h"
#include "trust_support.h"
#ifndef TRUST_ON_MAIN
#include "tier/tier_trust.h"
#endif

#define PAYLOAD 256

/* Write an entry file at key's documented place (its folder made). */
static void plant(const char *dir, ccache_key k, const void *e, size_t len) {
  char path[1024];
  t_entry_path(dir, T_DISK_TAG, k, path, sizeof path);
  char folder[1024];
  snprintf(folder, sizeof folder, "%s", path);
  *strrchr(folder, '/') = '\0';
  mkdir(folder, 0700);
  t_spit(path, e, len);
}

/* A cache over its own tier of dir, with trust t (NULL: none). */
static ccache *open_over(t_ctx *ctx, t_codec *tc, const char *dir, ccache_trust *t) {
  ccache_codec k = t_codec_make(tc, PAYLOAD);
  ccache_tier *tier = t_disk_tier(dir, CCACHE_UNBOUNDED, 60000);
  ccache_config cfg;
  t_config(&cfg, ctx);
  cfg.codec = &k;
  cfg.runtime_tag = T_DISK_TAG;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &tier;
  cfg.n_tiers = 1;
  SET_TRUST(&cfg, t);
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  return c;
}

/* ------------------------------------------------------------ entries */

/* A forged entry: the right key, tag and checksum, no signature; then one
 * signed by a key the reader does not trust.  Neither reaches the codec,
 * neither is removed, each is one compile. */
static void forged_entry_rejected_disk(void **state) {
  tr_fixture *f = *state;
  t_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  size_t len = 0;
  unsigned char *e = t_entry(PK(1), T_DISK_TAG, 666, PAYLOAD, &len);
  char path[1024];
  t_entry_path(f->dir, T_DISK_TAG, PK(1), path, sizeof path);
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *warm = open_over(&ctx, &tc, f->dir, NULL); /* makes the folders */
  t_close(warm);
  plant(f->dir, PK(1), e, len);

  const char *trusted[] = {"old", NULL};
  ccache_trust *rt = tr_trust(f->keys, NULL, trusted);
  memset(&tc, 0, sizeof tc);
  ccache *r = open_over(&ctx, &tc, f->dir, rt);
  ccache_trust_free(rt);
  assert_int_equal(t_goc(r, PK(1), &comp, CCACHE_OK), 1); /* compiled, not 666 */
  assert_int_equal(comp.calls, 1);
  assert_int_equal(tc.decodes, 0);
  ccache_stats s = t_stats(r);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_corrupt, 0);
#ifndef TRUST_ON_MAIN
  assert_int_equal(s.tier_rejected, 1);
  assert_int_equal(s.tier_unpublished, 1);
#endif
  size_t got = 0;
  unsigned char *still = t_slurp(path, &got); /* a reader deletes nothing */
  assert_non_null(still);
  assert_true(got == len && memcmp(still, e, len) == 0);
  free(still);
  t_close(r);

  /* Signed by "other", which the reader does not trust. */
  const char *none[] = {NULL};
  ccache_trust *ot = tr_trust(f->keys, "other", none);
  t_codec tw = {0};
  ccache *w = open_over(&ctx, &tw, f->dir, ot);
  ccache_trust_free(ot);
  t_compiler wc = {0};
  assert_int_equal(t_goc(w, PK(2), &wc, CCACHE_OK), 2);
  assert_int_equal(wc.calls, 1);
  t_close(w);
  rt = tr_trust(f->keys, NULL, trusted);
  memset(&tc, 0, sizeof tc);
  memset(&comp, 0, sizeof comp);
  r = open_over(&ctx, &tc, f->dir, rt);
  ccache_trust_free(rt);
  assert_int_equal(t_goc(r, PK(2), &comp, CCACHE_OK), 2);
  assert_int_equal(comp.calls, 1);
  assert_int_equal(tc.decodes, 0);
#ifndef TRUST_ON_MAIN
  assert_int_equal(t_stats(r).tier_rejected, 1);
#endif
  t_close(r);
  free(e);
}

/* A signed entry of PK(3) copied to PK(4)'s place with its header key
 * rewritten and its checksum recomputed: main loads program 3 for key 4. */
static void moved_entry_rejected(void **state) {
  tr_fixture *f = *state;
  t_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  const char *trusted[] = {"old", NULL};
  ccache_trust *wt = tr_trust(f->keys, "old", NULL);
  t_codec tw = {0};
  t_compiler wc = {0};
  ccache *w = open_over(&ctx, &tw, f->dir, wt);
  ccache_trust_free(wt);
  assert_int_equal(t_goc(w, PK(3), &wc, CCACHE_OK), 3);
  t_close(w);
  char from[1024];
  t_entry_path(f->dir, T_DISK_TAG, PK(3), from, sizeof from);
  size_t len = 0;
  unsigned char *e = t_slurp(from, &len);
  assert_non_null(e);
  tr_move(e, len, PK(4));
  plant(f->dir, PK(4), e, len);
  free(e);

  ccache_trust *rt = tr_trust(f->keys, NULL, trusted);
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *r = open_over(&ctx, &tc, f->dir, rt);
  ccache_trust_free(rt);
  assert_int_equal(t_goc(r, PK(4), &comp, CCACHE_OK), 4); /* main: 3, uncompiled */
  assert_int_equal(comp.calls, 1);
  assert_int_equal(tc.decodes, 0);
#ifndef TRUST_ON_MAIN
  assert_int_equal(t_stats(r).tier_rejected, 1);
  /* The original, in its own place, loads. */
  assert_int_equal(t_goc(r, PK(3), &comp, CCACHE_OK), 3);
  assert_int_equal(comp.calls, 1);
  assert_int_equal(tc.decodes, 1);
#endif
  t_close(r);
}

/* A strong cache's entry: its header holds the key's check half, which
 * the signature covers.  The entry's check half rewritten (checksum
 * recomputed) to match another strong key with the same first half: main
 * loads it for that key; with keys it is rejected. */
static ccache *open_strong(t_ctx *ctx, t_codec *tc, const char *dir, ccache_trust *t) {
  ccache_codec k = t_codec_make(tc, PAYLOAD);
  ccache_tier *tier = t_disk_tier(dir, CCACHE_UNBOUNDED, 60000);
  ccache_config cfg;
  t_config(&cfg, ctx);
  cfg.codec = &k;
  cfg.runtime_tag = T_DISK_TAG;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &tier;
  cfg.n_tiers = 1;
  cfg.key_mode = CCACHE_KEYS_STRONG;
  SET_TRUST(&cfg, t);
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  return c;
}

static int goc_strong(ccache *c, ccache_strong_key k, t_compiler *comp) {
  ccache_program *p = NULL;
  assert_int_equal(ccache_program_get_or_compile_strong(c, &k, t_compile, comp, &p), CCACHE_OK);
  int id = t_id(ccache_program_native(p));
  ccache_program_release(c, p);
  return id;
}

static void strong_check_half_signed(void **state) {
  tr_fixture *f = *state;
  t_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ccache_strong_key a = {PK(70), {1, 2}}, b = {PK(70), {3, 4}};
  ccache_trust *wt = tr_trust(f->keys, "old", NULL);
  t_codec tw = {0};
  t_compiler wc = {0};
  ccache *w = open_strong(&ctx, &tw, f->dir, wt);
  ccache_trust_free(wt);
  assert_int_equal(goc_strong(w, a, &wc), 70);
  assert_int_equal(wc.calls, 1);
  t_close(w);
  /* The strong namespace's file of PK(70). */
  char ns[CCACHE__TIER_NS_MAX], path[1024];
  ccache__tier_ns_mode(ccache__tier_tag_hash(T_DISK_TAG), true, ns);
  char hex[33];
  snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long)PK(70).hi,
           (unsigned long long)PK(70).lo);
  snprintf(path, sizeof path, "%s/%s/%.2s/%s", f->dir, ns, hex, hex);
  size_t len = 0;
  unsigned char *e = t_slurp(path, &len);
  assert_non_null(e);
  const char *trusted[] = {"old", NULL};
  ccache_trust *rt = tr_trust(f->keys, NULL, trusted);
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *r = open_strong(&ctx, &tc, f->dir, rt);
  assert_int_equal(goc_strong(r, a, &comp), 70); /* intact: loaded */
  assert_int_equal(comp.calls, 0);
  assert_int_equal(tc.decodes, 1);
  t_close(r);
  for (int i = 0; i < 8; i++) {
    e[56 + i] = (unsigned char)(b.check.lo >> (8 * i));
    e[64 + i] = (unsigned char)(b.check.hi >> (8 * i));
  }
  tr_reseal(e, len);
  t_spit(path, e, len);
  free(e);
  memset(&tc, 0, sizeof tc);
  r = open_strong(&ctx, &tc, f->dir, rt);
  ccache_trust_free(rt);
  assert_int_equal(goc_strong(r, b, &comp), 70); /* the compile's id is key.lo */
  assert_int_equal(comp.calls, 1);               /* main: 0, program a's bytes for key b */
  assert_int_equal(tc.decodes, 0);
#ifndef TRUST_ON_MAIN
  assert_int_equal(t_stats(r).tier_rejected, 1);
#endif
  t_close(r);
}

#ifndef TRUST_ON_MAIN
/* Rotation: "old" signed PK(10), "new" signed PK(11).  A reader trusting
 * both loads both; one from which "old" was rotated out rejects PK(10) and
 * loads PK(11). */
static void rotation(void **state) {
  tr_fixture *f = *state;
  t_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  const char *signers[2] = {"old", "new"};
  for (int i = 0; i < 2; i++) {
    ccache_trust *wt = tr_trust(f->keys, signers[i], NULL);
    t_codec tw = {0};
    t_compiler wc = {0};
    ccache *w = open_over(&ctx, &tw, f->dir, wt);
    ccache_trust_free(wt);
    assert_int_equal(t_goc(w, PK(10 + (uint64_t)i), &wc, CCACHE_OK), 10 + i);
    assert_int_equal(wc.calls, 1);
    t_close(w);
  }
  const char *both[] = {"old", "new", NULL};
  ccache_trust *rt = tr_trust(f->keys, NULL, both);
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *r = open_over(&ctx, &tc, f->dir, rt);
  ccache_trust_free(rt);
  assert_int_equal(t_goc(r, PK(10), &comp, CCACHE_OK), 10);
  assert_int_equal(t_goc(r, PK(11), &comp, CCACHE_OK), 11);
  assert_int_equal(comp.calls, 0);
  assert_int_equal(tc.decodes, 2);
  assert_int_equal(t_stats(r).tier_rejected, 0);
  t_close(r);

  const char *only_new[] = {"new", NULL};
  rt = tr_trust(f->keys, NULL, only_new);
  memset(&tc, 0, sizeof tc);
  r = open_over(&ctx, &tc, f->dir, rt);
  ccache_trust_free(rt);
  assert_int_equal(t_goc(r, PK(10), &comp, CCACHE_OK), 10);
  assert_int_equal(comp.calls, 1);
  assert_int_equal(t_goc(r, PK(11), &comp, CCACHE_OK), 11);
  assert_int_equal(comp.calls, 1);
  assert_int_equal(tc.decodes, 1);
  ccache_stats s = t_stats(r);
  assert_int_equal(s.tier_rejected, 1);
  assert_int_equal(s.tier_hits, 1);
  t_close(r);

  /* A writer with the new key overwrites the entry it rejected (self-heals). */
  ccache_trust *wt = tr_trust(f->keys, "new", NULL);
  t_codec tw = {0};
  t_compiler wc = {0};
  ccache *w = open_over(&ctx, &tw, f->dir, wt);
  ccache_trust_free(wt);
  assert_int_equal(t_goc(w, PK(10), &wc, CCACHE_OK), 10);
  assert_int_equal(wc.calls, 1);
  /* Read twice: the lookup, and again once it holds the compile lock. */
  assert_int_equal(t_stats(w).tier_rejected, 2);
  assert_int_equal(t_stats(w).tier_writes, 1);
  t_close(w);
  rt = tr_trust(f->keys, NULL, only_new);
  memset(&tc, 0, sizeof tc);
  memset(&comp, 0, sizeof comp);
  r = open_over(&ctx, &tc, f->dir, rt);
  ccache_trust_free(rt);
  assert_int_equal(t_goc(r, PK(10), &comp, CCACHE_OK), 10);
  assert_int_equal(comp.calls, 0);
  t_close(r);
}

/* One signer and three readers over one directory.  Readers that miss
 * before the signer published compile each (and publish nothing); after it
 * published they load. */
static void one_signer_three_readers_disk(void **state) {
  tr_fixture *f = *state;
  t_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  const char *trusted[] = {"old", NULL};
  ccache *rd[3];
  t_codec rtc[3];
  memset(rtc, 0, sizeof rtc);
  for (int i = 0; i < 3; i++) {
    ccache_trust *rt = tr_trust(f->keys, NULL, trusted);
    rd[i] = open_over(&ctx, &rtc[i], f->dir, rt);
    ccache_trust_free(rt);
  }
  ccache_trust *wt = tr_trust(f->keys, "old", NULL);
  t_codec wtc = {0};
  ccache *w = open_over(&ctx, &wtc, f->dir, wt);
  ccache_trust_free(wt);
  t_compiler comp = {0};
  /* PK(20): readers first. */
  for (int i = 0; i < 3; i++) assert_int_equal(t_goc(rd[i], PK(20), &comp, CCACHE_OK), 20);
  assert_int_equal(comp.calls, 3);
  assert_int_equal(t_goc(w, PK(20), &comp, CCACHE_OK), 20);
  assert_int_equal(comp.calls, 4);
  /* PK(21): the signer first. */
  memset(&comp, 0, sizeof comp);
  assert_int_equal(t_goc(w, PK(21), &comp, CCACHE_OK), 21);
  for (int i = 0; i < 3; i++) assert_int_equal(t_goc(rd[i], PK(21), &comp, CCACHE_OK), 21);
  assert_int_equal(comp.calls, 1);
  for (int i = 0; i < 3; i++) {
    ccache_stats s = t_stats(rd[i]);
    assert_int_equal(s.tier_hits, 1);
    assert_int_equal(s.tier_unpublished, 1);
    assert_int_equal(s.tier_writes, 0);
    assert_int_equal(s.tier_rejected, 0);
    assert_int_equal(rtc[i].decodes, 1);
    t_close(rd[i]);
  }
  ccache_stats s = t_stats(w);
  assert_int_equal(s.tier_writes, 2);
  assert_int_equal(s.tier_unpublished, 0);
  t_close(w);
}

/* A build without libsodium (CMake CCACHE_SODIUM=OFF) fails closed: no key
 * loads, and a trust object makes ccache_open() refuse. */
static void fails_closed_without_sodium(void **state) {
  (void)state;
  ccache_trust *t = NULL;
  assert_int_equal(ccache_trust_new(&t), CCACHE_OK);
  assert_int_equal(ccache_trust_add_key(t, "k:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
                   CCACHE_ENOTSUP);
  assert_int_equal(ccache_trust_add_key_file(t, "/nonexistent"), CCACHE_ENOTSUP);
  assert_int_equal(ccache_trust_set_signing_key_file(t, "/nonexistent"), CCACHE_ENOTSUP);
  assert_int_equal(ccache_trust_generate("k", "/tmp/x.sec", "/tmp/x.pub"), CCACHE_ENOTSUP);
  t_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ccache_config cfg;
  t_config(&cfg, &ctx);
  cfg.trust = t;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_ENOTSUP);
  assert_non_null(strstr(ccache_error_detail(), "libsodium"));
  assert_null(c);
  ccache_trust_free(t);
}
#endif

int main(void) {
#ifndef TRUST_ON_MAIN
  if (!ccache_trust_available()) {
    const struct CMUnitTest closed[] = {cmocka_unit_test(fails_closed_without_sodium)};
    print_message("this build has no libsodium: only the fail-closed test runs\n");
    return cmocka_run_group_tests(closed, NULL, NULL);
  }
#endif
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(forged_entry_rejected_disk, tr_setup, tr_teardown),
      cmocka_unit_test_setup_teardown(moved_entry_rejected, tr_setup, tr_teardown),
      cmocka_unit_test_setup_teardown(strong_check_half_signed, tr_setup, tr_teardown),
#ifndef TRUST_ON_MAIN
      cmocka_unit_test_setup_teardown(rotation, tr_setup, tr_teardown),
      cmocka_unit_test_setup_teardown(one_signer_three_readers_disk, tr_setup, tr_teardown),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
