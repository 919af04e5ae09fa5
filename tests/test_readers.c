/*
 * test_readers.c - the per-thread readers (src/readers.c): leases held in a
 * reader's slots, released on the taking thread or another one, overflowing
 * the slots, outliving the thread that took them; readers retired at thread
 * exit and freed at close; a reader that cannot be allocated.  Every case
 * counts destroys, hits and leases exactly.
 *
 * Worker threads record results in plain variables; only the main thread
 * asserts (cmocka is not thread-safe).
 */
#include <pthread.h>
#include <stdlib.h>

#include "core/internal.h"
#include "core/readers.h"
#include "support.h"

#define U CCACHE_UNBOUNDED

static uint64_t readers_of(ccache *c) {
  uint64_t n = 0;
  ccache__lock(&c->wlock);
  n = c->nreaders;
  ccache__unlock(&c->wlock);
  return n;
}

static ccache *open_with_k1(t_ctx *t, uint64_t max_items) {
  ccache *c = t_open(t, max_items, U, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  ccache_program_release(c, p);
  return c;
}

/* ------------------------------------------------------------ threads */

typedef struct job {
  ccache *c;
  uint64_t key;
  int fetches, misses; /* fetches of key, then misses on absent keys */
  int keep;            /* leave the leases in out[] instead of releasing */
  ccache_lease out[4];
  int hits;
} job;

static void *job_main(void *arg) {
  job *j = arg;
  for (int i = 0; i < j->fetches; i++) {
    ccache_lease l;
    if (ccache_fetch(j->c, K(j->key), &l) != CCACHE_OK) continue;
    j->hits++;
    if (j->keep && i < 4)
      j->out[i] = l;
    else
      ccache_lease_release(j->c, &l);
  }
  for (int i = 0; i < j->misses; i++) {
    ccache_lease l;
    (void)ccache_fetch(j->c, K(1000000 + (uint64_t)i), &l);
  }
  return NULL;
}

static void run_job(job *j) {
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, job_main, j), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
}

typedef struct rel {
  ccache *c;
  ccache_lease *l;
} rel;

static void *release_main(void *arg) {
  rel *r = arg;
  ccache_lease_release(r->c, r->l);
  return NULL;
}

static void release_on_thread(ccache *c, ccache_lease *l) {
  rel r = {c, l};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, release_main, &r), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
}

/* ------------------------------------------------------------- cases */

/* Where a lease sits (a reader's slot, or the entry's refs) is visible in its
 * second word, except in the checked build, where that word is a token. */
#ifdef CCACHE_CHECKED
#define IN_SLOT(l) true
#define IN_REFS(l) true
#else
#define IN_SLOT(l) ((l).internal_[1] != NULL)
#define IN_REFS(l) ((l).internal_[1] == NULL)
#endif

/* A hit's lease sits in its thread's slot; the thread exits (its reader is
 * retired: the slot's count moves to the entry); the lease is released on
 * another thread; the entry is destroyed exactly once, when it leaves. */
static void lease_outlives_its_taker_thread(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = open_with_k1(&t, U);
  job j = {.c = c, .key = 1, .fetches = 1, .keep = 1};
  run_job(&j);
  assert_int_equal(j.hits, 1);
  assert_true(IN_SLOT(j.out[0]));     /* it was in a slot */
  assert_int_equal(readers_of(c), 0); /* retired at thread exit */
  ccache_stats s = t_stats(c);
  assert_int_equal(s.leases_out, 1);
  assert_int_equal(s.hits, 1);
  t_check(c, &t);
  ccache_lease_release(c, &j.out[0]);
  assert_int_equal(t_stats(c).leases_out, 0);
  assert_int_equal(t.closures_destroyed, 0); /* still in the table */
  assert_int_equal(ccache_remove(c, K(1)), CCACHE_OK);
  assert_int_equal(t.closures_destroyed, 1);
  assert_int_equal(t.programs_destroyed, 1);
  t_close(c);
}

/* The taker lives on; another thread releases the lease while the entry is
 * in the table (it must not be destroyed), then the entry is evicted: its
 * slot is folded in and the table's drop destroys it, once. */
static void cross_thread_release_while_taker_lives(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = open_with_k1(&t, 1);
  ccache_lease l;
  assert_int_equal(ccache_fetch(c, K(1), &l), CCACHE_OK);
  assert_true(IN_SLOT(l));
  release_on_thread(c, &l);
  assert_int_equal(t.closures_destroyed, 0);
  assert_int_equal(t_stats(c).leases_out, 0);
  t_check(c, &t);
  /* The taker takes and gives back another lease: another slot. */
  assert_int_equal(t_fetch_id(c, 1), 1);
  ccache_program *p = t_intern(c, 2, 200, 1);
  t_put(c, 2, 2, p); /* max_items 1: K1 leaves */
  ccache_program_release(c, p);
  assert_int_equal(t.closures_destroyed, 1);
  assert_int_equal(t.programs_destroyed, 1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.leases_out, 0);
  assert_int_equal(s.hits, 2);
  t_check(c, &t);
  t_close(c);
}

/* One thread holds 100 leases on one entry: 64 in slots, 36 in refs.  The
 * entry leaves; the last release, and only it, destroys it. */
static void slots_overflow_into_refs(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = open_with_k1(&t, U);
  ccache_lease l[100];
  int in_slots = 0;
  for (int i = 0; i < 100; i++) {
    assert_int_equal(ccache_fetch(c, K(1), &l[i]), CCACHE_OK);
    in_slots += IN_SLOT(l[i]);
  }
#ifndef CCACHE_CHECKED
  assert_int_equal(in_slots, CCACHE__SLOTS);
#endif
  assert_int_equal(t_stats(c).leases_out, 100);
  t_check(c, &t);
  assert_int_equal(ccache_remove(c, K(1)), CCACHE_OK);
  for (int i = 99; i > 0; i--) ccache_lease_release(c, &l[i]);
  assert_int_equal(t.closures_destroyed, 0);
  assert_int_equal(t_stats(c).leases_out, 1);
  ccache_lease_release(c, &l[0]);
  assert_int_equal(t.closures_destroyed, 1);
  assert_int_equal(t.programs_destroyed, 1);
  assert_int_equal(t_stats(c).leases_out, 0);
  t_close(c);
}

/* Threads that count hits and misses and exit: their counts survive them
 * exactly, and their readers are gone. */
static void exited_threads_counts_are_kept(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = open_with_k1(&t, U);
  for (int i = 0; i < 8; i++) {
    job j = {.c = c, .key = 1, .fetches = 10, .misses = 5};
    run_job(&j);
    assert_int_equal(j.hits, 10);
  }
  assert_int_equal(readers_of(c), 0);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.hits, 80);
  assert_int_equal(s.misses, 40);
  assert_int_equal(s.leases_out, 0);
  t_close(c);
}

/* Memory of the readers of 100,000 short-lived threads (scaled down under
 * the sanitizers): each fetches once; afterwards every byte they needed is
 * back and the hits are exact. */
typedef struct counting {
  _Atomic int64_t live;
} counting;

static void *count_alloc(void *ctx, size_t size) {
  size_t *p = malloc(sizeof(max_align_t) + size);
  if (!p) return NULL;
  *p = size;
  atomic_fetch_add(&((counting *)ctx)->live, (int64_t)size);
  return (char *)p + sizeof(max_align_t);
}

static void count_free(void *ctx, void *ptr) {
  size_t *p = (size_t *)((char *)ptr - sizeof(max_align_t));
  atomic_fetch_sub(&((counting *)ctx)->live, (int64_t)*p);
  free(p);
}

static void short_lived_threads_leave_memory_flat(void **state) {
  (void)state;
  t_ctx t = {0};
  counting mem = {0};
  ccache_config cfg;
  t_config(&cfg, &t);
  cfg.alloc = count_alloc;
  cfg.free = count_free;
  cfg.alloc_ctx = &mem;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  ccache_program_release(c, p);
  job first = {.c = c, .key = 1, .fetches = 1};
  run_job(&first); /* makes the cache's array of readers: it stays */
  int64_t before = atomic_load(&mem.live);
  const int n = 100000 / CCACHE_TEST_SCALE;
  for (int i = 0; i < n; i++) {
    job j = {.c = c, .key = 1, .fetches = 1};
    run_job(&j);
    if (j.hits != 1) fail_msg("thread %d missed", i);
  }
  assert_int_equal(atomic_load(&mem.live), before);
  assert_int_equal(readers_of(c), 0);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.hits, (uint64_t)n + 1);
  assert_int_equal(s.leases_out, 0);
  t_close(c);
  assert_int_equal(atomic_load(&mem.live), 0);
}

/* A cache closed while threads that used it live on: their readers are
 * freed with it; those threads then use other caches and exit cleanly. */
typedef struct later {
  ccache *a, *b;
  pthread_barrier_t *bar;
  int hits;
} later;

static void *later_main(void *arg) {
  later *l = arg;
  l->hits += t_fetch_id(l->a, 1) == 1;
  pthread_barrier_wait(l->bar); /* A is closed meanwhile */
  pthread_barrier_wait(l->bar);
  l->hits += t_fetch_id(l->b, 1) == 1;
  return NULL;
}

static void close_frees_readers_of_living_threads(void **state) {
  (void)state;
  t_ctx ta = {0}, tb = {0};
  ccache *a = open_with_k1(&ta, U), *b = open_with_k1(&tb, U);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 3);
  later l[2] = {{a, b, &bar, 0}, {a, b, &bar, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, later_main, &l[i]), 0);
  pthread_barrier_wait(&bar);
  assert_int_equal(readers_of(a), 2);
  t_close(a);
  assert_int_equal(ta.closures_destroyed, 1);
  pthread_barrier_wait(&bar);
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  pthread_barrier_destroy(&bar);
  assert_int_equal(l[0].hits + l[1].hits, 4);
  assert_int_equal(t_stats(b).hits, 2);
  assert_int_equal(readers_of(b), 0);
  t_close(b);
}

/* One thread on more caches than its TLS array holds (4): every lookup
 * finds its own reader again, counts stay exact, one reader per cache. */
static void more_caches_than_tls_slots(void **state) {
  (void)state;
  enum { N = 6 };
  t_ctx t[N] = {{0}};
  ccache *c[N];
  for (int i = 0; i < N; i++) c[i] = open_with_k1(&t[i], U);
  for (int round = 0; round < 5; round++)
    for (int i = 0; i < N; i++) assert_int_equal(t_fetch_id(c[i], 1), 1);
  for (int i = 0; i < N; i++) {
    assert_int_equal(readers_of(c[i]), 1);
    ccache_stats s = t_stats(c[i]);
    assert_int_equal(s.hits, 5);
    assert_int_equal(s.leases_out, 0);
    t_close(c[i]);
  }
}

/* When a thread's reader cannot be allocated, its lookups take the locked
 * path and still count, lease and release exactly. */
typedef struct flaky {
  _Atomic int fail;
} flaky;

static void *flaky_alloc(void *ctx, size_t size) {
  return atomic_load(&((flaky *)ctx)->fail) ? NULL : malloc(size);
}

static void flaky_free(void *ctx, void *p) {
  (void)ctx;
  free(p);
}

static void no_reader_still_hits(void **state) {
  (void)state;
  t_ctx t = {0};
  flaky f = {0};
  ccache_config cfg;
  t_config(&cfg, &t);
  cfg.alloc = flaky_alloc;
  cfg.free = flaky_free;
  cfg.alloc_ctx = &f;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  ccache_program_release(c, p);
  atomic_store(&f.fail, 1); /* from here no allocation succeeds */
  ccache_lease l1, l2, l3;
  assert_int_equal(ccache_fetch(c, K(1), &l1), CCACHE_OK);
  assert_true(IN_REFS(l1)); /* no reader, no slot: in refs */
  assert_int_equal(ccache_fetch(c, K(2), &l2), CCACHE_MISS);
  assert_int_equal(ccache_fetch(c, K(1), &l3), CCACHE_OK);
  assert_int_equal(readers_of(c), 0);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.hits, 2);
  assert_int_equal(s.misses, 1);
  assert_int_equal(s.leases_out, 2);
  assert_int_equal(ccache_close(c), CCACHE_EBUSY);
  assert_int_equal(ccache_remove(c, K(1)), CCACHE_OK);
  ccache_lease_release(c, &l3);
  assert_int_equal(t.closures_destroyed, 0);
  ccache_lease_release(c, &l1);
  assert_int_equal(t.closures_destroyed, 1);
  assert_int_equal(t.programs_destroyed, 1);
  assert_int_equal(t_stats(c).leases_out, 0);
  atomic_store(&f.fail, 0);
  t_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lease_outlives_its_taker_thread),
      cmocka_unit_test(cross_thread_release_while_taker_lives),
      cmocka_unit_test(slots_overflow_into_refs),
      cmocka_unit_test(exited_threads_counts_are_kept),
      cmocka_unit_test(short_lived_threads_leave_memory_flat),
      cmocka_unit_test(close_frees_readers_of_living_threads),
      cmocka_unit_test(more_caches_than_tls_slots),
      cmocka_unit_test(no_reader_still_hits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
