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

int ccache__flights_init(ccache__flights *fl, ccache__mutex *mu, const ccache__mem *mem,
                         uint32_t klen) {
  fl->mu = mu;
  fl->mem = mem;
  fl->table = NULL;
  fl->klen = klen;
  return ccache__cond_init(&fl->cv, false);
}

void ccache__flights_destroy(ccache__flights *fl) { ccache__cond_destroy(&fl->cv); }

ccache__flight *ccache__flight_find_locked(ccache__flights *fl, const ccache_strong_key *key) {
  ccache__assert_held(fl->mu);
  ccache__flight *f;
  HASH_FIND_BYHASHVALUE(hh, fl->table, key, fl->klen, ccache__key_hash(key->key), f);
  return f;
}

ccache__flight *ccache__flight_start_locked(ccache__flights *fl, const ccache_strong_key *key) {
  CCACHE__UTHASH_SCOPE(fl->mem);
  ccache__assert_held(fl->mu);
  ccache__flight *f = ccache__calloc(fl->mem, sizeof *f);
  if (!f) return NULL;
  f->key = *key;
  f->owner = pthread_self();
  HASH_ADD_BYHASHVALUE(hh, fl->table, key, fl->klen, ccache__key_hash(key->key), f);
  if (uh_oom) {
    ccache__free(fl->mem, f);
    return NULL;
  }
  return f;
}

bool ccache__flight_mine(const ccache__flight *f) {
  return pthread_equal(f->owner, pthread_self());
}

int ccache__flight_wait_locked(ccache__flights *fl, ccache__flight *f, _Atomic uint64_t *waits) {
  ccache__assert_held(fl->mu);
  f->waiters++;
  f->left++;
  atomic_fetch_add_explicit(waits, 1, memory_order_relaxed);
  while (!f->done) ccache__cond_wait(&fl->cv, fl->mu);
  return f->status;
}

void ccache__flight_leave_locked(ccache__flights *fl, ccache__flight *f) {
  ccache__assert_held(fl->mu);
  if (--f->left == 0) ccache__flight_free(fl->mem, f);
}

bool ccache__flight_publish_locked(ccache__flights *fl, ccache__flight *f, int status) {
  CCACHE__UTHASH_SCOPE(fl->mem); /* deleting the last flight frees the buckets */
  ccache__assert_held(fl->mu);
  HASH_DELETE(hh, fl->table, f);
  f->done = 1;
  f->status = status;
  ccache__cond_broadcast(&fl->cv);
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
}

uint64_t ccache__run_end(ccache__run *r, uint64_t wall_ns) {
  tls_run = r->prev;
  return wall_ns > r->nested_ns ? wall_ns - r->nested_ns : 0;
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
