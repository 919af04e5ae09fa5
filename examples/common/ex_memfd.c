/* ex_memfd.c: memfd_create + dlopen("/proc/self/fd/N"). */
#include "ex_memfd.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int write_all(int fd, const void *bytes, size_t len) {
  const char *p = bytes;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

static int memfd_with(const void *bytes, size_t len, const char *name) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (write_all(fd, bytes, len) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int ex_so_load(ex_so *so, const void *bytes, size_t len, const char *name, char *err,
               size_t errlen) {
  int fd = memfd_with(bytes, len, name);
  if (fd < 0) {
    snprintf(err, errlen, "memfd_create/write: %s", strerror(errno));
    return -1;
  }
  char path[40];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char *why = dlerror();
    snprintf(err, errlen, "dlopen %s: %s", path, why ? why : "failed");
    close(fd);
    return -1;
  }
  so->dl = dl;
  so->fd = fd;
  so->len = len;
  return 0;
}

void ex_so_unload(ex_so *so) {
  if (!so->dl) return;
  dlclose(so->dl); /* first: the path /proc/self/fd/N must not name another object meanwhile */
  close(so->fd);
  so->dl = NULL;
  so->fd = -1;
}

int ex_so_bytes(const ex_so *so, void **bytes, size_t *len) {
  char *buf = malloc(so->len ? so->len : 1);
  if (!buf) return -1;
  size_t got = 0;
  while (got < so->len) {
    ssize_t r = pread(so->fd, buf + got, so->len - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      free(buf);
      if (r == 0) errno = EIO;
      return -1;
    }
    got += (size_t)r;
  }
  *bytes = buf;
  *len = so->len;
  return 0;
}

void *ex_so_sym(const ex_so *so, const char *name, char *err, size_t errlen) {
  dlerror();
  void *p = dlsym(so->dl, name);
  if (!p) snprintf(err, errlen, "the shared object lacks %s", name);
  return p;
}
