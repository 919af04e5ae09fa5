/*
 * alloc_fail_support.h - the allocation-failure test's instruments
 * (test_alloc_fail.c): an allocator hook that fails the Nth allocation (or
 * every one from the Nth on), counts live bytes and blocks, and records the
 * call sites it failed; and a snapshot of a cache's tables and counters,
 * compared after an ENOMEM with what it was before.
 */
#ifndef CCACHE_TEST_ALLOC_FAIL_SUPPORT_H
#define CCACHE_TEST_ALLOC_FAIL_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"
#include "support.h"

#define T_MAXSITES 1024

/* ------------------------------------------------------------- the hook */

typedef struct t_hook {
  uint64_t n;        /* allocations attempted in this run */
  uint64_t fail_at;  /* 0: never fail */
  int sticky;        /* fail every allocation from fail_at on */
  uint64_t injected; /* failures injected in this run */
  int64_t live_bytes, live_blocks;
  uint64_t sites[T_MAXSITES]; /* allocation sites that were failed */
  size_t nsites;
} t_hook;

/* ccache_config::alloc and ::free over a t_hook (alloc_ctx). */
void *t_hook_alloc(void *ctx, size_t size);
void t_hook_free(void *ctx, void *ptr);

/* ------------------------------------------------------------- snapshots */

typedef struct t_ent_snap {
  ccache_key key;
  void *closure;
  ccache_program *program;
  uint64_t idx, ins_ms;
  int expired;
} t_ent_snap;

typedef struct t_prog_snap {
  ccache_key pkey;
  void *native;
  ccache_program *p;
  uint64_t cost, refs, table_refs;
} t_prog_snap;

typedef struct t_snap {
  t_ent_snap e[256];
  size_t ne;
  t_prog_snap p[128];
  size_t np;
  uint64_t items, next_idx, last_ins_ms, cost_bytes, nprograms, handles_out;
  ccache__counters n;
  ccache_stats s;
  int64_t live_bytes;
} t_snap;

/* uthash's own consistency walk (HASH_DEBUG) over every table. */
void t_fsck(ccache *c);
/* The cache's entries, programs, counters and the hook's live bytes. */
void t_take_snap(ccache *c, t_ctx *t, t_hook *h, t_snap *s);
/* After an ENOMEM: the cache is as it was (see test_alloc_fail.c's comment);
 * what names the call in a failure. */
void t_assert_unchanged(const t_snap *a, const t_snap *b, const char *what);

#endif
