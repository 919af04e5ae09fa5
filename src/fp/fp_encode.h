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
 * Debian's libxxhash also exports x86 runtime-dispatching entry points that
 * pick AVX2/AVX-512 kernels instead of the SSE2 baseline the generic symbols
 * are built for; the result is bit-identical.  They pay only on large inputs
 * (64 MiB: ~8.7 vs ~6.6 GB/s here), and libxxhash 0.8.1's AVX2 kernel returns
 * without vzeroupper, so the SSE code that runs next pays an AVX-SSE
 * transition penalty (measured: a 300-byte key's final step 50 -> 180 ns).
 * So small inputs, the common case, use the generic entry points, and only a
 * blob of CCACHE__FP_DISPATCH_MIN bytes or more takes the dispatcher,
 * followed by a vzeroupper of our own.
 * Define CCACHE_FP_NO_DISPATCH to link against a libxxhash without them.
 */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__has_include) && \
    !defined(CCACHE_FP_NO_DISPATCH)
#if __has_include(<xxh_x86dispatch.h>)
#define XXH_DISPATCH_DISABLE_REPLACE 1
#include <xxh_x86dispatch.h>
#define CCACHE__FP_HAVE_DISPATCH 1
#endif
#endif

#define CCACHE__FP_DISPATCH_MIN (64u * 1024u)

#ifdef CCACHE__FP_HAVE_DISPATCH
/* Clears the upper halves of the ymm registers the dispatched kernel left
 * dirty.  Only where the CPU has AVX: without it the kernel used SSE2 and
 * the instruction would not exist. */
__attribute__((target("avx"))) static inline void ccache__fp_avx_clean_(void) {
  __builtin_ia32_vzeroupper();
}
static inline void ccache__fp_avx_clean(void) {
  if (__builtin_cpu_supports("avx")) ccache__fp_avx_clean_();
}
#endif

/* Streaming update: the dispatcher only for large blobs (see above). */
static inline void ccache__fp_update(XXH3_state_t *st, const void *data, size_t len) {
#ifdef CCACHE__FP_HAVE_DISPATCH
  if (len >= CCACHE__FP_DISPATCH_MIN) {
    XXH3_128bits_update_dispatch(st, data, len);
    ccache__fp_avx_clean();
    return;
  }
#endif
  XXH3_128bits_update(st, data, len);
}

/* Stream prefix of builder and graph-key streams: magic + u32 version. */
#define CCACHE__FP_MAGIC     "ccache-fp"
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
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
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

/* fp_graph.c: whether a graph is valid for ccache_fp_graph() (and the
 * strong helper, which has the same rules); scratch and out only checked
 * for NULL. */
#include <stdbool.h>
#include "ccache.h"
bool ccache__fp_graph_ok(const ccache_fp_node *nodes, size_t n_nodes, const ccache_fp_ref *outputs,
                         size_t n_outputs, const char *device, const void *scratch,
                         const void *out);

#endif
