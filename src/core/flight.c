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

int ccache__flight_wait_locked(ccache *c, ccache__flight *f, pthread_cond_t *cv,
                               ccache__mutex *mu) {
  ccache__assert_held(mu);
  f->waiters++;
  f->left++;
  atomic_fetch_add_explicit(&c->waits, 1, memory_order_relaxed);
  while (!f->done) ccache__cond_wait(cv, mu);
  return f->status;
}

void ccache__flight_leave_locked(ccache__mutex *mu, const ccache__mem *mem, ccache__flight *f) {
  ccache__assert_held(mu);
  (void)mu;
  if (--f->left == 0) ccache__free(mem, f);
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

void ccache__flight_free(const ccache__mem *mem, ccache__flight *f) { ccache__free(mem, f); }
