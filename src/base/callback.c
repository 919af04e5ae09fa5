/*
 * callback.c - the thread-local stack of callback frames (callback.h), and
 * the monotonic clock.  Frames are pushed by CCACHE__USER_CALL, around every
 * user callback; this file only keeps the stack.
 */
#include <time.h>

#include "base/callback.h"

static _Thread_local ccache__frame *tls_top;

void ccache__frame_push(ccache__frame *f, const void *key) {
  f->key = key;
  f->prev = tls_top;
  tls_top = f;
}

void ccache__frame_pop(ccache__frame *f) { tls_top = f->prev; }

bool ccache__in_callback(const void *key) {
  for (const ccache__frame *f = tls_top; f; f = f->prev)
    if (f->key == key) return true;
  return false;
}

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t ccache__mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

uint64_t ccache__realtime_ns(void) { return clock_ns(CLOCK_REALTIME); }

uint64_t ccache__realtime_ms(void) { return ccache__realtime_ns() / 1000000u; }
