/*
 * readers.c - the closure table's reader side: one reader per (thread,
 * cache), so a hit writes only memory its own thread owns.
 *
 * The problem.  Every serving thread fetches the same few hundred call sites.
 * Any word that two threads' hits write - a lock, a counter, an entry's
 * reference count - moves its cache line between cores on every hit, and
 * two threads then do less than one.  uthash cannot be read while it
 * changes, so readers must still exclude writers.
 *
 * The mechanism (as Linux's percpu-rw-semaphore, with threads for CPUs).  A
 * reader announces itself in its own `active` word, issues one StoreLoad
 * fence, and checks the cache's `writer_waiting` word, which only writers
 * write.  A writer, holding wlock, sets writer_waiting, issues the same fence
 * and waits until every reader's `active` is 0.  Either the writer sees the
 * reader (and waits for it) or the reader sees the writer (and takes wlock
 * instead): never neither.  Leases taken by hits sit in the reader's slots;
 * the entry's shared count is untouched while the entry is in the table.
 *
 * The trade-off.  Writers pay: they read every reader's line (O(threads that
 * ever used the cache and are alive)), and, when entries leave, look through
 * the occupied slots.  Hits pay one fence, on the thread's own stack.  A lease
 * released on another thread than its taker's, taken under wlock (a compile's
 * own lease and its single-flight waiters'), or taken when the reader's 32
 * slots are full, counts on the entry's refs (a shared write), as before.
 *
 * Lifetime.  A reader is made on its thread's first call on a cache (one
 * allocation, under the registry lock and wlock) and found again through a
 * small initial-exec TLS array keyed by the cache's id.  When the thread
 * exits, a pthread key destructor retires its readers: their counts move to
 * the cache's retired counts, their slot leases to the entries' refs, and
 * they are freed.  ccache_close() frees the readers of its cache and
 * unlinks them from their threads.  Lock order: registry lock, then wlock
 * (docs/design.md's lock tree).
 */
#include <sched.h>
#include <string.h>

#include "core/internal.h"
#include "core/readers.h"

_Thread_local ccache__tls ccache__tls_readers __attribute__((tls_model("initial-exec")));

/* The calling thread's readers (of every cache), under readers_mu. */
static _Thread_local ccache__reader *tls_list;

static ccache__mutex readers_mu = {.posix = PTHREAD_MUTEX_INITIALIZER};
static pthread_key_t exit_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t next_id = 1;

static void thread_exit(void *unused);

/* In a fork child only this thread exists, and the caches made before the
 * fork refuse every call: forget this thread's readers of them (never freed:
 * the child abandons those caches' memory). */
static void after_fork_child(void) {
  (void)ccache__mutex_init(&readers_mu);
  tls_list = NULL;
  ccache__tls_readers = (ccache__tls){{0}, {0}, 0};
}

static void init_once(void) {
  int err = pthread_key_create(&exit_key, thread_exit);
  if (err) ccache__panic("pthread_key_create", err);
  err = pthread_atfork(NULL, NULL, after_fork_child);
  if (err) ccache__panic("pthread_atfork", err);
}

void ccache__readers_init(ccache *c) {
  ccache__read_side_init();
  int err = pthread_once(&once, init_once);
  if (err) ccache__panic("pthread_once", err);
  atomic_init(&c->id, atomic_fetch_add(&next_id, 1));
  atomic_init(&c->fast_id, CCACHE__NO_ID);
  ccache__readers_publish(c);
  c->readers = NULL;
  c->nreaders = c->readers_cap = 0;
  atomic_init(&c->writer_waiting, ccache__asym ? 0 : CCACHE__WW_FENCED);
}

/* ----------------------------------------------------------- registry */

ccache__reader *ccache__reader_peek_rest(uint64_t id) {
  ccache__tls *t = &ccache__tls_readers;
  for (unsigned i = 1; i < CCACHE__TLS_READERS; i++)
    if (t->id[i] == id) {
      ccache__reader *r = t->r[i];
      t->id[i] = t->id[0]; /* most recent first: the fast paths look at [0] */
      t->r[i] = t->r[0];
      t->id[0] = id;
      t->r[0] = r;
      return r;
    }
  return NULL;
}

/* The fast paths (closure.c) skip the gate: they trust that a reader found
 * in the TLS array belongs to an open cache.  So a closing cache's readers
 * are never remembered, and close renews the id (ccache__readers_renew_id);
 * a fork child starts with an empty array (after_fork_child). */
static void remember(ccache *c, ccache__reader *r) {
  if (ccache__closing(c)) return;
  ccache__tls *t = &ccache__tls_readers;
  unsigned i = t->next++ % CCACHE__TLS_READERS; /* evicts one, then moves it to the front */
  t->id[i] = t->id[0];
  t->r[i] = t->r[0];
  t->id[0] = atomic_load_explicit(&c->id, memory_order_relaxed);
  t->r[0] = r;
}

void ccache__readers_renew_id(ccache *c) {
  atomic_store_explicit(&c->id, atomic_fetch_add(&next_id, 1), memory_order_relaxed);
  ccache__readers_publish(c);
}

void ccache__readers_publish(ccache *c) {
  bool untimed = atomic_load(&c->ttl_ms) == CCACHE_UNBOUNDED;
  atomic_store_explicit(&c->fast_id, untimed ? atomic_load(&c->id) : CCACHE__NO_ID,
                        memory_order_relaxed);
}

static void forget_tls(uint64_t id) {
  ccache__tls *t = &ccache__tls_readers;
  for (unsigned i = 0; i < CCACHE__TLS_READERS; i++)
    if (t->id[i] == id) t->id[i] = 0;
}

static void link_thread(ccache__reader *r) {
  r->tnext = tls_list;
  r->tpprev = &tls_list;
  if (tls_list) tls_list->tpprev = &r->tnext;
  tls_list = r;
}

static void unlink_thread(ccache__reader *r) {
  *r->tpprev = r->tnext;
  if (r->tnext) r->tnext->tpprev = r->tpprev;
}

/* wlock held.  false when the array cannot grow (the thread then has no
 * reader: its calls take the locked paths). */
static bool link_cache(ccache *c, ccache__reader *r) {
  if (c->nreaders == c->readers_cap) {
    uint32_t cap = c->readers_cap ? 2 * c->readers_cap : 16;
    ccache__reader **a = ccache__malloc(&c->mem, cap * sizeof *a);
    if (!a) return false;
    if (c->nreaders) memcpy(a, c->readers, c->nreaders * sizeof *a);
    ccache__free(&c->mem, c->readers);
    c->readers = a;
    c->readers_cap = cap;
  }
  r->index = c->nreaders;
  c->readers[c->nreaders++] = r;
  return true;
}

static void unlink_cache(ccache *c, ccache__reader *r) {
  ccache__reader *last = c->readers[--c->nreaders];
  c->readers[r->index] = last;
  last->index = r->index;
}

ccache__reader *ccache__reader_find(ccache *c) {
  ccache__reader *r;
  ccache__lock(&readers_mu);
  for (r = tls_list; r && r->cache != c; r = r->tnext) {
  }
  if (!r) {
    /* A reader is a few hundred bytes; it lives as long as the thread (or the cache).
     * Aligned by hand to its own pair of lines (the allocator promises only
     * malloc's alignment). */
    void *raw = ccache__calloc(&c->mem, sizeof *r + CCACHE__READER_ALIGN);
    r = raw ? (ccache__reader *)(((uintptr_t)raw + CCACHE__READER_ALIGN - 1) &
                                 ~(uintptr_t)(CCACHE__READER_ALIGN - 1))
            : NULL;
    if (r) {
      r->raw = raw;
      r->cache = c;
      atomic_init(&r->free, CCACHE__SLOT_MASK);
      ccache__lock(&c->wlock); /* writers walk the cache's array */
      bool linked = link_cache(c, r);
      ccache__unlock(&c->wlock);
      if (linked) {
        link_thread(r);
        int err = pthread_setspecific(exit_key, &tls_list); /* any non-NULL value */
        if (err) ccache__panic("pthread_setspecific", err);
      } else {
        ccache__free(&c->mem, raw);
        r = NULL;
      }
    }
  }
  ccache__unlock(&readers_mu);
  if (r) remember(c, r);
  return r;
}

/* Move what r holds to its cache (wlock held): counts to the retired ones,
 * slot leases to their entries' refs. */
static uint64_t held(ccache__reader *r) {
  return ~atomic_load_explicit(&r->free, memory_order_relaxed) & CCACHE__SLOT_MASK;
}

static void retire_locked(ccache *c, ccache__reader *r) {
  c->hits_retired += atomic_load_explicit(&r->hits, memory_order_relaxed);
  c->misses_retired += atomic_load_explicit(&r->misses, memory_order_relaxed);
  c->leases_retired += atomic_load_explicit(&r->leases, memory_order_relaxed);
  for (uint64_t h = held(r); h; h &= h - 1) {
    ccache__entry *e = r->slot[__builtin_ctzll(h)];
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    c->leases_retired++;
  }
  unlink_cache(c, r);
}

static void thread_exit(void *unused) {
  (void)unused;
  ccache__lock(&readers_mu);
  while (tls_list) {
    ccache__reader *r = tls_list;
    ccache *c = r->cache;
    unlink_thread(r);
    ccache__lock(&c->wlock);
    retire_locked(c, r);
    ccache__unlock(&c->wlock);
    ccache__free(&c->mem, r->raw);
  }
  ccache__unlock(&readers_mu);
  ccache__tls_readers = (ccache__tls){{0}, {0}, 0};
}

void ccache__readers_destroy(ccache *c) {
  ccache__lock(&readers_mu);
  for (uint32_t i = 0; i < c->nreaders; i++) unlink_thread(c->readers[i]);
  ccache__unlock(&readers_mu);
  forget_tls(atomic_load_explicit(&c->id, memory_order_relaxed));
  for (uint32_t i = 0; i < c->nreaders; i++) ccache__free(&c->mem, c->readers[i]->raw);
  ccache__free(&c->mem, c->readers);
  c->readers = NULL;
  c->nreaders = c->readers_cap = 0;
}

/* ----------------------------------------------------------- counting */

void ccache__reader_count(ccache *c, bool hit) {
  ccache__reader *r = ccache__reader_get(c);
  if (CCACHE__LIKELY(r != NULL)) {
    ccache__bump(hit ? &r->hits : &r->misses, 1);
    return;
  }
  ccache__lock(&c->wlock);
  if (hit)
    c->hits_retired++;
  else
    c->misses_retired++;
  ccache__unlock(&c->wlock);
}

void ccache__reader_leases_locked(ccache *c, int64_t n) {
  ccache__assert_held(&c->wlock);
  ccache__reader *r = ccache__reader_peek(c); /* registering would take readers_mu after wlock */
  if (r)
    ccache__bump(&r->leases, (uint64_t)n);
  else
    c->leases_retired += (uint64_t)n;
}

void ccache__readers_sum(ccache *c, uint64_t *hits, uint64_t *misses, uint64_t *leases) {
  ccache__assert_held(&c->wlock);
  uint64_t h = c->hits_retired, m = c->misses_retired, l = c->leases_retired;
  for (uint32_t k = 0; k < c->nreaders; k++) {
    ccache__reader *r = c->readers[k];
    h += atomic_load_explicit(&r->hits, memory_order_relaxed);
    m += atomic_load_explicit(&r->misses, memory_order_relaxed);
    l += atomic_load_explicit(&r->leases, memory_order_relaxed) +
         (uint64_t)__builtin_popcountll(held(r));
  }
  *hits = h;
  *misses = m;
  *leases = l;
}

/* ------------------------------------------------------------ writers */

/* Out of line: readers are almost never inside a section when a writer
 * looks. */
__attribute__((noinline)) static void wait_quiet(ccache__reader *r) {
  for (unsigned spins = 0; ccache__load_fenced(&r->active); spins++) {
    if (spins < 128) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      sched_yield(); /* more threads than cores: the reader may be preempted */
    }
  }
}

bool ccache__readers_others(ccache *c) {
  ccache__assert_held(&c->wlock);
  return c->nreaders > 1 || (c->nreaders == 1 && c->readers[0] != ccache__reader_peek(c));
}

/* Set writer_waiting's writer bit, ordered before the loads of the
 * readers' flags.  Only writers (under wlock) write the word. */
static void announce_writer(ccache *c) {
  uint32_t ww = atomic_load_explicit(&c->writer_waiting, memory_order_relaxed) | CCACHE__WW_WRITER;
  if (ww & CCACHE__WW_FENCED) {
    ccache__store_fence(&c->writer_waiting, ww);
    return;
  }
#if defined(__SANITIZE_THREAD__)
  atomic_store_explicit(&c->writer_waiting, ww, memory_order_seq_cst);
#else
  atomic_store_explicit(&c->writer_waiting, ww, memory_order_relaxed);
#endif
  /* Alone, no barrier is needed: no other thread can be in a section. */
  if (ccache__readers_others(c)) {
    ccache__heavy_barrier();
    c->heavy_barriers++;
  }
}

void ccache__readers_block(ccache *c) {
  ccache__assert_held(&c->wlock);
  c->reader_blocks++;
  announce_writer(c);
  ccache__reader **rv = c->readers;
  for (uint32_t k = 0, n = c->nreaders; k < n; k++)
    if (CCACHE__UNLIKELY(ccache__load_fenced(&rv[k]->active))) wait_quiet(rv[k]);
}

void ccache__readers_unblock(ccache *c) {
  ccache__assert_held(&c->wlock);
  uint32_t ww = atomic_load_explicit(&c->writer_waiting, memory_order_relaxed);
  atomic_store_explicit(&c->writer_waiting, ww & ~CCACHE__WW_WRITER, memory_order_release);
}

void ccache__readers_fold_locked(ccache *c) {
  ccache__assert_held(&c->wlock);
  for (uint32_t k = 0, n = c->nreaders; k < n; k++) {
    ccache__reader *r = c->readers[k];
    for (uint64_t h = held(r); h; h &= h - 1) {
      unsigned i = (unsigned)__builtin_ctzll(h);
      ccache__entry *e = r->slot[i];
      if (e->flags & CCACHE__E_DETACHED) {
        /* The lease stays out, now counted in refs and on the reader. */
        atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
        ccache__bump(&r->leases, 1);
        ccache__free_slot(r, i);
        r->slot[i] = NULL; /* so the lease's release no longer matches it */
      }
    }
  }
}

uint64_t ccache__readers_slots_of(ccache *c, const ccache__entry *e) {
  ccache__assert_held(&c->wlock);
  uint64_t n = 0;
  for (uint32_t k = 0; k < c->nreaders; k++)
    for (uint64_t h = held(c->readers[k]); h; h &= h - 1)
      n += c->readers[k]->slot[__builtin_ctzll(h)] == e;
  return n;
}
