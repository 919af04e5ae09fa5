/*
 * fp_strong.h - the strong key mode's hash, BLAKE2b-256 (libsodium's
 * crypto_generichash with a 32-byte output, no key), behind calls that show
 * no libsodium type: the builder (fingerprint.c) keeps the state in its own
 * opaque bytes, the graph helper (fp_graph_strong.c) on its stack.
 *
 * Digest bytes map to a ccache_strong_key little-endian: key.lo = bytes
 * 0..7, key.hi = 8..15, check.lo = 16..23, check.hi = 24..31.
 *
 * In a build without libsodium every call here is still defined;
 * ccache__shash_ready() is false and callers return CCACHE_ENOTSUP before
 * any other is reached.
 */
#ifndef CCACHE_FP_STRONG_H
#define CCACHE_FP_STRONG_H

#include <stdbool.h>
#include <stddef.h>

#include "ccache.h"

/* Bytes and alignment of a streaming state (libsodium's is 384, aligned
 * 64; fp_strong.c checks both at compile time). */
#define CCACHE__SHASH_STATE_LEN   384u
#define CCACHE__SHASH_STATE_ALIGN 64u

/* Whether the strong mode works in this build (libsodium present and
 * initialised).  Thread-safe. */
bool ccache__shash_ready(void);
/* Start a stream in @p state (CCACHE__SHASH_STATE_LEN bytes, aligned). */
void ccache__shash_init(void *state);
void ccache__shash_update(void *state, const void *data, size_t len);
/* The digest of everything fed to @p state, which is left as it was (a
 * copy is finished), so a stream may go on after it. */
void ccache__shash_final(const void *state, ccache_strong_key *out);
/* One-shot digest of @p len bytes. */
void ccache__shash(const void *data, size_t len, ccache_strong_key *out);

#endif
