/*
 * closure.c - the closure table: fetch, leases, put, remove, clear.
 *
 * The table is split into CCACHE__NSHARDS uthash tables by the key's hash, so
 * that a hit takes only its shard's mutex and writes only that shard's line
 * and the entry's own reference count.  Every structural change also holds
 * the writer lock, which keeps the FIFO, the counts and the cost exact across
 * shards (puts and evictions serialize; hits do not).
 *
 * FIFO: uthash keeps each table's items in insertion order (its app-order
 * list), so each shard's head is that shard's oldest entry, and the global
 * oldest is the shard head with the lowest insert index (bounds.c).
 *
 * An entry's lifetime is its atomic refs (see internal.h).  Detaching an entry
 * from the table moves it to a graveyard; the graveyard is drained after the
 * locks are released, so destroy callbacks never run under a lock.
 */
#include <string.h>

#include "internal.h"

/* Result of ccache__lookup when the entry found has expired. */
#define CCACHE__EXPIRED 2

unsigned ccache__key_hash(ccache_key key) {
  unsigned hv;
  HASH_VALUE(&key, sizeof key, hv);
  return hv;
}

/* uthash picks a bucket from the low bits of the hash; the shard comes from
 * the high bits so the two choices stay independent. */
ccache__shard *ccache__shard_of(ccache *c, unsigned hashv) {
  return &c->shards[hashv >> (32 - CCACHE__SHARD_BITS)].s;
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

void ccache__lease_fill(ccache_lease *out, ccache__entry *e, ccache__shard *s) {
  out->closure = ccache__entry_closure(e);
  out->program = e->program->native;
  out->internal_[0] = e;
  out->internal_[1] = s;
}

/* Hit path: one shard lock, no allocation, no program refcount. */
int ccache__lookup(ccache *c, ccache_key key, uint64_t now, uint64_t ttl, bool count_miss,
                   ccache_lease *out) {
  unsigned hv = ccache__key_hash(key);
  ccache__shard *s = ccache__shard_of(c, hv);
  ccache__entry *e;
  pthread_mutex_lock(&s->mu);
  HASH_FIND_BYHASHVALUE(hh, s->head, &key, sizeof key, hv, e);
  if (CCACHE__LIKELY(e != NULL) && !ccache__expired(e->ins_ms, now, ttl)) {
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->leases_out, 1, memory_order_relaxed);
    s->hits++;
    pthread_mutex_unlock(&s->mu);
    ccache__lease_fill(out, e, s);
    return CCACHE_OK;
  }
  if (count_miss) s->misses++;
  pthread_mutex_unlock(&s->mu);
  return e ? CCACHE__EXPIRED : CCACHE_MISS;
}

/* Under wlock the shard tables cannot change, so a lookup needs no shard
 * lock (readers only read the structure). */
ccache__entry *ccache__find_locked(ccache *c, ccache_key key) {
  unsigned hv = ccache__key_hash(key);
  ccache__entry *e;
  HASH_FIND_BYHASHVALUE(hh, ccache__shard_of(c, hv)->head, &key, sizeof key, hv, e);
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
  if (e && ccache__expired(e->ins_ms, now, atomic_load(&c->ttl_ms)))
    ccache__detach_locked(c, e, &c->n.evicted_ttl, &gy);
  pthread_mutex_unlock(&c->wlock);
  ccache__graveyard_drain(c, &gy);
}

int ccache_fetch(ccache *c, ccache_key key, ccache_lease *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!c || !out) return CCACHE_EINVAL;
  if (ccache__forked(c)) return CCACHE_EFORKED;
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
  ccache__shard *s = lease->internal_[1];
  memset(lease, 0, sizeof *lease);
  atomic_fetch_sub_explicit(&s->leases_out, 1, memory_order_relaxed);
  ccache__entry_unref(c, e);
}

/* ------------------------------------------------------------ writers */

static void charge_locked(ccache *c, ccache_program *p) {
  if (p->table_refs++ == 0) c->cost_bytes += p->cost;
}

static void uncharge_locked(ccache *c, ccache_program *p) {
  ccache__assert(p->table_refs > 0);
  if (--p->table_refs == 0) c->cost_bytes -= p->cost;
}

static void shard_head_changed(ccache__shard *s) {
  s->head_idx = s->head ? s->head->idx : UINT64_MAX;
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

void ccache__detach_locked(ccache *c, ccache__entry *e, uint64_t *cause, ccache__graveyard *gy) {
  CCACHE__UTHASH_SCOPE(&c->mem);
  ccache__shard *s = ccache__shard_of(c, e->hh.hashv);
  pthread_mutex_lock(&s->mu);
  HASH_DELETE(hh, s->head, e);
  shard_head_changed(s);
  pthread_mutex_unlock(&s->mu);
  c->items--;
  uncharge_locked(c, e->program);
  if (cause) (*cause)++;
  graveyard_push(gy, e);
}

void ccache__clear_locked(ccache *c, uint64_t *cause, ccache__graveyard *gy) {
  CCACHE__UTHASH_SCOPE(&c->mem);
  for (unsigned i = 0; i < CCACHE__NSHARDS; i++) {
    ccache__shard *s = &c->shards[i].s;
    ccache__entry *e, *tmp;
    pthread_mutex_lock(&s->mu);
    HASH_ITER(hh, s->head, e, tmp) {
      HASH_DELETE(hh, s->head, e);
      c->items--;
      uncharge_locked(c, e->program);
      if (cause) (*cause)++;
      graveyard_push(gy, e);
    }
    shard_head_changed(s);
    pthread_mutex_unlock(&s->mu);
  }
}

int ccache__insert_locked(ccache *c, ccache__entry *e, ccache_key key, void *closure,
                          ccache_program *p, uint64_t now, ccache__graveyard *gy) {
  CCACHE__UTHASH_SCOPE(&c->mem);
  unsigned hv = ccache__key_hash(key);
  ccache__shard *s = ccache__shard_of(c, hv);
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
  pthread_mutex_lock(&s->mu);
  HASH_ADD_BYHASHVALUE(hh, s->head, key, sizeof e->key, hv, e);
  if (uh_oom) {
    pthread_mutex_unlock(&s->mu);
    return CCACHE_ENOMEM;
  }
  if (old) HASH_DELETE(hh, s->head, old);
  shard_head_changed(s);
  pthread_mutex_unlock(&s->mu);

  if (owner) atomic_fetch_add_explicit(&owner->refs, 1, memory_order_relaxed);
  ccache__program_ref(c, p);
  c->next_idx++;
  c->last_ins_ms = e->ins_ms;
  c->n.inserts++;
  charge_locked(c, p);
  if (old) {
    c->n.replaced++;
    uncharge_locked(c, old->program);
    graveyard_push(gy, old);
  } else {
    c->items++;
  }
  ccache__enforce_locked(c, e, gy);
  return CCACHE_OK;
}

int ccache_put(ccache *c, ccache_key key, void *closure, ccache_program *p) {
  if (!c) return CCACHE_EINVAL;
  int rc = CCACHE_OK;
  if (ccache__forked(c))
    rc = CCACHE_EFORKED;
  else if (!p || p->owner != c)
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
  if (e) ccache__detach_locked(c, e, &c->n.removed, &gy);
  pthread_mutex_unlock(&c->wlock);
  ccache__graveyard_drain(c, &gy);
  return e ? CCACHE_OK : CCACHE_MISS;
}

void ccache_clear(ccache *c) {
  if (!c || ccache__forked(c)) return;
  ccache__graveyard gy = {NULL, NULL};
  pthread_mutex_lock(&c->wlock);
  ccache__clear_locked(c, &c->n.cleared, &gy);
  pthread_mutex_unlock(&c->wlock);
  ccache__graveyard_drain(c, &gy);
}
