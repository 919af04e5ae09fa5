/*
 * model.c - reference model + driver, see model.h.
 *
 * The model is plain arrays indexed by small integers: a key table
 * (tab[key] = entry slot or -1), a program table (ptab[pkey] = program slot
 * or -1), entry and program pools, and the expected statistics.  It knows
 * nothing of stripes, hashes or locks.  Its rules are the documented ones:
 *
 *  - an insert (put or compile) takes the next insert index and the time
 *    max(now, previous insert time); a key already present is replaced
 *    (counted in replaced, no capacity eviction); then, never touching the
 *    entry just inserted, the oldest entries (lowest index) leave while
 *    items > max_items (capacity), then while cost > max_cost (cost);
 *  - expired means ttl finite and now >= t && now - t >= ttl;
 *  - cost is the sum over programs referenced by at least one entry in the
 *    table;
 *  - an entry lives while it is in the table, leased, or lent its closure to
 *    a later entry of the same key that was put with the very same pointer;
 *    when it dies: its closure (or its lender's reference), then its program
 *    reference; a program dies with its last reference (handles + entries);
 *  - destroys happen in the order entries leave the table (replaced first,
 *    then evicted oldest first); for clear and close the order is not
 *    specified, so those steps compare the destroys as a multiset.
 *
 * The driver makes every real call, applies the same call to the model, and
 * compares at the end of every top-level step.  Compile callbacks draw more
 * choices and make nested calls (clock steps, puts of the key being
 * compiled, get-or-compile of the same or another key, program compiles,
 * interns of the program key being compiled), each applied to the model at
 * the point where it runs.
 */
#include "model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h" /* ccache__check */
#include "support.h"

#define U CCACHE_UNBOUNDED

#define MAXKEYS   48
#define MAXPKEYS  16
#define MAXENT    512
#define MAXPROG   64
#define MAXLEASE  12
#define MAXHANDLE 12
#define MAXDEPTH  4
#define MAXEV     T_LOG_MAX

/* ------------------------------------------------------------- sources */

void m_src_seed(m_src *s, uint64_t seed) {
  memset(s, 0, sizeof *s);
  s->rng = seed;
}

void m_src_bytes(m_src *s, const uint8_t *bytes, size_t len) {
  memset(s, 0, sizeof *s);
  s->bytes = bytes;
  s->len = len;
}

int m_src_done(const m_src *s) { return s->bytes && s->pos >= s->len; }

uint32_t m_pick(m_src *s, uint32_t bound) {
  if (bound <= 1) return 0;
  if (s->bytes) {
    uint32_t v = 0;
    if (s->pos < s->len) v = s->bytes[s->pos++];
    if (bound > 256 && s->pos < s->len) v = v << 8 | s->bytes[s->pos++];
    return v % bound;
  }
  /* splitmix64 */
  uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (uint32_t)((z >> 32) % bound);
}

/* ------------------------------------------------------------- the model */

typedef struct m_prog {
  int alive;
  uint64_t pk;
  int nid; /* native object id, 0 for NULL */
  void *native;
  ccache_program *h; /* the real handle pointer (identity) */
  uint64_t cost, refs, table_refs;
} m_prog;

typedef struct m_ent {
  int alive;
  uint64_t key;
  int cid; /* closure id, 0 for NULL (a borrower: the lender's) */
  void *closure;
  int lender;         /* entry it borrows its closure from, or -1 */
  uint32_t borrowers; /* entries borrowing this one's closure */
  int pi;             /* program slot */
  uint64_t idx, ins;
  int in_table;
  uint32_t leases;
} m_ent;

typedef struct m_held_lease {
  ccache_lease l;
  int ei;
} m_held_lease;

typedef struct m_held_handle {
  ccache_program *h;
  int pi;
} m_held_handle;

/* One compile in progress (the callback fills in its result). */
typedef struct m_flight {
  uint64_t key;
  int ran, crc;
  int cid;
  void *obj;     /* closure or native */
  int pi;        /* closure level: program slot handed over, or -1 */
  uint64_t cost; /* program level */
} m_flight;

typedef struct m_world {
  m_src *src;
  const m_opts *o;
  m_result *r;
  ccache *c;
  t_ctx t;
  int failed;
  int depth;
  size_t step;

  /* configuration drawn at open */
  uint32_t nkeys, npkeys;

  /* the model */
  uint64_t max_items, ttl, max_cost;
  uint64_t next_idx, last_ins, items, cost;
  int tab[MAXKEYS];
  int ptab[MAXPKEYS];
  m_ent ents[MAXENT];
  m_prog progs[MAXPROG];
  ccache_stats exp;
  uint64_t last_compile_ns;
  /* The key of the driver's last fetch miss since its last get-or-compile,
   * +1 (0: none): a get-or-compile of it counts no lookup of its own. */
  uint64_t fetch_missed;

  /* what the driver holds */
  m_held_lease leases[MAXLEASE];
  int nleases;
  m_held_handle handles[MAXHANDLE];
  int nhandles;

  m_flight flights[MAXDEPTH], pflights[MAXDEPTH];
  int nflights, npflights;

  /* expected destroy events of the current step */
  t_event ev[MAXEV];
  int nev;
  int unordered;

  /* every object made: destroyed exactly once */
  int next_cid, next_nid;
  unsigned char *cdead, *ndead;
  size_t dead_cap;
} m_world;

static void mfail(m_world *w, const char *fmt, ...) {
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

static void trace(m_world *w, const char *fmt, ...) {
  if (!w->o->trace) return;
  fprintf(stderr, "%*s", 2 + 4 * w->depth, "");
  if (w->depth == 0) fprintf(stderr, "#%zu ", w->step);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static uint32_t pick(m_world *w, uint32_t bound) { return m_pick(w->src, bound); }

static void expect_ev(m_world *w, char kind, int id) {
  if (!id) return; /* NULL objects reach no callback */
  if (w->nev >= MAXEV) {
    mfail(w, "model event log overflow");
    return;
  }
  w->ev[w->nev].kind = kind;
  w->ev[w->nev].id = id;
  w->nev++;
}

static void grow_dead(m_world *w, size_t id) {
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

static t_obj *new_closure(m_world *w) {
  int id = ++w->next_cid;
  grow_dead(w, (size_t)id);
  return t_closure(id);
}

static t_obj *new_native(m_world *w) {
  int id = ++w->next_nid;
  grow_dead(w, (size_t)id);
  return t_native(id);
}

/* We destroy an object ourselves (a failing compile cleaning up). */
static void self_destroy(m_world *w, t_obj *o) {
  unsigned char *dead = o->kind == 'c' ? w->cdead : w->ndead;
  dead[o->id] = 1;
  free(o);
}

static int m_expired(uint64_t ins, uint64_t now, uint64_t ttl) {
  return ttl != U && now >= ins && now - ins >= ttl;
}

static uint64_t now_of(m_world *w) { return atomic_load(&w->t.now_ms); }

/* ---- programs ---- */

static void m_prog_unref(m_world *w, int pi) {
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
  expect_ev(w, 'p', p->nid);
}

/* Interning (the public call with count = 1, a program compile's result
 * with count = 0).  Returns the program slot, which holds one more ref. */
static int m_intern(m_world *w, uint64_t pk, int nid, void *native, uint64_t cost, int count) {
  int pi = w->ptab[pk];
  if (pi >= 0) {
    m_prog *p = &w->progs[pi];
    if (count) w->exp.program_hits++;
    p->refs++;
    if (native != p->native) {
      w->exp.programs_destroyed++;
      expect_ev(w, 'p', nid);
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
    expect_ev(w, 'c', e->cid);
  }
  m_prog_unref(w, e->pi);
}

typedef struct m_gy {
  int e[MAXENT];
  int n;
} m_gy;

static void m_detach(m_world *w, int ei, uint64_t *counter, m_gy *gy) {
  m_ent *e = &w->ents[ei];
  e->in_table = 0;
  w->tab[e->key] = -1;
  w->items--;
  uncharge(w, e->pi);
  if (counter) (*counter)++;
  gy->e[gy->n++] = ei;
}

static void m_drain(m_world *w, m_gy *gy) {
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

static void m_enforce(m_world *w, int keep, m_gy *gy) {
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
static int m_insert(m_world *w, uint64_t key, int cid, void *closure, int pi, m_gy *gy) {
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

static void add_handle(m_world *w, ccache_program *h, int pi);
static void hold_lease(m_world *w, ccache_lease *l, int ei);

static void release_handle_at(m_world *w, int i) {
  m_held_handle hh = w->handles[i];
  w->handles[i] = w->handles[--w->nhandles];
  void *native = ccache_program_native(hh.h);
  if (native != w->progs[hh.pi].native) mfail(w, "handle's native changed");
  if (native && t_id(native) != w->progs[hh.pi].nid) mfail(w, "handle's native was freed");
  trace(w, "program_release PK%llu", (unsigned long long)w->progs[hh.pi].pk);
  w->r->calls++;
  ccache_program_release(w->c, hh.h);
  m_prog_unref(w, hh.pi);
}

static void add_handle(m_world *w, ccache_program *h, int pi) {
  if (pi < 0) return;
  if (!w->progs[pi].h) w->progs[pi].h = h;
  if (h != w->progs[pi].h) mfail(w, "program handle identity differs from the model's");
  if (ccache_program_native(h) != w->progs[pi].native) mfail(w, "program native differs");
  w->handles[w->nhandles].h = h;
  w->handles[w->nhandles].pi = pi;
  w->nhandles++;
  if (w->nhandles == MAXHANDLE) release_handle_at(w, (int)pick(w, MAXHANDLE));
}

static void release_lease_at(m_world *w, int i) {
  m_held_lease hl = w->leases[i];
  w->leases[i] = w->leases[--w->nleases];
  m_ent *e = &w->ents[hl.ei];
  /* The lease pins both objects: they must still be the live ones. */
  if (hl.l.closure != e->closure || (e->cid && t_id(hl.l.closure) != e->cid))
    mfail(w, "leased closure changed or freed");
  m_prog *p = &w->progs[e->pi];
  if (hl.l.native != p->native || (p->nid && t_id(hl.l.native) != p->nid))
    mfail(w, "leased program changed or freed");
  trace(w, "lease_release K%llu", (unsigned long long)e->key);
  w->r->calls++;
  ccache_lease_release(w->c, &hl.l);
  if (hl.l.closure || hl.l.internal_[0]) mfail(w, "lease not zeroed by release");
  w->exp.leases_out--;
  e->leases--;
  m_ent_maybe_die(w, hl.ei);
}

/* The model's side of a lease taken on entry ei. */
static void pin_lease(m_world *w, int ei) {
  w->ents[ei].leases++;
  w->exp.leases_out++;
}

/* Keep the lease returned in *l (already pinned); may release another. */
static void hold_lease(m_world *w, ccache_lease *l, int ei) {
  m_ent *e = &w->ents[ei];
  if (l->closure != e->closure)
    mfail(w, "lease closure is not the model's (K%llu)", (unsigned long long)e->key);
  if (l->native != w->progs[e->pi].native) mfail(w, "lease program is not the model's");
  w->leases[w->nleases].l = *l;
  w->leases[w->nleases].ei = ei;
  w->nleases++;
  if (w->nleases == MAXLEASE) release_lease_at(w, (int)pick(w, MAXLEASE));
}

/* A lease on entry ei was just returned in *l. */
static void add_lease(m_world *w, ccache_lease *l, int ei) {
  pin_lease(w, ei);
  hold_lease(w, l, ei);
}

static void expect_rc(m_world *w, const char *what, long long got, long long want) {
  if (got != want) mfail(w, "%s returned %lld, model says %lld", what, got, want);
}

static int flight_active(const m_flight *f, int n, uint64_t key) {
  for (int i = 0; i < n; i++)
    if (f[i].key == key) return 1;
  return 0;
}

/* ------------------------------------------------------------- the calls */

static void do_clock(m_world *w) {
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
  trace(w, "clock = %llu", (unsigned long long)now);
}

static void do_intern(m_world *w, uint64_t pk) {
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
    o = new_native(w);
    native = o;
    nid = o->id;
  }
  uint64_t cost = pick(w, 4) == 0 ? 0 : pick(w, 80);
  trace(w, "program_intern PK%llu native n%d cost %llu", (unsigned long long)pk, nid,
        (unsigned long long)cost);
  ccache_program *h = NULL;
  w->r->calls++;
  int rc = ccache_program_intern(w->c, PK(pk), native, cost, &h);
  expect_rc(w, "program_intern", rc, CCACHE_OK);
  int pi = m_intern(w, pk, nid, native, cost, 1);
  if (rc == CCACHE_OK) add_handle(w, h, pi);
}

static void do_pfetch(m_world *w, uint64_t pk) {
  trace(w, "program_fetch PK%llu", (unsigned long long)pk);
  ccache_program *h = (ccache_program *)&h; /* must be overwritten */
  w->r->calls++;
  int rc = ccache_program_fetch(w->c, PK(pk), &h);
  int pi = w->ptab[pk];
  if (pi >= 0) {
    w->exp.program_hits++;
    w->progs[pi].refs++;
    expect_rc(w, "program_fetch", rc, CCACHE_OK);
    if (rc == CCACHE_OK) add_handle(w, h, pi);
  } else {
    w->exp.program_misses++;
    expect_rc(w, "program_fetch", rc, CCACHE_MISS);
    if (h) mfail(w, "program_fetch miss left a handle");
  }
}

static int pcompile_cb(void *ud, ccache *c, ccache_key pkey, void **native_out, uint64_t *cost_out);

static void do_pgoc(m_world *w, uint64_t pk) {
  trace(w, "program_get_or_compile PK%llu", (unsigned long long)pk);
  int pi = w->ptab[pk];
  int mode; /* 0 hit, 1 deadlock, 2 compile */
  if (pi >= 0) {
    mode = 0;
    w->exp.program_hits++;
    w->progs[pi].refs++;
  } else if (flight_active(w->pflights, w->npflights, pk)) {
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
    expect_rc(w, "program_get_or_compile (hit)", rc, CCACHE_OK);
    if (rc == CCACHE_OK) add_handle(w, h, pi);
    return;
  }
  if (mode == 1) {
    expect_rc(w, "program_get_or_compile (own key)", rc, CCACHE_EDEADLK);
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
    expect_rc(w, "program_get_or_compile (failing compile)", rc, CCACHE_ECOMPILE);
    if (h) mfail(w, "program_get_or_compile error left a handle");
    return;
  }
  pi = m_intern(w, pk, f.cid, f.obj, f.cost, 0);
  expect_rc(w, "program_get_or_compile (compile)", rc, CCACHE_OK);
  if (rc == CCACHE_OK) add_handle(w, h, pi);
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
  if (pick(w, 4) == 0) do_clock(w);
  if (pick(w, 10) == 0) do_pgoc(w, f->key);   /* its own key: EDEADLK */
  if (pick(w, 10) == 0) do_intern(w, f->key); /* interned meanwhile */
  int rc = 0;
  if (pick(w, 8) == 0) {
    rc = 1 + (int)pick(w, 3);
  } else {
    t_obj *o = pick(w, 16) ? new_native(w) : NULL;
    f->obj = o;
    f->cid = o ? o->id : 0;
    f->cost = pick(w, 80);
    *native_out = o;
    *cost_out = f->cost;
  }
  f->crc = rc;
  w->depth--;
  trace(w, "  (program compile PK%llu: %s)", (unsigned long long)f->key, rc ? "fails" : "ok");
  return rc;
}

static void do_put(m_world *w, uint64_t key, int nested) {
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
    o = new_closure(w);
    closure = o;
    cid = o->id;
  }
  if (!w->nhandles) {
    if (cid && closure == o) { /* no handle: the EINVAL path (closure destroyed) */
      trace(w, "put K%llu c%d NULL program", (unsigned long long)key, cid);
      w->r->calls++;
      expect_rc(w, "put (NULL program)", ccache_put(w->c, K(key), closure, NULL), CCACHE_EINVAL);
      w->exp.closures_destroyed++;
      expect_ev(w, 'c', cid);
      return;
    }
    if (o) self_destroy(w, o);
    return;
  }
  m_held_handle *hh = &w->handles[pick(w, (uint32_t)w->nhandles)];
  trace(w, "put%s K%llu c%d PK%llu", nested ? " (nested)" : "", (unsigned long long)key, cid,
        (unsigned long long)w->progs[hh->pi].pk);
  w->r->calls++;
  int rc = ccache_put(w->c, K(key), closure, hh->h);
  expect_rc(w, "put", rc, CCACHE_OK);
  m_gy gy = {.n = 0};
  m_insert(w, key, cid, closure, hh->pi, &gy);
  m_drain(w, &gy);
}

static void do_fetch(m_world *w, uint64_t key) {
  trace(w, "fetch K%llu", (unsigned long long)key);
  ccache_lease l;
  memset(&l, 0x5A, sizeof l);
  w->r->calls++;
  int rc = ccache_fetch(w->c, K(key), &l);
  int ei = w->tab[key];
  if (ei >= 0 && !m_expired(w->ents[ei].ins, now_of(w), w->ttl)) {
    w->exp.hits++;
    expect_rc(w, "fetch (hit)", rc, CCACHE_OK);
    if (rc == CCACHE_OK) {
      add_lease(w, &l, ei);
    } else {
      w->ents[ei].leases++; /* keep the model whole until the run stops */
    }
    return;
  }
  w->exp.misses++;
  w->fetch_missed = key + 1;
  expect_rc(w, "fetch (miss)", rc, CCACHE_MISS);
  if (l.closure || l.native || l.internal_[0]) mfail(w, "fetch miss left a lease");
  if (rc == CCACHE_OK) ccache_lease_release(w->c, &l);
  if (ei >= 0) { /* expired: removed by this fetch */
    m_gy gy = {.n = 0};
    m_detach(w, ei, &w->exp.evicted_ttl, &gy);
    m_drain(w, &gy);
  }
}

static void do_remove(m_world *w, uint64_t key) {
  trace(w, "remove K%llu", (unsigned long long)key);
  w->r->calls++;
  int rc = ccache_remove(w->c, K(key));
  int ei = w->tab[key];
  expect_rc(w, "remove", rc, ei >= 0 ? CCACHE_OK : CCACHE_MISS);
  if (ei >= 0) {
    m_gy gy = {.n = 0};
    m_detach(w, ei, &w->exp.removed, &gy);
    m_drain(w, &gy);
  }
}

static void m_clear(m_world *w, uint64_t *counter) {
  m_gy gy = {.n = 0};
  for (uint32_t k = 0; k < w->nkeys; k++)
    if (w->tab[k] >= 0) m_detach(w, w->tab[k], counter, &gy);
  m_drain(w, &gy);
  w->unordered = 1;
}

static void do_clear(m_world *w) {
  trace(w, "clear");
  w->r->calls++;
  ccache_clear(w->c);
  m_clear(w, &w->exp.cleared);
}

static uint64_t draw_bound(m_world *w, uint32_t unbounded_in, uint32_t max) {
  if (pick(w, unbounded_in) == 0) return U;
  return 1 + pick(w, max);
}

static void do_limits(m_world *w) {
  uint64_t mi = draw_bound(w, 3, 12), ttl = draw_bound(w, 3, 60), mc = draw_bound(w, 3, 300);
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
  trace(w, "set_limits items %lld ttl %lld cost %lld", (long long)mi, (long long)ttl,
        (long long)mc);
  w->r->calls++;
  int rc = ccache_set_limits(w->c, mi, ttl, mc);
  if (!mi || !ttl || !mc) {
    expect_rc(w, "set_limits (zero bound)", rc, CCACHE_EINVAL);
  } else {
    expect_rc(w, "set_limits", rc, CCACHE_OK);
    w->max_items = mi;
    w->ttl = ttl;
    w->max_cost = mc;
    m_gy gy = {.n = 0};
    m_enforce(w, -1, &gy);
    m_drain(w, &gy);
  }
  uint64_t a = 0, b = 0, d = 0;
  w->r->calls++;
  expect_rc(w, "get_limits", ccache_get_limits(w->c, &a, &b, &d), CCACHE_OK);
  if (a != w->max_items || b != w->ttl || d != w->max_cost) mfail(w, "get_limits differ");
}

static void do_sweep(m_world *w) {
  trace(w, "sweep");
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
  expect_rc(w, "sweep", n, want);
}

static int compile_cb(void *ud, ccache *c, ccache_key key, void **closure_out,
                      ccache_program **program_out);

static void do_goc(m_world *w, uint64_t key) {
  trace(w, "get_or_compile K%llu", (unsigned long long)key);
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
    if (flight_active(w->flights, w->nflights, key)) {
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
    expect_rc(w, "get_or_compile (hit)", rc, CCACHE_OK);
    if (rc == CCACHE_OK) add_lease(w, &l, ei);
    return;
  }
  if (mode == 1) {
    w->r->deadlocks++;
    expect_rc(w, "get_or_compile (own key)", rc, CCACHE_EDEADLK);
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
    expect_rc(w, "get_or_compile (failing compile)", rc, CCACHE_ECOMPILE);
    if (!zeroed) mfail(w, "get_or_compile error left a lease");
    return;
  }
  if (f.pi < 0) { /* no program: EINVAL, the closure is destroyed */
    w->exp.closures_destroyed++;
    expect_ev(w, 'c', f.cid);
    expect_rc(w, "get_or_compile (no program)", rc, CCACHE_EINVAL);
    if (!zeroed) mfail(w, "get_or_compile error left a lease");
    return;
  }
  m_gy gy = {.n = 0};
  int ne = m_insert(w, key, f.cid, f.obj, f.pi, &gy);
  if (ne < 0) return;
  expect_rc(w, "get_or_compile (compile)", rc, CCACHE_OK);
  /* The cache leases the entry, drains what the insert pushed out, then
   * drops the compile's handle; only then may the driver release others. */
  pin_lease(w, ne);
  m_drain(w, &gy);
  m_prog_unref(w, f.pi);
  if (rc == CCACHE_OK) hold_lease(w, &l, ne);
}

/* Obtain a program handle inside a compile: returns the slot, or -1. */
static int compile_program(m_world *w, ccache_program **h) {
  uint64_t pk = pick(w, w->npkeys);
  uint32_t k = pick(w, 16);
  int rc, pi;
  *h = NULL;
  if (k < 5) {
    trace(w, "program_get_or_compile PK%llu (for the compile)", (unsigned long long)pk);
    pi = w->ptab[pk];
    /* As do_pgoc, but the handle goes to the compile's result. */
    int mode = pi >= 0 ? 0 : flight_active(w->pflights, w->npflights, pk) ? 1 : 2;
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
      expect_rc(w, "program_get_or_compile (own key)", rc, CCACHE_EDEADLK);
      return -1;
    }
    if (mode == 2) {
      m_flight f = w->pflights[--w->npflights];
      if (f.crc) {
        w->exp.program_compile_failures++;
        expect_rc(w, "program_get_or_compile (failing compile)", rc, CCACHE_ECOMPILE);
        return -1;
      }
      pi = m_intern(w, pk, f.cid, f.obj, f.cost, 0);
    }
    expect_rc(w, "program_get_or_compile", rc, CCACHE_OK);
  } else if (k < 8 && w->ptab[pk] >= 0) {
    trace(w, "program_fetch PK%llu (for the compile)", (unsigned long long)pk);
    pi = w->ptab[pk];
    w->exp.program_hits++;
    w->progs[pi].refs++;
    w->r->calls++;
    rc = ccache_program_fetch(w->c, PK(pk), h);
    expect_rc(w, "program_fetch", rc, CCACHE_OK);
  } else if (k == 8) {
    return -1; /* no program at all */
  } else {
    t_obj *o = pick(w, 16) ? new_native(w) : NULL;
    int nid = o ? o->id : 0; /* o may be destroyed by the call */
    uint64_t cost = pick(w, 80);
    trace(w, "program_intern PK%llu n%d cost %llu (for the compile)", (unsigned long long)pk, nid,
          (unsigned long long)cost);
    w->r->calls++;
    rc = ccache_program_intern(w->c, PK(pk), o, cost, h);
    expect_rc(w, "program_intern", rc, CCACHE_OK);
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
  if (pick(w, 4) == 0) do_clock(w);           /* a slow compile */
  if (pick(w, 10) == 0) do_put(w, f->key, 1); /* a put meanwhile: the compile still wins */
  if (pick(w, 10) == 0) do_goc(w, f->key);    /* its own key: EDEADLK (or a hit after the put) */
  if (pick(w, 8) == 0) {
    uint64_t k2 = pick(w, w->nkeys);
    int e2 = w->tab[k2];
    int no_compile = (e2 >= 0 && !m_expired(w->ents[e2].ins, now_of(w), w->ttl)) ||
                     flight_active(w->flights, w->nflights, k2);
    if (w->depth < 2 || no_compile) do_goc(w, k2); /* another key */
  }
  ccache_program *h = NULL;
  int pi = compile_program(w, &h);
  int rc = 0;
  if (pi >= 0 && pick(w, 10) == 0) rc = 1;       /* fails after making a handle */
  if (pi < 0 && h == NULL && pick(w, 2)) rc = 2; /* could not get a program */
  if (rc) {
    /* Clean up what it made, and leave garbage in the out-pointers: the
     * cache must take nothing from them. */
    t_obj *o = new_closure(w);
    *closure_out = o;
    self_destroy(w, o);
    if (pi >= 0) {
      trace(w, "program_release (the failing compile's handle)");
      w->r->calls++;
      ccache_program_release(c, h);
      m_prog_unref(w, pi);
    }
    *program_out = h;
    f->crc = rc;
    w->depth--;
    trace(w, "  (compile K%llu fails)", (unsigned long long)f->key);
    return rc;
  }
  int cur = w->tab[f->key];
  if (pi >= 0 && cur >= 0 && pick(w, 6) == 0) {
    /* The very closure the entry put meanwhile holds: borrowed, not destroyed. */
    f->obj = w->ents[cur].closure;
    f->cid = w->ents[cur].cid;
  } else {
    t_obj *o = pick(w, 16) ? new_closure(w) : NULL;
    f->obj = o;
    f->cid = o ? o->id : 0;
  }
  f->pi = pi;
  *closure_out = f->obj;
  *program_out = h;
  w->depth--;
  trace(w, "  (compile K%llu -> c%d%s)", (unsigned long long)f->key, f->cid,
        pi < 0 ? " with no program" : "");
  return 0;
}

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

static void compare_events(m_world *w) {
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

static void compare(m_world *w) {
  compare_events(w);
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

/* ------------------------------------------------------------- running */

static void step(m_world *w) {
  uint32_t op = pick(w, 100);
  /* Half the calls go to a few hot keys, so hits and replacements are common. */
  uint64_t key = pick(w, pick(w, 2) ? w->nkeys : (w->nkeys < 4 ? w->nkeys : 4));
  uint64_t pk = pick(w, w->npkeys);
  if (op < 12)
    do_fetch(w, key);
  else if (op < 24)
    do_put(w, key, 0);
  else if (op < 36)
    do_goc(w, key);
  else if (op < 44)
    do_intern(w, pk);
  else if (op < 48)
    do_pfetch(w, pk);
  else if (op < 54)
    do_pgoc(w, pk);
  else if (op < 62) {
    if (w->nleases) release_lease_at(w, (int)pick(w, (uint32_t)w->nleases));
  } else if (op < 70) {
    if (w->nhandles) release_handle_at(w, (int)pick(w, (uint32_t)w->nhandles));
  } else if (op < 75)
    do_remove(w, key);
  else if (op < 76)
    do_clear(w);
  else if (op < 79)
    do_limits(w);
  else if (op < 83)
    do_sweep(w);
  else
    do_clock(w);
}

static int open_cache(m_world *w) {
  w->nkeys = 2 + pick(w, MAXKEYS - 1);
  w->npkeys = 1 + pick(w, MAXPKEYS);
  w->max_items = draw_bound(w, 3, 12);
  w->ttl = draw_bound(w, 3, 60);
  w->max_cost = draw_bound(w, 2, 300);
  atomic_store(&w->t.now_ms, pick(w, 4) ? 0 : (uint64_t)pick(w, 1000));
  ccache_config cfg;
  t_config(&cfg, &w->t);
  cfg.max_items = w->max_items;
  cfg.ttl_ms = w->ttl;
  cfg.max_cost_bytes = w->max_cost;
  trace(w, "open: %u keys, %u program keys, items %lld ttl %lld cost %lld, clock %llu", w->nkeys,
        w->npkeys, (long long)w->max_items, (long long)w->ttl, (long long)w->max_cost,
        (unsigned long long)now_of(w));
  w->t.log_on = 1;
  int rc = ccache_open(&cfg, &w->c);
  if (rc != CCACHE_OK) {
    mfail(w, "ccache_open returned %d", rc);
    return -1;
  }
  return 0;
}

static void teardown(m_world *w) {
  while (!w->failed && w->nleases) {
    release_lease_at(w, w->nleases - 1);
    compare(w);
  }
  while (!w->failed && w->nhandles) {
    release_handle_at(w, w->nhandles - 1);
    compare(w);
  }
  if (w->failed) return;
  trace(w, "close");
  w->r->calls++;
  int rc = ccache_close(w->c);
  expect_rc(w, "close", rc, CCACHE_OK);
  if (rc != CCACHE_OK) return;
  w->c = NULL;
  m_clear(w, NULL);
  compare_events(w);
  for (int i = 0; i < MAXENT; i++)
    if (w->ents[i].alive) mfail(w, "model: an entry outlives close");
  for (int i = 0; i < MAXPROG; i++)
    if (w->progs[i].alive) mfail(w, "model: a program outlives close");
  for (int id = 1; id <= w->next_cid; id++)
    if (!w->cdead[id]) mfail(w, "closure c%d never destroyed", id);
  for (int id = 1; id <= w->next_nid; id++)
    if (!w->ndead[id]) mfail(w, "native n%d never destroyed", id);
}

int m_run(m_src *src, const m_opts *o, m_result *r) {
  m_world *w = calloc(1, sizeof *w);
  if (!w) abort();
  memset(r, 0, sizeof *r);
  w->src = src;
  w->o = o;
  w->r = r;
  for (int i = 0; i < MAXKEYS; i++) w->tab[i] = -1;
  for (int i = 0; i < MAXPKEYS; i++) w->ptab[i] = -1;
  w->next_idx = 1;
  grow_dead(w, 1);
  if (open_cache(w) == 0) {
    while (!w->failed && w->step < o->max_steps && !m_src_done(src)) {
      w->step++;
      step(w);
      compare(w);
    }
    r->steps = w->step;
    r->stats = w->exp;
    r->stats.items = w->items;
    r->stats.cost_bytes = w->cost;
    w->step++; /* the teardown */
    teardown(w);
  }
  int failed = w->failed;
  /* After a mismatch the cache may be in any state: it is abandoned. */
  free(w->cdead);
  free(w->ndead);
  free(w);
  return failed ? -1 : 0;
}
