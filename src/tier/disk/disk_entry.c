/*
 * disk_entry.c - the directory tier's entries: read (get, bounded before it
 * allocates), publish (put) and remove (remove, remove_if), each with the
 * exact size delta it makes (see tier_disk.c for the layout).
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
 * Temporary names carry the writer's pid (the dead-writer check) and a
 * random word drawn per tier object, so a new process never draws a dead
 * one's name, and a name that is taken anyway is skipped.  Each tier object
 * sweeps a folder of stale temporary files at its first write there and
 * again at its first write an hour (RESWEEP_S) after the last sweep, so a
 * leftover two hours old is gone by the next write into its folder.
 *
 * What a sweep may take: a ".tmp." file (never in the total) or a ".del."
 * file (an entry moved aside to be removed: in the total until it goes)
 * whose owner is dead and that is over a minute old, or any over an hour
 * old.  Nothing this library moves is old when moved: an entry is made
 * young just before it is renamed aside or exchanged away (a rename keeps
 * the mtime, and the entries removed are those last used longest ago).  A
 * ".del." file is taken over by a rename before it is unlinked, and
 * whoever unlinks it subtracts it, so a removal is accounted once whoever
 * deleted the file.
 */
#define _GNU_SOURCE 1 /* renameat2 (Linux) */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "base/callback.h"
#include "base/sync.h"
#include "tier/tier.h"

#include "tier/disk/disk.h"

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
int ccache__disk_get_bounded(void *state, ccache_key key, uint64_t max_len, void **blob,
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

int ccache__disk_get(void *state, ccache_key key, void **blob, size_t *len) {
  int rc = ccache__disk_get_bounded(state, key, CCACHE__TIER_MAX_ENTRY, blob, len);
  return rc == CCACHE__TIER_OVERSIZE ? CCACHE_EIO : rc;
}

void ccache__disk_free_blob(void *state, void *blob, size_t len) {
  (void)state;
  (void)len;
  free(blob);
}

/* Sweep the key's folder of stale temporary and aside files at this
 * object's first write there, and again once RESWEEP_S has passed since its
 * last sweep; an aside it removes comes off the total. */
static void maybe_sweep(disk *d, ccache_key key, int sfd) {
  unsigned xx = (unsigned)(key.hi >> 56);
  uint64_t now = ccache__disk_mono_s();
  ccache__lock(&d->space_mu);
  bool due = d->swept_s[xx] == 0 || now + 1 - d->swept_s[xx] >= RESWEEP_S;
  if (due) d->swept_s[xx] = now + 1;
  ccache__unlock(&d->space_mu);
  uint64_t freed = due ? ccache__disk_sweep_tmp(d, sfd) : 0;
  if (freed) account(d, -(int64_t)freed);
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
 * *old (0: none; OLD_UNKNOWN: it went before it was measured).
 * RENAME_NOREPLACE, or RENAME_EXCHANGE over an existing entry: then tmp
 * names the replaced file, which is measured and removed.  The entry is
 * made young just before the exchange: a rename keeps the mtime, and an
 * entry last used an hour ago under a temporary name is what a sweep
 * takes for a leftover.  A filesystem without renameat2 gets a plain rename
 * after a stat (the total may then drift if two processes replace one entry
 * at once). */
#define OLD_UNKNOWN UINT64_MAX
static int publish(int dfd, const char *tmp, const char *path, uint64_t *old) {
  *old = 0;
  for (int tries = 0; tries < 16; tries++) {
    if (renameat2(dfd, tmp, dfd, path, RENAME_NOREPLACE) == 0) return 0;
    if (errno == EINVAL || errno == ENOSYS) break;
    if (errno != EEXIST) return -1;
    utimensat(dfd, path, NULL, AT_SYMLINK_NOFOLLOW);
    if (renameat2(dfd, tmp, dfd, path, RENAME_EXCHANGE) != 0) {
      if (errno == ENOENT) continue; /* removed in between */
      if (errno == EINVAL || errno == ENOSYS) break;
      return -1;
    }
    (void)FAULT("exchanged");
    struct stat st;
    if (fstatat(dfd, tmp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      /* Gone before it was measured (a sweep, had this process stalled an
       * hour): the new entry is in place, so the write stands; the total
       * is recounted. */
      *old = OLD_UNKNOWN;
      return 0;
    }
    if (!S_ISREG(st.st_mode)) {
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

/* The cap's bound: the running total may pass max_bytes + max_bytes / 10
 * only by the writes in progress.  A write that finds the total over it
 * (one 16-byte read of the size file: no scan) wakes the cleaner and waits
 * for the total to come back under, polling the size file every 2 ms, at
 * most io_lock_ms; then it is withheld.  The tenth above the cap is the
 * headroom that lets writers go on while a clean lists a large directory
 * (the cleaner starts at the cap and removes down to 90 %), so a miss waits
 * only when writers outrun the cleaner.  true if the write may publish. */
static bool room_for_write(disk *d) {
  uint64_t cap = d->o.max_bytes, total = 0;
  if (cap == CCACHE_UNBOUNDED) return true;
  uint64_t bound = ccache__disk_bound(cap);
  if (!ccache__disk_size_peek(d, &total) || total <= bound) return true;
  uint64_t start = ccache__mono_ns(), n = 0;
  while (ccache__disk_size_peek(d, &total) && total > bound) {
    if (ccache__mono_ns() - start >= d->o.io_lock_ms * 1000000u) return false;
    if (n++ % 8 == 0) ccache__disk_cleaner_kick(d, true, false); /* (a busy byte: again) */
    struct timespec nap = {0, 2000000L};
    nanosleep(&nap, NULL);
  }
  return true;
}

/* ccache__disk_put's work in the key's checked folder sfd. */
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
  if (ok && !e && !room_for_write(d)) { /* the cleaner is behind: withheld */
    unlinkat(sfd, tmp, 0);
    atomic_fetch_add(&d->lock_timeouts, 1);
    return CCACHE_EBUSY;
  }
  uint64_t old = 0;
  ok = ok && !e && publish(sfd, tmp, name, &old) == 0;
  if (!ok) {
    unlinkat(sfd, tmp, 0);
    return CCACHE_EIO;
  }
  /* Published.  A failed directory fsync only weakens durability. */
  if (d->o.fsync) fsync(sfd);
  if (old == OLD_UNKNOWN) {
    atomic_store(&d->size_drift, 1); /* the recount overwrites the total */
    ccache__disk_cleaner_kick(d, false, true);
    old = 0;
  }
  account(d, (int64_t)len - (int64_t)old);
  return CCACHE_OK;
}

int ccache__disk_put(void *state, ccache_key key, const void *blob, size_t len) {
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

/* Moved aside first, so what is subtracted is exactly the file removed.
 * Whoever unlinks an aside subtracts it: if a sweep took it over (this
 * process stalled an hour in between), the sweep did. */
static int remove_in(disk *d, int sfd, const char *name) {
  char aside[REL_MAX];
  if (ccache__disk_move_aside(d, sfd, name, ".", aside) != 0)
    return errno == ENOENT || errno == ENOTDIR ? CCACHE_MISS : CCACHE_EIO;
  struct stat st;
  if (fstatat(sfd, aside, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? CCACHE_OK : CCACHE_EIO;
  if (!S_ISREG(st.st_mode)) {
    renameat(sfd, aside, sfd, name); /* not an entry (a directory?): back it goes */
    return CCACHE_EIO;
  }
  uint64_t size = (uint64_t)st.st_size;
  if (unlinkat(sfd, aside, 0) != 0) /* taken over: accounted there; else swept later */
    return errno == ENOENT ? CCACHE_OK : CCACHE_EIO;
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
 * rename, under an aside name the stale-file sweep knows), compare, and
 * delete it, or put it back with link() (which never replaces an entry
 * published after the move).  Between the move and the put-back a reader
 * finds no entry: the residual race, stated in the header. */
static int remove_if_in(disk *d, int sfd, const char *name, const void *blob, size_t len) {
  char aside[REL_MAX];
  if (ccache__disk_move_aside(d, sfd, name, ".", aside) != 0)
    return errno == ENOENT || errno == ENOTDIR ? CCACHE_MISS : CCACHE_EIO;
  struct stat st;
  if (fstatat(sfd, aside, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? CCACHE_OK : CCACHE_EIO;
  if (!S_ISREG(st.st_mode)) {
    renameat(sfd, aside, sfd, name); /* not an entry (a directory?): back it goes */
    return CCACHE_EIO;
  }
  uint64_t size = (uint64_t)st.st_size;
  int rc = CCACHE_OK;
  if (!file_holds(sfd, aside, blob, len)) {
    rc = CCACHE_MISS; /* published after our read: it stays */
    if (linkat(sfd, aside, sfd, name, 0) == 0) size = 0;
  }
  if (unlinkat(sfd, aside, 0) != 0) size = 0; /* taken over: accounted there */
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

int ccache__disk_remove(void *state, ccache_key key) {
  return remove_entry(state, key, NULL, 0, false);
}

int ccache__disk_remove_if(void *state, ccache_key key, const void *blob, size_t len) {
  return remove_entry(state, key, blob, len, true);
}
