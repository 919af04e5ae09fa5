/*
 * keyhash.h - the 32-bit bucket hash of a 128-bit key, shared by the closure
 * table, the program table and the benchmarks (bench/ includes this file so
 * its bare-uthash baseline hashes exactly as the library does).
 *
 * Keys are already XXH3-128 fingerprints, so uthash need not hash them again:
 * the 128 bits are folded to uthash's 32 by multiply-shift hashing (the high
 * half of a product with an odd constant), which still spreads keys that are
 * not fingerprints - sequential ones, or ones whose halves are equal (hence
 * a different multiplier for each half).  Two multiplies: every hit pays it.
 */
#ifndef CCACHE_KEYHASH_H
#define CCACHE_KEYHASH_H

#include "ccache.h"

static inline unsigned ccache__key_hash(ccache_key key) {
  uint64_t x = (key.lo ^ key.hi * 0xC2B2AE3D27D4EB4Full) * 0x9E3779B97F4A7C15ull;
  return (unsigned)(x >> 32);
}

#endif
