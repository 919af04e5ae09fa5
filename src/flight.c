/*
 * flight.c - single-flight get-or-compile at both levels.
 *
 * A miss registers a flight for its key (under the level's lock) and runs the
 * compile callback with no lock held; concurrent callers for the same key
 * find the flight and wait on a condition variable until it is done, then
 * take the result the compiler left for them (a reference per waiter, taken
 * before anyone wakes, so the entry or program cannot go away in between even
 * if it is evicted at once).  A failed compile wakes every waiter with the
 * error and caches nothing.  A flight remembers its compiling thread: a
 * compile that asks for its own key on that thread, directly or through a
 * cycle of nested compiles, gets CCACHE_EDEADLK instead of waiting on itself.
 */
#include <string.h>

#include "internal.h"
#include "tier.h"

static ccache__flight *flight_new(ccache *c, ccache_key key) {
  ccache__flight *f = ccache__calloc(&c->mem, sizeof *f);
  if (f) {
    f->key = key;
    f->owner = pthread_self();
  }
  return f;
}

/* Counted in the thread's stripe, like the hit path's counts. */
static void count_lookup(ccache *c, bool hit) {
  ccache__stripe *s = ccache__my_stripe(c);
  pthread_mutex_lock(&s->mu);
  if (hit)
    s->hits++;
  else
    s->misses++;
  pthread_mutex_unlock(&s->mu);
}

/* Take n leases on an entry in the table while holding wlock. */
static void lease_locked(ccache *c, ccache__entry *e, uint32_t n, ccache_lease *out) {
  atomic_fetch_add_explicit(&e->refs, n, memory_order_relaxed);
  atomic_fetch_add_explicit(&ccache__my_stripe(c)->leases_out, n, memory_order_relaxed);
  if (out) ccache__lease_fill(out, e);
}

static void add_compile_time(ccache *c, uint64_t t0) {
  atomic_fetch_add_explicit(&c->compile_ns, ccache__mono_ns() - t0, memory_order_relaxed);
}

/* Join a flight, its level's lock `mu` held: count the wait and sleep until
 * the compiler publishes.  Returns the flight's status with `mu` held again;
 * the caller takes its result, then calls flight_leave(). */
static int flight_wait(ccache *c, ccache__flight *f, pthread_cond_t *cv, pthread_mutex_t *mu) {
  f->waiters++;
  f->left++;
  atomic_fetch_add_explicit(&c->waits, 1, memory_order_relaxed);
  while (!f->done) pthread_cond_wait(cv, mu);
  return f->status;
}

/* The last waiter to take its result frees the flight. */
static void flight_leave(ccache *c, ccache__flight *f) {
  if (--f->left == 0) ccache__free(&c->mem, f);
}

/* The compiler's side: with `mu` held and the waiters' results already in
 * place, end the flight, wake the waiters and unlock.  If nobody waits, the
 * flight is freed here, else by the last waiter (flight_leave). */
static void flight_publish(ccache *c, ccache__flight **table, ccache__flight *f, int status,
                           pthread_cond_t *cv, pthread_mutex_t *mu) {
  CCACHE__UTHASH_SCOPE(&c->mem);
  HASH_DELETE(hh, *table, f);
  f->done = 1;
  f->status = status;
  bool free_f = f->left == 0;
  pthread_cond_broadcast(cv);
  atomic_fetch_sub(&c->inflight, 1);
  pthread_mutex_unlock(mu);
  if (free_f) ccache__free(&c->mem, f);
}

/* A closure waiter's lease was granted by the compiler before it woke us. */
static int join_closure_flight(ccache *c, ccache__flight *f, ccache_lease *out) {
  int rc = flight_wait(c, f, &c->flight_cv, &c->wlock);
  if (rc == CCACHE_OK) ccache__lease_fill(out, f->entry);
  flight_leave(c, f);
  pthread_mutex_unlock(&c->wlock);
  count_lookup(c, rc == CCACHE_OK);
  return rc;
}

/* Run the compile (no lock held) and publish its result to the waiters. */
static int run_closure_compile(ccache *c, ccache__flight *f, ccache__entry *e,
                               ccache_compile_fn compile, void *ud, ccache_lease *out) {
  void *closure = NULL;
  ccache_program *prog = NULL;
  ccache__frame fr;
  uint64_t t0 = ccache__mono_ns();
  ccache__frame_push(&fr, c);
  int crc = compile(ud, c, f->key, &closure, &prog);
  ccache__frame_pop(&fr);
  add_compile_time(c, t0);
  uint64_t now = ccache__now_ms(c);

  ccache__graveyard gy = {NULL, NULL};
  int rc;
  pthread_mutex_lock(&c->wlock);
  if (crc != 0)
    rc = CCACHE_ECOMPILE;
  else if (!prog || prog->owner != c)
    rc = CCACHE_EINVAL; /* a compile must return a handle of this cache */
  else
    rc = ccache__insert_locked(c, e, f->key, closure, prog, now, &gy);
  /* As in ccache_put(): if the insert failed (ENOMEM) while the entry in the
   * table (put meanwhile, e.g. by the compile itself) holds this very
   * closure, the closure is that entry's, not ours to destroy.  (Found by
   * tests/test_alloc_fail.c: it was destroyed twice.) */
  bool in_use = rc == CCACHE_ENOMEM && ccache__closure_in_use_locked(c, f->key, closure);
  if (rc == CCACHE_OK) lease_locked(c, e, 1 + f->waiters, out);
  f->entry = rc == CCACHE_OK ? e : NULL;
  flight_publish(c, &c->flights, f, rc, &c->flight_cv, &c->wlock);
  ccache__graveyard_drain(c, &gy);

  if (crc != 0) atomic_fetch_add(&c->compile_failures, 1);
  if (rc != CCACHE_OK) ccache__entry_free(c, e);
  if (crc == 0) {
    /* Success hands the closure and the program reference to the cache: the
     * entry took its own program reference, so drop the compile's handle; if
     * inserting failed, both are destroyed. */
    if (rc != CCACHE_OK && !in_use) ccache__destroy_closure(c, closure);
    /* The handle passes to the cache in every case; a foreign one (a caller
     * error, reported as EINVAL) goes back to the cache it came from. */
    if (prog) ccache__program_unref(prog->owner, prog, true);
  }
  return rc;
}

int ccache_get_or_compile(ccache *c, ccache_key key, ccache_compile_fn compile, void *ud,
                          ccache_lease *out) {
  CCACHE__UTHASH_SCOPE(c ? &c->mem : NULL);
  if (out) memset(out, 0, sizeof *out);
  if (!c || !compile || !out) return CCACHE_EINVAL;
  int gate = ccache__gate(c);
  if (gate != CCACHE_OK) return gate;
  uint64_t ttl = atomic_load_explicit(&c->ttl_ms, memory_order_relaxed);
  uint64_t now = ttl == CCACHE_UNBOUNDED ? 0 : ccache__now_ms(c);
  if (ccache__lookup(c, key, now, ttl, false, out) == CCACHE_OK) return CCACHE_OK;

  /* Slow path.  Allocate before locking; a waiter simply frees it. */
  ccache__entry *e = ccache__entry_new(c);
  ccache__graveyard gy = {NULL, NULL};
  int rc;
  pthread_mutex_lock(&c->wlock);
  ttl = atomic_load(&c->ttl_ms);
  ccache__entry *found = ccache__find_locked(c, key);
  if (found && !ccache__expired(found->ins_ms, now, ttl)) { /* inserted meanwhile */
    lease_locked(c, found, 1, out);
    pthread_mutex_unlock(&c->wlock);
    ccache__entry_free(c, e);
    count_lookup(c, true);
    return CCACHE_OK;
  }
  if (found) {
    ccache__readers_lock(c);
    ccache__detach_wlocked(c, found, &c->n.evicted_ttl, &gy);
    ccache__readers_unlock(c);
  }

  ccache__flight *f;
  HASH_FIND(hh, c->flights, &key, sizeof key, f);
  if (f && pthread_equal(f->owner, pthread_self())) {
    rc = CCACHE_EDEADLK;
  } else if (f) {
    ccache__entry_free(c, e);
    rc = join_closure_flight(c, f, out); /* unlocks */
    ccache__graveyard_drain(c, &gy);
    return rc;
  } else {
    f = e ? flight_new(c, key) : NULL;
    if (f) HASH_ADD(hh, c->flights, key, sizeof f->key, f);
    rc = f && !uh_oom ? CCACHE_OK : CCACHE_ENOMEM;
    if (f && uh_oom) ccache__free(&c->mem, f);
  }
  if (rc != CCACHE_OK) {
    pthread_mutex_unlock(&c->wlock);
    ccache__graveyard_drain(c, &gy);
    ccache__entry_free(c, e);
    count_lookup(c, false);
    return rc;
  }
  atomic_fetch_add(&c->inflight, 1);
  c->n.compiles++;
  pthread_mutex_unlock(&c->wlock);
  ccache__graveyard_drain(c, &gy);
  count_lookup(c, false);
  return run_closure_compile(c, f, e, compile, ud, out);
}

/* ------------------------------------------------------- program level */

static int join_program_flight(ccache *c, ccache__flight *f, ccache_program **out) {
  int rc = flight_wait(c, f, &c->pflight_cv, &c->pmu);
  if (rc == CCACHE_OK) {
    *out = f->program; /* the handle was taken for us before we woke */
    c->program_hits++;
  } else {
    c->program_misses++;
  }
  flight_leave(c, f);
  pthread_mutex_unlock(&c->pmu);
  return rc;
}

/* The tiers (tier.c) run the compile only when none of them has the
 * program; either way the native program is interned here. */
static int run_program_compile(ccache *c, ccache__flight *f, ccache_program_compile_fn compile,
                               void *ud, ccache_program **out) {
  void *native = NULL;
  uint64_t cost = 0;
  bool compiled = false;
  int crc = ccache__tier_obtain(c, f->key, compile, ud, &native, &cost, &compiled);
  ccache_program *p = NULL;
  int rc = crc != 0 ? CCACHE_ECOMPILE : ccache__program_intern(c, f->key, native, cost, &p, false);
  if (crc != 0) atomic_fetch_add(&c->compile_failures, 1);

  pthread_mutex_lock(&c->pmu);
  if (compiled) c->program_compiles++;
  if (rc == CCACHE_OK) { /* one handle per waiter, before anyone wakes */
    p->refs += f->waiters;
    c->handles_out += f->waiters;
  }
  f->program = p;
  flight_publish(c, &c->pflights, f, rc, &c->pflight_cv, &c->pmu);
  *out = p;
  return rc;
}

int ccache_program_get_or_compile(ccache *c, ccache_key pkey, ccache_program_compile_fn compile,
                                  void *ud, ccache_program **out) {
  CCACHE__UTHASH_SCOPE(c ? &c->mem : NULL);
  if (out) *out = NULL;
  if (!c || !compile || !out) return CCACHE_EINVAL;
  int gate = ccache__gate(c);
  if (gate != CCACHE_OK) return gate;
  pthread_mutex_lock(&c->pmu);
  ccache_program *p = ccache__program_find_locked(c, pkey);
  if (p) {
    c->program_hits++;
    pthread_mutex_unlock(&c->pmu);
    *out = p;
    return CCACHE_OK;
  }
  ccache__flight *f;
  HASH_FIND(hh, c->pflights, &pkey, sizeof pkey, f);
  if (f && !pthread_equal(f->owner, pthread_self())) return join_program_flight(c, f, out);
  int rc = CCACHE_EDEADLK;
  if (!f) {
    f = flight_new(c, pkey);
    if (f) HASH_ADD(hh, c->pflights, key, sizeof f->key, f);
    rc = f && !uh_oom ? CCACHE_OK : CCACHE_ENOMEM;
    if (f && uh_oom) ccache__free(&c->mem, f);
  }
  c->program_misses++;
  if (rc == CCACHE_OK) atomic_fetch_add(&c->inflight, 1);
  pthread_mutex_unlock(&c->pmu);
  return rc == CCACHE_OK ? run_program_compile(c, f, compile, ud, out) : rc;
}
