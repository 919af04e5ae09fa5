/*
 * stats.c - statistics snapshot and its one-line form.  Hit, miss and lease
 * counts live in the threads' readers (so hits from different threads write
 * no common line) and are summed here (readers.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "core/readers.h"
#include "tier/tier.h"

/* A struct whose size was never set: 0 (zeroed), too short to hold even the
 * first counter, or stack garbage past any struct a library will have. */
static bool size_ok(const ccache_stats *s) {
  return s->size >= offsetof(ccache_stats, hits) + sizeof s->hits &&
         s->size <= CCACHE_STRUCT_SIZE_MAX;
}

void ccache_stats_init(ccache_stats *s) {
  if (!s) return;
  memset(s, 0, sizeof *s);
  s->size = sizeof *s;
}

static void snapshot(ccache *c, ccache_stats *s) {
  ccache__lock(&c->wlock);
  s->inserts = c->n.inserts;
  s->replaced = c->n.replaced;
  s->evicted_capacity = c->n.evicted_capacity;
  s->evicted_ttl = c->n.evicted_ttl;
  s->evicted_cost = c->n.evicted_cost;
  s->removed = c->n.removed;
  s->cleared = c->n.cleared;
  s->items = c->items;
  s->cost_bytes = ccache__cost_bytes(c);
  s->compiles = c->n.compiles;
  s->compile_failures = atomic_load(&c->compile_failures);
  s->waits = atomic_load(&c->waits);
  s->compile_ns = atomic_load(&c->compile_ns);
  ccache__readers_sum(c, &s->hits, &s->misses, &s->leases_out);
  s->read_side = ccache__fenced(c) ? CCACHE_READ_SIDE_FENCED : CCACHE_READ_SIDE_MEMBARRIER;
  s->reader_blocks = c->reader_blocks;
  s->heavy_barriers = c->heavy_barriers;
  /* A gauge never wraps: a caller who released a lease twice (a caller
   * error the checked build catches) sees 0, not 2^64 - 1. */
  if (s->leases_out > INT64_MAX) s->leases_out = 0;
  ccache__lock(&c->pmu);
  s->programs = c->nprograms;
  s->program_hits = c->program_hits;
  s->program_misses = c->program_misses;
  s->program_compiles = c->program_compiles;
  s->handles_out = c->handles_out;
  ccache__unlock(&c->pmu);
  ccache__unlock(&c->wlock);
  ccache__tier_stats(c->tiers, s);
  s->closures_destroyed = atomic_load(&c->closures_destroyed);
  s->programs_destroyed = atomic_load(&c->programs_destroyed);
  s->sweeper_wakeups = atomic_load(&c->sweeper_wakeups);
  s->program_waits = atomic_load(&c->program_waits);
  s->program_compile_failures = atomic_load(&c->program_compile_failures);
  s->program_compile_ns = atomic_load(&c->program_compile_ns);
  s->misses_evicted = atomic_load(&c->misses_evicted);
}

int ccache_stats_get(ccache *c, ccache_stats *out) {
  CCACHE__CHECK_CACHE(c);
  if (!out || !size_ok(out)) { /* never set up: write nothing */
    ccache__detail_for(CCACHE_EINVAL,
                       "ccache_stats_get: stats size %u was never set (use ccache_stats_init(), "
                       "or set size = sizeof(ccache_stats))",
                       out ? (unsigned)out->size : 0u);
    return CCACHE_EINVAL;
  }
  uint32_t size = out->size;
  if (size > sizeof *out) size = sizeof *out;
  ccache_stats s;
  memset(&s, 0, sizeof s);
  int rc = !c ? CCACHE_EINVAL : ccache__forked(c) ? CCACHE_EFORKED : CCACHE_OK;
  if (rc == CCACHE_OK) snapshot(c, &s);
  s.size = out->size;
  memcpy(out, &s, size);
  return rc;
}

int ccache_tier_health_get(ccache *c, uint32_t tier, uint32_t part, ccache_tier_health *out) {
  CCACHE__CHECK_CACHE(c);
  if (!c || !out || out->size < CCACHE_TIER_HEALTH_SIZE_V1) return CCACHE_EINVAL;
  if (ccache__forked(c)) return CCACHE_EFORKED;
  return ccache__tier_health(c->tiers, tier, part, out);
}

int ccache_stats_format(const ccache_stats *s, char *buf, size_t len) {
  if (!s || !size_ok(s) || (!buf && len)) return CCACHE_EINVAL;
  size_t n = 0; /* the whole line's length, as snprintf counts */
  const char *sep = "";
#define CCACHE__STATS_FORMAT(f)                                                                    \
  if (offsetof(ccache_stats, f) + sizeof s->f <= s->size) {                                        \
    int k =                                                                                        \
        snprintf(n < len ? buf + n : NULL, n < len ? len - n : 0, "%s" #f "=%" PRIu64, sep, s->f); \
    if (k < 0) return CCACHE_EINVAL;                                                               \
    n += (size_t)k;                                                                                \
    sep = " ";                                                                                     \
  }
  CCACHE_STATS_FIELDS(CCACHE__STATS_FORMAT)
#undef CCACHE__STATS_FORMAT
  if (len && n >= len) buf[len - 1] = '\0';
  if (len && n == 0) buf[0] = '\0';
  return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* A field added to ccache_stats must be added to CCACHE_STATS_FIELDS too. */
_Static_assert(offsetof(ccache_stats, heavy_barriers) + sizeof(uint64_t) == sizeof(ccache_stats),
               "ccache_stats gained a field: add it to CCACHE_STATS_FIELDS (ccache/stats.h)");
