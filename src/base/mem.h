/*
 * mem.h - the allocator hook, and uthash routed through it.
 *
 * uthash's uthash_malloc/uthash_free take no context, so every function that
 * calls a HASH_* macro that may allocate or free declares
 *     CCACHE__UTHASH_SCOPE(&c->mem);
 * which puts the allocator (uh_mem) and an out-of-memory flag (uh_oom) in
 * scope.  uthash is built with HASH_NONFATAL_OOM: an allocation failure never
 * exits; it rolls the add back and reports through uthash_nonfatal_oom, which
 * sets uh_oom for that one call.
 */
#ifndef CCACHE_MEM_H
#define CCACHE_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ccache.h"

typedef struct ccache__mem {
  ccache_alloc_fn alloc; /* NULL: malloc */
  ccache_free_fn free;
  void *ctx;
} ccache__mem;

void *ccache__malloc(const ccache__mem *m, size_t size);
void *ccache__calloc(const ccache__mem *m, size_t size);
void ccache__free(const ccache__mem *m, void *ptr);

#define HASH_NONFATAL_OOM    1
/* Keys are 16 bytes (a ccache_key) nearly everywhere: compared as two words,
 * so a key passed by value can stay in registers on the hit path. */
#define HASH_KEYCMP(a, b, n) ccache__keycmp((a), (b), (n))
static inline int ccache__keycmp(const void *a, const void *b, size_t n) {
  if (n == 16) {
    uint64_t x[2], y[2];
    memcpy(x, a, 16);
    memcpy(y, b, 16);
    return ((x[0] ^ y[0]) | (x[1] ^ y[1])) != 0;
  }
  return memcmp(a, b, n);
}
#define uthash_malloc(sz)        ccache__malloc(uh_mem, (sz))
#define uthash_free(ptr, sz)     ccache__free(uh_mem, (ptr))
#define uthash_nonfatal_oom(obj) (uh_oom = 1)
#define CCACHE__UTHASH_SCOPE(m)    \
  const ccache__mem *uh_mem = (m); \
  int uh_oom = 0;                  \
  (void)uh_mem;                    \
  (void)uh_oom

#include <uthash.h>

/* More buckets from the start than uthash's 32: a serving cache holds a few
 * hundred call sites (a decode step: 361), and a hit walks its bucket's
 * chain, so 256 buckets (4 KiB per table) keep those chains about one entry
 * long instead of about six.  Larger tables grow as uthash grows them (when
 * a bucket reaches the threshold below: lowering it to 4 made uthash double
 * its bucket array far too often - 500 bytes of buckets per entry at 1M).
 * uthash reads these where its macros expand, so redefining them after the
 * include is enough. */
#undef HASH_INITIAL_NUM_BUCKETS
#undef HASH_INITIAL_NUM_BUCKETS_LOG2
#define HASH_INITIAL_NUM_BUCKETS      256U
#define HASH_INITIAL_NUM_BUCKETS_LOG2 8U
/* And a bucket is split at 11 items, not 10: with the two-multiply key fold,
 * uthash's default doubled a 1M-entry table's buckets once more than it
 * needed (129 bytes per entry, 120 at 11), for about 5 instructions per hit
 * at 100k entries. */
#undef HASH_BKT_CAPACITY_THRESH
#define HASH_BKT_CAPACITY_THRESH 11U

#endif
