/*
 * le.h - little-endian integers in byte buffers, the byte order of every
 * stored tier entry and lease token (tier/tier_format.c, tier/tier_trust.c):
 * written and read byte by byte, so the layout does not depend on the
 * host's order or alignment.  Not installed.
 */
#ifndef CCACHE_BASE_LE_H
#define CCACHE_BASE_LE_H

#include <stdint.h>

/* Write v at p[0..3], least significant byte first. */
static inline void ccache__put_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Write v at p[0..7], least significant byte first. */
static inline void ccache__put_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The u32 at p[0..3], least significant byte first. */
static inline uint32_t ccache__get_le32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* The u64 at p[0..7], least significant byte first. */
static inline uint64_t ccache__get_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

#endif /* CCACHE_BASE_LE_H */
