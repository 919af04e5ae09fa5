/* walk.c: threads walking the model's call sites. */
#include "walk.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner.h"

hj_kind hj_slot_kind(uint32_t slot) {
  static const hj_kind order[HJ_SLOTS] = {HJ_RMSNORM, HJ_ROPE_Q, HJ_ROPE_K, HJ_SOFTMAX,
                                          HJ_SILU_GATE};
  return order[slot % HJ_SLOTS];
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef struct walker {
  hj_jit *j;
  const hj_walk_options *o;
  pthread_rwlock_t *gate; /* write-held by hj_walk until every thread exists */
  const int *cancel;      /* set when not every thread could start */
  uint32_t index;
  hj_walk_result r;
  ccache_fp sum;
} walker;

static int fail(walker *w, const char *what, uint32_t layer, uint32_t slot, const char *why) {
  snprintf(w->r.err, sizeof w->r.err, "layer %" PRIu32 " %s: %s: %s", layer,
           hj_kind_name(hj_slot_kind(slot)), what, why);
  w->r.failed = 1;
  return -1;
}

/* One site visit: the closure, then a prefill and a decode call. */
static int visit(walker *w, uint32_t layer, uint32_t slot, int hash) {
  hj_spec s = hj_spec_default(hj_slot_kind(slot)); /* the runtime's builder, at this site */
  ccache_lease lease = {0};
  char err[512] = "";
  double t0 = now_ms();
  int rc = hj_jit_site(w->j, layer, slot, &s, &lease, err, sizeof err);
  w->r.obtain_ms += now_ms() - t0;
  if (rc != CCACHE_OK) {
    char why[600];
    snprintf(why, sizeof why, "%s%s%s", ccache_strerror(rc), err[0] ? ": " : "", err);
    return fail(w, "obtaining the pipeline", layer, slot, why);
  }
  w->r.site_visits++;
  const hj_closure *cl = lease.closure;
  const uint32_t shapes[2][2] = {{w->o->tokens, w->o->tokens}, {1, w->o->tokens + 1}};
  int out = 0;
  for (int i = 0; i < 2 && out == 0; i++) {
    hj_result res;
    uint32_t site = layer * HJ_SLOTS + slot;
    if (hj_run_checked(cl->spec.kind, lease.native, shapes[i][0], shapes[i][1], w->o->seed, site,
                       w->o->rms_eps, hash ? &w->sum : NULL, &res) != 0) {
      out = fail(w, "running", layer, slot, "out of memory, or a pipeline of another kind");
      break;
    }
    if (res.status != 0) {
      out = fail(w, "running", layer, slot, hj_runtime_error());
      break;
    }
    hj_walk_kind *k = &w->r.kinds[cl->spec.kind];
    k->runs++;
    k->mismatches += !res.ok;
    w->r.mismatches += !res.ok;
    if (!(res.max_abs_err <= k->max_abs_err)) k->max_abs_err = res.max_abs_err;
  }
  ccache_lease_release(w->j->cache, &lease);
  return out;
}

static void *walk_thread(void *arg) {
  walker *w = arg;
  pthread_rwlock_rdlock(w->gate); /* all threads start together */
  pthread_rwlock_unlock(w->gate);
  if (*w->cancel) return NULL;
  for (uint32_t rep = 0; rep < w->o->repeat; rep++)
    for (uint32_t layer = 0; layer < w->o->layers; layer++)
      for (uint32_t slot = 0; slot < HJ_SLOTS; slot++)
        if (visit(w, layer, slot, w->index == 0 && rep == 0) != 0) return NULL;
  return NULL;
}

static void merge(hj_walk_result *r, const hj_walk_result *t) {
  r->site_visits += t->site_visits;
  r->mismatches += t->mismatches;
  r->obtain_ms += t->obtain_ms;
  for (int k = 0; k < HJ_N_KINDS; k++) {
    r->kinds[k].runs += t->kinds[k].runs;
    r->kinds[k].mismatches += t->kinds[k].mismatches;
    if (!(t->kinds[k].max_abs_err <= r->kinds[k].max_abs_err))
      r->kinds[k].max_abs_err = t->kinds[k].max_abs_err;
  }
  if (t->failed && !r->failed) {
    r->failed = 1;
    memcpy(r->err, t->err, sizeof r->err);
  }
}

int hj_walk(hj_jit *j, const hj_walk_options *o, hj_walk_result *r) {
  memset(r, 0, sizeof *r);
  walker *w = calloc(o->threads, sizeof *w);
  pthread_t *tid = calloc(o->threads, sizeof *tid);
  pthread_rwlock_t gate;
  int cancel = 0;
  if (!w || !tid || pthread_rwlock_init(&gate, NULL) != 0) {
    free(w);
    free(tid);
    snprintf(r->err, sizeof r->err, "out of memory for %" PRIu32 " threads", o->threads);
    return -1;
  }
  pthread_rwlock_wrlock(&gate);
  uint32_t started = 0;
  for (; started < o->threads; started++) {
    w[started] = (walker){.j = j, .o = o, .gate = &gate, .cancel = &cancel, .index = started};
    ccache_fp_init(&w[started].sum);
    if (pthread_create(&tid[started], NULL, walk_thread, &w[started]) != 0) break;
  }
  cancel = started < o->threads;
  pthread_rwlock_unlock(&gate);
  for (uint32_t i = 0; i < started; i++) {
    pthread_join(tid[i], NULL);
    merge(r, &w[i].r);
  }
  ccache_key k;
  ccache_fp_final(&w[0].sum, &k);
  snprintf(r->checksum, sizeof r->checksum, "%016" PRIx64 "%016" PRIx64, k.hi, k.lo);
  pthread_rwlock_destroy(&gate);
  free(w);
  free(tid);
  if (cancel) {
    snprintf(r->err, sizeof r->err, "cannot start thread %" PRIu32, started);
    r->failed = 1;
  }
  return r->failed ? -1 : 0;
}
