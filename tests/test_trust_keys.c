/*
 * test_trust_keys.c - the keys of signed entries (issue 21): key files
 * (modes, a public file given as the secret one, bad lines, never over an
 * existing file, an empty trust object refused), the closure-cache-keys
 * tool, the default instance's key and Redis password variables (in a
 * child), and signed lease tokens (age, skew, key, signer, namespace, every
 * byte).  Split from test_trust.c, which has the entries.
 *
 * Every case needs libsodium: without it (CMake CCACHE_SODIUM=OFF) none
 * runs, and test_trust checks that such a build fails closed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "disk_support.h"
#include "tier/tier.h"
#include "tier/tier_trust.h"
#include "trust_support.h"

#define PAYLOAD 256

static void key_files(void **state) {
  tr_fixture *f = *state;
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
  tr_fixture *f = *state;
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
  tr_fixture *f = *state;
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
  tr_fixture *f = *state;
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

int main(void) {
  if (!ccache_trust_available()) {
    print_message(
        "this build has no libsodium: no key test runs (test_trust checks it fails "
        "closed)\n");
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(key_files, tr_setup, tr_teardown),
      cmocka_unit_test_setup_teardown(keys_tool, tr_setup, tr_teardown),
      cmocka_unit_test_setup_teardown(default_env_keys, tr_setup, tr_teardown),
      cmocka_unit_test_setup_teardown(lease_tokens, tr_setup, tr_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
