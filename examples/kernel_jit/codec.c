/* codec.c: ccache_codec over loader.c. */
#include "codec.h"

#include <stdlib.h>

#include "loader.h"

static int encode(void *ctx, ccache_key pkey, void *native, void **bytes, size_t *len) {
  (void)ctx, (void)pkey;
  return kj_native_bytes(native, bytes, len) == 0 ? 0 : -1;
}

static void free_bytes(void *ctx, void *bytes, size_t len) {
  (void)ctx, (void)len;
  free(bytes);
}

/* The bytes belong to the caller and live only during the call: kj_load
 * copies them into the memfd.  Bytes that are not this key's whole kernel
 * object are CCACHE_CODEC_CORRUPT (the entry is removed); a failure of this
 * host (no memory, no executable memfds, a dlopen refused by policy) is -1,
 * and the entry stays for the machines that can load it. */
static int decode(void *ctx, ccache_key pkey, const void *bytes, size_t len, void **native_out,
                  uint64_t *cost_out) {
  kj_codec_state *st = ctx;
  int bad = 0;
  kj_native *n = kj_load(bytes, len, pkey, &bad, st->err, sizeof st->err);
  if (!n) return bad ? CCACHE_CODEC_CORRUPT : -1;
  st->loads++;
  *native_out = n;
  *cost_out = n->so.len;
  return 0;
}

ccache_codec kj_codec(kj_codec_state *st) {
  ccache_codec c = {encode, free_bytes, decode, st};
  return c;
}
