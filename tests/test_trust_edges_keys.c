/*
 * test_trust_edges_keys.c - the trust edges of keys (issue 35): key files
 * checked like secrets (owner, mode, a FIFO, a secret key whose halves
 * differ), "nothing signed before T", and CLOSURE_CACHE_TRUSTED_KEYS adding
 * to the program's keys.  Split from test_trust_edges.c, which has the
 * shared tiers refused without keys and the fail-closed cases.
 *
 * Built against a library without issue 35 (ON_MAIN: no
 * CCACHE_TRUST_UNSIGNED in the headers), the same tests compile with the
 * new settings left out: they then fail, which is what they guard against.
 * Every case needs libsodium: without it none runs.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "disk_support.h"
#include "trust_support.h"

#if CCACHE_TEST_SODIUM
#include <sodium.h>
#endif

#ifndef CCACHE_TRUST_UNSIGNED
#define SET_NOT_BEFORE(t, ms) ((void)(t), (void)(ms))
#else
#define SET_NOT_BEFORE(t, ms) assert_int_equal(ccache_trust_set_not_before((t), (ms)), CCACHE_OK)
#endif

#define PAYLOAD 64
#define TAG     "edges-tag"

/* ------------------------------------------------------------- keys */

static int add_pub(const char *path) {
  ccache_trust *t = NULL;
  assert_int_equal(ccache_trust_new(&t), CCACHE_OK);
  int rc = ccache_trust_add_key_file(t, path);
  ccache_trust_free(t);
  return rc;
}

/* Item 3: a public key file others can write, or owned by another user, is
 * refused; a root-owned (or own) 0644 one is fine. */
static void public_key_file_checked_like_a_secret(void **state) {
  tr_fixture *f = *state;
  char pub[1024];
  snprintf(pub, sizeof pub, "%s/old.pub", f->keys);
  assert_int_equal(add_pub(pub), CCACHE_OK); /* 0644, ours */
  const mode_t bad_modes[] = {0666, 0664, 0646};
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(chmod(pub, bad_modes[i]), 0);
    int rc = add_pub(pub);
    print_message("public key mode %04o: %d (%s)\n", (unsigned)bad_modes[i], rc,
                  ccache_error_detail());
    assert_int_equal(rc, CCACHE_EPERM);
    assert_non_null(strstr(ccache_error_detail(), pub));
  }
  assert_int_equal(chmod(pub, 0644), 0);
  if (geteuid() == 0) { /* only root can give the file away */
    assert_int_equal(chown(pub, 65534, 65534), 0);
    int rc = add_pub(pub);
    print_message("public key owned by uid 65534: %d (%s)\n", rc, ccache_error_detail());
    assert_int_equal(rc, CCACHE_EPERM);
    assert_non_null(strstr(ccache_error_detail(), "another user"));
    assert_int_equal(chown(pub, 0, 0), 0);
  }
  assert_int_equal(add_pub(pub), CCACHE_OK);
}

/* Item 3: a secret key file whose public half is another key's: refused
 * (main accepts it, then every signature it makes is rejected). */
static void secret_key_halves_must_match(void **state) {
  tr_fixture *f = *state;
  char old_sec[1024], new_sec[1024], mixed[1024];
  snprintf(old_sec, sizeof old_sec, "%s/old.sec", f->keys);
  snprintf(new_sec, sizeof new_sec, "%s/new.sec", f->keys);
  snprintf(mixed, sizeof mixed, "%s/mixed.sec", f->keys);
  /* The seed of "old" and the public half of "new", re-encoded. */
  size_t n1 = 0, n2 = 0;
  char *a = (char *)t_slurp(old_sec, &n1), *b = (char *)t_slurp(new_sec, &n2);
  assert_non_null(a);
  assert_non_null(b);
#if CCACHE_TEST_SODIUM
  unsigned char ka[64], kb[64];
  size_t got = 0;
  const char *ea = strchr(a, ':') + 1, *eb = strchr(b, ':') + 1;
  assert_int_equal(sodium_base642bin(ka, sizeof ka, ea, strcspn(ea, "\n"), NULL, &got, NULL,
                                     sodium_base64_VARIANT_ORIGINAL),
                   0);
  assert_int_equal(got, 64);
  assert_int_equal(sodium_base642bin(kb, sizeof kb, eb, strcspn(eb, "\n"), NULL, &got, NULL,
                                     sodium_base64_VARIANT_ORIGINAL),
                   0);
  memcpy(ka + 32, kb + 32, 32);
  char line[200];
  sodium_bin2base64(line, sizeof line, ka, sizeof ka, sodium_base64_VARIANT_ORIGINAL);
#else
  char line[200] = "";
#endif
  char text[256];
  snprintf(text, sizeof text, "mixed:%s\n", line);
  int fd = open(mixed, O_WRONLY | O_CREAT | O_EXCL, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  ccache_trust *t = NULL;
  assert_int_equal(ccache_trust_new(&t), CCACHE_OK);
  int rc = ccache_trust_set_signing_key_file(t, mixed);
  print_message("secret key with another key's public half: %d (%s)\n", rc, ccache_error_detail());
  assert_int_equal(rc, CCACHE_EINVAL);
  assert_non_null(strstr(ccache_error_detail(), "halves"));
  assert_int_equal(ccache_trust_set_signing_key_file(t, old_sec), CCACHE_OK);
  ccache_trust_free(t);
  free(a);
  free(b);
}

static void fifo_child(const void *arg) {
  const char *path = arg;
  ccache_trust *t = NULL;
  CHILD_CHECK(ccache_trust_new(&t) == CCACHE_OK);
  CHILD_CHECK(ccache_trust_add_key_file(t, path) == CCACHE_EPERM);
  CHILD_CHECK(strstr(ccache_error_detail(), "not a regular file") != NULL);
  CHILD_CHECK(ccache_trust_set_signing_key_file(t, path) == CCACHE_EPERM);
  ccache_trust_free(t);
}

/* Item 3: a key path that is a FIFO is refused at once (main: open() waits
 * for a writer forever; the child's alarm ends it). */
static void fifo_key_path_refused(void **state) {
  tr_fixture *f = *state;
  char path[1024];
  snprintf(path, sizeof path, "%s/fifo.pub", f->keys);
  assert_int_equal(mkfifo(path, 0600), 0);
  int rc = tr_run_child(fifo_child, path);
  print_message("FIFO key path: child exit %d (142: killed by its 20 s alarm)\n", rc);
  assert_int_equal(rc, 0);
}

/* --------------------------------------------------- entries on disk */

static uint64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static ccache *disk_cache(t_ctx *ctx, t_codec *tc, const char *dir, ccache_trust *t) {
  static ccache_codec k;
  k = t_codec_make(tc, PAYLOAD);
  ccache_tier *tier = t_disk_tier(dir, CCACHE_UNBOUNDED, 60000);
  ccache_config cfg;
  t_config(&cfg, ctx);
  cfg.codec = &k;
  cfg.runtime_tag = TAG;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &tier;
  cfg.n_tiers = 1;
  SET_TRUST(&cfg, t);
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  return c;
}

/* A writer with key `signer` stores PK(n) in dir. */
static void store_signed(const tr_fixture *f, const char *signer, uint64_t n) {
  const char *none[] = {NULL};
  ccache_trust *t = tr_trust(f->keys, signer, none);
  t_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  t_codec tc = {0};
  ccache *w = disk_cache(&ctx, &tc, f->dir, t);
  ccache_trust_free(t);
  t_compiler comp = {0};
  assert_int_equal(t_goc(w, PK(n), &comp, CCACHE_OK), (int)n);
  assert_int_equal(comp.calls, 1);
  t_close(w);
}

/* Item 2: an entry signed at T loads for a reader whose "nothing before"
 * is at or before T, and is rejected (never decoded, one compile) for one
 * whose time is after T. */
static void rollback_not_before(void **state) {
  tr_fixture *f = *state;
  uint64_t t0 = wall_ms();
  store_signed(f, "old", 3);
  uint64_t t1 = wall_ms();
  const char *trusted[] = {"old", NULL};
  for (int late = 0; late < 2; late++) {
    ccache_trust *rt = tr_trust(f->keys, NULL, trusted);
    SET_NOT_BEFORE(rt, late ? t1 + 1 : t0);
    t_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    t_codec tc = {0};
    ccache *r = disk_cache(&ctx, &tc, f->dir, rt);
    ccache_trust_free(rt);
    t_compiler comp = {0};
    assert_int_equal(t_goc(r, PK(3), &comp, CCACHE_OK), 3);
    ccache_stats s = t_stats(r);
    print_message("not before %s: compiles %d, tier_hits %llu, tier_rejected %llu\n",
                  late ? "T + 1 ms" : "T", comp.calls, (unsigned long long)s.tier_hits,
                  (unsigned long long)s.tier_rejected);
    assert_int_equal(comp.calls, late ? 1 : 0);
    assert_int_equal(s.tier_hits, late ? 0 : 1);
    assert_int_equal(s.tier_rejected, late ? 1 : 0);
    assert_int_equal(tc.decodes, late ? 0 : 1);
    t_close(r);
  }
}

static const tr_fixture *g_f;

/* The program trusts "old"; CLOSURE_CACHE_TRUSTED_KEYS names "new". */
static void env_adds_child(const void *arg) {
  (void)arg;
  char pub[1024];
  snprintf(pub, sizeof pub, "%s/new.pub", g_f->keys);
  setenv("CLOSURE_CACHE_TRUSTED_KEYS", pub, 1);
  unsetenv("CLOSURE_CACHE_REDIS");
  const char *trusted[] = {"old", NULL};
  ccache_trust *pt = tr_trust(g_f->keys, NULL, trusted);
  static t_codec tc;
  static ccache_codec k;
  k = t_codec_make(&tc, PAYLOAD);
  ccache_tier *tier = t_disk_tier(g_f->dir, CCACHE_UNBOUNDED, 60000);
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.codec = &k;
  cfg.runtime_tag = TAG;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &tier;
  cfg.n_tiers = 1;
  SET_TRUST(&cfg, pt);
  CHILD_CHECK(ccache_default_init(&cfg) == CCACHE_OK);
  ccache *c = NULL;
  CHILD_CHECK(ccache_default(&c) == CCACHE_OK);
  t_compiler comp = {0};
  CHILD_CHECK(t_goc(c, PK(5), &comp, CCACHE_OK) == 5); /* signed by old */
  CHILD_CHECK(t_goc(c, PK(6), &comp, CCACHE_OK) == 6); /* signed by new */
  ccache_stats s = t_stats(c);
  fprintf(stderr,
          "program trusts old, env trusts new: compiles %d, tier_hits %llu, rejected %llu\n",
          comp.calls, (unsigned long long)s.tier_hits, (unsigned long long)s.tier_rejected);
  CHILD_CHECK(comp.calls == 0 && s.tier_hits == 2 && s.tier_rejected == 0);
  ccache_trust_free(pt);
}

/* Item 6: CLOSURE_CACHE_TRUSTED_KEYS adds to the program's keys (main
 * replaced them: the entry the program's key signed was rejected). */
static void env_trusted_keys_add_to_program_keys(void **state) {
  tr_fixture *f = *state;
  store_signed(f, "old", 5);
  store_signed(f, "new", 6);
  g_f = f;
  assert_int_equal(tr_run_child(env_adds_child, NULL), 0);
}

int main(void) {
  if (!ccache_trust_available()) {
    print_message(
        "this build has no libsodium: no key test runs (test_trust_edges runs the "
        "fail-closed ones)\n");
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(public_key_file_checked_like_a_secret, tr_edges_setup,
                                      tr_teardown),
      cmocka_unit_test_setup_teardown(secret_key_halves_must_match, tr_edges_setup, tr_teardown),
      cmocka_unit_test_setup_teardown(fifo_key_path_refused, tr_edges_setup, tr_teardown),
      cmocka_unit_test_setup_teardown(rollback_not_before, tr_edges_setup, tr_teardown),
      cmocka_unit_test_setup_teardown(env_trusted_keys_add_to_program_keys, tr_edges_setup,
                                      tr_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
