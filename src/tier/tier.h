/*
 * tier.h - internal interface of the persistent tiers (tier.c: the stack;
 * tier_format.c: the entry format; tier_disk.c: the directory backend;
 * detail.c: the thread-local error detail).  Not installed.
 */
#ifndef CCACHE_TIER_H
#define CCACHE_TIER_H

#include <stdbool.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <pthread.h>

#include "ccache.h"
#include "base/sync.h"

/* A tier: a backend's ops and state, and which cache owns it (NULL: the
 * caller).  The owner field lets ccache_open() refuse a tier that is already
 * another cache's, or listed twice. */
struct ccache_tier {
  ccache_tier_ops ops;
  void *state;
  _Atomic(const void *) owner;
  /* The directory tier's deferred size updates (its state's counter), for
   * the owner's stats; NULL for other backends. */
  _Atomic uint64_t *lock_timeouts;
};

/* -------------------------------------------------------- tier_format.c */
#define CCACHE__TIER_MAGIC       "CCTIER\0\n" /* 8 bytes, no terminator stored */
#define CCACHE__TIER_HDR         56u          /* header bytes */
#define CCACHE__TIER_SUM         16u          /* trailing XXH3-128 */
#define CCACHE__TIER_MAX_PAYLOAD ((uint64_t)1 << 40)
/* "v<format>/<16 hex>" and its terminator fit in this. */
#define CCACHE__TIER_NS_MAX      32u

typedef enum ccache__entry_check {
  CCACHE__ENTRY_OK,      /* intact, our key and runtime tag */
  CCACHE__ENTRY_CORRUPT, /* anything wrong with the bytes */
  CCACHE__ENTRY_FOREIGN  /* intact, but made under another runtime tag */
} ccache__entry_check;

uint64_t ccache__tier_tag_hash(const char *tag);
void ccache__tier_ns(uint64_t tag_hash, char out[CCACHE__TIER_NS_MAX]);
/* Bytes of an entry holding `payload_len` bytes (payload_len is at most
 * CCACHE__TIER_MAX_PAYLOAD). */
size_t ccache__tier_entry_len(size_t payload_len);
/* Write the entry into dst (ccache__tier_entry_len(len) bytes). */
void ccache__tier_frame(unsigned char *dst, ccache_key key, uint64_t tag_hash, uint64_t created_ms,
                        const void *payload, size_t len);
/* Check an entry in full; on OK, *payload and *len point into blob. */
ccache__entry_check ccache__tier_verify(const void *blob, size_t blob_len, ccache_key key,
                                        uint64_t tag_hash, const void **payload, size_t *len);

/* ------------------------------------------- a cache's tiers (tier*.c) */
struct ccache;

/* A leased lock the renewal thread keeps alive. */
typedef struct ccache__lease_rec {
  struct ccache__lease_rec *prev, *next;
  ccache_tier *t;
  void *lock;
  uint64_t due_ns; /* next renewal, CLOCK_MONOTONIC */
  int busy;        /* renew() is running on it (r_mu released) */
  int lost;        /* a renew failed: no more renewals */
} ccache__lease_rec;

/* A cache's tiers: what open copied, the counts, the renewal thread. */
struct ccache__tiers {
  ccache_codec codec;
  int has_codec;
  uint64_t tag_hash;
  uint64_t min_compile_us;
  uint32_t n;
  ccache_tier *t[CCACHE_MAX_TIERS];
  bool usable[CCACHE_MAX_TIERS]; /* attached; false disables it for this cache */

  _Atomic uint64_t hits, misses, writes, errors, corrupt, bytes_read, bytes_written;
  _Atomic uint64_t lock_waits, wait_ms_max;

  ccache__mutex r_mu;
  pthread_cond_t r_cv; /* CLOCK_MONOTONIC; the list changed or a renew ended */
  pthread_t r_thread;
  int r_started, r_stop;
  ccache__lease_rec *leases;
};

static inline void ccache__tier_error(struct ccache__tiers *ts) {
  atomic_fetch_add(&ts->errors, 1);
}

/* Tier ops are user code for custom backends: they run under a callback
 * frame, so ccache_close() from inside one is refused.  Needs internal.h. */
#define CCACHE__IN_FRAME(c, call)  \
  do {                             \
    ccache__frame fr_;             \
    ccache__frame_push(&fr_, (c)); \
    call;                          \
    ccache__frame_pop(&fr_);       \
  } while (0)

/* ---------------------------------------------------------- tier_renew.c */
int ccache__tier_renewal_init(struct ccache__tiers *ts);
/* Stop and join the renewal thread (at close). */
void ccache__tier_renewal_stop(struct ccache__tiers *ts);
void ccache__tier_renewal_destroy(struct ccache__tiers *ts);
/* Register a lease taken by this thread (r: a record the caller keeps until
 * ccache__tier_lease_remove); starts the thread on first use. */
void ccache__tier_lease_add(struct ccache *c, ccache__lease_rec *r, ccache_tier *t, void *lock);
/* Unregister, waiting out a renew() in progress on it. */
void ccache__tier_lease_remove(struct ccache *c, ccache__lease_rec *r);

/* -------------------------------------------------------- tier_open.c, tier.c */
/* EINVAL unless the config's tier fields (if its size covers them) are
 * usable; no side effects. */
int ccache__tiers_check(const ccache_config *cfg);
/* At open, after the cache's locks exist: copy the codec and tag, take
 * ownership of the tiers, attach them.  OK or ENOMEM/EINVAL (then nothing
 * is owned). */
int ccache__tiers_open(struct ccache *c, const ccache_config *cfg);
/* At close (nothing in flight): join the renewal thread, close the tiers. */
void ccache__tiers_close(struct ccache *c);
/* The lease-renewal thread's name (at most 15 characters). */
#define CCACHE__RENEW_THREAD_NAME "ccache-renew"
/* The single-flight owner of a program miss: a native program from the
 * tiers, or from `compile` (then *compiled is set).  Returns 0, or the
 * compile callback's non-zero result. */
int ccache__tier_obtain(struct ccache *c, ccache_key pkey, ccache_program_compile_fn compile,
                        void *ud, void **native, uint64_t *cost, bool *compiled);
/* Fills the tier_* fields of a stats snapshot. */
void ccache__tier_stats(struct ccache *c, ccache_stats *s);

/* -------------------------------------------------------------- detail.c */
/* Records the thread's error detail (printf-style, truncated to a line). */
void ccache__detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---------------------------------------------------------- tier_disk.c */
#ifdef CCACHE_TESTING
/* Fault injection for the directory tier's tests: called at each named
 * point ("open_tmp", "write", "rename", "read", "mkdir", "size_read";
 * "scan", "scan_folder", "sweep" and "dup" are notices, their result
 * unused); a
 * non-zero
 * return is taken as that call's errno.  NULL: no faults. */
extern int (*ccache__disk_fault)(const char *point);
/* The tests' clock for the folder re-sweep interval (seconds; NULL: the
 * monotonic clock) and a fixed temp-name word (0: random). */
extern uint64_t (*ccache__disk_clock_s)(void);
extern uint64_t ccache__disk_fixed_word;
/* Wait (at most wait_ms) until a directory tier's cleaner has no pass asked
 * or running; false on timeout. */
bool ccache__disk_settle(ccache_tier *t, uint64_t wait_ms);
#endif

#endif /* CCACHE_TIER_H */
