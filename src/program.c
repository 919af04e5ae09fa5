/*
 * program.c - the reference-counted program table.
 *
 * Programs are interned under their structural key so many closure entries
 * share one native program (30 identical decoder layers -> one program per
 * shape).  Every holder counts in refs: caller handles and closure entries.
 * When refs reaches zero the program leaves the table under c->pmu and its
 * native program is destroyed after the lock is released, exactly once.
 */
#include "internal.h"

ccache_program *ccache__program_find_locked(ccache *c, ccache_key pkey) {
  ccache_program *p = NULL;
  HASH_FIND_BYHASHVALUE(hh, c->programs, &pkey, sizeof pkey, ccache__key_hash(pkey), p);
  if (p) {
    p->refs++;
    c->handles_out++;
  }
  return p;
}

void ccache__program_ref(ccache *c, ccache_program *p) {
  pthread_mutex_lock(&c->pmu);
  p->refs++;
  pthread_mutex_unlock(&c->pmu);
}

void ccache__program_unref(ccache *c, ccache_program *p, bool is_handle) {
  CCACHE__UTHASH_SCOPE(&c->mem);
  pthread_mutex_lock(&c->pmu);
  ccache__assert(p->refs > 0);
  if (is_handle) c->handles_out--;
  bool last = --p->refs == 0;
  if (last) {
    HASH_DELETE(hh, c->programs, p);
    c->nprograms--;
  }
  pthread_mutex_unlock(&c->pmu);
  if (!last) return;
  ccache__assert(p->table_refs == 0);
  ccache__destroy_program(c, p->native);
  ccache__free(&c->mem, p);
}

int ccache__program_intern(ccache *c, ccache_key pkey, void *native, uint64_t cost,
                           ccache_program **out, bool count_lookup) {
  CCACHE__UTHASH_SCOPE(&c->mem);
  /* Allocated before the lock so a new program costs no allocation under it
   * (uthash's own table growth may still allocate there). */
  ccache_program *fresh = ccache__calloc(&c->mem, sizeof *fresh);
  if (!fresh) {
    ccache__destroy_program(c, native);
    return CCACHE_ENOMEM;
  }
  pthread_mutex_lock(&c->pmu);
  ccache_program *p = ccache__program_find_locked(c, pkey);
  if (p) {
    if (count_lookup) c->program_hits++;
    pthread_mutex_unlock(&c->pmu);
    ccache__free(&c->mem, fresh);
    /* The cache owns native either way: a duplicate is destroyed now, unless
     * it is the very program already interned. */
    if (native != p->native) ccache__destroy_program(c, native);
    *out = p;
    return CCACHE_OK;
  }
  fresh->pkey = pkey;
  fresh->native = native;
  fresh->cost = cost;
  fresh->refs = 1;
  fresh->owner = c;
  HASH_ADD_BYHASHVALUE(hh, c->programs, pkey, sizeof fresh->pkey, ccache__key_hash(pkey), fresh);
  if (uh_oom) {
    pthread_mutex_unlock(&c->pmu);
    ccache__free(&c->mem, fresh);
    ccache__destroy_program(c, native);
    return CCACHE_ENOMEM;
  }
  c->nprograms++;
  c->handles_out++;
  if (count_lookup) c->program_misses++;
  pthread_mutex_unlock(&c->pmu);
  *out = fresh;
  return CCACHE_OK;
}

int ccache_program_intern(ccache *c, ccache_key pkey, void *native, uint64_t cost_bytes,
                          ccache_program **out) {
  if (!c) return CCACHE_EINVAL;
  int gate = out ? ccache__gate(c) : CCACHE_EINVAL;
  if (gate != CCACHE_OK) {
    /* Ownership of native passes to the cache on error too. */
    ccache__destroy_program(c, native);
    return gate;
  }
  *out = NULL;
  return ccache__program_intern(c, pkey, native, cost_bytes, out, true);
}

int ccache_program_fetch(ccache *c, ccache_key pkey, ccache_program **out) {
  if (!c || !out) return CCACHE_EINVAL;
  *out = NULL;
  int gate = ccache__gate(c);
  if (gate != CCACHE_OK) return gate;
  pthread_mutex_lock(&c->pmu);
  ccache_program *p = ccache__program_find_locked(c, pkey);
  if (p)
    c->program_hits++;
  else
    c->program_misses++;
  pthread_mutex_unlock(&c->pmu);
  *out = p;
  return p ? CCACHE_OK : CCACHE_MISS;
}

void *ccache_program_native(const ccache_program *p) { return p ? p->native : NULL; }

void ccache_program_release(ccache *c, ccache_program *p) {
  if (!c || !p || ccache__forked(c)) return;
  ccache__program_unref(c, p, true);
}
