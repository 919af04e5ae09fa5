/*
 * model_world.h - private to the model's files (model.c, model_state.c,
 * model_calls.c, model_compile.c, model_compare.c): the model's state
 * (m_world: the model proper, what the driver holds, the compiles in
 * progress, the expected destroy events, the objects made) and the
 * functions the files share.  The rules the model follows are in model.c.
 */
#ifndef CCACHE_TEST_MODEL_WORLD_H
#define CCACHE_TEST_MODEL_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
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

/* Entries that left the table in one call, in order: they die (if
 * nothing else holds them) once the call is done with the table. */
typedef struct m_gy {
  int e[MAXENT];
  int n;
} m_gy;

/* ---- small helpers ---- */

static inline uint32_t pick(m_world *w, uint32_t bound) { return m_pick(w->src, bound); }

static inline int m_expired(uint64_t ins, uint64_t now, uint64_t ttl) {
  return ttl != U && now >= ins && now - ins >= ttl;
}

static inline uint64_t now_of(m_world *w) { return atomic_load(&w->t.now_ms); }

/* ---- model_state.c ---- */

/* The first mismatch of the run (later ones are ignored). */
void mfail(m_world *w, const char *fmt, ...);
void m_trace(m_world *w, const char *fmt, ...);
void m_expect_ev(m_world *w, char kind, int id);
void m_grow_dead(m_world *w, size_t id);
t_obj *m_new_closure(m_world *w);
t_obj *m_new_native(m_world *w);
void m_self_destroy(m_world *w, t_obj *o);
void m_prog_unref(m_world *w, int pi);
int m_intern(m_world *w, uint64_t pk, int nid, void *native, uint64_t cost, int count);
void m_detach(m_world *w, int ei, uint64_t *counter, m_gy *gy);
void m_drain(m_world *w, m_gy *gy);
void m_enforce(m_world *w, int keep, m_gy *gy);
int m_insert(m_world *w, uint64_t key, int cid, void *closure, int pi, m_gy *gy);
void m_release_handle_at(m_world *w, int i);
void m_add_handle(m_world *w, ccache_program *h, int pi);
void m_release_lease_at(m_world *w, int i);
void m_pin_lease(m_world *w, int ei);
void m_hold_lease(m_world *w, ccache_lease *l, int ei);
void m_add_lease(m_world *w, ccache_lease *l, int ei);
void m_expect_rc(m_world *w, const char *what, long long got, long long want);
int m_flight_active(const m_flight *f, int n, uint64_t key);

/* ---- model_calls.c ---- */

void m_do_clock(m_world *w);
void m_do_intern(m_world *w, uint64_t pk);
void m_do_pfetch(m_world *w, uint64_t pk);
void m_do_put(m_world *w, uint64_t key, int nested);
void m_do_fetch(m_world *w, uint64_t key);
void m_do_remove(m_world *w, uint64_t key);
void m_clear(m_world *w, uint64_t *counter);
void m_do_clear(m_world *w);
uint64_t m_draw_bound(m_world *w, uint32_t unbounded_in, uint32_t max);
void m_do_limits(m_world *w);
void m_do_sweep(m_world *w);

/* ---- model_compile.c ---- */

void m_do_pgoc(m_world *w, uint64_t pk);
void m_do_goc(m_world *w, uint64_t key);

/* ---- model_compare.c ---- */

void m_compare_events(m_world *w);
void m_compare(m_world *w);

#endif
