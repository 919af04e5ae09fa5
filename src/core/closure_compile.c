/*
 * closure_compile.c - single-flight get-or-compile at the closure level.
 *
 * A hit is ccache_fetch()'s path.  A miss registers a flight under wlock and
 * runs the compile with no lock held; callers for the same key meanwhile
 * join the flight (flight.c) and get a lease the owner takes for each of
 * them before waking them, so they get the entry even if it is evicted or
 * expires before they run.  A failure reaches every waiter with the owner's
 * status and error detail.
 *
 * Counting: the lookup is a hit or a miss (one per call, none when the call
 * follows this thread's fetch miss of the same key, which counted it); the
 * owner counts `compiles`, a waiter `waits`; compile_ns is the callback's own
 * time (flight.c's ccache__run).
 */
#include <string.h>

#include "core/internal.h"
#include "core/readers.h"

#define API "ccache_get_or_compile"

/* A waiter's lease was granted by the owner before it woke us. */
static int join(ccache *c, ccache__wsec *w, ccache__flight *f, ccache_lease *out) {
  ccache__wsec_unblock(c, w); /* readers must not wait for the compile */
  int rc = ccache__flight_wait_locked(&c->flights, f, &c->waits);
  if (rc == CCACHE_OK)
    ccache__lease_fill(out, f->entry, NULL);
  else
    ccache__flight_take_detail(f);
  ccache__flight_leave_locked(&c->flights, f);
  ccache__wsec_end(c, w);
  return rc;
}

/* A compile that returned 0 must have set a handle of this cache. */
static int check_program(ccache *c, ccache_key key, const ccache_program *prog, const char *api) {
  char hex[CCACHE_KEY_HEX_LEN];
  if (!prog)
    ccache__detail_for(CCACHE_EINVAL,
                       "%s: the compile callback for key %s returned 0 without setting "
                       "*program_out (nothing cached)",
                       api, ccache_key_hex(key, hex));
  else if (prog->owner != c)
    ccache__detail_for(CCACHE_EINVAL,
                       "%s: the compile callback for key %s returned a program handle of "
                       "another cache (nothing cached)",
                       api, ccache_key_hex(key, hex));
  else
    return CCACHE_OK;
  return CCACHE_EINVAL;
}

/* What the compile returned (st: its status, from ccache__run_status):
 * validated, inserted, and published to the waiters.  Returns the status for
 * the owner and the waiters. */
static int publish(ccache *c, ccache__flight *f, ccache__entry *e, int st, void *closure,
                   ccache_program *prog, ccache_lease *out, bool *in_use, const char *api) {
  uint64_t now = ccache__now_ms(c);
  ccache__wsec w;
  int rc = st != CCACHE_OK ? st : check_program(c, f->key.key, prog, api);
  ccache__wsec_begin_(c, &w, api);
  bool tried = rc == CCACHE_OK;
  if (tried) rc = ccache__insert_locked(c, &w, e, &f->key, closure, prog, now);
  /* As in ccache_put(): if the insert failed (ENOMEM) while the entry in the
   * table (put meanwhile, e.g. by the compile itself) holds this very
   * closure, the closure is that entry's, not ours to destroy. */
  *in_use = tried && rc == CCACHE_ENOMEM && ccache__closure_in_use_locked(c, &f->key, closure);
  if (tried && rc == CCACHE_ENOMEM) {
    char hex[CCACHE_KEY_HEX_LEN];
    ccache__detail_for(rc, "%s: out of memory inserting the compiled entry for key %s", api,
                       ccache_key_hex(f->key.key, hex));
  }
  if (rc == CCACHE_OK) ccache__lease_locked(c, e, 1 + f->waiters, out);
  f->entry = rc == CCACHE_OK ? e : NULL;
  if (rc != CCACHE_OK) ccache__flight_keep_detail(&c->mem, f);
  bool free_f = ccache__flight_publish_locked(&c->flights, f, rc);
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
  ccache__run run;
  uint64_t wall_ns;
  ccache_key key = f->key.key;
  ccache__run_begin(c, &run, CCACHE_LEVEL_CLOSURE, key);
  int crc;
  CCACHE__USER_CALL(c, &wall_ns, crc = compile(ud, c, key, &closure, &prog));
  atomic_fetch_add_explicit(&c->compile_ns, ccache__run_end(&run, wall_ns), memory_order_relaxed);
  int st = ccache__run_status(&run, crc, api, key);
  /* The handle passes to the cache: the checked build checks it is still
   * one (not released by the compile) before anything reads it. */
  if (crc == 0 && prog) CCACHE__MISUSE(ccache__misuse_handle_in(c, prog, api));

  bool in_use;
  int rc = publish(c, f, e, st, closure, prog, out, &in_use, api);
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
  if (c->on_event)
    ccache__event_compile(c, CCACHE_EVENT_COMPILE_END, CCACHE_LEVEL_CLOSURE, key, rc, wall_ns);
  return rc;
}

/* The checked build gives every lease a token (misuse.h). */
static int lease_out(ccache *c, ccache_key key, ccache_lease *out, int rc, const char *api) {
  if (rc == CCACHE_OK) CCACHE__MISUSE(ccache__misuse_lease_out(c, out, key, api));
  (void)c;
  (void)key;
  (void)out;
  (void)api;
  return rc;
}

static int get_or_compile(ccache *c, const ccache_strong_key *key, bool strong,
                          ccache_compile_fn compile, void *ud, ccache_lease *out, const char *api);

int ccache_get_or_compile(ccache *c, ccache_key key, ccache_compile_fn compile, void *ud,
                          ccache_lease *out) {
  CCACHE__CHECK_CACHE(c);
  uint64_t seq0 = ccache__detail_seq();
  ccache_strong_key k = ccache__fast_key(key);
  int rc = get_or_compile(c, &k, false, compile, ud, out, API);
  return lease_out(c, key, out, ccache__goc_finish(rc, seq0, API, key), API);
}

int ccache_get_or_compile_strong(ccache *c, const ccache_strong_key *key, ccache_compile_fn compile,
                                 void *ud, ccache_lease *out) {
  CCACHE__CHECK_CACHE(c);
  const char *api = "ccache_get_or_compile_strong";
  uint64_t seq0 = ccache__detail_seq();
  int rc = get_or_compile(c, key, true, compile, ud, out, api);
  ccache_key k = key ? key->key : (ccache_key){0, 0};
  return lease_out(c, k, out, ccache__goc_finish(rc, seq0, api, k), api);
}

/* A lookup that missed: counted here unless the fetch before it was. */
static void count_miss(ccache *c, ccache_key key, bool counted) {
  if (counted) return;
  ccache__reader_count(c, false);
  ccache__count_miss_evicted(c, key);
}

static int slow_path(ccache *c, const ccache_strong_key *key, ccache_compile_fn compile, void *ud,
                     ccache_lease *out, uint64_t now, bool counted, const char *api);

static int get_or_compile(ccache *c, const ccache_strong_key *key, bool strong,
                          ccache_compile_fn compile, void *ud, ccache_lease *out, const char *api) {
  if (out) memset(out, 0, sizeof *out);
  if (!c || !compile || !out || !key || !ccache__mode_ok(c, strong)) return CCACHE_EINVAL;
  int gate = ccache__gate(c);
  if (gate != CCACHE_OK) return gate;
  bool counted = ccache__took_fetch_miss(c, key->key);
  uint64_t ttl = atomic_load_explicit(&c->ttl_ms, memory_order_relaxed);
  uint64_t now = ttl == CCACHE_UNBOUNDED ? 0 : ccache__now_ms(c);
  if (ccache__lookup(c, key, now, ttl, counted ? 0 : CCACHE__COUNT_HIT, out) == CCACHE_OK)
    return CCACHE_OK;
  /* Inside another compile, this call's time is not that compile's. */
  uint64_t nested = ccache__nested_start();
  int rc = slow_path(c, key, compile, ud, out, now, counted, api);
  ccache__nested_end(nested);
  return rc;
}

static int slow_path(ccache *c, const ccache_strong_key *key, ccache_compile_fn compile, void *ud,
                     ccache_lease *out, uint64_t now, bool counted, const char *api) {
  /* Allocate before locking; a waiter simply frees it. */
  ccache__entry *e = ccache__entry_new(c);
  ccache__wsec w;
  ccache__wsec_begin_(c, &w, api);
  uint64_t ttl = atomic_load(&c->ttl_ms);
  ccache__entry *found = ccache__find_locked_k(c, key);
  if (found && !ccache__expired(found->ins_ms, now, ttl)) { /* inserted meanwhile */
    ccache__lease_locked(c, found, 1, out);
    ccache__wsec_end(c, &w);
    ccache__entry_free(c, e);
    if (!counted) ccache__reader_count(c, true);
    return CCACHE_OK;
  }
  if (found) ccache__detach_locked(c, &w, found, &c->n.evicted_ttl);

  ccache__flight *f = ccache__flight_find_locked(&c->flights, key);
  int rc = CCACHE_OK;
  if (f && ccache__flight_mine(f)) {
    rc = CCACHE_EDEADLK;
  } else if (f) {
    ccache__entry_free(c, e);
    rc = join(c, &w, f, out); /* ends the section */
    count_miss(c, key->key, counted);
    return rc;
  } else {
    f = e ? ccache__flight_start_locked(&c->flights, key) : NULL;
    if (!f) rc = CCACHE_ENOMEM;
  }
  if (rc == CCACHE_OK) {
    atomic_fetch_add(&c->inflight, 1);
    c->n.compiles++;
  }
  ccache__wsec_end(c, &w);
  count_miss(c, key->key, counted);
  if (rc != CCACHE_OK) {
    ccache__entry_free(c, e);
    return rc;
  }
  return run_compile(c, f, e, compile, ud, out, api);
}
