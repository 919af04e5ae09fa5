#define _GNU_SOURCE 1 /* nftw's FTW_DEPTH/FTW_PHYS */
#include "tier_support.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tier/tier.h"

static unsigned char filler(int id, size_t i) { return (unsigned char)(id * 131 + i * 7 + 3); }

unsigned char *t_encoding(int id, size_t payload) {
  unsigned char *b = malloc(payload);
  assert_non_null(b);
  memcpy(b, "PRG1", 4);
  memcpy(b + 4, &id, 4);
  for (size_t i = 8; i < payload; i++) b[i] = filler(id, i);
  return b;
}

static int enc(void *ctx, ccache_key pkey, void *native, void **bytes, size_t *len) {
  t_codec *tc = ctx;
  (void)pkey;
  atomic_fetch_add(&tc->encodes, 1);
  if (tc->encode_rc) return tc->encode_rc;
  *bytes = t_encoding(t_id(native), tc->payload);
  *len = tc->payload;
  atomic_fetch_add(&tc->encoded, 1);
  return 0;
}

static void enc_free(void *ctx, void *bytes, size_t len) {
  t_codec *tc = ctx;
  (void)len;
  atomic_fetch_add(&tc->frees, 1);
  free(bytes);
}

static int dec(void *ctx, ccache_key pkey, const void *bytes, size_t len, void **native_out,
               uint64_t *cost_out) {
  t_codec *tc = ctx;
  (void)pkey;
  atomic_fetch_add(&tc->decodes, 1);
  const unsigned char *b = bytes;
  int id = -1;
  bool good = len == tc->payload && len >= 8 && memcmp(b, "PRG1", 4) == 0;
  if (good) memcpy(&id, b + 4, 4);
  for (size_t i = 8; good && i < len; i++) good = b[i] == filler(id, i);
  if (!good) atomic_fetch_add(&tc->bad_loads, 1);
  if (tc->decode_rc) return tc->decode_rc;
  if (!good) return -1;
  *native_out = t_native(id);
  *cost_out = 100;
  return 0;
}

ccache_codec t_codec_make(t_codec *tc, size_t payload) {
  tc->payload = payload < 8 ? 8 : payload;
  ccache_codec k = {enc, enc_free, dec, tc};
  return k;
}

int t_compile(void *ud, ccache *c, ccache_key pkey, void **native_out, uint64_t *cost_out) {
  t_compiler *tc = ud;
  atomic_fetch_add(&tc->calls, 1);
  if (tc->during) tc->during(tc, c, pkey);
  if (tc->fail) return tc->fail;
  *native_out = t_native((int)pkey.lo);
  *cost_out = 100;
  return 0;
}

unsigned char *t_entry(ccache_key key, const char *tag, int id, size_t payload, size_t *len) {
  unsigned char *p = t_encoding(id, payload);
  *len = ccache__tier_entry_len(payload);
  unsigned char *e = malloc(*len);
  assert_non_null(e);
  ccache__tier_frame(e, key, ccache__tier_tag_hash(tag), 1, p, payload);
  free(p);
  return e;
}

int t_goc(ccache *c, ccache_key pkey, t_compiler *comp, int want) {
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(c, pkey, t_compile, comp, &p);
  assert_int_equal(rc, want);
  if (rc != CCACHE_OK) return -1;
  int id = t_id(ccache_program_native(p));
  ccache_program_release(c, p);
  return id;
}

int t_threads_named(const char *name) {
  DIR *d = opendir("/proc/self/task");
  assert_non_null(d);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    char path[300], comm[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue; /* the thread ended meanwhile */
    if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = '\0';
    fclose(f);
    if (strcmp(comm, name) == 0) n++;
  }
  closedir(d);
  return n;
}

int t_threads_named_gone(const char *name) {
  int n = t_threads_named(name);
  for (int i = 0; n > 0 && i < 30000; i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
    n = t_threads_named(name);
  }
  return n;
}

char *t_tempdir(const char *tag) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  char *path = malloc(4096);
  assert_non_null(path);
  snprintf(path, 4096, "%s/ccache-%s-XXXXXX", base, tag);
  assert_non_null(mkdtemp(path));
  return path;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

void t_rmrf(const char *path) { nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS); }
