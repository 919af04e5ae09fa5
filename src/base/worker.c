/*
 * worker.c - background threads (worker.h).
 */
#define _GNU_SOURCE 1 /* pthread_setname_np */

#include <time.h>

#include "ccache.h"
#include "base/worker.h"

int ccache__worker_init(ccache__worker *w, ccache__mutex *mu) {
  w->mu = mu;
  w->started = w->stop = false;
  return ccache__cond_init(&w->cv, true);
}

void ccache__worker_destroy(ccache__worker *w) { ccache__cond_destroy(&w->cv); }

int ccache__worker_init_with_mutex(ccache__worker *w, ccache__mutex *mu) {
  int rc = ccache__mutex_init(mu);
  if (rc != CCACHE_OK) return rc;
  rc = ccache__worker_init(w, mu);
  if (rc != CCACHE_OK) ccache__mutex_destroy(mu);
  return rc;
}

void ccache__worker_destroy_with_mutex(ccache__worker *w) {
  ccache__worker_destroy(w);
  ccache__mutex_destroy(w->mu);
}

int ccache__worker_start_locked(ccache__worker *w, void *(*main)(void *), void *arg,
                                const char *name) {
  ccache__assert_held(w->mu);
  if (w->started) return CCACHE_OK;
  if (w->stop) return CCACHE_EBUSY;
  int err = pthread_create(&w->thread, NULL, main, arg);
  if (err != 0) return ccache__thread_status(err, "pthread_create");
  w->started = true;
  /* A name that tools show (top -H, gdb, /proc/<pid>/task/<tid>/comm). */
  if (name) pthread_setname_np(w->thread, name);
  return CCACHE_OK;
}

void ccache__worker_wake_locked(ccache__worker *w) {
  ccache__assert_held(w->mu);
  ccache__cond_broadcast(&w->cv);
}

bool ccache__worker_sleep_locked(ccache__worker *w, uint64_t until_ns) {
  if (until_ns == UINT64_MAX) {
    ccache__cond_wait(&w->cv, w->mu);
    return true;
  }
  struct timespec ts = {(time_t)(until_ns / 1000000000u), (long)(until_ns % 1000000000u)};
  return ccache__cond_timedwait(&w->cv, w->mu, &ts);
}

void ccache__worker_stop_locked(ccache__worker *w) {
  ccache__assert_held(w->mu);
  w->stop = true;
  ccache__cond_broadcast(&w->cv);
}

void ccache__worker_join(ccache__worker *w) {
  ccache__lock(w->mu);
  bool started = w->started;
  ccache__unlock(w->mu);
  if (started) ccache__join(w->thread);
  ccache__lock(w->mu);
  w->started = w->stop = false;
  ccache__unlock(w->mu);
}
