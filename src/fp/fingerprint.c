/*
 * fingerprint.c - the streaming structural fingerprint builder (XXH3-128,
 * or BLAKE2b-256 in the strong mode: the same fields and buffer, another
 * hash behind fp_feed() and the finals).
 *
 * A key is XXH3-128 (unseeded, default secret) of one byte stream:
 *
 *   "ccache-fp" (9 ASCII bytes) | u32 LE CCACHE_FP_FORMAT_VERSION | fields...
 *
 * and every field is a one-byte tag followed by a fixed-layout payload (see
 * the FP_TAG_* values below and the header).  Because XXH3 streaming over a
 * sequence of pieces equals one-shot XXH3 over their concatenation, how the
 * stream is fed (batched, direct, split) never changes the key.
 *
 * Why the batching buffer: libxxhash's XXH3_128bits_update() costs tens of
 * nanoseconds per call whatever the size, which would dominate a fingerprint
 * made of many 9-byte integer fields.  Small fields are therefore encoded
 * into a buffer inside the builder and handed to XXH3 only when it fills;
 * large byte fields bypass the buffer.  The XXH3 state is even set up lazily:
 * a fingerprint whose whole stream fits the builder (about 1000 bytes) is
 * finished with one one-shot XXH3_128bits() call and never touches the
 * 576-byte state.  Until then the state's storage is part of the buffer
 * (see fp_impl), so the one-shot case gets nearly the whole builder.
 *
 * Which XXH3 entry points: the generic (SSE2) ones for everything the
 * builder buffers and for blobs under 64 KiB; a blob of 64 KiB or more fed
 * directly takes libxxhash's x86 dispatcher, followed by our own vzeroupper
 * (fp_encode.h says why: Debian 0.8.1's AVX2 kernel leaves the upper AVX
 * state dirty, and only large inputs gain from it).
 */
#include "ccache.h"

#include <stdalign.h>
#include <stdbool.h>
#include <string.h>

#include "fp/fp_encode.h"
#include "fp/fp_strong.h"

/* Field tags of the builder.  Pinned: changing one needs a format bump.
 * 0x10 and 0x20 open node and graph streams (fp_graph.c) and are never field
 * tags, so no sequence of appends reproduces a graph key. */
enum {
  FP_TAG_U64 = 0x01,   /* u64 LE */
  FP_TAG_I64 = 0x02,   /* i64 LE two's complement */
  FP_TAG_F64 = 0x03,   /* IEEE-754 binary64 bits, u64 LE */
  FP_TAG_BYTES = 0x04, /* u64 LE length, bytes */
  FP_TAG_STR = 0x05,   /* u64 LE length, bytes */
  FP_TAG_SHAPE = 0x06, /* i32 LE dtype, u32 LE rank, rank x i64 LE dims */
  FP_TAG_KEY = 0x07,   /* u64 LE lo, u64 LE hi */
};

/* Stream prefix: magic + version (13 bytes), and in the strong mode the
 * mode byte after it (fp.h: the key mode is part of the domain). */
#define FP_HEADER_LEN    (CCACHE__FP_MAGIC_LEN + 4u)
#define FP_MODE_STRONG   0x53u /* 'S' */
#define FP_HEADER_STRONG (FP_HEADER_LEN + 1u)

/*
 * Storage.  area[] holds the stream bytes not yet hashed:
 *  - before the first spill, the whole stream is area[0, used);
 *  - from then on, area[0, FP_STATE_LEN) is the XXH3 state (holding the
 *    stream's prefix) and the pending bytes are area[FP_STATE_LEN, used).
 * Either way a field is appended at area + used and the buffer is full at
 * FP_AREA, so the append paths need no test of which phase the builder is in.
 *
 * A bytes/str payload under FP_DIRECT_MIN bytes is always copied into the
 * buffer; a larger one is too while the builder has not spilled and it fits,
 * and otherwise is fed to XXH3 directly.  Every field that may be buffered
 * after the spill (at most 1 + 8 + FP_DIRECT_MIN - 1 bytes, or a shape of
 * 1 + 4 + 4 + 8 * CCACHE_FP_MAX_RANK) fits the post-spill buffer whole.
 */
#define FP_AREA       1008u
#define FP_STATE_LEN  ((uint32_t)sizeof(XXH3_state_t))
#define FP_DIRECT_MIN 256u
#define FP_SHAPE_MAX  (1u + 4u + 4u + 8u * CCACHE_FP_MAX_RANK)

/* live marks an initialised, unpoisoned builder, so a builder that never saw
 * ccache_fp_init() (stack garbage or zeroes) is refused, not hashed.  A
 * failed append sets FP_POISONED: one comparison checks both conditions. */
#define FP_LIVE     0x70666363u /* "ccfp" */
#define FP_POISONED 0x70666370u /* "pcfp" */

/*
 * The builder's real layout inside ccache_fp.opaque_.  may_alias because the
 * storage is declared as an unsigned char array in the public header.
 * The XXH3 state holds no pointer into the builder (only to libxxhash's
 * static default secret), so a builder may be copied by value to fork a
 * fingerprint.
 */
typedef struct
#if defined(__GNUC__)
    __attribute__((may_alias))
#endif
    fp_impl {
  alignas(64) unsigned char area[FP_AREA]; /* stream bytes; XXH3 state once spilled */
  uint32_t live;                           /* FP_LIVE, FP_POISONED or garbage */
  uint32_t used;                           /* end of the pending bytes in area */
  bool spilled;                            /* area starts with the hash state */
  bool strong; /* BLAKE2b-256 (fp_strong.h) instead of XXH3-128; its state
                  takes the first CCACHE__SHASH_STATE_LEN bytes of the same
                  FP_STATE_LEN, so the buffer logic is one for both modes */
} fp_impl;

_Static_assert(sizeof(fp_impl) <= sizeof(ccache_fp), "fp_impl must fit ccache_fp");
_Static_assert(alignof(fp_impl) <= alignof(ccache_fp), "ccache_fp alignment too small");
_Static_assert(alignof(XXH3_state_t) <= 64, "the XXH3 state must fit area's alignment");
_Static_assert(sizeof(XXH3_state_t) + 1u + 8u + FP_DIRECT_MIN <= FP_AREA,
               "a buffered field must fit the post-spill buffer");
_Static_assert(sizeof(XXH3_state_t) + FP_SHAPE_MAX <= FP_AREA,
               "a shape field must fit the post-spill buffer");
_Static_assert(FP_HEADER_STRONG <= FP_AREA, "the header must fit the buffer");
_Static_assert(CCACHE__SHASH_STATE_LEN <= sizeof(XXH3_state_t),
               "the strong state must fit the space of the XXH3 state");

static fp_impl *fp_get(ccache_fp *fp) { return (fp_impl *)(void *)fp->opaque_; }

static const fp_impl *fp_cget(const ccache_fp *fp) {
  return (const fp_impl *)(const void *)fp->opaque_;
}

static XXH3_state_t *fp_state(fp_impl *b) { return (XXH3_state_t *)(void *)b->area; }

static const XXH3_state_t *fp_cstate(const fp_impl *b) {
  return (const XXH3_state_t *)(const void *)b->area;
}

/* ---- buffer management ---- */

/* Bytes into the builder's hash state, whichever mode. */
static void fp_feed(fp_impl *b, const void *data, size_t len) {
  if (b->strong)
    ccache__shash_update(b->area, data, len);
  else
    ccache__fp_update(fp_state(b), data, len);
}

/* Hand the pending bytes to the XXH3 state, moving the stream's prefix into
 * a new state on first use.  Afterwards the buffer is empty (used ==
 * FP_STATE_LEN). */
#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
static void
fp_flush(fp_impl *b) {
  if (!b->spilled) {
    /* The state is about to overwrite area[0, FP_STATE_LEN): hash what is
     * there from a copy.  Bytes past it are already where the post-spill
     * buffer is, and stay pending. */
    unsigned char head[sizeof(XXH3_state_t)];
    uint32_t n = b->used < FP_STATE_LEN ? b->used : FP_STATE_LEN;
    memcpy(head, b->area, n);
    if (b->strong)
      ccache__shash_init(b->area);
    else
      XXH3_128bits_reset(fp_state(b));
    fp_feed(b, head, n);
    b->spilled = true;
    if (b->used < FP_STATE_LEN) b->used = FP_STATE_LEN;
  }
  if (b->used > FP_STATE_LEN) fp_feed(b, b->area + FP_STATE_LEN, b->used - FP_STATE_LEN);
  b->used = FP_STATE_LEN;
}

/* Room for @p n more bytes (n <= FP_AREA - FP_STATE_LEN); returns where to
 * write. */
static inline unsigned char *fp_reserve(fp_impl *b, uint32_t n) {
  if (b->used + n > FP_AREA) fp_flush(b);
  return b->area + b->used;
}

static inline void fp_commit(fp_impl *b, const unsigned char *end) {
  b->used = (uint32_t)(end - b->area);
}

/* A live, unpoisoned builder, or NULL (the caller returns EINVAL). */
static inline fp_impl *fp_usable(ccache_fp *fp) {
  if (!fp) return NULL;
  fp_impl *b = fp_get(fp);
  return b->live == FP_LIVE ? b : NULL;
}

/* A failed append: no key until ccache_fp_init(), so callers may check a
 * whole sequence of appends once, at ccache_fp_final(). */
static int fp_poison(fp_impl *b) {
  b->live = FP_POISONED;
  return CCACHE_EINVAL;
}

/* memcpy for the short payloads of a buffered field (len < 256), without a
 * call into libc: overlapping fixed-size moves, never outside either range. */
static inline void fp_copy_short(unsigned char *dst, const unsigned char *src, size_t len) {
  if (len >= 16) {
    size_t i = 0;
    for (; i + 16 < len; i += 16) memcpy(dst + i, src + i, 16);
    memcpy(dst + len - 16, src + len - 16, 16);
  } else if (len >= 8) {
    uint64_t a, z;
    memcpy(&a, src, 8);
    memcpy(&z, src + len - 8, 8);
    memcpy(dst, &a, 8);
    memcpy(dst + len - 8, &z, 8);
  } else if (len >= 4) {
    uint32_t a, z;
    memcpy(&a, src, 4);
    memcpy(&z, src + len - 4, 4);
    memcpy(dst, &a, 4);
    memcpy(dst + len - 4, &z, 4);
  } else if (len) {
    unsigned char a = src[0], m = src[len / 2], z = src[len - 1];
    dst[0] = a;
    dst[len / 2] = m;
    dst[len - 1] = z;
  }
}

/* ---- public API ---- */

static void fp_start(fp_impl *b, bool strong) {
  /* The state is left as is: it is reset the first time it is needed. */
  b->live = FP_LIVE;
  b->spilled = false;
  b->strong = strong;
  unsigned char *p = b->area;
  memcpy(p, CCACHE__FP_MAGIC, CCACHE__FP_MAGIC_LEN);
  p = put_u32(p + CCACHE__FP_MAGIC_LEN, CCACHE_FP_FORMAT_VERSION);
  if (strong) p = put_u8(p, FP_MODE_STRONG);
  fp_commit(b, p);
}

CCACHE_API void ccache_fp_init(ccache_fp *fp) {
  if (fp) fp_start(fp_get(fp), false);
}

CCACHE_API int ccache_fp_init_strong(ccache_fp *fp) {
  if (!fp) return CCACHE_EINVAL;
  if (!ccache__shash_ready()) {
    fp_get(fp)->live = 0; /* unusable: every later call refuses it */
    return CCACHE_ENOTSUP;
  }
  fp_start(fp_get(fp), true);
  return CCACHE_OK;
}

/* The three 9-byte fields share one writer; only the tag differs. */
static inline int fp_word(ccache_fp *fp, unsigned char tag, uint64_t v) {
  fp_impl *b = fp_usable(fp);
  if (!b) return CCACHE_EINVAL;
  unsigned char *p = fp_reserve(b, 9);
  *p++ = tag;
  fp_commit(b, put_u64(p, v));
  return CCACHE_OK;
}

CCACHE_API int ccache_fp_u64(ccache_fp *fp, uint64_t v) { return fp_word(fp, FP_TAG_U64, v); }

CCACHE_API int ccache_fp_i64(ccache_fp *fp, int64_t v) {
  /* int64_t is two's complement by definition; the conversion is exact. */
  return fp_word(fp, FP_TAG_I64, (uint64_t)v);
}

CCACHE_API int ccache_fp_f64(ccache_fp *fp, double v) {
  _Static_assert(sizeof(double) == 8, "double must be IEEE-754 binary64");
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  return fp_word(fp, FP_TAG_F64, bits);
}

/* A large payload: buffered while the builder has not spilled and it fits,
 * else fed straight to XXH3 (after the pending bytes, so the stream order
 * holds). */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static int
fp_blob_long(fp_impl *b, unsigned char tag, const void *data, size_t len) {
  if (!b->spilled && b->used + 9u <= FP_AREA && len <= FP_AREA - 9u - b->used) {
    unsigned char *p = b->area + b->used;
    *p++ = tag;
    p = put_u64(p, (uint64_t)len);
    memcpy(p, data, len);
    fp_commit(b, p + len);
    return CCACHE_OK;
  }
  unsigned char *p = fp_reserve(b, 9);
  *p++ = tag;
  fp_commit(b, put_u64(p, (uint64_t)len));
  fp_flush(b);
  fp_feed(b, data, len);
  return CCACHE_OK;
}

/* Tag + length + payload. */
static inline int fp_blob(ccache_fp *fp, unsigned char tag, const void *data, size_t len) {
  fp_impl *b = fp_usable(fp);
  if (!b) return CCACHE_EINVAL;
  if (!data && len) return fp_poison(b);
  if (len >= FP_DIRECT_MIN) return fp_blob_long(b, tag, data, len);
  unsigned char *p = fp_reserve(b, (uint32_t)(9 + len));
  *p++ = tag;
  p = put_u64(p, (uint64_t)len);
  fp_copy_short(p, (const unsigned char *)data, len);
  fp_commit(b, p + len);
  return CCACHE_OK;
}

CCACHE_API int ccache_fp_bytes(ccache_fp *fp, const void *data, size_t len) {
  return fp_blob(fp, FP_TAG_BYTES, data, len);
}

CCACHE_API int ccache_fp_str(ccache_fp *fp, const char *s, size_t len) {
  return fp_blob(fp, FP_TAG_STR, s, len);
}

CCACHE_API int ccache_fp_shape(ccache_fp *fp, int32_t dtype, uint32_t rank, const int64_t *dims) {
  fp_impl *b = fp_usable(fp);
  if (!b) return CCACHE_EINVAL;
  if (rank > CCACHE_FP_MAX_RANK || (!dims && rank)) return fp_poison(b);
  unsigned char *p = fp_reserve(b, 1u + 4u + 4u + 8u * rank);
  *p++ = FP_TAG_SHAPE;
  p = put_u32(p, (uint32_t)dtype);
  p = put_u32(p, rank);
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  /* On a little-endian host the dims' memory is their encoding. */
  fp_copy_short(p, (const unsigned char *)dims, 8u * rank);
  p += 8u * rank;
#else
  for (uint32_t i = 0; i < rank; i++) p = put_u64(p, (uint64_t)dims[i]);
#endif
  fp_commit(b, p);
  return CCACHE_OK;
}

CCACHE_API int ccache_fp_key(ccache_fp *fp, ccache_key key) {
  fp_impl *b = fp_usable(fp);
  if (!b) return CCACHE_EINVAL;
  unsigned char *p = fp_reserve(b, 17);
  *p++ = FP_TAG_KEY;
  p = put_u64(p, key.lo);
  fp_commit(b, put_u64(p, key.hi));
  return CCACHE_OK;
}

CCACHE_API int ccache_key_eq(ccache_key a, ccache_key b) { return a.lo == b.lo && a.hi == b.hi; }

CCACHE_API char *ccache_key_hex(ccache_key key, char out[CCACHE_KEY_HEX_LEN]) {
  static const char digits[] = "0123456789abcdef";
  if (!out) return NULL;
  /* hi then lo, most significant digit first: the directory tier's file
   * names and the Redis tier's keys. */
  for (int i = 0; i < 16; i++) {
    out[i] = digits[(key.hi >> (60 - 4 * i)) & 0xf];
    out[16 + i] = digits[(key.lo >> (60 - 4 * i)) & 0xf];
  }
  out[32] = '\0';
  return out;
}

CCACHE_API int ccache_fp_final(const ccache_fp *fp, ccache_key *out) {
  if (!fp || !out) return CCACHE_EINVAL;
  const fp_impl *b = fp_cget(fp);
  if (b->live != FP_LIVE || b->strong) return CCACHE_EINVAL;
  XXH128_hash_t h;
  if (!b->spilled) {
    /* The whole stream is in the buffer: one one-shot hash, no state. */
    h = XXH3_128bits(b->area, b->used);
  } else {
    /* Finish a copy so the builder itself is untouched and can go on. */
    XXH3_state_t tail;
    XXH3_copyState(&tail, fp_cstate(b));
    if (b->used > FP_STATE_LEN)
      XXH3_128bits_update(&tail, b->area + FP_STATE_LEN, b->used - FP_STATE_LEN);
    h = XXH3_128bits_digest(&tail);
  }
  out->lo = h.low64;
  out->hi = h.high64;
  return CCACHE_OK;
}

CCACHE_API int ccache_fp_final_strong(const ccache_fp *fp, ccache_strong_key *out) {
  if (!fp || !out) return CCACHE_EINVAL;
  const fp_impl *b = fp_cget(fp);
  if (b->live != FP_LIVE || !b->strong) return CCACHE_EINVAL;
  if (!b->spilled) {
    ccache__shash(b->area, b->used, out);
    return CCACHE_OK;
  }
  /* Finish a copy of the state with the pending bytes: the builder stays. */
  _Alignas(CCACHE__SHASH_STATE_ALIGN) unsigned char tail[CCACHE__SHASH_STATE_LEN];
  memcpy(tail, b->area, sizeof tail);
  if (b->used > FP_STATE_LEN)
    ccache__shash_update(tail, b->area + FP_STATE_LEN, b->used - FP_STATE_LEN);
  ccache__shash_final(tail, out);
  return CCACHE_OK;
}
