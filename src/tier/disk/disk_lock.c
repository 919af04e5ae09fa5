/*
 * disk_lock.c - the directory tier's compile locks.
 *
 * The lock of a key is an open-file-description byte-range lock on one
 * byte of <ns>/<xx>/lock, the lock file of the key's own folder: byte
 * XXH3-64(key) >> 1 (an offset below 2^63).  A byte-range lock may sit at
 * any offset without the file growing, so the lock files stay empty and
 * number at most 256 per runtime tag.  Two keys share a lock only if they
 * share the runtime tag, the folder and those 63 bits: about 2^-71 per
 * pair, for any keys (the hash spreads sequential ones too), where one byte
 * per key.lo mod 4096 made it 1/4096.
 *
 * Locks on different open file descriptions exclude each other even within
 * one process, so a thread that took a lock and asks for it again (a nested
 * compile of the same program in a second cache: two tier objects over one
 * directory) would wait for itself.  The process therefore keeps one table
 * of the locks it holds, keyed by the lock file's device and inode and the
 * byte, each with the thread that took it: that thread, asking again from
 * inside its compile (whichever cache asks), shares it (a count), and the
 * byte is let go when its last unlock comes.  Any other thread of the
 * process finds the lock busy (CCACHE_EBUSY), as another process would:
 * it waits for the entry (at most lock_wait_ms) and loads it, so two
 * caches over one directory compile a key once.  A cache takes and drops
 * its tier locks on the one thread that runs the miss (tier.c), so the
 * owner is well defined; nested work handed to another thread (a pool) is
 * such another thread: it waits lock_wait_ms at most, then compiles
 * without the lock.
 *
 * A child of fork() closes the descriptors of the table it inherited, so a
 * child that outlives its parent cannot keep the parent's locks alive.
 */
#define _GNU_SOURCE 1 /* F_OFD_SETLK (Linux) */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "base/mem.h" /* uthash, through the allocator hook */
#include "base/sync.h"
#include "tier/disk/disk.h"

typedef struct held_key {
  dev_t dev;
  ino_t ino;
  uint64_t byte;
} held_key;

typedef struct held {
  held_key k;
  int fd;          /* the description that holds the byte */
  uint32_t refs;   /* the owner's takes not yet dropped */
  pthread_t owner; /* the thread that took it: the one that may take it again */
  UT_hash_handle hh;
} held;

static ccache__mutex tab_mu = {.posix = PTHREAD_MUTEX_INITIALIZER};
static const ccache__mem tab_mem = {NULL, NULL, NULL}; /* malloc: the table is the process's */
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;
static held *tab;

static void tab_prepare(void) { ccache__lock(&tab_mu); }
static void tab_parent(void) { ccache__unlock(&tab_mu); }
static void tab_child(void) {
  CCACHE__UTHASH_SCOPE(&tab_mem);
  held *h, *tmp;
  HASH_ITER(hh, tab, h, tmp) {
    HASH_DEL(tab, h);
    close(h->fd);
    free(h);
  }
  ccache__unlock(&tab_mu);
}
static void tab_init(void) { pthread_atfork(tab_prepare, tab_parent, tab_child); }

/* The folder's lock file, created (with the folder) if absent; the folder
 * reached by the checked walk (disk_walk.c).  A descriptor, or a negative
 * status. */
static int open_lock_file(disk *d, const char *sub) {
  int sfd = -1;
  int rc = ccache__disk_walk(d, sub, true, &sfd);
  if (rc != CCACHE_OK) return rc == CCACHE_EPERM ? CCACHE_EPERM : CCACHE_EIO;
  int fd = openat(sfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  int e = errno;
  close(sfd);
  errno = e;
  return fd >= 0 ? fd : CCACHE_EIO;
}

int ccache__disk_lock_take(disk *d, const char *sub, ccache_key key, void **handle) {
  pthread_once(&tab_once, tab_init);
  int fd = open_lock_file(d, sub);
  if (fd < 0) return fd;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return CCACHE_EIO;
  }
  held_key k;
  memset(&k, 0, sizeof k); /* (padding: the whole struct is the hash key) */
  k.dev = st.st_dev;
  k.ino = st.st_ino;
  unsigned char kb[16];
  for (int i = 0; i < 8; i++) {
    kb[i] = (unsigned char)(key.lo >> (8 * i));
    kb[8 + i] = (unsigned char)(key.hi >> (8 * i));
  }
  k.byte = XXH3_64bits(kb, sizeof kb) >> 1;
  int rc = CCACHE_OK;
  CCACHE__UTHASH_SCOPE(&tab_mem);
  ccache__lock(&tab_mu);
  held *h = NULL;
  HASH_FIND(hh, tab, &k, sizeof k, h);
  if (h && pthread_equal(h->owner, pthread_self())) {
    h->refs++; /* this thread holds it already: a nested compile */
  } else if (h) {
    rc = CCACHE_EBUSY; /* another thread's compile: wait for its entry */
  } else if (ccache__disk_byte_lock(fd, k.byte, F_WRLCK) != 0) {
    rc = errno == EAGAIN || errno == EACCES ? CCACHE_EBUSY : CCACHE_EIO;
  } else if ((h = malloc(sizeof *h)) == NULL) {
    ccache__disk_byte_lock(fd, k.byte, F_UNLCK);
    rc = CCACHE_ENOMEM;
  } else {
    h->k = k;
    h->fd = fd;
    h->refs = 1;
    h->owner = pthread_self();
    HASH_ADD(hh, tab, k, sizeof k, h);
    if (uh_oom) { /* (uthash could not grow: nothing was added) */
      free(h);
      h = NULL;
      ccache__disk_byte_lock(fd, k.byte, F_UNLCK);
      rc = CCACHE_ENOMEM;
    } else {
      fd = -1; /* the table's now */
    }
  }
  ccache__unlock(&tab_mu);
  if (fd >= 0) close(fd);
  if (rc == CCACHE_OK) *handle = h;
  return rc;
}

void ccache__disk_lock_drop(void *handle) {
  held *h = handle;
  CCACHE__UTHASH_SCOPE(&tab_mem);
  ccache__lock(&tab_mu);
  if (--h->refs == 0) {
    HASH_DEL(tab, h);
    ccache__disk_byte_lock(h->fd, h->k.byte, F_UNLCK);
    close(h->fd);
    free(h);
  }
  ccache__unlock(&tab_mu);
}
