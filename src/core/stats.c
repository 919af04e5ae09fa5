/*
 * stats.c - statistics snapshot.  Hit, miss and lease counts live in the
 * threads' readers (so hits from different threads write no common line) and
 * are summed here (readers.c).
 */
#include <string.h>

#include "core/internal.h"
#include "core/readers.h"
#include "tier/tier.h"

void ccache_stats_get(ccache *c, ccache_stats *out) {
  CCACHE__CHECK_CACHE(c);
  if (!out || out->size > CCACHE_STRUCT_SIZE_MAX) return; /* never set up: write nothing */
  uint32_t size = out->size;
  if (size > sizeof *out) size = sizeof *out;
  ccache_stats s;
  memset(&s, 0, sizeof s);
  if (c && !ccache__forked(c)) {
    ccache__lock(&c->wlock);
    s.inserts = c->n.inserts;
    s.replaced = c->n.replaced;
    s.evicted_capacity = c->n.evicted_capacity;
    s.evicted_ttl = c->n.evicted_ttl;
    s.evicted_cost = c->n.evicted_cost;
    s.removed = c->n.removed;
    s.cleared = c->n.cleared;
    s.items = c->items;
    s.cost_bytes = ccache__cost_bytes(c);
    s.compiles = c->n.compiles;
    s.compile_failures = atomic_load(&c->compile_failures);
    s.waits = atomic_load(&c->waits);
    s.compile_ns = atomic_load(&c->compile_ns);
    ccache__readers_sum(c, &s.hits, &s.misses, &s.leases_out);
    /* A gauge never wraps: a caller who released a lease twice (a caller
     * error the checked build catches) sees 0, not 2^64 - 1. */
    if (s.leases_out > INT64_MAX) s.leases_out = 0;
    ccache__lock(&c->pmu);
    s.programs = c->nprograms;
    s.program_hits = c->program_hits;
    s.program_misses = c->program_misses;
    s.program_compiles = c->program_compiles;
    ccache__unlock(&c->pmu);
    ccache__unlock(&c->wlock);
    ccache__tier_stats(c->tiers, &s);
    s.closures_destroyed = atomic_load(&c->closures_destroyed);
    s.programs_destroyed = atomic_load(&c->programs_destroyed);
    s.sweeper_wakeups = atomic_load(&c->sweeper_wakeups);
  }
  s.size = out->size;
  memcpy(out, &s, size);
}
