/*
 * test_tier_bounds_walk.c - what a tier hands back is untrusted (issue 21,
 * items 4 and 5): the directory tier's folders walked one level at a time
 * (links never followed, each level private to its owner), and the codec's
 * two kinds of decode failure (bad bytes are removed, a local failure keeps
 * the entry).  The entry size bound is test_tier_bounds.c.  No Redis here:
 * the file is the same with and without hiredis.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_support.h"
#include "tier/tier.h"

/* Built against a tree without it, the codec value is the one defined now. */
#ifndef CCACHE_CODEC_CORRUPT
#define CCACHE_CODEC_CORRUPT 2
#endif

#define PAYLOAD 64

/* ---------------------------------------------------------- the walk */

/* A cache over dir compiles and stores PK(n) (program n). */
static void store_one(const char *dir, uint64_t n) {
  t_ctx ctx = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c =
      t_cache_over(&ctx, &tc, PAYLOAD, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_non_null(c);
  assert_int_equal(t_goc(c, PK(n), &comp, CCACHE_OK), (int)n);
  assert_int_equal(t_stats(c).tier_writes, 1);
  t_close(c);
}

/* A fresh cache over dir looks PK(n) up once: its stats, and the compiles
 * in *compiles. */
static ccache_stats lookup_once(const char *dir, uint64_t n, int *compiles) {
  t_ctx ctx = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c =
      t_cache_over(&ctx, &tc, PAYLOAD, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_non_null(c);
  assert_int_equal(t_goc(c, PK(n), &comp, CCACHE_OK), (int)n);
  *compiles = atomic_load(&comp.calls);
  ccache_stats s = t_stats(c);
  t_close(c);
  return s;
}

/* An entry folder below the top (<ns>/<xx>) replaced by a link to a folder
 * elsewhere holding a valid entry: never followed, the program compiles,
 * and nothing is written through the link. */
static void disk_symlinked_subdir_refused(void **state) {
  (void)state;
  char *dir = t_tempdir("bounds-link-dir");
  char *away = t_tempdir("bounds-link-away");
  store_one(dir, 3);
  char sub[1024], moved[1024];
  t_subdir_path(dir, T_DISK_TAG, PK(3), sub, sizeof sub);
  snprintf(moved, sizeof moved, "%s/folder", away);
  assert_int_equal(rename(sub, moved), 0);
  assert_int_equal(symlink(moved, sub), 0);
  int compiles = 0;
  ccache_stats s = lookup_once(dir, 3, &compiles);
  assert_int_equal(compiles, 1);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_writes, 0);
  /* get, lock, the get after the lock, put: each refused at the link. */
  assert_int_equal(s.tier_errors, 4);
  assert_int_equal(s.tier_corrupt, 0);
  /* The folder behind the link holds its entry, and nothing new. */
  assert_int_equal(t_count_prefix(moved, ".tmp."), 0);
  assert_int_equal(t_count_prefix(moved, "lock"), 1); /* the store_one's */
  t_rmrf(away);
  free(away);
  t_rmrf(dir);
  free(dir);
}

/* The runtime-tag level (<dir>/v1/<tag hash>) a link: refused at open (the
 * tier is disabled for the cache: one tier error), never followed. */
static void disk_symlinked_tag_level_refused(void **state) {
  (void)state;
  char *dir = t_tempdir("bounds-link-ns");
  char *away = t_tempdir("bounds-link-ns-away");
  store_one(dir, 4);
  char ns[1024], moved[1024];
  t_ns_path(dir, T_DISK_TAG, ns, sizeof ns);
  snprintf(moved, sizeof moved, "%s/ns", away);
  assert_int_equal(rename(ns, moved), 0);
  assert_int_equal(symlink(moved, ns), 0);
  int compiles = 0;
  ccache_stats s = lookup_once(dir, 4, &compiles);
  assert_int_equal(compiles, 1);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_errors, 1); /* the attach */
  assert_int_equal(s.tier_writes, 0);
  t_rmrf(away);
  free(away);
  t_rmrf(dir);
  free(dir);
}

/* An entry that is a link to a valid entry file: never followed (a tier
 * error for the get; the store then cannot replace it either, since
 * publishing never replaces what is not a regular file). */
static void disk_symlinked_entry_not_followed(void **state) {
  (void)state;
  char *dir = t_tempdir("bounds-link-entry");
  char *away = t_tempdir("bounds-link-entry-away");
  store_one(dir, 5);
  char path[1024], moved[1024];
  t_entry_path(dir, T_DISK_TAG, PK(5), path, sizeof path);
  snprintf(moved, sizeof moved, "%s/entry", away);
  assert_int_equal(rename(path, moved), 0);
  assert_int_equal(symlink(moved, path), 0);
  int compiles = 0;
  ccache_stats s = lookup_once(dir, 5, &compiles);
  assert_int_equal(compiles, 1);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_errors, 3); /* get, the get after the lock, put */
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  t_rmrf(away);
  free(away);
  t_rmrf(dir);
  free(dir);
}

/* A level below the top writable by its group: refused like the top would
 * be.  The tag level at open (disabled: one error); an entry folder at
 * each op (get, lock, get, put). */
static void disk_group_writable_level_refused(void **state) {
  (void)state;
  char *dir = t_tempdir("bounds-gw");
  store_one(dir, 6);
  char ns[1024], sub[1024];
  t_ns_path(dir, T_DISK_TAG, ns, sizeof ns);
  t_subdir_path(dir, T_DISK_TAG, PK(6), sub, sizeof sub);
  assert_int_equal(chmod(sub, 0770), 0);
  int compiles = 0;
  ccache_stats s = lookup_once(dir, 6, &compiles);
  assert_int_equal(compiles, 1);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_errors, 4);
  assert_int_equal(chmod(sub, 0700), 0);
  assert_int_equal(chmod(ns, 0702), 0); /* others may write */
  s = lookup_once(dir, 6, &compiles);
  assert_int_equal(compiles, 1);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_errors, 1);
  assert_int_equal(chmod(ns, 0700), 0);
  s = lookup_once(dir, 6, &compiles); /* private again: loads */
  assert_int_equal(compiles, 0);
  assert_int_equal(s.tier_hits, 1);
  t_rmrf(dir);
  free(dir);
}

/* A level owned by another user (chown: CI runs as root; skipped for a
 * user who cannot give a folder away). */
static void disk_other_owner_level_refused(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("SKIPPED: chown to another user needs root\n");
    skip();
  }
  char *dir = t_tempdir("bounds-owner");
  store_one(dir, 8);
  char sub[1024];
  t_subdir_path(dir, T_DISK_TAG, PK(8), sub, sizeof sub);
  assert_int_equal(chown(sub, 12345, (gid_t)-1), 0);
  int compiles = 0;
  ccache_stats s = lookup_once(dir, 8, &compiles);
  assert_int_equal(compiles, 1);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(s.tier_errors, 4);
  assert_int_equal(chown(sub, 0, (gid_t)-1), 0);
  s = lookup_once(dir, 8, &compiles);
  assert_int_equal(compiles, 0);
  assert_int_equal(s.tier_hits, 1);
  t_rmrf(dir);
  free(dir);
}

/* ------------------------------------------------------------ the codec */

/* A codec that answers CCACHE_CODEC_CORRUPT: the entry is counted corrupt
 * and removed; a codec that fails here (-12, an ENOMEM of its own): counted
 * in tier_errors and the entry stays, and loads once the codec works. */
static void codec_corrupt_removes_failure_keeps(void **state) {
  (void)state;
  char *dir = t_tempdir("bounds-codec");
  char path[1024];
  t_entry_path(dir, T_DISK_TAG, PK(9), path, sizeof path);
  struct stat st;
  for (int round = 0; round < 2; round++) {
    store_one(dir, 9);
    t_ctx ctx = {0};
    t_codec tc = {0};
    t_compiler comp = {0};
    ccache_codec k = t_codec_make(&tc, PAYLOAD);
    tc.decode_rc = round == 0 ? -12 : CCACHE_CODEC_CORRUPT;
    ccache_config cfg;
    t_config(&cfg, &ctx);
    cfg.codec = &k;
    cfg.runtime_tag = T_DISK_TAG;
    cfg.tier_min_compile_us = 1000000000; /* nothing stored: the entry is the planted one */
    ccache_tier *t = t_disk_tier(dir, CCACHE_UNBOUNDED, 60000);
    cfg.tiers = &t;
    cfg.n_tiers = 1;
    ccache *c = NULL;
    assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
    assert_int_equal(t_goc(c, PK(9), &comp, CCACHE_OK), 9);
    assert_int_equal(atomic_load(&comp.calls), 1);
    ccache_stats s = t_stats(c);
    assert_int_equal(s.tier_hits, 0);
    if (round == 0) { /* failed here: two decodes (before and after the lock), both kept */
      assert_int_equal(atomic_load(&tc.decodes), 2);
      assert_int_equal(s.tier_errors, 2);
      assert_int_equal(s.tier_corrupt, 0);
      assert_int_equal(stat(path, &st), 0);
    } else { /* bad bytes: removed at the first decode; the second get misses */
      assert_int_equal(atomic_load(&tc.decodes), 1);
      assert_int_equal(s.tier_errors, 0);
      assert_int_equal(s.tier_corrupt, 1);
      assert_int_equal(stat(path, &st), -1);
      assert_int_equal(errno, ENOENT);
    }
    t_close(c);
    if (round == 0) { /* the kept entry loads where the codec works */
      int compiles = 0;
      s = lookup_once(dir, 9, &compiles);
      assert_int_equal(compiles, 0);
      assert_int_equal(s.tier_hits, 1);
      unlink(path);
    }
  }
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(disk_symlinked_subdir_refused),
      cmocka_unit_test(disk_symlinked_tag_level_refused),
      cmocka_unit_test(disk_symlinked_entry_not_followed),
      cmocka_unit_test(disk_group_writable_level_refused),
      cmocka_unit_test(disk_other_owner_level_refused),
      cmocka_unit_test(codec_corrupt_removes_failure_keeps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
