/* native.c: loading pipelines, and the codec. */
#include "native.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hj_entry_name(ccache_key key, char *buf, size_t n) {
  snprintf(buf, n, "hj_%016" PRIx64 "%016" PRIx64, key.hi, key.lo);
}

hj_native *hj_load(const void *bytes, size_t len, ccache_key key, int *bad, char *err,
                   size_t errlen) {
  int dummy;
  if (!bad) bad = &dummy;
  *bad = 0;
  hj_native *n = calloc(1, sizeof *n);
  if (!n) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  char entry[48], meta[64];
  hj_entry_name(key, entry, sizeof entry);
  snprintf(meta, sizeof meta, "%s_metadata", entry);
  /* /proc/PID/maps shows it as /memfd:hj_<key> (deleted). */
  int rc = ex_so_load(&n->so, bytes, len, entry, err, errlen);
  if (rc != 0) {
    *bad = rc == EX_SO_BAD;
    free(n);
    return NULL;
  }
  n->fn = ex_so_sym(&n->so, entry, err, errlen);
  void *m = n->fn ? ex_so_sym(&n->so, meta, err, errlen) : NULL;
  if (!m) { /* loaded, but not this key's pipeline */
    *bad = 1;
    hj_unload(n);
    return NULL;
  }
  /* fn_metadata() is a function returning a pointer to static data. */
  const struct halide_filter_metadata_t *(*get_meta)(void);
  memcpy(&get_meta, &m, sizeof m);
  n->meta = get_meta();
  return n;
}

void hj_unload(hj_native *n) {
  if (!n) return;
  ex_so_unload(&n->so);
  free(n);
}

static _Thread_local char decode_err[512];

const char *hj_codec_error(void) { return decode_err; }

static int encode(void *ctx, ccache_key pkey, void *native, void **bytes, size_t *len) {
  (void)ctx, (void)pkey;
  hj_native *n = native;
  return ex_so_bytes(&n->so, bytes, len) == 0 ? 0 : -1;
}

static void free_bytes(void *ctx, void *bytes, size_t len) {
  (void)ctx, (void)len;
  free(bytes);
}

static int decode(void *ctx, ccache_key pkey, const void *bytes, size_t len, void **native_out,
                  uint64_t *cost_out) {
  hj_codec_state *st = ctx;
  int bad = 0;
  hj_native *n = hj_load(bytes, len, pkey, &bad, decode_err, sizeof decode_err);
  if (!n) return bad ? CCACHE_CODEC_CORRUPT : -1; /* bad bytes go; a local failure keeps them */
  st->loads++;
  *native_out = n;
  *cost_out = n->so.len;
  return 0;
}

ccache_codec hj_codec(hj_codec_state *st) {
  ccache_codec c = {encode, free_bytes, decode, st};
  return c;
}
