/*
 * tier.h - internal interface of the persistent tiers (tier_stack.c: the stack;
 * tier_open.c: the tiers at open and close; tier_renew.c: the lease-renewal
 * threads; tier_health.c: the error counts and health reports;
 * tier_format.c: the entry format), and what the backends (disk/, redis/)
 * see of them.  Not installed.
 *
 * The tier stack sits below the core: it knows a cache only as the opaque
 * key of its callback frames (base/callback.h) and as the owner recorded in
 * each tier; what it needs of the cache (the allocator) is copied into its
 * own state at open, and what the core needs back (the compile time) is
 * returned.
 */
#ifndef CCACHE_TIER_H
#define CCACHE_TIER_H

#include <stdbool.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <pthread.h>

#include "ccache.h"
#include "base/callback.h"
#include "base/mem.h"
#include "base/sync.h"
#include "base/worker.h"

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
  /* The library's own backends: get() bounded by the owning cache's
   * tier_max_entry_bytes, refused before anything of the entry's size is
   * allocated: CCACHE__TIER_OVERSIZE (nothing to free) when the entry is
   * longer than max_len, else as ops.get.  NULL (custom backends): the
   * stack calls ops.get and checks the length it returns. */
  int (*get_bounded)(void *state, ccache_key pkey, uint64_t max_len, void **blob, size_t *len);
  /* The Redis backend: get_bounded for the polls of a process waiting on
   * another's lease.  The entry waited for can only appear where the
   * holder publishes, the key's first live server (where the lease was
   * found busy), so only that server is read: no fallback read, no fill.
   * NULL (the directory tier, custom backends): a poll is a get. */
  int (*get_poll)(void *state, ccache_key pkey, uint64_t max_len, void **blob, size_t *len);
  /* The Redis backend: the blob get_bounded just returned passed every
   * check (checksum, key, tag, a trusted signature when the cache has
   * keys) and decoded.  may_copy (a cache that publishes, not a reader):
   * the backend may now copy it where it belongs (a fallback hit to the
   * key's first live server); either way it may learn from it (the Redis
   * lookup's first-round size).  Called at most once per blob, before
   * free_blob; never for a blob that failed a check.  NULL: nothing to
   * do. */
  void (*accepted)(void *state, ccache_key pkey, const void *blob, size_t len, int may_copy);
  /* The Redis backend: the time to live left on pkey's lease, ms, in *ms
   * (-1: no expiry; -2: no lease), for tier_lease.c.  CCACHE_OK or a
   * negative status.  NULL: every busy lease is honoured up to wait_ms. */
  int (*lease_ttl)(void *state, ccache_key pkey, int64_t *ms);
  /* Set by the default instance (default.c) on a tier it adds but must not
   * use: the cache keeps it CCACHE_TIER_DISABLED with this line (static) as
   * its last error, and it does not count as a shared tier at open. */
  const char *kept_disabled;
};

/* What get_bounded answers for an entry over the bound (not a CCACHE_*
 * status: never leaves the tier stack). */
#define CCACHE__TIER_OVERSIZE 2

/* -------------------------------------------------------- tier_format.c */
#define CCACHE__TIER_MAGIC       "CCTIER\0\n" /* 8 bytes, no terminator stored */
#define CCACHE__TIER_HDR         56u          /* header bytes (fast keys) */
/* A strong cache's entries: the same header, then the key's check half
 * (u64 check.lo, u64 check.hi), so the whole 256-bit key is in the header
 * (and in what a signature over the header will cover). */
#define CCACHE__TIER_HDR_STRONG  72u
#define CCACHE__TIER_SUM         16u /* trailing XXH3-128 */
#define CCACHE__TIER_MAX_PAYLOAD ((uint64_t)1 << 40)
/* "v<format>/<16 hex>" (fast) or "v<format>/strong-<16 hex>" and its
 * terminator fit in this. */
#define CCACHE__TIER_NS_MAX      32u

/* The longest entry the format allows (the bound CCACHE_UNBOUNDED means). */
#define CCACHE__TIER_MAX_ENTRY \
  (CCACHE__TIER_MAX_PAYLOAD + CCACHE__TIER_HDR_STRONG + CCACHE__TIER_SUM)

typedef enum ccache__entry_check {
  CCACHE__ENTRY_OK,      /* intact, our key and runtime tag */
  CCACHE__ENTRY_CORRUPT, /* anything wrong with the bytes */
  CCACHE__ENTRY_FOREIGN  /* intact, but made under another runtime tag */
} ccache__entry_check;

uint64_t ccache__tier_tag_hash(const char *tag);
/* The namespace of a cache's entries: the key mode is part of it, so a
 * fast cache never reads or writes where a strong one looks. */
void ccache__tier_ns_mode(uint64_t tag_hash, bool strong, char out[CCACHE__TIER_NS_MAX]);
/* Bytes of an entry holding `payload_len` bytes (payload_len is at most
 * CCACHE__TIER_MAX_PAYLOAD). */
size_t ccache__tier_entry_len_mode(size_t payload_len, bool strong);
/* Write the entry into dst (ccache__tier_entry_len_mode(len, strong)
 * bytes); a strong entry carries key->check too. */
void ccache__tier_frame_mode(unsigned char *dst, const ccache_strong_key *key, bool strong,
                             uint64_t tag_hash, uint64_t created_ms, const void *payload,
                             size_t len);
/* The same with a signature block when signer is set (tier_trust.h), for
 * the namespace digest ns: the length of such an entry, and its framing. */
struct ccache_trust;
size_t ccache__tier_entry_len_signed(size_t payload_len, bool strong, bool sig);
void ccache__tier_frame_signed(unsigned char *dst, const ccache_strong_key *key, bool strong,
                               uint64_t tag_hash, uint64_t created_ms, const void *payload,
                               size_t len, const struct ccache_trust *signer,
                               const unsigned char *ns);
/* Check an entry in full (for a strong cache: its header length and all
 * 256 bits of the key); on OK, *payload and *len point into blob. */
ccache__entry_check ccache__tier_verify_mode(const void *blob, size_t blob_len,
                                             const ccache_strong_key *key, bool strong,
                                             uint64_t tag_hash, const void **payload, size_t *len);
/* The same for a fast cache (strong = false, the key's 128 bits). */
void ccache__tier_ns(uint64_t tag_hash, char out[CCACHE__TIER_NS_MAX]);
size_t ccache__tier_entry_len(size_t payload_len);
void ccache__tier_frame(unsigned char *dst, ccache_key key, uint64_t tag_hash, uint64_t created_ms,
                        const void *payload, size_t len);
ccache__entry_check ccache__tier_verify(const void *blob, size_t blob_len, ccache_key key,
                                        uint64_t tag_hash, const void **payload, size_t *len);

/* ------------------------------------------- a cache's tiers (tier*.c) */
struct ccache__renew_lane;

/* A leased lock a renewal thread keeps alive. */
typedef struct ccache__lease_rec {
  struct ccache__lease_rec *prev, *next;
  struct ccache__renew_lane *lane; /* NULL: no thread renews it (none could start) */
  ccache_tier *t;
  uint32_t tier; /* its index */
  void *lock;
  ccache_key key;  /* for the event of a failed renew */
  uint64_t due_ns; /* next renewal, CLOCK_MONOTONIC */
  uint64_t ok_ns;  /* when the last confirmed renewal (or the lock) was sent:
                      the lease holds until ok_ns + lease_ms */
  int busy;        /* renew() is running on it (r_mu released) */
  int lost;        /* a renew failed: no more renewals */
  int token;       /* taken by lock_value: renew_value, a fresh token each time */
} ccache__lease_rec;

/* The renewal thread of one tier's renewal group, and its leases. */
typedef struct ccache__renew_lane {
  struct ccache__renew_lane *next;
  struct ccache__tiers *ts;
  uint32_t tier, group;
  ccache__worker w; /* under r_mu; its condition: the list changed or a renew ended */
  ccache__lease_rec *leases;
} ccache__renew_lane;

/* One tier's counts for ccache_tier_health_get (relaxed atomics). */
typedef struct ccache__tier_counts {
  _Atomic uint64_t errors;      /* failed ops of this tier */
  _Atomic uint64_t lock_waits;  /* lock() answered CCACHE_EBUSY */
  _Atomic uint64_t leases_held; /* gauge: locks held now */
  _Atomic uint64_t leases_lost; /* renewals that failed */
  _Atomic int failing;          /* its most recent op failed */
} ccache__tier_counts;

#define CCACHE__TIER_ERROR_LINE 160u

/* A cache's tiers: what open copied, the counts, the renewal lanes. */
struct ccache__tiers {
  ccache__mem mem;   /* the owning cache's allocator (fixed at open) */
  const void *owner; /* the owning cache: the key of every callback frame
                        below, and each tier's owner; never followed */
  ccache_codec codec;
  int has_codec;
  uint64_t tag_hash;
  bool strong; /* ccache_config::key_mode is CCACHE_KEYS_STRONG */
  uint64_t min_compile_us;
  uint64_t max_entry; /* tier_max_entry_bytes, at most CCACHE__TIER_MAX_ENTRY */
  uint32_t n;
  ccache_tier *t[CCACHE_MAX_TIERS];
  bool usable[CCACHE_MAX_TIERS]; /* attached; false disables it for this cache */

  _Atomic uint64_t hits, misses, writes, errors, corrupt, bytes_read, bytes_written;
  _Atomic uint64_t lock_waits, wait_ms_max, leases_lost, oversize;
  /* ccache_config::trust's copy (NULL: none) and its counts (tier_trust.c). */
  struct ccache_trust *trust;
  /* trust without a signing key: a reader writes to no shared tier (no
   * store, no fill, no backend copy of what it read) */
  bool reader;
  /* With trust: each tier's namespace digest (CCACHE__NS_DIGEST bytes, set
   * at open from the tag, key mode and the tier's scope op), which its
   * entries' signatures and its lease tokens bind (tier_trust.h). */
  unsigned char ns[CCACHE_MAX_TIERS][32];
  _Atomic uint64_t rejected, unpublished;
  ccache__tier_counts per[CCACHE_MAX_TIERS];

  /* The owner's event hook (ccache_config::on_event), NULL when unset. */
  ccache_event_fn on_event;
  void *event_ctx;

  /* r_mu guards the renewal lanes, their lease lists, r_stop and the
   * last_error lines; a leaf, never held across a tier op or callback. */
  ccache__mutex r_mu;
  int r_stop;
  ccache__renew_lane *lanes; /* one per (tier, renewal group) that held a lease */
  char last_error[CCACHE_MAX_TIERS][CCACHE__TIER_ERROR_LINE];
};

/* Tier i's op or codec call failed with status rc (err: errno as the op
 * left it; reason: a line for the event, or NULL): tier_errors and, for a
 * tier (i < n; i == n is a codec call, which belongs to no tier), its own
 * count and last error line (tier_health.c); then the TIER_ERROR event when
 * the owner set a hook.  No lock held by the caller. */
void ccache__tier_fail(struct ccache__tiers *ts, uint32_t i, ccache_key key, const char *op, int rc,
                       int err, const char *reason);
/* A tier event (ccache_event) for tier i, when the owner set a hook: run
 * under a callback frame, no lock held (tier_health.c). */
void ccache__tier_event(struct ccache__tiers *ts, int kind, uint32_t i, ccache_key key,
                        const char *op, int status, int err, const char *reason);
/* Tier i's op succeeded (or answered a miss / busy): it is up. */
static inline void ccache__tier_ok(struct ccache__tiers *ts, uint32_t i) {
  if (atomic_load_explicit(&ts->per[i].failing, memory_order_relaxed))
    atomic_store_explicit(&ts->per[i].failing, 0, memory_order_relaxed);
}
/* ccache_tier_health_get's work once the cache is checked (ts may be NULL). */
int ccache__tier_health(struct ccache__tiers *ts, uint32_t tier, uint32_t part,
                        ccache_tier_health *out);

/* Tier ops and codec calls are user code: they run under a callback frame
 * keyed by the owning cache, so ccache_close() from inside one is refused. */
#define CCACHE__IN_FRAME(ts, call) CCACHE__USER_CALL((ts)->owner, NULL, call)

/* ---------------------------------------------------------- tier_renew.c */
int ccache__tier_renewal_init(struct ccache__tiers *ts);
/* Stop and join the renewal threads (at close). */
void ccache__tier_renewal_stop(struct ccache__tiers *ts);
void ccache__tier_renewal_destroy(struct ccache__tiers *ts);
/* Register a lease of tier i taken by this thread (r: a record the caller
 * keeps until ccache__tier_lease_remove; key: for the event of a failed
 * renew); starts the thread of its renewal group on first use. */
void ccache__tier_lease_add(struct ccache__tiers *ts, ccache__lease_rec *r, uint32_t i, void *lock,
                            ccache_key key);
/* Unregister, waiting out a renew() in progress on it. */
void ccache__tier_lease_remove(struct ccache__tiers *ts, ccache__lease_rec *r);

/* ---------------------------------------------------------- tier_store.c */
/* Write a verified entry to the usable tiers [0, upto) (why: "fill" above a
 * hit, "store" after a compile).  ns: the namespace digest the entry is
 * signed for (NULL: unsigned, every tier); a shared tier takes it only if
 * it has that digest, a private one whatever it is unless exact.  A reader
 * writes to no shared tier. */
void ccache__tier_fill(struct ccache__tiers *ts, ccache_key key, const void *blob, size_t len,
                       uint32_t upto, const char *why, const unsigned char *ns, bool exact);
/* Encode the program just compiled and store it in every usable tier
 * (nothing for a reader: tier_unpublished). */
void ccache__tier_store(struct ccache__tiers *ts, const ccache_strong_key *sk, void *native);

/* ---------------------------------------------------------- tier_lease.c */
/* How long, ms, a miss waits on tier i's busy lease for key (asked at the
 * first busy answer): wait_ms, or lease_ms + CCACHE__LEASE_SKEW_MS for a
 * cache without keys facing a lease no holder of this tier set. */
uint64_t ccache__tier_wait_bound(struct ccache__tiers *ts, uint32_t i, ccache_key key);

/* -------------------------------------------------------- tier_open.c, tier_stack.c */
/* EINVAL unless the config's tier fields (if its size covers them) are
 * usable; no side effects. */
int ccache__tiers_check(const ccache_config *cfg);
/* At open, after the cache's locks exist: the tiers' state for the cache
 * `owner` (allocating with *mem, which is copied), in *out (NULL if the
 * config has neither tiers nor a codec): copy the codec and tag, take
 * ownership of the tiers, attach them.  OK or ENOMEM/EINVAL (then nothing
 * is owned and *out is NULL). */
int ccache__tiers_open(struct ccache__tiers **out, const ccache__mem *mem, const void *owner,
                       const ccache_config *cfg);
/* At close (nothing in flight): join the renewal threads, close the tiers,
 * free the state and set *tsp to NULL.  *tsp NULL: nothing to do. */
void ccache__tiers_close(struct ccache__tiers **tsp);
/* The lease-renewal thread's name (at most 15 characters). */
#define CCACHE__RENEW_THREAD_NAME "ccache-renew"
/* The compile a program miss runs when no tier has the program: the core's
 * (program.c), which runs the user's compile callback under its frame.
 * Returns 0 with *native and *cost set, or the callback's non-zero result;
 * *took_ns gets the callback's wall time either way. */
typedef int (*ccache__tier_compile_fn)(void *arg, void **native, uint64_t *cost, uint64_t *took_ns);
/* The single-flight owner of a program miss: a native program from the
 * tiers (ts may be NULL: none), or from `compile` (then *compiled is set and
 * *compile_ns is the time it ran, for the cache's compile_ns; else 0).
 * Returns 0, or the compile's non-zero result. */
int ccache__tier_obtain(struct ccache__tiers *ts, const ccache_strong_key *pkey,
                        ccache__tier_compile_fn compile, void *arg, void **native, uint64_t *cost,
                        bool *compiled, uint64_t *compile_ns);
/* Fills the tier_* fields of a stats snapshot (ts NULL: leaves them). */
void ccache__tier_stats(const struct ccache__tiers *ts, ccache_stats *s);

#endif /* CCACHE_TIER_H */
