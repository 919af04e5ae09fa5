/* prims_ctx.c: the bookkeeping around the primitives: the program keys
 * seen, compiles counted per program by the event hook, the live programs
 * (born, died, a double or foreign destroy caught), the cache's destroy
 * callbacks, and the lifetimes of a mode's context and of a serving
 * worker. */
#include "prims_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct key_entry {
  ccache_key key;
  UT_hash_handle hh;
};

struct ptr_entry {
  void *ptr;
  UT_hash_handle hh;
};

struct key_count {
  ccache_key key;
  uint64_t n;
  UT_hash_handle hh;
};

/* How a runtime counts compiles per program with the event hook: one
 * COMPILE_END at the program level per compile that ran (a tier hit or a
 * shared program is none). */
void prims_on_event(void *arg, const ccache_event *ev) {
  prim_ctx *ctx = arg;
  if (ev->kind != CCACHE_EVENT_COMPILE_END || ev->level != CCACHE_LEVEL_PROGRAM) return;
  struct key_count *e;
  pthread_mutex_lock(&ctx->lock);
  HASH_FIND(hh, ctx->compiled, &ev->key, sizeof ev->key, e);
  if (!e && (e = calloc(1, sizeof *e)) != NULL) {
    e->key = ev->key;
    HASH_ADD(hh, ctx->compiled, key, sizeof e->key, e);
  }
  if (e) e->n++;
  pthread_mutex_unlock(&ctx->lock);
}

void prims_compile_counts(prim_ctx *ctx, uint64_t *total, uint64_t *recompiled, uint64_t *most) {
  *total = *recompiled = *most = 0;
  pthread_mutex_lock(&ctx->lock);
  for (struct key_count *e = ctx->compiled; e; e = e->hh.next) {
    *total += e->n;
    *recompiled += e->n > 1;
    if (e->n > *most) *most = e->n;
  }
  pthread_mutex_unlock(&ctx->lock);
}

/* ---------------------------------------------------------------------- */
/* Program keys seen (the keys themselves are built in keys.c).            */

/* Remember a program key, to count the distinct ones.  @return 1 if it is
 * new (the first request for that program in this mode), else 0. */
int record_key(prim_ctx *ctx, ccache_key k) {
  struct key_entry *e;
  int fresh = 0;
  pthread_mutex_lock(&ctx->lock);
  HASH_FIND(hh, ctx->keys, &k, sizeof k, e);
  if (!e && (e = calloc(1, sizeof *e)) != NULL) {
    e->key = k;
    HASH_ADD(hh, ctx->keys, key, sizeof e->key, e);
    ctx->n_keys++;
    fresh = 1;
  }
  pthread_mutex_unlock(&ctx->lock);
  return fresh;
}

/* ---------------------------------------------------------------------- */
/* Program accounting: a set of live native pointers catches a double or   */
/* foreign destroy, the counters give live/peak.                           */

void program_born(prim_ctx *ctx, void *native) {
  struct ptr_entry *e = calloc(1, sizeof *e);
  pthread_mutex_lock(&ctx->lock);
  if (e) {
    e->ptr = native;
    HASH_ADD_PTR(ctx->live, ptr, e);
  }
  pthread_mutex_unlock(&ctx->lock);
  atomic_fetch_add(&ctx->programs_created, 1);
  uint_fast64_t live = atomic_fetch_add(&ctx->programs_live, 1) + 1;
  uint_fast64_t peak = atomic_load(&ctx->programs_peak);
  while (live > peak && !atomic_compare_exchange_weak(&ctx->programs_peak, &peak, live)) {
  }
}

static void program_died(prim_ctx *ctx, void *native) {
  struct ptr_entry *e;
  pthread_mutex_lock(&ctx->lock);
  HASH_FIND_PTR(ctx->live, &native, e);
  if (e) HASH_DEL(ctx->live, e);
  pthread_mutex_unlock(&ctx->lock);
  if (!e) {
    atomic_fetch_add(&ctx->bad_destroys, 1);
    return;
  }
  free(e);
  atomic_fetch_add(&ctx->programs_destroyed, 1);
  atomic_fetch_sub(&ctx->programs_live, 1);
}

void prims_destroy_program(void *native, void *vctx) {
  prim_ctx *ctx = vctx;
  program_died(ctx, native);
  dnnl_status_t st = dnnl_primitive_destroy(native);
  if (st != dnnl_success)
    fprintf(stderr, "onednn_serving: dnnl_primitive_destroy: status %d\n", (int)st);
}

void prims_destroy_closure(void *obj, void *vctx) {
  prim_ctx *ctx = vctx;
  closure *cl = obj;
  if (cl->weights) {
    dnnl_status_t st = dnnl_memory_destroy(cl->weights);
    if (st != dnnl_success)
      fprintf(stderr, "onednn_serving: dnnl_memory_destroy: status %d\n", (int)st);
  }
  free(cl);
  atomic_fetch_add(&ctx->closures_destroyed, 1);
}

int prims_init(prim_ctx *ctx, acquire_mode mode, dnnl_engine_t engine) {
  memset(ctx, 0, sizeof *ctx);
  ctx->mode = mode;
  ctx->engine = engine;
  return pthread_mutex_init(&ctx->lock, NULL) == 0 ? 0 : -1;
}

void prims_fini(prim_ctx *ctx) {
  struct key_entry *k, *kt;
  HASH_ITER(hh, ctx->keys, k, kt) {
    HASH_DEL(ctx->keys, k);
    free(k);
  }
  struct key_count *q, *qt;
  HASH_ITER(hh, ctx->compiled, q, qt) {
    HASH_DEL(ctx->compiled, q);
    free(q);
  }
  struct ptr_entry *p, *pt;
  HASH_ITER(hh, ctx->live, p, pt) {
    HASH_DEL(ctx->live, p);
    free(p);
  }
  pthread_mutex_destroy(&ctx->lock);
}

/* ---------------------------------------------------------------------- */
/* Serving workers: their lifetime and the per-thread table.              */

void prims_worker_init(prim_worker *w) {
  memset(w, 0, sizeof *w);
  atomic_init(&w->prims_done, 0);
}

/* Destroy every entry of the worker's table; @return how many. */
uint64_t tl_destroy_all(prim_ctx *ctx, prim_worker *w, int *failed) {
  struct tl_entry *e, *tmp;
  uint64_t n = 0;
  HASH_ITER(hh, w->tl, e, tmp) {
    HASH_DEL(w->tl, e);
    program_died(ctx, e->prim);
    if (dnnl_primitive_destroy(e->prim) != dnnl_success) *failed = 1;
    if (e->weights && dnnl_memory_destroy(e->weights) != dnnl_success) *failed = 1;
    free(e);
    n++;
  }
  return n;
}

int prims_worker_fini(prim_ctx *ctx, prim_worker *w) {
  int failed = 0;
  tl_destroy_all(ctx, w, &failed);
  if (w->scratch_mem && dnnl_memory_destroy(w->scratch_mem) != dnnl_success) failed = 1;
  free(w->scratch);
  w->scratch = NULL;
  w->scratch_mem = NULL;
  w->scratch_cap = 0;
  if (failed) fprintf(stderr, "onednn_serving: destroying a worker's oneDNN objects failed\n");
  return failed ? -1 : 0;
}
