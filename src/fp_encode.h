/*
 * fp_encode.h - what the fingerprint builder (fingerprint.c) and the graph
 * helper (fp_graph.c) share: the XXH3 entry points, the stream prefix and the
 * little-endian writers.  The encoding is pinned by the known-answer tests.
 */
#ifndef CCACHE_FP_ENCODE_H
#define CCACHE_FP_ENCODE_H

#include <stdint.h>
#include <string.h>

/* The XXH3_state_t layout is needed to embed or stack-allocate a state. */
#define XXH_STATIC_LINKING_ONLY 1
#include <xxhash.h>

/*
 * Debian's libxxhash also exports the x86 runtime-dispatching entry points,
 * which pick AVX2/AVX-512 kernels instead of the SSE2 baseline the generic
 * symbols are built for (1.2x to 2x the bandwidth on large fields, by CPU).
 * The result is bit-identical.
 * Define CCACHE_FP_NO_DISPATCH to link against a libxxhash without them.
 */
#if defined(__x86_64__) && defined(__has_include) && !defined(CCACHE_FP_NO_DISPATCH)
#if __has_include(<xxh_x86dispatch.h>)
#define XXH_DISPATCH_DISABLE_REPLACE 1
#include <xxh_x86dispatch.h>
#define CCACHE__FP_XXH_UPDATE XXH3_128bits_update_dispatch
#define CCACHE__FP_XXH_LONG XXH3_128bits_dispatch
#endif
#endif
#ifndef CCACHE__FP_XXH_UPDATE
#define CCACHE__FP_XXH_UPDATE XXH3_128bits_update
#define CCACHE__FP_XXH_LONG XXH3_128bits
#endif

/* One-shot XXH3-128.  Inputs over 240 bytes take XXH3's long-input path,
 * where the dispatching entry point's SIMD kernels pay (a 260-300 byte
 * call-site stream: ~43 -> ~27 ns); at 240 bytes and below the generic entry
 * point is as fast and skips the dispatch. */
static inline XXH128_hash_t ccache__fp_oneshot(const void *data, size_t len) {
  return len > 240 ? CCACHE__FP_XXH_LONG(data, len) : XXH3_128bits(data, len);
}

/* Stream prefix of builder and graph-key streams: magic + u32 version. */
#define CCACHE__FP_MAGIC "ccache-fp"
#define CCACHE__FP_MAGIC_LEN 9u

static inline unsigned char *put_u8(unsigned char *p, unsigned v) {
  *p = (unsigned char)v;
  return p + 1;
}

/*
 * The stream is little-endian whatever the host.  On a little-endian host a
 * memcpy of the value *is* that encoding and compiles to one store; the
 * portable fallback writes the bytes one by one (Clang 14 does not merge
 * such byte stores, which cost ~10 ns per node).
 */
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) &&                            \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline unsigned char *put_u32(unsigned char *p, uint32_t v) {
  memcpy(p, &v, 4);
  return p + 4;
}

static inline unsigned char *put_u64(unsigned char *p, uint64_t v) {
  memcpy(p, &v, 8);
  return p + 8;
}
#else
static inline unsigned char *put_u32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
  return p + 4;
}

static inline unsigned char *put_u64(unsigned char *p, uint64_t v) {
  put_u32(p, (uint32_t)v);
  return put_u32(p + 4, (uint32_t)(v >> 32));
}
#endif

#endif
