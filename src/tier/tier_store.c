/*
 * tier_store.c - writing entries: the store after a compile (encode once,
 * frame once per namespace, put in every usable tier) and the fill of the
 * tiers above a hit.  Runs on the miss's owner, no cache lock held (tier.c
 * says when).
 *
 * With a signing key each tier's entry is signed for that tier's namespace
 * digest (tier_trust.h): tiers that share a digest share one framing.  A
 * hit is copied up only into tiers that accept its signature: a shared
 * tier of the same digest, or a private one (which accepts any digest of
 * its cache's tiers).  A reader (keys, no signing key) writes to no
 * shared tier.
 */
#include <errno.h>
#include <string.h>

#include "tier/tier.h"
#include "tier/tier_trust.h"

static void count_bytes(_Atomic uint64_t *counter, size_t n) {
  atomic_fetch_add_explicit(counter, (uint64_t)n, memory_order_relaxed);
}

/* An event that is not a failure (the hook is optional). */
static void note(struct ccache__tiers *ts, int kind, uint32_t i, ccache_key key, const char *op,
                 const char *reason) {
  if (ts->on_event) ccache__tier_event(ts, kind, i, key, op, CCACHE_OK, 0, reason);
}

/* Write a verified entry to tiers [0, upto): the tiers above a hit, or every
 * tier for a fresh compile (why: "fill" or "store").  ns: the namespace
 * digest it is signed for (NULL: unsigned), which a shared tier must have
 * (exact: every tier must, a store's one framing per namespace). */
void ccache__tier_fill(struct ccache__tiers *ts, ccache_key key, const void *blob, size_t len,
                       uint32_t upto, const char *why, const unsigned char *ns, bool exact) {
  for (uint32_t j = 0; j < upto; j++) {
    if (!ts->usable[j]) continue;
    ccache_tier *t = ts->t[j];
    bool private_ = t->ops.flags & CCACHE_TIER_PRIVATE;
    if (ts->reader && !private_) continue; /* a reader shares nothing */
    if (ns && memcmp(ts->ns[j], ns, sizeof ts->ns[j]) != 0 && (exact || !private_)) continue;
    int rc;
    errno = 0;
    CCACHE__IN_FRAME(ts, rc = t->ops.put(t->state, key, blob, len));
    if (rc == CCACHE_OK) {
      atomic_fetch_add(&ts->writes, 1);
      count_bytes(&ts->bytes_written, len);
      ccache__tier_ok(ts, j);
      note(ts, CCACHE_EVENT_TIER_WRITE, j, key, "put", why);
    } else {
      ccache__tier_fail(ts, j, key, "put", rc, errno, why);
    }
  }
}

/* Whether tier g is the first usable tier of its namespace digest. */
static bool first_of_ns(const struct ccache__tiers *ts, uint32_t g) {
  if (!ts->usable[g]) return false;
  for (uint32_t k = 0; k < g; k++)
    if (ts->usable[k] && memcmp(ts->ns[k], ts->ns[g], sizeof ts->ns[g]) == 0) return false;
  return true;
}

/* Encode the program just compiled and write it to every usable tier. */
void ccache__tier_store(struct ccache__tiers *ts, const ccache_strong_key *sk, void *native) {
  ccache_key key = sk->key;
  if (ts->reader) { /* a reader publishes nothing */
    atomic_fetch_add(&ts->unpublished, 1);
    note(ts, CCACHE_EVENT_TIER_REJECTED, ts->n, key, "put",
         "a reader (trusted keys, no signing key) does not publish");
    return;
  }
  const struct ccache_trust *signer = ts->trust; /* NULL: unsigned entries */
  void *bytes = NULL;
  size_t len = 0;
  int rc;
  CCACHE__IN_FRAME(ts, rc = ts->codec.encode(ts->codec.ctx, key, native, &bytes, &len));
  if (rc == CCACHE_CODEC_SKIP) {
    note(ts, CCACHE_EVENT_TIER_REJECTED, ts->n, key, "encode",
         "the codec answered CCACHE_CODEC_SKIP");
    return;
  }
  if (rc != 0) {
    ccache__tier_fail(ts, ts->n, key, "encode", rc, 0, "the codec could not encode the program");
    return;
  }
  unsigned char *blob = NULL;
  size_t blen = 0;
  if ((uint64_t)len <= CCACHE__TIER_MAX_PAYLOAD && (bytes || len == 0)) {
    blen = ccache__tier_entry_len_signed(len, ts->strong, signer != NULL);
    if ((uint64_t)blen > ts->max_entry) { /* no cache with this bound would read it */
      CCACHE__IN_FRAME(ts, ts->codec.free_bytes(ts->codec.ctx, bytes, len));
      atomic_fetch_add(&ts->oversize, 1);
      note(ts, CCACHE_EVENT_TIER_REJECTED, ts->n, key, "encode",
           "the entry is over tier_max_entry_bytes");
      return;
    }
    blob = ccache__malloc(&ts->mem, blen);
  }
  uint64_t now = ccache__realtime_ms();
  /* Signed: one framing per namespace, each signed for its own (unsigned:
   * one framing for all). */
  for (uint32_t g = 0; blob && g < ts->n && (g == 0 || signer); g++) {
    if (signer && !first_of_ns(ts, g)) continue;
    const unsigned char *ns = signer ? ts->ns[g] : NULL;
    ccache__tier_frame_signed(blob, sk, ts->strong, ts->tag_hash, now, bytes, len, signer, ns);
    ccache__tier_fill(ts, key, blob, blen, ts->n, "store", ns, true);
  }
  CCACHE__IN_FRAME(ts, ts->codec.free_bytes(ts->codec.ctx, bytes, len));
  if (!blob) { /* too large, NULL bytes, or no memory: not stored */
    ccache__tier_fail(ts, ts->n, key, "encode", blen ? CCACHE_ENOMEM : CCACHE_EINVAL, 0,
                      blen ? "out of memory framing the entry"
                           : "encoded bytes NULL, or longer than 2^40: not stored");
    return;
  }
  ccache__free(&ts->mem, blob);
}
