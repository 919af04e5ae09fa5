/*
 * test_alloc_fail.c - allocation-failure injection through the allocator
 * hook.
 *
 * A scripted workload (open, intern, put, replace, re-put of the same
 * closure, capacity and cost eviction, leases, get-or-compile at both levels
 * with nested compiles and a nested put, expiry, sweep, set_limits, uthash
 * bucket expansion in the closure and program tables, clear, remove,
 * close) is run again and again with the hook failing
 *   - only the Nth allocation, for N = 1, 2, ..., and
 *   - every allocation from the Nth on ("sticky"),
 * until a run makes no more than N - 1 allocations (nothing left to fail).
 * Every call must return CCACHE_ENOMEM or its normal result (a compile whose
 * own nested call got ENOMEM may fail: ECOMPILE).  After every call the
 * checker and uthash's own HASH_FSCK run; after an ENOMEM the cache must be
 * as before: the same live entries (key, closure, program, insert index and
 * time), the same program table (key, native, cost, references), the same
 * counters of structural change, no memory gained; only lookup counters,
 * expiry of already-expired entries and the destroys of what the call was
 * given may differ.  Without sticky failures the call is then retried and
 * must succeed.  At close every byte allocated through the hook has been
 * freed and every closure and native program made was destroyed exactly once
 * (double destroys are double frees for ASan/valgrind).  The hook and the
 * snapshots are in alloc_fail_support.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fail_support.h"
#include "core/internal.h"
#include "support.h"

#define U          CCACHE_UNBOUNDED
#define MAXHANDLES 64

/* ------------------------------------------------------------- workload */

typedef struct wl {
  t_hook h;
  t_ctx t;
  ccache *c;
  ccache_program *handle[MAXHANDLES];
  ccache_lease lease[16]; /* one slot per call that takes a lease */
  uint64_t made_closures, made_natives;
  int inner_enomem; /* a nested call inside a compile got ENOMEM */
  uint64_t bucket_keys[12], bucket_pkeys[12];
  void *reput; /* closure for the nested-put compile */
} wl;

static t_obj *mk_closure(wl *w, int id) {
  w->made_closures++;
  return t_closure(id);
}

static t_obj *mk_native(wl *w, int id) {
  w->made_natives++;
  return t_native(id);
}

/* The call's status must be OK, ENOMEM or one of the alternatives. */
static void allowed(int rc, int alt1, int alt2, const char *what) {
  if (rc != CCACHE_OK && rc != CCACHE_ENOMEM && rc != alt1 && rc != alt2)
    fail_msg("%s returned %d (%s)", what, rc, ccache_strerror(rc));
}

static int st_intern(wl *w, int slot, uint64_t pk, uint64_t cost) {
  ccache_program *p = NULL;
  int rc = ccache_program_intern(w->c, PK(pk), mk_native(w, (int)pk), cost, &p);
  allowed(rc, 0, 0, "program_intern");
  if (rc == CCACHE_OK) {
    if (w->handle[slot]) ccache_program_release(w->c, w->handle[slot]);
    w->handle[slot] = p;
  } else {
    assert_null(p);
  }
  return rc;
}

static int st_put(wl *w, uint64_t key, int slot) {
  if (!w->handle[slot]) return CCACHE_OK; /* its program could not be made */
  int rc = ccache_put(w->c, K(key), mk_closure(w, (int)key), w->handle[slot]);
  allowed(rc, 0, 0, "put");
  return rc;
}

/* Re-put the very closure pointer the entry holds (it must survive ENOMEM). */
static int st_reput(wl *w, uint64_t key, int slot) {
  if (!w->handle[slot]) return CCACHE_OK;
  ccache_lease l;
  if (ccache_fetch(w->c, K(key), &l) != CCACHE_OK) return CCACHE_OK;
  void *closure = l.closure;
  ccache_lease_release(w->c, &l);
  int rc = ccache_put(w->c, K(key), closure, w->handle[slot]);
  allowed(rc, 0, 0, "put (same closure)");
  return rc;
}

static int st_fetch_hold(wl *w, uint64_t key, int li) {
  assert_null(w->lease[li].internal_[0]);
  int rc = ccache_fetch(w->c, K(key), &w->lease[li]);
  allowed(rc, CCACHE_MISS, 0, "fetch");
  return rc == CCACHE_MISS ? CCACHE_OK : rc;
}

static int pcompile(void *ud, ccache *c, ccache_key pkey, void **native_out, uint64_t *cost_out) {
  wl *w = ud;
  (void)c;
  *native_out = mk_native(w, (int)pkey.lo);
  *cost_out = 30;
  return 0;
}

/* Closure compiles; ud selects what they do. */
typedef struct cplan {
  wl *w;
  int how; /* 0 intern, 1 nested program compile, 2 nested put of the same closure, 3 fail */
  uint64_t pk;
} cplan;

static int compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                   ccache_program **program_out) {
  cplan *pl = ud;
  wl *w = pl->w;
  ccache_program *p = NULL;
  int rc;
  if (pl->how == 3) return 7;
  if (pl->how == 1)
    rc = ccache_program_get_or_compile(c, PK(pl->pk), pcompile, w, &p);
  else
    rc = ccache_program_intern(c, PK(pl->pk), mk_native(w, (int)pl->pk), 40, &p);
  if (rc != CCACHE_OK) {
    assert_int_equal(rc, CCACHE_ENOMEM);
    w->inner_enomem = 1;
    return 1;
  }
  void *closure = mk_closure(w, (int)key.hi);
  if (pl->how == 2) {
    /* A put meanwhile, of the very closure the compile then returns: the
     * later insert wins and the closure must not be destroyed twice. */
    rc = ccache_put(c, key, closure, p);
    if (rc != CCACHE_OK) { /* the put destroyed it */
      assert_int_equal(rc, CCACHE_ENOMEM);
      w->inner_enomem = 1;
      ccache_program_release(c, p);
      return 1;
    }
  }
  *closure_out = closure;
  *program_out = p;
  return 0;
}

static int st_goc(wl *w, uint64_t key, int how, uint64_t pk, int li) {
  cplan pl = {w, how, pk};
  assert_null(w->lease[li].internal_[0]);
  w->inner_enomem = 0;
  int rc = ccache_get_or_compile(w->c, K(key), compile, &pl, &w->lease[li]);
  allowed(rc, how == 3 || w->inner_enomem ? CCACHE_ECOMPILE : CCACHE_OK, 0, "get_or_compile");
  if (rc != CCACHE_OK) assert_null(w->lease[li].closure);
  return rc == CCACHE_ECOMPILE ? CCACHE_OK : rc;
}

static int st_pgoc(wl *w, uint64_t pk, int slot) {
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(w->c, PK(pk), pcompile, w, &p);
  allowed(rc, 0, 0, "program_get_or_compile");
  if (rc == CCACHE_OK) {
    if (w->handle[slot]) ccache_program_release(w->c, w->handle[slot]);
    w->handle[slot] = p;
  }
  return rc;
}

/* S_GOC_PUT: a compile whose nested put succeeded changed the cache
 * legitimately before the insert failed; only the closure's survival is
 * checked (and, at the end, that it is destroyed exactly once). */
typedef enum { S_INTERN, S_PUT, S_REPUT, S_FETCH, S_GOC, S_GOC_PUT, S_PGOC, S_OTHER } skind;

static void assert_closure_alive(wl *w, uint64_t key) {
  ccache_lease l;
  if (ccache_fetch(w->c, K(key), &l) != CCACHE_OK) return;
  assert_int_equal(t_id(l.closure), (int)K(key).hi); /* a use after free for ASan */
  ccache_lease_release(w->c, &l);
}

/* Runs one call of the script with the checks around it. */
#define STEP(kind, call)                                                                          \
  do {                                                                                            \
    t_snap *before_ = malloc(sizeof(t_snap)), *after_ = malloc(sizeof(t_snap));                   \
    assert_non_null(before_);                                                                     \
    assert_non_null(after_);                                                                      \
    t_take_snap(w->c, &w->t, &w->h, before_);                                                     \
    int rc_ = (call);                                                                             \
    t_fsck(w->c);                                                                                 \
    assert_int_equal(ccache__check(w->c, atomic_load(&w->t.now_ms)), 0);                          \
    if (rc_ == CCACHE_ENOMEM) {                                                                   \
      t_take_snap(w->c, &w->t, &w->h, after_);                                                    \
      if (kind != S_GOC_PUT) t_assert_unchanged(before_, after_, #call);                          \
      if (kind == S_PUT || kind == S_INTERN)                                                      \
        assert_int_equal(after_->s.misses + after_->s.hits, before_->s.misses + before_->s.hits); \
      if (!w->h.sticky) { /* nothing else fails now: a retry succeeds */                          \
        rc_ = (call);                                                                             \
        assert_int_not_equal(rc_, CCACHE_ENOMEM);                                                 \
        t_fsck(w->c);                                                                             \
        assert_int_equal(ccache__check(w->c, atomic_load(&w->t.now_ms)), 0);                      \
      }                                                                                           \
    } else if (kind == S_OTHER) {                                                                 \
      assert_int_equal(rc_, CCACHE_OK);                                                           \
    }                                                                                             \
    free(before_);                                                                                \
    free(after_);                                                                                 \
  } while (0)

static int st_limits(wl *w, uint64_t a, uint64_t b, uint64_t c) {
  return ccache_set_limits(w->c, a, b, c);
}

static int st_sweep(wl *w) { return ccache_sweep(w->c) >= 0 ? CCACHE_OK : -100; }
static int st_clear(wl *w) {
  ccache_clear(w->c);
  return CCACHE_OK;
}
static int st_remove(wl *w, uint64_t key) {
  int rc = ccache_remove(w->c, K(key));
  return rc == CCACHE_MISS ? CCACHE_OK : rc;
}
static int st_release(wl *w, int li) {
  ccache_lease_release(w->c, &w->lease[li]);
  return CCACHE_OK;
}

static void find_colliding_keys(wl *w) {
  /* Closure keys of one initial uthash bucket, and program
   * keys of one initial bucket: ten in a bucket make uthash expand. */
  size_t n = 0, m = 0;
  for (uint64_t k = 1000; n < 12 || m < 12; k++) {
    unsigned hv = ccache__key_hash(K(k));
    if (n < 12 && (hv & 31) == 5) w->bucket_keys[n++] = k;
    hv = ccache__key_hash(PK(k));
    if (m < 12 && (hv & 31) == 9) w->bucket_pkeys[m++] = k;
  }
}

/* The script.  Returns 1 if it ran to the end, 0 if open failed. */
static int workload(wl *w) {
  ccache_config cfg;
  t_config(&cfg, &w->t);
  cfg.max_items = 4;
  cfg.ttl_ms = 100;
  cfg.max_cost_bytes = 500;
  cfg.alloc = t_hook_alloc;
  cfg.free = t_hook_free;
  cfg.alloc_ctx = &w->h;
  int rc = ccache_open(&cfg, &w->c);
  if (rc != CCACHE_OK) {
    assert_int_equal(rc, CCACHE_ENOMEM);
    return 0;
  }
  STEP(S_INTERN, st_intern(w, 0, 1, 10));
  STEP(S_INTERN, st_intern(w, 1, 2, 20));
  STEP(S_INTERN, st_intern(w, 2, 3, 400));
  STEP(S_INTERN, st_intern(w, 3, 1, 99)); /* existing: the duplicate native is destroyed */
  for (uint64_t k = 1; k <= 5; k++) STEP(S_PUT, st_put(w, k, (int)(k % 2))); /* K1 evicted */
  STEP(S_PUT, st_put(w, 3, 0));                                              /* replace */
  STEP(S_REPUT, st_reput(w, 3, 1)); /* same closure pointer */
  STEP(S_FETCH, st_fetch_hold(w, 4, 0));
  STEP(S_OTHER, st_remove(w, 4)); /* the lease keeps it */
  STEP(S_PUT, st_put(w, 6, 2));   /* cost 400 + others > 500: cost eviction */
  STEP(S_OTHER, st_limits(w, 3, 100, 450));
  STEP(S_GOC, st_goc(w, 7, 0, 4, 1));
  STEP(S_GOC, st_goc(w, 7, 0, 4, 2)); /* hit */
  STEP(S_PGOC, st_pgoc(w, 5, 4));
  STEP(S_PGOC, st_pgoc(w, 5, 4));     /* hit */
  STEP(S_GOC, st_goc(w, 8, 1, 6, 3)); /* nested program compile */
  STEP(S_GOC_PUT, st_goc(w, 9, 2, 7, 4));
  assert_closure_alive(w, 9);          /* nested put of the returned closure */
  STEP(S_GOC, st_goc(w, 10, 3, 0, 5)); /* failing compile */
  STEP(S_OTHER, st_release(w, 1));
  atomic_store(&w->t.now_ms, 150);       /* everything has expired */
  STEP(S_GOC, st_goc(w, 7, 0, 4, 6));    /* expired: removed and compiled again */
  STEP(S_FETCH, st_fetch_hold(w, 8, 7)); /* expired: a miss */
  STEP(S_OTHER, st_sweep(w));
  STEP(S_OTHER, st_limits(w, U, U, U));
  /* Bucket expansion: nine keys in one bucket, then a compile whose nested
   * put adds the ninth and whose own insert (added before the replaced entry
   * leaves) the tenth, which makes uthash expand: an insert that can fail
   * while the entry in the table holds the very closure being inserted. */
  for (int i = 0; i < 8; i++) STEP(S_PUT, st_put(w, w->bucket_keys[i], 0));
  STEP(S_GOC_PUT, st_goc(w, w->bucket_keys[8], 2, 7, 8));
  assert_closure_alive(w, w->bucket_keys[8]);
  for (int i = 9; i < 12; i++) STEP(S_PUT, st_put(w, w->bucket_keys[i], 0));
  for (int i = 0; i < 12; i++)
    STEP(S_INTERN, st_intern(w, 10 + i, w->bucket_pkeys[i], 1)); /* program table expansion */
  for (int i = 0; i < 12; i++) STEP(S_PUT, st_put(w, 100 + (uint64_t)i, 10 + i));
  STEP(S_OTHER, st_limits(w, 5, 50, 100)); /* capacity and cost eviction at once */
  STEP(S_GOC, st_goc(w, 200, 1, w->bucket_pkeys[3], 9));
  for (int i = 0; i < 16; i++) STEP(S_OTHER, st_release(w, i));
  STEP(S_OTHER, st_clear(w));
  STEP(S_OTHER, st_remove(w, 1)); /* a miss */
  STEP(S_PUT, st_put(w, 1, 0));
  for (int i = 0; i < MAXHANDLES; i++) {
    ccache_program_release(w->c, w->handle[i]);
    w->handle[i] = NULL;
  }
  return 1;
}

/* One run with the given failure plan; returns the allocations it made. */
static uint64_t run_once(t_hook *sites, uint64_t fail_at, int sticky, int *completed) {
  wl *w = calloc(1, sizeof *w);
  assert_non_null(w);
  w->h.fail_at = fail_at;
  w->h.sticky = sticky;
  memcpy(w->h.sites, sites->sites, sizeof sites->sites);
  w->h.nsites = sites->nsites;
  find_colliding_keys(w);
  *completed = workload(w);
  if (*completed) {
    ccache *c = w->c;
    assert_int_equal(ccache_close(c), CCACHE_OK);
  }
  /* Everything allocated through the hook is freed; every object made was
   * destroyed exactly once (twice would have been a double free). */
  assert_int_equal(w->h.live_bytes, 0);
  assert_int_equal(w->h.live_blocks, 0);
  assert_int_equal(atomic_load(&w->t.closures_destroyed), w->made_closures);
  assert_int_equal(atomic_load(&w->t.programs_destroyed), w->made_natives);
  if (fail_at) assert_true(w->h.injected > 0 || w->h.n < fail_at);
  memcpy(sites->sites, w->h.sites, sizeof sites->sites);
  sites->nsites = w->h.nsites;
  uint64_t n = w->h.n, injected = w->h.injected;
  free(w);
  return injected ? n : 0;
}

static void fail_every_allocation(void **state) {
  (void)state;
  static t_hook sites; /* failed allocation sites across every N */
  int completed;
  run_once(&sites, 0, 0, &completed); /* no failure: the baseline */
  assert_true(completed);
  for (int sticky = 0; sticky <= 1; sticky++) {
    uint64_t n;
    for (n = 1;; n++) {
      if (!run_once(&sites, n, sticky, &completed)) break; /* nothing failed: done */
    }
    printf("alloc_fail: %s: N = 1..%llu covered\n",
           sticky ? "all allocations from the Nth on fail" : "the Nth allocation fails",
           (unsigned long long)(n - 1));
    assert_true(n > 50);
  }
  printf("alloc_fail: %zu distinct allocation sites failed (innermost three library frames)\n",
         sites.nsites);
}

static void hook_both_or_neither(void **state) {
  (void)state;
  t_hook h = {0};
  ccache_config cfg;
  ccache_config_init(&cfg);
  ccache *c = NULL;
  cfg.alloc = t_hook_alloc;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  cfg.alloc = NULL;
  cfg.free = t_hook_free;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  cfg.alloc = t_hook_alloc;
  cfg.alloc_ctx = &h;
  cfg.sweeper_thread = 0;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  assert_true(h.live_blocks > 0);
  assert_int_equal(ccache_close(c), CCACHE_OK);
  assert_int_equal(h.live_bytes, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hook_both_or_neither),
      cmocka_unit_test(fail_every_allocation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
