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

#include "ccache.h"

typedef struct ccache__mem {
  ccache_alloc_fn alloc; /* NULL: malloc */
  ccache_free_fn free;
  void *ctx;
} ccache__mem;

void *ccache__malloc(const ccache__mem *m, size_t size);
void *ccache__calloc(const ccache__mem *m, size_t size);
void ccache__free(const ccache__mem *m, void *ptr);

#define HASH_NONFATAL_OOM 1
#define uthash_malloc(sz) ccache__malloc(uh_mem, (sz))
#define uthash_free(ptr, sz) ccache__free(uh_mem, (ptr))
#define uthash_nonfatal_oom(obj) (uh_oom = 1)
#define CCACHE__UTHASH_SCOPE(m)       \
  const ccache__mem *uh_mem = (m);    \
  int uh_oom = 0;                     \
  (void)uh_mem;                       \
  (void)uh_oom

#include <uthash.h>

#endif
