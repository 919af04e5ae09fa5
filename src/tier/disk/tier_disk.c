/*
 * tier_disk.c - the directory tier: one file per program, shared by the
 * processes of one machine.
 *
 * Layout under the checked directory <dir> (all paths below are relative to
 * the descriptor opened when the tier was made, so a directory removed or
 * swapped later is never followed):
 *   v<format>/lock                  byte 0 guards the size file, byte 1 elects the cleaner
 *   v<format>/size                  running total of entry bytes
 *   v<format>/<tag hash>/<xx>/<key> entries (xx: the key's first 2 hex)
 *   v<format>/<tag hash>/<xx>/lock  compile locks of the folder's keys (disk_lock.c)
 *   v<format>/<tag hash>/<xx>/.tmp.<pid>.<word>.<n>  entries being written
 *   v<format>/<tag hash>/<xx>/.del.<pid>.<word>.<n>  entries moved aside to be removed
 *
 * Entries are read, published and removed by disk_entry.c; the size total,
 * paths and temporary files are disk_space.c's; the compile locks
 * disk_lock.c's; the cleaner disk_clean.c's.  This file makes the tier
 * (options, the checked directory, the format directory at attach) and
 * closes it.
 *
 * The size file is updated under byte 0 of v<format>/lock, taken on a
 * description of the caller's own and waited for at most io_lock_ms (a
 * holder may be stopped: a debugger, ^Z, a cgroup freezer).  A write that
 * cannot have it still publishes; its delta stays pending in this tier
 * object and goes in with the next update that gets the byte (the next
 * write or remove of this tier object, the cleaner's, or close).  Nothing
 * ever scans while holding the byte: when the size file is missing or
 * damaged, the cleaner thread (disk_clean.c) counts, then takes the byte for
 * the one write.
 */
#define _GNU_SOURCE 1 /* F_OFD_SETLK, renameat2 (Linux) */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/detail.h"
#include "base/sync.h"
#include "tier/tier.h"

#include "tier/disk/disk.h"

/* ------------------------------------------------------------ fork registry */
/* A child of fork() must not keep the parent's lock file descriptions
 * open: if the parent died holding the cleaner's byte, the child's copy
 * would keep it alive.  The child closes every such descriptor it inherited
 * (its copies of the tiers are unusable there anyway, like the caches);
 * disk_lock.c does the same for the compile locks. */
static ccache__mutex disk_fork_mu = {.posix = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static disk *reg_head;

static void reg_prepare(void) { ccache__lock(&disk_fork_mu); }
static void reg_parent(void) { ccache__unlock(&disk_fork_mu); }
static void reg_child(void) {
  for (disk *d = reg_head; d; d = d->reg_next) {
    if (d->lockfd >= 0) close(d->lockfd);
    d->lockfd = -1;
    d->c.started = false; /* (its cleaner thread is the parent's: none to join here) */
  }
  ccache__unlock(&disk_fork_mu);
}
static void reg_init(void) { pthread_atfork(reg_prepare, reg_parent, reg_child); }

static void reg_add(disk *d) {
  pthread_once(&reg_once, reg_init);
  ccache__lock(&disk_fork_mu);
  d->reg_next = reg_head;
  if (reg_head) reg_head->reg_prev = d;
  reg_head = d;
  ccache__unlock(&disk_fork_mu);
}

static void reg_remove(disk *d) {
  ccache__lock(&disk_fork_mu);
  if (d->reg_prev)
    d->reg_prev->reg_next = d->reg_next;
  else
    reg_head = d->reg_next;
  if (d->reg_next) d->reg_next->reg_prev = d->reg_prev;
  ccache__unlock(&disk_fork_mu);
}

/* ------------------------------------------------------------------- ops */

/* A new format directory appears whole: made under a temporary name with
 * its size file (total 0) and renamed into place unless one is there, so no
 * process ever sees it without a size file, and none adds to a total that
 * is not one. */
static void make_format_dir(disk *d) {
  struct stat st;
  if (fstatat(d->dirfd, d->fmt, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) return;
  char tmp[64]; /* fmt is under 16 bytes */
  snprintf(tmp, sizeof tmp, ".%.15s.tmp.%ld.%016llx", d->fmt, (long)getpid(),
           (unsigned long long)d->word);
  if (mkdirat(d->dirfd, tmp, 0700) != 0) return;
  int tfd = openat(d->dirfd, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  bool ok = tfd >= 0 && ccache__disk_size_create(d, tfd, "size", 0);
  if (tfd >= 0) close(tfd);
  ok = ok && renameat2(d->dirfd, tmp, d->dirfd, d->fmt, RENAME_NOREPLACE) == 0;
  if (!ok) { /* another process made it first (or no space): theirs stands */
    char rel[80];
    snprintf(rel, sizeof rel, "%s/size", tmp);
    unlinkat(d->dirfd, rel, 0);
    unlinkat(d->dirfd, tmp, AT_REMOVEDIR);
    mkdirat(d->dirfd, d->fmt, 0700); /* (renameat2 unsupported: a plain directory) */
  }
}

static int disk_attach(void *state, const char *ns) {
  disk *d = state;
  if (!ns || strlen(ns) >= sizeof d->ns) return CCACHE_EINVAL;
  const char *slash = strchr(ns, '/');
  if (!slash || (size_t)(slash - ns) >= sizeof d->fmt || strchr(slash + 1, '/'))
    return CCACHE_EINVAL;
  memcpy(d->fmt, ns, (size_t)(slash - ns));
  d->fmt[slash - ns] = '\0';
  strcpy(d->ns, ns);
  /* A read-only directory can still serve hits: failures to create here
   * only show later, as failed writes and locks (tier_errors). */
  make_format_dir(d);
  /* The two levels every key shares are checked here too, so a directory
   * whose format or runtime-tag level is a link or not private disables
   * the tier at open (one tier error) rather than failing every op. */
  int nsfd = -1;
  int rc = ccache__disk_walk(d, d->ns, true, &nsfd);
  if (rc == CCACHE_OK) close(nsfd);
  if (rc == CCACHE_EPERM) return CCACHE_EPERM; /* (errno says which) */
  char rel[REL_MAX];
  snprintf(rel, sizeof rel, "%s/lock", d->fmt);
  d->lockfd = openat(d->dirfd, rel, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  snprintf(rel, sizeof rel, "%s/size", d->fmt);
  d->sizefd = openat(d->dirfd, rel, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  /* Attach waits for no one and counts nothing: a format directory that
   * has no readable size file is counted by the cleaner thread. */
  uint64_t total;
  if ((d->sizefd >= 0 || errno == ENOENT) && !ccache__disk_size_peek(d, &total))
    ccache__disk_cleaner_kick(d, false, true);
  return CCACHE_OK;
}
static int disk_health(void *state, uint32_t part, ccache_tier_health *out) {
  disk *d = state;
  if (part > 0) return CCACHE_MISS;
  snprintf(out->where, sizeof out->where, "%s", d->dir);
  return CCACHE_OK;
}

static int disk_lock(void *state, ccache_key key, void **lock) {
  disk *d = state;
  char sub[REL_MAX], path[REL_MAX];
  ccache__disk_key_paths(d, key, sub, path);
  return ccache__disk_lock_take(d, sub, key, lock);
}

static void disk_unlock(void *state, void *lock) {
  (void)state;
  ccache__disk_lock_drop(lock);
}

static void disk_close(void *state) {
  disk *d = state;
  ccache__disk_cleaner_stop(d);
  /* The deltas still pending, if the byte can be had (else the total stays
   * short of them until the directory is recounted). */
  uint64_t total;
  if (atomic_load(&d->pending) != 0)
    ccache__disk_size_add(d, 0, atomic_load(&d->io_stuck) ? 0 : d->o.io_lock_ms, &total);
  reg_remove(d);
  if (d->lockfd >= 0) close(d->lockfd);
  if (d->sizefd >= 0) close(d->sizefd);
  close(d->dirfd);
  ccache__disk_cleaner_destroy(d);
  ccache__mutex_destroy(&d->space_mu);
  free(d->dir);
  free(d);
}

/* ---------------------------------------------------------------- creation */

void ccache_disk_options_init(ccache_disk_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
  o->max_bytes = CCACHE_UNBOUNDED;
  o->lock_poll_ms = 10;
  o->lock_poll_max_ms = 100;
  o->lock_wait_ms = 60000;
  o->touch_interval_ms = 60000;
  o->io_lock_ms = 2000;
}

/* The random word of a tier object's temp names.  Without getrandom() (a
 * kernel older than 3.17), the clock and the object's address still differ
 * between processes and objects. */
static uint64_t temp_word(void) {
#ifdef CCACHE_TESTING
  if (ccache__disk_fixed_word) return ccache__disk_fixed_word;
#endif
  uint64_t w = 0;
  if (getrandom(&w, sizeof w, GRND_NONBLOCK) == (ssize_t)sizeof w && w) return w;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 48) ^
         (uint64_t)(uintptr_t)&w;
}

/* mkdir -p, each level 0700; errors show when the directory is opened. */
static void make_path(const char *dir) {
  char *p = strdup(dir);
  if (!p) return;
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = '\0';
    mkdir(p, 0700);
    *s = '/';
  }
  mkdir(p, 0700);
  free(p);
}

/* Open dir and check it is private to this user.  Returns the descriptor,
 * or a negative status with the detail recorded. */
static int open_private_dir(const char *dir) {
  make_path(dir);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    ccache__detail("ccache disk tier: cannot open directory %s: %s", dir, strerror(errno));
    return CCACHE_EIO;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ccache__detail("ccache disk tier: cannot stat directory %s: %s", dir, strerror(errno));
    close(fd);
    return CCACHE_EIO;
  }
  /* Whoever can write here can hand this process a program to run. */
  if (st.st_uid != geteuid()) {
    ccache__detail(
        "ccache disk tier: refusing directory %s: owned by uid %lu, not by this "
        "user (uid %lu)",
        dir, (unsigned long)st.st_uid, (unsigned long)geteuid());
    close(fd);
    return CCACHE_EPERM;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    ccache__detail(
        "ccache disk tier: refusing directory %s: writable by group or others "
        "(mode %04o); give the tier a directory of its own, e.g. a new one (it is "
        "created 0700), or remove group and other write from this one if only you use it",
        dir, (unsigned)(st.st_mode & 07777));
    close(fd);
    return CCACHE_EPERM;
  }
  return fd;
}

int ccache_tier_disk(const ccache_disk_options *o, ccache_tier **out) {
  if (!o || !out || o->size < sizeof *o || !o->dir || !o->dir[0] || o->max_bytes == 0 ||
      o->lock_poll_ms < 1 || o->lock_poll_max_ms < o->lock_poll_ms)
    return CCACHE_EINVAL;
#ifndef F_OFD_SETLK
  ccache__detail("ccache disk tier: this system has no open-file-description locks");
  return CCACHE_ENOTSUP;
#else
  int fd = open_private_dir(o->dir);
  if (fd < 0) return fd;
  disk *d = calloc(1, sizeof *d);
  char *dir = strdup(o->dir);
  if (!d || !dir || ccache__mutex_init(&d->space_mu) != CCACHE_OK) {
    free(d);
    free(dir);
    close(fd);
    return CCACHE_ENOMEM;
  }
  if (ccache__disk_cleaner_init(d) != CCACHE_OK) {
    ccache__mutex_destroy(&d->space_mu);
    free(d);
    free(dir);
    close(fd);
    return CCACHE_ENOMEM;
  }
  d->word = temp_word();
  memcpy(&d->o, o, sizeof d->o);
  d->o.dir = d->dir = dir;
  d->dirfd = fd;
  d->lockfd = d->sizefd = -1;
  ccache_tier_ops ops = {
      .size = sizeof ops,
      .name = "disk",
      .attach = disk_attach,
      .get = ccache__disk_get,
      .free_blob = ccache__disk_free_blob,
      .put = ccache__disk_put,
      .remove = ccache__disk_remove,
      .lock = disk_lock,
      .renew = NULL, /* the kernel drops a dead holder's lock: no lease */
      .unlock = disk_unlock,
      .close = disk_close,
      .lease_ms = 0,
      .poll_ms = o->lock_poll_ms,
      .poll_max_ms = o->lock_poll_max_ms,
      .wait_ms = o->lock_wait_ms,
      .remove_if = ccache__disk_remove_if,
      .health = disk_health,
      .flags = CCACHE_TIER_PRIVATE, /* it refuses folders others can write */
  };
  int rc = ccache_tier_custom(&ops, d, out);
  if (rc != CCACHE_OK) {
    ccache__disk_cleaner_destroy(d);
    ccache__mutex_destroy(&d->space_mu);
    free(dir);
    free(d);
    close(fd);
    return rc;
  }
  d->tier = *out;
  d->tier->lock_timeouts = &d->lock_timeouts;
  d->tier->get_bounded = ccache__disk_get_bounded;
  reg_add(d);
  return CCACHE_OK;
#endif
}
