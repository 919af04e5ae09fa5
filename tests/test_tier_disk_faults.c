/*
 * test_tier_disk_faults.c - the directory tier against the faults of issue
 * 20: a stopped process holding the size file's lock (realtime), leftover
 * temporary files (a name taken, one two hours old), a miss next to another
 * key's compile, and descriptors that a compiler started at any moment
 * would inherit.  The cleaner's faults (the clean and the recount off the
 * miss path, the running total under concurrent writes and cleans) are in
 * test_tier_disk_faults_cleaner.c.
 *
 * `test_tier_disk_faults` runs the cases that never wait on real time;
 * `test_tier_disk_faults --realtime` runs those that do (each wait bounded),
 * registered with the label realtime (left out of the sanitizer runs).
 * Forked children never use cmocka: they report through pipes and their
 * exit status.  The parent forks only while it has no other thread.
 */
#define _GNU_SOURCE 1

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "disk_proc_support.h"
#include "disk_support.h"
#include "tier/disk/disk.h"
#include "tier/tier.h"

/* ------------------------------------------------------------ temp names */

/* A file left in the key's folder by a crash under this very pid: the names
 * the old scheme drew (.tmp.<pid>.<n>) and, with the word pinned, the names
 * this scheme draws first.  Neither fails the write. */
static void temp_name_taken_is_never_an_error(void **state) {
  (void)state;
  char *dir = t_tempdir("taken");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  char sub[1024], p[1200];
  t_subdir_path(dir, T_DISK_TAG, PK(1), sub, sizeof sub);
  /* A directory in use (its size file made by a first cache). */
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_non_null(c);
  t_close(c);
  mkdir(sub, 0700);
  const uint64_t word = 0x00c0ffee00c0ffeeull;
  for (int n = 0; n < 8; n++) {
    snprintf(p, sizeof p, "%s/.tmp.%ld.%d", sub, (long)getpid(), n);
    t_spit(p, "x", 1);
    snprintf(p, sizeof p, "%s/.tmp.%ld.%016llx.%d", sub, (long)getpid(), (unsigned long long)word,
             n);
    t_spit(p, "x", 1);
  }
  ccache__disk_fixed_word = word;
  c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_non_null(c);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_errors, 0);
  assert_int_equal(s.tier_writes, 1);
  t_close(c);
  ccache__disk_fixed_word = 0;
  char path[1024];
  t_entry_path(dir, T_DISK_TAG, PK(1), path, sizeof path);
  struct stat st;
  assert_int_equal(stat(path, &st), 0); /* published: shared with the next process */
  /* The leftovers are young and their pid is alive: not touched. */
  assert_int_equal(t_count_prefix(sub, ".tmp."), 16);
  t_tree_scan(dir);
  assert_int_equal(t_size_total(dir), t_tree_bytes);
  t_rmrf(dir);
  free(dir);
}

static _Atomic uint64_t fake_s = 1000;
static uint64_t fake_clock_s(void) { return atomic_load(&fake_s); }

/* The process wrote into the folder already (and swept it then); a
 * leftover two hours old is there now: the next write into the folder
 * removes it, and leaves a young one of a live writer alone. */
static void leftover_two_hours_old_swept_by_next_write(void **state) {
  (void)state;
  char *dir = t_tempdir("sweep");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache__disk_clock_s = fake_clock_s;
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_non_null(c);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  char sub[1024], old[1200], young[1200];
  t_subdir_path(dir, T_DISK_TAG, PK(1), sub, sizeof sub);
  snprintf(old, sizeof old, "%s/.tmp.%ld.0123456789abcdef.0", sub, (long)getpid());
  snprintf(young, sizeof young, "%s/.tmp.%ld.0123456789abcdef.1", sub, (long)getpid());
  t_spit(old, "x", 1);
  t_spit(young, "y", 1);
  t_set_age(old, 2 * 3600);
  /* Two hours pass (the leftover was made since the last sweep). */
  atomic_fetch_add(&fake_s, 2 * 3600);
  assert_int_equal(t_goc(c, PK(2), &comp, CCACHE_OK), 2); /* same folder: PK's hi byte */
  struct stat st;
  assert_int_equal(stat(old, &st), -1);
  assert_int_equal(stat(young, &st), 0);
  assert_int_equal(t_stats(c).tier_errors, 0);
  t_close(c);
  ccache__disk_clock_s = NULL;
  t_rmrf(dir);
  free(dir);
}

/* ------------------------------------------- per-key compile exclusion */

/* A child compiles PK(5) and never ends; the parent misses on PK(4101),
 * another key of the same folder (and, in the old layout, the same lock
 * byte: key.lo mod 4096).  It takes its own lock at once: no wait. */
static int hold_pipe = -1;
static void hold_forever(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)comp;
  (void)c;
  (void)pkey;
  if (write(hold_pipe, "h", 1) != 1) _exit(20);
  for (;;) pause();
}

static void miss_never_waits_for_another_keys_compile(void **state) {
  (void)state;
  char *dir = t_tempdir("perkey");
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    hold_pipe = fds[1];
    t_ctx t = {0};
    t_codec tc = {0};
    t_compiler comp = {0};
    comp.during = hold_forever;
    ccache_tier *tier = t_disk_tier_io(dir, CCACHE_UNBOUNDED, 2000);
    ccache *c = tier ? t_cache_over(&t, &tc, 100, tier, T_DISK_TAG) : NULL;
    if (!c) _exit(10);
    ccache_program *p = NULL;
    ccache_program_get_or_compile(c, PK(5), t_compile, &comp, &p);
    _exit(11); /* not reached */
  }
  t_kids[0] = pid;
  close(fds[1]);
  char b;
  assert_true(t_read_within(fds[0], &b, 1, 30000)); /* the child compiles PK(5) */
  close(fds[0]);
  assert_true(t_key_locked(dir, T_DISK_TAG, PK(5)));
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier_io(dir, CCACHE_UNBOUNDED, 2000), T_DISK_TAG);
  assert_non_null(c);
  assert_int_equal(t_goc(c, PK(5 + 4096), &comp, CCACHE_OK), 5 + 4096);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_lock_waits, 0);
  assert_int_equal(s.tier_errors, 0);
  assert_int_equal(s.tier_writes, 1);
  assert_int_equal(comp.calls, 1);
  t_close(c);
  t_reap_kids(NULL);
  t_rmrf(dir);
  free(dir);
}

/* ------------------------------------------------ close-on-exec descriptors */

/* At each point where the tier has a directory descriptor of its own open
 * (just copied for a directory stream; the sweep of a folder; each folder
 * of the cleaner's listing), every descriptor of this
 * process that names something under the cache directory must be
 * close-on-exec: a thread that runs a compiler (fork + exec) at that moment
 * must not hand it one. */
static char cloexec_dir[1024];
static _Atomic int cloexec_checks, cloexec_sweeps, cloexec_bad;
static int check_cloexec(const char *point) {
  if (strcmp(point, "scan_folder") != 0 && strcmp(point, "sweep") != 0 && strcmp(point, "dup") != 0)
    return 0;
  if (strcmp(point, "sweep") == 0) atomic_fetch_add(&cloexec_sweeps, 1);
  DIR *fds = opendir("/proc/self/fd");
  if (!fds) return 0;
  struct dirent *de;
  while ((de = readdir(fds)) != NULL) {
    if (de->d_name[0] == '.') continue;
    char link[300], target[1200];
    snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (strncmp(target, cloexec_dir, strlen(cloexec_dir)) != 0) continue;
    atomic_fetch_add(&cloexec_checks, 1);
    int flags = fcntl(atoi(de->d_name), F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC)) atomic_fetch_add(&cloexec_bad, 1);
  }
  closedir(fds);
  return 0;
}

static void cache_descriptors_are_close_on_exec(void **state) {
  (void)state;
  enum { PAYLOAD = 1000 };
  const uint64_t e = ccache__tier_entry_len(PAYLOAD);
  char *dir = t_tempdir("cloexec");
  snprintf(cloexec_dir, sizeof cloexec_dir, "%s", dir);
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  cloexec_checks = cloexec_sweeps = cloexec_bad = 0;
  ccache__disk_fault = check_cloexec;
  ccache_tier *tier = t_disk_tier(dir, 10 * e, 60000);
  ccache *c = t_cache_over(&t, &tc, PAYLOAD, tier, T_DISK_TAG);
  assert_non_null(c);
  for (int i = 0; i < 20; i++) {
    assert_int_equal(t_goc(c, PK(i), &comp, CCACHE_OK), i);
    assert_true(ccache__disk_settle(tier, 30000));
  }
  t_close(c);
  ccache__disk_fault = NULL;
  print_message("%d descriptors checked at %d sweeps and the cleaners' folders\n",
                (int)cloexec_checks, (int)cloexec_sweeps);
  assert_true(cloexec_sweeps >= 1);
  assert_true(cloexec_checks >= 10);
  assert_int_equal(cloexec_bad, 0);
  t_rmrf(dir);
  free(dir);
}

/* ------------------------------------------------- realtime: a stopped holder */

/* The stopped holder's victim waits this long for the size file's lock:
 * long enough that a machine under load cannot blur "waited for it" and
 * "did not wait" (the bounds below leave 1 s for each). */
#define IO_LOCK_MS 1500

/* What the process that uses the directory saw, sent to the test. */
typedef struct seen {
  uint64_t open_ms, first_ms, second_ms;
  uint64_t timeouts, writes, errors;
  int published;
} seen;

static int user_child(const char *dir, int out, int go) {
  seen v = {0};
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  uint64_t t0 = t_mono_ms();
  ccache_tier *tier = t_disk_tier_io(dir, CCACHE_UNBOUNDED, IO_LOCK_MS);
  ccache *c = tier ? t_cache_over(&t, &tc, 100, tier, T_DISK_TAG) : NULL;
  if (!c) return 10;
  uint64_t t1 = t_mono_ms();
  ccache_program *p = NULL;
  if (ccache_program_get_or_compile(c, PK(2), t_compile, &comp, &p) != CCACHE_OK) return 11;
  ccache_program_release(c, p);
  uint64_t t2 = t_mono_ms();
  if (ccache_program_get_or_compile(c, PK(3), t_compile, &comp, &p) != CCACHE_OK) return 12;
  ccache_program_release(c, p);
  uint64_t t3 = t_mono_ms();
  ccache_stats s;
  s.size = sizeof s;
  ccache_stats_get(c, &s);
  v.open_ms = t1 - t0;
  v.first_ms = t2 - t1;
  v.second_ms = t3 - t2;
  v.timeouts = s.tier_lock_timeouts;
  v.writes = s.tier_writes;
  v.errors = s.tier_errors;
  char path[1024];
  struct stat st;
  t_entry_path(dir, T_DISK_TAG, PK(2), path, sizeof path);
  v.published = stat(path, &st) == 0;
  t_entry_path(dir, T_DISK_TAG, PK(3), path, sizeof path);
  v.published += stat(path, &st) == 0;
  if (write(out, &v, sizeof v) != (ssize_t)sizeof v) return 13;
  /* The holder is gone: the next write takes the lock and writes the two
   * deferred deltas with its own. */
  char b;
  if (read(go, &b, 1) != 0) return 14;
  if (ccache_program_get_or_compile(c, PK(4), t_compile, &comp, &p) != CCACHE_OK) return 15;
  ccache_program_release(c, p);
  return ccache_close(c) == CCACHE_OK ? 0 : 16;
}

static void stopped_process_never_hangs_open_or_writes(void **state) {
  (void)state;
  char *dir = t_tempdir("stopped");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  t_close(c);
  /* The holder: takes the size file's lock as a writer does, and is
   * stopped there (as by ^Z, a debugger or a cgroup freezer). */
  bool held;
  pid_t holder = t_stop_holding_size_lock(dir, 30000, &held);
  assert_true(holder >= 0);
  t_kids[0] = holder;
  assert_true(held);
  int st = 0;
  assert_int_equal(waitpid(holder, &st, WUNTRACED), holder);
  assert_true(WIFSTOPPED(st));

  int out[2], go[2];
  assert_int_equal(pipe(out), 0);
  assert_int_equal(pipe(go), 0);
  fflush(NULL);
  pid_t user = fork();
  assert_true(user >= 0);
  if (user == 0) {
    close(out[0]);
    close(go[1]);
    int rc = user_child(dir, out[1], go[0]);
    free(dir);
    _exit(rc);
  }
  t_kids[1] = user;
  close(out[1]);
  close(go[0]);
  seen v;
  /* Bounded: on a library that waits without bound the child hangs in
   * ccache_open and this read times out. */
  bool reported = t_read_within(out[0], &v, sizeof v, 10000);
  close(out[0]);
  if (!reported)
    fail_msg("no report within 10 s: ccache_open or a write hung on the stopped holder");
  print_message("open %llu ms, first write %llu ms, second %llu ms\n",
                (unsigned long long)v.open_ms, (unsigned long long)v.first_ms,
                (unsigned long long)v.second_ms);
  assert_true(v.open_ms < 1000); /* attach waits for no one */
  assert_true(v.first_ms >= IO_LOCK_MS && v.first_ms < IO_LOCK_MS + 3000); /* then goes on */
  assert_true(v.second_ms < 1000); /* after a timeout: one try */
  assert_int_equal(v.timeouts, 2);
  assert_int_equal(v.writes, 2);
  assert_int_equal(v.errors, 0);
  assert_int_equal(v.published, 2);
  kill(holder, SIGKILL);
  assert_int_equal(waitpid(holder, NULL, 0), holder);
  t_kids[0] = 0;
  close(go[1]); /* go on */
  assert_int_equal(t_wait_within(user, 10000), 0);
  t_kids[1] = 0;
  t_tree_scan(dir);
  assert_int_equal(t_tree_entries, 4);
  assert_int_equal(t_size_total(dir), t_tree_bytes); /* the deferred deltas went in */
  t_rmrf(dir);
  free(dir);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(temp_name_taken_is_never_an_error, t_reap_kids),
      cmocka_unit_test_teardown(leftover_two_hours_old_swept_by_next_write, t_reap_kids),
      cmocka_unit_test_teardown(miss_never_waits_for_another_keys_compile, t_reap_kids),
      cmocka_unit_test_teardown(cache_descriptors_are_close_on_exec, t_reap_kids),
  };
  const struct CMUnitTest realtime[] = {
      cmocka_unit_test_teardown(stopped_process_never_hangs_open_or_writes, t_reap_kids),
  };
  if (argc > 1 && strcmp(argv[1], "--realtime") == 0)
    return cmocka_run_group_tests_name("realtime", realtime, NULL, NULL);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
