/*
 * invoke.c - the core's user callbacks (the clock, the two destroys) are
 * invoked from here, with no internal lock held, each under a callback
 * frame keyed by its cache (base/callback.h), so ccache_close() from inside
 * one is refused.  Compile callbacks push the same frame (closure_compile.c,
 * program.c); tier ops and codec calls push theirs in the tier stack.
 */
#include "core/internal.h"

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
