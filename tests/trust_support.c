/* trust_support.c - see trust_support.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <xxhash.h>

#include "trust_support.h"

void tr_keys(const char *dir, const char *name) {
#ifdef TRUST_ON_MAIN
  (void)dir, (void)name;
#else
  char sec[1024], pub[1024];
  snprintf(sec, sizeof sec, "%s/%s.sec", dir, name);
  snprintf(pub, sizeof pub, "%s/%s.pub", dir, name);
  assert_int_equal(ccache_trust_generate(name, sec, pub), CCACHE_OK);
#endif
}

ccache_trust *tr_trust(const char *dir, const char *signer, const char *const *trusted) {
#ifdef TRUST_ON_MAIN
  (void)dir, (void)signer, (void)trusted;
  return NULL;
#else
  ccache_trust *t = NULL;
  assert_int_equal(ccache_trust_new(&t), CCACHE_OK);
  char path[1024];
  if (signer) {
    snprintf(path, sizeof path, "%s/%s.sec", dir, signer);
    assert_int_equal(ccache_trust_set_signing_key_file(t, path), CCACHE_OK);
  }
  for (size_t i = 0; trusted && trusted[i]; i++) {
    snprintf(path, sizeof path, "%s/%s.pub", dir, trusted[i]);
    assert_int_equal(ccache_trust_add_key_file(t, path), CCACHE_OK);
  }
  return t;
#endif
}

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

void tr_reseal(unsigned char *blob, size_t len) {
  XXH128_hash_t h = XXH3_128bits(blob, len - 16);
  put_u64(blob + len - 16, h.low64);
  put_u64(blob + len - 8, h.high64);
}

void tr_move(unsigned char *blob, size_t len, ccache_key to) {
  put_u64(blob + 16, to.lo);
  put_u64(blob + 24, to.hi);
  tr_reseal(blob, len);
}

static int fixture_setup(void **state, const char *area, const char *const *names) {
  tr_fixture *f = calloc(1, sizeof *f);
  char name[64];
  snprintf(name, sizeof name, "%s-keys", area);
  f->keys = t_tempdir(name);
  snprintf(name, sizeof name, "%s-cache", area);
  f->dir = t_tempdir(name);
  for (size_t i = 0; names[i]; i++) tr_keys(f->keys, names[i]);
  *state = f;
  return 0;
}

int tr_setup(void **state) {
  static const char *const names[] = {"old", "new", "other", NULL};
  return fixture_setup(state, "trust", names);
}

int tr_edges_setup(void **state) {
  static const char *const names[] = {"old", "new", NULL};
  return fixture_setup(state, "edges", names);
}

int tr_teardown(void **state) {
  tr_fixture *f = *state;
  t_rmrf(f->keys);
  t_rmrf(f->dir);
  free(f->keys);
  free(f->dir);
  free(f);
  return 0;
}

int tr_run_child(void (*fn)(const void *), const void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    alarm(20); /* a child that hangs (a FIFO on main) fails, never stalls the suite */
    fn(arg);
    _exit(0);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (!WIFEXITED(st)) return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return WEXITSTATUS(st);
}
