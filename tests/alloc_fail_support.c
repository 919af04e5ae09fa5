/* alloc_fail_support.c - see alloc_fail_support.h. */
#define HASH_DEBUG 1 /* HASH_FSCK below checks uthash's own structure */
#include <execinfo.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fail_support.h"
#include "core/readers.h"

/* ------------------------------------------------------------- the hook */

typedef union header {
  size_t size;
  max_align_t align_;
} header;

__attribute__((noinline)) static uint64_t stack_hash(void) {
  void *frames[12];
  int n = backtrace(frames, 12);
  uint64_t h = 1469598103934665603ull;
  /* Frame 0 is this function, 1 the hook; 2..4 are the library's innermost
   * frames (ccache__malloc, ccache__calloc where used, the function that
   * allocated and its caller): their return addresses name the site. */
  for (int i = 2; i < n && i < 5; i++) {
    h ^= (uint64_t)(uintptr_t)frames[i];
    h *= 1099511628211ull;
  }
  return h;
}

void *t_hook_alloc(void *ctx, size_t size) {
  t_hook *h = ctx;
  h->n++;
  if (h->fail_at && (h->n == h->fail_at || (h->sticky && h->n > h->fail_at))) {
    if (h->injected++ == 0) {
      uint64_t s = stack_hash();
      size_t i;
      for (i = 0; i < h->nsites && h->sites[i] != s; i++) {
      }
      if (i == h->nsites && h->nsites < T_MAXSITES) h->sites[h->nsites++] = s;
    }
    return NULL;
  }
  header *p = malloc(sizeof(header) + size);
  if (!p) return NULL;
  p->size = size;
  h->live_bytes += (int64_t)size;
  h->live_blocks++;
  return p + 1;
}

void t_hook_free(void *ctx, void *ptr) {
  t_hook *h = ctx;
  header *p = (header *)ptr - 1;
  h->live_bytes -= (int64_t)p->size;
  h->live_blocks--;
  free(p);
}

/* ------------------------------------------------------------- snapshots */

static int ent_cmp(const void *a, const void *b) {
  const t_ent_snap *x = a, *y = b;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

static int prog_cmp(const void *a, const void *b) {
  const t_prog_snap *x = a, *y = b;
  if (x->pkey.lo != y->pkey.lo) return x->pkey.lo < y->pkey.lo ? -1 : 1;
  return (x->pkey.hi > y->pkey.hi) - (x->pkey.hi < y->pkey.hi);
}

void t_fsck(ccache *c) {
  HASH_FSCK(hh, c->table, "closures");
  HASH_FSCK(hh, c->programs, "programs");
  HASH_FSCK(hh, c->flights.table, "flights");
  HASH_FSCK(hh, c->pflights.table, "pflights");
}

void t_take_snap(ccache *c, t_ctx *t, t_hook *h, t_snap *s) {
  memset(s, 0, sizeof *s);
  uint64_t now = atomic_load(&t->now_ms);
  uint64_t ttl = atomic_load(&c->ttl_ms);
  for (ccache__entry *e = c->table; e; e = e->hh.next) {
    assert_true(s->ne < 256);
    t_ent_snap *x = &s->e[s->ne++];
    x->key = e->key;
    x->closure = ccache__entry_closure(e);
    x->program = e->program;
    x->idx = e->idx;
    x->ins_ms = e->ins_ms;
    x->expired = ccache__expired(e->ins_ms, now, ttl);
  }
  qsort(s->e, s->ne, sizeof s->e[0], ent_cmp);
  for (ccache_program *p = c->programs; p; p = p->hh.next) {
    assert_true(s->np < 128);
    t_prog_snap *x = &s->p[s->np++];
    x->pkey = p->pkey;
    x->native = p->native;
    x->p = p;
    x->cost = p->cost;
    x->refs = p->refs;
    x->table_refs = p->table_refs;
  }
  qsort(s->p, s->np, sizeof s->p[0], prog_cmp);
  s->items = c->items;
  s->next_idx = c->next_idx;
  s->last_ins_ms = c->last_ins_ms;
  s->cost_bytes = ccache__cost_bytes(c);
  s->nprograms = c->nprograms;
  s->handles_out = c->handles_out;
  s->n = c->n;
  s->s = t_stats(c);
  /* A thread's reader (src/readers.c) is made on its first call on a cache,
   * whatever that call's outcome, and lives as long as the thread, as does
   * the cache's array of readers: not cache content an ENOMEM could have
   * leaked.  The rest must not grow. */
  int64_t readers = c->nreaders, array = c->readers ? c->readers_cap * (int64_t)sizeof(void *) : 0;
  s->live_bytes =
      h->live_bytes - array - readers * (int64_t)(sizeof(ccache__reader) + CCACHE__READER_ALIGN);
}

void t_assert_unchanged(const t_snap *a, const t_snap *b, const char *what) {
  size_t i = 0, j = 0, expired_gone = 0;
  while (i < a->ne || j < b->ne) {
    if (i < a->ne && (j >= b->ne || a->e[i].idx < b->e[j].idx)) {
      if (!a->e[i].expired) fail_msg("%s: ENOMEM removed a live entry", what);
      expired_gone++; /* an expired entry may be removed by a lookup */
      i++;
      continue;
    }
    if (j < b->ne && (i >= a->ne || b->e[j].idx < a->e[i].idx))
      fail_msg("%s: ENOMEM added an entry", what);
    const t_ent_snap *x = &a->e[i], *y = &b->e[j];
    if (memcmp(&x->key, &y->key, sizeof x->key) || x->closure != y->closure ||
        x->program != y->program || x->ins_ms != y->ins_ms)
      fail_msg("%s: ENOMEM changed an entry", what);
    i++;
    j++;
  }
  /* Programs: the same, except that removing expired entries may drop
   * references (and programs that only those entries used). */
  if (a->np != b->np && !expired_gone)
    fail_msg("%s: ENOMEM changed the program table (%zu programs, then %zu)", what, a->np, b->np);
  for (size_t k = 0, m = 0; m < b->np; k++) {
    if (k >= a->np) fail_msg("%s: ENOMEM added a program", what);
    const t_prog_snap *x = &a->p[k], *y = &b->p[m];
    if (memcmp(&x->pkey, &y->pkey, sizeof x->pkey)) {
      if (!expired_gone) fail_msg("%s: ENOMEM removed a program", what);
      continue;
    }
    m++;
    if (x->native != y->native || x->p != y->p || x->cost != y->cost)
      fail_msg("%s: ENOMEM changed a program", what);
    if (expired_gone ? y->refs > x->refs || y->table_refs > x->table_refs
                     : y->refs != x->refs || y->table_refs != x->table_refs)
      fail_msg("%s: ENOMEM changed a program's references", what);
  }
  assert_int_equal(b->items, a->items - expired_gone);
  assert_int_equal(b->next_idx, a->next_idx);
  assert_int_equal(b->last_ins_ms, a->last_ins_ms);
  if (!expired_gone) assert_int_equal(b->nprograms, a->nprograms);
  assert_int_equal(b->handles_out, a->handles_out);
  assert_int_equal(b->n.inserts, a->n.inserts);
  assert_int_equal(b->n.replaced, a->n.replaced);
  assert_int_equal(b->n.evicted_capacity, a->n.evicted_capacity);
  assert_int_equal(b->n.evicted_cost, a->n.evicted_cost);
  assert_int_equal(b->n.removed, a->n.removed);
  assert_int_equal(b->n.cleared, a->n.cleared);
  assert_int_equal(b->n.evicted_ttl, a->n.evicted_ttl + expired_gone);
  assert_int_equal(b->s.leases_out, a->s.leases_out);
  if (!expired_gone) assert_int_equal(b->cost_bytes, a->cost_bytes);
  if (b->live_bytes > a->live_bytes) fail_msg("%s: ENOMEM leaked memory", what);
}
