/*
 * test_tier_disk_races.c - the directory tier stays exact under concurrency
 * (issue 34): a sweep in another process against the cleaner's move-aside,
 * against a remover killed after its move-aside, and against a write that
 * replaces an old entry.  The cap's bound under concurrent writers is in
 * test_tier_disk_races_cap.c.
 *
 * "Last used over an hour ago" is made with utimensat() (t_set_age): the
 * files are old by their mtime, as the LRU clean's victims are.  The races
 * are made exact with the tier's fault points ("aside": just after an entry
 * is renamed aside; "exchanged": just after RENAME_EXCHANGE put a new entry
 * in place): the process at the point waits there for the test, which runs
 * the other process's sweep (its first write into the folder) meanwhile.
 * Forked children never use cmocka: they report through their exit status.
 * The parent forks only while it has no other thread.
 */
#define _GNU_SOURCE 1

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "disk_proc_support.h"
#include "disk_support.h"
#include "tier/disk/disk.h"
#include "tier/tier.h"

/* Files of the key's folder whose names start with a dot and are not the
 * lock file: temporary and moved-aside files. */
static int dot_files(const char *dir, ccache_key k) {
  char sub[1024];
  t_subdir_path(dir, T_DISK_TAG, k, sub, sizeof sub);
  return t_count_prefix(sub, ".") - 2; /* not "." and ".." */
}

/* Age every entry of the key's folder (and anything else in it) by s. */
static void age_folder(const char *dir, ccache_key k, time_t s) {
  char sub[1024], p[1400];
  t_subdir_path(dir, T_DISK_TAG, k, sub, sizeof sub);
  DIR *d = opendir(sub);
  assert_non_null(d);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (strcmp(de->d_name, "lock") == 0) continue;
    snprintf(p, sizeof p, "%s/%s", sub, de->d_name);
    t_set_age(p, s);
  }
  closedir(d);
}

/* The other process's sweep: a tier object's first write into the folder
 * of PK(1..) sweeps it (here: a write of PK(20), 100 bytes). */
static void sweep_by_a_write(const char *dir) {
  ccache_tier *t = t_raw_tier(dir, CCACHE_UNBOUNDED);
  assert_non_null(t);
  assert_int_equal(t_raw_put(t, PK(20), 100), CCACHE_OK);
  ccache_tier_free(t);
}

/* Entries PK(1..n) of len bytes each, all in one folder, aged 2 hours. */
static void old_entries(const char *dir, int n, size_t len) {
  ccache_tier *t = t_raw_tier(dir, CCACHE_UNBOUNDED);
  assert_non_null(t);
  for (int i = 1; i <= n; i++) assert_int_equal(t_raw_put(t, PK(i), len), CCACHE_OK);
  ccache_tier_free(t);
  age_folder(dir, PK(1), 2 * 3600);
}

/* ----------------------------------------- the cleaner's move-aside */

/* The cleaning process: 8 entries of 1000 bytes are there; with a cap of
 * 7300 (bound 8030: the write is not held), its write of a ninth wakes its
 * cleaner, which removes the oldest down to 6570 (pausing at its first
 * move-aside), then closes. */
static int cleaning_child(const char *dir) {
  t_pause_point = "aside";
  ccache_tier *t = t_raw_tier(dir, 7300);
  if (!t) return 10;
  if (t_raw_put(t, PK(9), 1000) != CCACHE_OK) return 11;
  if (!ccache__disk_settle(t, 60000)) return 12;
  ccache_tier_free(t);
  return atomic_load(&t_paused) ? 0 : 13;
}

/* The cleaner renames its victim aside: the victim was last used two hours
 * ago, and a rename keeps the mtime.  Another process's sweep, meanwhile,
 * must not take it for a dead writer's leftover, and the total must lose
 * exactly what was removed.  Before: the sweep deleted the aside (a
 * ".tmp." name two hours old), the cleaner measured nothing, and the total
 * kept the bytes (recorded 1000 over the entry files). */
static void sweep_never_takes_the_cleaners_move_aside(void **state) {
  (void)state;
  char *dir = t_tempdir("aside");
  old_entries(dir, 8, 1000);
  int from, to;
  pid_t pid = t_kids[0] = t_start_child(cleaning_child, dir, &from, &to);
  char b;
  assert_true(t_read_within(from, &b, 1, 60000)); /* the cleaner has moved its victim aside */
  int aside = dot_files(dir, PK(1));
  sweep_by_a_write(dir);
  int after_sweep = dot_files(dir, PK(1));
  assert_int_equal(write(to, "g", 1), 1);
  assert_int_equal(t_wait_within(pid, 60000), 0);
  t_kids[0] = 0;
  close(from);
  close(to);
  print_message("files aside while the cleaner paused: %d; after the other's sweep: %d\n", aside,
                after_sweep);
  t_total_is_exact(dir, "after the clean");
  assert_int_equal(aside, 1);
  assert_int_equal(after_sweep, 1); /* the sweep left it to the cleaner */
  assert_int_equal(dot_files(dir, PK(1)), 0);
  t_rmrf(dir);
  free(dir);
}

/* A remover killed just after its move-aside leaves the aside behind, its
 * bytes still in the total.  An hour on, another process's sweep removes
 * it, and takes its bytes off the total: whoever deletes a file accounts
 * for it.  Before: the sweep deleted it as a temporary file and the total
 * kept its 1000 bytes for good. */
static int removing_child(const char *dir) {
  t_die_point = "aside";
  ccache_tier *t = t_raw_tier(dir, CCACHE_UNBOUNDED);
  if (!t) return 10;
  t->ops.remove(t->state, PK(3));
  return 11; /* not reached: killed at the move-aside */
}

static void sweep_accounts_a_dead_removers_aside(void **state) {
  (void)state;
  char *dir = t_tempdir("deadrm");
  old_entries(dir, 4, 1000);
  int from, to;
  pid_t pid = t_kids[0] = t_start_child(removing_child, dir, &from, &to);
  assert_int_equal(t_wait_within(pid, 60000), 128 + SIGKILL);
  t_kids[0] = 0;
  close(from);
  close(to);
  assert_int_equal(dot_files(dir, PK(1)), 1);
  age_folder(dir, PK(1), 2 * 3600); /* an hour and more on */
  sweep_by_a_write(dir);
  assert_int_equal(dot_files(dir, PK(1)), 0);
  t_total_is_exact(dir, "after the sweep");
  t_tree_scan(dir);
  assert_int_equal(t_tree_entries, 4); /* PK(1), 2, 4 and the sweeper's PK(20) */
  t_rmrf(dir);
  free(dir);
}

/* ----------------------------------------- replacing an old entry */

/* The replacing process: PK(1) (1000 bytes, two hours old) is there; it
 * writes PK(1) again with 1500 bytes, pausing just after the exchange. */
static int replacing_child(const char *dir) {
  t_pause_point = "exchanged";
  ccache_tier *t = t_raw_tier(dir, CCACHE_UNBOUNDED);
  if (!t) return 10;
  int rc = t_raw_put(t, PK(1), 1500);
  ccache_tier_free(t);
  if (!atomic_load(&t_paused)) return 12;
  return rc == CCACHE_OK ? 0 : 11;
}

/* After RENAME_EXCHANGE over an entry last used two hours ago, the
 * writer's temporary name holds the replaced file until it is measured and
 * removed; another process's sweep meanwhile must not take it, the write
 * succeeds, and the total is exact.  Before: the sweep deleted it, the put
 * failed (exit 11: a tier error, although the new entry was in place), and
 * the total kept the old size. */
static void replacing_an_old_entry_survives_a_sweep(void **state) {
  (void)state;
  char *dir = t_tempdir("replace");
  old_entries(dir, 1, 1000);
  int from, to;
  pid_t pid = t_kids[0] = t_start_child(replacing_child, dir, &from, &to);
  char b;
  assert_true(t_read_within(from, &b, 1, 60000)); /* exchanged, not yet measured */
  sweep_by_a_write(dir);
  assert_int_equal(write(to, "g", 1), 1);
  int rc = t_wait_within(pid, 60000);
  t_kids[0] = 0;
  close(from);
  close(to);
  print_message("the replacing write's child exited %d (0: the put succeeded)\n", rc);
  t_tree_scan(dir);
  print_message("recorded total %llu, entry files %llu\n", (unsigned long long)t_size_total(dir),
                (unsigned long long)t_tree_bytes);
  assert_int_equal(rc, 0);
  char path[1024];
  struct stat st;
  t_entry_path(dir, T_DISK_TAG, PK(1), path, sizeof path);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, 1500);
  assert_int_equal(dot_files(dir, PK(1)), 0);
  t_total_is_exact(dir, "after the replace");
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(sweep_never_takes_the_cleaners_move_aside, t_reap_kids),
      cmocka_unit_test_teardown(sweep_accounts_a_dead_removers_aside, t_reap_kids),
      cmocka_unit_test_teardown(replacing_an_old_entry_survives_a_sweep, t_reap_kids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
