/*
 * redis_idle.c - closing connections left unused (idle_close_ms).
 *
 * Once a fleet is warm its processes rarely miss, so a connection made for
 * one miss would stay open for the life of the process, and each server
 * would end up holding a connection (and a renewal connection per thread
 * that compiled) from every process that ever missed one of its keys.  A
 * pooled connection given back idle, and the renewal connection after its
 * last renewal, is therefore closed once unused for idle_close_ms (default
 * 20 s): a process holds connections only to the servers it used within
 * that time, and bench/fleet_model.py counts them that way.
 *
 * One library thread per tier does it (a worker: started with the first
 * connection given back, joined at close).  It sleeps until the oldest
 * idle connection expires; with none left it sleeps without a deadline
 * (reap_parked), and the next connection given back wakes it.  The idle
 * pool is a stack whose given-back times rise from the bottom, so the
 * expired ones are at the bottom; take_conn pops from the top, so a burst's
 * extra connections are the ones that age out.
 *
 * Locks: reap_mu is a leaf, never held across a server's server_mu or renew_mu;
 * the sweep takes each server's renew_mu, then its server_mu, one at a time
 * (renew_mu may wait for one renewal's I/O: bounded by command_timeout_ms).
 */
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tier/redis/redis.h"

#define IDLE_THREAD_NAME "ccache-ridle"

/* (since may be a little after now: used while the sweep ran) */
static bool expired(const ccache__rpool *p, uint64_t since, uint64_t now) {
  return now >= since + p->idle_close_ms;
}

/* Server s's expired pooled connections, closed; the earliest expiry of
 * the rest folded into *next. */
static void sweep_pool(ccache__rpool *p, ccache__rserver *s, uint64_t now, uint64_t *next) {
  struct redisContext *drop[CCACHE__REDIS_IDLE_MAX];
  int k = 0;
  ccache__lock(&s->server_mu);
  while (k < s->n_idle && expired(p, s->idle_since[k], now)) {
    drop[k] = s->idle[k];
    k++;
  }
  /* Nothing expired: nothing written (a sweep that finds every connection
   * fresh, the common case, leaves the pool's memory as it was). */
  for (int i = k; k && i < s->n_idle; i++) {
    s->idle[i - k] = s->idle[i];
    s->idle_since[i - k] = s->idle_since[i];
  }
  if (k) s->n_idle -= k;
  if (s->n_idle && s->idle_since[0] + p->idle_close_ms < *next)
    *next = s->idle_since[0] + p->idle_close_ms;
  ccache__unlock(&s->server_mu);
  for (int i = 0; i < k; i++) redisFree(drop[i]);
  atomic_fetch_add_explicit(&p->idle_expired, (uint64_t)k, memory_order_relaxed);
}

/* Server s's renewal connection, closed if expired (else its expiry
 * folded into *next). */
static void sweep_renew(ccache__rpool *p, ccache__rserver *s, uint64_t now, uint64_t *next) {
  struct redisContext *drop = NULL;
  ccache__lock(&s->renew_mu);
  if (s->renew_ctx && expired(p, s->renew_used_ms, now)) {
    drop = s->renew_ctx;
    s->renew_ctx = NULL;
  } else if (s->renew_ctx && s->renew_used_ms + p->idle_close_ms < *next) {
    *next = s->renew_used_ms + p->idle_close_ms;
  }
  ccache__unlock(&s->renew_mu);
  if (drop) {
    redisFree(drop);
    atomic_fetch_add_explicit(&p->idle_expired, 1, memory_order_relaxed);
  }
}

uint64_t ccache__ridle_sweep(ccache__rpool *p, uint64_t now_ms) {
  uint64_t next = UINT64_MAX;
  if (p->idle_close_ms == CCACHE_UNBOUNDED) return next;
  for (size_t i = 0; i < p->n; i++) {
    sweep_renew(p, &p->servers[i], now_ms, &next);
    sweep_pool(p, &p->servers[i], now_ms, &next);
  }
  return next;
}

static void *reaper_main(void *arg) {
  ccache__rpool *p = arg;
  ccache__lock(&p->reap_mu);
  while (!p->reaper.stop) {
    p->reap_woken = false;
    /* Parked before the sweep: a connection given back after the sweep
     * passed its server sees it and wakes us (reap_woken). */
    atomic_store(&p->reap_parked, true);
    ccache__unlock(&p->reap_mu);
    uint64_t next = ccache__ridle_sweep(p, ccache__rmono_ms());
    ccache__lock(&p->reap_mu);
    if (next != UINT64_MAX) atomic_store(&p->reap_parked, false);
    if (p->reaper.stop || p->reap_woken) continue;
    /* A connection given back later expires after next: no wake needed. */
    ccache__worker_sleep_locked(&p->reaper, next == UINT64_MAX ? UINT64_MAX : next * 1000000u);
  }
  ccache__unlock(&p->reap_mu);
  return NULL;
}

int ccache__ridle_init(ccache__rpool *p) {
  atomic_store(&p->reap_parked, true);
  if (p->idle_close_ms == CCACHE_UNBOUNDED) return CCACHE_OK;
  int rc = ccache__worker_init_with_mutex(&p->reaper, &p->reap_mu);
  p->reaper_made = rc == CCACHE_OK;
  return rc;
}

void ccache__ridle_note(ccache__rpool *p) {
  if (!p->reaper_made || !atomic_load(&p->reap_parked)) return;
  ccache__lock(&p->reap_mu);
  p->reap_woken = true;
  /* Not started (or failed to start): the connection stays pooled, as
   * without the option; the next one given back tries again. */
  if (ccache__worker_start_locked(&p->reaper, reaper_main, p, IDLE_THREAD_NAME) == CCACHE_OK)
    ccache__worker_wake_locked(&p->reaper);
  ccache__unlock(&p->reap_mu);
}

void ccache__ridle_stop(ccache__rpool *p) {
  if (!p->reaper_made) return;
  p->reaper_made = false;
  /* A fork child has no such thread (nor may it join the parent's). */
  if (getpid() == p->pid) {
    ccache__lock(&p->reap_mu);
    ccache__worker_stop_locked(&p->reaper);
    ccache__unlock(&p->reap_mu);
    ccache__worker_join(&p->reaper);
    ccache__worker_destroy_with_mutex(&p->reaper);
  }
}
