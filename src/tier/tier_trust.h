/*
 * tier_trust.h - signed entries and signed lease tokens (tier_trust.c), and
 * the trust object behind ccache/trust.h (trust_keys.c).  Not installed.
 *
 * A signed entry carries one signature block between its payload and its
 * XXH3-128 trailer (tier_format.c; the trailer covers the block, so a torn
 * block is corruption, not a rejection):
 *   "CCS2" | u32 block length (80) | key id (8) | Ed25519 signature (64)
 * The key id is the first 8 bytes of BLAKE2b-256 of the public key.  The
 * signed message is
 *   "closure-cache entry\0" | u32 format | the whole header | key id |
 *   namespace digest (32) | BLAKE2b-256(payload)
 * so the signature binds the program key (all 256 bits in a strong cache),
 * the namespace, the payload length and time, and the payload through a
 * cryptographic digest; never the XXH3 checksum.  The namespace digest is
 *   BLAKE2b-256("closure-cache namespace\0" | u32 format | u8 strong |
 *               u64 tag length | runtime tag | u64 scope length | scope)
 * where the scope is what the tier's ccache_tier_ops::scope hands over (the
 * Redis tier: "redis:" and its key prefix; none for the directory tier):
 * an entry moved to another prefix, runtime tag or key mode is rejected
 * there.  0.1's blocks ("CCSG", no namespace digest) are not accepted.
 *
 * A lease token (the value a writer's compile lease carries):
 *   "CCLT" | u32 version (2) | u64 key.lo | u64 key.hi | key id (8) |
 *   u64 issued (ms, epoch) | nonce (16) | Ed25519 signature (64)
 * signed over "closure-cache lease\0", the tier's namespace digest and the
 * 56 bytes before the signature: a token copied under another namespace's
 * lease is no trusted holder's there.
 */
#ifndef CCACHE_TIER_TRUST_H
#define CCACHE_TIER_TRUST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccache.h"
#include "base/mem.h"

#define CCACHE__TRUST_PK      32u
#define CCACHE__TRUST_SK      64u
#define CCACHE__TRUST_ID      8u
#define CCACHE__TRUST_SIGLEN  64u
/* The signature block of a signed entry. */
#define CCACHE__TIER_SIG      80u
/* A namespace digest's length (BLAKE2b-256). */
#define CCACHE__NS_DIGEST     32u
/* A lease token's length. */
#define CCACHE__LEASE_TOKEN   120u
/* The clock skew a lease token's issue time may have against a reader's
 * clock (either way), ms. */
#define CCACHE__LEASE_SKEW_MS 2000u

typedef struct ccache__trust_key {
  char name[CCACHE_TRUST_NAME_MAX + 1];
  unsigned char pk[CCACHE__TRUST_PK];
  unsigned char id[CCACHE__TRUST_ID];
} ccache__trust_key;

struct ccache_trust {
  bool has_signer;
  ccache__trust_key signer;
  unsigned char sk[CCACHE__TRUST_SK];
  uint32_t n; /* trusted keys, the signer's own included */
  ccache__trust_key keys[CCACHE_TRUST_MAX_KEYS + 1];
  uint64_t not_before_ms; /* entries created before this are rejected (0: none) */
};

/* ----------------------------------------------------------- trust_keys.c */
/* A key's id (BLAKE2b-256 of pk, first 8 bytes). */
void ccache__trust_key_id(const unsigned char pk[CCACHE__TRUST_PK],
                          unsigned char id[CCACHE__TRUST_ID]);

/* A copy of src for the default instance to extend (CLOSURE_CACHE_*):
 * with keep_signer false, without src's signing key (its public half stays
 * trusted).  CCACHE_OK or CCACHE_ENOMEM. */
int ccache__trust_clone(ccache_trust **out, const ccache_trust *src, bool keep_signer);

/* ----------------------------------------------------------- tier_trust.c */
/* A cache's own copy of cfg's trust object (with *mem): CCACHE_OK;
 * CCACHE_ENOTSUP (no libsodium), CCACHE_EINVAL (no key), CCACHE_ENOMEM;
 * each with a detail line. */
int ccache__trust_copy(struct ccache_trust **out, const ccache__mem *mem,
                       const struct ccache_trust *src);
/* Wipe and free a copy (NULL: nothing). */
void ccache__trust_release(struct ccache_trust *t, const ccache__mem *mem);
/* The namespace digest of a cache's entries on one tier (tag NULL: "";
 * scope: the tier's scope bytes).  Zeros without libsodium (no trust
 * object exists there). */
void ccache__trust_ns_digest(bool strong, const char *tag, const void *scope, size_t scope_len,
                             unsigned char out[CCACHE__NS_DIGEST]);
/* Write the signature block of an entry for namespace ns whose header
 * (hdr_len bytes) and payload are given (t has a signer). */
void ccache__trust_sign_entry(const struct ccache_trust *t, const unsigned char *ns,
                              const unsigned char *hdr, size_t hdr_len, const void *payload,
                              size_t len, unsigned char block[CCACHE__TIER_SIG]);
/* Whether an intact entry (ccache__tier_verify_mode said OK) carries a valid
 * signature by a key t trusts for one of the n_ns namespaces ns (*which set
 * to its index); false with *why (a static line) if not. */
bool ccache__trust_entry_ok(const struct ccache_trust *t, const void *blob, size_t len, bool strong,
                            const unsigned char (*ns)[CCACHE__NS_DIGEST], uint32_t n_ns,
                            uint32_t *which, const char **why);
/* A fresh lease token for key in namespace ns, issued now_ms (t has a
 * signer). */
void ccache__trust_lease_token(const struct ccache_trust *t, ccache_key key,
                               const unsigned char *ns, uint64_t now_ms,
                               unsigned char out[CCACHE__LEASE_TOKEN]);
/* Whether a lease value carries a token for key in namespace ns that a
 * trusted key signed, issued no more than lease_ms + CCACHE__LEASE_SKEW_MS
 * before now_ms (and not more than the skew after it). */
bool ccache__trust_lease_ok(const struct ccache_trust *t, ccache_key key, const unsigned char *ns,
                            const void *value, size_t len, uint64_t now_ms, uint64_t lease_ms);

#endif
