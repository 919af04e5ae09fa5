/*
 * fingerprint.c - the streaming structural fingerprint builder (XXH3-128).
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
 * a fingerprint whose whole stream fits the buffer is finished with one
 * one-shot XXH3_128bits() call and never touches the 576-byte state.
 */
#include "ccache.h"

#include <stdalign.h>
#include <stdbool.h>
#include <string.h>

#include "fp_encode.h"

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
};

/* Stream prefix: magic + version (13 bytes). */
#define FP_HEADER_LEN (CCACHE__FP_MAGIC_LEN + 4u)

/* Batching buffer size, and the payload size from which a bytes/str field
 * is fed to XXH3 directly instead of being copied into the buffer.  Every
 * buffered field (at most 1 + 8 + FP_DIRECT_MIN - 1 bytes, or a shape of
 * 1 + 4 + 4 + 8 * CCACHE_FP_MAX_RANK) fits an empty buffer whole. */
#define FP_BUF_SIZE 384u
#define FP_DIRECT_MIN 256u
#define FP_SHAPE_MAX (1u + 4u + 4u + 8u * CCACHE_FP_MAX_RANK)

/* Marks an initialised builder, so a builder that never saw
 * ccache_fp_init() (stack garbage or zeroes) is refused, not hashed. */
#define FP_LIVE 0x70666363u /* "ccfp" */

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
  XXH3_state_t state; /* valid only once spilled is true */
  uint32_t live;      /* FP_LIVE after ccache_fp_init() */
  uint32_t used;      /* bytes pending in buf */
  bool spilled;       /* state holds a prefix of the stream */
  bool poisoned;      /* an append failed: no key until re-init */
  unsigned char buf[FP_BUF_SIZE];
} fp_impl;

_Static_assert(sizeof(fp_impl) <= sizeof(ccache_fp), "fp_impl must fit ccache_fp");
_Static_assert(alignof(fp_impl) <= alignof(ccache_fp), "ccache_fp alignment too small");
_Static_assert(FP_HEADER_LEN + 1u + 8u + FP_DIRECT_MIN <= FP_BUF_SIZE,
               "a buffered field must fit after the header");
_Static_assert(FP_SHAPE_MAX <= FP_BUF_SIZE, "a shape field must fit the buffer");

static fp_impl *fp_get(ccache_fp *fp) { return (fp_impl *)(void *)fp->opaque_; }

static const fp_impl *fp_cget(const ccache_fp *fp) {
  return (const fp_impl *)(const void *)fp->opaque_;
}


/* ---- buffer management ---- */

/* Hand the pending bytes to the XXH3 state, creating it on first use. */
static void fp_flush(fp_impl *b) {
  if (!b->spilled) {
    XXH3_128bits_reset(&b->state);
    b->spilled = true;
  }
  if (b->used) {
    CCACHE__FP_XXH_UPDATE(&b->state, b->buf, b->used);
    b->used = 0;
  }
}

/* Room for @p n more bytes (n <= FP_BUF_SIZE); returns where to write. */
static inline unsigned char *fp_reserve(fp_impl *b, uint32_t n) {
  if (b->used + n > FP_BUF_SIZE)
    fp_flush(b);
  return b->buf + b->used;
}

static inline void fp_commit(fp_impl *b, const unsigned char *end) {
  b->used = (uint32_t)(end - b->buf);
}

/* A live, unpoisoned builder, or NULL (the caller returns EINVAL). */
static fp_impl *fp_usable(ccache_fp *fp) {
  if (!fp)
    return NULL;
  fp_impl *b = fp_get(fp);
  if (b->live != FP_LIVE || b->poisoned)
    return NULL;
  return b;
}

/* A failed append: no key until ccache_fp_init(), so callers may check a
 * whole sequence of appends once, at ccache_fp_final(). */
static int fp_poison(fp_impl *b) {
  b->poisoned = true;
  return CCACHE_EINVAL;
}

/* ---- public API ---- */

CCACHE_API void ccache_fp_init(ccache_fp *fp) {
  if (!fp)
    return;
  fp_impl *b = fp_get(fp);
  /* The state is left as is: it is reset the first time it is needed. */
  b->live = FP_LIVE;
  b->used = 0;
  b->spilled = false;
  b->poisoned = false;
  unsigned char *p = b->buf;
  memcpy(p, CCACHE__FP_MAGIC, CCACHE__FP_MAGIC_LEN);
  p = put_u32(p + CCACHE__FP_MAGIC_LEN, CCACHE_FP_FORMAT_VERSION);
  fp_commit(b, p);
}

/* The three 9-byte fields share one writer; only the tag differs. */
static int fp_word(ccache_fp *fp, unsigned char tag, uint64_t v) {
  fp_impl *b = fp_usable(fp);
  if (!b)
    return CCACHE_EINVAL;
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

/* Tag + length + payload; small payloads are batched, large ones go
 * straight to XXH3 (after the pending bytes, so the stream order holds). */
static int fp_blob(ccache_fp *fp, unsigned char tag, const void *data, size_t len) {
  fp_impl *b = fp_usable(fp);
  if (!b)
    return CCACHE_EINVAL;
  if (!data && len)
    return fp_poison(b);
  if (len < FP_DIRECT_MIN) {
    unsigned char *p = fp_reserve(b, (uint32_t)(9 + len));
    *p++ = tag;
    p = put_u64(p, (uint64_t)len);
    if (len)
      memcpy(p, data, len);
    fp_commit(b, p + len);
    return CCACHE_OK;
  }
  unsigned char *p = fp_reserve(b, 9);
  *p++ = tag;
  fp_commit(b, put_u64(p, (uint64_t)len));
  fp_flush(b);
  CCACHE__FP_XXH_UPDATE(&b->state, data, len);
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
  if (!b)
    return CCACHE_EINVAL;
  if (rank > CCACHE_FP_MAX_RANK || (!dims && rank))
    return fp_poison(b);
  unsigned char *p = fp_reserve(b, 1u + 4u + 4u + 8u * rank);
  *p++ = FP_TAG_SHAPE;
  p = put_u32(p, (uint32_t)dtype);
  p = put_u32(p, rank);
  for (uint32_t i = 0; i < rank; i++)
    p = put_u64(p, (uint64_t)dims[i]);
  fp_commit(b, p);
  return CCACHE_OK;
}

static ccache_key key_of(XXH128_hash_t h) {
  ccache_key k = {h.low64, h.high64};
  return k;
}

CCACHE_API int ccache_fp_final(const ccache_fp *fp, ccache_key *out) {
  if (!fp || !out)
    return CCACHE_EINVAL;
  const fp_impl *b = fp_cget(fp);
  if (b->live != FP_LIVE || b->poisoned)
    return CCACHE_EINVAL;
  if (!b->spilled) {
    /* The whole stream is in the buffer: one one-shot hash, no state. */
    *out = key_of(ccache__fp_oneshot(b->buf, b->used));
    return CCACHE_OK;
  }
  /* Finish a copy so the builder itself is untouched and can go on. */
  XXH3_state_t tail;
  XXH3_copyState(&tail, &b->state);
  if (b->used)
    CCACHE__FP_XXH_UPDATE(&tail, b->buf, b->used);
  *out = key_of(XXH3_128bits_digest(&tail));
  return CCACHE_OK;
}
