/* loader.c: the shared memfd loader, plus kernel_jit's symbols and key check. */
#include "loader.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The symbols every generated kernel defines, and the key check. */
static int bind_kernel(kj_native *n, ccache_key key, char *err, size_t errlen) {
  const unsigned long long *k = ex_so_sym(&n->so, "kj_key", err, errlen);
  void *fn = k ? ex_so_sym(&n->so, "kj_kernel", err, errlen) : NULL;
  if (!k || !fn) return -1;
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

kj_native *kj_load(const void *bytes, size_t len, ccache_key key, int *bad, char *err,
                   size_t errlen) {
  int dummy;
  if (!bad) bad = &dummy;
  *bad = 0;
  kj_native *n = calloc(1, sizeof *n);
  if (!n) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  /* The memfd's name shows in /proc/PID/maps as /memfd:kj-<key> (deleted). */
  char name[48];
  snprintf(name, sizeof name, "kj-%016" PRIx64 "%016" PRIx64, key.hi, key.lo);
  int rc = ex_so_load(&n->so, bytes, len, name, err, errlen);
  if (rc != 0) {
    *bad = rc == EX_SO_BAD;
    free(n);
    return NULL;
  }
  if (bind_kernel(n, key, err, errlen) != 0) { /* loaded, but not this key's kernel */
    *bad = 1;
    kj_unload(n);
    return NULL;
  }
  return n;
}

void kj_unload(kj_native *n) {
  if (!n) return;
  ex_so_unload(&n->so);
  free(n);
}

int kj_native_bytes(const kj_native *n, void **bytes, size_t *len) {
  return ex_so_bytes(&n->so, bytes, len);
}
