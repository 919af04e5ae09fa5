/*
 * test_tier_disk_io.c - the directory tier's I/O faults are tier errors,
 * never failed fetches: ENOSPC, EIO, EACCES and EROFS by hook, ENOSPC on a
 * real full tmpfs, a read-only mount, a directory removed under a running
 * cache.
 *
 * Forked children never use cmocka: they report through their exit status.
 * The parent forks only while it has no other thread.
 */
#define _GNU_SOURCE 1 /* unshare(), mount() */

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "disk_support.h"
#include "tier/disk/disk.h"
#include "tier/tier.h"

/* ------------------------------------------------------------------ faults */

static const char *fault_point;
static int fault_errno;
static _Atomic int fault_hits;
static int inject(const char *point) {
  if (!fault_point || strcmp(point, fault_point) != 0) return 0;
  atomic_fetch_add(&fault_hits, 1);
  return fault_errno;
}

/* Whatever happens in a test, the next one (or a forked child) starts
 * without an injected fault. */
static int clear_faults(void **state) {
  (void)state;
  ccache__disk_fault = NULL;
  fault_point = NULL;
  return 0;
}

static void faults_are_tier_errors_never_failed_fetches(void **state) {
  (void)state;
  static const struct {
    const char *point;
    int err;
  } faults[] = {{"write", ENOSPC},   {"write", EIO},     {"open_tmp", EACCES},
                {"open_tmp", EROFS}, {"rename", ENOSPC}, {"read", EIO}};
  char *dir = t_tempdir("faults");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  /* Key 0 is stored before any fault, for the read fault. */
  assert_int_equal(t_goc(c, PK(0), &comp, CCACHE_OK), 0);
  ccache__disk_fault = inject;
  uint64_t errors = t_stats(c).tier_errors;
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
    fault_point = faults[i].point;
    fault_errno = faults[i].err;
    fault_hits = 0;
    int key = strcmp(fault_point, "read") == 0 ? 0 : (int)i + 1;
    int calls = comp.calls;
    assert_int_equal(t_goc(c, PK(key), &comp, CCACHE_OK), key);
    assert_int_equal(comp.calls, calls + 1);
    assert_true(fault_hits >= 1);
    ccache_stats s = t_stats(c);
    /* read: the lookup and the re-check after the lock fail (2); otherwise the put */
    errors += strcmp(fault_point, "read") == 0 ? 2 : 1;
    assert_int_equal(s.tier_errors, errors);
    char path[1024], sub[1024];
    t_entry_path(dir, T_DISK_TAG, PK(key), path, sizeof path);
    t_subdir_path(dir, T_DISK_TAG, PK(key), sub, sizeof sub);
    assert_int_equal(t_count_prefix(sub, ".tmp."), 0); /* no temp file left behind */
    struct stat st;
    if (key != 0) assert_int_equal(stat(path, &st), -1); /* nothing published */
  }
  ccache__disk_fault = NULL;
  fault_point = NULL;
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* A child in its own mount namespace: a 64 KiB tmpfs fills up for real.
 * Exit 0: every fetch succeeded, some writes failed (ENOSPC) and some did
 * not, and no temp file was left; 77: no tmpfs here; else a failure. */
static int enospc_child(const char *mnt) {
  if (unshare(CLONE_NEWNS) != 0) return 77;
  if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0) return 77;
  if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k,mode=0700") != 0) return 77;
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = mnt;
  ccache_tier *tier = NULL;
  if (ccache_tier_disk(&o, &tier) != CCACHE_OK) return 10;
  ccache *c = t_cache_over(&t, &tc, 12 * 1024, tier, T_DISK_TAG);
  if (!c) return 11;
  for (int i = 0; i < 12; i++) {
    ccache_program *p = NULL;
    if (ccache_program_get_or_compile(c, PK(i), t_compile, &comp, &p) != CCACHE_OK) return 12;
    if (t_id(ccache_program_native(p)) != i) return 13;
    ccache_program_release(c, p);
  }
  ccache_stats s;
  s.size = sizeof s;
  ccache_stats_get(c, &s);
  if (s.tier_writes < 1 || s.tier_errors < 1 || s.tier_writes + s.tier_errors != 12) return 14;
  if (comp.calls != 12) return 15;
  for (int i = 0; i < 12; i++) {
    char sub[1024];
    t_subdir_path(mnt, T_DISK_TAG, PK(i), sub, sizeof sub);
    if (t_count_prefix(sub, ".tmp.") != 0) return 16;
  }
  if (ccache_close(c) != CCACHE_OK) return 17;
  return 0;
}

static void enospc_on_a_full_tmpfs(void **state) {
  (void)state;
  char *mnt = t_tempdir("tmpfs");
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int rc = enospc_child(mnt);
    free(mnt); /* (a child under valgrind reports what it leaks) */
    _exit(rc);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  rmdir(mnt);
  free(mnt);
  if (WEXITSTATUS(st) == 77) skip(); /* cannot mount a tmpfs here: the hook test covers ENOSPC */
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* A read-only bind mount of a populated directory: hits still load, new
 * programs compile, and the failed writes and locks are tier errors. */
static int read_only_child(const char *dir) {
  if (unshare(CLONE_NEWNS) != 0) return 77;
  if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0) return 77;
  if (mount(dir, dir, "none", MS_BIND, NULL) != 0) return 77;
  if (mount("none", dir, "none", MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0) return 77;
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  ccache_tier *tier = NULL;
  if (ccache_tier_disk(&o, &tier) != CCACHE_OK) return 10;
  ccache *c = t_cache_over(&t, &tc, 100, tier, T_DISK_TAG);
  if (!c) return 11;
  for (int i = 0; i < 2; i++) { /* 0 is on disk, 1 is not */
    ccache_program *p = NULL;
    if (ccache_program_get_or_compile(c, PK(i), t_compile, &comp, &p) != CCACHE_OK) return 12;
    if (t_id(ccache_program_native(p)) != i) return 13;
    ccache_program_release(c, p);
  }
  ccache_stats s;
  s.size = sizeof s;
  ccache_stats_get(c, &s);
  if (s.tier_hits != 1 || comp.calls != 1) return 14;
  /* The miss: its lock (no writable lock file) and its put both fail. */
  if (s.tier_errors != 2 || s.tier_writes != 0) return 15;
  if (ccache_close(c) != CCACHE_OK) return 16;
  return 0;
}

static void read_only_directory(void **state) {
  (void)state;
  char *dir = t_tempdir("ro");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(0), &comp, CCACHE_OK), 0);
  t_close(c);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int rc = read_only_child(dir);
    free(dir);
    _exit(rc);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  t_rmrf(dir);
  free(dir);
  if (WEXITSTATUS(st) == 77) skip();
  assert_int_equal(WEXITSTATUS(st), 0);
}

static void directory_removed_under_a_running_cache(void **state) {
  (void)state;
  char *dir = t_tempdir("vanish");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  assert_int_equal(t_stats(c).tier_writes, 1);
  t_rmrf(dir);
  struct stat st;
  assert_int_equal(stat(dir, &st), -1);
  /* Both a new key and the one that was on disk compile; each miss fails
   * its compile lock (the folder's lock file is gone with the folder) and
   * its put: two tier errors; the directory is not silently recreated. */
  assert_int_equal(t_goc(c, PK(2), &comp, CCACHE_OK), 2);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  assert_int_equal(comp.calls, 3);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_errors, 4);
  assert_int_equal(s.tier_writes, 1);
  assert_int_equal(s.tier_hits, 0);
  assert_int_equal(stat(dir, &st), -1);
  t_close(c);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(faults_are_tier_errors_never_failed_fetches, clear_faults),
      cmocka_unit_test(enospc_on_a_full_tmpfs),
      cmocka_unit_test(read_only_directory),
      cmocka_unit_test(directory_removed_under_a_running_cache),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
