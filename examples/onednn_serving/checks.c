/* checks.c: --check: the cache accounting of a finished run (hits and
 * misses add up, compiles match the distinct program keys, every program
 * and closure destroyed once, the bounds held), one line per check. */
#include "checks.h"

#include <inttypes.h>
#include <stdio.h>

#include <ccache.h>

/* ---------------------------------------------------------------------- */
/* --check: the cache accounting.                                          */

static int expect(int ok, const char *what) {
  fprintf(stderr, "check: %-80s %s\n", what, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

/* Whether the ccache bounds guarantee a hit.  Every forward step ends with
 * the LM head, whose call site and shape never change, so with two steps or
 * more it is asked for twice.  Unbounded, the second time is a hit.  With
 * one serving thread, FIFO and max_items >= the call sites of one step
 * (12 per layer + the head), at most max_items - 1 other entries are
 * inserted between the two, so it is still there.  A TTL may expire it and
 * a cost bound or other threads' inserts may push it out: no guarantee. */
static int hits_guaranteed(const app *a) {
  const options *o = &a->opt;
  uint64_t steps = (uint64_t)a->rs.n * (uint64_t)(o->decode + 1);
  uint64_t per_step = 12u * (uint64_t)a->mdl.cfg.layers + 1u;
  if (steps < 2 || o->ttl_ms != CCACHE_UNBOUNDED || o->max_cost != CCACHE_UNBOUNDED) return 0;
  return o->max_items == CCACHE_UNBOUNDED || (o->threads == 1 && o->max_items >= per_step);
}

int run_checks(const app *a, const mode_result *r, const accounting *accs, int agree) {
  const mode_result *cc = &r[MODE_CCACHE - 1], *tl = &r[MODE_PER_THREAD - 1];
  const accounting *acc = &accs[MODE_CCACHE - 1], *tacc = &accs[MODE_PER_THREAD - 1];
  const options *o = &a->opt;
  int bad = 0;
  char msg[200];
  snprintf(msg, sizeof msg, "final logits agree bit for bit across the %d modes", N_MODES);
  bad += expect(agree, msg);

  /* ccache: each request is one fetch, and each fetch miss one
   * get-or-compile of the same key on the same thread, which counts nothing
   * more: one lookup per request.  A fetch miss then compiled, waited, or
   * found what another thread inserted meanwhile. */
  uint64_t fetch_misses = cc->prim_requests - cc->fetch_hits;
  snprintf(msg, sizeof msg,
           "ccache: hits + misses (%" PRIu64 " + %" PRIu64 ") == requests (%" PRIu64 ")", cc->hits,
           cc->misses, cc->prim_requests);
  bad += expect(cc->hits + cc->misses == cc->prim_requests, msg);
  snprintf(msg, sizeof msg, "ccache: misses (%" PRIu64 ") == fetch misses (%" PRIu64 ")",
           cc->misses, fetch_misses);
  bad += expect(cc->misses == fetch_misses, msg);
  snprintf(msg, sizeof msg,
           "ccache: closure compiles + waits (%" PRIu64 " + %" PRIu64 ") <= misses (%" PRIu64 ")",
           cc->closure_compiles, cc->closure_waits, cc->misses);
  bad += expect(cc->closure_compiles + cc->closure_waits <= cc->misses, msg);
  if (hits_guaranteed(a)) {
    snprintf(msg, sizeof msg,
             "ccache: hits (%" PRIu64 ") > 0 (the bounds guarantee the LM head a hit)", cc->hits);
    bad += expect(cc->hits > 0, msg);
  } else {
    /* Not a check: these bounds allow any number of hits, 0 included. */
    fprintf(stderr, "note:  ccache: %" PRIu64 " hits (these bounds do not guarantee one)\n",
            cc->hits);
  }
  snprintf(msg, sizeof msg,
           "ccache: program compiles seen by the event hook (%" PRIu64
           ") == program_compiles (%" PRIu64 ")",
           cc->event_compiles, cc->compiles);
  bad += expect(cc->event_compiles == cc->compiles, msg);
  if (o->max_items == CCACHE_UNBOUNDED && o->ttl_ms == CCACHE_UNBOUNDED &&
      o->max_cost == CCACHE_UNBOUNDED) {
    snprintf(msg, sizeof msg,
             "ccache: program_compiles (%" PRIu64 ") == distinct program keys (%" PRIu64 ")",
             cc->compiles, cc->distinct_programs);
    bad += expect(cc->compiles == cc->distinct_programs, msg);
    snprintf(msg, sizeof msg,
             "ccache: programs compiled more than once (%" PRIu64 ") == 0 (nothing is evicted)",
             cc->programs_recompiled);
    bad += expect(cc->programs_recompiled == 0, msg);
  } else {
    /* Evicted programs may be compiled again when asked for later. */
    snprintf(msg, sizeof msg,
             "ccache: program_compiles (%" PRIu64 ") >= distinct program keys (%" PRIu64 ")",
             cc->compiles, cc->distinct_programs);
    bad += expect(cc->compiles >= cc->distinct_programs, msg);
  }
  snprintf(msg, sizeof msg,
           "ccache: every program destroyed once (%" PRIu64 " created, %" PRIu64 " destroyed)",
           acc->created, acc->destroyed);
  bad +=
      expect(acc->created == cc->compiles && acc->destroyed == acc->created && acc->bad == 0, msg);
  snprintf(msg, sizeof msg,
           "ccache: every closure destroyed once (%" PRIu64 " created, %" PRIu64 " destroyed)",
           acc->closures_created, acc->closures_destroyed);
  bad += expect(acc->closures_created == cc->closure_compiles &&
                    acc->closures_destroyed == acc->closures_created,
                msg);
  if (o->max_items != CCACHE_UNBOUNDED) {
    /* Entries <= max_items after every insert.  Beyond them, each serving
     * thread holds at most one lease or one freshly compiled program, plus
     * at most one evicted program whose destroy runs on it right after the
     * insert: peak <= max_items + 2 * threads. */
    uint64_t limit = o->max_items + 2u * (uint64_t)o->threads;
    snprintf(msg, sizeof msg,
             "ccache: programs alive at peak (%" PRIu64 ") <= max_items + 2 x threads (%" PRIu64
             ")",
             cc->programs_peak, limit);
    bad += expect(cc->programs_peak <= limit, msg);
    snprintf(msg, sizeof msg, "ccache: closure entries at end (%" PRIu64 ") <= max_items",
             cc->items_end);
    bad += expect(cc->items_end <= o->max_items, msg);
  }
  /* Every closure compile inserts one entry (a replaced expired one was
   * counted as a ttl eviction first); entries leave only by eviction here. */
  snprintf(msg, sizeof msg,
           "ccache: entries at end + evictions (%" PRIu64 " + %" PRIu64
           ") == closure compiles (%" PRIu64 ")",
           cc->items_end, cc->ev_capacity + cc->ev_ttl + cc->ev_cost, cc->closure_compiles);
  bad += expect(cc->items_end + cc->ev_capacity + cc->ev_ttl + cc->ev_cost == cc->closure_compiles,
                msg);

  /* The per-thread tables */
  snprintf(msg, sizeof msg,
           "%s: hits + compiles (%" PRIu64 " + %" PRIu64 ") == primitive requests (%" PRIu64 ")",
           tl->name, tl->hits, tl->compiles, tl->prim_requests);
  bad += expect(tl->hits + tl->compiles == tl->prim_requests, msg);
  snprintf(msg, sizeof msg, "%s: entries cleared (%" PRIu64 ") == %d x clears (%" PRIu64 ")",
           tl->name, tl->tl_entries_cleared, PER_THREAD_MAX_ENTRIES, tl->tl_clears);
  bad += expect(tl->tl_entries_cleared == (uint64_t)PER_THREAD_MAX_ENTRIES * tl->tl_clears, msg);
  snprintf(msg, sizeof msg,
           "%s: every primitive destroyed once (%" PRIu64 " created, %" PRIu64 " destroyed)",
           tl->name, tacc->created, tacc->destroyed);
  bad += expect(tacc->created == tl->compiles && tacc->destroyed == tacc->created && tacc->bad == 0,
                msg);
  uint64_t tl_limit = (uint64_t)PER_THREAD_MAX_ENTRIES * (uint64_t)o->threads;
  snprintf(msg, sizeof msg,
           "%s: primitives alive at peak (%" PRIu64 ") <= %d x threads (%" PRIu64 ")", tl->name,
           tl->programs_peak, PER_THREAD_MAX_ENTRIES, tl_limit);
  bad += expect(tl->programs_peak <= tl_limit, msg);
  return bad;
}
