/*
 * tier_format.c - the entry format every tier stores, and its check.
 *
 * Backends store opaque blobs; the core frames the codec's bytes as
 *   magic (8) | u32 format | u32 header length | u64 key.lo | u64 key.hi |
 *   u64 XXH3-64(runtime tag) | u64 payload length | u64 created (ms, epoch) |
 *   [u64 check.lo | u64 check.hi: a strong cache's entries, header length 72] |
 *   payload | XXH3-128(header + payload) as u64 low, u64 high
 * little-endian, and checks all of it before the codec sees a byte.  A
 * strong cache's entry holds its whole 256-bit key in the header, and the
 * check compares all of it: finding another program's place takes a
 * collision of the whole digest (2^128 work), not of the 128 bits a backend
 * files it under.  Its header length tells the two layouts apart, and the
 * namespace keeps them apart: "v1/<tag hash>" holds fast entries only,
 * "v1/strong-<tag hash>" strong ones only.  The
 * checksum covers the tag hash, so a flipped tag byte is corruption, while an
 * intact entry of another runtime tag is told apart (a miss, not corrupt).
 *
 * A signed entry (a cache with a signing key) has one signature block of
 * CCACHE__TIER_SIG bytes between its payload and its trailer, and the
 * trailer covers it: the bytes between payload and trailer are either none
 * or exactly one block, which is all that tells the two apart.  This file
 * checks only that the bytes are intact; whether the signature is one we
 * trust is tier_trust.c's question, asked only by a cache with keys.
 */
#include <string.h>

#include <xxhash.h>

#include "base/le.h"
#include "tier/tier.h"
#include "tier/tier_trust.h"

uint64_t ccache__tier_tag_hash(const char *tag) {
  if (!tag) tag = "";
  return XXH3_64bits(tag, strlen(tag));
}

void ccache__tier_ns_mode(uint64_t tag_hash, bool strong, char out[CCACHE__TIER_NS_MAX]) {
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
  if (strong) {
    memcpy(p, "strong-", 7);
    p += 7;
  }
  for (int i = 15; i >= 0; i--) *p++ = hex[(tag_hash >> (4 * i)) & 15];
  *p = '\0';
}

static uint32_t hdr_len(bool strong) { return strong ? CCACHE__TIER_HDR_STRONG : CCACHE__TIER_HDR; }

size_t ccache__tier_entry_len_mode(size_t payload_len, bool strong) {
  return hdr_len(strong) + payload_len + CCACHE__TIER_SUM;
}

static void checksum(const unsigned char *data, size_t len, unsigned char out[16]) {
  XXH128_hash_t h = XXH3_128bits(data, len);
  ccache__put_le64(out, h.low64);
  ccache__put_le64(out + 8, h.high64);
}

size_t ccache__tier_entry_len_signed(size_t payload_len, bool strong, bool sig) {
  return ccache__tier_entry_len_mode(payload_len, strong) + (sig ? CCACHE__TIER_SIG : 0);
}

void ccache__tier_frame_mode(unsigned char *dst, const ccache_strong_key *key, bool strong,
                             uint64_t tag_hash, uint64_t created_ms, const void *payload,
                             size_t len) {
  ccache__tier_frame_signed(dst, key, strong, tag_hash, created_ms, payload, len, NULL, NULL);
}

void ccache__tier_frame_signed(unsigned char *dst, const ccache_strong_key *key, bool strong,
                               uint64_t tag_hash, uint64_t created_ms, const void *payload,
                               size_t len, const struct ccache_trust *signer,
                               const unsigned char *ns) {
  uint32_t hdr = hdr_len(strong);
  memcpy(dst, CCACHE__TIER_MAGIC, 8);
  ccache__put_le32(dst + 8, CCACHE_TIER_FORMAT);
  ccache__put_le32(dst + 12, hdr);
  ccache__put_le64(dst + 16, key->key.lo);
  ccache__put_le64(dst + 24, key->key.hi);
  ccache__put_le64(dst + 32, tag_hash);
  ccache__put_le64(dst + 40, (uint64_t)len);
  ccache__put_le64(dst + 48, created_ms);
  if (strong) {
    ccache__put_le64(dst + 56, key->check.lo);
    ccache__put_le64(dst + 64, key->check.hi);
  }
  if (len) memcpy(dst + hdr, payload, len);
  size_t sig = 0;
  if (signer) {
    ccache__trust_sign_entry(signer, ns, dst, hdr, dst + hdr, len, dst + hdr + len);
    sig = CCACHE__TIER_SIG;
  }
  checksum(dst, hdr + len + sig, dst + hdr + len + sig);
}

ccache__entry_check ccache__tier_verify_mode(const void *blob, size_t blob_len,
                                             const ccache_strong_key *key, bool strong,
                                             uint64_t tag_hash, const void **payload, size_t *len) {
  const unsigned char *b = blob;
  uint32_t hdr = hdr_len(strong);
  if (!b || blob_len < hdr + CCACHE__TIER_SUM) return CCACHE__ENTRY_CORRUPT;
  if (memcmp(b, CCACHE__TIER_MAGIC, 8) != 0) return CCACHE__ENTRY_CORRUPT;
  /* The other mode's layout in our namespace is not an entry we could have
   * written: corrupt, like any other bytes that are not ours. */
  if (ccache__get_le32(b + 8) != CCACHE_TIER_FORMAT || ccache__get_le32(b + 12) != hdr)
    return CCACHE__ENTRY_CORRUPT;
  uint64_t plen = ccache__get_le64(b + 40);
  /* The stored length must account for every byte (the payload, and a
   * signature block or none): a truncated or extended blob fails here
   * before the checksum is even computed. */
  size_t body = blob_len - hdr - CCACHE__TIER_SUM; /* payload and block */
  if (plen != body && (plen > body || body - plen != CCACHE__TIER_SIG))
    return CCACHE__ENTRY_CORRUPT;
  unsigned char sum[16];
  checksum(b, hdr + body, sum);
  if (memcmp(sum, b + hdr + body, 16) != 0) return CCACHE__ENTRY_CORRUPT;
  /* Intact.  An entry filed under the wrong key is corrupt (misplaced); one
   * of another runtime tag is only not ours.  A strong entry's key is all
   * 256 bits. */
  if (ccache__get_le64(b + 16) != key->key.lo || ccache__get_le64(b + 24) != key->key.hi)
    return CCACHE__ENTRY_CORRUPT;
  if (strong &&
      (ccache__get_le64(b + 56) != key->check.lo || ccache__get_le64(b + 64) != key->check.hi))
    return CCACHE__ENTRY_CORRUPT;
  if (ccache__get_le64(b + 32) != tag_hash) return CCACHE__ENTRY_FOREIGN;
  *payload = b + hdr;
  *len = (size_t)plen;
  return CCACHE__ENTRY_OK;
}

/* ---- the fast cache's forms ---- */

void ccache__tier_ns(uint64_t tag_hash, char out[CCACHE__TIER_NS_MAX]) {
  ccache__tier_ns_mode(tag_hash, false, out);
}

size_t ccache__tier_entry_len(size_t payload_len) {
  return ccache__tier_entry_len_mode(payload_len, false);
}

void ccache__tier_frame(unsigned char *dst, ccache_key key, uint64_t tag_hash, uint64_t created_ms,
                        const void *payload, size_t len) {
  ccache_strong_key k = {key, {0, 0}};
  ccache__tier_frame_mode(dst, &k, false, tag_hash, created_ms, payload, len);
}

ccache__entry_check ccache__tier_verify(const void *blob, size_t blob_len, ccache_key key,
                                        uint64_t tag_hash, const void **payload, size_t *len) {
  ccache_strong_key k = {key, {0, 0}};
  return ccache__tier_verify_mode(blob, blob_len, &k, false, tag_hash, payload, len);
}
