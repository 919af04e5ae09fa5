/* codec.h: kernels to bytes and back, for ccache's tiers.
 *
 * encode: the shared object's bytes, read back from the kernel's memfd.
 * decode: memfd + dlopen of the bytes (loader.h).  The compile callback
 * loads what cc produced through this same decode, so a kernel from a tier
 * and a fresh one are loaded by one path. */
#ifndef KJ_CODEC_H
#define KJ_CODEC_H

#include <ccache.h>

/* Where decode() reports why a load failed (one line), and how many loads
 * it did. */
typedef struct kj_codec_state {
  char err[512];
  uint64_t loads;
} kj_codec_state;

/* The codec for ccache_config::codec; ctx is st. */
ccache_codec kj_codec(kj_codec_state *st);

#endif
