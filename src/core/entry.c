/*
 * entry.c - a closure entry's lifetime once made: its references, the limbo
 * of entries out of the table but not yet destroyed, and the destroy.
 * table.c puts entries in and takes them out; this file ends them.
 */
#include "core/internal.h"

ccache__entry *ccache__entry_new(ccache *c) {
  /* A strong cache's entries have room for check[0]. */
  return ccache__malloc(&c->mem, sizeof(ccache__entry) + (c->strong ? sizeof(ccache_key) : 0));
}

void ccache__entry_free(ccache *c, ccache__entry *e) { ccache__free(&c->mem, e); }

/* ---------------------------------------------------------------- limbo */

/* Entries out of the table but not yet destroyed, for an abandoning close
 * (ccache_close_ex()).  Linked through hh.prev (next in limbo) and
 * hh.hh_prev (previous in limbo): no reader follows either, while a reader
 * that found the entry before it left may still follow its hh.hh_next
 * (table.c keeps it until the entry is reclaimed), and the graveyard uses
 * hh.next.  limbo_mu is a leaf lock: taken under wlock at detach, alone at
 * destroy. */
static ccache__entry *limbo_next(const ccache__entry *e) { return (ccache__entry *)e->hh.prev; }

void ccache__limbo_link_locked(ccache *c, ccache__entry *e) {
  ccache__lock(&c->limbo_mu);
  e->hh.hh_prev = NULL;
  e->hh.prev = c->limbo;
  if (c->limbo) c->limbo->hh.hh_prev = &e->hh;
  c->limbo = e;
  ccache__unlock(&c->limbo_mu);
}

static ccache__entry *limbo_prev(const ccache__entry *e) {
  return e->hh.hh_prev ? (ccache__entry *)((char *)e->hh.hh_prev - offsetof(ccache__entry, hh))
                       : NULL;
}

static void limbo_unlink(ccache *c, ccache__entry *e) {
  ccache__lock(&c->limbo_mu);
  ccache__entry *prev = limbo_prev(e), *next = limbo_next(e);
  if (prev)
    prev->hh.prev = next;
  else
    c->limbo = next;
  if (next) next->hh.hh_prev = e->hh.hh_prev;
  ccache__unlock(&c->limbo_mu);
}

static void entry_destroy(ccache *c, ccache__entry *e) {
  limbo_unlink(c, e);
  if (e->flags & CCACHE__E_BORROWED)
    ccache__entry_unref(c, (ccache__entry *)e->closure);
  else
    ccache__destroy_closure(c, e->closure);
  ccache__program_unref(c, e->program, false);
  ccache__entry_free(c, e);
}

/* The last reference is gone: closure first, then the program it runs. */
void ccache__entry_unref(ccache *c, ccache__entry *e) {
  if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1) entry_destroy(c, e);
}

/* ccache_close_ex(CCACHE_CLOSE_ABANDON), after the table is cleared and its
 * graveyard drained: what is left in limbo is held only by abandoned leases
 * (and the borrowers of a closure).  Each closure once, then the program
 * references; returns how many entries it destroyed. */
uint64_t ccache__abandon_entries(ccache *c) {
  uint64_t n = 0;
  for (ccache__entry *e = c->limbo; e; e = limbo_next(e))
    if (!(e->flags & CCACHE__E_BORROWED)) ccache__destroy_closure(c, e->closure);
  while (c->limbo) {
    ccache__entry *e = c->limbo;
    c->limbo = limbo_next(e);
    ccache__program_unref(c, e->program, false);
    ccache__entry_free(c, e);
    n++;
  }
  return n;
}
