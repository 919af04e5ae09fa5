/* ex_memfd.h: a shared object's bytes -> a loaded object, without a file.
 * Shared by the examples that persist compiled code through ccache's tiers
 * (kernel_jit, halide_jit).
 *
 * The bytes go into a memfd_create(MFD_CLOEXEC) file and dlopen() opens it
 * as /proc/self/fd/N.  glibc recognises an already-loaded object by its
 * path name, so the fd must stay open (its number unused by anyone else)
 * until dlclose(): were it closed early, the next object could get the same
 * number, hence the same path, and dlopen() would silently hand back the
 * previous object.  ex_so_unload() therefore does dlclose() first, then
 * close().  Callers still check, after loading, a symbol that only the
 * object they asked for defines (its key). */
#ifndef EX_MEMFD_H
#define EX_MEMFD_H

#include <stddef.h>

typedef struct ex_so {
  void *dl;   /* dlopen handle */
  int fd;     /* the memfd holding the bytes; open until dlclose */
  size_t len; /* bytes of the shared object */
} ex_so;

/* What ex_so_load returns for bytes that are not a whole shared object of
 * this host's kind (checked from the ELF headers before anything is
 * loaded: a truncated or damaged object). */
#define EX_SO_BAD (-2)

/* Load len bytes of a shared object (RTLD_NOW | RTLD_LOCAL).  name (at most
 * 200 bytes) names the memfd, as /memfd:NAME (deleted) in /proc/PID/maps.
 * 0; EX_SO_BAD (the bytes are not a whole object); or -1 (this host could
 * not load bytes that look whole: memfd_create, write or dlopen failed,
 * e.g. memfds that may not be executable, or a library the object needs
 * missing here).  One line in err on failure; *so is untouched then. */
int ex_so_load(ex_so *so, const void *bytes, size_t len, const char *name, char *err,
               size_t errlen);

/* dlclose, then close the memfd.  A zeroed ex_so (dl NULL) is a no-op. */
void ex_so_unload(ex_so *so);

/* A malloc'd copy of the loaded object's bytes, read back from its memfd.
 * 0, or -1 (errno set). */
int ex_so_bytes(const ex_so *so, void **bytes, size_t *len);

/* dlsym(so, name), or NULL with one line in err. */
void *ex_so_sym(const ex_so *so, const char *name, char *err, size_t errlen);

#endif
