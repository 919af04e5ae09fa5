/*
 * test_tier_disk.c - the directory tier: layout and round trip, bad
 * entries, faults (ENOSPC by hook and on a real full tmpfs, EIO, EACCES, a
 * read-only mount, a vanished directory), crashes (a writer killed between
 * write and rename, a lock holder killed mid-compile), trust, one compile
 * per machine across processes, a nested compile across two caches over
 * one directory, the size cap and LRU with touch.
 *
 * Forked children never use cmocka: they report through their exit status.
 * The parent forks only while it has no other thread.
 */
#define _GNU_SOURCE 1 /* unshare(), mount() */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "disk_support.h"
#include "tier/disk/disk.h"
#include "tier/tier.h"

/* ------------------------------------------------------------- options, trust */

static void options_and_trust(void **state) {
  (void)state;
  ccache_disk_options o;
  memset(&o, 0x5A, sizeof o);
  ccache_disk_options_init(&o);
  assert_int_equal(o.size, sizeof o);
  assert_null(o.dir);
  assert_true(o.max_bytes == CCACHE_UNBOUNDED);
  assert_int_equal(o.fsync, 0);
  assert_true(o.lock_poll_ms == 10 && o.lock_poll_max_ms == 100 && o.lock_wait_ms == 60000);
  assert_true(o.touch_interval_ms == 60000);
  ccache_disk_options_init(NULL);

  char *root = t_tempdir("trust");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/a/b/cache", root);
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_disk(NULL, &t), CCACHE_EINVAL);
  assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_EINVAL); /* no dir */
  o.dir = "";
  assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_EINVAL);
  o.dir = dir;
  assert_int_equal(ccache_tier_disk(&o, NULL), CCACHE_EINVAL);
  ccache_disk_options b = o;
  b.max_bytes = 0;
  assert_int_equal(ccache_tier_disk(&b, &t), CCACHE_EINVAL);
  b = o, b.lock_poll_ms = 0;
  assert_int_equal(ccache_tier_disk(&b, &t), CCACHE_EINVAL);
  b = o, b.lock_poll_max_ms = 5;
  assert_int_equal(ccache_tier_disk(&b, &t), CCACHE_EINVAL);
  b = o, b.size = sizeof b - 1;
  assert_int_equal(ccache_tier_disk(&b, &t), CCACHE_EINVAL);
  assert_null(t);

  /* Absent: created 0700, with its missing parents. */
  assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_OK);
  struct stat st;
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  char parent[1024];
  snprintf(parent, sizeof parent, "%s/a", root);
  assert_int_equal(stat(parent, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  ccache_tier_free(t);
  t = NULL;

  /* Writable by group, or by others: refused, naming the path. */
  const mode_t bad_modes[] = {0770, 0707, 0722};
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(chmod(dir, bad_modes[i]), 0);
    assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_EPERM);
    assert_null(t);
    assert_non_null(strstr(ccache_error_detail(), dir));
    assert_non_null(strstr(ccache_error_detail(), "writable"));
  }
  assert_int_equal(chmod(dir, 0700), 0);

  /* Owned by another user.  CI runs as root, where permission bits prove
   * nothing: the check is the library's own, so chown to nobody. */
  if (chown(dir, 65534, 65534) == 0) {
    assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_EPERM);
    assert_null(t);
    assert_non_null(strstr(ccache_error_detail(), dir));
    assert_non_null(strstr(ccache_error_detail(), "owned by uid 65534"));
    assert_int_equal(chown(dir, geteuid(), getegid()), 0);
  } else {
    assert_int_not_equal(geteuid(), 0);
    print_message("(not root: cannot chown to nobody; CI, as root, checks another owner)\n");
  }

  /* A file where the directory should be: cannot be opened as one. */
  char file[1024];
  snprintf(file, sizeof file, "%s/file", root);
  t_spit(file, "x", 1);
  o.dir = file;
  assert_int_equal(ccache_tier_disk(&o, &t), CCACHE_EIO);
  assert_non_null(strstr(ccache_error_detail(), file));
  t_rmrf(root);
  free(root);
}

/* ------------------------------------------------------ layout, round trip */

static void round_trip_and_layout(void **state) {
  (void)state;
  char *dir = t_tempdir("layout");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  o.fsync = 1;
  ccache_tier *tier = NULL;
  assert_int_equal(ccache_tier_disk(&o, &tier), CCACHE_OK);
  ccache *c = t_cache_over(&t, &tc, 300, tier, T_DISK_TAG);
  assert_non_null(c);
  /* (a compile gives a program the id key.lo) */
  ccache_key keys[3] = {PK(1), PK(2), {3, 0x0123456789ABCDEFull}};
  for (int i = 0; i < 3; i++)
    assert_int_equal(t_goc(c, keys[i], &comp, CCACHE_OK), (int)keys[i].lo);
  assert_int_equal(comp.calls, 3);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_writes, 3);
  assert_int_equal(s.tier_errors, 0);
  t_close(c);

  /* One file per program, at <dir>/v1/<tag hash>/<2 hex>/<32 hex>. */
  char path[1024];
  t_entry_path(dir, T_DISK_TAG, keys[2], path, sizeof path);
  char want[1024];
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash(T_DISK_TAG), ns);
  snprintf(want, sizeof want, "%s/%s/01/0123456789abcdef0000000000000003", dir, ns);
  assert_string_equal(path, want);
  size_t len = 0;
  unsigned char *got = t_slurp(path, &len);
  assert_non_null(got);
  size_t elen;
  unsigned char *e = t_entry(keys[2], T_DISK_TAG, 3, 300, &elen);
  assert_int_equal(len, elen);
  /* Header and payload; the creation time (48..55) and so the checksum
   * differ, and the checksum is checked by loading it below. */
  assert_memory_equal(got, e, 48);
  assert_memory_equal(got + 56, e + 56, elen - 56 - 16);
  free(got);
  free(e);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  char sub[1024];
  t_subdir_path(dir, T_DISK_TAG, keys[0], sub, sizeof sub);
  assert_int_equal(t_count_prefix(sub, ".tmp."), 0);
  snprintf(want, sizeof want, "%s/v1/lock", dir);
  assert_int_equal(stat(want, &st), 0);
  assert_int_equal(st.st_size, 0); /* byte-range locks never grow it */

  /* A new cache (a restart) loads all three without compiling. */
  ccache *c2 = t_cache_over(&t, &tc, 300, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_non_null(c2);
  for (int i = 0; i < 3; i++)
    assert_int_equal(t_goc(c2, keys[i], &comp, CCACHE_OK), (int)keys[i].lo);
  assert_int_equal(comp.calls, 3);
  s = t_stats(c2);
  assert_int_equal(s.tier_hits, 3);
  assert_int_equal(s.program_compiles, 0);
  assert_int_equal(s.tier_bytes_read, 3 * ccache__tier_entry_len(300));
  t_close(c2);
  assert_int_equal(tc.bad_loads, 0);
  t_rmrf(dir);
  free(dir);
}

/* ------------------------------------------------------------- bad entries */

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

static void thousand_bad_entries_load_nothing_bad(void **state) {
  (void)state;
  enum { N = 1000 };
  char *dir = t_tempdir("bad");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 200, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  for (int i = 0; i < N; i++) assert_int_equal(t_goc(c, PK(i), &comp, CCACHE_OK), i);
  t_close(c);
  assert_int_equal(comp.calls, N);

  /* Damage 3 of every 4: a flipped bit anywhere, a truncation anywhere, an
   * intact entry of another runtime tag; the 4th stays good. */
  uint64_t seed = 12345;
  int flipped = 0, cut = 0, foreign = 0;
  uint64_t cut_bytes = 0; /* shrunk behind the library's back */
  for (int i = 0; i < N; i++) {
    char path[1024];
    t_entry_path(dir, T_DISK_TAG, PK(i), path, sizeof path);
    size_t len;
    unsigned char *b = t_slurp(path, &len);
    assert_non_null(b);
    if (i % 4 == 0) {
      size_t at = lcg(&seed) % len;
      b[at] ^= (unsigned char)(1u << (lcg(&seed) % 8));
      t_spit(path, b, len);
      flipped++;
    } else if (i % 4 == 1) {
      size_t keep = lcg(&seed) % len;
      t_spit(path, b, keep);
      cut_bytes += len - keep;
      cut++;
    } else if (i % 4 == 2) {
      size_t elen;
      unsigned char *e = t_entry(PK(i), "another-runtime", i, 200, &elen);
      t_spit(path, e, elen);
      free(e);
      foreign++;
    }
    free(b);
  }

  t_codec tc2 = {0};
  t_compiler comp2 = {0};
  c = t_cache_over(&t, &tc2, 200, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  for (int i = 0; i < N; i++) assert_int_equal(t_goc(c, PK(i), &comp2, CCACHE_OK), i);
  ccache_stats s = t_stats(c);
  assert_int_equal(tc2.bad_loads, 0); /* 0 loads of bad bytes */
  assert_int_equal(tc2.decodes, N - flipped - cut - foreign);
  assert_int_equal(s.tier_hits, N / 4);
  assert_int_equal(s.tier_corrupt, flipped + cut); /* foreign: never corrupt */
  assert_int_equal(s.tier_misses, flipped + cut + foreign);
  assert_int_equal(comp2.calls, flipped + cut + foreign);
  assert_int_equal(s.tier_errors, 0);
  t_close(c);
  /* The running total followed removals (of the sizes found) and
   * replacements; only the bytes cut behind its back are unknown to it
   * (the cleaner's recount corrects such drift). */
  char sizef[1200];
  snprintf(sizef, sizeof sizef, "%s/v1/size", dir);
  size_t slen;
  unsigned char *sb = t_slurp(sizef, &slen);
  assert_int_equal(slen, 16);
  uint64_t total = 0;
  for (int i = 7; i >= 0; i--) total = total << 8 | sb[8 + i];
  free(sb);
  t_tree_scan(dir);
  assert_int_equal(t_tree_entries, N);
  assert_int_equal(total, t_tree_bytes + cut_bytes);

  /* Bad entries were removed and compiled again: now every one loads. */
  t_codec tc3 = {0};
  t_compiler comp3 = {0};
  c = t_cache_over(&t, &tc3, 200, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  for (int i = 0; i < N; i++) assert_int_equal(t_goc(c, PK(i), &comp3, CCACHE_OK), i);
  assert_int_equal(comp3.calls, 0);
  assert_int_equal(t_stats(c).tier_hits, N);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

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

/* ------------------------------------------------------------------ crashes */

static int die_at_rename(const char *point) {
  if (strcmp(point, "rename") == 0) raise(SIGKILL);
  return 0;
}

static void writer_killed_between_write_and_rename(void **state) {
  (void)state;
  char *dir = t_tempdir("killw");
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    t_ctx t = {0};
    t_codec tc = {0};
    t_compiler comp = {0};
    ccache_disk_options o;
    ccache_disk_options_init(&o);
    o.dir = dir;
    ccache_tier *tier = NULL;
    if (ccache_tier_disk(&o, &tier) != CCACHE_OK) _exit(10);
    ccache *c = t_cache_over(&t, &tc, 100, tier, T_DISK_TAG);
    ccache__disk_fault = die_at_rename;
    ccache_program *p = NULL;
    ccache_program_get_or_compile(c, PK(1), t_compile, &comp, &p);
    _exit(11); /* not reached */
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), SIGKILL);

  /* Its temp file is there, complete; the entry was never published. */
  char sub[1024], path[1024], prefix[64];
  t_subdir_path(dir, T_DISK_TAG, PK(1), sub, sizeof sub);
  t_entry_path(dir, T_DISK_TAG, PK(1), path, sizeof path);
  snprintf(prefix, sizeof prefix, ".tmp.%ld.", (long)pid);
  assert_int_equal(t_count_prefix(sub, prefix), 1);
  struct stat sb;
  assert_int_equal(stat(path, &sb), -1);

  /* Another process (this one) compiles it and publishes. */
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  assert_int_equal(comp.calls, 1);
  assert_int_equal(stat(path, &sb), 0);
  t_close(c);
  /* Not yet stale: a dead writer's file is kept for STALE_DEAD_S (60 s),
   * since a pid from another PID namespace means nothing here. */
  assert_int_equal(t_count_prefix(sub, prefix), 1);

  /* Make it 2 minutes old, and add two files of this live process: one 2
   * minutes old (kept: its writer lives) and one 2 hours old (removed:
   * nothing writes that long). */
  DIR *d = opendir(sub);
  struct dirent *de;
  char tmp[2048] = "";
  while ((de = readdir(d)) != NULL)
    if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
      snprintf(tmp, sizeof tmp, "%s/%s", sub, de->d_name);
  closedir(d);
  t_set_age(tmp, 120);
  char mine_new[1200], mine_old[1200];
  snprintf(mine_new, sizeof mine_new, "%s/.tmp.%ld.900", sub, (long)getpid());
  snprintf(mine_old, sizeof mine_old, "%s/.tmp.%ld.901", sub, (long)getpid());
  t_spit(mine_new, "x", 1);
  t_spit(mine_old, "x", 1);
  t_set_age(mine_new, 120);
  t_set_age(mine_old, 7200);
  /* The next process to write in that subdirectory sweeps it. */
  c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(2), &comp, CCACHE_OK), 2);
  t_close(c);
  assert_int_equal(t_count_prefix(sub, prefix), 0);
  assert_int_equal(stat(mine_new, &sb), 0);
  assert_int_equal(stat(mine_old, &sb), -1);
  unlink(mine_new);
  t_rmrf(dir);
  free(dir);
}

/* A tier that forwards to the disk tier and reports each EBUSY. */
typedef struct spy {
  ccache_tier *inner;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int busy, locked;
} spy;

static int s_attach(void *s, const char *ns) {
  ccache_tier *in = ((spy *)s)->inner;
  return in->ops.attach(in->state, ns);
}
static int s_get(void *s, ccache_key k, void **b, size_t *l) {
  ccache_tier *in = ((spy *)s)->inner;
  return in->ops.get(in->state, k, b, l);
}
static void s_free_blob(void *s, void *b, size_t l) {
  ccache_tier *in = ((spy *)s)->inner;
  in->ops.free_blob(in->state, b, l);
}
static int s_put(void *s, ccache_key k, const void *b, size_t l) {
  ccache_tier *in = ((spy *)s)->inner;
  return in->ops.put(in->state, k, b, l);
}
static int s_remove(void *s, ccache_key k) {
  ccache_tier *in = ((spy *)s)->inner;
  return in->ops.remove(in->state, k);
}
static int s_lock(void *s, ccache_key k, void **lk) {
  spy *sp = s;
  int rc = sp->inner->ops.lock(sp->inner->state, k, lk);
  pthread_mutex_lock(&sp->mu);
  if (rc == CCACHE_EBUSY) sp->busy++;
  if (rc == CCACHE_OK) sp->locked++;
  pthread_cond_broadcast(&sp->cv);
  pthread_mutex_unlock(&sp->mu);
  return rc;
}
static void s_unlock(void *s, void *lk) {
  ccache_tier *in = ((spy *)s)->inner;
  in->ops.unlock(in->state, lk);
}
static void s_close(void *s) { ccache_tier_free(((spy *)s)->inner); }

static ccache_tier *spy_over(spy *sp, ccache_tier *inner) {
  memset(sp, 0, sizeof *sp);
  sp->inner = inner;
  pthread_mutex_init(&sp->mu, NULL);
  pthread_cond_init(&sp->cv, NULL);
  ccache_tier_ops o = inner->ops;
  o.attach = s_attach, o.get = s_get, o.free_blob = s_free_blob, o.put = s_put;
  o.remove = s_remove, o.lock = s_lock, o.unlock = s_unlock, o.close = s_close;
  o.name = "spy";
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_custom(&o, sp, &t), CCACHE_OK);
  return t;
}

/* The lock holder's compile, holding PK(5)'s lock:
 *  - opens and closes the lock file once more (a classic POSIX record lock
 *    would be dropped by that close; an open-file-description lock is not);
 *  - forks a bystander that outlives it without exec (it must not keep the
 *    lock alive after its parent dies);
 * then tells the test it runs, and never ends. */
static int holder_pipe = -1;
static const char *holder_dir;
static pid_t bystander;
static void hold_forever(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)comp;
  (void)c;
  (void)pkey;
  char lock[1200];
  t_lock_file_path(holder_dir, T_DISK_TAG, PK(5), lock, sizeof lock);
  int fd = open(lock, O_RDWR | O_CLOEXEC);
  if (fd < 0) _exit(21);
  close(fd);
  bystander = fork();
  if (bystander < 0) _exit(22);
  if (bystander == 0)
    for (;;) pause();
  char msg[32];
  int n = snprintf(msg, sizeof msg, "%ld\n", (long)bystander);
  if (write(holder_pipe, msg, (size_t)n) != n) _exit(20);
  for (;;) pause();
}

typedef struct fetch_arg {
  ccache *c;
  t_compiler *comp;
  int rc, id;
} fetch_arg;

static void *fetch_thread(void *p) {
  fetch_arg *a = p;
  ccache_program *prog = NULL;
  a->rc = ccache_program_get_or_compile(a->c, PK(5), t_compile, a->comp, &prog);
  if (a->rc == CCACHE_OK) {
    a->id = t_id(ccache_program_native(prog));
    ccache_program_release(a->c, prog);
  }
  return NULL;
}

/* Children this test started, killed by its teardown even if it failed
 * half-way (a paused child would keep ctest's output pipe open forever). */
static pid_t holder_pid, bystander_pid;
static int kill_holders(void **state) {
  (void)state;
  if (holder_pid > 0) {
    kill(holder_pid, SIGKILL);
    waitpid(holder_pid, NULL, 0);
  }
  if (bystander_pid > 0) kill(bystander_pid, SIGKILL); /* init reaps it */
  holder_pid = bystander_pid = 0;
  return 0;
}

static void lock_holder_killed_mid_compile(void **state) {
  (void)state;
  char *dir = t_tempdir("killh");
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    holder_pipe = fds[1];
    holder_dir = dir;
    t_ctx t = {0};
    t_codec tc = {0};
    t_compiler comp = {0};
    comp.during = hold_forever;
    ccache_disk_options o;
    ccache_disk_options_init(&o);
    o.dir = dir;
    ccache_tier *tier = NULL;
    if (ccache_tier_disk(&o, &tier) != CCACHE_OK) _exit(10);
    ccache *c = t_cache_over(&t, &tc, 100, tier, T_DISK_TAG);
    ccache_program *p = NULL;
    ccache_program_get_or_compile(c, PK(5), t_compile, &comp, &p);
    _exit(11); /* not reached */
  }
  holder_pid = pid;
  close(fds[1]);
  char msg[32] = "";
  assert_true(read(fds[0], msg, sizeof msg - 1) > 0); /* the child holds PK(5)'s lock */
  close(fds[0]);
  pid_t by = bystander_pid = (pid_t)atol(msg);
  assert_true(by > 0);
  assert_true(t_key_locked(dir, T_DISK_TAG, PK(5))); /* still, after that close() */

  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  spy sp;
  ccache *c = t_cache_over(&t, &tc, 100, spy_over(&sp, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000)),
                           T_DISK_TAG);
  fetch_arg a = {c, &comp, -100, -1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, fetch_thread, &a), 0);
  /* Once our fetch has found the lock busy, the holder dies. */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 30;
  pthread_mutex_lock(&sp.mu);
  while (sp.busy == 0 && pthread_cond_timedwait(&sp.cv, &sp.mu, &until) == 0) {
  }
  int busy = sp.busy;
  pthread_mutex_unlock(&sp.mu);
  kill(pid, SIGKILL);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  holder_pid = 0;
  pthread_join(th, NULL);
  kill(by, SIGKILL); /* (reparented to init, which reaps it) */
  bystander_pid = 0;
  assert_true(busy >= 1);
  assert_true(WIFSIGNALED(st));
  /* The kernel released the dead holder's lock: the waiter took it and
   * compiled, well before its 30 s wait would have run out. */
  assert_int_equal(a.rc, CCACHE_OK);
  assert_int_equal(a.id, 5);
  assert_int_equal(comp.calls, 1);
  assert_int_equal(sp.locked, 1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_lock_waits, 1);
  assert_true(s.tier_wait_ms_max < 30000);
  assert_int_equal(s.tier_writes, 1);
  t_close(c);
  pthread_mutex_destroy(&sp.mu);
  pthread_cond_destroy(&sp.cv);
  t_rmrf(dir);
  free(dir);
}

/* Two caches over one directory in one process (two tier objects: two
 * open file descriptions of the lock file, whose locks exclude each other
 * even within a process).  A compile in the first needs the same program
 * from the second (a nested compile): the second shares the lock this
 * process holds instead of waiting for itself, and when its compile ends
 * the lock stays held (for other processes) until the outer one ends. */
static const char *nest_dir;
static ccache *nest_second;
static int nest_held_after_inner = -1;
static void nest_b(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)c;
  t_compiler *inner = comp->arg;
  ccache_program *p = NULL;
  if (ccache_program_get_or_compile(nest_second, pkey, t_compile, inner, &p) == CCACHE_OK)
    ccache_program_release(nest_second, p);
  nest_held_after_inner = t_key_locked(nest_dir, T_DISK_TAG, pkey);
}

static void nested_compile_in_a_second_cache_does_not_wait(void **state) {
  (void)state;
  char *dir = t_tempdir("nest");
  t_ctx t = {0};
  t_codec tc = {0}, tc2 = {0};
  t_compiler comp = {0}, inner = {0};
  comp.during = nest_b;
  comp.arg = &inner;
  nest_dir = dir;
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  o.lock_poll_ms = 1;
  o.lock_poll_max_ms = 8;
  o.lock_wait_ms = 3000; /* what it would wait for itself */
  ccache_tier *t2 = NULL;
  assert_int_equal(ccache_tier_disk(&o, &t2), CCACHE_OK);
  nest_second = t_cache_over(&t, &tc2, 100, t2, T_DISK_TAG);
  assert_non_null(nest_second);
  assert_int_equal(t_goc(c, PK(7), &comp, CCACHE_OK), 7);
  assert_int_equal(inner.calls, 1);
  assert_int_equal(nest_held_after_inner, 1);
  assert_false(t_key_locked(dir, T_DISK_TAG, PK(7))); /* released when the outer compile ended */
  ccache_stats s = t_stats(nest_second);
  assert_int_equal(s.tier_lock_waits, 0);
  assert_int_equal(s.tier_writes, 1);
  assert_int_equal(t_stats(c).tier_writes, 1);
  t_close(nest_second);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* Two caches over one directory in one process, two threads, one key (two
 * libraries in one runtime, a cache per model): the first thread compiles
 * for 600 ms; the second misses 200 ms into it.  The held-lock table lets
 * only the thread that holds the byte pass, so the second waits for the
 * lock (polling the entry) and loads the first's entry: one compile.
 * Before: the table handed the held byte to any thread of the process, and
 * the second compiled too (inner.calls 1, tier_lock_waits 0). */
typedef struct slow_arg {
  ccache *c;
  t_compiler *comp;
  ccache_key key;
  int rc, id;
} slow_arg;
static _Atomic int slow_started;
static void slow_compile(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)c;
  (void)pkey;
  atomic_store(&slow_started, 1);
  struct timespec d = {0, (long)(intptr_t)comp->arg * 1000000L};
  nanosleep(&d, NULL);
}
static void *slow_fetch(void *p) {
  slow_arg *a = p;
  ccache_program *prog = NULL;
  a->rc = ccache_program_get_or_compile(a->c, a->key, t_compile, a->comp, &prog);
  if (a->rc == CCACHE_OK) {
    a->id = t_id(ccache_program_native(prog));
    ccache_program_release(a->c, prog);
  }
  return NULL;
}
/* Until slow_started is set (at most 30 s), then ms more. */
static void after_start(int ms) {
  for (int i = 0; !atomic_load(&slow_started) && i < 30000; i++) {
    struct timespec one = {0, 1000000L};
    nanosleep(&one, NULL);
  }
  assert_true(atomic_load(&slow_started));
  struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
}

static void two_caches_in_one_process_compile_once(void **state) {
  (void)state;
  char *dir = t_tempdir("twocaches");
  t_ctx t = {0};
  t_codec tc = {0}, tc2 = {0};
  t_compiler first = {0}, second = {0};
  first.during = slow_compile;
  first.arg = (void *)(intptr_t)600;
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  ccache *c2 = t_cache_over(&t, &tc2, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_non_null(c);
  assert_non_null(c2);
  atomic_store(&slow_started, 0);
  slow_arg a = {c, &first, PK(11), -100, -1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, slow_fetch, &a), 0);
  after_start(200);
  int id = t_goc(c2, PK(11), &second, CCACHE_OK);
  pthread_join(th, NULL);
  assert_int_equal(a.rc, CCACHE_OK);
  assert_int_equal(a.id, 11);
  assert_int_equal(id, 11);
  ccache_stats s2 = t_stats(c2);
  print_message(
      "first: %d compile(s); second: %d compile(s), %llu lock wait(s), %llu tier hit(s)\n",
      (int)first.calls, (int)second.calls, (unsigned long long)s2.tier_lock_waits,
      (unsigned long long)s2.tier_hits);
  assert_int_equal(first.calls, 1);
  assert_int_equal(second.calls, 0); /* it loaded the first's entry */
  assert_int_equal(s2.tier_lock_waits, 1);
  assert_int_equal(s2.tier_hits, 1);
  assert_int_equal(s2.tier_writes, 0);
  assert_true(s2.tier_wait_ms_max < 30000);
  assert_int_equal(t_stats(c).tier_writes, 1);
  t_close(c2);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* The same in two processes (kept as the reference: the kernel's lock
 * already excludes another process). */
static void two_processes_compile_once(void **state) {
  (void)state;
  char *dir = t_tempdir("twoprocs");
  int ready[2], logp[2];
  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(logp), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(ready[0]);
    close(logp[0]);
    t_ctx t = {0};
    t_codec tc = {0};
    t_compiler comp = {0};
    comp.during = slow_compile;
    comp.arg = (void *)(intptr_t)600;
    ccache_tier *tier = NULL;
    ccache_disk_options o;
    ccache_disk_options_init(&o);
    o.dir = dir;
    if (ccache_tier_disk(&o, &tier) != CCACHE_OK) _exit(10);
    ccache *c = t_cache_over(&t, &tc, 100, tier, T_DISK_TAG);
    if (!c) _exit(11);
    atomic_store(&slow_started, 0);
    slow_arg a = {c, &comp, PK(12), -100, -1};
    pthread_t th;
    if (pthread_create(&th, NULL, slow_fetch, &a) != 0) _exit(12);
    for (int i = 0; !atomic_load(&slow_started) && i < 30000; i++) {
      struct timespec one = {0, 1000000L};
      nanosleep(&one, NULL);
    }
    if (write(ready[1], "s", 1) != 1) _exit(13);
    pthread_join(th, NULL);
    int calls = comp.calls;
    if (write(logp[1], &calls, sizeof calls) != (ssize_t)sizeof calls) _exit(14);
    _exit(a.rc == CCACHE_OK && a.id == 12 && ccache_close(c) == CCACHE_OK ? 0 : 15);
  }
  close(ready[1]);
  close(logp[1]);
  char b;
  assert_int_equal(read(ready[0], &b, 1), 1); /* the child is compiling */
  struct timespec d = {0, 200000000L};
  nanosleep(&d, NULL);
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(12), &comp, CCACHE_OK), 12);
  int st = 0, child_calls = -1;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  assert_int_equal(read(logp[0], &child_calls, sizeof child_calls), (ssize_t)sizeof child_calls);
  close(ready[0]);
  close(logp[0]);
  assert_int_equal(child_calls, 1);
  assert_int_equal(comp.calls, 0);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_lock_waits, 1);
  assert_int_equal(s.tier_hits, 1);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* Nested work handed to another thread (a pool): the pool thread does not
 * hold the byte, so it waits like any other thread, lock_wait_ms (here
 * 300 ms) at most, then compiles without the lock.  The compile that handed
 * it over waits for it meanwhile: the documented cost of handing the same
 * key to a pool. */
static ccache *pool_second;
static int pool_waited_ms = -1;
static void hand_to_pool(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)c;
  slow_arg a = {pool_second, comp->arg, pkey, -100, -1};
  pthread_t th;
  struct timespec s0, s1;
  clock_gettime(CLOCK_MONOTONIC, &s0);
  if (pthread_create(&th, NULL, slow_fetch, &a) != 0) return;
  pthread_join(th, NULL);
  clock_gettime(CLOCK_MONOTONIC, &s1);
  pool_waited_ms = (int)((s1.tv_sec - s0.tv_sec) * 1000 + (s1.tv_nsec - s0.tv_nsec) / 1000000);
}

static void nested_work_on_a_pool_thread_waits_lock_wait_ms(void **state) {
  (void)state;
  char *dir = t_tempdir("pool");
  t_ctx t = {0};
  t_codec tc = {0}, tc2 = {0};
  t_compiler comp = {0}, inner = {0};
  comp.during = hand_to_pool;
  comp.arg = &inner;
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  o.lock_poll_ms = 1;
  o.lock_poll_max_ms = 8;
  o.lock_wait_ms = 300;
  ccache_tier *t2 = NULL;
  assert_int_equal(ccache_tier_disk(&o, &t2), CCACHE_OK);
  pool_second = t_cache_over(&t, &tc2, 100, t2, T_DISK_TAG);
  assert_non_null(pool_second);
  assert_int_equal(t_goc(c, PK(13), &comp, CCACHE_OK), 13);
  print_message("the pool thread: %d compile(s) after %d ms\n", (int)inner.calls, pool_waited_ms);
  assert_int_equal(inner.calls, 1);
  assert_true(pool_waited_ms >= 300);
  assert_true(pool_waited_ms < 20000);
  ccache_stats s = t_stats(pool_second);
  assert_int_equal(s.tier_lock_waits, 1);
  assert_true(s.tier_wait_ms_max >= 300);
  t_close(pool_second);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* ------------------------------------------------- one compile per machine */

enum { PROCS = 4, KEYS = 40 };

/* A compile's work: a fixed amount of computation, long enough (a few ms)
 * that the other processes ask for the same key while it runs. */
static _Atomic uint64_t work_sink;
static void busy_compile(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)c;
  uint64_t x = pkey.lo;
  for (int i = 0; i < 3000000; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
  atomic_store(&work_sink, x);
  int fd = (int)(intptr_t)comp->arg;
  char line[64];
  int n = snprintf(line, sizeof line, "%ld %llu\n", (long)getpid(), (unsigned long long)pkey.lo);
  if (write(fd, line, (size_t)n) != n) _exit(30);
}

static int racer(const char *dir, int logfd, int gate) {
  char b;
  if (read(gate, &b, 1) != 0) return 9; /* the parent closes the pipe: go */
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  comp.during = busy_compile;
  comp.arg = (void *)(intptr_t)logfd;
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  o.lock_poll_ms = 1;
  o.lock_poll_max_ms = 4;
  ccache_tier *tier = NULL;
  if (ccache_tier_disk(&o, &tier) != CCACHE_OK) return 10;
  ccache *c = t_cache_over(&t, &tc, 1000, tier, T_DISK_TAG);
  if (!c) return 11;
  for (int i = 0; i < KEYS; i++) {
    ccache_program *p = NULL;
    if (ccache_program_get_or_compile(c, PK(i), t_compile, &comp, &p) != CCACHE_OK) return 12;
    if (t_id(ccache_program_native(p)) != i) return 13;
    ccache_program_release(c, p);
  }
  if (tc.bad_loads != 0) return 14;
  return ccache_close(c) == CCACHE_OK ? 0 : 15;
}

static void four_processes_compile_each_key_once(void **state) {
  (void)state;
  char *dir = t_tempdir("race");
  char logpath[1200];
  snprintf(logpath, sizeof logpath, "%s.log", dir);
  int logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  assert_true(logfd >= 0);
  int gate[2];
  assert_int_equal(pipe(gate), 0);
  fflush(NULL);
  pid_t pids[PROCS];
  for (int i = 0; i < PROCS; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) {
      close(gate[1]);
      int rc = racer(dir, logfd, gate[0]);
      free(dir);
      _exit(rc);
    }
  }
  close(gate[0]);
  close(gate[1]); /* all four start together */
  for (int i = 0; i < PROCS; i++) {
    int st = 0;
    assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
  }
  close(logfd);
  /* Exactly one compile per key, across the four processes. */
  FILE *f = fopen(logpath, "r");
  assert_non_null(f);
  int seen[KEYS] = {0}, total = 0;
  long p;
  unsigned long long k;
  while (fscanf(f, "%ld %llu", &p, &k) == 2) {
    assert_true(k < KEYS);
    seen[k]++;
    total++;
  }
  fclose(f);
  for (int i = 0; i < KEYS; i++) assert_int_equal(seen[i], 1);
  assert_int_equal(total, KEYS);
  unlink(logpath);
  t_rmrf(dir);
  free(dir);
}

/* ---------------------------------------------------------------- size cap */

static void cap_holds_under_many_puts(void **state) {
  (void)state;
  enum { PAYLOAD = 64 * 1024, PUTS = 300 };
  const uint64_t cap = 2u << 20; /* 2 MiB: ~31 entries */
  char *dir = t_tempdir("cap");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache_tier *tier = t_disk_tier(dir, cap, 60000);
  ccache *c = t_cache_over(&t, &tc, PAYLOAD, tier, T_DISK_TAG);
  const uint64_t entry = ccache__tier_entry_len(PAYLOAD);
  uint64_t most = 0;
  for (int i = 0; i < PUTS; i++) {
    assert_int_equal(t_goc(c, PK(i), &comp, CCACHE_OK), i);
    /* The clean a put asked for runs on the cleaner thread: with it done
     * before the next put, one writer overshoots by one entry at most. */
    assert_true(ccache__disk_settle(tier, 30000));
    t_tree_scan(dir);
    if (t_tree_bytes > most) most = t_tree_bytes;
    assert_true(t_tree_bytes <= cap + entry);
  }
  /* It did clean (the puts total ~19 MiB), and down to 90 %: after a clean
   * at most 90 % of the cap plus the entries written since remain. */
  assert_true(most > cap - entry);
  assert_true(t_tree_entries < PUTS);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_writes, PUTS);
  assert_int_equal(s.tier_errors, 0);
  t_close(c);
  /* The running total matches the directory. */
  char sizef[1200];
  snprintf(sizef, sizeof sizef, "%s/v1/size", dir);
  size_t len;
  unsigned char *b = t_slurp(sizef, &len);
  assert_int_equal(len, 16);
  uint64_t total = 0;
  for (int i = 7; i >= 0; i--) total = total << 8 | b[8 + i];
  free(b);
  t_tree_scan(dir);
  assert_int_equal(total, t_tree_bytes);
  t_rmrf(dir);
  free(dir);
}

static void cleaner_removes_least_recently_used_and_hits_refresh(void **state) {
  (void)state;
  enum { PAYLOAD = 1000 };
  const uint64_t e = ccache__tier_entry_len(PAYLOAD);
  const uint64_t cap = 10 * e + e / 2; /* 10 entries fit; 90 % is 9.45 */
  char *dir = t_tempdir("lru");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, PAYLOAD, t_disk_tier(dir, cap, 60000), T_DISK_TAG);
  for (int i = 1; i <= 8; i++) assert_int_equal(t_goc(c, PK(i), &comp, CCACHE_OK), i);
  t_close(c);
  /* Ages: key i last used (100 - i) minutes ago; key 1 is the oldest. */
  char path[1024];
  for (int i = 1; i <= 8; i++) {
    t_entry_path(dir, T_DISK_TAG, PK(i), path, sizeof path);
    t_set_age(path, (100 - i) * 60);
  }
  /* A hit on key 1 with a 1-minute interval refreshes it; a hit on key 2
   * with a 10-hour interval does not (its age, 98 min, is under that). */
  c = t_cache_over(&t, &tc, PAYLOAD, t_disk_tier(dir, cap, 60000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  t_close(c);
  c = t_cache_over(&t, &tc, PAYLOAD, t_disk_tier(dir, cap, 36000000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(2), &comp, CCACHE_OK), 2);
  t_close(c);
  assert_int_equal(comp.calls, 8);
  /* Keys 9 and 10 fit; key 11 goes over the cap: the cleaner removes the
   * two least recently used (2 and 3), down to 9 entries <= 90 %. */
  ccache_tier *tier = t_disk_tier(dir, cap, 60000);
  c = t_cache_over(&t, &tc, PAYLOAD, tier, T_DISK_TAG);
  for (int i = 9; i <= 11; i++) {
    assert_int_equal(t_goc(c, PK(i), &comp, CCACHE_OK), i);
    assert_true(ccache__disk_settle(tier, 30000));
  }
  t_close(c);
  struct stat st;
  for (int i = 1; i <= 11; i++) {
    t_entry_path(dir, T_DISK_TAG, PK(i), path, sizeof path);
    bool want = !(i == 2 || i == 3);
    if ((stat(path, &st) == 0) != want) fail_msg("key %d: present %d, want %d", i, !want, want);
  }
  t_tree_scan(dir);
  assert_int_equal(t_tree_entries, 9);
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(options_and_trust),
      cmocka_unit_test(round_trip_and_layout),
      cmocka_unit_test(thousand_bad_entries_load_nothing_bad),
      cmocka_unit_test_teardown(faults_are_tier_errors_never_failed_fetches, clear_faults),
      cmocka_unit_test(enospc_on_a_full_tmpfs),
      cmocka_unit_test(read_only_directory),
      cmocka_unit_test(directory_removed_under_a_running_cache),
      cmocka_unit_test_teardown(writer_killed_between_write_and_rename, clear_faults),
      cmocka_unit_test_teardown(lock_holder_killed_mid_compile, kill_holders),
      cmocka_unit_test(nested_compile_in_a_second_cache_does_not_wait),
      cmocka_unit_test(two_caches_in_one_process_compile_once),
      cmocka_unit_test(two_processes_compile_once),
      cmocka_unit_test(nested_work_on_a_pool_thread_waits_lock_wait_ms),
      cmocka_unit_test(four_processes_compile_each_key_once),
      cmocka_unit_test(cap_holds_under_many_puts),
      cmocka_unit_test(cleaner_removes_least_recently_used_and_hits_refresh),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
