/*
 * mem_tier_support.h - the in-memory tier the tier-stack tests run over
 * (test_tier*.c without a backend of their own): every op counted and
 * logged, and each one can be made to fail, be busy, or publish an entry
 * "from another process"; and a rig, a cache over a few of them and the
 * test codec.
 */
#ifndef CCACHE_TEST_MEM_TIER_SUPPORT_H
#define CCACHE_TEST_MEM_TIER_SUPPORT_H

#include <pthread.h>
#include <stdbool.h>

#include "tier_support.h"

/* What a set of memory tiers shares: an op log (single-threaded tests), one
 * letter per op and the tier's id ("g0 L0 P1 ..."): g get, P put, R remove,
 * r remove_if, L lock, U unlock. */
extern char op_log[512];

typedef struct mem_entry {
  ccache_key key;
  unsigned char *blob;
  size_t len;
  struct mem_entry *next;
} mem_entry;

typedef struct mem_tier {
  int id;
  pthread_mutex_t mu;
  mem_entry *head;
  char ns[64];
  _Atomic int attaches, gets, get_hits, puts, removes, locks, unlocks, renews, closes, frees;
  /* Faults and behaviour. */
  int attach_rc, get_rc, put_rc, lock_rc, renew_rc;
  int busy;                 /* lock() answers EBUSY */
  int publish_at_get;       /* the n-th get() first stores `pending` (0: never) */
  int publish_at_remove_if; /* remove_if() first stores `pending` */
  _Atomic int remove_ifs;
  unsigned char *pending;
  size_t pending_len;
  ccache_key pending_key;
  /* Renewals. */
  pthread_mutex_t rmu;
  pthread_cond_t rcv;
  pthread_t renewer;
  int renewers_seen; /* distinct renewing threads, as seen in order */
} mem_tier;

/* A cache over n memory tiers (all with the same ops) and the test codec. */
typedef struct rig {
  t_ctx t;
  t_codec codec;
  t_compiler comp;
  mem_tier *m[CCACHE_MAX_TIERS];
  unsigned n;
  ccache *c;
} rig;

mem_entry *mem_find(mem_tier *m, ccache_key k);
void mem_store(mem_tier *m, ccache_key k, const void *blob, size_t len);
/* Removes k's entry only if it holds exactly blob (not in mem_ops(): a test
 * that wants a remove_if op sets it). */
int m_remove_if(void *s, ccache_key k, const void *blob, size_t len);
mem_tier *mem_new(int id);
/* close() does not free the mem_tier: the test reads its counters after the
 * cache is gone, and frees it with mem_free(). */
void mem_free(mem_tier *m);
/* The ops of a memory tier, with lock/unlock (and renew if lease_ms) or not. */
ccache_tier_ops mem_ops(bool locks, uint64_t lease_ms);
/* A tier over m; asserts success. */
ccache_tier *mem_tier_of(mem_tier *m, const ccache_tier_ops *o);

/* Opens r over n memory tiers with ops, runtime tag and tier_min_compile_us
 * (clears op_log); rig_open: mem_ops(locks, 0), "rt-1", 0. */
void rig_open_ops(rig *r, unsigned n, const ccache_tier_ops *ops, const char *tag, uint64_t min_us);
void rig_open(rig *r, unsigned n, bool locks);
/* Checks the cache, closes it, checks every tier was closed once and every
 * blob and encoding given back, and frees the tiers. */
void rig_close(rig *r);
/* Stores in m the entry of program id under key k and runtime tag tag. */
void seed(mem_tier *m, ccache_key k, const char *tag, int id);

#endif
