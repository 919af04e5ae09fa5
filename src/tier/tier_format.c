/*
 * tier_format.c - the entry format every tier stores, and its check.
 *
 * Backends store opaque blobs; the core frames the codec's bytes as
 *   magic (8) | u32 format | u32 header length | u64 key.lo | u64 key.hi |
 *   u64 XXH3-64(runtime tag) | u64 payload length | u64 created (ms, epoch) |
 *   payload | XXH3-128(header + payload) as u64 low, u64 high
 * little-endian, and checks all of it before the codec sees a byte.  The
 * checksum covers the tag hash, so a flipped tag byte is corruption, while an
 * intact entry of another runtime tag is told apart (a miss, not corrupt).
 */
#include <string.h>

#include <xxhash.h>

#include "tier/tier.h"

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

uint64_t ccache__tier_tag_hash(const char *tag) {
  if (!tag) tag = "";
  return XXH3_64bits(tag, strlen(tag));
}

void ccache__tier_ns(uint64_t tag_hash, char out[CCACHE__TIER_NS_MAX]) {
  static const char hex[] = "0123456789abcdef";
  char *p = out;
  *p++ = 'v';
  /* The format version is a small number; written without snprintf so no
   * locale or buffer question arises. */
  unsigned v = CCACHE_TIER_FORMAT;
  char digits[10];
  int n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *p++ = digits[--n];
  *p++ = '/';
  for (int i = 15; i >= 0; i--) *p++ = hex[(tag_hash >> (4 * i)) & 15];
  *p = '\0';
}

size_t ccache__tier_entry_len(size_t payload_len) {
  return CCACHE__TIER_HDR + payload_len + CCACHE__TIER_SUM;
}

static void checksum(const unsigned char *data, size_t len, unsigned char out[16]) {
  XXH128_hash_t h = XXH3_128bits(data, len);
  put_u64(out, h.low64);
  put_u64(out + 8, h.high64);
}

void ccache__tier_frame(unsigned char *dst, ccache_key key, uint64_t tag_hash, uint64_t created_ms,
                        const void *payload, size_t len) {
  memcpy(dst, CCACHE__TIER_MAGIC, 8);
  put_u32(dst + 8, CCACHE_TIER_FORMAT);
  put_u32(dst + 12, CCACHE__TIER_HDR);
  put_u64(dst + 16, key.lo);
  put_u64(dst + 24, key.hi);
  put_u64(dst + 32, tag_hash);
  put_u64(dst + 40, (uint64_t)len);
  put_u64(dst + 48, created_ms);
  if (len) memcpy(dst + CCACHE__TIER_HDR, payload, len);
  checksum(dst, CCACHE__TIER_HDR + len, dst + CCACHE__TIER_HDR + len);
}

ccache__entry_check ccache__tier_verify(const void *blob, size_t blob_len, ccache_key key,
                                        uint64_t tag_hash, const void **payload, size_t *len) {
  const unsigned char *b = blob;
  if (!b || blob_len < CCACHE__TIER_HDR + CCACHE__TIER_SUM) return CCACHE__ENTRY_CORRUPT;
  if (memcmp(b, CCACHE__TIER_MAGIC, 8) != 0) return CCACHE__ENTRY_CORRUPT;
  if (get_u32(b + 8) != CCACHE_TIER_FORMAT || get_u32(b + 12) != CCACHE__TIER_HDR)
    return CCACHE__ENTRY_CORRUPT;
  uint64_t plen = get_u64(b + 40);
  /* The stored length must account for every byte: a truncated or extended
   * blob fails here before the checksum is even computed. */
  if (plen != blob_len - CCACHE__TIER_HDR - CCACHE__TIER_SUM) return CCACHE__ENTRY_CORRUPT;
  unsigned char sum[16];
  checksum(b, CCACHE__TIER_HDR + (size_t)plen, sum);
  if (memcmp(sum, b + CCACHE__TIER_HDR + plen, 16) != 0) return CCACHE__ENTRY_CORRUPT;
  /* Intact.  An entry filed under the wrong key is corrupt (misplaced); one
   * of another runtime tag is only not ours. */
  if (get_u64(b + 16) != key.lo || get_u64(b + 24) != key.hi) return CCACHE__ENTRY_CORRUPT;
  if (get_u64(b + 32) != tag_hash) return CCACHE__ENTRY_FOREIGN;
  *payload = b + CCACHE__TIER_HDR;
  *len = (size_t)plen;
  return CCACHE__ENTRY_OK;
}
