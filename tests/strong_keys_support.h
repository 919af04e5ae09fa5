/*
 * strong_keys_support.h - helpers shared by the strong-key tests
 * (test_strong_keys.c, test_strong_keys_fingerprint.c): the colliding pair
 * of issue 22 (two 512-byte constants whose graphs share a fast key; see
 * test_strong_keys.c for the construction), the graph y = x + W around a
 * constant W, its fast and strong keys, and key comparison.
 */
#ifndef CCACHE_TEST_STRONG_KEYS_SUPPORT_H
#define CCACHE_TEST_STRONG_KEYS_SUPPORT_H

#include <stdbool.h>

#include "support.h"

#define CONST_LEN 512u

/* Where a constant's bytes start in ccache_fp_graph()'s node stream for
 * const_node() (strong_keys_support.c; fp.h): node tag 1, op id tag + u64 9,
 * u64 attrs_len 8, u32 n_outputs 4, one rank-1 output 4 + 4 + 8, u32
 * n_operands 4, flags 1, u64 constant_len 8. */
#define NODE_PREFIX    (1u + 9u + 8u + 4u + 16u + 4u + 1u + 8u)
/* ... and a bytes field's in the builder's stream: "ccache-fp", u32
 * version, tag, u64 length. */
#define BUILDER_PREFIX (9u + 4u + 1u + 8u)

static inline uint64_t le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static inline void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/*
 * Fill buf (the payload whose first byte is at stream offset `prefix`) with
 * a fixed pattern, then plant two words of lane `lane` in stripes s1 and s2
 * of the first block, each with the low half of its secret word and high
 * halves 0x1000 + delta and 0x2000 - delta.  Every delta gives the same
 * XXH3 accumulators.  The stripes must be whole stripes of the stream and
 * clear of its last 64 bytes (hashed again with another part of the
 * secret).
 */
void plant(unsigned char *buf, size_t len, size_t prefix, unsigned lane, unsigned s1, unsigned s2,
           uint32_t delta);

/* y = x + W with W the constant; the three nodes into nodes[]. */
void graph_of(const unsigned char *w, ccache_fp_node nodes[3]);
/* The graph's one output, y. */
extern const ccache_fp_ref graph_out[1];

ccache_key fast_graph(const unsigned char *w);
ccache_strong_key strong_graph(const unsigned char *w);

/* The pair, filled by make_pair(). */
extern unsigned char w_a[CONST_LEN], w_b[CONST_LEN];

/* Lane 2, stripes 1 and 3 of the node stream (offsets 80 and 208 of 563
 * bytes: first block, clear of the last stripe). */
void make_pair(void);

/* Tests that need the strong fingerprints skip in a build without
 * libsodium (strong_mode_needs_libsodium checks the refusal there). */
void need_strong_fp(void);

static inline bool key_eq(ccache_key a, ccache_key b) { return a.lo == b.lo && a.hi == b.hi; }

static inline bool skey_eq(const ccache_strong_key *a, const ccache_strong_key *b) {
  return key_eq(a->key, b->key) && key_eq(a->check, b->check);
}

#endif
