/*
 * sync.h - pthread calls, checked.
 *
 * A pthread call that fails with EINVAL, EDEADLK or EPERM means a bug in
 * this library (a destroyed or foreign mutex, a relock, an unlock by a thread
 * that does not own it): continuing would corrupt the cache, so the wrappers
 * abort with a message naming the call, as libuv's uv_mutex_lock does.
 * Failures that a correct program can meet (EAGAIN, ENOMEM at init) are
 * returned as statuses instead: CCACHE_ETHREAD, CCACHE_ENOMEM.
 *
 * In debug builds each mutex also records its owner, so functions named
 * *_locked can assert that their caller holds the lock.
 */
#ifndef CCACHE_SYNC_H
#define CCACHE_SYNC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/debug.h"

typedef struct ccache__mutex {
  pthread_mutex_t posix;
#if CCACHE_DEBUG >= 1
  _Atomic uintptr_t owner; /* ccache__self() of the holder, 0 if free */
#endif
} ccache__mutex;

/* Prints "ccache: internal error: <what> failed: <strerror(err)>" and aborts. */
_Noreturn void ccache__panic(const char *what, int err);

/* Init/destroy: CCACHE_OK, CCACHE_ENOMEM or CCACHE_ETHREAD (EAGAIN). */
int ccache__mutex_init(ccache__mutex *m);
void ccache__mutex_destroy(ccache__mutex *m);
int ccache__cond_init(pthread_cond_t *cv, bool monotonic);
void ccache__cond_destroy(pthread_cond_t *cv);

void ccache__lock(ccache__mutex *m);
void ccache__unlock(ccache__mutex *m);
void ccache__cond_wait(pthread_cond_t *cv, ccache__mutex *m);
/* false on timeout (abstime on the condition's clock). */
bool ccache__cond_timedwait(pthread_cond_t *cv, ccache__mutex *m, const struct timespec *abstime);
void ccache__cond_signal(pthread_cond_t *cv);
void ccache__cond_broadcast(pthread_cond_t *cv);
/* Join a thread this library started (its result is not used). */
void ccache__join(pthread_t t);

/* A pthread return code from pthread_create and the like, as a status. */
int ccache__thread_status(int err, const char *what);

#if CCACHE_DEBUG >= 1
uintptr_t ccache__self(void);
static inline bool ccache__held(ccache__mutex *m) {
  return atomic_load_explicit(&m->owner, memory_order_relaxed) == ccache__self();
}
#define ccache__assert_held(m) ccache__assert(ccache__held(m))
#else
#define ccache__assert_held(m) ((void)sizeof(m))
#endif

#endif
