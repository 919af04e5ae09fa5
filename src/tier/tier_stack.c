/*
 * tier_stack.c - the tier stack behind the program table.
 *
 * Only the single-flight owner of a program miss comes here (flight.c), with
 * no cache lock held, so every tier op and codec call below runs outside the
 * cache's locks, and concurrent misses on one key in this process ask the
 * tiers once.  The order of work for one miss, tier by tier top-down:
 *   lookup:  tier i, with the locks of tiers 0..i-1 held (so a machine's
 *            processes sharing a directory tier above Redis wait on its
 *            lock, and only the holder reads Redis); a verified, decoded hit
 *            is written to tiers 0..i-1 (fill above) and ends the miss;
 *   lock:    then tier i's lock; while another process holds it (EBUSY),
 *            back off poll_ms..poll_max_ms and ask that tier again after
 *            each attempt, up to wait_ms (then the tiers below are looked
 *            up, not locked); after taking it, ask the tier once more;
 *   compile: the user's callback, tier locks held, cache locks not;
 *   store:   encode once, frame once per namespace, put in every tier
 *            (tier_store.c), if the compile
 *            took long enough and the codec did not answer SKIP;
 *   unlock:  reverse tier order.
 * A failed op or codec call counts tier_errors and the tier is skipped for
 * this step: nothing here can fail the fetch except the compile itself.
 *
 * Leased locks are kept alive by tier_renew.c; the tier objects, their
 * checks, open and close are tier_open.c's.  Nothing here knows the cache:
 * the compile is the core's callback, and its time goes back to the core.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tier/tier.h"
#include "tier/tier_trust.h"

/* What a tier lookup found. */
enum { T_MISS = 0, T_HIT = 1 };

/* ------------------------------------------------------------ lookups */

static void count_bytes(_Atomic uint64_t *counter, size_t n) {
  atomic_fetch_add_explicit(counter, (uint64_t)n, memory_order_relaxed);
}

/* An event that is not a failure (the hook is optional). */
static void note(struct ccache__tiers *ts, int kind, uint32_t i, ccache_key key, const char *op,
                 const char *reason) {
  if (ts->on_event) ccache__tier_event(ts, kind, i, key, op, CCACHE_OK, 0, reason);
}

/* Remove tier i's entry for key that failed a check: only if it is still
 * the blob read (remove_if), or by key where the backend has no remove_if.
 * Every path that removes a bad entry comes here. */
static void remove_bad(struct ccache__tiers *ts, uint32_t i, ccache_key key, const void *blob,
                       size_t len) {
  ccache_tier *t = ts->t[i];
  int rc = CCACHE_OK;
  errno = 0;
  if (t->ops.remove_if)
    CCACHE__IN_FRAME(ts, rc = t->ops.remove_if(t->state, key, blob, len));
  else if (t->ops.remove)
    CCACHE__IN_FRAME(ts, rc = t->ops.remove(t->state, key));
  if (rc < 0) ccache__tier_fail(ts, i, key, "remove", rc, errno, NULL);
}

/* An entry over the cache's bound: a miss, counted, never read further. */
static void oversize(struct ccache__tiers *ts, uint32_t i, ccache_key key, const char *op) {
  atomic_fetch_add(&ts->oversize, 1);
  note(ts, CCACHE_EVENT_TIER_REJECTED, i, key, op, "the entry is over tier_max_entry_bytes");
}

/* Tier i's get under the cache's entry bound, the one place it is checked
 * on reads: the library's backends refuse an entry over it before
 * allocating it (get_bounded); a custom backend's blob is measured here,
 * before anything verifies or decodes it.  Returns get()'s status, or
 * CCACHE__TIER_OVERSIZE (nothing left to free). */
static int bounded_get(struct ccache__tiers *ts, uint32_t i, ccache_key key, bool poll, void **blob,
                       size_t *len) {
  ccache_tier *t = ts->t[i];
  int rc;
  int (*get)(void *, ccache_key, uint64_t, void **, size_t *) =
      poll && t->get_poll ? t->get_poll : t->get_bounded;
  if (get) {
    CCACHE__IN_FRAME(ts, rc = get(t->state, key, ts->max_entry, blob, len));
    return rc;
  }
  CCACHE__IN_FRAME(ts, rc = t->ops.get(t->state, key, blob, len));
  if (rc == CCACHE_OK && (uint64_t)*len > ts->max_entry) {
    CCACHE__IN_FRAME(ts, t->ops.free_blob(t->state, *blob, *len));
    return CCACHE__TIER_OVERSIZE;
  }
  return rc;
}

/* With keys: whether tier i's intact entry is signed by a trusted key for
 * its namespace (a private tier: any of the cache's, *ns set to it); if
 * not it is counted in tier_rejected, and left where it is (trust is local
 * configuration: another process may trust it). */
static bool trusted(struct ccache__tiers *ts, uint32_t i, ccache_key key, const void *blob,
                    size_t len, const unsigned char **ns) {
  const char *why = NULL;
  bool any = ts->t[i]->ops.flags & CCACHE_TIER_PRIVATE;
  uint32_t at = any ? 0 : i, n = any ? ts->n : 1;
  if (ccache__trust_entry_ok(ts->trust, blob, len, ts->strong, &ts->ns[at], n, &at, &why)) {
    *ns = ts->ns[any ? at : i];
    return true;
  }
  atomic_fetch_add(&ts->rejected, 1);
  note(ts, CCACHE_EVENT_TIER_REJECTED, i, key, "get", why);
  return false;
}

/* Ask tier i for key: T_HIT with a decoded native program (and the tiers
 * above filled), or T_MISS (absent, failed, oversize, corrupt, foreign or
 * undecodable; each counted where it applies).  poll: a waiting process's
 * poll (ccache_tier::get_poll). */
static int load_as(struct ccache__tiers *ts, uint32_t i, const ccache_strong_key *sk, bool poll,
                   void **native, uint64_t *cost) {
  ccache_key key = sk->key; /* what backends and codecs see */
  ccache_tier *t = ts->t[i];
  void *blob = NULL;
  size_t len = 0;
  int rc;
  errno = 0;
  rc = bounded_get(ts, i, key, poll, &blob, &len);
  if (rc == CCACHE__TIER_OVERSIZE) {
    ccache__tier_ok(ts, i);
    oversize(ts, i, key, "get");
    return T_MISS;
  }
  if (rc == CCACHE_MISS) {
    ccache__tier_ok(ts, i);
    note(ts, CCACHE_EVENT_TIER_MISS, i, key, "get", NULL);
    return T_MISS;
  }
  if (rc != CCACHE_OK) {
    ccache__tier_fail(ts, i, key, "get", rc, errno, NULL);
    return T_MISS;
  }
  ccache__tier_ok(ts, i);
  count_bytes(&ts->bytes_read, len);
  const void *payload = NULL;
  const unsigned char *signed_for = NULL; /* the namespace digest it is signed for */
  size_t plen = 0;
  int found = T_MISS;
  switch (ccache__tier_verify_mode(blob, len, sk, ts->strong, ts->tag_hash, &payload, &plen)) {
    case CCACHE__ENTRY_CORRUPT:
      atomic_fetch_add(&ts->corrupt, 1);
      note(ts, CCACHE_EVENT_TIER_CORRUPT, i, key, "get",
           "the entry failed verification (torn, truncated or altered): removed");
      remove_bad(ts, i, key, blob, len);
      break;
    case CCACHE__ENTRY_FOREIGN: /* another runtime's: never loaded, not corrupt */
      note(ts, CCACHE_EVENT_TIER_REJECTED, i, key, "get", "foreign runtime tag");
      break;
    case CCACHE__ENTRY_OK: {
      /* With keys, an intact entry must also be signed by one: never
       * decoded, never copied upward, never removed otherwise. */
      if (ts->trust && !trusted(ts, i, key, blob, len, &signed_for)) break;
      void *nat = NULL;
      uint64_t cst = 0;
      CCACHE__IN_FRAME(ts, rc = ts->codec.decode(ts->codec.ctx, key, payload, plen, &nat, &cst));
      if (rc == CCACHE_CODEC_CORRUPT) { /* bad bytes: removed, as a failed check */
        atomic_fetch_add(&ts->corrupt, 1);
        note(ts, CCACHE_EVENT_TIER_CORRUPT, i, key, "decode",
             "the codec found the entry's bytes bad (CCACHE_CODEC_CORRUPT): removed");
        remove_bad(ts, i, key, blob, len);
        break;
      }
      if (rc != 0) { /* a failure of this process: the entry stays */
        ccache__tier_fail(ts, i, key, "decode", rc, 0, "the codec could not decode the entry");
        break;
      }
      *native = nat;
      *cost = cst;
      note(ts, CCACHE_EVENT_TIER_HIT, i, key, "get", NULL);
      /* Verified and decoded: only now may a writer's backend copy it (a
       * reader's, never), or a backend learn the entry's size from it. */
      if (t->accepted) CCACHE__IN_FRAME(ts, t->accepted(t->state, key, blob, len, !ts->reader));
      ccache__tier_fill(ts, key, blob, len, i, "fill", signed_for, false);
      found = T_HIT;
      break;
    }
  }
  CCACHE__IN_FRAME(ts, t->ops.free_blob(t->state, blob, len));
  return found;
}

/* A lookup: on the Redis tier, every live server until a hit, so a copy
 * written while the key's first server was down is found. */
static int load(struct ccache__tiers *ts, uint32_t i, const ccache_strong_key *sk, void **native,
                uint64_t *cost) {
  return load_as(ts, i, sk, false, native, cost);
}

/* A poll while another process holds tier i's lock: only where the holder
 * will publish (one server, not every live one, on the Redis tier). */
static int poll_load(struct ccache__tiers *ts, uint32_t i, const ccache_strong_key *sk,
                     void **native, uint64_t *cost) {
  return load_as(ts, i, sk, true, native, cost);
}

/* ------------------------------------------------------------ locking */

/* The locks one miss holds, by tier index. */
typedef struct held_locks {
  bool held[CCACHE_MAX_TIERS];
  void *lock[CCACHE_MAX_TIERS];
  ccache__lease_rec lease[CCACHE_MAX_TIERS];
} held_locks;

static void sleep_ms(uint64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void record_wait(struct ccache__tiers *ts, uint64_t waited_ns) {
  uint64_t ms = waited_ns / 1000000u;
  atomic_fetch_add(&ts->lock_waits, 1);
  uint64_t cur = atomic_load(&ts->wait_ms_max);
  while (ms > cur && !atomic_compare_exchange_weak(&ts->wait_ms_max, &cur, ms)) {
  }
}

/* The outcome of taking one tier's lock. */
enum { L_DONE, L_HIT, L_TIMEOUT };

/* How often a lease found gone is asked for again before it counts as
 * not worth waiting for (a backend whose peek never sees its lock). */
#define LEASE_GONE_RETRIES 3

/* Who holds tier i's lease on key, as a cache with keys sees it. */
enum { LEASE_NONE, LEASE_SIGNER, LEASE_OTHER };

/* With keys: LEASE_SIGNER for a trusted signer's lease (a valid, recent
 * token); LEASE_NONE when no lease is there; LEASE_OTHER for an unsigned
 * or foreign one, or a peek that failed.  A squatter's lease is never
 * waited for. */
static int lease_holder(struct ccache__tiers *ts, uint32_t i, ccache_key key) {
  ccache_tier *t = ts->t[i];
  unsigned char v[CCACHE__LEASE_TOKEN];
  size_t vl = 0;
  int rc;
  errno = 0;
  CCACHE__IN_FRAME(ts, rc = t->ops.lease_peek(t->state, key, v, sizeof v, &vl));
  if (rc < 0) {
    ccache__tier_fail(ts, i, key, "lease", rc, errno, NULL);
    return LEASE_OTHER;
  }
  ccache__tier_ok(ts, i);
  if (rc != CCACHE_OK) return LEASE_NONE;
  bool ok = vl == sizeof v && ccache__trust_lease_ok(ts->trust, key, ts->ns[i], v, vl,
                                                     ccache__realtime_ms(), t->ops.lease_ms);
  if (!ok)
    note(ts, CCACHE_EVENT_TIER_REJECTED, i, key, "lease",
         "a lease not signed by a trusted key: not waited for");
  return ok ? LEASE_SIGNER : LEASE_OTHER;
}

/* Try tier i's lock once: with a signing key and a backend that shows
 * lease values, the lease carries a fresh signed token. */
static int try_lock(struct ccache__tiers *ts, uint32_t i, ccache_key key, void **lk) {
  ccache_tier *t = ts->t[i];
  int rc;
  if (ts->trust && t->ops.lock_value) {
    unsigned char tok[CCACHE__LEASE_TOKEN];
    ccache__trust_lease_token(ts->trust, key, ts->ns[i], ccache__realtime_ms(), tok);
    CCACHE__IN_FRAME(ts, rc = t->ops.lock_value(t->state, key, tok, sizeof tok, lk));
  } else {
    CCACHE__IN_FRAME(ts, rc = t->ops.lock(t->state, key, lk));
  }
  return rc;
}

/* Take tier i's lock (or give up on it), polling its entry while another
 * process holds the lock.  *waited_ns grows by the time spent waiting. */
static int lock_one(struct ccache__tiers *ts, uint32_t i, const ccache_strong_key *sk,
                    held_locks *h, void **native, uint64_t *cost, uint64_t *waited_ns) {
  ccache_key key = sk->key;
  ccache_tier *t = ts->t[i];
  uint64_t start = 0, delay = t->ops.poll_ms, wait_ms = t->ops.wait_ms;
  int gone = 0; /* leases found gone between a refused lock and the peek */
  for (;;) {
    void *lk = NULL;
    int rc;
    errno = 0;
    rc = try_lock(ts, i, key, &lk);
    if (rc == CCACHE_OK) {
      ccache__tier_ok(ts, i);
      h->held[i] = true;
      h->lock[i] = lk;
      atomic_fetch_add_explicit(&ts->per[i].leases_held, 1, memory_order_relaxed);
      if (t->ops.lease_ms) ccache__tier_lease_add(ts, &h->lease[i], i, lk, key);
      break;
    }
    if (rc != CCACHE_EBUSY) { /* a broken lock: go on without it */
      ccache__tier_fail(ts, i, key, "lock", rc, errno, "compiling without this tier's lock");
      break;
    }
    ccache__tier_ok(ts, i);
    atomic_fetch_add_explicit(&ts->per[i].lock_waits, 1, memory_order_relaxed);
    uint64_t now = ccache__mono_ns();
    if (!start) {
      start = now;
      wait_ms = ccache__tier_wait_bound(ts, i, key); /* a keyless cache: a squatter's lease? */
    }
    /* With keys, only a trusted signer's lease is worth waiting for. */
    int who = ts->trust && t->ops.lease_peek ? lease_holder(ts, i, key) : LEASE_SIGNER;
    if (who == LEASE_NONE && gone++ < LEASE_GONE_RETRIES) {
      /* Its holder let go after refusing us, most likely having just
       * published: look, then ask for the lock again. */
      if (poll_load(ts, i, sk, native, cost) == T_HIT) {
        *waited_ns += ccache__mono_ns() - start;
        return L_HIT;
      }
      continue;
    }
    if (who != LEASE_SIGNER) {
      *waited_ns += now - start;
      return L_TIMEOUT;
    }
    uint64_t elapsed_ms = (now - start) / 1000000u;
    if (elapsed_ms >= wait_ms) {
      *waited_ns += now - start;
      return L_TIMEOUT;
    }
    uint64_t left = wait_ms - elapsed_ms;
    sleep_ms(delay < left ? delay : left);
    delay = delay * 2 > t->ops.poll_max_ms ? t->ops.poll_max_ms : delay * 2;
    /* The holder may have published while we slept. */
    if (poll_load(ts, i, sk, native, cost) == T_HIT) {
      *waited_ns += ccache__mono_ns() - start;
      return L_HIT;
    }
  }
  if (start) *waited_ns += ccache__mono_ns() - start;
  /* Got the lock (or gave up on a broken one): the holder before us may
   * have published just before letting go. */
  return load(ts, i, sk, native, cost) == T_HIT ? L_HIT : L_DONE;
}

/* A reader's stand-in for lock_all: it takes no lease, and waits (polling
 * the entry, as lock_one does) only while a trusted signer holds the lease
 * of a tier that shows lease values, up to that tier's wait_ms. */
static int reader_wait(struct ccache__tiers *ts, const ccache_strong_key *sk, void **native,
                       uint64_t *cost) {
  uint64_t waited_ns = 0;
  bool waited = false;
  int found = T_MISS;
  for (uint32_t i = 0; i < ts->n && found == T_MISS; i++) {
    ccache_tier *t = ts->t[i];
    if (!ts->usable[i] || !t->ops.lock || !t->ops.lease_peek) continue;
    uint64_t start = ccache__mono_ns(), delay = t->ops.poll_ms;
    bool here = false; /* a signer held it: this tier was waited on */
    for (;;) {
      int who = lease_holder(ts, i, sk->key);
      if (who != LEASE_SIGNER) {
        /* The signer let go since the last poll: most likely it published
         * just before (one more look; none when no signer was seen). */
        if (here && who == LEASE_NONE && poll_load(ts, i, sk, native, cost) == T_HIT) found = T_HIT;
        break;
      }
      here = true;
      uint64_t elapsed_ms = (ccache__mono_ns() - start) / 1000000u;
      if (elapsed_ms >= t->ops.wait_ms) break;
      uint64_t left = t->ops.wait_ms - elapsed_ms;
      sleep_ms(delay < left ? delay : left);
      delay = delay * 2 > t->ops.poll_max_ms ? t->ops.poll_max_ms : delay * 2;
      if (poll_load(ts, i, sk, native, cost) == T_HIT) {
        found = T_HIT;
        break;
      }
    }
    if (here) {
      waited = true;
      waited_ns += ccache__mono_ns() - start;
    }
  }
  if (waited) record_wait(ts, waited_ns);
  return found;
}

/* Each tier top-down: look it up, then take its lock (file header: tier
 * i is asked with the locks of 0..i-1 held).  T_HIT if an entry was found. */
static int look_and_lock(struct ccache__tiers *ts, const ccache_strong_key *key, held_locks *h,
                         void **native, uint64_t *cost) {
  uint64_t waited_ns = 0;
  bool waited = false, locking = true;
  int found = T_MISS;
  for (uint32_t i = 0; i < ts->n && found == T_MISS; i++) {
    if (!ts->usable[i]) continue;
    if ((found = load(ts, i, key, native, cost)) == T_HIT) break;
    if (!locking || !ts->t[i]->ops.lock) continue;
    uint64_t before = waited_ns;
    int r = lock_one(ts, i, key, h, native, cost, &waited_ns);
    waited = waited || waited_ns != before || r == L_TIMEOUT;
    if (r == L_HIT) found = T_HIT;
    if (r == L_TIMEOUT) locking = false; /* waited long enough: compile soon */
  }
  if (waited) record_wait(ts, waited_ns);
  return found;
}

static void unlock_all(struct ccache__tiers *ts, held_locks *h) {
  for (uint32_t i = ts->n; i-- > 0;) {
    if (!h->held[i]) continue;
    ccache_tier *t = ts->t[i];
    if (t->ops.lease_ms) ccache__tier_lease_remove(ts, &h->lease[i]);
    CCACHE__IN_FRAME(ts, t->ops.unlock(t->state, h->lock[i]));
    atomic_fetch_sub_explicit(&ts->per[i].leases_held, 1, memory_order_relaxed);
  }
}

static bool any_usable(const struct ccache__tiers *ts) {
  for (uint32_t i = 0; i < ts->n; i++)
    if (ts->usable[i]) return true;
  return false;
}

int ccache__tier_obtain(struct ccache__tiers *ts, const ccache_strong_key *key,
                        ccache__tier_compile_fn compile, void *arg, void **native, uint64_t *cost,
                        bool *compiled, uint64_t *compile_ns) {
  *compiled = false;
  *compile_ns = 0;
  if (!ts || !ts->has_codec || !any_usable(ts)) {
    *compiled = true;
    return compile(arg, native, cost, compile_ns);
  }
  held_locks h;
  memset(&h, 0, sizeof h);
  int found = T_MISS;
  if (ts->reader) {
    /* A reader publishes nothing and takes no lease: it waits only for a
     * signer's (tier_trust.c). */
    for (uint32_t i = 0; i < ts->n && found == T_MISS; i++)
      if (ts->usable[i]) found = load(ts, i, key, native, cost);
    if (found == T_MISS) found = reader_wait(ts, key, native, cost);
  } else {
    found = look_and_lock(ts, key, &h, native, cost);
  }
  if (found == T_HIT) {
    unlock_all(ts, &h);
    atomic_fetch_add(&ts->hits, 1);
    return 0;
  }
  atomic_fetch_add(&ts->misses, 1);
  *compiled = true;
  int crc = compile(arg, native, cost, compile_ns);
  if (crc == 0 && *compile_ns / 1000u >= ts->min_compile_us) ccache__tier_store(ts, key, *native);
  unlock_all(ts, &h);
  return crc;
}
