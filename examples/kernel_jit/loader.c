/* loader.c: memfd_create + dlopen("/proc/self/fd/N"). */
#include "loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
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

/* The memfd's name shows in /proc/PID/maps as /memfd:kj-<key> (deleted). */
static int memfd_with(const void *bytes, size_t len, ccache_key key) {
  char name[48];
  snprintf(name, sizeof name, "kj-%016" PRIx64 "%016" PRIx64, key.hi, key.lo);
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

/* The symbols every generated kernel defines, and the key check. */
static int bind_kernel(kj_native *n, ccache_key key, char *err, size_t errlen) {
  const unsigned long long *k = dlsym(n->dl, "kj_key");
  void *fn = dlsym(n->dl, "kj_kernel");
  if (!k || !fn) {
    snprintf(err, errlen, "the shared object lacks kj_key or kj_kernel");
    return -1;
  }
  if (k[0] != key.lo || k[1] != key.hi) {
    snprintf(err, errlen,
             "dlopen returned a different kernel (key %016llx%016llx, wanted %016" PRIx64
             "%016" PRIx64 ")",
             k[1], k[0], key.hi, key.lo);
    return -1;
  }
  /* dlsym's object pointer to a function pointer: POSIX guarantees this. */
  memcpy(&n->fn, &fn, sizeof fn);
  return 0;
}

kj_native *kj_load(const void *bytes, size_t len, ccache_key key, char *err, size_t errlen) {
  kj_native *n = calloc(1, sizeof *n);
  if (!n) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  n->len = len;
  n->fd = memfd_with(bytes, len, key);
  if (n->fd < 0) {
    snprintf(err, errlen, "memfd_create/write: %s", strerror(errno));
    free(n);
    return NULL;
  }
  char path[40];
  snprintf(path, sizeof path, "/proc/self/fd/%d", n->fd);
  n->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!n->dl) {
    const char *why = dlerror();
    snprintf(err, errlen, "dlopen %s: %s", path, why ? why : "failed");
    close(n->fd);
    free(n);
    return NULL;
  }
  if (bind_kernel(n, key, err, errlen) != 0) {
    kj_unload(n);
    return NULL;
  }
  return n;
}

void kj_unload(kj_native *n) {
  if (!n) return;
  dlclose(n->dl); /* first: the path /proc/self/fd/N must not name another object meanwhile */
  close(n->fd);
  free(n);
}

int kj_native_bytes(const kj_native *n, void **bytes, size_t *len) {
  char *buf = malloc(n->len ? n->len : 1);
  if (!buf) return -1;
  size_t got = 0;
  while (got < n->len) {
    ssize_t r = pread(n->fd, buf + got, n->len - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      free(buf);
      if (r == 0) errno = EIO;
      return -1;
    }
    got += (size_t)r;
  }
  *bytes = buf;
  *len = n->len;
  return 0;
}
