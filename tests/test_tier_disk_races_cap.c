/*
 * test_tier_disk_races_cap.c - the directory tier's cap under concurrency
 * (issue 34): its bound under 8 writing processes, and while a stopped
 * process holds the size file's byte (writes withheld, none published).
 *
 * Forked children never use cmocka: they report through pipes and their
 * exit status.  The parent forks only while it has no other thread.
 */
#define _GNU_SOURCE 1

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "disk_proc_support.h"
#include "disk_support.h"
#include "tier/disk/disk.h"
#include "tier/tier.h"

/* ----------------------------------------- the cap under 8 writers */

/* The bound the tier keeps (include/ccache/tier_disk.h, max_bytes): entry bytes
 * <= cap + cap / 10 + one entry, however slow the writers (valgrind: each
 * ~50x slower).  8 processes, each one thread writing 150 entries of 4000
 * bytes (4.8 MB in all) as fast as it can into a 256 KiB cap, keys spread
 * over the folders; the test process follows the entry count (below) and
 * keeps the largest.  Before: the writers outran the cleaner (one per
 * machine at a time, off the miss path) and the directory grew well past
 * the bound; then, with writes that checked the total but added their
 * bytes only after their rename, it reached 78 to 80 entries (one per
 * write in progress). */
enum { W_PROCS = 8, W_PUTS = 150, W_LEN = 4000 };
#define W_CAP ((uint64_t)256 * 1024)

static ccache_key SK(uint64_t n) {
  ccache_key k = {n, n * 0x9E3779B97F4A7C15ull};
  return k;
}

/* The entry files at every instant, from the kernel's record of the renames
 * that publish entries and move them aside (inotify: one queue, in the order
 * the renames completed, give or take the renames running at that very
 * moment).  A scan of the folders is no snapshot: an entry counted in a
 * folder already scanned may be removed while one appears in a folder not
 * yet scanned, and under valgrind one scan lasts as long as many writes.
 * Every entry of this test is W_LEN bytes: the count gives the bytes. */
typedef struct watch {
  int fd;
  int64_t entries, peak;
  bool overflow;
} watch;

static bool entry_name(const char *s) {
  return strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32;
}

static void mkdir_p(const char *path) {
  char p[1024];
  snprintf(p, sizeof p, "%s", path);
  for (char *q = p + 1; *q; q++)
    if (*q == '/') {
      *q = '\0';
      mkdir(p, 0700);
      *q = '/';
    }
  mkdir(p, 0700);
}

/* The directory formatted, every folder of T_DISK_TAG's namespace made (as
 * a write would make it) and watched, before any writer starts. */
static void watch_start(watch *w, const char *dir) {
  memset(w, 0, sizeof *w);
  ccache_tier *t = t_raw_tier(dir, W_CAP); /* the format directory and its size file */
  assert_non_null(t);
  ccache_tier_free(t);
  w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  assert_true(w->fd >= 0);
  for (uint64_t xx = 0; xx < 256; xx++) {
    char sub[1024];
    ccache_key k = {xx << 56, xx << 56};
    t_subdir_path(dir, T_DISK_TAG, k, sub, sizeof sub);
    mkdir_p(sub);
    assert_true(inotify_add_watch(w->fd, sub, IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE) >= 0);
  }
}

static void watch_drain(watch *w) {
  char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
  ssize_t n;
  while ((n = read(w->fd, buf, sizeof buf)) > 0)
    for (char *p = buf; p < buf + n;) {
      const struct inotify_event *ev = (const struct inotify_event *)p;
      if (ev->mask & IN_Q_OVERFLOW)
        w->overflow = true;
      else if (ev->len && entry_name(ev->name) && (ev->mask & IN_MOVED_TO)) {
        if (++w->entries > w->peak) w->peak = w->entries;
      } else if (ev->len && entry_name(ev->name)) {
        w->entries--; /* moved aside (or unlinked) */
      }
      p += sizeof *ev + ev->len;
    }
}

static int w_id, w_report = -1;
static int writing_child(const char *dir) {
  ccache_tier *t = t_raw_tier(dir, W_CAP);
  if (!t) return 10;
  int withheld = 0;
  for (int i = 0; i < W_PUTS; i++) {
    int rc = t_raw_put(t, SK((uint64_t)(w_id * W_PUTS + i + 1)), W_LEN);
    if (rc == CCACHE_EBUSY)
      withheld++;
    else if (rc != CCACHE_OK)
      return 11;
  }
  ccache_tier_free(t);
  return write(w_report, &withheld, sizeof withheld) == (ssize_t)sizeof withheld ? 0 : 12;
}

static void cap_bound_holds_with_8_writing_processes(void **state) {
  (void)state;
  char *dir = t_tempdir("cap8");
  watch w;
  watch_start(&w, dir);
  int rep[2];
  assert_int_equal(pipe(rep), 0);
  w_report = rep[1];
  int from[W_PROCS], to[W_PROCS];
  for (int i = 0; i < W_PROCS; i++) {
    w_id = i;
    t_kids[i] = t_start_child(writing_child, dir, &from[i], &to[i]);
  }
  close(rep[1]);
  uint64_t scan_peak = 0, until = t_mono_ms() + 240000, next_scan = 0;
  int running = W_PROCS, bad = 0, samples = 0;
  while (running > 0 && t_mono_ms() < until) {
    struct pollfd pf = {w.fd, POLLIN, 0};
    poll(&pf, 1, 5);
    watch_drain(&w);
    if (t_mono_ms() >= next_scan) { /* reported beside the exact figure */
      t_tree_scan(dir);
      samples++;
      if (t_tree_bytes > scan_peak) scan_peak = t_tree_bytes;
      next_scan = t_mono_ms() + 20;
    }
    for (int i = 0; i < W_PROCS; i++) {
      int st = 0;
      if (t_kids[i] > 0 && waitpid(t_kids[i], &st, WNOHANG) == t_kids[i]) {
        t_kids[i] = 0;
        running--;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
      }
    }
  }
  assert_int_equal(running, 0);
  assert_int_equal(bad, 0);
  watch_drain(&w);
  close(w.fd);
  uint64_t peak = (uint64_t)w.peak * W_LEN;
  int withheld = 0, n;
  for (int i = 0; i < W_PROCS; i++) {
    assert_true(t_read_within(rep[0], &n, sizeof n, 1000));
    withheld += n;
    close(from[i]);
    close(to[i]);
  }
  close(rep[0]);
  const uint64_t bound = W_CAP + W_CAP / 10 + W_LEN;
  print_message(
      "largest directory %llu bytes (%lld entries; scans of the tree: largest %llu over %d); "
      "bound %llu (cap %llu); %d of %d writes withheld\n",
      (unsigned long long)peak, (long long)w.peak, (unsigned long long)scan_peak, samples,
      (unsigned long long)bound, (unsigned long long)W_CAP, withheld, W_PROCS * W_PUTS);
  assert_false(w.overflow);
  assert_true(peak > W_CAP); /* the cap was reached: the bound was tested */
  assert_true(peak <= bound);
  assert_true(withheld <= W_PROCS * W_PUTS / 10);
  t_total_is_exact(dir, "after the writers");
  t_tree_scan(dir);
  assert_int_equal(w.entries, t_tree_entries); /* the record kept up with every rename */
  t_rmrf(dir);
  free(dir);
}

/* ------------------------------------ the cap while the size file is held */

/* A process stopped while it holds the size file's byte (^Z, a debugger, a
 * cgroup freezer): no write can put its bytes into the total.  A capped
 * tier then withholds its writes (the first after io_lock_ms, the next ones
 * after one try) rather than publish entries the total does not hold; once
 * the holder is gone, writes publish again.  Before: every write published
 * with its size delta left pending, and the directory grew past its cap
 * without bound for as long as the byte was held. */
enum { H_PUTS = 40, H_LEN = 4000 };
#define H_CAP   ((uint64_t)64 * 1024)
#define H_IO_MS 300

static int held_writer(const char *dir) {
  ccache_tier *t = t_raw_tier_io(dir, H_CAP, H_IO_MS);
  if (!t) return 10;
  int withheld = 0;
  for (int i = 0; i < H_PUTS; i++) {
    int rc = t_raw_put(t, SK((uint64_t)i + 1), H_LEN);
    if (rc == CCACHE_EBUSY)
      withheld++;
    else if (rc != CCACHE_OK)
      return 11;
  }
  if (write(t_pause_w, &withheld, sizeof withheld) != (ssize_t)sizeof withheld) return 12;
  char b;
  if (read(t_pause_r, &b, 1) != 1) return 13; /* the holder is gone */
  int rc = t_raw_put(t, SK(1000), H_LEN);
  ccache_tier_free(t);
  return rc == CCACHE_OK ? 0 : 14;
}

static void cap_bound_holds_while_the_size_file_is_held(void **state) {
  (void)state;
  char *dir = t_tempdir("held");
  ccache_tier *t = t_raw_tier(dir, H_CAP); /* the format directory and its size file */
  assert_non_null(t);
  ccache_tier_free(t);
  bool held;
  pid_t holder = t_stop_holding_size_lock(dir, 60000, &held);
  assert_true(holder >= 0);
  t_kids[0] = holder;
  assert_true(held);
  int from, to, withheld = -1;
  pid_t pid = t_kids[1] = t_start_child(held_writer, dir, &from, &to);
  assert_true(t_read_within(from, &withheld, sizeof withheld, 120000));
  t_tree_scan(dir);
  uint64_t held_bytes = t_tree_bytes;
  kill(holder, SIGKILL);
  assert_int_equal(waitpid(holder, NULL, 0), holder);
  t_kids[0] = 0;
  assert_int_equal(write(to, "g", 1), 1);
  int rc = t_wait_within(pid, 60000);
  t_kids[1] = 0;
  close(from);
  close(to);
  const uint64_t bound = H_CAP + H_CAP / 10 + H_LEN;
  print_message(
      "while the size file was held: %d of %d writes withheld, directory %llu bytes "
      "(bound %llu); after: the writer exited %d\n",
      withheld, H_PUTS, (unsigned long long)held_bytes, (unsigned long long)bound, rc);
  assert_int_equal(withheld, H_PUTS);
  assert_int_equal(held_bytes, 0);
  assert_int_equal(rc, 0);
  t_tree_scan(dir);
  assert_int_equal(t_tree_entries, 1);
  t_total_is_exact(dir, "after the holder");
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(cap_bound_holds_with_8_writing_processes, t_reap_kids),
      cmocka_unit_test_teardown(cap_bound_holds_while_the_size_file_is_held, t_reap_kids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
