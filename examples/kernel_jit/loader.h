/* loader.h: a shared object's bytes -> a callable kernel, without a file.
 *
 * The bytes are loaded by the examples' shared memfd loader
 * (examples/common/ex_memfd.h: memfd_create + dlopen of /proc/self/fd/N,
 * the fd kept open until dlclose, which says why).  Every load also checks
 * the object's own kj_key against the key asked for. */
#ifndef KJ_LOADER_H
#define KJ_LOADER_H

#include <stddef.h>

#include <ccache.h>

#include "ex_memfd.h"
#include "spec.h"

typedef struct kj_native {
  ex_so so;        /* the loaded object (dlopen handle, memfd, length) */
  kj_kernel_fn fn; /* the kernel */
} kj_native;

/* Load a kernel compiled for key.  NULL with one line in err on failure;
 * then *bad (if bad is not NULL) says whether the bytes are bad (not a
 * whole shared object, a missing symbol, an object whose kj_key is not
 * key) or this host failed to load them (no memory, memfd, write, dlopen
 * of an object that looks whole). */
kj_native *kj_load(const void *bytes, size_t len, ccache_key key, int *bad, char *err,
                   size_t errlen);

/* dlclose, then close the memfd, then free.  NULL is a no-op. */
void kj_unload(kj_native *n);

/* A malloc'd copy of the loaded object's bytes, read back from its memfd.
 * 0, or -1 (errno set). */
int kj_native_bytes(const kj_native *n, void **bytes, size_t *len);

#endif
