/*
 * tier.c - the tier stack behind the program table.
 *
 * Only the single-flight owner of a program miss comes here (flight.c), with
 * no cache lock held, so every tier op and codec call below runs outside the
 * cache's locks, and concurrent misses on one key in this process ask the
 * tiers once.  The order of work for one miss:
 *   lookup:  tiers top-down; a verified, decoded hit in tier i is written to
 *            tiers 0..i-1 (fill above) and ends the miss;
 *   locks:   each tier's compile lock in tier order; while another process
 *            holds one (EBUSY), back off poll_ms..poll_max_ms and ask that
 *            tier again after each attempt (its holder may publish), up to
 *            wait_ms; after taking a lock, ask the tier once more;
 *   compile: the user's callback, tier locks held, cache locks not;
 *   store:   encode once, frame once, put in every tier, if the compile
 *            took long enough and the codec did not answer SKIP;
 *   unlock:  reverse tier order.
 * A failed op or codec call counts tier_errors and the tier is skipped for
 * this step: nothing here can fail the fetch except the compile itself.
 *
 * Leased locks (ops.lease_ms > 0) are renewed every lease_ms/3 by one thread
 * per cache (renewal_main), started the first time a lease is taken and
 * joined by ccache__tiers_close().  The compiling thread only registers its
 * leases (records on its own stack) and unregisters them before unlocking.
 *
 * Locks: r_mu guards the lease list and the renewal thread's state; it is a
 * leaf (never held with a cache lock or across any user callback).
 */
#define _GNU_SOURCE 1 /* pthread_setname_np */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "tier.h"

/* A leased lock the renewal thread keeps alive. */
typedef struct ccache__lease_rec {
  struct ccache__lease_rec *prev, *next;
  ccache_tier *t;
  void *lock;
  uint64_t due_ns; /* next renewal, CLOCK_MONOTONIC */
  int busy;        /* renew() is running on it (r_mu released) */
  int lost;        /* a renew failed: no more renewals */
} ccache__lease_rec;

struct ccache__tiers {
  ccache_codec codec;
  int has_codec;
  uint64_t tag_hash;
  uint64_t min_compile_us;
  uint32_t n;
  ccache_tier *t[CCACHE_MAX_TIERS];
  bool usable[CCACHE_MAX_TIERS]; /* attached; false disables it for this cache */

  _Atomic uint64_t hits, misses, writes, errors, corrupt, bytes_read, bytes_written;
  _Atomic uint64_t lock_waits, wait_ms_max;

  ccache__mutex r_mu;
  pthread_cond_t r_cv; /* CLOCK_MONOTONIC; the list changed or a renew ended */
  pthread_t r_thread;
  int r_started, r_stop;
  ccache__lease_rec *leases;
};

/* What a tier lookup found. */
enum { T_MISS = 0, T_HIT = 1 };

/* ---------------------------------------------------------- the tier objects */

int ccache_tier_custom(const ccache_tier_ops *ops, void *state, ccache_tier **out) {
  if (!ops || !out || ops->size < sizeof(ccache_tier_ops)) return CCACHE_EINVAL;
  if (!ops->get || !ops->free_blob || !ops->put) return CCACHE_EINVAL;
  if (ops->lock) {
    if (!ops->unlock || ops->poll_ms < 1 || ops->poll_max_ms < ops->poll_ms) return CCACHE_EINVAL;
    /* A lease renewed every lease/3 needs lease/3 >= 1 ms. */
    if (ops->lease_ms && (ops->lease_ms < 3 || !ops->renew)) return CCACHE_EINVAL;
  }
  ccache_tier *t = calloc(1, sizeof *t);
  if (!t) return CCACHE_ENOMEM;
  memcpy(&t->ops, ops, sizeof t->ops);
  t->ops.size = sizeof t->ops;
  if (!t->ops.name) t->ops.name = "custom";
  if (!t->ops.lock) t->ops.lease_ms = 0;
  t->state = state;
  atomic_init(&t->owner, NULL);
  *out = t;
  return CCACHE_OK;
}

void ccache_tier_free(ccache_tier *t) {
  if (!t) return;
  if (t->ops.close) t->ops.close(t->state);
  free(t);
}

/* ------------------------------------------------------------- open, close */

/* The tier fields exist only in configs whose size covers them: a caller
 * built before them passes a shorter struct (CCACHE__CONFIG_MIN_SIZE), and
 * reading past its end would read its stack. */
#define CFG_HAS(cfg, field) ((cfg)->size >= offsetof(ccache_config, field) + sizeof((cfg)->field))

int ccache__tiers_check(const ccache_config *cfg) {
  if (!CFG_HAS(cfg, n_tiers)) return CCACHE_OK; /* no tiers */
  const ccache_codec *k = cfg->codec;
  const char *why = NULL;
  if (k && (!k->encode || !k->free_bytes || !k->decode))
    why = "a codec needs encode, free_bytes and decode";
  else if (cfg->n_tiers > CCACHE_MAX_TIERS)
    why = "more than CCACHE_MAX_TIERS tiers";
  else if (cfg->n_tiers && !cfg->tiers)
    why = "n_tiers > 0 with tiers NULL";
  for (uint32_t i = 0; !why && i < cfg->n_tiers; i++) {
    if (!cfg->tiers[i] || atomic_load(&cfg->tiers[i]->owner))
      why = "a tier that is NULL or already owned by a cache";
    for (uint32_t j = 0; !why && j < i; j++)
      if (cfg->tiers[j] == cfg->tiers[i]) why = "the same tier listed twice";
  }
  if (!why) return CCACHE_OK;
  ccache__detail("ccache_config: %s", why);
  return CCACHE_EINVAL;
}

/* Claim every tier for c, or none (another open may race for the same one). */
static bool claim(ccache *c, ccache_tier *const *tiers, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    const void *none = NULL;
    if (!atomic_compare_exchange_strong(&tiers[i]->owner, &none, (const void *)c)) {
      while (i-- > 0) atomic_store(&tiers[i]->owner, NULL);
      return false;
    }
  }
  return true;
}

static void count_error(struct ccache__tiers *ts) { atomic_fetch_add(&ts->errors, 1); }

/* Tier ops are user code for custom backends: they run under a callback
 * frame, so ccache_close() from inside one is refused. */
#define IN_FRAME(c, call)          \
  do {                             \
    ccache__frame fr_;             \
    ccache__frame_push(&fr_, (c)); \
    call;                          \
    ccache__frame_pop(&fr_);       \
  } while (0)

static int init_renewal(struct ccache__tiers *ts) {
  int rc = ccache__cond_init(&ts->r_cv, true);
  if (rc != CCACHE_OK) return rc;
  rc = ccache__mutex_init(&ts->r_mu);
  if (rc != CCACHE_OK) ccache__cond_destroy(&ts->r_cv);
  return rc;
}

int ccache__tiers_open(ccache *c, const ccache_config *cfg) {
  c->tiers = NULL;
  if (!CFG_HAS(cfg, n_tiers) || (cfg->n_tiers == 0 && !cfg->codec)) return CCACHE_OK;
  struct ccache__tiers *ts = ccache__calloc(&c->mem, sizeof *ts);
  if (!ts) return CCACHE_ENOMEM;
  int rc = init_renewal(ts);
  if (rc != CCACHE_OK) {
    ccache__free(&c->mem, ts);
    return rc;
  }
  if (!claim(c, cfg->tiers, cfg->n_tiers)) {
    ccache__cond_destroy(&ts->r_cv);
    ccache__mutex_destroy(&ts->r_mu);
    ccache__free(&c->mem, ts);
    return CCACHE_EINVAL;
  }
  ts->n = cfg->n_tiers;
  for (uint32_t i = 0; i < ts->n; i++) ts->t[i] = cfg->tiers[i];
  if (cfg->codec) {
    ts->codec = *cfg->codec;
    ts->has_codec = 1;
  }
  ts->tag_hash = ccache__tier_tag_hash(cfg->runtime_tag);
  ts->min_compile_us = cfg->tier_min_compile_us;
  c->tiers = ts;
  /* Without a codec the tiers are only owned (and closed at close). */
  if (!ts->has_codec) return CCACHE_OK;
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ts->tag_hash, ns);
  for (uint32_t i = 0; i < ts->n; i++) {
    ccache_tier *t = ts->t[i];
    rc = CCACHE_OK;
    if (t->ops.attach) IN_FRAME(c, rc = t->ops.attach(t->state, ns));
    ts->usable[i] = rc >= 0;
    if (rc < 0) count_error(ts);
  }
  return CCACHE_OK;
}

void ccache__tiers_close(ccache *c) {
  struct ccache__tiers *ts = c->tiers;
  if (!ts) return;
  ccache__lock(&ts->r_mu);
  int started = ts->r_started;
  ts->r_stop = 1;
  ccache__cond_broadcast(&ts->r_cv);
  ccache__unlock(&ts->r_mu);
  if (started) {
    int err = pthread_join(ts->r_thread, NULL);
    if (err) ccache__panic("pthread_join", err);
  }
  for (uint32_t i = 0; i < ts->n; i++) {
    ccache_tier *t = ts->t[i];
    if (t->ops.close) IN_FRAME(c, t->ops.close(t->state));
    free(t);
  }
  ccache__cond_destroy(&ts->r_cv);
  ccache__mutex_destroy(&ts->r_mu);
  ccache__free(&c->mem, ts);
  c->tiers = NULL;
}

void ccache__tier_stats(ccache *c, ccache_stats *s) {
  struct ccache__tiers *ts = c->tiers;
  if (!ts) return;
  s->tier_hits = atomic_load(&ts->hits);
  s->tier_misses = atomic_load(&ts->misses);
  s->tier_writes = atomic_load(&ts->writes);
  s->tier_errors = atomic_load(&ts->errors);
  s->tier_corrupt = atomic_load(&ts->corrupt);
  s->tier_bytes_read = atomic_load(&ts->bytes_read);
  s->tier_bytes_written = atomic_load(&ts->bytes_written);
  s->tier_lock_waits = atomic_load(&ts->lock_waits);
  s->tier_wait_ms_max = atomic_load(&ts->wait_ms_max);
}

/* ------------------------------------------------------- the renewal thread */

static struct timespec mono_ts(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  return ts;
}

static uint64_t renew_period_ns(const ccache_tier *t) { return t->ops.lease_ms / 3 * 1000000u; }

/* The earliest lease due that is neither lost nor being renewed. */
static ccache__lease_rec *next_due(struct ccache__tiers *ts) {
  ccache__lease_rec *best = NULL;
  for (ccache__lease_rec *r = ts->leases; r; r = r->next)
    if (!r->busy && !r->lost && (!best || r->due_ns < best->due_ns)) best = r;
  return best;
}

static void *renewal_main(void *arg) {
  ccache *c = arg;
  struct ccache__tiers *ts = c->tiers;

  ccache__lock(&ts->r_mu);
  while (!ts->r_stop) {
    ccache__lease_rec *r = next_due(ts);
    if (!r) {
      ccache__cond_wait(&ts->r_cv, &ts->r_mu);
      continue;
    }
    uint64_t now = ccache__mono_ns();
    if (r->due_ns > now) {
      struct timespec until = mono_ts(r->due_ns);
      ccache__cond_timedwait(&ts->r_cv, &ts->r_mu, &until);
      continue; /* re-pick: the list may have changed */
    }
    /* busy keeps the record (on its compiling thread's stack) alive and
     * keeps unlock() from running while renew() does. */
    r->busy = 1;
    ccache__unlock(&ts->r_mu);
    int rc = CCACHE_OK;
    IN_FRAME(c, rc = r->t->ops.renew(r->t->state, r->lock));
    if (rc != CCACHE_OK) count_error(ts);
    ccache__lock(&ts->r_mu);
    r->busy = 0;
    if (rc != CCACHE_OK) r->lost = 1;
    r->due_ns = ccache__mono_ns() + renew_period_ns(r->t);
    ccache__cond_broadcast(&ts->r_cv);
  }
  ccache__unlock(&ts->r_mu);
  return NULL;
}

/* Register a lease taken by this thread; starts the renewal thread on first
 * use.  If it cannot start, the lease is not renewed (counted) and may lapse:
 * at worst another process compiles the same program too. */
static void lease_add(ccache *c, ccache__lease_rec *r, ccache_tier *t, void *lock) {
  struct ccache__tiers *ts = c->tiers;
  memset(r, 0, sizeof *r);
  r->t = t;
  r->lock = lock;
  r->due_ns = ccache__mono_ns() + renew_period_ns(t);
  ccache__lock(&ts->r_mu);
  if (!ts->r_started && !ts->r_stop) {
    if (pthread_create(&ts->r_thread, NULL, renewal_main, c) == 0) {
      ts->r_started = 1;
      /* A name that tools show (top -H, gdb, /proc/<pid>/task/<tid>/comm). */
      pthread_setname_np(ts->r_thread, CCACHE__RENEW_THREAD_NAME);
    } else {
      count_error(ts);
    }
  }
  r->next = ts->leases;
  if (ts->leases) ts->leases->prev = r;
  ts->leases = r;
  ccache__cond_broadcast(&ts->r_cv);
  ccache__unlock(&ts->r_mu);
}

/* Unregister, waiting out a renew() in progress on it. */
static void lease_remove(ccache *c, ccache__lease_rec *r) {
  struct ccache__tiers *ts = c->tiers;
  ccache__lock(&ts->r_mu);
  while (r->busy) ccache__cond_wait(&ts->r_cv, &ts->r_mu);
  if (r->prev)
    r->prev->next = r->next;
  else
    ts->leases = r->next;
  if (r->next) r->next->prev = r->prev;
  ccache__cond_broadcast(&ts->r_cv);
  ccache__unlock(&ts->r_mu);
}

/* ------------------------------------------------------------ lookups */

static void count_bytes(_Atomic uint64_t *counter, size_t n) {
  atomic_fetch_add_explicit(counter, (uint64_t)n, memory_order_relaxed);
}

/* Write a verified entry to tiers [0, upto): the tiers above a hit. */
static void fill(ccache *c, ccache_key key, const void *blob, size_t len, uint32_t upto) {
  struct ccache__tiers *ts = c->tiers;
  for (uint32_t j = 0; j < upto; j++) {
    if (!ts->usable[j]) continue;
    ccache_tier *t = ts->t[j];
    int rc;
    IN_FRAME(c, rc = t->ops.put(t->state, key, blob, len));
    if (rc == CCACHE_OK) {
      atomic_fetch_add(&ts->writes, 1);
      count_bytes(&ts->bytes_written, len);
    } else {
      count_error(ts);
    }
  }
}

/* Ask tier i for key: T_HIT with a decoded native program (and the tiers
 * above filled), or T_MISS (absent, failed, corrupt, foreign or undecodable;
 * each counted where it applies). */
static int load(ccache *c, uint32_t i, ccache_key key, void **native, uint64_t *cost) {
  struct ccache__tiers *ts = c->tiers;
  ccache_tier *t = ts->t[i];
  void *blob = NULL;
  size_t len = 0;
  int rc;
  IN_FRAME(c, rc = t->ops.get(t->state, key, &blob, &len));
  if (rc == CCACHE_MISS) return T_MISS;
  if (rc != CCACHE_OK) {
    count_error(ts);
    return T_MISS;
  }
  count_bytes(&ts->bytes_read, len);
  const void *payload = NULL;
  size_t plen = 0;
  int found = T_MISS;
  switch (ccache__tier_verify(blob, len, key, ts->tag_hash, &payload, &plen)) {
    case CCACHE__ENTRY_CORRUPT:
      atomic_fetch_add(&ts->corrupt, 1);
      if (t->ops.remove) {
        IN_FRAME(c, rc = t->ops.remove(t->state, key));
        if (rc < 0) count_error(ts);
      }
      break;
    case CCACHE__ENTRY_FOREIGN: /* another runtime's: never loaded, not corrupt */
      break;
    case CCACHE__ENTRY_OK: {
      void *nat = NULL;
      uint64_t cst = 0;
      IN_FRAME(c, rc = ts->codec.decode(ts->codec.ctx, key, payload, plen, &nat, &cst));
      if (rc != 0) {
        count_error(ts);
        break;
      }
      *native = nat;
      *cost = cst;
      fill(c, key, blob, len, i);
      found = T_HIT;
      break;
    }
  }
  IN_FRAME(c, t->ops.free_blob(t->state, blob, len));
  return found;
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

/* Take tier i's lock (or give up on it), polling its entry while another
 * process holds the lock.  *waited_ns grows by the time spent waiting. */
static int lock_one(ccache *c, uint32_t i, ccache_key key, held_locks *h, void **native,
                    uint64_t *cost, uint64_t *waited_ns) {
  struct ccache__tiers *ts = c->tiers;
  ccache_tier *t = ts->t[i];
  uint64_t start = 0, delay = t->ops.poll_ms;
  for (;;) {
    void *lk = NULL;
    int rc;
    IN_FRAME(c, rc = t->ops.lock(t->state, key, &lk));
    if (rc == CCACHE_OK) {
      h->held[i] = true;
      h->lock[i] = lk;
      if (t->ops.lease_ms) lease_add(c, &h->lease[i], t, lk);
      break;
    }
    if (rc != CCACHE_EBUSY) { /* a broken lock: go on without it */
      count_error(ts);
      break;
    }
    uint64_t now = ccache__mono_ns();
    if (!start) start = now;
    uint64_t elapsed_ms = (now - start) / 1000000u;
    if (elapsed_ms >= t->ops.wait_ms) {
      *waited_ns += now - start;
      return L_TIMEOUT;
    }
    uint64_t left = t->ops.wait_ms - elapsed_ms;
    sleep_ms(delay < left ? delay : left);
    delay = delay * 2 > t->ops.poll_max_ms ? t->ops.poll_max_ms : delay * 2;
    /* The holder may have published while we slept. */
    if (load(c, i, key, native, cost) == T_HIT) {
      *waited_ns += ccache__mono_ns() - start;
      return L_HIT;
    }
  }
  if (start) *waited_ns += ccache__mono_ns() - start;
  /* Got the lock (or gave up on a broken one): the holder before us may
   * have published just before letting go. */
  return load(c, i, key, native, cost) == T_HIT ? L_HIT : L_DONE;
}

/* Take the locks in tier order.  T_HIT if an entry turned up meanwhile. */
static int lock_all(ccache *c, ccache_key key, held_locks *h, void **native, uint64_t *cost) {
  struct ccache__tiers *ts = c->tiers;
  uint64_t waited_ns = 0;
  bool waited = false;
  int found = T_MISS;
  for (uint32_t i = 0; i < ts->n; i++) {
    if (!ts->usable[i] || !ts->t[i]->ops.lock) continue;
    uint64_t before = waited_ns;
    int r = lock_one(c, i, key, h, native, cost, &waited_ns);
    waited = waited || waited_ns != before || r == L_TIMEOUT;
    if (r == L_HIT) {
      found = T_HIT;
      break;
    }
    if (r == L_TIMEOUT) break; /* waited long enough: compile now */
  }
  if (waited) record_wait(ts, waited_ns);
  return found;
}

static void unlock_all(ccache *c, held_locks *h) {
  struct ccache__tiers *ts = c->tiers;
  for (uint32_t i = ts->n; i-- > 0;) {
    if (!h->held[i]) continue;
    ccache_tier *t = ts->t[i];
    if (t->ops.lease_ms) lease_remove(c, &h->lease[i]);
    IN_FRAME(c, t->ops.unlock(t->state, h->lock[i]));
  }
}

/* ------------------------------------------------------ compile and store */

static int run_compile(ccache *c, ccache_key key, ccache_program_compile_fn compile, void *ud,
                       void **native, uint64_t *cost, uint64_t *took_ns) {
  ccache__frame fr;
  uint64_t t0 = ccache__mono_ns();
  ccache__frame_push(&fr, c);
  int crc = compile(ud, c, key, native, cost);
  ccache__frame_pop(&fr);
  *took_ns = ccache__mono_ns() - t0;
  atomic_fetch_add_explicit(&c->compile_ns, *took_ns, memory_order_relaxed);
  return crc;
}

static uint64_t realtime_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Encode the program just compiled and write it to every usable tier. */
static void store(ccache *c, ccache_key key, void *native) {
  struct ccache__tiers *ts = c->tiers;
  void *bytes = NULL;
  size_t len = 0;
  int rc;
  IN_FRAME(c, rc = ts->codec.encode(ts->codec.ctx, key, native, &bytes, &len));
  if (rc == CCACHE_CODEC_SKIP) return;
  if (rc != 0) {
    count_error(ts);
    return;
  }
  unsigned char *blob = NULL;
  size_t blen = 0;
  if ((uint64_t)len <= CCACHE__TIER_MAX_PAYLOAD && (bytes || len == 0)) {
    blen = ccache__tier_entry_len(len);
    blob = ccache__malloc(&c->mem, blen);
  }
  if (blob) ccache__tier_frame(blob, key, ts->tag_hash, realtime_ms(), bytes, len);
  IN_FRAME(c, ts->codec.free_bytes(ts->codec.ctx, bytes, len));
  if (!blob) { /* too large, NULL bytes, or no memory: not stored */
    count_error(ts);
    return;
  }
  fill(c, key, blob, blen, ts->n);
  ccache__free(&c->mem, blob);
}

static bool any_usable(const struct ccache__tiers *ts) {
  for (uint32_t i = 0; i < ts->n; i++)
    if (ts->usable[i]) return true;
  return false;
}

int ccache__tier_obtain(ccache *c, ccache_key key, ccache_program_compile_fn compile, void *ud,
                        void **native, uint64_t *cost, bool *compiled) {
  struct ccache__tiers *ts = c->tiers;
  uint64_t took_ns = 0;
  *compiled = false;
  if (!ts || !ts->has_codec || !any_usable(ts)) {
    *compiled = true;
    return run_compile(c, key, compile, ud, native, cost, &took_ns);
  }
  for (uint32_t i = 0; i < ts->n; i++) {
    if (ts->usable[i] && load(c, i, key, native, cost) == T_HIT) {
      atomic_fetch_add(&ts->hits, 1);
      return 0;
    }
  }
  held_locks h;
  memset(&h, 0, sizeof h);
  int found = lock_all(c, key, &h, native, cost);
  if (found == T_HIT) {
    unlock_all(c, &h);
    atomic_fetch_add(&ts->hits, 1);
    return 0;
  }
  atomic_fetch_add(&ts->misses, 1);
  *compiled = true;
  int crc = run_compile(c, key, compile, ud, native, cost, &took_ns);
  if (crc == 0 && took_ns / 1000u >= ts->min_compile_us) store(c, key, *native);
  unlock_all(c, &h);
  return crc;
}
