/*
 * tier_trust.c - signing and checking entries and lease tokens (the layouts
 * are in tier_trust.h).  Everything here runs on the thread that owns a
 * program miss (or on a renewal thread, for tokens), outside every lock:
 * libsodium's calls are thread-safe once sodium_init() ran, and the trust
 * copy is read-only after open.
 */
#include <string.h>
#include <time.h>

#include "base/crypto.h"
#include "base/detail.h"
#include "base/le.h"
#include "tier/tier.h" /* the entry layout */
#include "tier/tier_trust.h"

#ifdef CCACHE_HAVE_SODIUM
#include <sodium.h>
#endif

static const char ENTRY_DOMAIN[] = "closure-cache entry"; /* its NUL is signed too */
static const char LEASE_DOMAIN[] = "closure-cache lease";
static const char NS_DOMAIN[] = "closure-cache namespace";
/* "CCS2": a signature over the namespace digest (0.2); "CCSG" blocks (0.1:
 * the tag's XXH3 only, no tier namespace) are no longer accepted. */
#define SIG_MAGIC     "CCS2"
#define OLD_SIG_MAGIC "CCSG"
#define LEASE_MAGIC   "CCLT"
#define LEASE_VERSION 2u /* 2: the signature covers the namespace digest */
/* What a lease token's signature covers after its domain. */
#define LEASE_BODY    (CCACHE__LEASE_TOKEN - CCACHE__TRUST_SIGLEN)

int ccache__trust_copy(struct ccache_trust **out, const ccache__mem *mem,
                       const struct ccache_trust *src) {
  *out = NULL;
  if (!ccache__crypto_ready()) {
    ccache__detail(
        "ccache_config::trust: this build has no libsodium, so it cannot check "
        "signatures (install libsodium-dev and rebuild)");
    return CCACHE_ENOTSUP;
  }
  if (src->n == 0) {
    ccache__detail("ccache_config::trust: no signing key and no trusted key");
    return CCACHE_EINVAL;
  }
  struct ccache_trust *t = ccache__malloc(mem, sizeof *t);
  if (!t) return CCACHE_ENOMEM;
  memcpy(t, src, sizeof *t);
  *out = t;
  return CCACHE_OK;
}

void ccache__trust_release(struct ccache_trust *t, const ccache__mem *mem) {
  if (!t) return;
  volatile unsigned char *v = (volatile unsigned char *)t;
  for (size_t i = 0; i < sizeof *t; i++) v[i] = 0;
  ccache__free(mem, t);
}

static const ccache__trust_key *trusted(const struct ccache_trust *t, const unsigned char *id) {
  for (uint32_t i = 0; i < t->n; i++)
    if (memcmp(t->keys[i].id, id, CCACHE__TRUST_ID) == 0) return &t->keys[i];
  return NULL;
}

#ifdef CCACHE_HAVE_SODIUM
void ccache__trust_ns_digest(bool strong, const char *tag, const void *scope, size_t scope_len,
                             unsigned char out[CCACHE__NS_DIGEST]) {
  crypto_generichash_state st;
  unsigned char n[8];
  if (!tag) tag = "";
  crypto_generichash_init(&st, NULL, 0, CCACHE__NS_DIGEST);
  crypto_generichash_update(&st, (const unsigned char *)NS_DOMAIN, sizeof NS_DOMAIN);
  ccache__put_le32(n, CCACHE_TIER_FORMAT);
  n[4] = strong ? 1 : 0;
  crypto_generichash_update(&st, n, 5);
  /* Lengths first: no tag and scope can be cut differently to match. */
  ccache__put_le64(n, (uint64_t)strlen(tag));
  crypto_generichash_update(&st, n, 8);
  crypto_generichash_update(&st, (const unsigned char *)tag, strlen(tag));
  ccache__put_le64(n, (uint64_t)scope_len);
  crypto_generichash_update(&st, n, 8);
  if (scope_len) crypto_generichash_update(&st, scope, scope_len);
  crypto_generichash_final(&st, out, CCACHE__NS_DIGEST);
}

/* The message an entry's signature covers (at most 20 + 4 + 72 + 8 + 32 + 32). */
#define MSG_MAX \
  (sizeof ENTRY_DOMAIN + 4 + CCACHE__TIER_HDR_STRONG + CCACHE__TRUST_ID + CCACHE__NS_DIGEST + 32)

static size_t entry_message(unsigned char msg[MSG_MAX], const unsigned char *ns,
                            const unsigned char *hdr, size_t hdr_len, const unsigned char *id,
                            const void *payload, size_t len) {
  unsigned char *p = msg;
  memcpy(p, ENTRY_DOMAIN, sizeof ENTRY_DOMAIN);
  p += sizeof ENTRY_DOMAIN;
  ccache__put_le32(p, CCACHE_TIER_FORMAT);
  p += 4;
  memcpy(p, hdr, hdr_len);
  p += hdr_len;
  memcpy(p, id, CCACHE__TRUST_ID);
  p += CCACHE__TRUST_ID;
  memcpy(p, ns, CCACHE__NS_DIGEST);
  p += CCACHE__NS_DIGEST;
  crypto_generichash(p, 32, payload, len, NULL, 0);
  p += 32;
  return (size_t)(p - msg);
}

void ccache__trust_sign_entry(const struct ccache_trust *t, const unsigned char *ns,
                              const unsigned char *hdr, size_t hdr_len, const void *payload,
                              size_t len, unsigned char block[CCACHE__TIER_SIG]) {
  unsigned char msg[MSG_MAX];
  size_t mlen = entry_message(msg, ns, hdr, hdr_len, t->signer.id, payload, len);
  memcpy(block, SIG_MAGIC, 4);
  ccache__put_le32(block + 4, CCACHE__TIER_SIG);
  memcpy(block + 8, t->signer.id, CCACHE__TRUST_ID);
  crypto_sign_ed25519_detached(block + 16, NULL, msg, mlen, t->sk);
}

bool ccache__trust_entry_ok(const struct ccache_trust *t, const void *blob, size_t len, bool strong,
                            const unsigned char (*ns)[CCACHE__NS_DIGEST], uint32_t n_ns,
                            uint32_t *which, const char **why) {
  const unsigned char *b = blob;
  size_t hdr = strong ? CCACHE__TIER_HDR_STRONG : CCACHE__TIER_HDR;
  /* Intact already (the format check passed): the payload length is in
   * the header, and whatever lies between payload and trailer is either
   * nothing or one block. */
  uint64_t plen = ccache__get_le64(b + 40);
  if (len - hdr - CCACHE__TIER_SUM - plen != CCACHE__TIER_SIG) {
    *why = "unsigned entry";
    return false;
  }
  const unsigned char *blk = b + hdr + plen;
  if (memcmp(blk, OLD_SIG_MAGIC, 4) == 0) {
    *why = "signed in 0.1's form (no namespace): not accepted; a writer replaces it";
    return false;
  }
  if (memcmp(blk, SIG_MAGIC, 4) != 0 || ccache__get_le32(blk + 4) != CCACHE__TIER_SIG) {
    *why = "not a signature block";
    return false;
  }
  const ccache__trust_key *k = trusted(t, blk + 8);
  if (!k) {
    *why = "signed by a key not trusted";
    return false;
  }
  /* Rollback: the creation time is in the signed header, so an older
   * validly signed entry put back cannot pass for a newer one. */
  if (ccache__get_le64(b + 48) < t->not_before_ms) {
    *why = "signed before the trust object's not-before time";
    return false;
  }
  /* One signature, any of the namespaces given (a private tier takes the
   * cache's every tier's: what it holds was copied from them). */
  for (uint32_t i = 0; i < n_ns; i++) {
    unsigned char msg[MSG_MAX];
    size_t mlen = entry_message(msg, ns[i], b, hdr, k->id, b + hdr, (size_t)plen);
    if (crypto_sign_ed25519_verify_detached(blk + 16, msg, mlen, k->pk) == 0) {
      *which = i;
      return true;
    }
  }
  *why = "the signature does not verify (altered, or signed for another namespace)";
  return false;
}

/* What a lease token's signature covers: its domain, the namespace digest
 * (so a token copied under another tag's or prefix's lease is not one),
 * and the token's body. */
#define LEASE_MSG (sizeof LEASE_DOMAIN + CCACHE__NS_DIGEST + LEASE_BODY)
static void lease_message(unsigned char msg[LEASE_MSG], const unsigned char *ns,
                          const unsigned char *body) {
  memcpy(msg, LEASE_DOMAIN, sizeof LEASE_DOMAIN);
  memcpy(msg + sizeof LEASE_DOMAIN, ns, CCACHE__NS_DIGEST);
  memcpy(msg + sizeof LEASE_DOMAIN + CCACHE__NS_DIGEST, body, LEASE_BODY);
}

void ccache__trust_lease_token(const struct ccache_trust *t, ccache_key key,
                               const unsigned char *ns, uint64_t now_ms,
                               unsigned char out[CCACHE__LEASE_TOKEN]) {
  memcpy(out, LEASE_MAGIC, 4);
  ccache__put_le32(out + 4, LEASE_VERSION);
  ccache__put_le64(out + 8, key.lo);
  ccache__put_le64(out + 16, key.hi);
  memcpy(out + 24, t->signer.id, CCACHE__TRUST_ID);
  ccache__put_le64(out + 32, now_ms);
  randombytes_buf(out + 40, 16);
  unsigned char msg[LEASE_MSG];
  lease_message(msg, ns, out);
  crypto_sign_ed25519_detached(out + LEASE_BODY, NULL, msg, sizeof msg, t->sk);
}

bool ccache__trust_lease_ok(const struct ccache_trust *t, ccache_key key, const unsigned char *ns,
                            const void *value, size_t len, uint64_t now_ms, uint64_t lease_ms) {
  const unsigned char *v = value;
  if (len != CCACHE__LEASE_TOKEN || memcmp(v, LEASE_MAGIC, 4) != 0 ||
      ccache__get_le32(v + 4) != LEASE_VERSION)
    return false;
  if (ccache__get_le64(v + 8) != key.lo || ccache__get_le64(v + 16) != key.hi) return false;
  const ccache__trust_key *k = trusted(t, v + 24);
  if (!k) return false;
  uint64_t issued = ccache__get_le64(v + 32);
  /* A copied token stops counting lease_ms + skew after it was issued: a
   * squatter cannot replay a writer's token for longer than that. */
  if (issued > now_ms + CCACHE__LEASE_SKEW_MS) return false;
  if (now_ms > issued && now_ms - issued > lease_ms + CCACHE__LEASE_SKEW_MS) return false;
  unsigned char msg[LEASE_MSG];
  lease_message(msg, ns, v);
  return crypto_sign_ed25519_verify_detached(v + LEASE_BODY, msg, sizeof msg, k->pk) == 0;
}
#else
/* No libsodium: no trust object reaches a cache (ccache__trust_copy
 * refuses), so these are never called; they refuse anyway. */
void ccache__trust_ns_digest(bool strong, const char *tag, const void *scope, size_t scope_len,
                             unsigned char out[CCACHE__NS_DIGEST]) {
  (void)strong, (void)tag, (void)scope, (void)scope_len, (void)NS_DOMAIN;
  memset(out, 0, CCACHE__NS_DIGEST);
}

void ccache__trust_sign_entry(const struct ccache_trust *t, const unsigned char *ns,
                              const unsigned char *hdr, size_t hdr_len, const void *payload,
                              size_t len, unsigned char block[CCACHE__TIER_SIG]) {
  (void)t, (void)ns, (void)hdr, (void)hdr_len, (void)payload, (void)len;
  memset(block, 0, CCACHE__TIER_SIG);
}

bool ccache__trust_entry_ok(const struct ccache_trust *t, const void *blob, size_t len, bool strong,
                            const unsigned char (*ns)[CCACHE__NS_DIGEST], uint32_t n_ns,
                            uint32_t *which, const char **why) {
  (void)t, (void)blob, (void)len, (void)strong, (void)ns, (void)n_ns, (void)which, (void)trusted,
      (void)ENTRY_DOMAIN, (void)LEASE_DOMAIN;
  *why = "no libsodium in this build";
  return false;
}

void ccache__trust_lease_token(const struct ccache_trust *t, ccache_key key,
                               const unsigned char *ns, uint64_t now_ms,
                               unsigned char out[CCACHE__LEASE_TOKEN]) {
  (void)t, (void)key, (void)ns, (void)now_ms;
  memset(out, 0, CCACHE__LEASE_TOKEN);
}

bool ccache__trust_lease_ok(const struct ccache_trust *t, ccache_key key, const unsigned char *ns,
                            const void *value, size_t len, uint64_t now_ms, uint64_t lease_ms) {
  (void)t, (void)key, (void)ns, (void)value, (void)len, (void)now_ms, (void)lease_ms;
  return false;
}
#endif
