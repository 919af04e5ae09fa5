/*
 * fp_strong.c - BLAKE2b-256 through libsodium for the strong key mode (see
 * fp_strong.h).  Why BLAKE2b and not SHA-256: on the machines we measured
 * (bench_fingerprint, bench/RESULTS.md) libsodium's BLAKE2b is several times
 * faster than its SHA-256 both per byte (it has SIMD code; libsodium's
 * SHA-256 is portable C without the SHA extensions) and per small input
 * (one 128-byte block covers a typical graph node), and it offers the
 * same 128-bit collision resistance at 256 bits of output.
 */
#include "fp/fp_strong.h"

#include <string.h>

#include "base/crypto.h"

#ifdef CCACHE_HAVE_SODIUM
#include <sodium.h>

_Static_assert(sizeof(crypto_generichash_state) <= CCACHE__SHASH_STATE_LEN,
               "the BLAKE2b state must fit the space kept for it");
_Static_assert(_Alignof(crypto_generichash_state) <= CCACHE__SHASH_STATE_ALIGN,
               "the BLAKE2b state's alignment");

#define SHASH_BYTES 32u

static void to_key(const unsigned char d[SHASH_BYTES], ccache_strong_key *out) {
  uint64_t w[4];
  for (int i = 0; i < 4; i++) {
    uint64_t v = 0;
    for (int b = 7; b >= 0; b--) v = v << 8 | d[8 * i + b];
    w[i] = v;
  }
  out->key.lo = w[0];
  out->key.hi = w[1];
  out->check.lo = w[2];
  out->check.hi = w[3];
}

bool ccache__shash_ready(void) { return ccache__crypto_ready(); }

void ccache__shash_init(void *state) {
  crypto_generichash_init((crypto_generichash_state *)state, NULL, 0, SHASH_BYTES);
}

void ccache__shash_update(void *state, const void *data, size_t len) {
  crypto_generichash_update((crypto_generichash_state *)state, (const unsigned char *)data,
                            (unsigned long long)len);
}

void ccache__shash_final(const void *state, ccache_strong_key *out) {
  crypto_generichash_state copy;
  memcpy(&copy, state, sizeof copy);
  unsigned char d[SHASH_BYTES];
  crypto_generichash_final(&copy, d, SHASH_BYTES);
  to_key(d, out);
}

void ccache__shash(const void *data, size_t len, ccache_strong_key *out) {
  unsigned char d[SHASH_BYTES];
  crypto_generichash(d, SHASH_BYTES, (const unsigned char *)data, (unsigned long long)len, NULL, 0);
  to_key(d, out);
}

#else /* no libsodium: never reached past ccache__shash_ready() */

bool ccache__shash_ready(void) { return false; }
void ccache__shash_init(void *state) { memset(state, 0, CCACHE__SHASH_STATE_LEN); }
void ccache__shash_update(void *state, const void *data, size_t len) {
  (void)state;
  (void)data;
  (void)len;
}
void ccache__shash_final(const void *state, ccache_strong_key *out) {
  (void)state;
  memset(out, 0, sizeof *out);
}
void ccache__shash(const void *data, size_t len, ccache_strong_key *out) {
  (void)data;
  (void)len;
  memset(out, 0, sizeof *out);
}
#endif
