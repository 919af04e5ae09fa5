/*
 * cache.c - creating and closing a cache, and fork() detection.
 */
#include <string.h>

#include "internal.h"
#include "tier.h"

/* Bumped in every child after fork(); a cache remembers the value it was
 * created under.  The child has none of the parent's other threads (the
 * sweeper included) and may have inherited a lock held by one of them, so a
 * cache created before the fork refuses every call there (CCACHE_EFORKED). */
_Atomic uint64_t ccache__fork_generation;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void) {
  atomic_fetch_add_explicit(&ccache__fork_generation, 1, memory_order_relaxed);
  ccache__default_after_fork();
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, on_fork_child); }

void ccache__register_atfork(void) { pthread_once(&atfork_once, register_atfork); }

int ccache__config_valid(const ccache_config *cfg) {
  /* Fields appended later (the tiers) take their defaults when a caller's
   * struct ends before them. */
  if (cfg->size < CCACHE__CONFIG_MIN_SIZE) return 0;
  if (ccache__tiers_check(cfg) != CCACHE_OK) return 0;
  if (cfg->max_items == 0 || cfg->ttl_ms == 0 || cfg->max_cost_bytes == 0) return 0;
  if (!cfg->alloc != !cfg->free) return 0; /* both or neither, as zstd's customMem */
  return 1;
}

void ccache_config_init(ccache_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->size = sizeof *cfg;
  cfg->sweeper_thread = 1;
  cfg->max_items = CCACHE_UNBOUNDED;
  cfg->ttl_ms = CCACHE_UNBOUNDED;
  cfg->max_cost_bytes = CCACHE_UNBOUNDED;
  cfg->tier_min_compile_us = 1000;
}

/* Locks and condition variables; on failure everything made is undone. */
static int init_sync(ccache *c) {
  unsigned i;
  for (i = 0; i < CCACHE__NSTRIPES; i++)
    if (pthread_mutex_init(&c->stripes[i].s.mu, NULL)) goto fail_stripes;
  if (pthread_mutex_init(&c->wlock, NULL)) goto fail_stripes;
  if (pthread_mutex_init(&c->pmu, NULL)) goto fail_wlock;
  if (pthread_cond_init(&c->flight_cv, NULL)) goto fail_pmu;
  if (pthread_cond_init(&c->pflight_cv, NULL)) goto fail_fcv;
  if (ccache__sweeper_init(c) != CCACHE_OK) goto fail_pcv;
  return CCACHE_OK;
fail_pcv:
  pthread_cond_destroy(&c->pflight_cv);
fail_fcv:
  pthread_cond_destroy(&c->flight_cv);
fail_pmu:
  pthread_mutex_destroy(&c->pmu);
fail_wlock:
  pthread_mutex_destroy(&c->wlock);
fail_stripes:
  while (i-- > 0) pthread_mutex_destroy(&c->stripes[i].s.mu);
  return CCACHE_ENOMEM;
}

static void destroy_sync(ccache *c) {
  ccache__sweeper_destroy(c);
  pthread_cond_destroy(&c->pflight_cv);
  pthread_cond_destroy(&c->flight_cv);
  pthread_mutex_destroy(&c->pmu);
  pthread_mutex_destroy(&c->wlock);
  for (unsigned i = 0; i < CCACHE__NSTRIPES; i++) pthread_mutex_destroy(&c->stripes[i].s.mu);
}

int ccache_open(const ccache_config *cfg, ccache **out) {
  if (!cfg || !out || !ccache__config_valid(cfg)) return CCACHE_EINVAL;
  ccache__register_atfork();
  ccache__mem mem = {cfg->alloc, cfg->free, cfg->alloc_ctx};
  /* The allocator promises only malloc's alignment; place the cache on a
   * stripe boundary by hand so no two stripes share a cache line. */
  void *raw = ccache__calloc(&mem, sizeof(ccache) + CCACHE__STRIPE_ALIGN);
  if (!raw) return CCACHE_ENOMEM;
  ccache *c = (ccache *)(((uintptr_t)raw + CCACHE__STRIPE_ALIGN - 1) &
                         ~(uintptr_t)(CCACHE__STRIPE_ALIGN - 1));
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
  c->next_idx = 1;
  c->fork_gen = atomic_load(&ccache__fork_generation);
  int rc = init_sync(c);
  if (rc == CCACHE_OK) {
    rc = ccache__sweeper_kick(c, cfg->ttl_ms);
    /* Tiers last: from here on nothing fails, so the caller's tiers are
     * either all the cache's or all still the caller's. */
    if (rc == CCACHE_OK) rc = ccache__tiers_open(c, cfg);
    if (rc != CCACHE_OK) {
      ccache__sweeper_stop(c);
      destroy_sync(c);
    }
  }
  if (rc != CCACHE_OK) {
    ccache__free(&mem, raw);
    return rc;
  }
  *out = c;
  return CCACHE_OK;
}

static uint64_t leases_out(ccache *c) {
  uint64_t n = 0;
  for (unsigned i = 0; i < CCACHE__NSTRIPES; i++) n += atomic_load(&c->stripes[i].s.leases_out);
  return n;
}

static bool busy(ccache *c) {
  bool b = atomic_load(&c->inflight) > 0;
  pthread_mutex_lock(&c->pmu);
  b = b || c->handles_out > 0;
  pthread_mutex_unlock(&c->pmu);
  return b || leases_out(c) > 0;
}

int ccache_close(ccache *c) {
  if (!c) return CCACHE_OK;
  if (ccache__forked(c)) return CCACHE_EFORKED;
  if (c->is_default) return CCACHE_EINVAL;
  if (ccache__in_callback(c) || busy(c)) return CCACHE_EBUSY;
  /* From here on, calls that would add to the cache are refused (EBUSY), so
   * destroy callbacks run by the last sweep or by the teardown below cannot
   * leave anything behind, nor start a new sweeper. */
  atomic_store(&c->closing, 1);
  ccache__sweeper_stop(c);
  /* A destroy run by the last sweep may itself have taken a lease before
   * the gate closed. */
  if (busy(c)) {
    atomic_store(&c->closing, 0);
    ccache__sweeper_kick(c, atomic_load(&c->ttl_ms));
    return CCACHE_EBUSY;
  }
  ccache__graveyard gy = {NULL, NULL};
  pthread_mutex_lock(&c->wlock);
  ccache__readers_lock(c);
  ccache__clear_wlocked(c, NULL, &gy);
  ccache__readers_unlock(c);
  pthread_mutex_unlock(&c->wlock);
  ccache__graveyard_drain(c, &gy);
  ccache__assert(c->programs == NULL && c->items == 0);
  ccache__tiers_close(c);
  destroy_sync(c);
  ccache__mem mem = c->mem;
  ccache__free(&mem, c->raw);
  return CCACHE_OK;
}
