/*
 * invoke.c - the core's user callbacks (the clock, the two destroys, the
 * event hook) are invoked from here, with no internal lock held, each
 * through CCACHE__USER_CALL (base/callback.h): under a frame keyed by its
 * cache, so ccache_close() from inside one is refused.  Compile callbacks
 * run the same way from closure_compile.c and program.c; tier ops and codec
 * calls from the tier stack (tier/tier.h's CCACHE__IN_FRAME).
 */
#include <string.h>

#include "core/internal.h"

uint64_t ccache__now_ms(ccache *c) {
  if (!c->clock_ms) return ccache__mono_ns() / 1000000u;
  uint64_t now;
  CCACHE__USER_CALL(c, NULL, now = c->clock_ms(c->ctx));
  return now;
}

void ccache__destroy_closure(ccache *c, void *closure) {
  CCACHE__MISUSE(ccache__misuse_gone(c, closure, 'c'));
  if (c->destroy_closure && closure)
    CCACHE__USER_CALL(c, NULL, c->destroy_closure(closure, c->ctx));
  atomic_fetch_add_explicit(&c->closures_destroyed, 1, memory_order_relaxed);
}

void ccache__destroy_program(ccache *c, void *native) {
  CCACHE__MISUSE(ccache__misuse_gone(c, native, 'p'));
  if (c->destroy_program && native) CCACHE__USER_CALL(c, NULL, c->destroy_program(native, c->ctx));
  atomic_fetch_add_explicit(&c->programs_destroyed, 1, memory_order_relaxed);
}

void ccache__event_emit(ccache *c, ccache_event *ev) {
  ev->size = sizeof *ev;
  CCACHE__USER_CALL(c, NULL, c->on_event(c->event_ctx, ev));
}

void ccache__event_compile(ccache *c, int kind, int level, ccache_key key, int status,
                           uint64_t duration_ns) {
  ccache_event ev;
  memset(&ev, 0, sizeof ev);
  ev.kind = kind;
  ev.level = level;
  ev.key = key;
  ev.status = status;
  ev.duration_ns = duration_ns;
  ccache__event_emit(c, &ev);
}
