/*
 * disk_space.c - the directory tier's files and space: entry paths, full
 * reads and writes, byte-range locks, stale temporary files of dead writers,
 * the running size total in v<format>/size and the one cleaner that keeps the
 * directory under its cap (see tier_disk.c for the layout).
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

#include "base/sync.h"
#include "tier/tier.h"

#include "tier/disk/disk.h"

/* ------------------------------------------------------------------ paths */

static const char hexd[] = "0123456789abcdef";

static void hex64(uint64_t v, char *out) {
  for (int i = 15; i >= 0; i--) *out++ = hexd[(v >> (4 * i)) & 15];
}

/* "<ns>/<xx>" and "<ns>/<xx>/<32 hex>" for key. */
void ccache__disk_key_paths(const disk *d, ccache_key key, char sub[REL_MAX], char path[REL_MAX]) {
  char hex[33];
  hex64(key.hi, hex);
  hex64(key.lo, hex + 16);
  hex[32] = '\0';
  snprintf(sub, REL_MAX, "%s/%.2s", d->ns, hex);
  snprintf(path, REL_MAX, "%s/%.2s/%s", d->ns, hex, hex);
}

static bool is_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return s[n] == '\0';
}

uint64_t ccache__disk_realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------- I/O */

int ccache__disk_read_full(int fd, void *buf, size_t n, size_t *got) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break; /* shorter than it was: the checksum will say so */
    done += (size_t)r;
  }
  *got = done;
  return 0;
}

int ccache__disk_write_full(int fd, const void *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    int e = FAULT("write");
    if (e) {
      errno = e;
      return -1;
    }
    ssize_t w = write(fd, (const char *)buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -1;
    done += (size_t)w;
  }
  return 0;
}

/* One byte of the lock file: F_WRLCK or F_UNLCK, waiting (F_OFD_SETLKW) or
 * not (F_OFD_SETLK). */
int ccache__disk_byte_lock(int fd, unsigned byte, short type, int cmd) {
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = (off_t)byte;
  fl.l_len = 1;
  int r;
  while ((r = fcntl(fd, cmd, &fl)) != 0 && errno == EINTR) {
  }
  return r;
}

/* -------------------------------------------------------------- temp files */

/* ".tmp.<pid>.<n>": its writer is dead (and it is not brand new), or it is
 * too old to belong to a live write.  The age guard also covers a writer in
 * another PID namespace, whose pid means nothing here. */
static bool stale_tmp(int dfd, const char *name, time_t now) {
  struct stat st;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  time_t age = now - st.st_mtime;
  if (age > STALE_ANY_S) return true;
  char *end = NULL;
  long pid = strtol(name + 5, &end, 10);
  if (age <= STALE_DEAD_S || pid <= 0 || !end || *end != '.') return false;
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Remove the stale temp files of one entry subdirectory. */
void ccache__disk_sweep_tmp(int subfd) {
  int fd = dup(subfd);
  DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
  if (!dir) {
    if (fd >= 0) close(fd);
    return;
  }
  time_t now = time(NULL);
  struct dirent *de;
  while ((de = readdir(dir)) != NULL)
    if (strncmp(de->d_name, ".tmp.", 5) == 0 && stale_tmp(subfd, de->d_name, now))
      unlinkat(subfd, de->d_name, 0);
  closedir(dir);
}

/* -------------------------------------------------------- scanning, sizes */

typedef struct scanned {
  int64_t mtime_ns;
  uint64_t size;
  char rel[REL_MAX]; /* relative to the format directory */
} scanned;

typedef struct scan_list {
  bool count_only; /* sum the sizes, keep no list */
  scanned *v;
  size_t n, cap;
  uint64_t total;
  bool oom;
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
  /* The scan passes only names it checked: 16, 2 and 32 hex digits. */
  snprintf(s->rel, sizeof s->rel, "%.16s/%.2s/%.32s", tag, sub, name);
}

/* Open a subdirectory of dfd as a DIR (and its descriptor). */
static DIR *open_sub(int dfd, const char *name, int *fd_out) {
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return NULL;
  int fd2 = dup(fd);
  DIR *dir = fd2 >= 0 ? fdopendir(fd2) : NULL;
  if (!dir) {
    if (fd2 >= 0) close(fd2);
    close(fd);
    return NULL;
  }
  *fd_out = fd;
  return dir;
}

/* Every entry under v<format>/<tag>/<xx>/, every runtime tag; stale temp
 * files are removed on the way. */
static void scan_entries(disk *d, scan_list *l) {
  int ffd;
  DIR *fdir = open_sub(d->dirfd, d->fmt, &ffd);
  if (!fdir) return;
  time_t now = time(NULL);
  struct dirent *te;
  while ((te = readdir(fdir)) != NULL) {
    if (!is_hex(te->d_name, 16)) continue;
    int tfd;
    DIR *tdir = open_sub(ffd, te->d_name, &tfd);
    if (!tdir) continue;
    struct dirent *se;
    while ((se = readdir(tdir)) != NULL) {
      if (!is_hex(se->d_name, 2)) continue;
      int sfd;
      DIR *sdir = open_sub(tfd, se->d_name, &sfd);
      if (!sdir) continue;
      struct dirent *ee;
      while ((ee = readdir(sdir)) != NULL) {
        struct stat st;
        if (strncmp(ee->d_name, ".tmp.", 5) == 0) {
          if (stale_tmp(sfd, ee->d_name, now)) unlinkat(sfd, ee->d_name, 0);
        } else if (is_hex(ee->d_name, 32) &&
                   fstatat(sfd, ee->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
          scan_add(l, te->d_name, se->d_name, ee->d_name, &st);
        }
      }
      closedir(sdir);
      close(sfd);
    }
    closedir(tdir);
    close(tfd);
  }
  closedir(fdir);
  close(ffd);
}

static bool size_read(disk *d, uint64_t *total) {
  unsigned char b[16];
  size_t got = 0;
  if (ccache__disk_read_full(d->sizefd, b, sizeof b, &got) != 0 || got != sizeof b) return false;
  uint64_t magic = 0, v = 0;
  for (int i = 7; i >= 0; i--) {
    magic = magic << 8 | b[i];
    v = v << 8 | b[8 + i];
  }
  *total = v;
  return magic == SIZE_MAGIC;
}

static void size_write(disk *d, uint64_t total) {
  unsigned char b[16];
  for (int i = 0; i < 8; i++) {
    b[i] = (unsigned char)(SIZE_MAGIC >> (8 * i));
    b[8 + i] = (unsigned char)(total >> (8 * i));
  }
  ssize_t w;
  while ((w = pwrite(d->sizefd, b, sizeof b, 0)) < 0 && errno == EINTR) {
  }
}

/* Under SIZE_BYTE (and mu, which orders this process's threads, since
 * they share one lock description): the shared total plus delta, saturating
 * at 0.  With rebase, the total becomes delta plus whatever was added since
 * it read `since` (the cleaner's correction, see clean()).  A missing or
 * damaged size file is rebuilt by counting.  Returns the new total (0 if
 * it cannot be known: no size file, no lock file). */
uint64_t ccache__disk_size_update(disk *d, int64_t delta, bool rebase, uint64_t since) {
  if (d->sizefd < 0) return 0;
  ccache__lock(&d->mu);
  if (d->lockfd < 0 || ccache__disk_byte_lock(d->lockfd, SIZE_BYTE, F_WRLCK, F_OFD_SETLKW) != 0) {
    ccache__unlock(&d->mu);
    return 0;
  }
  uint64_t total = 0;
  if (!size_read(d, &total)) {
    scan_list l = {.count_only = true};
    scan_entries(d, &l);
    total = l.total;
  }
  if (rebase) total = total > since ? total - since : 0;
  if (delta < 0)
    total = (uint64_t)-delta > total ? 0 : total - (uint64_t)-delta;
  else
    total += (uint64_t)delta;
  size_write(d, total);
  ccache__disk_byte_lock(d->lockfd, SIZE_BYTE, F_UNLCK, F_OFD_SETLK);
  ccache__unlock(&d->mu);
  return total;
}

static int by_age(const void *a, const void *b) {
  const scanned *x = a, *y = b;
  return (x->mtime_ns > y->mtime_ns) - (x->mtime_ns < y->mtime_ns);
}

/* The cleaner: least recently used entries first, down to 90 % of the cap. */
static void clean(disk *d) {
  uint64_t before = ccache__disk_size_update(d, 0, false, 0);
  scan_list l = {.count_only = false};
  scan_entries(d, &l);
  if (l.oom) { /* cannot rank them all: try again at the next write */
    free(l.v);
    return;
  }
  qsort(l.v, l.n, sizeof *l.v, by_age);
  uint64_t cap = d->o.max_bytes, target = cap - cap / 10;
  uint64_t left = l.total, removed = 0;
  int ffd = openat(d->dirfd, d->fmt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (size_t i = 0; ffd >= 0 && i < l.n && left > target; i++) {
    if (unlinkat(ffd, l.v[i].rel, 0) == 0) removed += l.v[i].size;
    left -= l.v[i].size; /* gone either way (someone else may have removed it) */
  }
  if (ffd >= 0) close(ffd);
  free(l.v);
  /* Writes that landed during the scan stay counted (total - before); the
   * rest of the total becomes what was found, less what went. */
  uint64_t kept = l.total > removed ? l.total - removed : 0;
  ccache__disk_size_update(d, (int64_t)kept, true, before);
}

void ccache__disk_maybe_clean(disk *d, uint64_t total) {
  if (d->o.max_bytes == CCACHE_UNBOUNDED || total <= d->o.max_bytes) return;
  int idle = 0;
  if (!atomic_compare_exchange_strong(&d->cleaning, &idle, 1)) return; /* this process cleans */
  /* One cleaner per machine: whoever holds CLEAN_BYTE; the others skip. */
  if (d->lockfd >= 0 && ccache__disk_byte_lock(d->lockfd, CLEAN_BYTE, F_WRLCK, F_OFD_SETLK) == 0) {
    clean(d);
    ccache__disk_byte_lock(d->lockfd, CLEAN_BYTE, F_UNLCK, F_OFD_SETLK);
  }
  atomic_store(&d->cleaning, 0);
}
