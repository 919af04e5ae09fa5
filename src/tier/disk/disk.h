/*
 * disk.h - what the directory tier's files share: the tier's state, the
 * layout constants, the entry operations of disk_entry.c (which tier_disk.c
 * puts in the tier's ops), and the helpers of disk_space.c (paths, I/O,
 * temporary files, the running size total), disk_lock.c (the compile
 * locks) and disk_clean.c (the cleaner thread).  Internal.
 */
#ifndef CCACHE_DISK_H
#define CCACHE_DISK_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "base/sync.h"
#include "base/worker.h"
#include "tier/tier.h"

#define SIZE_BYTE    0u                    /* v<format>/lock: guards the size file */
#define CLEAN_BYTE   1u                    /* v<format>/lock: held by the one cleaner */
#define STALE_DEAD_S 60                    /* a dead writer's temp file older than this goes */
#define STALE_ANY_S  3600                  /* any temp file older than this goes */
#define RESWEEP_S    3600                  /* a process sweeps a folder again after this */
#define SIZE_MAGIC   0x31455a4953434343ull /* "CCCSIZE1" little-endian */
#define REL_MAX      112                   /* longest relative path we build */
#define FOLDERS      256u                  /* <xx> subdirectories per runtime tag */

#ifdef CCACHE_TESTING
/* The folder's test hooks, at its floor: every file of tier/disk reads them
 * (defined in disk_space.c, the folder's lowest source).
 *
 * Fault injection for the directory tier's tests: called at each named
 * point ("open_tmp", "write", "rename", "read", "mkdir", "size_read";
 * "scan", "scan_folder", "sweep" and "dup" are notices, their result
 * unused); a non-zero return is taken as that call's errno.  NULL: no
 * faults. */
extern int (*ccache__disk_fault)(const char *point);
/* The tests' clock for the folder re-sweep interval (seconds; NULL: the
 * monotonic clock) and a fixed temp-name word (0: random). */
extern uint64_t (*ccache__disk_clock_s)(void);
extern uint64_t ccache__disk_fixed_word;
/* Wait (at most wait_ms) until a directory tier's cleaner has no pass asked
 * or running; false on timeout (disk_clean.c). */
bool ccache__disk_settle(ccache_tier *t, uint64_t wait_ms);
#define FAULT(point) (ccache__disk_fault ? ccache__disk_fault(point) : 0)
#else
#define FAULT(point) 0
#endif

typedef struct disk {
  ccache_disk_options o;
  char *dir;                    /* o.dir, copied: for details */
  int dirfd;                    /* the checked directory */
  int lockfd;                   /* v<format>/lock: the cleaner's description; -1 */
  int sizefd;                   /* v<format>/size; -1 until attached (or if unusable) */
  char fmt[16];                 /* "v1" */
  char ns[CCACHE__TIER_NS_MAX]; /* "v1/<tag hash>" */
  struct ccache_tier *tier;     /* the tier made over this state: its counters */
  uint64_t word;                /* random, in this tier object's temp names */
  _Atomic uint64_t tmp_seq;

  ccache__mutex space_mu;         /* swept_s, sizefd */
  uint64_t swept_s[FOLDERS];      /* monotonic second of this object's last sweep + 1; 0 never */
  _Atomic int64_t pending;        /* size deltas not yet in the size file */
  _Atomic int size_drift;         /* the total was clamped: a recount overwrites it */
  _Atomic int io_stuck;           /* the last wait for SIZE_BYTE timed out: try, don't wait */
  _Atomic uint64_t lock_timeouts; /* accounting deferred (see ccache__disk_size_add) */

  /* The cleaner thread (disk_clean.c), started on first need. */
  ccache__mutex c_mu;
  ccache__worker c; /* under c_mu; its condition: work, stop, or a pass ended */
  int c_clean, c_recount, c_busy;
  _Atomic int c_cancel; /* close, past io_lock_ms: stop the pass in progress */

  struct disk *reg_prev, *reg_next; /* the fork registry */
} disk;

/* The cap's bound (see disk_entry.c): max_bytes plus a tenth, the headroom
 * writers use while a clean runs; past it a write waits for the cleaner. */
static inline uint64_t ccache__disk_bound(uint64_t cap) {
  return cap + cap / 10 < cap ? UINT64_MAX : cap + cap / 10;
}

/* ---------------------------------------------------------- disk_entry.c */
/* The tier's entry ops (ccache_tier_ops in tier_ops.h gives their contract;
 * state is the disk). */
int ccache__disk_get_bounded(void *state, ccache_key key, uint64_t max_len, void **blob,
                             size_t *len);
int ccache__disk_get(void *state, ccache_key key, void **blob, size_t *len);
void ccache__disk_free_blob(void *state, void *blob, size_t len);
int ccache__disk_put(void *state, ccache_key key, const void *blob, size_t len);
int ccache__disk_remove(void *state, ccache_key key);
int ccache__disk_remove_if(void *state, ccache_key key, const void *blob, size_t len);

/* ---------------------------------------------------------- disk_space.c */
void ccache__disk_key_paths(const disk *d, ccache_key key, char sub[REL_MAX], char path[REL_MAX]);
uint64_t ccache__disk_mono_s(void);
int ccache__disk_read_full(int fd, void *buf, size_t n, size_t *got);
int ccache__disk_write_full(int fd, const void *buf, size_t n);
int ccache__disk_byte_lock(int fd, uint64_t byte, short type);
/* Take byte of fd (F_WRLCK, or F_RDLCK), trying every few ms until
 * wait_ms has passed (0: one try).  0, or -1 with errno (EAGAIN: held). */
int ccache__disk_byte_lock_wait(int fd, uint64_t byte, short type, uint64_t wait_ms);
/* A fresh name "<sub>/.tmp.<pid>.<word>.<n>" for this tier object. */
void ccache__disk_tmp_name(disk *d, const char *sub, char tmp[REL_MAX]);
/* A fresh name "<sub>/.del.<pid>.<word>.<n>" for a file moved aside: an
 * entry being removed, whose bytes are still in the total. */
void ccache__disk_aside_name(disk *d, const char *sub, char aside[REL_MAX]);
/* Move the entry rel (under dfd) aside to a fresh aside name in sub ("."
 * when dfd is the folder), made young first so no sweep takes it for a
 * leftover.  0, or -1 with errno (ENOENT: gone already). */
int ccache__disk_move_aside(disk *d, int dfd, const char *rel, const char *sub,
                            char aside[REL_MAX]);
/* A temporary or aside file that no live write or remove can own (see
 * disk_entry.c). */
bool ccache__disk_stale_tmp(int dfd, const char *name, time_t now);
/* Remove name from the folder sfd if it is a stale temporary file (never
 * in the total: 0) or a stale aside (in the total: taken over and removed;
 * its bytes, which the caller subtracts).  Anything else stays (0). */
uint64_t ccache__disk_sweep_one(disk *d, int sfd, const char *name, time_t now);
/* ccache__disk_sweep_one over every file of the folder: the bytes to
 * subtract. */
uint64_t ccache__disk_sweep_tmp(disk *d, int subfd);
/* A directory stream over a new close-on-exec descriptor of fd. */
DIR *ccache__disk_opendir_dup(int fd);

/* The size section.  delta joins the pending deltas, which are then
 * written to the size file if SIZE_BYTE can be had within wait_ms (no wait
 * after a timeout, until a try succeeds).  SIZE_WRITTEN and the new total;
 * otherwise the deltas stay pending: SIZE_HELD (the byte was held past the
 * wait), SIZE_DAMAGED (the size file is missing or does not read: it wants
 * a recount), SIZE_NONE (an I/O error).  SIZE_DRIFTED: written, but the
 * deltas took more than the total held (files changed from outside), so the
 * total was clamped at 0 and wants a recount.  Never holds a mutex while
 * waiting. */
enum { SIZE_WRITTEN, SIZE_HELD, SIZE_DAMAGED, SIZE_NONE, SIZE_DRIFTED, SIZE_FULL };
int ccache__disk_size_add(disk *d, int64_t delta, uint64_t wait_ms, uint64_t *total);
/* A write's bytes into the total before it publishes (a capped tier): the
 * same section, but len is added only if the total (with this object's
 * pending deltas) is at most limit; otherwise SIZE_FULL and nothing added.
 * Never pending: on any status but SIZE_WRITTEN and SIZE_DRIFTED, len is
 * not in the total. */
int ccache__disk_size_reserve(disk *d, uint64_t len, uint64_t limit, uint64_t wait_ms,
                              uint64_t *total);
/* Under no lock: the size file's total, if it reads as one. */
bool ccache__disk_size_peek(disk *d, uint64_t *total);
/* A size file holding total at rel under dfd, made whole under a temp name
 * and renamed into place unless one is there.  true if this made it. */
bool ccache__disk_size_create(disk *d, int dfd, const char *rel, uint64_t total);
/* The recount's result: the size file becomes `counted` (and this
 * object's pending deltas, which the count includes, are dropped) if it is
 * missing or does not read, or this object clamped it (SIZE_DRIFTED), and
 * SIZE_BYTE can be had within wait_ms.  true if written. */
bool ccache__disk_size_rebuild(disk *d, uint64_t counted, uint64_t wait_ms);

/* ---------------------------------------------------------- disk_walk.c */
/* Open the directory rel ("<fmt>/<tag>/<xx>", '/'-separated, relative to
 * the top) one component at a time, never following a link, each level a
 * directory owned by the effective user and not writable by group or
 * others; create: a missing level is made 0700.  CCACHE_OK and *fd (the
 * caller closes it), CCACHE_MISS (a level is absent), CCACHE_EPERM (a
 * level is a link, not a directory, or not private: errno EPERM, ELOOP or
 * ENOTDIR), CCACHE_EIO, CCACHE_EINVAL (a malformed rel). */
int ccache__disk_walk(const disk *d, const char *rel, bool create, int *fd);

/* ---------------------------------------------------------- disk_lock.c */
/* The compile lock of key: byte XXH3-64(key) >> 1 of <sub>/lock, taken
 * again (shared) only by the thread of this process that holds it; <sub>
 * is reached by the checked walk.  OK (and *handle), CCACHE_EBUSY (another
 * process, or another thread of this one, holds it), CCACHE_EPERM (a level
 * of <sub> refused), CCACHE_EIO, CCACHE_ENOMEM.  Dropped by the thread that
 * took it. */
int ccache__disk_lock_take(disk *d, const char *sub, ccache_key key, void **handle);
void ccache__disk_lock_drop(void *handle);

/* ---------------------------------------------------------- disk_clean.c */
int ccache__disk_cleaner_init(disk *d);
/* Ask the cleaner thread for a pass (clean: the total is over the cap;
 * recount: the size file needs rebuilding); starts it on first use.
 * Never waits for the pass. */
void ccache__disk_cleaner_kick(disk *d, bool clean, bool recount);
/* Give the pass asked or running io_lock_ms to finish, then stop it; join
 * the thread (at close). */
void ccache__disk_cleaner_stop(disk *d);
void ccache__disk_cleaner_destroy(disk *d);

#endif
