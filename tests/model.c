/*
 * model.c - reference model + driver, see model.h: the byte and PRNG sources,
 * and the driver's loop (open, steps, teardown, the checks at close).
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
 *
 * The files: model_world.h (the model's state, shared by the files below),
 * model_state.c (the model's rules and what the driver holds),
 * model_calls.c (the calls that do not compile), model_compile.c (the
 * get-or-compile calls and their callbacks), model_compare.c (the
 * comparison after every step), and this one.
 */
#include "model.h"

#include <stdlib.h>
#include <string.h>

#include "model_world.h"

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

/* ------------------------------------------------------------- running */

static void step(m_world *w) {
  uint32_t op = pick(w, 100);
  /* Half the calls go to a few hot keys, so hits and replacements are common. */
  uint64_t key = pick(w, pick(w, 2) ? w->nkeys : (w->nkeys < 4 ? w->nkeys : 4));
  uint64_t pk = pick(w, w->npkeys);
  if (op < 12)
    m_do_fetch(w, key);
  else if (op < 24)
    m_do_put(w, key, 0);
  else if (op < 36)
    m_do_goc(w, key);
  else if (op < 44)
    m_do_intern(w, pk);
  else if (op < 48)
    m_do_pfetch(w, pk);
  else if (op < 54)
    m_do_pgoc(w, pk);
  else if (op < 62) {
    if (w->nleases) m_release_lease_at(w, (int)pick(w, (uint32_t)w->nleases));
  } else if (op < 70) {
    if (w->nhandles) m_release_handle_at(w, (int)pick(w, (uint32_t)w->nhandles));
  } else if (op < 75)
    m_do_remove(w, key);
  else if (op < 76)
    m_do_clear(w);
  else if (op < 79)
    m_do_limits(w);
  else if (op < 83)
    m_do_sweep(w);
  else
    m_do_clock(w);
}

static int open_cache(m_world *w) {
  w->nkeys = 2 + pick(w, MAXKEYS - 1);
  w->npkeys = 1 + pick(w, MAXPKEYS);
  w->max_items = m_draw_bound(w, 3, 12);
  w->ttl = m_draw_bound(w, 3, 60);
  w->max_cost = m_draw_bound(w, 2, 300);
  atomic_store(&w->t.now_ms, pick(w, 4) ? 0 : (uint64_t)pick(w, 1000));
  ccache_config cfg;
  t_config(&cfg, &w->t);
  cfg.max_items = w->max_items;
  cfg.ttl_ms = w->ttl;
  cfg.max_cost_bytes = w->max_cost;
  m_trace(w, "open: %u keys, %u program keys, items %lld ttl %lld cost %lld, clock %llu", w->nkeys,
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
    m_release_lease_at(w, w->nleases - 1);
    m_compare(w);
  }
  while (!w->failed && w->nhandles) {
    m_release_handle_at(w, w->nhandles - 1);
    m_compare(w);
  }
  if (w->failed) return;
  m_trace(w, "close");
  w->r->calls++;
  int rc = ccache_close(w->c);
  m_expect_rc(w, "close", rc, CCACHE_OK);
  if (rc != CCACHE_OK) return;
  w->c = NULL;
  m_clear(w, NULL);
  m_compare_events(w);
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
  m_grow_dead(w, 1);
  if (open_cache(w) == 0) {
    while (!w->failed && w->step < o->max_steps && !m_src_done(src)) {
      w->step++;
      step(w);
      m_compare(w);
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
