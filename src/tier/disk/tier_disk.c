/*
 * tier_disk.c - the directory tier: one file per program, shared by the
 * processes of one machine.
 *
 * Layout under the checked directory <dir> (all paths below are relative to
 * the descriptor opened when the tier was made, so a directory removed or
 * swapped later is never followed):
 *   v<format>/lock                  compile locks: one byte per slot
 *   v<format>/size                  running total of entry bytes
 *   v<format>/<tag hash>/<xx>/<key> entries (xx: the key's first 2 hex)
 *   v<format>/<tag hash>/<xx>/.tmp.<pid>.<n>  entries being written
 *
 * Publishing is one rename() of a fully written temporary file, so readers
 * see a whole entry or none; a torn file (crash without fsync) is caught by
 * the entry checksum in tier_format.c.
 *
 * Compile locks are open-file-description byte-range locks on the lock file
 * (opened O_CLOEXEC): the kernel drops them when the holder dies, and,
 * unlike classic POSIX record locks, closing some other descriptor of the
 * file does not.  One file with SLOTS bytes bounds the lock files at one.
 * All threads of a process share one open file description, whose locks
 * never conflict with each other, so the process keeps its own count of
 * holders per slot and takes the byte from the kernel for the first only.
 *
 * The size cap works from a running total in v<format>/size, updated under
 * the byte lock SIZE_BYTE by every write and remove.  A writer that finds
 * the total over the cap tries CLEAN_BYTE without waiting: the one that gets
 * it lists every entry, removes the least recently used (by mtime) down to
 * 90 % of the cap, drops stale temporary files, and corrects the total with
 * what it counted.
 */
#define _GNU_SOURCE 1 /* F_OFD_SETLK (Linux) */

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
#include <unistd.h>

#include "base/detail.h"
#include "base/sync.h"
#include "tier/tier.h"

#include "tier/disk/disk.h"

#ifdef CCACHE_TESTING
int (*ccache__disk_fault)(const char *point);
#endif

/* ------------------------------------------------------------ fork registry */
/* A child of fork() must not keep the parent's lock file description open:
 * if the parent died holding a compile lock, the child's copy would keep
 * the lock alive.  The child closes every lock descriptor it inherited (its
 * copies of the tiers are unusable there anyway, like the caches). */
static ccache__mutex reg_mu = {.mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static disk *reg_head;

static void reg_prepare(void) { ccache__lock(&reg_mu); }
static void reg_parent(void) { ccache__unlock(&reg_mu); }
static void reg_child(void) {
  for (disk *d = reg_head; d; d = d->reg_next) {
    if (d->lockfd >= 0) close(d->lockfd);
    d->lockfd = -1;
  }
  ccache__unlock(&reg_mu);
}
static void reg_init(void) { pthread_atfork(reg_prepare, reg_parent, reg_child); }

static void reg_add(disk *d) {
  pthread_once(&reg_once, reg_init);
  ccache__lock(&reg_mu);
  d->reg_next = reg_head;
  if (reg_head) reg_head->reg_prev = d;
  reg_head = d;
  ccache__unlock(&reg_mu);
}

static void reg_remove(disk *d) {
  ccache__lock(&reg_mu);
  if (d->reg_prev)
    d->reg_prev->reg_next = d->reg_next;
  else
    reg_head = d->reg_next;
  if (d->reg_next) d->reg_next->reg_prev = d->reg_prev;
  ccache__unlock(&reg_mu);
}

/* ------------------------------------------------------------------- ops */

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
  mkdirat(d->dirfd, d->fmt, 0700);
  mkdirat(d->dirfd, d->ns, 0700);
  char rel[REL_MAX];
  snprintf(rel, sizeof rel, "%s/lock", d->fmt);
  d->lockfd = openat(d->dirfd, rel, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  snprintf(rel, sizeof rel, "%s/size", d->fmt);
  d->sizefd = openat(d->dirfd, rel, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  ccache__disk_size_update(d, 0, false, 0); /* counts an existing directory once */
  return CCACHE_OK;
}

static int disk_get(void *state, ccache_key key, void **blob, size_t *len) {
  disk *d = state;
  char sub[REL_MAX], path[REL_MAX];
  ccache__disk_key_paths(d, key, sub, path);
  if (FAULT("read")) return CCACHE_EIO;
  int fd = openat(d->dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? CCACHE_MISS : CCACHE_EIO;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      (uint64_t)st.st_size > CCACHE__TIER_MAX_PAYLOAD + CCACHE__TIER_HDR + CCACHE__TIER_SUM) {
    close(fd);
    return CCACHE_EIO;
  }
  size_t n = (size_t)st.st_size, got = 0;
  void *buf = malloc(n ? n : 1);
  if (!buf || ccache__disk_read_full(fd, buf, n, &got) != 0) {
    free(buf);
    close(fd);
    return CCACHE_EIO;
  }
  /* A hit makes the entry young again, at most once per interval, so the
   * cleaner removes what is not used; failure to touch is harmless. */
  uint64_t now = ccache__disk_realtime_ns();
  uint64_t mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
  if (now >= mtime && (now - mtime) / 1000000u >= d->o.touch_interval_ms) futimens(fd, NULL);
  close(fd);
  *blob = buf;
  *len = got;
  return CCACHE_OK;
}

static void disk_free_blob(void *state, void *blob, size_t len) {
  (void)state;
  (void)len;
  free(blob);
}

/* mkdir of each missing level of "<fmt>/<tag>/<xx>" below the directory. */
static void make_subdirs(disk *d, const char *sub) {
  if (FAULT("mkdir")) return;
  mkdirat(d->dirfd, d->fmt, 0700);
  mkdirat(d->dirfd, d->ns, 0700);
  mkdirat(d->dirfd, sub, 0700);
}

/* Create the temp file; the first time this process writes in a
 * subdirectory, sweep it of stale temp files. */
static int open_tmp(disk *d, ccache_key key, const char *sub, char tmp[REL_MAX]) {
  /* sub is "<ns>/<xx>": under CCACHE__TIER_NS_MAX + 3 bytes. */
  snprintf(tmp, REL_MAX, "%.40s/.tmp.%ld.%llu", sub, (long)getpid(),
           (unsigned long long)atomic_fetch_add(&d->tmp_seq, 1));
  int e = FAULT("open_tmp");
  if (e) {
    errno = e;
    return -1;
  }
  int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
  int fd = openat(d->dirfd, tmp, flags, 0600);
  if (fd < 0 && errno == ENOENT) {
    make_subdirs(d, sub);
    fd = openat(d->dirfd, tmp, flags, 0600);
  }
  if (fd < 0) return -1;
  unsigned xx = (unsigned)(key.hi >> 56);
  ccache__lock(&d->mu);
  bool first = !(d->swept[xx / 8] & (1u << (xx % 8)));
  d->swept[xx / 8] |= (uint8_t)(1u << (xx % 8));
  ccache__unlock(&d->mu);
  if (first) {
    int sfd = openat(d->dirfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sfd >= 0) {
      ccache__disk_sweep_tmp(sfd);
      close(sfd);
    }
  }
  return fd;
}

static int sync_dir(disk *d, const char *sub) {
  int fd = openat(d->dirfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int r = fsync(fd);
  close(fd);
  return r;
}

static int disk_put(void *state, ccache_key key, const void *blob, size_t len) {
  disk *d = state;
  char sub[REL_MAX], path[REL_MAX], tmp[REL_MAX];
  ccache__disk_key_paths(d, key, sub, path);
  int fd = open_tmp(d, key, sub, tmp);
  if (fd < 0) return CCACHE_EIO;
  bool ok = ccache__disk_write_full(fd, blob, len) == 0 && (!d->o.fsync || fsync(fd) == 0);
  ok = close(fd) == 0 && ok;
  struct stat old;
  uint64_t old_size = 0;
  if (ok && fstatat(d->dirfd, path, &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(old.st_mode))
    old_size = (uint64_t)old.st_size;
  int e = ok ? FAULT("rename") : 0;
  if (e) errno = e;
  ok = ok && !e && renameat(d->dirfd, tmp, d->dirfd, path) == 0;
  if (!ok) {
    unlinkat(d->dirfd, tmp, 0);
    return CCACHE_EIO;
  }
  /* Published.  A failed directory fsync only weakens durability. */
  if (d->o.fsync) sync_dir(d, sub);
  ccache__disk_maybe_clean(d,
                           ccache__disk_size_update(d, (int64_t)len - (int64_t)old_size, false, 0));
  return CCACHE_OK;
}

static int disk_remove(void *state, ccache_key key) {
  disk *d = state;
  char sub[REL_MAX], path[REL_MAX];
  ccache__disk_key_paths(d, key, sub, path);
  struct stat st;
  uint64_t size = 0;
  if (fstatat(d->dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0) size = (uint64_t)st.st_size;
  if (unlinkat(d->dirfd, path, 0) != 0) return errno == ENOENT ? CCACHE_MISS : CCACHE_EIO;
  ccache__disk_size_update(d, -(int64_t)size, false, 0);
  return CCACHE_OK;
}

/* Whether the file rel holds exactly the len bytes of blob. */
static bool file_holds(disk *d, const char *rel, const void *blob, size_t len) {
  int fd = openat(d->dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st;
  bool same = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == len;
  unsigned char buf[16384];
  for (size_t off = 0; same && off < len;) {
    size_t want = len - off < sizeof buf ? len - off : sizeof buf;
    ssize_t r = pread(fd, buf, want, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    same = r > 0 && memcmp(buf, (const unsigned char *)blob + off, (size_t)r) == 0;
    off += r > 0 ? (size_t)r : 0;
  }
  close(fd);
  return same;
}

/* Remove key's entry only if it is the blob read: move it aside (one
 * rename, under a temporary name the stale-file sweep knows), compare, and
 * delete it, or put it back with link() (which never replaces an entry
 * published after the move).  Between the move and the put-back a reader
 * finds no entry: the residual race, stated in the header. */
static int disk_remove_if(void *state, ccache_key key, const void *blob, size_t len) {
  disk *d = state;
  char sub[REL_MAX], path[REL_MAX], aside[REL_MAX];
  ccache__disk_key_paths(d, key, sub, path);
  snprintf(aside, REL_MAX, "%.40s/.tmp.%ld.rm%llu", sub, (long)getpid(),
           (unsigned long long)atomic_fetch_add(&d->tmp_seq, 1));
  if (renameat(d->dirfd, path, d->dirfd, aside) != 0)
    return errno == ENOENT ? CCACHE_MISS : CCACHE_EIO;
  /* Young again, so no concurrent sweep takes it for a stale temp file. */
  utimensat(d->dirfd, aside, NULL, AT_SYMLINK_NOFOLLOW);
  struct stat st;
  uint64_t size = 0;
  if (fstatat(d->dirfd, aside, &st, AT_SYMLINK_NOFOLLOW) == 0) size = (uint64_t)st.st_size;
  int rc = CCACHE_OK;
  if (!file_holds(d, aside, blob, len)) {
    rc = CCACHE_MISS; /* published after our read: it stays */
    if (linkat(d->dirfd, aside, d->dirfd, path, 0) == 0) size = 0;
  }
  unlinkat(d->dirfd, aside, 0);
  if (size) ccache__disk_size_update(d, -(int64_t)size, false, 0);
  return rc;
}

static int disk_health(void *state, uint32_t part, ccache_tier_health *out) {
  disk *d = state;
  if (part > 0) return CCACHE_MISS;
  snprintf(out->where, sizeof out->where, "%s", d->dir);
  return CCACHE_OK;
}

static int disk_lock(void *state, ccache_key key, void **lock) {
  disk *d = state;
  unsigned slot = (unsigned)(key.lo % SLOTS);
  int rc = CCACHE_OK;
  ccache__lock(&d->mu);
  if (d->lockfd < 0) {
    rc = CCACHE_EIO;
  } else if (d->slot_refs[slot] > 0) {
    d->slot_refs[slot]++; /* this process holds the byte already */
  } else if (ccache__disk_byte_lock(d->lockfd, slot, F_WRLCK, F_OFD_SETLK) == 0) {
    d->slot_refs[slot] = 1;
  } else {
    rc = errno == EAGAIN || errno == EACCES ? CCACHE_EBUSY : CCACHE_EIO;
  }
  ccache__unlock(&d->mu);
  if (rc == CCACHE_OK) *lock = (void *)(uintptr_t)(slot + 1);
  return rc;
}

static void disk_unlock(void *state, void *lock) {
  disk *d = state;
  unsigned slot = (unsigned)((uintptr_t)lock - 1);
  ccache__lock(&d->mu);
  if (d->slot_refs[slot] > 0 && --d->slot_refs[slot] == 0 && d->lockfd >= 0)
    ccache__disk_byte_lock(d->lockfd, slot, F_UNLCK, F_OFD_SETLK);
  ccache__unlock(&d->mu);
}

static void disk_close(void *state) {
  disk *d = state;
  reg_remove(d);
  if (d->lockfd >= 0) close(d->lockfd);
  if (d->sizefd >= 0) close(d->sizefd);
  close(d->dirfd);
  ccache__mutex_destroy(&d->mu);
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
        "(mode %04o); chmod 700 it",
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
  if (!d || !dir || ccache__mutex_init(&d->mu) != CCACHE_OK) {
    free(d);
    free(dir);
    close(fd);
    return CCACHE_ENOMEM;
  }
  memcpy(&d->o, o, sizeof d->o);
  d->o.dir = d->dir = dir;
  d->dirfd = fd;
  d->lockfd = d->sizefd = -1;
  ccache_tier_ops ops = {
      .size = sizeof ops,
      .name = "disk",
      .attach = disk_attach,
      .get = disk_get,
      .free_blob = disk_free_blob,
      .put = disk_put,
      .remove = disk_remove,
      .lock = disk_lock,
      .renew = NULL, /* the kernel drops a dead holder's lock: no lease */
      .unlock = disk_unlock,
      .close = disk_close,
      .lease_ms = 0,
      .poll_ms = o->lock_poll_ms,
      .poll_max_ms = o->lock_poll_max_ms,
      .wait_ms = o->lock_wait_ms,
      .remove_if = disk_remove_if,
      .health = disk_health,
  };
  int rc = ccache_tier_custom(&ops, d, out);
  if (rc != CCACHE_OK) {
    ccache__mutex_destroy(&d->mu);
    free(dir);
    free(d);
    close(fd);
    return rc;
  }
  reg_add(d);
  return CCACHE_OK;
#endif
}
