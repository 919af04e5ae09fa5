/*
 * callback.c - every user callback (clock, destroy) is invoked from here,
 * with no internal lock held.  Each pushes a thread-local frame naming its
 * cache, so ccache_close() can tell it is being called from inside one of its
 * own callbacks (and refuse with CCACHE_EBUSY instead of freeing the cache
 * under the caller's feet).  Compile callbacks push the same frame (flight.c).
 */
#include <time.h>

#include "core/internal.h"

static _Thread_local ccache__frame *tls_top;

void ccache__frame_push(ccache__frame *f, const ccache *c) {
  f->c = c;
  f->prev = tls_top;
  tls_top = f;
}

void ccache__frame_pop(ccache__frame *f) { tls_top = f->prev; }

bool ccache__in_callback(const ccache *c) {
  for (const ccache__frame *f = tls_top; f; f = f->prev)
    if (f->c == c) return true;
  return false;
}

uint64_t ccache__mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t ccache__now_ms(ccache *c) {
  if (!c->clock_ms) return ccache__mono_ns() / 1000000u;
  ccache__frame f;
  ccache__frame_push(&f, c);
  uint64_t now = c->clock_ms(c->ctx);
  ccache__frame_pop(&f);
  return now;
}

void ccache__destroy_closure(ccache *c, void *closure) {
  CCACHE__MISUSE(ccache__misuse_gone(c, closure, 'c'));
  if (c->destroy_closure && closure) {
    ccache__frame f;
    ccache__frame_push(&f, c);
    c->destroy_closure(closure, c->ctx);
    ccache__frame_pop(&f);
  }
  atomic_fetch_add_explicit(&c->closures_destroyed, 1, memory_order_relaxed);
}

void ccache__destroy_program(ccache *c, void *native) {
  CCACHE__MISUSE(ccache__misuse_gone(c, native, 'p'));
  if (c->destroy_program && native) {
    ccache__frame f;
    ccache__frame_push(&f, c);
    c->destroy_program(native, c->ctx);
    ccache__frame_pop(&f);
  }
  atomic_fetch_add_explicit(&c->programs_destroyed, 1, memory_order_relaxed);
}
