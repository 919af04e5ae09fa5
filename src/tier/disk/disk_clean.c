/*
 * disk_clean.c - the directory tier's cleaner: one thread per tier object,
 * started the first time a write finds the total over the cap (or the size
 * file wants a recount), and joined at close, so no program miss pays for a
 * scan.  One cleaner per machine at a time: whoever holds CLEAN_BYTE of
 * v<format>/lock (tried, never waited for); the others skip the pass.
 *
 * A pass lists every entry under v<format>/ (every runtime tag), removes
 * stale temporary files on the way, and removes the least recently used
 * entries (by mtime) until what it found is at 90 % of the cap.  Each
 * removal is exact: the entry is first renamed aside (a temp name of this
 * tier object), the file moved is measured, and it is unlinked only if it
 * is the one listed; a newer entry published under that name since the
 * listing goes back.  What went is subtracted from the total.
 *
 * ccache_close() gives a pass that was asked for or is running io_lock_ms
 * to finish (a clean removes only what the cap requires, so a short-lived
 * process leaves a small directory under its cap), then stops it at its
 * next folder or removal; what it removed is accounted.
 */
#define _GNU_SOURCE 1 /* renameat2, F_OFD_SETLK */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/sync.h"
#include "tier/disk/disk.h"

#define CLEAN_THREAD_NAME "ccache-clean"

static bool is_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return s[n] == '\0';
}

/* ------------------------------------------------------------- the listing */

typedef struct scanned {
  int64_t mtime_ns;
  uint64_t size;
  ino_t ino;
  char rel[64]; /* "<16 hex>/<2 hex>/<32 hex>", relative to the format directory */
} scanned;

typedef struct scan_list {
  bool count_only; /* sum the sizes, keep no list */
  scanned *v;
  size_t n, cap;
  uint64_t total;
  uint64_t swept; /* bytes of stale asides the scan removed (in the total until now) */
  bool oom, cancelled;
} scan_list;

static void scan_add(scan_list *l, const char *tag, const char *sub, const char *name,
                     const struct stat *st) {
  l->total += (uint64_t)st->st_size;
  if (l->count_only) return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 256;
    scanned *v = realloc(l->v, cap * sizeof *v);
    if (!v) {
      l->oom = true;
      return;
    }
    l->v = v;
    l->cap = cap;
  }
  scanned *s = &l->v[l->n++];
  s->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
  s->size = (uint64_t)st->st_size;
  s->ino = st->st_ino;
  /* The scan passes only names it checked: 16, 2 and 32 hex digits. */
  snprintf(s->rel, sizeof s->rel, "%.16s/%.2s/%.32s", tag, sub, name);
}

/* A subdirectory of dfd as a DIR, and its descriptor (both close-on-exec). */
static DIR *open_sub(int dfd, const char *name, int *fd_out) {
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return NULL;
  DIR *dir = ccache__disk_opendir_dup(fd);
  if (!dir) {
    close(fd);
    return NULL;
  }
  *fd_out = fd;
  return dir;
}

static void scan_folder(disk *d, scan_list *l, int tfd, const char *tag, const char *sub,
                        time_t now) {
  int sfd;
  DIR *sdir = open_sub(tfd, sub, &sfd);
  if (!sdir) return;
  (void)FAULT("scan_folder");
  struct dirent *ee;
  while ((ee = readdir(sdir)) != NULL) {
    struct stat st;
    if (ee->d_name[0] == '.') {
      l->swept += ccache__disk_sweep_one(d, sfd, ee->d_name, now);
    } else if (is_hex(ee->d_name, 32) && fstatat(sfd, ee->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISREG(st.st_mode)) {
      scan_add(l, tag, sub, ee->d_name, &st);
    }
  }
  closedir(sdir);
  close(sfd);
}

/* Every entry under v<format>/<tag>/<xx>/, every runtime tag. */
static void scan_entries(disk *d, scan_list *l) {
  (void)FAULT("scan");
  int ffd;
  DIR *fdir = open_sub(d->dirfd, d->fmt, &ffd);
  if (!fdir) return;
  time_t now = time(NULL);
  struct dirent *te;
  while (!l->cancelled && (te = readdir(fdir)) != NULL) {
    if (!is_hex(te->d_name, 16)) continue;
    int tfd;
    DIR *tdir = open_sub(ffd, te->d_name, &tfd);
    if (!tdir) continue;
    struct dirent *se;
    while ((se = readdir(tdir)) != NULL) {
      if (atomic_load(&d->c_cancel)) {
        l->cancelled = true;
        break;
      }
      if (is_hex(se->d_name, 2)) scan_folder(d, l, tfd, te->d_name, se->d_name, now);
    }
    closedir(tdir);
    close(tfd);
  }
  closedir(fdir);
  close(ffd);
}

/* ------------------------------------------------------------- a pass */

static int by_age(const void *a, const void *b) {
  const scanned *x = a, *y = b;
  return (x->mtime_ns > y->mtime_ns) - (x->mtime_ns < y->mtime_ns);
}

/* Remove one listed entry; the bytes that went (0 if none). */
static uint64_t remove_listed(disk *d, int ffd, const scanned *s) {
  char sub[24], aside[REL_MAX];
  snprintf(sub, sizeof sub, "%.19s", s->rel);                             /* "<16 hex>/<2 hex>" */
  if (ccache__disk_move_aside(d, ffd, s->rel, sub, aside) != 0) return 0; /* gone already */
  struct stat st;
  if (fstatat(ffd, aside, &st, AT_SYMLINK_NOFOLLOW) != 0) return 0; /* taken over: accounted */
  if ((st.st_ino != s->ino || !S_ISREG(st.st_mode)) &&
      renameat2(ffd, aside, ffd, s->rel, RENAME_NOREPLACE) == 0)
    return 0; /* published since the listing (or not an entry): back it goes */
  if (unlinkat(ffd, aside, 0) != 0) return 0; /* taken over (accounted there), or swept later */
  return (uint64_t)st.st_size;
}

static void account(disk *d, int64_t delta) {
  uint64_t total;
  int rc = ccache__disk_size_add(d, delta, d->o.io_lock_ms, &total);
  if (rc == SIZE_HELD) atomic_fetch_add(&d->lock_timeouts, 1);
  if (rc == SIZE_DRIFTED) ccache__disk_cleaner_kick(d, false, true); /* the next pass */
}

static void recount_pass(disk *d) {
  scan_list l = {.count_only = true};
  scan_entries(d, &l);
  /* A count written over the total has no swept aside in it; otherwise the
   * swept bytes come off the total as any removal's. */
  bool rebuilt = !l.cancelled && ccache__disk_size_rebuild(d, l.total, d->o.io_lock_ms);
  if (!rebuilt && l.swept) account(d, -(int64_t)l.swept);
}

static void clean_pass(disk *d) {
  uint64_t total;
  if (d->o.max_bytes == CCACHE_UNBOUNDED || !ccache__disk_size_peek(d, &total) ||
      total <= d->o.max_bytes)
    return; /* someone cleaned meanwhile */
  scan_list l = {.count_only = false};
  scan_entries(d, &l);
  if (l.oom || l.cancelled) { /* cannot rank them all: try again at the next write */
    free(l.v);
    if (l.swept) account(d, -(int64_t)l.swept);
    return;
  }
  qsort(l.v, l.n, sizeof *l.v, by_age);
  uint64_t cap = d->o.max_bytes, target = cap - cap / 10;
  uint64_t left = l.total, removed = l.swept;
  int ffd = openat(d->dirfd, d->fmt, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  for (size_t i = 0; ffd >= 0 && i < l.n && left > target && !atomic_load(&d->c_cancel); i++) {
    /* Paced: a burst of thousands of unlinks fills the filesystem's journal,
     * and the misses writing meanwhile would queue behind it. */
    if (i % 32 == 31) {
      /* Writers held at the cap's bound (disk_entry.c) wait for the total,
       * not the pass: while it is over the bound, what went so far comes
       * off it now (otherwise once, at the end: the size file's byte is
       * taken once per pass, not once per 32 removals). */
      uint64_t now_total;
      if (removed && ccache__disk_size_peek(d, &now_total) && now_total > ccache__disk_bound(cap)) {
        account(d, -(int64_t)removed);
        removed = 0;
      }
      struct timespec nap = {0, 1000000};
      nanosleep(&nap, NULL);
    }
    removed += remove_listed(d, ffd, &l.v[i]);
    left -= l.v[i].size; /* gone either way (someone else may have removed it) */
  }
  if (ffd >= 0) close(ffd);
  free(l.v);
  if (removed) account(d, -(int64_t)removed);
}

/* ------------------------------------------------------------ the thread */

static void *cleaner_main(void *p) {
  disk *d = p;
  ccache__lock(&d->c_mu);
  for (;;) {
    while (!d->c.stop && !d->c_clean && !d->c_recount)
      ccache__worker_sleep_locked(&d->c, UINT64_MAX);
    if (!d->c_clean && !d->c_recount) break; /* stopped, nothing asked */
    bool recount = d->c_recount;
    d->c_clean = d->c_recount = 0;
    d->c_busy = 1;
    ccache__unlock(&d->c_mu);
    if (d->lockfd >= 0 && ccache__disk_byte_lock(d->lockfd, CLEAN_BYTE, F_WRLCK) == 0) {
      if (recount) recount_pass(d);
      clean_pass(d);
      ccache__disk_byte_lock(d->lockfd, CLEAN_BYTE, F_UNLCK);
    }
    ccache__lock(&d->c_mu);
    d->c_busy = 0;
    ccache__worker_wake_locked(&d->c); /* (for ccache__disk_settle) */
  }
  ccache__unlock(&d->c_mu);
  return NULL;
}

int ccache__disk_cleaner_init(disk *d) { return ccache__worker_init_with_mutex(&d->c, &d->c_mu); }

void ccache__disk_cleaner_kick(disk *d, bool clean, bool recount) {
  ccache__lock(&d->c_mu);
  if (!d->c.stop) {
    if (clean) d->c_clean = 1;
    if (recount) d->c_recount = 1;
    /* Not started: the next write that needs a pass tries again. */
    (void)ccache__worker_start_locked(&d->c, cleaner_main, d, CLEAN_THREAD_NAME);
    ccache__worker_wake_locked(&d->c);
  }
  ccache__unlock(&d->c_mu);
}

#ifdef CCACHE_TESTING
bool ccache__disk_settle(ccache_tier *t, uint64_t wait_ms) {
  disk *d = t->state;
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += (time_t)(wait_ms / 1000u);
  until.tv_nsec += (long)(wait_ms % 1000u) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  bool idle = true;
  ccache__lock(&d->c_mu);
  while (d->c.started && !d->c.stop && (d->c_clean || d->c_recount || d->c_busy))
    if (!ccache__cond_timedwait(&d->c.cv, &d->c_mu, &until)) {
      idle = false;
      break;
    }
  ccache__unlock(&d->c_mu);
  return idle;
}
#endif

void ccache__disk_cleaner_stop(disk *d) {
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += (time_t)(d->o.io_lock_ms / 1000u);
  until.tv_nsec += (long)(d->o.io_lock_ms % 1000u) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  ccache__lock(&d->c_mu);
  bool started = d->c.started;
  ccache__worker_stop_locked(&d->c);
  /* A pass asked or running may finish within io_lock_ms; then it stops
   * at its next folder or removal (the next write over the cap asks again). */
  while (started && (d->c_clean || d->c_recount || d->c_busy))
    if (!ccache__cond_timedwait(&d->c.cv, &d->c_mu, &until)) break;
  atomic_store(&d->c_cancel, 1);
  ccache__unlock(&d->c_mu);
  ccache__worker_join(&d->c);
}

void ccache__disk_cleaner_destroy(disk *d) { ccache__worker_destroy_with_mutex(&d->c); }
