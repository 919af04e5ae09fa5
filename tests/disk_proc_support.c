/*
 * disk_proc_support.c - helpers of the directory-tier tests that run
 * processes (see disk_proc_support.h).
 */
#define _GNU_SOURCE 1

#include "disk_proc_support.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tier/disk/disk.h"
#include "tier/tier.h"

uint64_t t_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

pid_t t_kids[8];
int t_reap_kids(void **state) {
  (void)state;
  for (int i = 0; i < 8; i++)
    if (t_kids[i] > 0) {
      kill(t_kids[i], SIGKILL);
      waitpid(t_kids[i], NULL, 0);
      t_kids[i] = 0;
    }
  ccache__disk_fault = NULL;
  ccache__disk_clock_s = NULL;
  ccache__disk_fixed_word = 0;
  return 0;
}

bool t_read_within(int fd, void *buf, size_t n, uint64_t ms) {
  uint64_t until = t_mono_ms() + ms;
  size_t got = 0;
  while (got < n) {
    uint64_t now = t_mono_ms();
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

int t_wait_within(pid_t pid, uint64_t ms) {
  uint64_t until = t_mono_ms() + ms;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (t_mono_ms() >= until) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      return -1;
    }
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
}

ccache_tier *t_disk_tier_io(const char *dir, uint64_t max_bytes, uint64_t io_lock_ms) {
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.lock_poll_ms = 1;
  o.lock_poll_max_ms = 8;
  o.lock_wait_ms = 2000;
  o.io_lock_ms = io_lock_ms;
  ccache_tier *t = NULL;
  return ccache_tier_disk(&o, &t) == CCACHE_OK ? t : NULL;
}

ccache_tier *t_raw_tier_io(const char *dir, uint64_t max_bytes, uint64_t io_lock_ms) {
  ccache_tier *t = t_disk_tier_io(dir, max_bytes, io_lock_ms);
  if (!t) return NULL;
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash(T_DISK_TAG), ns);
  if (t->ops.attach(t->state, ns) != CCACHE_OK) {
    ccache_tier_free(t);
    return NULL;
  }
  return t;
}

ccache_tier *t_raw_tier(const char *dir, uint64_t max_bytes) {
  return t_raw_tier_io(dir, max_bytes, 10000); /* generous: a loaded machine, sanitizers */
}

static unsigned char blob[4096];

int t_raw_put(ccache_tier *t, ccache_key k, size_t len) {
  return t->ops.put(t->state, k, blob, len);
}

const char *t_pause_point, *t_die_point;
int t_pause_w = -1, t_pause_r = -1;
_Atomic int t_paused;
static int hook(const char *point) {
  if (t_die_point && strcmp(point, t_die_point) == 0) raise(SIGKILL);
  if (t_pause_point && strcmp(point, t_pause_point) == 0 && !atomic_exchange(&t_paused, 1)) {
    char b = 'p';
    if (write(t_pause_w, &b, 1) != 1) _exit(40);
    if (!t_read_within(t_pause_r, &b, 1, 60000)) _exit(41);
  }
  return 0;
}

pid_t t_start_child(int (*fn)(const char *), const char *dir, int *from_child, int *to_child) {
  int up[2], down[2];
  assert_int_equal(pipe(up), 0);
  assert_int_equal(pipe(down), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    t_pause_w = up[1];
    t_pause_r = down[0];
    atomic_store(&t_paused, 0);
    ccache__disk_fault = hook;
    _exit(fn(dir));
  }
  close(up[1]);
  close(down[0]);
  *from_child = up[0];
  *to_child = down[1];
  return pid;
}

void t_total_is_exact(const char *dir, const char *what) {
  t_tree_scan(dir);
  uint64_t recorded = t_size_total(dir);
  print_message("%s: recorded total %llu, entry files %llu (%d entries)\n", what,
                (unsigned long long)recorded, (unsigned long long)t_tree_bytes, t_tree_entries);
  assert_int_equal(recorded, t_tree_bytes);
}

/* The child: the size file's byte is offset 0 of <dir>/v1/lock. */
static void hold_size_lock_and_stop(const char *dir, int ready_w) {
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
  if (write(ready_w, "r", 1) != 1) _exit(11);
  raise(SIGSTOP);
  _exit(0);
}

pid_t t_stop_holding_size_lock(const char *dir, uint64_t ready_ms, bool *held) {
  int ready[2];
  *held = false;
  if (pipe(ready) != 0) return -1;
  fflush(NULL);
  pid_t holder = fork();
  if (holder == 0) hold_size_lock_and_stop(dir, ready[1]);
  close(ready[1]);
  char b;
  if (holder > 0) *held = t_read_within(ready[0], &b, 1, ready_ms);
  close(ready[0]);
  return holder;
}
