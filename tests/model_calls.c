/*
 * model_calls.c - the calls that compile nothing, each made on the real
 * cache and applied to the model: clock steps, program intern and fetch,
 * put, fetch, remove, clear, set_limits (with get_limits) and sweep.
 */
#include <string.h>

#include "model_world.h"

/* ------------------------------------------------------------- the calls */

void m_do_clock(m_world *w) {
  uint64_t now = now_of(w);
  uint32_t k = pick(w, 100);
  uint64_t span = w->ttl != U && w->ttl < 64 ? w->ttl : 64;
  if (k < 80)
    now += pick(w, (uint32_t)span + 1);
  else if (k < 97)
    now = now > 20 ? now - pick(w, 21) : 0; /* the clock may step back */
  else if (k < 99)
    now += span * 4;
  else
    now = UINT64_MAX - pick(w, 1000); /* the end of time */
  atomic_store(&w->t.now_ms, now);
  m_trace(w, "clock = %llu", (unsigned long long)now);
}

void m_do_intern(m_world *w, uint64_t pk) {
  int cur = w->ptab[pk];
  uint32_t k = pick(w, 20);
  t_obj *o = NULL;
  void *native;
  int nid = 0;
  if (k == 0 && cur >= 0) {
    native = w->progs[cur].native; /* the very pointer already interned */
    nid = w->progs[cur].nid;
  } else if (k == 1) {
    native = NULL;
  } else {
    o = m_new_native(w);
    native = o;
    nid = o->id;
  }
  uint64_t cost = pick(w, 4) == 0 ? 0 : pick(w, 80);
  m_trace(w, "program_intern PK%llu native n%d cost %llu", (unsigned long long)pk, nid,
          (unsigned long long)cost);
  ccache_program *h = NULL;
  w->r->calls++;
  int rc = ccache_program_intern(w->c, PK(pk), native, cost, &h);
  m_expect_rc(w, "program_intern", rc, CCACHE_OK);
  int pi = m_intern(w, pk, nid, native, cost, 1);
  if (rc == CCACHE_OK) m_add_handle(w, h, pi);
}

void m_do_pfetch(m_world *w, uint64_t pk) {
  m_trace(w, "program_fetch PK%llu", (unsigned long long)pk);
  ccache_program *h = (ccache_program *)&h; /* must be overwritten */
  w->r->calls++;
  int rc = ccache_program_fetch(w->c, PK(pk), &h);
  int pi = w->ptab[pk];
  if (pi >= 0) {
    w->exp.program_hits++;
    w->progs[pi].refs++;
    m_expect_rc(w, "program_fetch", rc, CCACHE_OK);
    if (rc == CCACHE_OK) m_add_handle(w, h, pi);
  } else {
    w->exp.program_misses++;
    m_expect_rc(w, "program_fetch", rc, CCACHE_MISS);
    if (h) mfail(w, "program_fetch miss left a handle");
  }
}

void m_do_put(m_world *w, uint64_t key, int nested) {
  int cur = w->tab[key];
  uint32_t k = pick(w, 20);
  void *closure;
  t_obj *o = NULL;
  int cid = 0;
  if (k < 3 && cur >= 0) {
    closure = w->ents[cur].closure; /* the very pointer the entry holds */
    cid = w->ents[cur].cid;
  } else if (k == 3) {
    closure = NULL;
  } else {
    o = m_new_closure(w);
    closure = o;
    cid = o->id;
  }
  if (!w->nhandles) {
    if (cid && closure == o) { /* no handle: the EINVAL path (closure destroyed) */
      m_trace(w, "put K%llu c%d NULL program", (unsigned long long)key, cid);
      w->r->calls++;
      m_expect_rc(w, "put (NULL program)", ccache_put(w->c, K(key), closure, NULL), CCACHE_EINVAL);
      w->exp.closures_destroyed++;
      m_expect_ev(w, 'c', cid);
      return;
    }
    if (o) m_self_destroy(w, o);
    return;
  }
  m_held_handle *hh = &w->handles[pick(w, (uint32_t)w->nhandles)];
  m_trace(w, "put%s K%llu c%d PK%llu", nested ? " (nested)" : "", (unsigned long long)key, cid,
          (unsigned long long)w->progs[hh->pi].pk);
  w->r->calls++;
  int rc = ccache_put(w->c, K(key), closure, hh->h);
  m_expect_rc(w, "put", rc, CCACHE_OK);
  m_gy gy = {.n = 0};
  m_insert(w, key, cid, closure, hh->pi, &gy);
  m_drain(w, &gy);
}

void m_do_fetch(m_world *w, uint64_t key) {
  m_trace(w, "fetch K%llu", (unsigned long long)key);
  ccache_lease l;
  memset(&l, 0x5A, sizeof l);
  w->r->calls++;
  int rc = ccache_fetch(w->c, K(key), &l);
  int ei = w->tab[key];
  if (ei >= 0 && !m_expired(w->ents[ei].ins, now_of(w), w->ttl)) {
    w->exp.hits++;
    m_expect_rc(w, "fetch (hit)", rc, CCACHE_OK);
    if (rc == CCACHE_OK) {
      m_add_lease(w, &l, ei);
    } else {
      w->ents[ei].leases++; /* keep the model whole until the run stops */
    }
    return;
  }
  w->exp.misses++;
  w->fetch_missed = key + 1;
  m_expect_rc(w, "fetch (miss)", rc, CCACHE_MISS);
  if (l.closure || l.native || l.internal_[0]) mfail(w, "fetch miss left a lease");
  if (rc == CCACHE_OK) ccache_lease_release(w->c, &l);
  if (ei >= 0) { /* expired: removed by this fetch */
    m_gy gy = {.n = 0};
    m_detach(w, ei, &w->exp.evicted_ttl, &gy);
    m_drain(w, &gy);
  }
}

void m_do_remove(m_world *w, uint64_t key) {
  m_trace(w, "remove K%llu", (unsigned long long)key);
  w->r->calls++;
  int rc = ccache_remove(w->c, K(key));
  int ei = w->tab[key];
  m_expect_rc(w, "remove", rc, ei >= 0 ? CCACHE_OK : CCACHE_MISS);
  if (ei >= 0) {
    m_gy gy = {.n = 0};
    m_detach(w, ei, &w->exp.removed, &gy);
    m_drain(w, &gy);
  }
}

void m_clear(m_world *w, uint64_t *counter) {
  m_gy gy = {.n = 0};
  for (uint32_t k = 0; k < w->nkeys; k++)
    if (w->tab[k] >= 0) m_detach(w, w->tab[k], counter, &gy);
  m_drain(w, &gy);
  w->unordered = 1;
}

void m_do_clear(m_world *w) {
  m_trace(w, "clear");
  w->r->calls++;
  ccache_clear(w->c);
  m_clear(w, &w->exp.cleared);
}

uint64_t m_draw_bound(m_world *w, uint32_t unbounded_in, uint32_t max) {
  if (pick(w, unbounded_in) == 0) return U;
  return 1 + pick(w, max);
}

void m_do_limits(m_world *w) {
  uint64_t mi = m_draw_bound(w, 3, 12), ttl = m_draw_bound(w, 3, 60), mc = m_draw_bound(w, 3, 300);
  if (pick(w, 16) == 0) { /* a zero bound: EINVAL, nothing changes */
    switch (pick(w, 3)) {
      case 0:
        mi = 0;
        break;
      case 1:
        ttl = 0;
        break;
      default:
        mc = 0;
        break;
    }
  }
  m_trace(w, "set_limits items %lld ttl %lld cost %lld", (long long)mi, (long long)ttl,
          (long long)mc);
  w->r->calls++;
  int rc = ccache_set_limits(w->c, mi, ttl, mc);
  if (!mi || !ttl || !mc) {
    m_expect_rc(w, "set_limits (zero bound)", rc, CCACHE_EINVAL);
  } else {
    m_expect_rc(w, "set_limits", rc, CCACHE_OK);
    w->max_items = mi;
    w->ttl = ttl;
    w->max_cost = mc;
    m_gy gy = {.n = 0};
    m_enforce(w, -1, &gy);
    m_drain(w, &gy);
  }
  uint64_t a = 0, b = 0, d = 0;
  w->r->calls++;
  m_expect_rc(w, "get_limits", ccache_get_limits(w->c, &a, &b, &d), CCACHE_OK);
  if (a != w->max_items || b != w->ttl || d != w->max_cost) mfail(w, "get_limits differ");
}

void m_do_sweep(m_world *w) {
  m_trace(w, "sweep");
  w->r->calls++;
  int64_t n = ccache_sweep(w->c);
  int64_t want = 0;
  if (w->ttl != U) {
    /* Every expired entry, oldest first (not assuming they form a prefix). */
    m_gy gy = {.n = 0};
    for (;;) {
      int best = -1;
      for (uint32_t k = 0; k < w->nkeys; k++) {
        int ei = w->tab[k];
        if (ei >= 0 && m_expired(w->ents[ei].ins, now_of(w), w->ttl) &&
            (best < 0 || w->ents[ei].idx < w->ents[best].idx))
          best = ei;
      }
      if (best < 0) break;
      m_detach(w, best, &w->exp.evicted_ttl, &gy);
      want++;
    }
    m_drain(w, &gy);
  }
  m_expect_rc(w, "sweep", n, want);
}
