/* loader.h: a shared object's bytes -> a callable kernel, without a file.
 *
 * The bytes go into a memfd_create(MFD_CLOEXEC) file and dlopen() opens it
 * as /proc/self/fd/N.  glibc recognises an already-loaded object by its
 * path name, so the fd must stay open (its number unused by anyone else)
 * until dlclose(): were it closed early, the next kernel could get the same
 * number, hence the same path, and dlopen() would silently hand back the
 * previous kernel.  kj_unload() therefore does dlclose() first, then close().
 * Every load also checks the object's own kj_key against the key asked for. */
#ifndef KJ_LOADER_H
#define KJ_LOADER_H

#include <stddef.h>

#include <ccache.h>

#include "spec.h"

typedef struct kj_native {
  void *dl;        /* dlopen handle */
  int fd;          /* the memfd holding the bytes; open until dlclose */
  size_t len;      /* bytes of the shared object */
  kj_kernel_fn fn; /* the kernel */
} kj_native;

/* Load a kernel compiled for key.  NULL with one line in err on failure
 * (memfd, write, dlopen, a missing symbol, or an object whose kj_key is not
 * key). */
kj_native *kj_load(const void *bytes, size_t len, ccache_key key, char *err, size_t errlen);

/* dlclose, then close the memfd, then free.  NULL is a no-op. */
void kj_unload(kj_native *n);

/* A malloc'd copy of the loaded object's bytes, read back from its memfd.
 * 0, or -1 (errno set). */
int kj_native_bytes(const kj_native *n, void **bytes, size_t *len);

#endif
