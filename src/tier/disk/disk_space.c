/*
 * disk_space.c - the directory tier's files and space: entry paths, full
 * reads and writes, byte-range locks (tried, or waited for with a bound),
 * temporary files (names, stale ones of dead writers) and the running size
 * total in v<format>/size (see tier_disk.c for the layout).
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

/* One byte of a lock file: F_WRLCK, F_RDLCK or F_UNLCK, without waiting. */
int ccache__disk_byte_lock(int fd, uint64_t byte, short type) {
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = (off_t)byte;
  fl.l_len = 1;
  int r;
  while ((r = fcntl(fd, F_OFD_SETLK, &fl)) != 0 && errno == EINTR) {
  }
  return r;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t ccache__disk_mono_s(void) {
#ifdef CCACHE_TESTING
  if (ccache__disk_clock_s) return ccache__disk_clock_s();
#endif
  return mono_ns() / 1000000000u;
}

/* There is no timed wait for a byte-range lock (F_OFD_SETLKW waits without
 * bound, and only a signal could end it): try, sleep 1 ms doubling to 16 ms,
 * until the deadline. */
int ccache__disk_byte_lock_wait(int fd, uint64_t byte, short type, uint64_t wait_ms) {
  uint64_t deadline = mono_ns() + wait_ms * 1000000u, nap_ms = 1;
  for (;;) {
    if (ccache__disk_byte_lock(fd, byte, type) == 0) return 0;
    if (errno != EAGAIN && errno != EACCES) return -1;
    uint64_t now = mono_ns();
    if (now >= deadline) {
      errno = EAGAIN;
      return -1;
    }
    uint64_t left_ms = (deadline - now + 999999u) / 1000000u;
    uint64_t ms = nap_ms < left_ms ? nap_ms : left_ms;
    struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
    nanosleep(&ts, NULL);
    if (nap_ms < 16) nap_ms *= 2;
  }
}

/* -------------------------------------------------------------- temp files */

void ccache__disk_tmp_name(disk *d, const char *sub, char tmp[REL_MAX]) {
  /* sub is "<ns>/<xx>": under CCACHE__TIER_NS_MAX + 3 bytes. */
  snprintf(tmp, REL_MAX, "%.40s/.tmp.%ld.%016llx.%llu", sub, (long)getpid(),
           (unsigned long long)d->word, (unsigned long long)atomic_fetch_add(&d->tmp_seq, 1));
}

void ccache__disk_aside_name(disk *d, const char *sub, char aside[REL_MAX]) {
  snprintf(aside, REL_MAX, "%.40s/.del.%ld.%016llx.%llu", sub, (long)getpid(),
           (unsigned long long)d->word, (unsigned long long)atomic_fetch_add(&d->tmp_seq, 1));
}

int ccache__disk_move_aside(disk *d, int dfd, const char *rel, const char *sub,
                            char aside[REL_MAX]) {
  ccache__disk_aside_name(d, sub, aside);
  /* Young first: a rename keeps the mtime, and the victims of a clean are
   * the entries last used longest ago (an hour and more), which a sweep
   * would otherwise take for a leftover between the rename and a touch. */
  utimensat(dfd, rel, NULL, AT_SYMLINK_NOFOLLOW);
  if (renameat(dfd, rel, dfd, aside) != 0) return -1;
  (void)FAULT("aside");
  return 0;
}

/* ".tmp." or ".del." then "<pid>.<word>.<n>": its owner is dead (and it is
 * not brand new), or it is too old to belong to a live write or remove.
 * The age guard also covers an owner in another PID namespace, whose pid
 * means nothing here. */
bool ccache__disk_stale_tmp(int dfd, const char *name, time_t now) {
  struct stat st;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  time_t age = now - st.st_mtime;
  if (age > STALE_ANY_S) return true;
  char *end = NULL;
  long pid = strtol(name + 5, &end, 10);
  if (age <= STALE_DEAD_S || pid <= 0 || !end || *end != '.') return false;
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* F_DUPFD_CLOEXEC, not dup(): the copy is close-on-exec from its first
 * instant (glibc's fdopendir sets the flag too, but only once it runs, and
 * a thread that fork()s and exec()s a compiler in between hands it over). */
DIR *ccache__disk_opendir_dup(int fd) {
  int fd2 = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  (void)FAULT("dup");
  DIR *dir = fd2 >= 0 ? fdopendir(fd2) : NULL;
  if (!dir && fd2 >= 0) close(fd2);
  if (dir) rewinddir(dir); /* the copy shares fd's offset */
  return dir;
}

/* An aside left by a remover that died (or stalled an hour): its bytes are
 * still in the total.  Taken over by a rename to a name of ours first, so
 * of two sweepers (or the late owner and a sweeper) exactly one unlinks it
 * and subtracts it; a file that is also an entry again (remove_if's
 * put-back is a link) only loses our name.  The bytes that went. */
static uint64_t take_aside(disk *d, int sfd, const char *name) {
  char mine[REL_MAX];
  ccache__disk_aside_name(d, ".", mine);
  if (renameat(sfd, name, sfd, mine) != 0) return 0;
  struct stat st;
  bool counted =
      fstatat(sfd, mine, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1;
  if (unlinkat(sfd, mine, 0) != 0) return 0;
  return counted ? (uint64_t)st.st_size : 0;
}

uint64_t ccache__disk_sweep_one(disk *d, int sfd, const char *name, time_t now) {
  bool tmp = strncmp(name, ".tmp.", 5) == 0, del = strncmp(name, ".del.", 5) == 0;
  if (!(tmp || del) || !ccache__disk_stale_tmp(sfd, name, now)) return 0;
  if (del) return take_aside(d, sfd, name);
  unlinkat(sfd, name, 0); /* an entry never published: not in the total */
  return 0;
}

uint64_t ccache__disk_sweep_tmp(disk *d, int subfd) {
  DIR *dir = ccache__disk_opendir_dup(subfd);
  if (!dir) return 0;
  (void)FAULT("sweep");
  time_t now = time(NULL);
  uint64_t freed = 0;
  struct dirent *de;
  while ((de = readdir(dir)) != NULL) freed += ccache__disk_sweep_one(d, subfd, de->d_name, now);
  closedir(dir);
  return freed;
}

/* ------------------------------------------------------------------ sizes */

static void size_encode(unsigned char b[16], uint64_t total) {
  for (int i = 0; i < 8; i++) {
    b[i] = (unsigned char)(SIZE_MAGIC >> (8 * i));
    b[8 + i] = (unsigned char)(total >> (8 * i));
  }
}

static bool size_read_fd(int fd, uint64_t *total) {
  unsigned char b[16];
  size_t got = 0;
  if (fd < 0 || ccache__disk_read_full(fd, b, sizeof b, &got) != 0 || got != sizeof b) return false;
  uint64_t magic = 0, v = 0;
  for (int i = 7; i >= 0; i--) {
    magic = magic << 8 | b[i];
    v = v << 8 | b[8 + i];
  }
  *total = v;
  return magic == SIZE_MAGIC;
}

static bool size_write_fd(int fd, uint64_t total) {
  unsigned char b[16];
  size_encode(b, total);
  ssize_t w;
  while ((w = pwrite(fd, b, sizeof b, 0)) < 0 && errno == EINTR) {
  }
  return w == (ssize_t)sizeof b;
}

/* The size file, (re)opened if this object has none or its file was
 * deleted (an operator asking for a recount).  Never created here: a size
 * file appears whole (ccache__disk_size_create), so no writer ever adds
 * to a total that is not one.  Called with SIZE_BYTE held, so one thread
 * of the machine at a time replaces the descriptor. */
static int size_fd(disk *d) {
  ccache__lock(&d->space_mu);
  struct stat st;
  if (d->sizefd >= 0 && fstat(d->sizefd, &st) == 0 && st.st_nlink == 0) {
    close(d->sizefd);
    d->sizefd = -1;
  }
  if (d->sizefd < 0) {
    char rel[REL_MAX];
    snprintf(rel, sizeof rel, "%s/size", d->fmt);
    d->sizefd = openat(d->dirfd, rel, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  }
  int fd = d->sizefd, e = errno;
  ccache__unlock(&d->space_mu);
  errno = e;
  return fd;
}

bool ccache__disk_size_create(disk *d, int dfd, const char *rel, uint64_t total) {
  char tmp[REL_MAX];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%016llx.%llu", rel, (long)getpid(),
           (unsigned long long)d->word, (unsigned long long)atomic_fetch_add(&d->tmp_seq, 1));
  int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  bool ok = size_write_fd(fd, total);
  ok = close(fd) == 0 && ok;
  ok = ok && renameat2(dfd, tmp, dfd, rel, RENAME_NOREPLACE) == 0;
  if (!ok) unlinkat(dfd, tmp, 0);
  return ok;
}

/* A description of the lock file of its own: byte-range locks on different
 * descriptions exclude each other, between the threads of this process as
 * between processes, so the size section needs no mutex. */
static int open_lock(disk *d) {
  char rel[REL_MAX];
  snprintf(rel, sizeof rel, "%s/lock", d->fmt);
  return openat(d->dirfd, rel, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}

static uint64_t plus(uint64_t total, int64_t delta) {
  if (delta < 0) return (uint64_t)-delta > total ? 0 : total - (uint64_t)-delta;
  return total + (uint64_t)delta;
}

int ccache__disk_size_add(disk *d, int64_t delta, uint64_t wait_ms, uint64_t *total) {
  atomic_fetch_add(&d->pending, delta);
  int fd = open_lock(d);
  if (fd < 0) return SIZE_NONE;
  if (ccache__disk_byte_lock_wait(fd, SIZE_BYTE, F_WRLCK,
                                  atomic_load(&d->io_stuck) ? 0 : wait_ms) != 0) {
    int e = errno;
    close(fd);
    if (e != EAGAIN && e != EACCES) return SIZE_NONE;
    atomic_store(&d->io_stuck, 1);
    return SIZE_HELD;
  }
  atomic_store(&d->io_stuck, 0);
  int sfd = size_fd(d);
  uint64_t t = 0;
  int rc;
  if (sfd < 0) {
    rc = errno == ENOENT ? SIZE_DAMAGED : SIZE_NONE; /* missing: kept for after the recount */
  } else if (FAULT("size_read") == 0 && size_read_fd(sfd, &t)) {
    int64_t p = atomic_exchange(&d->pending, 0);
    /* More going than the total holds: a file changed behind the tier's
     * back (an entry planted or grown from outside).  The total is wrong
     * either way; written clamped, it asks for a recount. */
    bool drifted = p < 0 && (uint64_t)-p > t;
    t = plus(t, p);
    if (size_write_fd(sfd, t)) {
      *total = t;
      if (drifted) atomic_store(&d->size_drift, 1);
      rc = drifted ? SIZE_DRIFTED : SIZE_WRITTEN;
    } else {
      atomic_fetch_add(&d->pending, p);
      rc = SIZE_NONE;
    }
  } else {
    rc = SIZE_DAMAGED;
  }
  ccache__disk_byte_lock(fd, SIZE_BYTE, F_UNLCK);
  close(fd);
  return rc;
}

bool ccache__disk_size_peek(disk *d, uint64_t *total) {
  ccache__lock(&d->space_mu);
  bool ok = size_read_fd(d->sizefd, total);
  ccache__unlock(&d->space_mu);
  return ok;
}

bool ccache__disk_size_rebuild(disk *d, uint64_t counted, uint64_t wait_ms) {
  int fd = open_lock(d);
  if (fd < 0) return false;
  bool done = false;
  if (ccache__disk_byte_lock_wait(fd, SIZE_BYTE, F_WRLCK, wait_ms) == 0) {
    int sfd = size_fd(d);
    uint64_t t;
    char rel[REL_MAX];
    snprintf(rel, sizeof rel, "%s/size", d->fmt);
    if (sfd < 0) {
      done = errno == ENOENT && ccache__disk_size_create(d, d->dirfd, rel, counted);
    } else if (!size_read_fd(sfd, &t) || atomic_exchange(&d->size_drift, 0)) {
      done = size_write_fd(sfd, counted);
    }
    if (done) atomic_store(&d->pending, 0); /* the count has this object's writes */
    ccache__disk_byte_lock(fd, SIZE_BYTE, F_UNLCK);
  }
  close(fd);
  return done;
}
