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

#endif /* CCACHE_CALLBACK_H */
