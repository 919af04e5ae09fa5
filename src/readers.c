/*
 * readers.c - the closure table's reader side: a big-reader lock split by
 * thread.
 *
 * Each thread locks only its own stripe (assigned round-robin on first use),
 * so hits from different threads share no lock and no counter line; a writer
 * blocks every reader by taking every stripe, in index order, while it holds
 * wlock.  Hit, miss and lease counts live in the stripes and are summed on
 * demand.
 */
#include "internal.h"

static _Atomic unsigned next_stripe;
static _Thread_local unsigned my_stripe = CCACHE__NSTRIPES;

static ccache__stripe *mine(ccache *c) {
  if (CCACHE__UNLIKELY(my_stripe == CCACHE__NSTRIPES))
    my_stripe = atomic_fetch_add_explicit(&next_stripe, 1, memory_order_relaxed) % CCACHE__NSTRIPES;
  return &c->stripes[my_stripe].s;
}

static void stripe_lock(ccache__stripe *s) {
  int err = pthread_mutex_lock(&s->mu);
  if (err) ccache__panic("pthread_mutex_lock", err);
}

static void stripe_unlock(ccache__stripe *s) {
  int err = pthread_mutex_unlock(&s->mu);
  if (err) ccache__panic("pthread_mutex_unlock", err);
}

int ccache__readers_init(ccache *c) {
  for (unsigned i = 0; i < CCACHE__NSTRIPES; i++) {
    int rc = ccache__thread_status(pthread_mutex_init(&c->stripes[i].s.mu, NULL),
                                   "pthread_mutex_init");
    if (rc != CCACHE_OK) {
      while (i-- > 0) pthread_mutex_destroy(&c->stripes[i].s.mu);
      return rc;
    }
  }
  return CCACHE_OK;
}

void ccache__readers_destroy(ccache *c) {
  for (unsigned i = 0; i < CCACHE__NSTRIPES; i++) {
    int err = pthread_mutex_destroy(&c->stripes[i].s.mu);
    if (err) ccache__panic("pthread_mutex_destroy", err);
  }
}

ccache__stripe *ccache__reader_begin(ccache *c) {
  ccache__stripe *s = mine(c);
  stripe_lock(s);
  return s;
}

void ccache__reader_end(ccache__stripe *r) { stripe_unlock(r); }

void ccache__reader_count(ccache *c, bool hit) {
  ccache__stripe *s = ccache__reader_begin(c);
  if (hit)
    s->hits++;
  else
    s->misses++;
  ccache__reader_end(s);
}

/* Modular: a lease released on another thread than the one that took it
 * makes one stripe's count go "negative"; only the sum is meaningful. */
void ccache__reader_leases(ccache *c, int64_t n) {
  atomic_fetch_add_explicit(&mine(c)->leases_out, (uint64_t)n, memory_order_relaxed);
}

void ccache__readers_block(ccache *c) {
  ccache__assert_held(&c->wlock);
  for (unsigned i = 0; i < CCACHE__NSTRIPES; i++) stripe_lock(&c->stripes[i].s);
}

void ccache__readers_unblock(ccache *c) {
  ccache__assert_held(&c->wlock);
  for (unsigned i = CCACHE__NSTRIPES; i-- > 0;) stripe_unlock(&c->stripes[i].s);
}

/* wlock held (the retired counts are under it). */
void ccache__readers_sum(ccache *c, uint64_t *hits, uint64_t *misses, uint64_t *leases) {
  ccache__assert_held(&c->wlock);
  uint64_t h = 0, m = 0, l = 0;
  for (unsigned i = 0; i < CCACHE__NSTRIPES; i++) {
    ccache__stripe *s = &c->stripes[i].s;
    stripe_lock(s);
    h += s->hits;
    m += s->misses;
    stripe_unlock(s);
    l += atomic_load_explicit(&s->leases_out, memory_order_relaxed);
  }
  *hits = h + c->hits_retired;
  *misses = m + c->misses_retired;
  *leases = l;
}
