/*
 * fuzz_entry.c - libFuzzer target: the entry verifier of signed tier
 * entries (tier_format.c, tier_trust.c) and the lease-token check.
 *
 * The first byte picks the mode:
 *  0: the rest is a stored blob, checked as both layouts (fast, strong) and,
 *     where intact, for a trusted signature, and as a lease token: nothing
 *     may crash or read out of bounds (ASan), whatever the bytes;
 *  1: the rest is (u16 position, u8 mask, payload): a correctly signed entry
 *     of that payload must verify; then one byte at the position is XORed
 *     with the mask (made non-zero) and the checksum recomputed, as a
 *     forger would: an entry that is still intact must then be rejected by
 *     the signature check, or the target aborts.
 * The key pair comes from a fixed seed (fuzzing needs no secret).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>
#include <xxhash.h>

#include "base/crypto.h"
#include "tier/tier.h"
#include "tier/tier_trust.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ccache_trust trust;
static const ccache_strong_key KEY = {{0x1234567890abcdefull, 0x0fedcba987654321ull},
                                      {0x1111111111111111ull, 0x2222222222222222ull}};
static const uint64_t TAG = 0x5eed5eed5eed5eedull;

static void init_trust(void) {
  if (trust.n) return;
  if (!ccache__crypto_ready()) abort();
  unsigned char seed[crypto_sign_SEEDBYTES];
  memset(seed, 7, sizeof seed);
  crypto_sign_seed_keypair(trust.signer.pk, trust.sk, seed);
  ccache__trust_key_id(trust.signer.pk, trust.signer.id);
  snprintf(trust.signer.name, sizeof trust.signer.name, "fuzz");
  trust.has_signer = true;
  trust.keys[0] = trust.signer;
  trust.n = 1;
}

static void reseal(unsigned char *b, size_t len) {
  XXH128_hash_t h = XXH3_128bits(b, len - 16);
  for (int i = 0; i < 8; i++) {
    b[len - 16 + i] = (unsigned char)(h.low64 >> (8 * i));
    b[len - 8 + i] = (unsigned char)(h.high64 >> (8 * i));
  }
}

/* One namespace digest (zeros): what signatures bind here. */
static const unsigned char NS[CCACHE__NS_DIGEST];

static void check_blob(const uint8_t *data, size_t size) {
  for (int strong = 0; strong < 2; strong++) {
    const void *p = NULL;
    size_t n = 0;
    if (ccache__tier_verify_mode(data, size, &KEY, strong, TAG, &p, &n) == CCACHE__ENTRY_OK) {
      const char *why = NULL;
      uint32_t which = 0;
      (void)ccache__trust_entry_ok(&trust, data, size, strong, &NS, 1, &which, &why);
    }
  }
  (void)ccache__trust_lease_ok(&trust, KEY.key, NS, data, size, 1000000, 10000);
}

static void forge(const uint8_t *data, size_t size) {
  if (size < 3) return;
  size_t pos = (size_t)data[0] | (size_t)data[1] << 8;
  unsigned char mask = data[2] ? data[2] : 0x80;
  const uint8_t *payload = data + 3;
  size_t plen = size - 3;
  bool strong = pos & 1;
  size_t len = ccache__tier_entry_len_signed(plen, strong, true);
  unsigned char *b = malloc(len);
  if (!b) abort();
  ccache__tier_frame_signed(b, &KEY, strong, TAG, 1700000000000ull, payload, plen, &trust, NS);
  const void *p = NULL;
  size_t n = 0;
  const char *why = NULL;
  uint32_t which = 0;
  if (ccache__tier_verify_mode(b, len, &KEY, strong, TAG, &p, &n) != CCACHE__ENTRY_OK ||
      !ccache__trust_entry_ok(&trust, b, len, strong, &NS, 1, &which, &why)) {
    fprintf(stderr, "fuzz_entry: a correctly signed entry did not verify (%s)\n", why);
    abort();
  }
  b[pos % (len - 16)] ^= mask; /* any byte before the trailer */
  reseal(b, len);
  if (ccache__tier_verify_mode(b, len, &KEY, strong, TAG, &p, &n) == CCACHE__ENTRY_OK &&
      ccache__trust_entry_ok(&trust, b, len, strong, &NS, 1, &which, &why)) {
    fprintf(stderr, "fuzz_entry: a forged entry (byte %zu ^ 0x%02x) was accepted\n",
            pos % (len - 16), mask);
    abort();
  }
  free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  init_trust();
  if (size == 0) return 0;
  if (data[0] & 1)
    forge(data + 1, size - 1);
  else
    check_blob(data + 1, size - 1);
  return 0;
}
