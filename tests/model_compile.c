/*
 * model_compile.c - the get-or-compile calls, program and closure level,
 * and their compile callbacks: a callback draws more choices and makes
 * nested calls (clock steps, puts of the key being compiled, get-or-compile
 * of the same or another key, program compiles, interns of the program key
 * being compiled), each applied to the model at the point where it runs.
 */
#include <string.h>

#include "model_world.h"

/* ------------------------------------------------------ get-or-compile */

static int pcompile_cb(void *ud, ccache *c, ccache_key pkey, void **native_out, uint64_t *cost_out);

void m_do_pgoc(m_world *w, uint64_t pk) {
  m_trace(w, "program_get_or_compile PK%llu", (unsigned long long)pk);
  int pi = w->ptab[pk];
  int mode; /* 0 hit, 1 deadlock, 2 compile */
  if (pi >= 0) {
    mode = 0;
    w->exp.program_hits++;
    w->progs[pi].refs++;
  } else if (m_flight_active(w->pflights, w->npflights, pk)) {
    mode = 1;
    w->exp.program_misses++;
  } else {
    mode = 2;
    w->exp.program_misses++;
    w->exp.program_compiles++;
    if (w->npflights == MAXDEPTH) {
      mfail(w, "model: program flights too deep");
      return;
    }
    memset(&w->pflights[w->npflights], 0, sizeof w->pflights[0]);
    w->pflights[w->npflights++].key = pk;
  }
  ccache_program *h = (ccache_program *)&h;
  w->r->calls++;
  int rc = ccache_program_get_or_compile(w->c, PK(pk), pcompile_cb, w, &h);
  if (mode == 0) {
    m_expect_rc(w, "program_get_or_compile (hit)", rc, CCACHE_OK);
    if (rc == CCACHE_OK) m_add_handle(w, h, pi);
    return;
  }
  if (mode == 1) {
    m_expect_rc(w, "program_get_or_compile (own key)", rc, CCACHE_EDEADLK);
    if (h) mfail(w, "program_get_or_compile error left a handle");
    return;
  }
  m_flight f = w->pflights[--w->npflights];
  if (!f.ran) {
    mfail(w, "program compile callback did not run");
    return;
  }
  if (f.crc) {
    w->exp.program_compile_failures++;
    m_expect_rc(w, "program_get_or_compile (failing compile)", rc, CCACHE_ECOMPILE);
    if (h) mfail(w, "program_get_or_compile error left a handle");
    return;
  }
  pi = m_intern(w, pk, f.cid, f.obj, f.cost, 0);
  m_expect_rc(w, "program_get_or_compile (compile)", rc, CCACHE_OK);
  if (rc == CCACHE_OK) m_add_handle(w, h, pi);
}

static int pcompile_cb(void *ud, ccache *c, ccache_key pkey, void **native_out,
                       uint64_t *cost_out) {
  m_world *w = ud;
  if (c != w->c || !w->npflights) {
    mfail(w, "unexpected program compile callback");
    return 1;
  }
  m_flight *f = &w->pflights[w->npflights - 1];
  if (f->ran || pkey.lo != PK(f->key).lo || pkey.hi != PK(f->key).hi) {
    mfail(w, "program compile callback for the wrong key");
    return 1;
  }
  f->ran = 1;
  w->depth++;
  if (pick(w, 4) == 0) m_do_clock(w);
  if (pick(w, 10) == 0) m_do_pgoc(w, f->key);   /* its own key: EDEADLK */
  if (pick(w, 10) == 0) m_do_intern(w, f->key); /* interned meanwhile */
  int rc = 0;
  if (pick(w, 8) == 0) {
    rc = 1 + (int)pick(w, 3);
  } else {
    t_obj *o = pick(w, 16) ? m_new_native(w) : NULL;
    f->obj = o;
    f->cid = o ? o->id : 0;
    f->cost = pick(w, 80);
    *native_out = o;
    *cost_out = f->cost;
  }
  f->crc = rc;
  w->depth--;
  m_trace(w, "  (program compile PK%llu: %s)", (unsigned long long)f->key, rc ? "fails" : "ok");
  return rc;
}

static int compile_cb(void *ud, ccache *c, ccache_key key, void **closure_out,
                      ccache_program **program_out);

void m_do_goc(m_world *w, uint64_t key) {
  m_trace(w, "get_or_compile K%llu", (unsigned long long)key);
  int ei = w->tab[key];
  int mode; /* 0 hit, 1 deadlock, 2 compile */
  /* Right after a fetch miss of the same key, the lookup is counted already. */
  int counted = w->fetch_missed == key + 1;
  w->fetch_missed = 0;
  if (ei >= 0 && !m_expired(w->ents[ei].ins, now_of(w), w->ttl)) {
    mode = 0;
    if (!counted) w->exp.hits++;
  } else {
    if (ei >= 0) { /* expired: removed before the compile runs */
      m_gy gy = {.n = 0};
      m_detach(w, ei, &w->exp.evicted_ttl, &gy);
      m_drain(w, &gy);
    }
    if (!counted) w->exp.misses++;
    if (m_flight_active(w->flights, w->nflights, key)) {
      mode = 1;
    } else {
      mode = 2;
      w->exp.compiles++;
      if (w->nflights == MAXDEPTH) {
        mfail(w, "model: flights too deep");
        return;
      }
      memset(&w->flights[w->nflights], 0, sizeof w->flights[0]);
      w->flights[w->nflights].key = key;
      w->flights[w->nflights].pi = -1;
      w->nflights++;
    }
  }
  ccache_lease l;
  memset(&l, 0x5A, sizeof l);
  w->r->calls++;
  int rc = ccache_get_or_compile(w->c, K(key), compile_cb, w, &l);
  int zeroed = !l.closure && !l.native && !l.internal_[0];
  if (mode == 0) {
    m_expect_rc(w, "get_or_compile (hit)", rc, CCACHE_OK);
    if (rc == CCACHE_OK) m_add_lease(w, &l, ei);
    return;
  }
  if (mode == 1) {
    w->r->deadlocks++;
    m_expect_rc(w, "get_or_compile (own key)", rc, CCACHE_EDEADLK);
    if (!zeroed) mfail(w, "get_or_compile error left a lease");
    return;
  }
  m_flight f = w->flights[--w->nflights];
  if (!f.ran) {
    mfail(w, "compile callback did not run");
    return;
  }
  if (f.crc) {
    w->exp.compile_failures++;
    m_expect_rc(w, "get_or_compile (failing compile)", rc, CCACHE_ECOMPILE);
    if (!zeroed) mfail(w, "get_or_compile error left a lease");
    return;
  }
  if (f.pi < 0) { /* no program: EINVAL, the closure is destroyed */
    w->exp.closures_destroyed++;
    m_expect_ev(w, 'c', f.cid);
    m_expect_rc(w, "get_or_compile (no program)", rc, CCACHE_EINVAL);
    if (!zeroed) mfail(w, "get_or_compile error left a lease");
    return;
  }
  m_gy gy = {.n = 0};
  int ne = m_insert(w, key, f.cid, f.obj, f.pi, &gy);
  if (ne < 0) return;
  m_expect_rc(w, "get_or_compile (compile)", rc, CCACHE_OK);
  /* The cache leases the entry, drains what the insert pushed out, then
   * drops the compile's handle; only then may the driver release others. */
  m_pin_lease(w, ne);
  m_drain(w, &gy);
  m_prog_unref(w, f.pi);
  if (rc == CCACHE_OK) m_hold_lease(w, &l, ne);
}

/* Obtain a program handle inside a compile: returns the slot, or -1. */
static int compile_program(m_world *w, ccache_program **h) {
  uint64_t pk = pick(w, w->npkeys);
  uint32_t k = pick(w, 16);
  int rc, pi;
  *h = NULL;
  if (k < 5) {
    m_trace(w, "program_get_or_compile PK%llu (for the compile)", (unsigned long long)pk);
    pi = w->ptab[pk];
    /* As m_do_pgoc, but the handle goes to the compile's result. */
    int mode = pi >= 0 ? 0 : m_flight_active(w->pflights, w->npflights, pk) ? 1 : 2;
    if (mode == 0) {
      w->exp.program_hits++;
      w->progs[pi].refs++;
    } else {
      w->exp.program_misses++;
      if (mode == 2) {
        w->exp.program_compiles++;
        memset(&w->pflights[w->npflights], 0, sizeof w->pflights[0]);
        w->pflights[w->npflights++].key = pk;
      }
    }
    w->r->calls++;
    rc = ccache_program_get_or_compile(w->c, PK(pk), pcompile_cb, w, h);
    if (mode == 1) {
      m_expect_rc(w, "program_get_or_compile (own key)", rc, CCACHE_EDEADLK);
      return -1;
    }
    if (mode == 2) {
      m_flight f = w->pflights[--w->npflights];
      if (f.crc) {
        w->exp.program_compile_failures++;
        m_expect_rc(w, "program_get_or_compile (failing compile)", rc, CCACHE_ECOMPILE);
        return -1;
      }
      pi = m_intern(w, pk, f.cid, f.obj, f.cost, 0);
    }
    m_expect_rc(w, "program_get_or_compile", rc, CCACHE_OK);
  } else if (k < 8 && w->ptab[pk] >= 0) {
    m_trace(w, "program_fetch PK%llu (for the compile)", (unsigned long long)pk);
    pi = w->ptab[pk];
    w->exp.program_hits++;
    w->progs[pi].refs++;
    w->r->calls++;
    rc = ccache_program_fetch(w->c, PK(pk), h);
    m_expect_rc(w, "program_fetch", rc, CCACHE_OK);
  } else if (k == 8) {
    return -1; /* no program at all */
  } else {
    t_obj *o = pick(w, 16) ? m_new_native(w) : NULL;
    int nid = o ? o->id : 0; /* o may be destroyed by the call */
    uint64_t cost = pick(w, 80);
    m_trace(w, "program_intern PK%llu n%d cost %llu (for the compile)", (unsigned long long)pk, nid,
            (unsigned long long)cost);
    w->r->calls++;
    rc = ccache_program_intern(w->c, PK(pk), o, cost, h);
    m_expect_rc(w, "program_intern", rc, CCACHE_OK);
    pi = m_intern(w, pk, nid, o, cost, 1);
  }
  if (rc != CCACHE_OK || pi < 0) return -1;
  if (!w->progs[pi].h) w->progs[pi].h = *h;
  if (*h != w->progs[pi].h) mfail(w, "program handle identity differs from the model's");
  return pi;
}

static int compile_cb(void *ud, ccache *c, ccache_key key, void **closure_out,
                      ccache_program **program_out) {
  m_world *w = ud;
  if (c != w->c || !w->nflights) {
    mfail(w, "unexpected compile callback");
    return 1;
  }
  m_flight *f = &w->flights[w->nflights - 1];
  if (f->ran || key.lo != K(f->key).lo || key.hi != K(f->key).hi) {
    mfail(w, "compile callback for the wrong key");
    return 1;
  }
  f->ran = 1;
  w->depth++;
  if (pick(w, 4) == 0) m_do_clock(w);           /* a slow compile */
  if (pick(w, 10) == 0) m_do_put(w, f->key, 1); /* a put meanwhile: the compile still wins */
  if (pick(w, 10) == 0) m_do_goc(w, f->key);    /* its own key: EDEADLK (or a hit after the put) */
  if (pick(w, 8) == 0) {
    uint64_t k2 = pick(w, w->nkeys);
    int e2 = w->tab[k2];
    int no_compile = (e2 >= 0 && !m_expired(w->ents[e2].ins, now_of(w), w->ttl)) ||
                     m_flight_active(w->flights, w->nflights, k2);
    if (w->depth < 2 || no_compile) m_do_goc(w, k2); /* another key */
  }
  ccache_program *h = NULL;
  int pi = compile_program(w, &h);
  int rc = 0;
  if (pi >= 0 && pick(w, 10) == 0) rc = 1;       /* fails after making a handle */
  if (pi < 0 && h == NULL && pick(w, 2)) rc = 2; /* could not get a program */
  if (rc) {
    /* Clean up what it made, and leave garbage in the out-pointers: the
     * cache must take nothing from them. */
    t_obj *o = m_new_closure(w);
    *closure_out = o;
    m_self_destroy(w, o);
    if (pi >= 0) {
      m_trace(w, "program_release (the failing compile's handle)");
      w->r->calls++;
      ccache_program_release(c, h);
      m_prog_unref(w, pi);
    }
    *program_out = h;
    f->crc = rc;
    w->depth--;
    m_trace(w, "  (compile K%llu fails)", (unsigned long long)f->key);
    return rc;
  }
  int cur = w->tab[f->key];
  if (pi >= 0 && cur >= 0 && pick(w, 6) == 0) {
    /* The very closure the entry put meanwhile holds: borrowed, not destroyed. */
    f->obj = w->ents[cur].closure;
    f->cid = w->ents[cur].cid;
  } else {
    t_obj *o = pick(w, 16) ? m_new_closure(w) : NULL;
    f->obj = o;
    f->cid = o ? o->id : 0;
  }
  f->pi = pi;
  *closure_out = f->obj;
  *program_out = h;
  w->depth--;
  m_trace(w, "  (compile K%llu -> c%d%s)", (unsigned long long)f->key, f->cid,
          pi < 0 ? " with no program" : "");
  return 0;
}
