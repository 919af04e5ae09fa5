/*
 * closure_compile.c - single-flight get-or-compile at the closure level.
 *
 * A hit is ccache_fetch()'s path.  A miss registers a flight under wlock and
 * runs the compile with no lock held; callers for the same key meanwhile
 * join the flight (flight.c) and get a lease the owner takes for each of
 * them before waking them, so they get the entry even if it is evicted or
 * expires before they run.
 */
#include <string.h>

#include "core/internal.h"
#include "core/readers.h"

/* A waiter's lease was granted by the owner before it woke us. */
static int join(ccache *c, ccache__wsec *w, ccache__flight *f, ccache_lease *out) {
  ccache__wsec_unblock(c, w); /* readers must not wait for the compile */
  int rc = ccache__flight_wait_locked(c, f, &c->flight_cv, &c->wlock);
  if (rc == CCACHE_OK) ccache__lease_fill(out, f->entry, NULL);
  ccache__flight_leave_locked(&c->wlock, &c->mem, f);
  ccache__wsec_end(c, w);
  ccache__reader_count(c, rc == CCACHE_OK);
  return rc;
}

/* What the compile returned: validated, inserted, and published to the
 * waiters.  Returns the status for the owner and the waiters. */
static int publish(ccache *c, ccache__flight *f, ccache__entry *e, int crc, void *closure,
                   ccache_program *prog, ccache_lease *out, bool *in_use, const char *api) {
  uint64_t now = ccache__now_ms(c);
  ccache__wsec w;
  int rc;
  ccache__wsec_begin_(c, &w, api);
  if (crc != 0)
    rc = CCACHE_ECOMPILE;
  else if (!prog || prog->owner != c)
    rc = CCACHE_EINVAL; /* a compile must return a handle of this cache */
  else
    rc = ccache__insert_locked(c, &w, e, &f->key, closure, prog, now);
  /* As in ccache_put(): if the insert failed (ENOMEM) while the entry in the
   * table (put meanwhile, e.g. by the compile itself) holds this very
   * closure, the closure is that entry's, not ours to destroy. */
  *in_use = rc == CCACHE_ENOMEM && ccache__closure_in_use_locked(c, &f->key, closure);
  if (rc == CCACHE_OK) ccache__lease_locked(c, e, 1 + f->waiters, out);
  f->entry = rc == CCACHE_OK ? e : NULL;
  bool free_f =
      ccache__flight_publish_locked(&c->wlock, &c->mem, &c->flights, f, rc, &c->flight_cv);
  atomic_fetch_sub(&c->inflight, 1);
  ccache__wsec_end(c, &w);
  if (free_f) ccache__flight_free(&c->mem, f);
  return rc;
}

/* The owner: run the compile (no lock held) and publish its result. */
static int run_compile(ccache *c, ccache__flight *f, ccache__entry *e, ccache_compile_fn compile,
                       void *ud, ccache_lease *out, const char *api) {
  void *closure = NULL;
  ccache_program *prog = NULL;
  ccache__frame fr;
  uint64_t t0 = ccache__mono_ns();
  ccache__frame_push(&fr, c);
  int crc = compile(ud, c, f->key.key, &closure, &prog);
  ccache__frame_pop(&fr);
  atomic_fetch_add_explicit(&c->compile_ns, ccache__mono_ns() - t0, memory_order_relaxed);

  bool in_use;
  int rc = publish(c, f, e, crc, closure, prog, out, &in_use, api);
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

/* The checked build gives every lease a token (misuse.h). */
static int lease_out(ccache *c, ccache_lease *out, int rc, const char *api) {
  if (rc == CCACHE_OK) CCACHE__MISUSE(ccache__misuse_lease_out(c, out, api));
  (void)c;
  (void)out;
  (void)api;
  return rc;
}

static int get_or_compile(ccache *c, const ccache_strong_key *key, bool strong,
                          ccache_compile_fn compile, void *ud, ccache_lease *out, const char *api);

int ccache_get_or_compile(ccache *c, ccache_key key, ccache_compile_fn compile, void *ud,
                          ccache_lease *out) {
  CCACHE__CHECK_CACHE(c);
  ccache_strong_key k = ccache__fast_key(key);
  return lease_out(c, out, get_or_compile(c, &k, false, compile, ud, out, __func__), __func__);
}

int ccache_get_or_compile_strong(ccache *c, const ccache_strong_key *key, ccache_compile_fn compile,
                                 void *ud, ccache_lease *out) {
  CCACHE__CHECK_CACHE(c);
  return lease_out(c, out, get_or_compile(c, key, true, compile, ud, out, __func__), __func__);
}

static int get_or_compile(ccache *c, const ccache_strong_key *key, bool strong,
                          ccache_compile_fn compile, void *ud, ccache_lease *out, const char *api) {
  if (out) memset(out, 0, sizeof *out);
  if (!c || !compile || !out || !key || !ccache__mode_ok(c, strong)) return CCACHE_EINVAL;
  int gate = ccache__gate(c);
  if (gate != CCACHE_OK) return gate;
  uint64_t ttl = atomic_load_explicit(&c->ttl_ms, memory_order_relaxed);
  uint64_t now = ttl == CCACHE_UNBOUNDED ? 0 : ccache__now_ms(c);
  if (ccache__lookup(c, key, now, ttl, false, out) == CCACHE_OK) return CCACHE_OK;

  /* Slow path.  Allocate before locking; a waiter simply frees it. */
  ccache__entry *e = ccache__entry_new(c);
  ccache__wsec w;
  ccache__wsec_begin_(c, &w, api);
  ttl = atomic_load(&c->ttl_ms);
  ccache__entry *found = ccache__find_locked_k(c, key);
  if (found && !ccache__expired(found->ins_ms, now, ttl)) { /* inserted meanwhile */
    ccache__lease_locked(c, found, 1, out);
    ccache__wsec_end(c, &w);
    ccache__entry_free(c, e);
    ccache__reader_count(c, true);
    return CCACHE_OK;
  }
  if (found) ccache__detach_locked(c, &w, found, &c->n.evicted_ttl);

  ccache__flight *f = ccache__flight_find_locked(&c->wlock, c->flights, key, c->klen);
  int rc = CCACHE_OK;
  if (f && ccache__flight_mine(f)) {
    rc = CCACHE_EDEADLK;
  } else if (f) {
    ccache__entry_free(c, e);
    return join(c, &w, f, out); /* ends the section */
  } else {
    f = e ? ccache__flight_start_locked(&c->wlock, &c->mem, &c->flights, key, c->klen) : NULL;
    if (!f) rc = CCACHE_ENOMEM;
  }
  if (rc == CCACHE_OK) {
    atomic_fetch_add(&c->inflight, 1);
    c->n.compiles++;
  }
  ccache__wsec_end(c, &w);
  ccache__reader_count(c, false);
  if (rc != CCACHE_OK) {
    ccache__entry_free(c, e);
    return rc;
  }
  return run_compile(c, f, e, compile, ud, out, api);
}
