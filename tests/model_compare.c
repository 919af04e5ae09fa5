/*
 * model_compare.c - the real cache against the model at the end of every
 * step: the destroy events (in order, or as a multiset after clear and
 * close; each object destroyed exactly once), every ccache_stats field but
 * compile_ns (which must never go down), the handles held, and
 * ccache__check every o->check_every steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h" /* ccache__check */
#include "model_world.h"

/* ------------------------------------------------------------- comparing */

// clang-format off
#define M_STATS(X) \
  X(hits) \
  X(misses) \
  X(inserts) \
  X(replaced) \
  X(evicted_capacity) \
  X(evicted_ttl) \
  X(evicted_cost) \
  X(removed) \
  X(cleared) \
  X(items) \
  X(programs) \
  X(programs_destroyed) \
  X(closures_destroyed) \
  X(leases_out) \
  X(cost_bytes) \
  X(program_hits) \
  X(program_misses) \
  X(compiles) \
  X(program_compiles) \
  X(compile_failures) \
  X(program_compile_failures) \
  X(waits) \
  X(program_waits)
// clang-format on

static int ev_cmp(const void *a, const void *b) {
  const t_event *x = a, *y = b;
  if (x->kind != y->kind) return x->kind - y->kind;
  return (x->id > y->id) - (x->id < y->id);
}

void m_compare_events(m_world *w) {
  int n = w->t.nlog;
  if (n >= T_LOG_MAX) mfail(w, "destroy log overflow");
  for (int i = 0; i < n; i++) { /* exactly once, whatever the model says */
    t_event e = w->t.log[i];
    unsigned char *dead = e.kind == 'c' ? w->cdead : w->ndead;
    if (e.id <= 0 || (size_t)e.id >= w->dead_cap) {
      mfail(w, "destroy of an unknown object %c%d", e.kind, e.id);
    } else {
      if (dead[e.id]) mfail(w, "%c%d destroyed twice", e.kind, e.id);
      dead[e.id] = 1;
    }
  }
  if (w->unordered) {
    qsort(w->t.log, (size_t)n, sizeof w->t.log[0], ev_cmp);
    qsort(w->ev, (size_t)w->nev, sizeof w->ev[0], ev_cmp);
  }
  int same = n == w->nev;
  for (int i = 0; same && i < n; i++)
    same = w->t.log[i].kind == w->ev[i].kind && w->t.log[i].id == w->ev[i].id;
  if (!same && !w->failed) {
    char buf[400];
    size_t at = 0;
    at += (size_t)snprintf(buf + at, sizeof buf - at, "destroys: got");
    for (int i = 0; i < n && at < 180; i++)
      at += (size_t)snprintf(buf + at, sizeof buf - at, " %c%d", w->t.log[i].kind, w->t.log[i].id);
    at += (size_t)snprintf(buf + at, sizeof buf - at, ", model says");
    for (int i = 0; i < w->nev && at < sizeof buf - 16; i++)
      at += (size_t)snprintf(buf + at, sizeof buf - at, " %c%d", w->ev[i].kind, w->ev[i].id);
    mfail(w, "%s", buf);
  }
  w->t.nlog = 0;
  w->nev = 0;
  w->unordered = 0;
}

void m_compare(m_world *w) {
  m_compare_events(w);
  ccache_stats s;
  memset(&s, 0xEE, sizeof s);
  s.size = sizeof s;
  ccache_stats_get(w->c, &s);
  w->exp.items = w->items;
  w->exp.cost_bytes = w->cost;
#define M_CMP(f)                                                              \
  if (s.f != w->exp.f)                                                        \
    mfail(w, "stats." #f " = %llu, model says %llu", (unsigned long long)s.f, \
          (unsigned long long)w->exp.f);
  M_STATS(M_CMP)
#undef M_CMP
  if (s.handles_out != (uint64_t)w->nhandles)
    mfail(w, "stats.handles_out = %llu, the driver holds %d", (unsigned long long)s.handles_out,
          w->nhandles);
  if (s.compile_ns < w->last_compile_ns) mfail(w, "compile_ns went down");
  w->last_compile_ns = s.compile_ns;
  if (w->o->check_every && w->step % w->o->check_every == 0 && ccache__check(w->c, now_of(w)) != 0)
    mfail(w, "ccache__check failed");
}
