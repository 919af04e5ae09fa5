/*
 * closure.c - the closure table: fetch, leases, put, remove, clear.
 *
 * One uthash table, guarded for readers by a big-reader lock: each thread
 * locks only its own stripe (ccache__my_stripe), so a hit writes no line
 * another thread's hit writes, apart from a shared entry's own reference
 * count.  Writers hold wlock and take every stripe while they change the
 * table (puts and evictions serialize; hits do not).
 *
 * FIFO: uthash keeps the table's items in insertion order (its app-order
 * list), so its head is the oldest entry and eviction and sweeps cost
 * O(evicted).
 *
 * An entry's lifetime is its atomic refs (see internal.h).  Detaching an entry
 * from the table moves it to a graveyard; the graveyard is drained after the
 * locks are released, so destroy callbacks never run under a lock.
 */
#include <string.h>

#include "internal.h"

/* Result of ccache__lookup when the entry found has expired. */
#define CCACHE__EXPIRED 2

/* Keys are already XXH3-128 fingerprints, so uthash need not hash them again:
 * fold the 128 bits to its 32 with a multiply, which still spreads keys that
 * are not fingerprints (hand-made or sequential ones). */
unsigned ccache__key_hash(ccache_key key) {
  uint64_t x = key.lo * 0x9E3779B97F4A7C15ull ^ key.hi * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 29;
  x *= 0xD6E8FEB86659FD93ull;
  return (unsigned)(x >> 32);
}

static _Atomic unsigned next_stripe;
static _Thread_local unsigned my_stripe = CCACHE__NSTRIPES;

ccache__stripe *ccache__my_stripe(ccache *c) {
  if (CCACHE__UNLIKELY(my_stripe == CCACHE__NSTRIPES))
    my_stripe = atomic_fetch_add_explicit(&next_stripe, 1, memory_order_relaxed) % CCACHE__NSTRIPES;
  return &c->stripes[my_stripe].s;
}

void ccache__readers_lock(ccache *c) {
  for (unsigned i = 0; i < CCACHE__NSTRIPES; i++) pthread_mutex_lock(&c->stripes[i].s.mu);
}

void ccache__readers_unlock(ccache *c) {
  for (unsigned i = CCACHE__NSTRIPES; i-- > 0;) pthread_mutex_unlock(&c->stripes[i].s.mu);
}

ccache__entry *ccache__entry_new(ccache *c) {
  return ccache__malloc(&c->mem, sizeof(ccache__entry));
}

void ccache__entry_free(ccache *c, ccache__entry *e) { ccache__free(&c->mem, e); }

/* A re-put of the very closure pointer an entry already holds must not
 * destroy it, yet leases on the replaced entry must keep it valid.  So the new
 * entry *borrows* the closure: its closure field points at the owning entry
 * (the first one that stored it) and holds a reference on it; the closure is
 * destroyed when the owner's last reference goes. */
void *ccache__entry_closure(const ccache__entry *e) {
  if (e->flags & CCACHE__E_BORROWED) return ((const ccache__entry *)e->closure)->closure;
  return e->closure;
}

static ccache__entry *owner_of(ccache__entry *e) {
  return (e->flags & CCACHE__E_BORROWED) ? (ccache__entry *)e->closure : e;
}

/* The last reference is gone: closure first, then the program it runs. */
static void entry_destroy(ccache *c, ccache__entry *e) {
  if (e->flags & CCACHE__E_BORROWED)
    ccache__entry_unref(c, (ccache__entry *)e->closure);
  else
    ccache__destroy_closure(c, e->closure);
  ccache__program_unref(c, e->program, false);
  ccache__entry_free(c, e);
}

void ccache__entry_unref(ccache *c, ccache__entry *e) {
  if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1) entry_destroy(c, e);
}

void ccache__lease_fill(ccache_lease *out, ccache__entry *e) {
  out->closure = ccache__entry_closure(e);
  out->native = e->program->native;
  out->internal_[0] = e;
}

/* Hit path: the thread's own stripe lock, no allocation, no program
 * refcount. */
int ccache__lookup(ccache *c, ccache_key key, uint64_t now, uint64_t ttl, bool count_miss,
                   ccache_lease *out) {
  unsigned hv = ccache__key_hash(key);
  ccache__stripe *s = ccache__my_stripe(c);
  ccache__entry *e;
  pthread_mutex_lock(&s->mu);
  HASH_FIND_BYHASHVALUE(hh, c->table, &key, sizeof key, hv, e);
  if (CCACHE__LIKELY(e != NULL) && !ccache__expired(e->ins_ms, now, ttl)) {
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->leases_out, 1, memory_order_relaxed);
    s->hits++;
    pthread_mutex_unlock(&s->mu);
    ccache__lease_fill(out, e);
    return CCACHE_OK;
  }
  if (count_miss) s->misses++;
  pthread_mutex_unlock(&s->mu);
  return e ? CCACHE__EXPIRED : CCACHE_MISS;
}

/* Under wlock the table cannot change, so a lookup needs no stripe (readers
 * only read the structure). */
ccache__entry *ccache__find_locked(ccache *c, ccache_key key) {
  unsigned hv = ccache__key_hash(key);
  ccache__entry *e;
  HASH_FIND_BYHASHVALUE(hh, c->table, &key, sizeof key, hv, e);
  return e;
}

/* After a failed insert the closure is the caller's to destroy, unless the
 * entry now in the table under key holds that very pointer (a re-put, or a
 * compile that returned what was put meanwhile). */
bool ccache__closure_in_use_locked(ccache *c, ccache_key key, const void *closure) {
  ccache__entry *cur = ccache__find_locked(c, key);
  return cur && ccache__entry_closure(cur) == closure;
}

/* An expired entry seen by fetch: retake the locks in order and remove it if
 * it is still there and still expired under the current TTL. */
static void expire_key(ccache *c, ccache_key key, uint64_t now) {
  ccache__graveyard gy = {NULL, NULL};
  pthread_mutex_lock(&c->wlock);
  ccache__entry *e = ccache__find_locked(c, key);
  if (e && ccache__expired(e->ins_ms, now, atomic_load(&c->ttl_ms))) {
    ccache__readers_lock(c);
    ccache__detach_wlocked(c, e, &c->n.evicted_ttl, &gy);
    ccache__readers_unlock(c);
  }
  pthread_mutex_unlock(&c->wlock);
  ccache__graveyard_drain(c, &gy);
}

int ccache_fetch(ccache *c, ccache_key key, ccache_lease *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!c || !out) return CCACHE_EINVAL;
  int gate = ccache__gate(c);
  if (gate != CCACHE_OK) return gate;
  uint64_t ttl = atomic_load_explicit(&c->ttl_ms, memory_order_relaxed);
  /* The clock is a user callback: read it before any lock, and only when a
   * TTL makes it matter. */
  uint64_t now = ttl == CCACHE_UNBOUNDED ? 0 : ccache__now_ms(c);
  int rc = ccache__lookup(c, key, now, ttl, true, out);
  if (rc == CCACHE__EXPIRED) {
    expire_key(c, key, now);
    rc = CCACHE_MISS;
  }
  return rc;
}

void ccache_lease_release(ccache *c, ccache_lease *lease) {
  if (!c || !lease || !lease->internal_[0] || ccache__forked(c)) return;
  ccache__entry *e = lease->internal_[0];
  memset(lease, 0, sizeof *lease);
  atomic_fetch_sub_explicit(&ccache__my_stripe(c)->leases_out, 1, memory_order_relaxed);
  ccache__entry_unref(c, e);
}

/* ------------------------------------------------------------ writers */

static void charge_locked(ccache *c, ccache_program *p) {
  if (p->table_refs++ == 0) {
    c->cost.lo += p->cost;
    c->cost.hi += c->cost.lo < p->cost; /* carry */
  }
}

static void uncharge_locked(ccache *c, ccache_program *p) {
  ccache__assert(p->table_refs > 0);
  if (--p->table_refs == 0) {
    c->cost.hi -= c->cost.lo < p->cost; /* borrow */
    c->cost.lo -= p->cost;
  }
}

static void graveyard_push(ccache__graveyard *gy, ccache__entry *e) {
  e->hh.next = NULL;
  if (gy->tail)
    gy->tail->hh.next = e;
  else
    gy->head = e;
  gy->tail = e;
}

void ccache__graveyard_drain(ccache *c, ccache__graveyard *gy) {
  ccache__entry *e = gy->head;
  gy->head = gy->tail = NULL;
  while (e) {
    ccache__entry *next = e->hh.next;
    ccache__entry_unref(c, e); /* the table's reference */
    e = next;
  }
}

void ccache__detach_wlocked(ccache *c, ccache__entry *e, uint64_t *cause, ccache__graveyard *gy) {
  CCACHE__UTHASH_SCOPE(&c->mem);
  HASH_DELETE(hh, c->table, e);
  c->items--;
  uncharge_locked(c, e->program);
  if (cause) (*cause)++;
  graveyard_push(gy, e);
}

void ccache__clear_wlocked(ccache *c, uint64_t *cause, ccache__graveyard *gy) {
  ccache__entry *e, *tmp;
  HASH_ITER(hh, c->table, e, tmp) ccache__detach_wlocked(c, e, cause, gy);
}

int ccache__insert_locked(ccache *c, ccache__entry *e, ccache_key key, void *closure,
                          ccache_program *p, uint64_t now, ccache__graveyard *gy) {
  CCACHE__UTHASH_SCOPE(&c->mem);
  unsigned hv = ccache__key_hash(key);
  ccache__entry *old = ccache__find_locked(c, key);
  ccache__entry *owner = NULL;

  e->key = key;
  e->program = p;
  e->idx = c->next_idx;
  /* Insert times never decrease along the FIFO, even if the clock steps
   * back, so expired entries always form a prefix of it. */
  e->ins_ms = now > c->last_ins_ms ? now : c->last_ins_ms;
  atomic_init(&e->refs, 1);
  e->flags = 0;
  e->closure = closure;
  if (old && ccache__entry_closure(old) == closure) {
    owner = owner_of(old);
    e->flags = CCACHE__E_BORROWED;
    e->closure = owner;
  }

  /* Add before deleting the old entry: the add is the only step that can
   * fail, and if it does the table is exactly as before. */
  ccache__readers_lock(c);
  HASH_ADD_BYHASHVALUE(hh, c->table, key, sizeof e->key, hv, e);
  if (uh_oom) {
    ccache__readers_unlock(c);
    return CCACHE_ENOMEM;
  }
  if (owner) atomic_fetch_add_explicit(&owner->refs, 1, memory_order_relaxed);
  ccache__program_ref(c, p);
  c->next_idx++;
  c->last_ins_ms = e->ins_ms;
  c->n.inserts++;
  c->items++;
  charge_locked(c, p);
  if (old) {
    c->n.replaced++;
    ccache__detach_wlocked(c, old, NULL, gy); /* items back to where it was */
  }
  ccache__enforce_wlocked(c, e, gy);
  ccache__readers_unlock(c);
  return CCACHE_OK;
}

int ccache_put(ccache *c, ccache_key key, void *closure, ccache_program *p) {
  if (!c) return CCACHE_EINVAL;
  int rc = ccache__gate(c);
  if (rc == CCACHE_OK && (!p || p->owner != c))
    rc = CCACHE_EINVAL;
  ccache__entry *e = NULL;
  if (rc == CCACHE_OK) {
    uint64_t now = ccache__now_ms(c);
    e = ccache__entry_new(c);
    /* A failed entry allocation goes through the same in-use check below:
     * a re-put of the very closure the entry holds must not destroy it
     * (found by tests/test_alloc_fail.c: it was destroyed while still in
     * the table, then again when the entry left). */
    ccache__graveyard gy = {NULL, NULL};
    pthread_mutex_lock(&c->wlock);
    rc = e ? ccache__insert_locked(c, e, key, closure, p, now, &gy) : CCACHE_ENOMEM;
    bool in_use = rc != CCACHE_OK && ccache__closure_in_use_locked(c, key, closure);
    pthread_mutex_unlock(&c->wlock);
    ccache__graveyard_drain(c, &gy);
    if (rc == CCACHE_OK) return rc;
    ccache__entry_free(c, e);
    if (in_use) return rc;
  }
  ccache__destroy_closure(c, closure);
  return rc;
}

int ccache_remove(ccache *c, ccache_key key) {
  if (!c) return CCACHE_EINVAL;
  if (ccache__forked(c)) return CCACHE_EFORKED;
  ccache__graveyard gy = {NULL, NULL};
  pthread_mutex_lock(&c->wlock);
  ccache__entry *e = ccache__find_locked(c, key);
  if (e) {
    ccache__readers_lock(c);
    ccache__detach_wlocked(c, e, &c->n.removed, &gy);
    ccache__readers_unlock(c);
  }
  pthread_mutex_unlock(&c->wlock);
  ccache__graveyard_drain(c, &gy);
  return e ? CCACHE_OK : CCACHE_MISS;
}

int ccache_clear(ccache *c) {
  if (!c) return CCACHE_EINVAL;
  if (ccache__forked(c)) return CCACHE_EFORKED;
  ccache__graveyard gy = {NULL, NULL};
  pthread_mutex_lock(&c->wlock);
  ccache__readers_lock(c);
  ccache__clear_wlocked(c, &c->n.cleared, &gy);
  ccache__readers_unlock(c);
  pthread_mutex_unlock(&c->wlock);
  ccache__graveyard_drain(c, &gy);
  return CCACHE_OK;
}
