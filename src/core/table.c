/*
 * table.c - the closure table: entries and their lifetime, lookup, insert,
 * detach, clear, cost charging, the bounds' evictions, expiry, the graveyard,
 * and the writer section every change goes through.
 *
 * One uthash table.  Readers (hits) run in read-side sections of readers.c
 * and never see the structure change under them; writers hold wlock and block
 * the reader side for the moment they change the structure.
 *
 * FIFO: uthash keeps the table's items in insertion order (its app-order
 * list), so its head is the oldest entry and eviction and sweeps cost
 * O(evicted).  Insert times never decrease along it, so expired entries are
 * always a prefix.
 *
 * An entry's lifetime is its atomic refs (see internal.h).  Detaching an entry
 * moves it to the writer section's graveyard; the graveyard is drained after
 * every lock is released, so destroy callbacks never run under a lock.
 */
#include <string.h>

#include "core/table.h"

#ifdef CCACHE_TESTING
void (*ccache__after_write_hook)(ccache *c);
#endif

/* ------------------------------------------------------------- entries */

/* A re-put of the very closure pointer an entry already holds must not
 * destroy it, yet leases on the replaced entry must keep it valid.  So the new
 * entry *borrows* the closure: its closure field points at the owning entry
 * (the first one that stored it) and holds a reference on it; the closure is
 * destroyed when the owner's last reference goes (entry.c). */
static ccache__entry *owner_of(ccache__entry *e) {
  return (e->flags & CCACHE__E_BORROWED) ? (ccache__entry *)e->closure : e;
}

/* ------------------------------------------------------------ the hit path */

/* The slow path of a lookup: a writer holds (or wants) the table, or this
 * thread has no reader.  The same lookup under wlock; counts on the reader,
 * or in the retired counts. */
int ccache__lookup_slow(ccache *c, ccache__reader *r, const ccache_strong_key *key, unsigned hv,
                        uint64_t now, uint64_t ttl, unsigned count, ccache_lease *out) {
  ccache__entry *e;
  ccache__lock(&c->wlock);
  HASH_FIND_BYHASHVALUE(hh, c->table, key, c->klen, hv, e);
  bool hit = e && !ccache__expired(e->ins_ms, now, ttl);
  if (hit) {
    ccache__take_lease(r, e, out);
    if (!r && !out->internal_[1]) c->leases_retired++;
  }
  if (count & (hit ? CCACHE__COUNT_HIT : CCACHE__COUNT_MISS)) {
    if (r)
      ccache__bump(hit ? &r->hits : &r->misses, 1);
    else if (hit)
      c->hits_retired++;
    else
      c->misses_retired++;
  }
  ccache__unlock(&c->wlock);
  return hit ? CCACHE_OK : e ? CCACHE__EXPIRED : CCACHE_MISS;
}

int ccache__lookup(ccache *c, const ccache_strong_key *key, uint64_t now, uint64_t ttl,
                   unsigned count, ccache_lease *out) {
  return ccache__hit_lookup(c, key, now, ttl, count, out);
}

/* Inside a read-side section or under wlock, for a lease that is not in
 * r's slot: it counts in e->refs.  Returns true when e has left the table:
 * refs is then exact, and the caller drops the lease's reference there,
 * outside (it may be the last). */
static bool release_refs(ccache *c, ccache__reader *r, ccache__entry *e) {
  if (r)
    ccache__bump(&r->leases, (uint64_t)-1);
  else
    c->leases_retired--;
  if (!(e->flags & CCACHE__E_DETACHED)) {
    /* Taken under wlock, with no free slot, or by another thread (whose slot
     * keeps its count until e leaves and is folded): the table holds one
     * more, so this is never the last. */
    atomic_fetch_sub_explicit(&e->refs, 1, memory_order_relaxed);
    return false;
  }
  return true;
}

void ccache__release_slow(ccache *c, ccache__reader *r, ccache__entry *e, void *slot) {
  bool left;
  if (r && ccache__reader_enter(c, r)) {
    left = !ccache__own_slot(r, e, slot) && release_refs(c, r, e);
    ccache__reader_exit(r);
  } else {
    ccache__lock(&c->wlock);
    left = !ccache__own_slot(r, e, slot) && release_refs(c, r, e);
    ccache__unlock(&c->wlock);
  }
  if (left) ccache__entry_unref(c, e);
}

/* ------------------------------------------------------- writer sections */

void ccache__wsec_begin_(ccache *c, ccache__wsec *w, const char *api) {
  w->api = api;
  w->gy.head = w->gy.tail = NULL;
  w->readers_blocked = false;
  w->defer = false;
  w->ring_alarm = false;
  ccache__lock(&c->wlock);
}

/* Whether every structural change blocks the reader side first: with
 * fences (the fallback: as before membarrier), and in ThreadSanitizer
 * builds, which cannot know that readers meet only whole entries and would
 * report uthash's unblocked add and delete as races (docs/design.md, "The
 * writer's rule").  In membarrier mode, only what uthash reallocates. */
static bool blocks_always(ccache *c) {
#if defined(__SANITIZE_THREAD__)
  (void)c;
  return true;
#else
  return ccache__fenced(c);
#endif
}

/* Before the first structural change of a section that readers may not
 * meet half done. */
static void block_readers(ccache *c, ccache__wsec *w) {
  if (!w->readers_blocked) {
    ccache__readers_block(c);
    w->readers_blocked = true;
  }
}

void ccache__wsec_unblock(ccache *c, ccache__wsec *w) {
  if (w->readers_blocked) {
    ccache__readers_unblock(c);
    w->readers_blocked = false;
  }
}

/* Drops the table's reference of every detached entry, in the order they
 * left; this is where destroys run, with no lock held. */
static void graveyard_drain(ccache *c, ccache__graveyard *gy) {
  ccache__entry *e = gy->head;
  gy->head = gy->tail = NULL;
  while (e) {
    ccache__entry *next = e->hh.next;
    if (c->on_event) { /* before the unref: the entry may go with it */
      ccache_event ev;
      memset(&ev, 0, sizeof ev);
      ev.kind = CCACHE_EVENT_EVICT;
      ev.level = CCACHE_LEVEL_CLOSURE;
      ev.key = e->key;
      ev.cause = (int)(e->gone >> CCACHE__E_CAUSE_SHIFT);
      ccache__event_emit(c, &ev);
    }
    ccache__entry_unref(c, e);
    e = next;
  }
}

/* Reclaim what left the table (wlock held): with the reader side blocked -
 * no section that may have found a pending entry still runs, none can
 * start - the pending entries become DETACHED, the leases in readers' slots
 * on them move to their refs, and they join w's graveyard, whose table
 * references are dropped once every lock is released. */
static void reclaim_locked(ccache *c, ccache__wsec *w) {
  block_readers(c, w);
  for (ccache__entry *e = c->pending.head; e; e = e->hh.next) e->flags |= CCACHE__E_DETACHED;
  ccache__readers_fold_locked(c);
  if (w->gy.tail)
    w->gy.tail->hh.next = c->pending.head;
  else
    w->gy.head = c->pending.head;
  w->gy.tail = c->pending.tail;
  c->pending.head = c->pending.tail = NULL;
  c->npending = 0;
}

/* Whether the pending entries wait for a later section: only a put's (the
 * one writer that runs per compile, docs/design.md "The writer's rule"), in
 * membarrier mode, while another thread has a reader, the reader side is
 * not blocked anyway, and the batch is not full. */
static bool defer_reclaim(ccache *c, const ccache__wsec *w) {
#if defined(__SANITIZE_THREAD__)
  bool blocked = false; /* blocked for every change there: keep the real build's batches */
#else
  bool blocked = w->readers_blocked;
#endif
  return w->defer && !ccache__fenced(c) && !blocked && c->npending < CCACHE_RECLAIM_BATCH &&
         ccache__readers_others(c);
}

void ccache__wsec_end(ccache *c, ccache__wsec *w) {
  if (c->pending.head && !defer_reclaim(c, w)) reclaim_locked(c, w);
  ccache__wsec_unblock(c, w);
  ccache__unlock(&c->wlock);
  if (w->ring_alarm) ccache__alarm_ring(c);
#ifdef CCACHE_TESTING
  if (ccache__after_write_hook) ccache__after_write_hook(c);
#endif
  graveyard_drain(c, &w->gy);
}

/* ------------------------------------------------------------- writers */

ccache__entry *ccache__find_locked_k(ccache *c, const ccache_strong_key *key) {
  ccache__assert_held(&c->wlock);
  /* Under wlock the structure cannot change: no read-side section needed. */
  ccache__entry *e;
  HASH_FIND_BYHASHVALUE(hh, c->table, key, c->klen, ccache__key_hash(key->key), e);
  return e;
}

ccache__entry *ccache__find_locked(ccache *c, ccache_key key) {
  ccache_strong_key k = ccache__fast_key(key);
  return ccache__find_locked_k(c, &k);
}

/* After a failed insert the closure is the caller's to destroy, unless the
 * entry now in the table under key holds that very pointer (a re-put, or a
 * compile that returned what was put meanwhile).  Both ccache_put() and the
 * closure compile once destroyed such a closure twice. */
bool ccache__closure_in_use_locked(ccache *c, const ccache_strong_key *key, const void *closure) {
  ccache__entry *cur = ccache__find_locked_k(c, key);
  return cur && ccache__entry_closure(cur) == closure;
}

/* For a flight's owner and waiters: in refs, since the waiters' readers
 * are theirs to write. */
void ccache__lease_locked(ccache *c, ccache__entry *e, uint32_t n, ccache_lease *out) {
  ccache__assert_held(&c->wlock);
  atomic_fetch_add_explicit(&e->refs, n, memory_order_relaxed);
  ccache__reader_leases_locked(c, n);
  if (out) ccache__lease_fill(out, e, NULL); /* counted in e->refs */
}

/* The cost of a program is charged once, while at least one entry in the
 * table refers to it; 128 bits wide so no sum of 64-bit costs wraps. */
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

/* The cause, from the counter it is counted in (NULL: a replacement, or
 * close's teardown). */
static unsigned cause_of(ccache *c, const uint64_t *counter) {
  if (counter == &c->n.evicted_capacity) return CCACHE_CAUSE_CAPACITY;
  if (counter == &c->n.evicted_ttl) return CCACHE_CAUSE_TTL;
  if (counter == &c->n.evicted_cost) return CCACHE_CAUSE_COST;
  if (counter == &c->n.removed) return CCACHE_CAUSE_REMOVED;
  if (counter == &c->n.cleared) return CCACHE_CAUSE_CLEARED;
  return ccache__closing(c) ? CCACHE_CAUSE_CLOSED : CCACHE_CAUSE_REPLACED;
}

/* A key evicted by a bound: remembered so a miss on it soon after counts in
 * misses_evicted.  A small ring of key hashes (64-bit, so a false match
 * needs a 64-bit collision), written under wlock, read by misses without. */
static uint64_t ring_hash(ccache_key k) {
  /* Both halves through odd multipliers and a murmur3 finaliser: keys that
   * are not fingerprints (sequential, or with related halves) still differ.
   * Never 0, the ring's empty slot. */
  uint64_t x = k.lo * 0x9E3779B97F4A7C15ull ^ k.hi * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  return x | 1u;
}

static void ring_push_locked(ccache *c, ccache_key key) {
  atomic_store_explicit(&c->evict_ring[c->evict_next++ % CCACHE__EVICT_RING], ring_hash(key),
                        memory_order_relaxed);
}

void ccache__count_miss_evicted(ccache *c, ccache_key key) {
  uint64_t h = ring_hash(key);
  for (unsigned i = 0; i < CCACHE__EVICT_RING; i++)
    if (atomic_load_explicit(&c->evict_ring[i], memory_order_relaxed) == h) {
      atomic_fetch_add_explicit(&c->misses_evicted, 1, memory_order_relaxed);
      return;
    }
}

void ccache__detach_locked(ccache *c, ccache__wsec *w, ccache__entry *e, uint64_t *cause) {
  CCACHE__UTHASH_SCOPE(&c->mem);
  ccache__assert_held(&c->wlock);
  /* Readers may meet e half unlinked: they find it or not, and its chain
   * link still leads on (entries are freed only after a reclaim).  Not so
   * for the last entry: uthash frees the table with it. */
  if (blocks_always(c) || (!e->hh.prev && !e->hh.next)) block_readers(c, w);
  HASH_DELETE(hh, c->table, e);
  unsigned why = cause_of(c, cause);
  e->gone = (uint16_t)(CCACHE__E_GONE | why << CCACHE__E_CAUSE_SHIFT);
  c->items--;
  uncharge_locked(c, e->program);
  if (cause) (*cause)++;
  if (why == CCACHE_CAUSE_CAPACITY || why == CCACHE_CAUSE_COST) ring_push_locked(c, e->key);
  ccache__limbo_link_locked(c, e);
  graveyard_push(&c->pending, e);
  c->npending++;
}

void ccache__clear_locked(ccache *c, ccache__wsec *w, uint64_t *cause) {
  ccache__entry *e, *tmp;
  HASH_ITER(hh, c->table, e, tmp) ccache__detach_locked(c, w, e, cause);
}

/* "Unbounded" (CCACHE_UNBOUNDED, i.e. UINT64_MAX) never evicts for that
 * bound, however large the sum of costs grows: the 128-bit total may pass
 * 2^64 and still no entry leaves for cost. */
static bool over_items(const ccache *c) {
  return c->max_items != CCACHE_UNBOUNDED && c->items > c->max_items;
}

static bool over_cost(const ccache *c) {
  return c->max_cost != CCACHE_UNBOUNDED && (c->cost.hi || c->cost.lo > c->max_cost);
}

/* Items first (each insert evicts at most what it added), then cost: the
 * oldest entries (the table's head) leave until the charged total fits, but
 * never `keep`, the entry just inserted.  Evicting one of several entries that
 * share a program frees nothing, so the loop simply goes on.  O(evicted). */
static void enforce_locked(ccache *c, ccache__wsec *w, const ccache__entry *keep) {
  while (over_items(c) && c->table && c->table != keep)
    ccache__detach_locked(c, w, c->table, &c->n.evicted_capacity);
  while (over_cost(c) && c->table && c->table != keep)
    ccache__detach_locked(c, w, c->table, &c->n.evicted_cost);
}

void ccache__set_bounds_locked(ccache *c, ccache__wsec *w, uint64_t max_items, uint64_t max_cost) {
  ccache__assert_held(&c->wlock);
  c->max_items = max_items;
  c->max_cost = max_cost;
  enforce_locked(c, w, NULL);
}

/* An insert readers may meet half done (membarrier mode): everything a
 * reader follows from the bucket's head - the handle's hash, key, length,
 * table and chain link, and the entry's own fields - holds its final value
 * before uthash's store of that head publishes the entry (uthash then
 * stores the same values again).  The release fence orders them before it:
 * a compiler barrier on x86; readers' loads depend on the pointer. */
static void prepare_publish(ccache *c, ccache__entry *e, unsigned hv) {
  UT_hash_table *t = c->table->hh.tbl;
  unsigned b;
  HASH_TO_BKT(hv, t->num_buckets, b);
  e->hh.hashv = hv;
  e->hh.key = &e->key;
  e->hh.keylen = c->klen;
  e->hh.tbl = t;
  e->hh.hh_next = t->buckets[b].hh_head;
#if !defined(__SANITIZE_THREAD__) /* never reached there: blocks_always() */
  atomic_thread_fence(memory_order_release);
#endif
}

/* Whether uthash's add will double the buckets (uthash.h's
 * HASH_ADD_TO_BKT): it then rehashes every chain and frees the old array,
 * which no reader may be walking. */
static bool will_expand(const ccache *c, unsigned hv) {
  const UT_hash_table *t = c->table->hh.tbl;
  unsigned b;
  HASH_TO_BKT(hv, t->num_buckets, b);
  const UT_hash_bucket *k = &t->buckets[b];
  return !t->noexpand && k->count + 1 >= (k->expand_mult + 1u) * HASH_BKT_CAPACITY_THRESH;
}

int ccache__insert_locked(ccache *c, ccache__wsec *w, ccache__entry *e,
                          const ccache_strong_key *key, void *closure, ccache_program *p,
                          uint64_t now) {
  CCACHE__UTHASH_SCOPE(&c->mem);
  ccache__assert_held(&c->wlock);
  unsigned hv = ccache__key_hash(key->key);
  ccache__entry *old = ccache__find_locked_k(c, key);
  ccache__entry *owner = NULL;

  e->key = key->key;
  if (c->strong) e->check[0] = key->check;
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

  CCACHE__MISUSE(ccache__misuse_closure_in(c, closure, owner != NULL, w->api));
  /* Add before deleting the old entry: the add is the only step that can
   * fail, and if it does the table is exactly as before. */
  w->defer = true;
  if (blocks_always(c) || !c->table || will_expand(c, hv))
    block_readers(c, w);
  else
    prepare_publish(c, e, hv);
  HASH_ADD_KEYPTR_BYHASHVALUE(hh, c->table, &e->key, c->klen, hv, e);
  if (uh_oom) return CCACHE_ENOMEM;
  if (owner) atomic_fetch_add_explicit(&owner->refs, 1, memory_order_relaxed);
  ccache__program_ref(c, p);
  c->next_idx++;
  c->last_ins_ms = e->ins_ms;
  c->n.inserts++;
  if (c->items++ == 0) w->ring_alarm = true;
  charge_locked(c, p);
  if (old) {
    c->n.replaced++;
    ccache__detach_locked(c, w, old, NULL); /* items back to where it was */
  }
  enforce_locked(c, w, e);
  return CCACHE_OK;
}

/* ---------------------------------------------------------------- expiry */

void ccache__expire_key(ccache *c, const ccache_strong_key *key, uint64_t now) {
  ccache__wsec w;
  ccache__wsec_begin(c, &w);
  ccache__entry *e = ccache__find_locked_k(c, key);
  if (e && ccache__expired(e->ins_ms, now, atomic_load(&c->ttl_ms)))
    ccache__detach_locked(c, &w, e, &c->n.evicted_ttl);
  ccache__wsec_end(c, &w);
}

int64_t ccache__sweep(ccache *c, uint64_t now, uint64_t *next) {
  ccache__wsec w;
  int64_t n = 0;
  ccache__wsec_begin(c, &w);
  uint64_t ttl = atomic_load(&c->ttl_ms);
  /* Expired entries are a prefix of the FIFO: stop at the first live one.
   * The reader side is only blocked when there is something to remove. */
  while (c->table && ccache__expired(c->table->ins_ms, now, ttl)) {
    ccache__detach_locked(c, &w, c->table, &c->n.evicted_ttl);
    n++;
  }
  if (next) {
    uint64_t t = c->table ? c->table->ins_ms : UINT64_MAX;
    *next =
        ttl == CCACHE_UNBOUNDED || t == UINT64_MAX || ttl > UINT64_MAX - t ? UINT64_MAX : t + ttl;
  }
  ccache__wsec_end(c, &w);
  return n;
}
