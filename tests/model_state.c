/*
 * model_state.c - the model's state changes (the rules are listed in
 * model.c): failures and tracing, the closures and natives made and their
 * expected destroys, programs (intern, unref), entries (insert, replace,
 * evict, detach, die), and the leases and handles the driver holds.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_world.h"

/* ------------------------------------------------------------- the model */

void mfail(m_world *w, const char *fmt, ...) {
  if (w->failed) return;
  w->failed = 1;
  w->r->fail_step = w->step;
  int n = snprintf(w->r->msg, sizeof w->r->msg, "step %zu: ", w->step);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof w->r->msg)
    vsnprintf(w->r->msg + n, sizeof w->r->msg - (size_t)n, fmt, ap);
  va_end(ap);
}

void m_trace(m_world *w, const char *fmt, ...) {
  if (!w->o->trace) return;
  fprintf(stderr, "%*s", 2 + 4 * w->depth, "");
  if (w->depth == 0) fprintf(stderr, "#%zu ", w->step);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

void m_expect_ev(m_world *w, char kind, int id) {
  if (!id) return; /* NULL objects reach no callback */
  if (w->nev >= MAXEV) {
    mfail(w, "model event log overflow");
    return;
  }
  w->ev[w->nev].kind = kind;
  w->ev[w->nev].id = id;
  w->nev++;
}

void m_grow_dead(m_world *w, size_t id) {
  if (id < w->dead_cap) return;
  size_t cap = w->dead_cap ? w->dead_cap : 1024;
  while (cap <= id) cap *= 2;
  w->cdead = realloc(w->cdead, cap);
  w->ndead = realloc(w->ndead, cap);
  if (!w->cdead || !w->ndead) abort();
  memset(w->cdead + w->dead_cap, 0, cap - w->dead_cap);
  memset(w->ndead + w->dead_cap, 0, cap - w->dead_cap);
  w->dead_cap = cap;
}

t_obj *m_new_closure(m_world *w) {
  int id = ++w->next_cid;
  m_grow_dead(w, (size_t)id);
  return t_closure(id);
}

t_obj *m_new_native(m_world *w) {
  int id = ++w->next_nid;
  m_grow_dead(w, (size_t)id);
  return t_native(id);
}

/* We destroy an object ourselves (a failing compile cleaning up). */
void m_self_destroy(m_world *w, t_obj *o) {
  unsigned char *dead = o->kind == 'c' ? w->cdead : w->ndead;
  dead[o->id] = 1;
  free(o);
}

/* ---- programs ---- */

void m_prog_unref(m_world *w, int pi) {
  m_prog *p = &w->progs[pi];
  if (!p->alive || p->refs == 0) {
    mfail(w, "model: unref of a dead program");
    return;
  }
  if (--p->refs) return;
  if (p->table_refs) mfail(w, "model: program dies while charged");
  p->alive = 0;
  w->ptab[p->pk] = -1;
  w->exp.programs--;
  w->exp.programs_destroyed++;
  m_expect_ev(w, 'p', p->nid);
}

/* Interning (the public call with count = 1, a program compile's result
 * with count = 0).  Returns the program slot, which holds one more ref. */
int m_intern(m_world *w, uint64_t pk, int nid, void *native, uint64_t cost, int count) {
  int pi = w->ptab[pk];
  if (pi >= 0) {
    m_prog *p = &w->progs[pi];
    if (count) w->exp.program_hits++;
    p->refs++;
    if (native != p->native) {
      w->exp.programs_destroyed++;
      m_expect_ev(w, 'p', nid);
    }
    return pi;
  }
  for (pi = 0; pi < MAXPROG && w->progs[pi].alive; pi++) {
  }
  if (pi == MAXPROG) {
    mfail(w, "model: program pool full");
    return -1;
  }
  m_prog *p = &w->progs[pi];
  memset(p, 0, sizeof *p);
  p->alive = 1;
  p->pk = pk;
  p->nid = nid;
  p->native = native;
  p->cost = cost;
  p->refs = 1;
  w->ptab[pk] = pi;
  w->exp.programs++;
  if (count) w->exp.program_misses++;
  return pi;
}

/* ---- entries ---- */

static void charge(m_world *w, int pi) {
  if (w->progs[pi].table_refs++ == 0) w->cost += w->progs[pi].cost;
}

static void uncharge(m_world *w, int pi) {
  if (--w->progs[pi].table_refs == 0) w->cost -= w->progs[pi].cost;
}

static void m_ent_maybe_die(m_world *w, int ei) {
  m_ent *e = &w->ents[ei];
  if (!e->alive || e->in_table || e->leases || e->borrowers) return;
  e->alive = 0;
  if (e->lender >= 0) {
    w->ents[e->lender].borrowers--;
    m_ent_maybe_die(w, e->lender);
  } else {
    w->exp.closures_destroyed++;
    m_expect_ev(w, 'c', e->cid);
  }
  m_prog_unref(w, e->pi);
}

void m_detach(m_world *w, int ei, uint64_t *counter, m_gy *gy) {
  m_ent *e = &w->ents[ei];
  e->in_table = 0;
  w->tab[e->key] = -1;
  w->items--;
  uncharge(w, e->pi);
  if (counter) (*counter)++;
  gy->e[gy->n++] = ei;
}

void m_drain(m_world *w, m_gy *gy) {
  for (int i = 0; i < gy->n; i++) m_ent_maybe_die(w, gy->e[i]);
  gy->n = 0;
}

static int m_oldest(m_world *w) {
  int best = -1;
  for (uint32_t k = 0; k < w->nkeys; k++) {
    int ei = w->tab[k];
    if (ei >= 0 && (best < 0 || w->ents[ei].idx < w->ents[best].idx)) best = ei;
  }
  return best;
}

void m_enforce(m_world *w, int keep, m_gy *gy) {
  while (w->items > w->max_items) {
    int o = m_oldest(w);
    if (o < 0 || o == keep) break;
    m_detach(w, o, &w->exp.evicted_capacity, gy);
  }
  while (w->cost > w->max_cost) {
    int o = m_oldest(w);
    if (o < 0 || o == keep) break;
    m_detach(w, o, &w->exp.evicted_cost, gy);
  }
}

/* Insert (put or compile); the new entry takes a program reference. */
int m_insert(m_world *w, uint64_t key, int cid, void *closure, int pi, m_gy *gy) {
  int ei;
  for (ei = 0; ei < MAXENT && w->ents[ei].alive; ei++) {
  }
  if (ei == MAXENT) {
    mfail(w, "model: entry pool full");
    return -1;
  }
  uint64_t now = now_of(w);
  int old = w->tab[key];
  m_ent *e = &w->ents[ei];
  memset(e, 0, sizeof *e);
  e->alive = 1;
  e->key = key;
  e->cid = cid;
  e->closure = closure;
  e->lender = -1;
  e->pi = pi;
  e->idx = w->next_idx++;
  e->ins = now > w->last_ins ? now : w->last_ins;
  w->last_ins = e->ins;
  e->in_table = 1;
  if (old >= 0 && w->ents[old].closure == closure) { /* the very same pointer */
    int lender = w->ents[old].lender >= 0 ? w->ents[old].lender : old;
    w->r->borrowed++;
    e->lender = lender;
    w->ents[lender].borrowers++;
  }
  w->progs[pi].refs++;
  w->exp.inserts++;
  charge(w, pi);
  if (old >= 0) {
    w->exp.replaced++;
    w->ents[old].in_table = 0;
    uncharge(w, w->ents[old].pi);
    gy->e[gy->n++] = old;
  } else {
    w->items++;
  }
  w->tab[key] = ei;
  m_enforce(w, ei, gy);
  return ei;
}

/* ---- what the driver holds ---- */

void m_release_handle_at(m_world *w, int i) {
  m_held_handle hh = w->handles[i];
  w->handles[i] = w->handles[--w->nhandles];
  void *native = ccache_program_native(hh.h);
  if (native != w->progs[hh.pi].native) mfail(w, "handle's native changed");
  if (native && t_id(native) != w->progs[hh.pi].nid) mfail(w, "handle's native was freed");
  m_trace(w, "program_release PK%llu", (unsigned long long)w->progs[hh.pi].pk);
  w->r->calls++;
  ccache_program_release(w->c, hh.h);
  m_prog_unref(w, hh.pi);
}

void m_add_handle(m_world *w, ccache_program *h, int pi) {
  if (pi < 0) return;
  if (!w->progs[pi].h) w->progs[pi].h = h;
  if (h != w->progs[pi].h) mfail(w, "program handle identity differs from the model's");
  if (ccache_program_native(h) != w->progs[pi].native) mfail(w, "program native differs");
  w->handles[w->nhandles].h = h;
  w->handles[w->nhandles].pi = pi;
  w->nhandles++;
  if (w->nhandles == MAXHANDLE) m_release_handle_at(w, (int)pick(w, MAXHANDLE));
}

void m_release_lease_at(m_world *w, int i) {
  m_held_lease hl = w->leases[i];
  w->leases[i] = w->leases[--w->nleases];
  m_ent *e = &w->ents[hl.ei];
  /* The lease pins both objects: they must still be the live ones. */
  if (hl.l.closure != e->closure || (e->cid && t_id(hl.l.closure) != e->cid))
    mfail(w, "leased closure changed or freed");
  m_prog *p = &w->progs[e->pi];
  if (hl.l.native != p->native || (p->nid && t_id(hl.l.native) != p->nid))
    mfail(w, "leased program changed or freed");
  m_trace(w, "lease_release K%llu", (unsigned long long)e->key);
  w->r->calls++;
  ccache_lease_release(w->c, &hl.l);
  if (hl.l.closure || hl.l.internal_[0]) mfail(w, "lease not zeroed by release");
  w->exp.leases_out--;
  e->leases--;
  m_ent_maybe_die(w, hl.ei);
}

/* The model's side of a lease taken on entry ei. */
void m_pin_lease(m_world *w, int ei) {
  w->ents[ei].leases++;
  w->exp.leases_out++;
}

/* Keep the lease returned in *l (already pinned); may release another. */
void m_hold_lease(m_world *w, ccache_lease *l, int ei) {
  m_ent *e = &w->ents[ei];
  if (l->closure != e->closure)
    mfail(w, "lease closure is not the model's (K%llu)", (unsigned long long)e->key);
  if (l->native != w->progs[e->pi].native) mfail(w, "lease program is not the model's");
  w->leases[w->nleases].l = *l;
  w->leases[w->nleases].ei = ei;
  w->nleases++;
  if (w->nleases == MAXLEASE) m_release_lease_at(w, (int)pick(w, MAXLEASE));
}

/* A lease on entry ei was just returned in *l. */
void m_add_lease(m_world *w, ccache_lease *l, int ei) {
  m_pin_lease(w, ei);
  m_hold_lease(w, l, ei);
}

void m_expect_rc(m_world *w, const char *what, long long got, long long want) {
  if (got != want) mfail(w, "%s returned %lld, model says %lld", what, got, want);
}

int m_flight_active(const m_flight *f, int n, uint64_t key) {
  for (int i = 0; i < n; i++)
    if (f[i].key == key) return 1;
  return 0;
}
