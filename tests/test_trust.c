/*
 * test_trust.c - signed tier entries on the directory tier (issue 21): key
 * files and the key tool, a forged entry (valid checksum, unsigned or
 * signed by a key not trusted) rejected before the codec, an entry moved
 * to another key's place rejected, key rotation, and the roles (one signer,
 * three readers) with exact compile counts.
 *
 * TRUST_ON_MAIN builds the entry tests against a library without trust
 * (trust_support.h): they then fail, which is what they guard against.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

typedef struct fixture {
  char *keys, *dir;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  f->keys = t_tempdir("trust-keys");
  f->dir = t_tempdir("trust-cache");
  tr_keys(f->keys, "old");
  tr_keys(f->keys, "new");
  tr_keys(f->keys, "other");
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  t_rmrf(f->keys);
  t_rmrf(f->dir);
  free(f->keys);
  free(f->dir);
  free(f);
  return 0;
}

/* ------------------------------------------------------------ entries */

/* A forged entry: the right key, tag and checksum, no signature; then one
 * signed by a key the reader does not trust.  Neither reaches the codec,
 * neither is removed, each is one compile. */
static void forged_entry_rejected_disk(void **state) {
  fixture *f = *state;
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
  fixture *f = *state;
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
  fixture *f = *state;
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
  fixture *f = *state;
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
  fixture *f = *state;
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

/* ------------------------------------------------------------ keys */

static void key_files(void **state) {
  fixture *f = *state;
  char sec[1024], pub[1024], bad[1024];
  snprintf(sec, sizeof sec, "%s/old.sec", f->keys);
  snprintf(pub, sizeof pub, "%s/old.pub", f->keys);
  snprintf(bad, sizeof bad, "%s/bad", f->keys);
  struct stat st;
  assert_int_equal(stat(sec, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  ccache_trust *t = NULL;
  assert_int_equal(ccache_trust_new(&t), CCACHE_OK);
  /* A secret file readable by the group is refused, naming it. */
  assert_int_equal(chmod(sec, 0640), 0);
  assert_int_equal(ccache_trust_set_signing_key_file(t, sec), CCACHE_EPERM);
  assert_non_null(strstr(ccache_error_detail(), sec));
  assert_non_null(strstr(ccache_error_detail(), "0640"));
  assert_int_equal(chmod(sec, 0600), 0);
  /* The public file (0644) given as the secret one is named for what it
   * is (not "not private"); private, it is still not a secret key; and a
   * secret is not a public key. */
  assert_int_equal(ccache_trust_set_signing_key_file(t, pub), CCACHE_EINVAL);
  print_message("the public file as the signing key: %s\n", ccache_error_detail());
  assert_non_null(strstr(ccache_error_detail(), "is a public key file"));
  assert_null(strstr(ccache_strerror(CCACHE_EPERM), "tier's directory"));
  assert_int_equal(chmod(pub, 0600), 0);
  assert_int_equal(ccache_trust_set_signing_key_file(t, pub), CCACHE_EINVAL);
  assert_int_equal(chmod(pub, 0644), 0);
  assert_int_equal(ccache_trust_add_key_file(t, sec), CCACHE_EINVAL);
  assert_int_equal(ccache_trust_set_signing_key_file(t, sec), CCACHE_OK);
  assert_int_equal(ccache_trust_set_signing_key_file(t, sec), CCACHE_EINVAL); /* set already */
  assert_int_equal(ccache_trust_add_key_file(t, pub), CCACHE_OK); /* its own: no duplicate */
  assert_int_equal(ccache_trust_add_key_file(t, bad), CCACHE_EIO);
  assert_non_null(strstr(ccache_error_detail(), bad));
  assert_int_equal(ccache_trust_add_key(t, "name:AAAA"), CCACHE_EINVAL);
  assert_int_equal(ccache_trust_add_key(t, "bad name:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
                   CCACHE_EINVAL);
  assert_int_equal(ccache_trust_add_key(t, "k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"),
                   CCACHE_OK);
  /* Never over an existing file. */
  assert_int_equal(ccache_trust_generate("x", sec, bad), CCACHE_EIO);
  assert_int_equal(ccache_trust_generate("bad name", bad, bad), CCACHE_EINVAL);
  assert_int_equal(access(bad, F_OK), -1);
  ccache_trust_free(t);

  /* An empty trust object is refused at open. */
  assert_int_equal(ccache_trust_new(&t), CCACHE_OK);
  t_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ccache_config cfg;
  t_config(&cfg, &ctx);
  cfg.trust = t;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c),
                   ccache_trust_available() ? CCACHE_EINVAL : CCACHE_ENOTSUP);
  assert_null(c);
  ccache_trust_free(t);
}

/* The installed tool makes a pair a cache can use. */
static void keys_tool(void **state) {
  fixture *f = *state;
  char sec[1024], pub[1024], cmd[4096];
  snprintf(sec, sizeof sec, "%s/tool.sec", f->keys);
  snprintf(pub, sizeof pub, "%s/tool.pub", f->keys);
  snprintf(cmd, sizeof cmd, "'%s' generate tool-key '%s' '%s' >/dev/null", CCACHE_KEYS_TOOL, sec,
           pub);
  int st = system(cmd);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  snprintf(cmd, sizeof cmd, "'%s' generate tool-key '%s' '%s' 2>/dev/null", CCACHE_KEYS_TOOL, sec,
           pub);
  st = system(cmd); /* the files exist now */
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
  snprintf(cmd, sizeof cmd, "'%s' 2>/dev/null", CCACHE_KEYS_TOOL);
  st = system(cmd);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  /* --help and -h: the usage on stdout, status 0. */
  for (int i = 0; i < 2; i++) {
    char out[1024];
    snprintf(out, sizeof out, "%s/help.txt", f->keys);
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>/dev/null", CCACHE_KEYS_TOOL, i ? "-h" : "--help",
             out);
    st = system(cmd);
    size_t hn = 0;
    char *help = (char *)t_slurp(out, &hn);
    assert_non_null(help);
    print_message("closure-cache-keys %s: exit %d, %zu bytes on stdout\n", i ? "-h" : "--help",
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1, hn);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_non_null(strstr(help, "usage: closure-cache-keys generate"));
    free(help);
    unlink(out);
  }
  size_t n = 0;
  char *text = (char *)t_slurp(pub, &n);
  assert_non_null(text);
  assert_true(strncmp(text, "tool-key:", 9) == 0 && text[n - 1] == '\n');
  free(text);
  ccache_trust *t = NULL;
  assert_int_equal(ccache_trust_new(&t), CCACHE_OK);
  assert_int_equal(ccache_trust_set_signing_key_file(t, sec), CCACHE_OK);
  assert_int_equal(ccache_trust_add_key_file(t, pub), CCACHE_OK);
  ccache_trust_free(t);
}
/* Lease tokens: a reader honours a token for its key, by a trusted key,
 * issued at most lease_ms + skew ago (a copied token is not honoured for
 * longer), never one from the future beyond the skew. */
static void lease_tokens(void **state) {
  fixture *f = *state;
  ccache_trust *w = tr_trust(f->keys, "old", NULL);
  const char *trusted[] = {"old", NULL}, *others[] = {"other", NULL};
  ccache_trust *r = tr_trust(f->keys, NULL, trusted), *o = tr_trust(f->keys, NULL, others);
  const uint64_t now = 1800000000000ull, lease = 10000, skew = CCACHE__LEASE_SKEW_MS;
  unsigned char tok[CCACHE__LEASE_TOKEN], ns[CCACHE__NS_DIGEST], other_ns[CCACHE__NS_DIGEST];
  ccache__trust_ns_digest(false, "tag", "redis:ccache", 12, ns);
  ccache__trust_ns_digest(false, "tag", "redis:other", 11, other_ns);
  ccache__trust_lease_token(w, PK(50), ns, now, tok);
  assert_true(ccache__trust_lease_ok(r, PK(50), ns, tok, sizeof tok, now, lease));
  assert_true(ccache__trust_lease_ok(r, PK(50), ns, tok, sizeof tok, now + lease + skew, lease));
  assert_false(
      ccache__trust_lease_ok(r, PK(50), ns, tok, sizeof tok, now + lease + skew + 1, lease));
  assert_true(ccache__trust_lease_ok(r, PK(50), ns, tok, sizeof tok, now - skew, lease));
  assert_false(ccache__trust_lease_ok(r, PK(50), ns, tok, sizeof tok, now - skew - 1, lease));
  assert_false(
      ccache__trust_lease_ok(r, PK(51), ns, tok, sizeof tok, now, lease)); /* another key */
  assert_false(
      ccache__trust_lease_ok(o, PK(50), ns, tok, sizeof tok, now, lease)); /* not trusted */
  assert_false(ccache__trust_lease_ok(r, PK(50), ns, tok, sizeof tok - 1, now, lease));
  assert_false(ccache__trust_lease_ok(r, PK(50), other_ns, tok, sizeof tok, now, lease));
  for (size_t i = 0; i < sizeof tok; i++) { /* any byte changed */
    tok[i] ^= 0x20;
    assert_false(ccache__trust_lease_ok(r, PK(50), ns, tok, sizeof tok, now, lease));
    tok[i] ^= 0x20;
  }
  ccache_trust_free(w);
  ccache_trust_free(r);
  ccache_trust_free(o);
}

/* The default instance's variables, in a child (the instance is
 * process-wide).  The child reports the first check that failed. */
static const char *g_keys;

#define CHILD_CHECK(cond)                                                                    \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "line %d: %s (detail: %s)\n", __LINE__, #cond, ccache_error_detail()); \
      _exit(1);                                                                              \
    }                                                                                        \
  } while (0)

static void default_env_child(void) {
  char sec[1024], pub[1024], pw[1024], list[2100];
  snprintf(sec, sizeof sec, "%s/old.sec", g_keys);
  snprintf(pub, sizeof pub, "%s/old.pub", g_keys);
  snprintf(pw, sizeof pw, "%s/redis.pw", g_keys);
  t_codec tc = {0};
  ccache_codec k = t_codec_make(&tc, PAYLOAD);
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.codec = &k;
  CHILD_CHECK(ccache_default_init(&cfg) == CCACHE_OK);
  ccache *c = NULL;
  /* A secret file others may read: refused, naming the variable. */
  CHILD_CHECK(chmod(sec, 0644) == 0);
  setenv("CLOSURE_CACHE_SIGNING_KEY_FILE", sec, 1);
  CHILD_CHECK(ccache_default(&c) == CCACHE_EPERM);
  CHILD_CHECK(strstr(ccache_error_detail(), "CLOSURE_CACHE_SIGNING_KEY_FILE") != NULL);
  CHILD_CHECK(chmod(sec, 0600) == 0);
  /* A missing trusted key file in the list. */
  snprintf(list, sizeof list, "%s,%s/absent.pub", pub, g_keys);
  setenv("CLOSURE_CACHE_TRUSTED_KEYS", list, 1);
  CHILD_CHECK(ccache_default(&c) == CCACHE_EIO);
  CHILD_CHECK(strstr(ccache_error_detail(), "CLOSURE_CACHE_TRUSTED_KEYS") != NULL);
  /* A Redis password file readable by others. */
  snprintf(list, sizeof list, "%s", pub);
  setenv("CLOSURE_CACHE_TRUSTED_KEYS", list, 1);
  FILE *f = fopen(pw, "w");
  CHILD_CHECK(f && fputs("secret\n", f) >= 0 && fclose(f) == 0);
  CHILD_CHECK(chmod(pw, 0644) == 0);
  setenv("CLOSURE_CACHE_REDIS", "127.0.0.1:1", 1);
  setenv("CLOSURE_CACHE_REDIS_USER", "ccache", 1);
  setenv("CLOSURE_CACHE_REDIS_PASSWORD_FILE", pw, 1);
  CHILD_CHECK(ccache_default(&c) == CCACHE_EPERM);
  CHILD_CHECK(strstr(ccache_error_detail(), "CLOSURE_CACHE_REDIS_PASSWORD_FILE") != NULL);
  CHILD_CHECK(chmod(pw, 0600) == 0);
  CHILD_CHECK(ccache_default(&c) == CCACHE_OK);
  /* A writer: it compiles (the server is absent: a tier error) and tries
   * to publish (no tier_unpublished). */
  t_compiler comp = {0};
  ccache_program *p = NULL;
  CHILD_CHECK(ccache_program_get_or_compile(c, PK(40), t_compile, &comp, &p) == CCACHE_OK);
  ccache_program_release(c, p);
  ccache_stats s;
  ccache_stats_init(&s);
  CHILD_CHECK(ccache_stats_get(c, &s) == CCACHE_OK);
  CHILD_CHECK(comp.calls == 1 && s.tier_unpublished == 0 && s.tier_errors >= 1);
  _exit(0);
}

static void default_env_keys(void **state) {
  fixture *f = *state;
  g_keys = f->keys;
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) default_env_child();
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}
#endif

#ifndef TRUST_ON_MAIN
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
      cmocka_unit_test_setup_teardown(forged_entry_rejected_disk, setup, teardown),
      cmocka_unit_test_setup_teardown(moved_entry_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(strong_check_half_signed, setup, teardown),
#ifndef TRUST_ON_MAIN
      cmocka_unit_test_setup_teardown(rotation, setup, teardown),
      cmocka_unit_test_setup_teardown(one_signer_three_readers_disk, setup, teardown),
      cmocka_unit_test_setup_teardown(key_files, setup, teardown),
      cmocka_unit_test_setup_teardown(keys_tool, setup, teardown),
      cmocka_unit_test_setup_teardown(default_env_keys, setup, teardown),
      cmocka_unit_test_setup_teardown(lease_tokens, setup, teardown),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
