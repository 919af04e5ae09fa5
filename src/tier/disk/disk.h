/*
 * disk.h - what the directory tier's two files share: the tier's state,
 * the layout constants, and disk_space.c's helpers (paths, I/O, temporary
 * files, the running size total and the cleaner) used by tier_disk.c.
 * Internal.
 */
#ifndef CCACHE_DISK_H
#define CCACHE_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/sync.h"
#include "tier/tier.h"

#define SLOTS        4096u                 /* compile-lock bytes in the lock file */
#define SIZE_BYTE    (SLOTS)               /* guards the size file */
#define CLEAN_BYTE   (SLOTS + 1u)          /* held by the one cleaner */
#define STALE_DEAD_S 60                    /* a dead writer's temp file older than this goes */
#define STALE_ANY_S  3600                  /* any temp file older than this goes */
#define SIZE_MAGIC   0x31455a4953434343ull /* "CCCSIZE1" little-endian */
#define REL_MAX      96                    /* longest relative path we build */

#ifdef CCACHE_TESTING
/* Fault injection for the tests (defined in tier_disk.c, declared in tier.h). */
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

void ccache__disk_key_paths(const disk *d, ccache_key key, char sub[REL_MAX], char path[REL_MAX]);
uint64_t ccache__disk_realtime_ns(void);
int ccache__disk_read_full(int fd, void *buf, size_t n, size_t *got);
int ccache__disk_write_full(int fd, const void *buf, size_t n);
int ccache__disk_byte_lock(int fd, unsigned byte, short type, int cmd);
void ccache__disk_sweep_tmp(int subfd);
uint64_t ccache__disk_size_update(disk *d, int64_t delta, bool rebase, uint64_t since);
void ccache__disk_maybe_clean(disk *d, uint64_t total);

#endif
