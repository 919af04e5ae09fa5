/*
 * cache.c - creating and closing a cache.
 */
#include <string.h>

#include "core/internal.h"
#include "core/readers.h"
#include "tier/tier.h"

bool ccache__config_valid(const ccache_config *cfg) {
  /* The size bound and the marker catch a struct that never went through
   * ccache_config_init(): its allocator fields would be garbage.  Every
   * field of 0.2.0's layout is there (CCACHE__CONFIG_MIN_SIZE). */
  if (cfg->size < CCACHE__CONFIG_MIN_SIZE || cfg->size > CCACHE_STRUCT_SIZE_MAX ||
      cfg->magic != CCACHE_CONFIG_MAGIC) {
    ccache__detail("ccache_config: size %u, magic 0x%08x: not set up by ccache_config_init()",
                   (unsigned)cfg->size, (unsigned)cfg->magic);
    return 0;
  }
  if (ccache__tiers_check(cfg) != CCACHE_OK) return 0; /* it says why */
  if (cfg->n_tiers > 0 && !cfg->codec) {
    /* Without a codec no tier is ever asked or written: refuse rather than
     * open a cache whose tiers silently do nothing. */
    ccache__detail(
        "ccache_config: %u tier(s) but no codec: tiers store programs as bytes, so "
        "they need cfg.codec (encode, free_bytes, decode)",
        (unsigned)cfg->n_tiers);
    return 0;
  }
  if (cfg->max_items == 0 || cfg->ttl_ms == 0 || cfg->max_cost_bytes == 0) {
    ccache__detail("ccache_config: a bound of 0 (use CCACHE_UNBOUNDED for none)");
    return 0;
  }
  uint32_t mode = ccache__config_key_mode(cfg);
  if (mode != CCACHE_KEYS_FAST && mode != CCACHE_KEYS_STRONG) {
    ccache__detail("ccache_config: key_mode %u is neither CCACHE_KEYS_FAST nor CCACHE_KEYS_STRONG",
                   (unsigned)mode);
    return 0;
  }
  if (!cfg->alloc != !cfg->free) { /* both or neither, as zstd's customMem */
    ccache__detail("ccache_config: alloc and free must be set together");
    return 0;
  }
  return 1;
}

void ccache_config_init(ccache_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->size = sizeof *cfg;
  cfg->magic = CCACHE_CONFIG_MAGIC;
  cfg->sweeper_thread = 1;
  cfg->max_items = CCACHE_UNBOUNDED;
  cfg->ttl_ms = CCACHE_UNBOUNDED;
  cfg->max_cost_bytes = CCACHE_UNBOUNDED;
  cfg->tier_min_compile_us = 1000;
  cfg->tier_max_entry_bytes = CCACHE_TIER_MAX_ENTRY_DEFAULT;
}

/* Locks, condition variables and the reader side; on failure everything
 * made is undone. */
static int init_sync(ccache *c) {
  int rc;
  if ((rc = ccache__mutex_init(&c->wlock)) != CCACHE_OK) return rc;
  if ((rc = ccache__mutex_init(&c->pmu)) != CCACHE_OK) goto fail_wlock;
  if ((rc = ccache__flights_init(&c->flights, &c->wlock, &c->mem, c->klen)) != CCACHE_OK)
    goto fail_pmu;
  if ((rc = ccache__flights_init(&c->pflights, &c->pmu, &c->mem, c->klen)) != CCACHE_OK)
    goto fail_fcv;
  if ((rc = ccache__alarm_init(c)) != CCACHE_OK) goto fail_pcv;
  if ((rc = ccache__mutex_init(&c->limbo_mu)) != CCACHE_OK) goto fail_alarm;
  return CCACHE_OK;
fail_alarm:
  ccache__alarm_destroy(c);
fail_pcv:
  ccache__flights_destroy(&c->pflights);
fail_fcv:
  ccache__flights_destroy(&c->flights);
fail_pmu:
  ccache__mutex_destroy(&c->pmu);
fail_wlock:
  ccache__mutex_destroy(&c->wlock);
  return rc;
}

static void destroy_sync(ccache *c) {
  ccache__mutex_destroy(&c->limbo_mu);
  ccache__alarm_destroy(c);
  ccache__flights_destroy(&c->pflights);
  ccache__flights_destroy(&c->flights);
  ccache__mutex_destroy(&c->pmu);
  ccache__mutex_destroy(&c->wlock);
}

int ccache_open(const ccache_config *cfg, ccache **out) {
  if (!cfg || !out) { /* a detail of its own: never an earlier failure's */
    ccache__detail("ccache_open: %s is NULL", !cfg ? "cfg" : "out");
    return CCACHE_EINVAL;
  }
  if (!ccache__config_valid(cfg)) return CCACHE_EINVAL;
  ccache__fork_register();
  ccache__mem mem = {cfg->alloc, cfg->free, cfg->alloc_ctx};
  /* The allocator promises only malloc's alignment; place the cache on a
   * line boundary by hand so its read-mostly line is shared with nothing. */
  void *raw = ccache__calloc(&mem, sizeof(ccache) + CCACHE__CACHELINE);
  if (!raw) return CCACHE_ENOMEM;
  ccache *c =
      (ccache *)(((uintptr_t)raw + CCACHE__CACHELINE - 1) & ~(uintptr_t)(CCACHE__CACHELINE - 1));
  c->raw = raw;
  c->mem = mem;
  c->max_items = cfg->max_items;
  c->max_cost = cfg->max_cost_bytes;
  atomic_init(&c->ttl_ms, cfg->ttl_ms);
  c->destroy_closure = cfg->destroy_closure;
  c->destroy_program = cfg->destroy_program;
  c->clock_ms = cfg->clock_ms;
  c->ctx = cfg->ctx;
  c->sweeper_enabled = cfg->sweeper_thread != 0;
  c->on_event = cfg->on_event;
  c->event_ctx = cfg->event_ctx;
  c->strong = ccache__config_key_mode(cfg) == CCACHE_KEYS_STRONG;
  c->klen = c->strong ? (uint32_t)sizeof(ccache_strong_key) : (uint32_t)sizeof(ccache_key);
  c->next_idx = 1;
  c->fork_gen = atomic_load(&ccache__fork_generation);
  atomic_init(&c->gate, c->fork_gen);
  ccache__readers_init(c);
  int rc = init_sync(c);
  if (rc == CCACHE_OK) {
    rc = ccache__sweeper_kick(c, cfg->ttl_ms);
    /* Tiers last: past this nothing fails, so the caller's tiers are either
     * all the cache's or all still the caller's. */
    if (rc == CCACHE_OK) rc = ccache__tiers_open(&c->tiers, &c->mem, c, cfg);
    if (rc != CCACHE_OK) {
      ccache__sweeper_stop(c);
      destroy_sync(c);
    }
  }
  if (rc != CCACHE_OK) {
    ccache__free(&mem, raw);
    return rc;
  }
  CCACHE__MISUSE(ccache__misuse_cache_opened(c));
  *out = c;
  return CCACHE_OK;
}

/* Whether close must refuse: compiles in flight always; leases and
 * handles unless they are abandoned.  Says which in the detail. */
static bool busy(ccache *c, bool abandon) {
  uint64_t hits, misses, leases;
  ccache__lock(&c->wlock);
  ccache__readers_sum(c, &hits, &misses, &leases);
  ccache__lock(&c->pmu);
  uint64_t handles = c->handles_out;
  ccache__unlock(&c->pmu);
  ccache__unlock(&c->wlock);
  uint32_t inflight = atomic_load(&c->inflight);
  if (leases > INT64_MAX) leases = 0; /* as the gauge: never a wrapped value */
  bool b = inflight > 0 || (!abandon && (leases > 0 || handles > 0));
  if (b) {
    ccache__detail_for(CCACHE_EBUSY,
                       "ccache_close: busy: %llu lease(s), %llu program handle(s), %u compile(s) "
                       "in flight out",
                       (unsigned long long)leases, (unsigned long long)handles, (unsigned)inflight);
    CCACHE__MISUSE(ccache__misuse_list_out(c));
  }
  return b;
}

int ccache_close(ccache *c) { return ccache_close_ex(c, 0); }

int ccache_close_ex(ccache *c, unsigned flags) {
  if (!c) return CCACHE_OK;
  CCACHE__CHECK_CACHE(c);
  if (ccache__forked(c)) return CCACHE_EFORKED;
  if (c->is_default) return CCACHE_EINVAL;
  if (flags & ~CCACHE_CLOSE_ABANDON) return CCACHE_EINVAL;
  bool abandon = flags & CCACHE_CLOSE_ABANDON;
  if (ccache__in_callback(c)) {
    ccache__detail_for(CCACHE_EBUSY, "ccache_close: called from inside a callback of this cache");
    return CCACHE_EBUSY;
  }
  if (busy(c, abandon)) return CCACHE_EBUSY;
  /* From here on, calls that would add to the cache are refused (EBUSY), so
   * destroy callbacks run by the last sweep or by the teardown below cannot
   * leave anything behind, nor start a new sweeper. */
  atomic_store(&c->gate, CCACHE__GATE_CLOSED);
  ccache__readers_renew_id(c); /* the fast paths do not read the gate */
  ccache__sweeper_stop(c);
  /* A destroy run by the last sweep may itself have taken a lease before
   * the gate closed. */
  if (busy(c, abandon)) {
    atomic_store(&c->gate, c->fork_gen);
    ccache__sweeper_kick(c, atomic_load(&c->ttl_ms));
    return CCACHE_EBUSY;
  }
  ccache__wsec w;
  ccache__wsec_begin(c, &w);
  ccache__clear_locked(c, &w, NULL);
  ccache__wsec_end(c, &w);
  if (abandon) {
    /* What only abandoned leases and handles still hold. */
    ccache__abandon_entries(c);
    ccache__abandon_programs(c);
  }
  ccache__assert(c->programs == NULL && c->items == 0);
  ccache__readers_destroy(c);
  ccache__tiers_close(&c->tiers);
  destroy_sync(c);
  CCACHE__MISUSE(ccache__misuse_cache_closed(c));
  ccache__mem mem = c->mem;
  ccache__free(&mem, c->raw);
  return CCACHE_OK;
}
