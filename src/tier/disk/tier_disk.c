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
 *
 * Publishing is one rename of a fully written temporary file, so readers
 * see a whole entry or none; a torn file (crash without fsync) is caught by
 * the entry checksum in tier_format.c.  The rename never replaces blindly:
 * RENAME_NOREPLACE, or RENAME_EXCHANGE when an entry is there, after which
 * the temporary name holds exactly the file that was replaced; so every
 * write and remove knows the bytes it added and took away, and the running
 * total in v<format>/size stays equal to the entry files' sizes however
 * many processes write and clean at once.
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
 *
 * Temporary names carry the writer's pid (the dead-writer check) and a
 * random word drawn per tier object, so a new process never draws a dead
 * one's name, and a name that is taken anyway is skipped.  Each tier object
 * sweeps a folder of stale temporary files at its first write there and
 * again at its first write an hour (RESWEEP_S) after the last sweep, so a
 * leftover two hours old is gone by the next write into its folder.
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

#ifdef CCACHE_TESTING
int (*ccache__disk_fault)(const char *point);
uint64_t (*ccache__disk_clock_s)(void);
uint64_t ccache__disk_fixed_word;
#endif

/* ------------------------------------------------------------ fork registry */
/* A child of fork() must not keep the parent's lock file descriptions
 * open: if the parent died holding the cleaner's byte, the child's copy
 * would keep it alive.  The child closes every such descriptor it inherited
 * (its copies of the tiers are unusable there anyway, like the caches);
 * disk_lock.c does the same for the compile locks. */
static ccache__mutex reg_mu = {.mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static disk *reg_head;

static void reg_prepare(void) { ccache__lock(&reg_mu); }
static void reg_parent(void) { ccache__unlock(&reg_mu); }
static void reg_child(void) {
  for (disk *d = reg_head; d; d = d->reg_next) {
    if (d->lockfd >= 0) close(d->lockfd);
    d->lockfd = -1;
    d->c.started = false; /* (its cleaner thread is the parent's: none to join here) */
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

/* The delta of one write or remove: into the size file, or pending. */
static void account(disk *d, int64_t delta) {
  uint64_t total = 0;
  switch (ccache__disk_size_add(d, delta, d->o.io_lock_ms, &total)) {
    case SIZE_WRITTEN:
      if (d->o.max_bytes != CCACHE_UNBOUNDED && total > d->o.max_bytes)
        ccache__disk_cleaner_kick(d, true, false);
      break;
    case SIZE_HELD:
      atomic_fetch_add(&d->lock_timeouts, 1);
      break;
    case SIZE_DAMAGED:
    case SIZE_DRIFTED: /* the recount is followed by a clean if over the cap */
      ccache__disk_cleaner_kick(d, false, true);
      break;
    default:
      break;
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

/* The entry's name within its folder (the last component of path). */
static const char *entry_name(const char *sub, const char *path) { return path + strlen(sub) + 1; }

/* The key's folder, by the checked walk; for a read (create false) an absent
 * level is a miss. */
static int key_folder(disk *d, const char *sub, bool create, int *sfd) {
  return ccache__disk_walk(d, sub, create, sfd);
}

/* The entry, refused before it is read if the file is longer than max_len
 * (its size from fstat on the descriptor opened: the file read is the one
 * measured), so an entry planted over the bound costs no allocation. */
static int disk_get_bounded(void *state, ccache_key key, uint64_t max_len, void **blob,
                            size_t *len) {
  disk *d = state;
  char sub[REL_MAX], path[REL_MAX];
  ccache__disk_key_paths(d, key, sub, path);
  if (FAULT("read")) return CCACHE_EIO;
  int sfd = -1;
  int rc = key_folder(d, sub, false, &sfd);
  if (rc != CCACHE_OK) return rc;
  int fd = openat(sfd, entry_name(sub, path), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  int e = errno;
  close(sfd);
  errno = e;
  /* ELOOP: the entry is a link, never followed (a tier error, not a miss). */
  if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? CCACHE_MISS : CCACHE_EIO;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return CCACHE_EIO;
  }
  if ((uint64_t)st.st_size > max_len) {
    close(fd);
    return CCACHE__TIER_OVERSIZE;
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
  uint64_t now = ccache__realtime_ns();
  uint64_t mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
  if (now >= mtime && (now - mtime) / 1000000u >= d->o.touch_interval_ms) futimens(fd, NULL);
  close(fd);
  *blob = buf;
  *len = got;
  return CCACHE_OK;
}

static int disk_get(void *state, ccache_key key, void **blob, size_t *len) {
  int rc = disk_get_bounded(state, key, CCACHE__TIER_MAX_ENTRY, blob, len);
  return rc == CCACHE__TIER_OVERSIZE ? CCACHE_EIO : rc;
}

static void disk_free_blob(void *state, void *blob, size_t len) {
  (void)state;
  (void)len;
  free(blob);
}

/* Sweep the key's folder of stale temp files at this object's first write
 * there, and again once RESWEEP_S has passed since its last sweep. */
static void maybe_sweep(disk *d, ccache_key key, int sfd) {
  unsigned xx = (unsigned)(key.hi >> 56);
  uint64_t now = ccache__disk_mono_s();
  ccache__lock(&d->mu);
  bool due = d->swept_s[xx] == 0 || now + 1 - d->swept_s[xx] >= RESWEEP_S;
  if (due) d->swept_s[xx] = now + 1;
  ccache__unlock(&d->mu);
  if (due) ccache__disk_sweep_tmp(sfd);
}

/* Create a temp file in the folder sfd under a name of this tier object; a
 * name that is taken (whoever left it) is skipped for the next. */
static int open_tmp(disk *d, int sfd, char tmp[REL_MAX]) {
  int e = FAULT("open_tmp");
  if (e) {
    errno = e;
    return -1;
  }
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 64; tries++) {
    ccache__disk_tmp_name(d, ".", tmp);
    fd = openat(sfd, tmp, flags, 0600);
    if (fd < 0 && errno != EEXIST) return -1;
  }
  return fd;
}

/* Rename tmp to path, and the size of the regular file it replaced into
 * *old (0: none).  RENAME_NOREPLACE, or RENAME_EXCHANGE over an existing
 * entry: then tmp names the replaced file, which is measured and removed.
 * A filesystem without renameat2 gets a plain rename after a stat (the
 * total may then drift if two processes replace one entry at once). */
static int publish(int dfd, const char *tmp, const char *path, uint64_t *old) {
  *old = 0;
  for (int tries = 0; tries < 16; tries++) {
    if (renameat2(dfd, tmp, dfd, path, RENAME_NOREPLACE) == 0) return 0;
    if (errno == EINVAL || errno == ENOSYS) break;
    if (errno != EEXIST) return -1;
    if (renameat2(dfd, tmp, dfd, path, RENAME_EXCHANGE) != 0) {
      if (errno == ENOENT) continue; /* removed in between */
      if (errno == EINVAL || errno == ENOSYS) break;
      return -1;
    }
    struct stat st;
    if (fstatat(dfd, tmp, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      /* Not an entry (a directory, a link): put it back, publish nothing. */
      renameat2(dfd, tmp, dfd, path, RENAME_EXCHANGE);
      errno = EEXIST;
      return -1;
    }
    *old = (uint64_t)st.st_size;
    unlinkat(dfd, tmp, 0);
    return 0;
  }
  struct stat st;
  if (fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
    *old = (uint64_t)st.st_size;
  return renameat(dfd, tmp, dfd, path);
}

/* disk_put's work in the key's checked folder sfd. */
static int put_in(disk *d, ccache_key key, int sfd, const char *name, const void *blob,
                  size_t len) {
  char tmp[REL_MAX];
  int fd = open_tmp(d, sfd, tmp);
  if (fd < 0) return CCACHE_EIO;
  maybe_sweep(d, key, sfd);
  bool ok = ccache__disk_write_full(fd, blob, len) == 0 && (!d->o.fsync || fsync(fd) == 0);
  ok = close(fd) == 0 && ok;
  int e = ok ? FAULT("rename") : 0;
  if (e) errno = e;
  uint64_t old = 0;
  ok = ok && !e && publish(sfd, tmp, name, &old) == 0;
  if (!ok) {
    unlinkat(sfd, tmp, 0);
    return CCACHE_EIO;
  }
  /* Published.  A failed directory fsync only weakens durability. */
  if (d->o.fsync) fsync(sfd);
  account(d, (int64_t)len - (int64_t)old);
  return CCACHE_OK;
}

static int disk_put(void *state, ccache_key key, const void *blob, size_t len) {
  disk *d = state;
  char sub[REL_MAX], path[REL_MAX];
  ccache__disk_key_paths(d, key, sub, path);
  int sfd = -1;
  int rc = key_folder(d, sub, true, &sfd);
  if (rc != CCACHE_OK) return rc == CCACHE_EPERM ? CCACHE_EPERM : CCACHE_EIO;
  rc = put_in(d, key, sfd, entry_name(sub, path), blob, len);
  close(sfd);
  return rc;
}

/* Moved aside first, so what is subtracted is exactly the file removed. */
static int remove_in(disk *d, int sfd, const char *name) {
  char aside[REL_MAX];
  ccache__disk_tmp_name(d, ".", aside);
  if (renameat(sfd, name, sfd, aside) != 0)
    return errno == ENOENT || errno == ENOTDIR ? CCACHE_MISS : CCACHE_EIO;
  struct stat st;
  if (fstatat(sfd, aside, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
    renameat(sfd, aside, sfd, name); /* not an entry (a directory?): back it goes */
    return CCACHE_EIO;
  }
  uint64_t size = (uint64_t)st.st_size;
  if (unlinkat(sfd, aside, 0) != 0) return CCACHE_EIO; /* (a temp file now: swept later) */
  account(d, -(int64_t)size);
  return CCACHE_OK;
}

/* Whether the file rel holds exactly the len bytes of blob. */
static bool file_holds(int dfd, const char *rel, const void *blob, size_t len) {
  int fd = openat(dfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
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
static int remove_if_in(disk *d, int sfd, const char *name, const void *blob, size_t len) {
  char aside[REL_MAX];
  ccache__disk_tmp_name(d, ".", aside);
  if (renameat(sfd, name, sfd, aside) != 0)
    return errno == ENOENT || errno == ENOTDIR ? CCACHE_MISS : CCACHE_EIO;
  /* Young again, so no concurrent sweep takes it for a stale temp file. */
  utimensat(sfd, aside, NULL, AT_SYMLINK_NOFOLLOW);
  struct stat st;
  if (fstatat(sfd, aside, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
    renameat(sfd, aside, sfd, name); /* not an entry (a directory?): back it goes */
    return CCACHE_EIO;
  }
  uint64_t size = (uint64_t)st.st_size;
  int rc = CCACHE_OK;
  if (!file_holds(sfd, aside, blob, len)) {
    rc = CCACHE_MISS; /* published after our read: it stays */
    if (linkat(sfd, aside, sfd, name, 0) == 0) size = 0;
  }
  unlinkat(sfd, aside, 0);
  if (size) account(d, -(int64_t)size);
  return rc;
}

/* Remove key's entry (remove_if: only if it holds blob) in its checked
 * folder; an absent or refused folder has no entry of ours to remove. */
static int remove_entry(disk *d, ccache_key key, const void *blob, size_t len, bool only_if) {
  char sub[REL_MAX], path[REL_MAX];
  ccache__disk_key_paths(d, key, sub, path);
  int sfd = -1;
  int rc = key_folder(d, sub, false, &sfd);
  if (rc != CCACHE_OK) return rc == CCACHE_MISS ? CCACHE_MISS : CCACHE_EIO;
  rc = only_if ? remove_if_in(d, sfd, entry_name(sub, path), blob, len)
               : remove_in(d, sfd, entry_name(sub, path));
  close(sfd);
  return rc;
}

static int disk_remove(void *state, ccache_key key) {
  return remove_entry(state, key, NULL, 0, false);
}

static int disk_remove_if(void *state, ccache_key key, const void *blob, size_t len) {
  return remove_entry(state, key, blob, len, true);
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
  if (ccache__disk_cleaner_init(d) != CCACHE_OK) {
    ccache__mutex_destroy(&d->mu);
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
      .flags = CCACHE_TIER_PRIVATE, /* it refuses folders others can write */
  };
  int rc = ccache_tier_custom(&ops, d, out);
  if (rc != CCACHE_OK) {
    ccache__disk_cleaner_destroy(d);
    ccache__mutex_destroy(&d->mu);
    free(dir);
    free(d);
    close(fd);
    return rc;
  }
  d->tier = *out;
  d->tier->lock_timeouts = &d->lock_timeouts;
  d->tier->get_bounded = disk_get_bounded;
  reg_add(d);
  return CCACHE_OK;
#endif
}
