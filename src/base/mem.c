/* mem.c - every allocation the cache makes goes through here. */
#include "base/mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void *ccache__malloc(const ccache__mem *m, size_t size) {
  return m->alloc ? m->alloc(m->ctx, size) : malloc(size);
}

void *ccache__calloc(const ccache__mem *m, size_t size) {
  void *p = ccache__malloc(m, size);
  if (p) memset(p, 0, size);
  return p;
}

/* A user's free hook may clobber errno; callers (and theirs) may be about to
 * report one, so it is kept. */
void ccache__free(const ccache__mem *m, void *ptr) {
  if (!ptr) return;
  int saved = errno;
  if (m->free)
    m->free(m->ctx, ptr);
  else
    free(ptr);
  errno = saved;
}
