/*
 * sweeper.c - the TTL sweeper thread.
 *
 * While ttl_ms is finite it runs a sweep every ttl/2 (clamped to 1 ms..60 s),
 * the period EMLX's CompileCache uses (send_after(div(ttl, 2))), but waiting
 * on a condition variable over CLOCK_MONOTONIC instead of sleeping, so that
 * ccache_set_limits() can wake it at once (a new TTL starts a new period,
 * unbounded parks it) and ccache_close() can stop it at once whatever the
 * TTL.  Expiry itself is judged with the cache's configured clock, like every
 * other call.  Destroys caused by its sweeps run on this thread, outside every
 * lock.  The thread starts the first time the TTL is finite (at open or at
 * set_limits), never when config.sweeper_thread is 0.
 */
#include <errno.h>
#include <time.h>

#include "internal.h"

static uint64_t period_ms(uint64_t ttl) {
  uint64_t p = ttl / 2;
  if (p < 1) p = 1;
  if (p > 60000) p = 60000;
  return p;
}

static struct timespec deadline_after(uint64_t ms) {
  uint64_t ns = ccache__mono_ns() + ms * 1000000u;
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  return ts;
}

static void *sweeper_main(void *arg) {
  ccache *c = arg;
  ccache__lock(&c->sw_mu);
  uint64_t gen = c->sw_gen;
  struct timespec deadline = deadline_after(period_ms(atomic_load(&c->ttl_ms)));
  while (!c->sw_stop) {
    uint64_t ttl = atomic_load(&c->ttl_ms);
    if (gen != c->sw_gen) { /* set_limits: a new period from now */
      gen = c->sw_gen;
      deadline = deadline_after(period_ms(ttl));
    }
    if (ttl == CCACHE_UNBOUNDED) { /* parked until set_limits or close */
      ccache__cond_wait(&c->sw_cv, &c->sw_mu);
      continue;
    }
    if (ccache__cond_timedwait(&c->sw_cv, &c->sw_mu, &deadline) || c->sw_stop)
      continue; /* woken (or spurious): re-read the TTL and the generation */
    ccache__unlock(&c->sw_mu);
    ccache__sweep(c, ccache__now_ms(c));
    ccache__lock(&c->sw_mu);
    deadline = deadline_after(period_ms(atomic_load(&c->ttl_ms)));
  }
  ccache__unlock(&c->sw_mu);
  return NULL;
}

int ccache__sweeper_init(ccache *c) {
  int rc = ccache__cond_init(&c->sw_cv, true);
  if (rc != CCACHE_OK) return rc;
  rc = ccache__mutex_init(&c->sw_mu);
  if (rc != CCACHE_OK) ccache__cond_destroy(&c->sw_cv);
  return rc;
}

int ccache__sweeper_kick(ccache *c, uint64_t ttl) {
  if (!c->sweeper_enabled) return CCACHE_OK;
  int rc = CCACHE_OK;
  ccache__lock(&c->sw_mu);
  /* Never a new thread once close has begun: it would outlive the cache. */
  if (!c->sw_started && ttl != CCACHE_UNBOUNDED && !atomic_load(&c->closing)) {
    int err = pthread_create(&c->sw_thread, NULL, sweeper_main, c);
    if (err == 0)
      c->sw_started = 1;
    else
      rc = ccache__thread_status(err, "pthread_create");
  }
  c->sw_gen++;
  ccache__cond_signal(&c->sw_cv);
  ccache__unlock(&c->sw_mu);
  return rc;
}

void ccache__sweeper_stop(ccache *c) {
  ccache__lock(&c->sw_mu);
  int started = c->sw_started;
  c->sw_stop = 1;
  ccache__cond_signal(&c->sw_cv);
  ccache__unlock(&c->sw_mu);
  if (started) {
    int err = pthread_join(c->sw_thread, NULL);
    if (err) ccache__panic("pthread_join", err);
  }
  ccache__lock(&c->sw_mu);
  c->sw_started = 0;
  c->sw_stop = 0;
  ccache__unlock(&c->sw_mu);
}

void ccache__sweeper_destroy(ccache *c) {
  ccache__cond_destroy(&c->sw_cv);
  ccache__mutex_destroy(&c->sw_mu);
}
