/*
 * check.c - the consistency checker (built into the test library only).
 *
 * Walks every table under every lock and verifies what the rest of the code
 * only maintains incrementally: item count, FIFO order (insert indices
 * increasing and insert times not decreasing along the table), per-program
 * table references, the charged cost, the bounds, and that every entry is
 * live: expired entries may still sit in the table until a fetch or sweep
 * removes them, but only as a prefix of the FIFO.
 */
#define _GNU_SOURCE 1 /* secure_getenv */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/readers.h"

#define FAIL(...)                                   \
  do {                                              \
    fprintf(stderr, "ccache__check: " __VA_ARGS__); \
    fputc('\n', stderr);                            \
    ok = 0;                                         \
  } while (0)

/* Per-program count of entries in the table, kept in a scratch field-free
 * way: a second uthash keyed by program pointer. */
typedef struct prog_count {
  UT_hash_handle hh;
  const ccache_program *p;
  uint64_t n;
} prog_count;

static int check_programs(ccache *c, prog_count *counts) {
  int ok = 1;
  uint64_t cost_lo = 0, cost_hi = 0, n = 0;
  ccache_program *p, *tmp;
  HASH_ITER(hh, c->programs, p, tmp) {
    prog_count *pc;
    HASH_FIND_PTR(counts, &p, pc);
    uint64_t in_table = pc ? pc->n : 0;
    if (p->table_refs != in_table)
      FAIL("program %p: table_refs %llu, entries in table %llu", (void *)p,
           (unsigned long long)p->table_refs, (unsigned long long)in_table);
    if (p->refs < p->table_refs) FAIL("program %p: refs below table refs", (void *)p);
    if (p->refs == 0) FAIL("program %p: zero refs but still interned", (void *)p);
    if (p->table_refs) {
      cost_lo += p->cost;
      cost_hi += cost_lo < p->cost;
    }
    n++;
  }
  if (n != c->nprograms)
    FAIL("programs gauge %llu, table %llu", (unsigned long long)c->nprograms,
         (unsigned long long)n);
  if (cost_lo != c->cost.lo || cost_hi != c->cost.hi)
    FAIL("cost %llu:%llu, recomputed %llu:%llu", (unsigned long long)c->cost.hi,
         (unsigned long long)c->cost.lo, (unsigned long long)cost_hi, (unsigned long long)cost_lo);
  return ok;
}

int ccache__check(ccache *c, uint64_t now) {
  static const ccache__mem plain = {NULL, NULL, NULL};
  CCACHE__UTHASH_SCOPE(&plain); /* the scratch table bypasses the hook */
  int ok = 1;
  prog_count *counts = NULL;
  ccache__lock(&c->wlock);
  uint64_t ttl = atomic_load(&c->ttl_ms);
  /* Insert indices wrap at 2^64 (documented), so order is checked on their
   * distance from the oldest entry's, mod 2^64. */
  uint64_t items = 0, base = c->table ? c->table->idx : 0, prev_d = 0, prev_ms = 0;
  bool seen_live = false;
  /* Not a writer's blocking: the stats count only those. */
  uint64_t blocks = c->reader_blocks, heavy = c->heavy_barriers;
  ccache__readers_block(c);
  for (ccache__entry *e = c->table; e; e = e->hh.next) {
    uint64_t d = e->idx - base;
    if (items > 0 && d <= prev_d) FAIL("insert index not increasing along the FIFO");
    items++;
    if (e->ins_ms < prev_ms) FAIL("insert time decreasing along the FIFO");
    if (d >= c->next_idx - base) FAIL("insert index from the future");
    if (e->hh.hashv != ccache__key_hash(e->key)) FAIL("entry with a stale hash");
    /* 16 bytes compared in a fast cache, 32 (key and check) in a strong one. */
    if (e->hh.keylen != c->klen || e->hh.key != (const void *)&e->key)
      FAIL("entry key length %u, the cache's is %u", (unsigned)e->hh.keylen, (unsigned)c->klen);
    /* Its references: refs plus the leases in readers' slots (mod 2^32),
     * at least the table's own. */
    uint32_t refs = atomic_load(&e->refs) + (uint32_t)ccache__readers_slots_of(c, e);
    if (refs < 1 || refs > (1u << 31)) FAIL("entry in table with %u references", refs);
    if (e->flags & CCACHE__E_DETACHED) FAIL("entry in table marked detached");
    if (e->program->owner != c) FAIL("entry runs a program of another cache");
    prev_d = d;
    prev_ms = e->ins_ms;
    if (now != UINT64_MAX && ccache__expired(e->ins_ms, now, ttl)) {
      if (seen_live) FAIL("expired entries are not a prefix of the FIFO");
    } else {
      seen_live = true;
    }
    prog_count *pc;
    const ccache_program *pp = e->program;
    HASH_FIND_PTR(counts, &pp, pc);
    if (!pc) {
      pc = ccache__calloc(&plain, sizeof *pc);
      if (!pc) {
        FAIL("out of memory in checker");
        break;
      }
      pc->p = pp;
      HASH_ADD_PTR(counts, p, pc);
    }
    pc->n++;
  }
  ccache__readers_unblock(c);
  c->reader_blocks = blocks;
  c->heavy_barriers = heavy;
  if (items != c->items)
    FAIL("items %llu, table %llu", (unsigned long long)c->items, (unsigned long long)items);
  if (c->items > c->max_items) FAIL("items over max_items");
  ccache__lock(&c->pmu);
  ok &= check_programs(c, counts);
  ccache__unlock(&c->pmu);
  ccache__unlock(&c->wlock);
  prog_count *pc, *tmp;
  HASH_ITER(hh, counts, pc, tmp) {
    HASH_DEL(counts, pc);
    ccache__free(&plain, pc);
  }
  return ok ? 0 : -1;
}

/* ------------------------------------------------ after every k-th write */

/* Level 2's expensive check: with CLOSURE_CACHE_DEBUG_CHECK_EVERY=k (k >= 1) in the
 * environment, the whole checker runs after every k-th writer section of
 * every cache, and a failure aborts at once, next to the write that broke
 * it.  The stress test and the TSan run set it. */
static _Atomic uint64_t writes_seen;
static uint64_t check_every;

static void after_write(ccache *c) {
  if (atomic_fetch_add_explicit(&writes_seen, 1, memory_order_relaxed) % check_every != 0) return;
  if (ccache__check(c, UINT64_MAX) != 0) {
    fprintf(stderr, "ccache__check failed after a writer section\n");
    abort();
  }
}

void ccache__debug_check_every(uint64_t k) {
  check_every = k;
  ccache__after_write_hook = k ? after_write : NULL;
}

__attribute__((constructor)) static void install_after_write(void) {
  const char *s = secure_getenv("CLOSURE_CACHE_DEBUG_CHECK_EVERY");
  if (!s || !*s) return;
  char *end;
  unsigned long long k = strtoull(s, &end, 10);
  if (*end == '\0') ccache__debug_check_every(k);
}

/* ------------------------------------------------------- counter seeding */

static int seed_locked(ccache *c, const char *f, uint64_t v) {
  struct {
    const char *name;
    uint64_t *field;
  } plain[] = {
      {"next_idx", &c->next_idx},
      {"last_ins_ms", &c->last_ins_ms},
      {"inserts", &c->n.inserts},
      {"replaced", &c->n.replaced},
      {"evicted_capacity", &c->n.evicted_capacity},
      {"evicted_ttl", &c->n.evicted_ttl},
      {"evicted_cost", &c->n.evicted_cost},
      {"removed", &c->n.removed},
      {"cleared", &c->n.cleared},
      {"compiles", &c->n.compiles},
      {"program_hits", &c->program_hits},
      {"program_misses", &c->program_misses},
      {"program_compiles", &c->program_compiles},
  };
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
    if (strcmp(f, plain[i].name) == 0) {
      *plain[i].field = v;
      return 0;
    }
  struct {
    const char *name;
    _Atomic uint64_t *field;
  } atomics[] = {
      {"waits", &c->waits},
      {"compile_failures", &c->compile_failures},
      {"compile_ns", &c->compile_ns},
      {"closures_destroyed", &c->closures_destroyed},
      {"programs_destroyed", &c->programs_destroyed},
  };
  for (size_t i = 0; i < sizeof atomics / sizeof atomics[0]; i++)
    if (strcmp(f, atomics[i].name) == 0) {
      atomic_store(atomics[i].field, v);
      return 0;
    }
  if (strcmp(f, "hits") == 0 || strcmp(f, "misses") == 0) {
    /* The readers' counts stay; the retired part makes up the difference. */
    uint64_t h, m, l;
    ccache__readers_sum(c, &h, &m, &l);
    if (f[0] == 'h')
      c->hits_retired += v - h;
    else
      c->misses_retired += v - m;
    return 0;
  }
  return -1;
}

int ccache__seed(ccache *c, const char *field, uint64_t v) {
  ccache__lock(&c->wlock);
  ccache__lock(&c->pmu);
  int rc = seed_locked(c, field, v);
  ccache__unlock(&c->pmu);
  ccache__unlock(&c->wlock);
  return rc;
}
