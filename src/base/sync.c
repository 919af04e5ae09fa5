/* sync.c - checked pthread calls (see sync.h). */
#include "base/sync.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccache.h"

_Noreturn void ccache__panic(const char *what, int err) {
  fprintf(stderr, "ccache: internal error: %s failed: %s\n", what, strerror(err));
  abort();
}

#if CCACHE_DEBUG >= 1
_Noreturn void ccache__assert_fail(const char *expr, const char *func, const char *file, int line) {
  fprintf(stderr, "ccache: assertion failed: %s (%s, %s:%d)\n", expr, func, file, line);
  abort();
}
#endif

int ccache__thread_status(int err, const char *what) {
  switch (err) {
    case 0:
      return CCACHE_OK;
    case EAGAIN:
      return CCACHE_ETHREAD;
    case ENOMEM:
      return CCACHE_ENOMEM;
    default:
      ccache__panic(what, err);
  }
}

#if CCACHE_DEBUG >= 1
/* A unique, non-zero address per live thread. */
static _Thread_local char self_marker;
uintptr_t ccache__self(void) { return (uintptr_t)&self_marker; }
#define SET_OWNER(m, v) atomic_store_explicit(&(m)->owner, (v), memory_order_relaxed)
#else
#define SET_OWNER(m, v) ((void)0)
#endif

int ccache__mutex_init(ccache__mutex *m) {
  SET_OWNER(m, 0);
  return ccache__thread_status(pthread_mutex_init(&m->posix, NULL), "pthread_mutex_init");
}

void ccache__mutex_destroy(ccache__mutex *m) {
  int err = pthread_mutex_destroy(&m->posix);
  if (err) ccache__panic("pthread_mutex_destroy", err);
}

int ccache__cond_init(pthread_cond_t *cv, bool monotonic) {
  pthread_condattr_t ca;
  int err = pthread_condattr_init(&ca);
  if (err) return ccache__thread_status(err, "pthread_condattr_init");
  if (monotonic && (err = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) != 0)
    ccache__panic("pthread_condattr_setclock", err);
  err = pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
  return ccache__thread_status(err, "pthread_cond_init");
}

void ccache__cond_destroy(pthread_cond_t *cv) {
  int err = pthread_cond_destroy(cv);
  if (err) ccache__panic("pthread_cond_destroy", err);
}

void ccache__lock(ccache__mutex *m) {
  int err = pthread_mutex_lock(&m->posix);
  if (err) ccache__panic("pthread_mutex_lock", err);
  SET_OWNER(m, ccache__self());
}

void ccache__unlock(ccache__mutex *m) {
  ccache__assert_held(m);
  SET_OWNER(m, 0);
  int err = pthread_mutex_unlock(&m->posix);
  if (err) ccache__panic("pthread_mutex_unlock", err);
}

void ccache__cond_wait(pthread_cond_t *cv, ccache__mutex *m) {
  ccache__assert_held(m);
  SET_OWNER(m, 0);
  int err = pthread_cond_wait(cv, &m->posix);
  if (err) ccache__panic("pthread_cond_wait", err);
  SET_OWNER(m, ccache__self());
}

bool ccache__cond_timedwait(pthread_cond_t *cv, ccache__mutex *m, const struct timespec *abstime) {
  ccache__assert_held(m);
  SET_OWNER(m, 0);
  int err = pthread_cond_timedwait(cv, &m->posix, abstime);
  if (err && err != ETIMEDOUT) ccache__panic("pthread_cond_timedwait", err);
  SET_OWNER(m, ccache__self());
  return err == 0;
}

void ccache__cond_signal(pthread_cond_t *cv) {
  int err = pthread_cond_signal(cv);
  if (err) ccache__panic("pthread_cond_signal", err);
}

void ccache__cond_broadcast(pthread_cond_t *cv) {
  int err = pthread_cond_broadcast(cv);
  if (err) ccache__panic("pthread_cond_broadcast", err);
}

void ccache__join(pthread_t t) {
  int err = pthread_join(t, NULL);
  if (err) ccache__panic("pthread_join", err);
}
