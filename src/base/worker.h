/*
 * worker.h - the one lifecycle of every background thread the library runs
 * (the TTL sweeper, the lease-renewal lanes, the directory tier's cleaner):
 * started on first need, woken through its condition, stopped and joined at
 * close, startable again after a join.
 *
 * A worker's fields are guarded by `mu`, which the worker does not own:
 * several workers may share one (the renewal lanes share the tiers' r_mu),
 * and the thread's own state lives under the same lock.  The thread's main
 * reads `stop` under mu and returns once it is set.
 */
#ifndef CCACHE_WORKER_H
#define CCACHE_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/sync.h"

typedef struct ccache__worker {
  ccache__mutex *mu;  /* guards the fields below; not owned */
  pthread_cond_t cv;  /* CLOCK_MONOTONIC: work came, or stop */
  pthread_t thread;   /* valid while started */
  bool started, stop; /* stop: the thread's main must return */
} ccache__worker;

/* The condition (CLOCK_MONOTONIC); mu must outlive the worker.  CCACHE_OK,
 * CCACHE_ENOMEM or CCACHE_ETHREAD. */
int ccache__worker_init(ccache__worker *w, ccache__mutex *mu);
/* After ccache__worker_join (or if it never started). */
void ccache__worker_destroy(ccache__worker *w);
/* The same two for a worker whose lock is its own: mu is made first and
 * unmade last (on failure nothing is left). */
int ccache__worker_init_with_mutex(ccache__worker *w, ccache__mutex *mu);
void ccache__worker_destroy_with_mutex(ccache__worker *w);
/* mu held: run main(arg) on a new thread named `name` (at most 15
 * characters; NULL: unnamed) unless it runs already.  CCACHE_OK if it runs,
 * CCACHE_EBUSY while a stop is pending, or pthread_create's failure as a
 * status (ccache__thread_status). */
int ccache__worker_start_locked(ccache__worker *w, void *(*main)(void *), void *arg,
                                const char *name);
/* mu held: wake the thread (its state under mu changed). */
void ccache__worker_wake_locked(ccache__worker *w);
/* mu held, on the worker's thread: sleep until woken or until `until_ns` on
 * CLOCK_MONOTONIC (UINT64_MAX: no deadline); false if the deadline came. */
bool ccache__worker_sleep_locked(ccache__worker *w, uint64_t until_ns);
/* mu held: ask the thread to stop, and wake it. */
void ccache__worker_stop_locked(ccache__worker *w);
/* mu not held, after ccache__worker_stop_locked: wait for the thread to end
 * (if it was started); then it may be started again. */
void ccache__worker_join(ccache__worker *w);

#endif /* CCACHE_WORKER_H */
