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

uint64_t ccache__mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
