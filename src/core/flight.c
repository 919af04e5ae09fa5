/*
 * flight.c - single-flight records, shared by both levels (closure_compile.c for
 * closures, program.c for programs).
 *
 * A miss registers a flight for its key (under the level's lock) and runs the
 * compile callback with no lock held; concurrent callers for the same key
 * find the flight and wait on a condition variable until it is done, then
 * take the result the owner left for them (a reference per waiter, taken
 * before anyone wakes, so the entry or program cannot go away in between even
 * if it is evicted at once).  A failed compile wakes every waiter with the
 * error and caches nothing.  A flight remembers its owner thread: a compile
 * that asks for its own key on that thread, directly or through a cycle of
 * nested compiles, gets CCACHE_EDEADLK instead of waiting on itself.
 */
#include <string.h>

#include "core/internal.h"

ccache__flight *ccache__flight_find_locked(ccache__mutex *mu, ccache__flight *table,
                                           const ccache_strong_key *key, uint32_t klen) {
  ccache__assert_held(mu);
  (void)mu;
  ccache__flight *f;
  HASH_FIND_BYHASHVALUE(hh, table, key, klen, ccache__key_hash(key->key), f);
  return f;
}

ccache__flight *ccache__flight_start_locked(ccache__mutex *mu, const ccache__mem *mem,
                                            ccache__flight **table, const ccache_strong_key *key,
                                            uint32_t klen) {
  CCACHE__UTHASH_SCOPE(mem);
  ccache__assert_held(mu);
  (void)mu;
  ccache__flight *f = ccache__calloc(mem, sizeof *f);
  if (!f) return NULL;
  f->key = *key;
  f->owner = pthread_self();
  HASH_ADD_BYHASHVALUE(hh, *table, key, klen, ccache__key_hash(key->key), f);
  if (uh_oom) {
    ccache__free(mem, f);
    return NULL;
  }
  return f;
}

bool ccache__flight_mine(const ccache__flight *f) {
  return pthread_equal(f->owner, pthread_self());
}

int ccache__flight_wait_locked(_Atomic uint64_t *waits, ccache__flight *f, pthread_cond_t *cv,
                               ccache__mutex *mu) {
  ccache__assert_held(mu);
  f->waiters++;
  f->left++;
  atomic_fetch_add_explicit(waits, 1, memory_order_relaxed);
  while (!f->done) ccache__cond_wait(cv, mu);
  return f->status;
}

void ccache__flight_leave_locked(ccache__mutex *mu, const ccache__mem *mem, ccache__flight *f) {
  ccache__assert_held(mu);
  (void)mu;
  if (--f->left == 0) ccache__flight_free(mem, f);
}

bool ccache__flight_publish_locked(ccache__mutex *mu, const ccache__mem *mem,
                                   ccache__flight **table, ccache__flight *f, int status,
                                   pthread_cond_t *cv) {
  CCACHE__UTHASH_SCOPE(mem); /* deleting the last flight frees the buckets */
  ccache__assert_held(mu);
  (void)mu;
  HASH_DELETE(hh, *table, f);
  f->done = 1;
  f->status = status;
  ccache__cond_broadcast(cv);
  return f->left == 0;
}

void ccache__flight_free(const ccache__mem *mem, ccache__flight *f) {
  ccache__free(mem, f->detail);
  ccache__free(mem, f);
}

/* ----------------------------------------------------- failures that travel */

void ccache__flight_keep_detail(const ccache__mem *mem, ccache__flight *f) {
  if (f->detail || f->waiters == 0) return; /* nobody to tell */
  const char *d = ccache_error_detail();
  size_t n = strlen(d) + 1;
  f->detail = ccache__malloc(mem, n);
  if (f->detail) memcpy(f->detail, d, n);
}

void ccache__flight_take_detail(const ccache__flight *f) {
  if (f->detail)
    ccache__detail_copy(f->status, f->detail);
  else
    ccache__detail_for(f->status,
                       "the compile this call waited for failed: %s (its detail "
                       "could not be copied: out of memory)",
                       ccache_strerror(f->status));
}

/* ------------------------------------------------------- one compile's run */

/* The compiles running on this thread, innermost first. */
static _Thread_local ccache__run *tls_run;

void ccache__run_begin(ccache *c, ccache__run *r, int level, ccache_key key) {
  if (c->on_event) ccache__event_compile(c, CCACHE_EVENT_COMPILE_START, level, key, 0, 0);
  r->prev = tls_run;
  r->nested_ns = 0;
  r->seq0 = ccache__detail_seq();
  tls_run = r;
  ccache__frame_push(&r->fr, c);
  r->t0 = ccache__mono_ns();
}

uint64_t ccache__run_end(ccache__run *r, uint64_t *wall_ns) {
  uint64_t wall = ccache__mono_ns() - r->t0;
  ccache__frame_pop(&r->fr);
  tls_run = r->prev;
  *wall_ns = wall;
  return wall > r->nested_ns ? wall - r->nested_ns : 0;
}

uint64_t ccache__nested_start(void) { return tls_run ? ccache__mono_ns() : 0; }

void ccache__nested_end(uint64_t start) {
  if (start && tls_run) tls_run->nested_ns += ccache__mono_ns() - start;
}

int ccache__run_status(const ccache__run *r, int crc, const char *api, ccache_key key) {
  if (crc == 0) return CCACHE_OK;
  char hex[CCACHE_KEY_HEX_LEN];
  bool recorded = ccache__detail_seq() != r->seq0;
  int st = recorded && crc < 0 && crc == ccache__detail_status() && ccache__status_known(crc)
               ? crc
               : CCACHE_ECOMPILE;
  if (!recorded)
    ccache__detail_for(st,
                       "%s: the compile callback for key %s returned %d without a detail "
                       "(ccache_compile_fail() gives one)",
                       api, ccache_key_hex(key, hex), crc);
  else
    ccache__detail_restatus(st);
  return st;
}

int ccache__goc_finish(int rc, uint64_t seq0, const char *api, ccache_key key) {
  if (rc >= 0) return rc;
  if (ccache__detail_seq() == seq0) {
    char hex[CCACHE_KEY_HEX_LEN];
    ccache__detail_for(rc, "%s: %s (key %s)", api, ccache_strerror(rc), ccache_key_hex(key, hex));
  } else {
    ccache__detail_restatus(rc);
  }
  return rc;
}
