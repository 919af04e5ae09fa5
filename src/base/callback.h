/*
 * callback.h - callback frames and the monotonic clock.
 *
 * A frame is pushed on a thread-local stack around every user callback the
 * library runs (compile, destroy, clock, a tier op, a codec call), keyed by
 * the cache it runs for: ccache_close() asks whether its cache has a frame
 * on the calling thread and refuses (CCACHE_EBUSY) instead of freeing the
 * cache under the caller's feet.  The key is only compared, never followed,
 * so layers below the core key their frames by the cache's address without
 * knowing its structure.
 */
#ifndef CCACHE_CALLBACK_H
#define CCACHE_CALLBACK_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ccache__frame {
  const void *key; /* the cache the callback runs for */
  struct ccache__frame *prev;
} ccache__frame;

void ccache__frame_push(ccache__frame *f, const void *key);
void ccache__frame_pop(ccache__frame *f);
/* Whether a frame keyed by `key` is on this thread's stack. */
bool ccache__in_callback(const void *key);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t ccache__mono_ns(void);

/* CLOCK_REALTIME since the Unix epoch, in nanoseconds and in milliseconds
 * (what is stored: entry times, lease tokens, file ages). */
uint64_t ccache__realtime_ns(void);
uint64_t ccache__realtime_ms(void);

/* The one way user code runs: `call` (a statement, e.g. `rc = fn(...)`)
 * under a frame keyed by `key`; took_ns (a uint64_t *, or NULL: untimed)
 * gets its duration on CLOCK_MONOTONIC. */
#define CCACHE__USER_CALL(key, took_ns, call)     \
  do {                                            \
    uint64_t *took_ = (took_ns);                  \
    ccache__frame fr_;                            \
    ccache__frame_push(&fr_, (key));              \
    uint64_t t0_ = took_ ? ccache__mono_ns() : 0; \
    call;                                         \
    if (took_) *took_ = ccache__mono_ns() - t0_;  \
    ccache__frame_pop(&fr_);                      \
  } while (0)

#endif /* CCACHE_CALLBACK_H */
