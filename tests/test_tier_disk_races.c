/*
 * test_tier_disk_races.c - the directory tier stays exact under concurrency
 * (issue 34): a sweep in another process against the cleaner's move-aside,
 * against a remover killed after its move-aside, and against a write that
 * replaces an old entry; and the cap's bound under 8 writing processes.
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
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "disk_support.h"
#include "tier/disk/disk.h"
#include "tier/tier.h"

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A directory tier over dir, attached to T_DISK_TAG's namespace: its raw
 * ops are what the cache calls (NULL on failure; usable in children). */
static ccache_tier *raw_tier_io(const char *dir, uint64_t max_bytes, uint64_t io_lock_ms) {
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.lock_poll_ms = 1;
  o.lock_poll_max_ms = 8;
  o.lock_wait_ms = 2000;
  o.io_lock_ms = io_lock_ms;
  ccache_tier *t = NULL;
  if (ccache_tier_disk(&o, &t) != CCACHE_OK) return NULL;
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash(T_DISK_TAG), ns);
  if (t->ops.attach(t->state, ns) != CCACHE_OK) {
    ccache_tier_free(t);
    return NULL;
  }
  return t;
}

static ccache_tier *raw_tier(const char *dir, uint64_t max_bytes) {
  return raw_tier_io(dir, max_bytes, 10000); /* generous: a loaded machine, sanitizers */
}

static unsigned char blob[4096];

static int put(ccache_tier *t, ccache_key k, size_t len) {
  return t->ops.put(t->state, k, blob, len);
}

/* Children of the running test, killed by the teardown if it failed. */
static pid_t kids[8];
static int reap_kids(void **state) {
  (void)state;
  for (int i = 0; i < 8; i++)
    if (kids[i] > 0) {
      kill(kids[i], SIGKILL);
      waitpid(kids[i], NULL, 0);
      kids[i] = 0;
    }
  ccache__disk_fault = NULL;
  return 0;
}

static bool read_within(int fd, void *buf, size_t n, uint64_t ms) {
  uint64_t until = mono_ms() + ms;
  size_t got = 0;
  while (got < n) {
    uint64_t now = mono_ms();
    if (now >= until) return false;
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, (int)(until - now));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t k = read(fd, (char *)buf + got, n - got);
    if (k <= 0) return false;
    got += (size_t)k;
  }
  return true;
}

/* waitpid within ms: the exit status, 128 + signal, or -1 (then killed). */
static int wait_within(pid_t pid, uint64_t ms) {
  uint64_t until = mono_ms() + ms;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (mono_ms() >= until) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      return -1;
    }
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
}

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

/* The fault hook of a child: at `pause_point`, the first time, tell the
 * parent (pause_w) and wait (at most 60 s) for its go (pause_r); at
 * `die_point`, die at once (SIGKILL: no cleanup of any kind). */
static const char *pause_point, *die_point;
static int pause_w = -1, pause_r = -1;
static _Atomic int paused;
static int hook(const char *point) {
  if (die_point && strcmp(point, die_point) == 0) raise(SIGKILL);
  if (pause_point && strcmp(point, pause_point) == 0 && !atomic_exchange(&paused, 1)) {
    char b = 'p';
    if (write(pause_w, &b, 1) != 1) _exit(40);
    if (!read_within(pause_r, &b, 1, 60000)) _exit(41);
  }
  return 0;
}

/* Fork a child running fn(dir) with the hook armed; the pipes connect its
 * pauses to the parent (*to_child: write one byte to let it go on). */
static pid_t start_child(int (*fn)(const char *), const char *dir, int *from_child, int *to_child) {
  int up[2], down[2];
  assert_int_equal(pipe(up), 0);
  assert_int_equal(pipe(down), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    pause_w = up[1];
    pause_r = down[0];
    atomic_store(&paused, 0);
    ccache__disk_fault = hook;
    _exit(fn(dir));
  }
  close(up[1]);
  close(down[0]);
  *from_child = up[0];
  *to_child = down[1];
  return pid;
}

/* The other process's sweep: a tier object's first write into the folder
 * of PK(1..) sweeps it (here: a write of PK(20), 100 bytes). */
static void sweep_by_a_write(const char *dir) {
  ccache_tier *t = raw_tier(dir, CCACHE_UNBOUNDED);
  assert_non_null(t);
  assert_int_equal(put(t, PK(20), 100), CCACHE_OK);
  ccache_tier_free(t);
}

/* Entries PK(1..n) of len bytes each, all in one folder, aged 2 hours. */
static void old_entries(const char *dir, int n, size_t len) {
  ccache_tier *t = raw_tier(dir, CCACHE_UNBOUNDED);
  assert_non_null(t);
  for (int i = 1; i <= n; i++) assert_int_equal(put(t, PK(i), len), CCACHE_OK);
  ccache_tier_free(t);
  age_folder(dir, PK(1), 2 * 3600);
}

static void total_is_exact(const char *dir, const char *what) {
  t_tree_scan(dir);
  uint64_t recorded = t_size_total(dir);
  print_message("%s: recorded total %llu, entry files %llu (%d entries)\n", what,
                (unsigned long long)recorded, (unsigned long long)t_tree_bytes, t_tree_entries);
  assert_int_equal(recorded, t_tree_bytes);
}

/* ----------------------------------------- the cleaner's move-aside */

/* The cleaning process: 8 entries of 1000 bytes are there; with a cap of
 * 7300 (bound 8030: the write is not held), its write of a ninth wakes its
 * cleaner, which removes the oldest down to 6570 (pausing at its first
 * move-aside), then closes. */
static int cleaning_child(const char *dir) {
  pause_point = "aside";
  ccache_tier *t = raw_tier(dir, 7300);
  if (!t) return 10;
  if (put(t, PK(9), 1000) != CCACHE_OK) return 11;
  if (!ccache__disk_settle(t, 60000)) return 12;
  ccache_tier_free(t);
  return atomic_load(&paused) ? 0 : 13;
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
  pid_t pid = kids[0] = start_child(cleaning_child, dir, &from, &to);
  char b;
  assert_true(read_within(from, &b, 1, 60000)); /* the cleaner has moved its victim aside */
  int aside = dot_files(dir, PK(1));
  sweep_by_a_write(dir);
  int after_sweep = dot_files(dir, PK(1));
  assert_int_equal(write(to, "g", 1), 1);
  assert_int_equal(wait_within(pid, 60000), 0);
  kids[0] = 0;
  close(from);
  close(to);
  print_message("files aside while the cleaner paused: %d; after the other's sweep: %d\n", aside,
                after_sweep);
  total_is_exact(dir, "after the clean");
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
  die_point = "aside";
  ccache_tier *t = raw_tier(dir, CCACHE_UNBOUNDED);
  if (!t) return 10;
  t->ops.remove(t->state, PK(3));
  return 11; /* not reached: killed at the move-aside */
}

static void sweep_accounts_a_dead_removers_aside(void **state) {
  (void)state;
  char *dir = t_tempdir("deadrm");
  old_entries(dir, 4, 1000);
  int from, to;
  pid_t pid = kids[0] = start_child(removing_child, dir, &from, &to);
  assert_int_equal(wait_within(pid, 60000), 128 + SIGKILL);
  kids[0] = 0;
  close(from);
  close(to);
  assert_int_equal(dot_files(dir, PK(1)), 1);
  age_folder(dir, PK(1), 2 * 3600); /* an hour and more on */
  sweep_by_a_write(dir);
  assert_int_equal(dot_files(dir, PK(1)), 0);
  total_is_exact(dir, "after the sweep");
  t_tree_scan(dir);
  assert_int_equal(t_tree_entries, 4); /* PK(1), 2, 4 and the sweeper's PK(20) */
  t_rmrf(dir);
  free(dir);
}

/* ----------------------------------------- replacing an old entry */

/* The replacing process: PK(1) (1000 bytes, two hours old) is there; it
 * writes PK(1) again with 1500 bytes, pausing just after the exchange. */
static int replacing_child(const char *dir) {
  pause_point = "exchanged";
  ccache_tier *t = raw_tier(dir, CCACHE_UNBOUNDED);
  if (!t) return 10;
  int rc = put(t, PK(1), 1500);
  ccache_tier_free(t);
  if (!atomic_load(&paused)) return 12;
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
  pid_t pid = kids[0] = start_child(replacing_child, dir, &from, &to);
  char b;
  assert_true(read_within(from, &b, 1, 60000)); /* exchanged, not yet measured */
  sweep_by_a_write(dir);
  assert_int_equal(write(to, "g", 1), 1);
  int rc = wait_within(pid, 60000);
  kids[0] = 0;
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
  total_is_exact(dir, "after the replace");
  t_rmrf(dir);
  free(dir);
}

/* ----------------------------------------- the cap under 8 writers */

/* The bound the tier keeps (include/ccache/tier.h, max_bytes): entry bytes
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
  ccache_tier *t = raw_tier(dir, W_CAP); /* the format directory and its size file */
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
  ccache_tier *t = raw_tier(dir, W_CAP);
  if (!t) return 10;
  int withheld = 0;
  for (int i = 0; i < W_PUTS; i++) {
    int rc = put(t, SK((uint64_t)(w_id * W_PUTS + i + 1)), W_LEN);
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
    kids[i] = start_child(writing_child, dir, &from[i], &to[i]);
  }
  close(rep[1]);
  uint64_t scan_peak = 0, until = mono_ms() + 240000, next_scan = 0;
  int running = W_PROCS, bad = 0, samples = 0;
  while (running > 0 && mono_ms() < until) {
    struct pollfd pf = {w.fd, POLLIN, 0};
    poll(&pf, 1, 5);
    watch_drain(&w);
    if (mono_ms() >= next_scan) { /* reported beside the exact figure */
      t_tree_scan(dir);
      samples++;
      if (t_tree_bytes > scan_peak) scan_peak = t_tree_bytes;
      next_scan = mono_ms() + 20;
    }
    for (int i = 0; i < W_PROCS; i++) {
      int st = 0;
      if (kids[i] > 0 && waitpid(kids[i], &st, WNOHANG) == kids[i]) {
        kids[i] = 0;
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
    assert_true(read_within(rep[0], &n, sizeof n, 1000));
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
  total_is_exact(dir, "after the writers");
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
  ccache_tier *t = raw_tier_io(dir, H_CAP, H_IO_MS);
  if (!t) return 10;
  int withheld = 0;
  for (int i = 0; i < H_PUTS; i++) {
    int rc = put(t, SK((uint64_t)i + 1), H_LEN);
    if (rc == CCACHE_EBUSY)
      withheld++;
    else if (rc != CCACHE_OK)
      return 11;
  }
  if (write(pause_w, &withheld, sizeof withheld) != (ssize_t)sizeof withheld) return 12;
  char b;
  if (read(pause_r, &b, 1) != 1) return 13; /* the holder is gone */
  int rc = put(t, SK(1000), H_LEN);
  ccache_tier_free(t);
  return rc == CCACHE_OK ? 0 : 14;
}

static void cap_bound_holds_while_the_size_file_is_held(void **state) {
  (void)state;
  char *dir = t_tempdir("held");
  ccache_tier *t = raw_tier(dir, H_CAP); /* the format directory and its size file */
  assert_non_null(t);
  ccache_tier_free(t);
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  fflush(NULL);
  pid_t holder = fork();
  assert_true(holder >= 0);
  if (holder == 0) {
    char lock[1200];
    snprintf(lock, sizeof lock, "%s/v1/lock", dir);
    int fd = open(lock, O_RDWR | O_CLOEXEC);
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = 0; /* the size file's byte */
    fl.l_len = 1;
    if (fd < 0 || fcntl(fd, F_OFD_SETLK, &fl) != 0) _exit(10);
    if (write(ready[1], "r", 1) != 1) _exit(11);
    raise(SIGSTOP);
    _exit(0);
  }
  kids[0] = holder;
  close(ready[1]);
  char b;
  assert_true(read_within(ready[0], &b, 1, 60000));
  close(ready[0]);
  int from, to, withheld = -1;
  pid_t pid = kids[1] = start_child(held_writer, dir, &from, &to);
  assert_true(read_within(from, &withheld, sizeof withheld, 120000));
  t_tree_scan(dir);
  uint64_t held_bytes = t_tree_bytes;
  kill(holder, SIGKILL);
  assert_int_equal(waitpid(holder, NULL, 0), holder);
  kids[0] = 0;
  assert_int_equal(write(to, "g", 1), 1);
  int rc = wait_within(pid, 60000);
  kids[1] = 0;
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
  total_is_exact(dir, "after the holder");
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(sweep_never_takes_the_cleaners_move_aside, reap_kids),
      cmocka_unit_test_teardown(sweep_accounts_a_dead_removers_aside, reap_kids),
      cmocka_unit_test_teardown(replacing_an_old_entry_survives_a_sweep, reap_kids),
      cmocka_unit_test_teardown(cap_bound_holds_with_8_writing_processes, reap_kids),
      cmocka_unit_test_teardown(cap_bound_holds_while_the_size_file_is_held, reap_kids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
