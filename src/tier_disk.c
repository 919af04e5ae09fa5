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

#include "sync.h"
#include "tier.h"

#define SLOTS        4096u                 /* compile-lock bytes in the lock file */
#define SIZE_BYTE    (SLOTS)               /* guards the size file */
#define CLEAN_BYTE   (SLOTS + 1u)          /* held by the one cleaner */
#define STALE_DEAD_S 60                    /* a dead writer's temp file older than this goes */
#define STALE_ANY_S  3600                  /* any temp file older than this goes */
#define SIZE_MAGIC   0x31455a4953434343ull /* "CCCSIZE1" little-endian */
#define REL_MAX      96                    /* longest relative path we build */

#ifdef CCACHE_TESTING
int (*ccache__disk_fault)(const char *point);
#define FAULT(point) (ccache__disk_fault ? ccache__disk_fault(point) : 0)
#else
#define FAULT(point) 0
#endif

typedef struct disk {
  ccache_disk_options o;
  char *dir;                    /* o.dir, copied: for details */
  int dirfd;                    /* the checked directory */
  int lockfd, sizefd;           /* -1 until attached (or if unusable) */
  char fmt[16];                 /* "v1" */
  char ns[CCACHE__TIER_NS_MAX]; /* "v1/<tag hash>" */
  ccache__mutex mu;             /* slot_refs, swept, and the size section */
  uint32_t slot_refs[SLOTS];    /* this process's holders of each slot */
  uint8_t swept[32];            /* subdirectories already swept of stale temps */
  _Atomic uint64_t tmp_seq;
  _Atomic int cleaning;
  struct disk *reg_prev, *reg_next; /* the fork registry */
} disk;

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

/* ------------------------------------------------------------------ paths */

static const char hexd[] = "0123456789abcdef";

static void hex64(uint64_t v, char *out) {
  for (int i = 15; i >= 0; i--) *out++ = hexd[(v >> (4 * i)) & 15];
}

/* "<ns>/<xx>" and "<ns>/<xx>/<32 hex>" for key. */
static void key_paths(const disk *d, ccache_key key, char sub[REL_MAX], char path[REL_MAX]) {
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

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------- I/O */

static int read_full(int fd, void *buf, size_t n, size_t *got) {
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

static int write_full(int fd, const void *buf, size_t n) {
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
static int byte_lock(int fd, unsigned byte, short type, int cmd) {
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
static void sweep_tmp(int subfd) {
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
  if (read_full(d->sizefd, b, sizeof b, &got) != 0 || got != sizeof b) return false;
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
static uint64_t size_update(disk *d, int64_t delta, bool rebase, uint64_t since) {
  if (d->sizefd < 0) return 0;
  ccache__lock(&d->mu);
  if (d->lockfd < 0 || byte_lock(d->lockfd, SIZE_BYTE, F_WRLCK, F_OFD_SETLKW) != 0) {
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
  byte_lock(d->lockfd, SIZE_BYTE, F_UNLCK, F_OFD_SETLK);
  ccache__unlock(&d->mu);
  return total;
}

static int by_age(const void *a, const void *b) {
  const scanned *x = a, *y = b;
  return (x->mtime_ns > y->mtime_ns) - (x->mtime_ns < y->mtime_ns);
}

/* The cleaner: least recently used entries first, down to 90 % of the cap. */
static void clean(disk *d) {
  uint64_t before = size_update(d, 0, false, 0);
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
  size_update(d, (int64_t)kept, true, before);
}

static void maybe_clean(disk *d, uint64_t total) {
  if (d->o.max_bytes == CCACHE_UNBOUNDED || total <= d->o.max_bytes) return;
  int idle = 0;
  if (!atomic_compare_exchange_strong(&d->cleaning, &idle, 1)) return; /* this process cleans */
  /* One cleaner per machine: whoever holds CLEAN_BYTE; the others skip. */
  if (d->lockfd >= 0 && byte_lock(d->lockfd, CLEAN_BYTE, F_WRLCK, F_OFD_SETLK) == 0) {
    clean(d);
    byte_lock(d->lockfd, CLEAN_BYTE, F_UNLCK, F_OFD_SETLK);
  }
  atomic_store(&d->cleaning, 0);
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
  size_update(d, 0, false, 0); /* counts an existing directory once */
  return CCACHE_OK;
}

static int disk_get(void *state, ccache_key key, void **blob, size_t *len) {
  disk *d = state;
  char sub[REL_MAX], path[REL_MAX];
  key_paths(d, key, sub, path);
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
  if (!buf || read_full(fd, buf, n, &got) != 0) {
    free(buf);
    close(fd);
    return CCACHE_EIO;
  }
  /* A hit makes the entry young again, at most once per interval, so the
   * cleaner removes what is not used; failure to touch is harmless. */
  uint64_t now = realtime_ns();
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
      sweep_tmp(sfd);
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
  key_paths(d, key, sub, path);
  int fd = open_tmp(d, key, sub, tmp);
  if (fd < 0) return CCACHE_EIO;
  bool ok = write_full(fd, blob, len) == 0 && (!d->o.fsync || fsync(fd) == 0);
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
  maybe_clean(d, size_update(d, (int64_t)len - (int64_t)old_size, false, 0));
  return CCACHE_OK;
}

static int disk_remove(void *state, ccache_key key) {
  disk *d = state;
  char sub[REL_MAX], path[REL_MAX];
  key_paths(d, key, sub, path);
  struct stat st;
  uint64_t size = 0;
  if (fstatat(d->dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0) size = (uint64_t)st.st_size;
  if (unlinkat(d->dirfd, path, 0) != 0) return errno == ENOENT ? CCACHE_MISS : CCACHE_EIO;
  size_update(d, -(int64_t)size, false, 0);
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
  } else if (byte_lock(d->lockfd, slot, F_WRLCK, F_OFD_SETLK) == 0) {
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
    byte_lock(d->lockfd, slot, F_UNLCK, F_OFD_SETLK);
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
