/*
 * disk_support.c - helpers of the directory-tier tests (see disk_support.h).
 */
#define _GNU_SOURCE 1

#include "disk_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "tier/tier.h"

ccache_tier *t_disk_tier(const char *dir, uint64_t max_bytes, uint64_t touch_ms) {
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.touch_interval_ms = touch_ms;
  o.lock_poll_ms = 1;
  o.lock_poll_max_ms = 8;
  o.lock_wait_ms = 30000;
  ccache_tier *t = NULL;
  int rc = ccache_tier_disk(&o, &t);
  if (rc != CCACHE_OK) fprintf(stderr, "ccache_tier_disk: %s\n", ccache_error_detail());
  assert_int_equal(rc, CCACHE_OK);
  return t;
}

/* A cache whose one tier is t (no cmocka: usable in children). */
ccache *t_cache_over(t_ctx *ctx, t_codec *tc, size_t payload, ccache_tier *t, const char *tag) {
  ccache_codec k = t_codec_make(tc, payload);
  ccache_config cfg;
  t_config(&cfg, ctx);
  cfg.codec = &k;
  cfg.runtime_tag = tag;
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &t;
  cfg.n_tiers = 1;
  /* Some callers pass a Redis tier: unsigned entries by name (no keys). */
  cfg.trust_flags = CCACHE_TRUST_UNSIGNED;
  ccache *c = NULL;
  if (ccache_open(&cfg, &c) != CCACHE_OK) return NULL;
  return c;
}

/* "<dir>/v1/<tag hash>" and the entry path of key under it. */
void t_ns_path(const char *dir, const char *tag, char *out, size_t n) {
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash(tag), ns);
  snprintf(out, n, "%s/%s", dir, ns);
}

void t_entry_path(const char *dir, const char *tag, ccache_key k, char *out, size_t n) {
  char ns[512];
  t_ns_path(dir, tag, ns, sizeof ns);
  char hex[33];
  snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long)k.hi, (unsigned long long)k.lo);
  snprintf(out, n, "%s/%.2s/%s", ns, hex, hex);
}

void t_subdir_path(const char *dir, const char *tag, ccache_key k, char *out, size_t n) {
  char p[1024];
  t_entry_path(dir, tag, k, p, sizeof p);
  *strrchr(p, '/') = '\0';
  snprintf(out, n, "%s", p);
}

unsigned char *t_slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
  *len = fread(b, 1, (size_t)n, f);
  fclose(f);
  return b;
}

void t_spit(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

/* Files in dir whose name starts with prefix. */
int t_count_prefix(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) n++;
  closedir(d);
  return n;
}

/* Bytes and number of entry files (32 hex names) under a tree. */
uint64_t t_tree_bytes;
int t_tree_entries;
static int tree_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)ftw;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (flag == FTW_F && strlen(base) == 32 && strspn(base, "0123456789abcdef") == 32) {
    t_tree_bytes += (uint64_t)st->st_size;
    t_tree_entries++;
  }
  return 0;
}
void t_tree_scan(const char *dir) {
  t_tree_bytes = 0;
  t_tree_entries = 0;
  nftw(dir, tree_one, 16, FTW_PHYS);
}

void t_set_age(const char *path, time_t seconds_ago) {
  struct timespec ts[2];
  clock_gettime(CLOCK_REALTIME, &ts[0]);
  ts[0].tv_sec -= seconds_ago;
  ts[1] = ts[0];
  assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

uint64_t t_size_total(const char *dir) {
  char sizef[1200];
  snprintf(sizef, sizeof sizef, "%s/v1/size", dir);
  size_t len = 0;
  unsigned char *b = t_slurp(sizef, &len);
  assert_non_null(b);
  assert_int_equal(len, 16);
  uint64_t total = 0;
  for (int i = 7; i >= 0; i--) total = total << 8 | b[8 + i];
  free(b);
  return total;
}

void t_lock_file_path(const char *dir, const char *tag, ccache_key k, char *out, size_t n) {
  char sub[1024];
  t_subdir_path(dir, tag, k, sub, sizeof sub);
  snprintf(out, n, "%s/lock", sub);
}

uint64_t t_lock_byte(ccache_key k) {
  unsigned char kb[16];
  for (int i = 0; i < 8; i++) {
    kb[i] = (unsigned char)(k.lo >> (8 * i));
    kb[8 + i] = (unsigned char)(k.hi >> (8 * i));
  }
  return XXH3_64bits(kb, sizeof kb) >> 1;
}

bool t_key_locked(const char *dir, const char *tag, ccache_key k) {
  char lock[1200];
  t_lock_file_path(dir, tag, k, lock, sizeof lock);
  int fd = open(lock, O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = (off_t)t_lock_byte(k);
  fl.l_len = 1;
  int r = fcntl(fd, F_OFD_GETLK, &fl);
  close(fd);
  assert_int_equal(r, 0);
  return fl.l_type != F_UNLCK;
}
