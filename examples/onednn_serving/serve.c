/* serve.c: the serving loop.  Serving threads take requests from one
 * shared counter and run prefill and greedy decoding through prims_run()
 * (forward.c); the main thread waits for them, reporting progress, then
 * sums the workers' counters and the latency percentiles. */
#include "serve.h"

#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <ccache.h>

/* Progress: redrawn in place this often on a terminal, else one line on
 * stderr this often (both within the 2 s). */
#define PROGRESS_TTY_NS  500000000u
#define PROGRESS_LINE_NS 1500000000u

struct worker_arg {
  mode_run *run;
  prim_worker w;
  size_t scratch_bytes; /* the worker's scratchpad at its end */
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------- */
/* Progress.                                                               */

/* One progress report: requests and tokens finished, primitive requests run
 * so far (moves within a request too), elapsed time.  @p final ends the
 * line. */
static void progress(mode_run *run, int final) {
  const app *a = run->app;
  uint64_t prims = 0;
  for (int i = 0; i < run->n_workers; i++)
    prims += atomic_load_explicit(&run->workers[i].w.prims_done, memory_order_relaxed);
  double s = (double)(now_ns() - run->start_ns) / 1e9;
  fprintf(stderr,
          "%s[mode %d/%d %-14s] %d/%d requests, %" PRIu64 "/%" PRIu64 " tokens, %" PRIu64
          " primitive requests, %.1f s%s",
          a->progress_tty ? "\r" : "", run->index, N_MODES, run->name, atomic_load(&run->done),
          a->rs.n, (uint64_t)atomic_load(&run->tokens_done), requests_tokens(&a->rs), prims, s,
          a->progress_tty && !final ? "   " : "\n");
}

/* ---------------------------------------------------------------------- */
/* Serving.                                                                */

static uint64_t logits_checksum(const float *logits, int vocab) {
  ccache_fp fp;
  ccache_key k = {0, 0};
  ccache_fp_init(&fp);
  ccache_fp_bytes(&fp, logits, (size_t)vocab * sizeof *logits);
  ccache_fp_final(&fp, &k);
  return k.lo;
}

/* Prefill, then greedy decoding; one latency sample per generated token. */
static int serve_request(mode_run *run, prim_worker *w, sequence *s, const request *r) {
  const app *a = run->app;
  forward_opts fo = {.runtime_dims = a->opt.runtime_dims};
  double *lat = run->latency_ms + (size_t)r->id * (size_t)(a->opt.decode + 1);
  sequence_reset(s);
  uint64_t t0 = now_ns();
  if (forward_step(&a->mdl, &a->tab, &fo, run->ctx, w, s, r->prompt, r->prompt_len) != 0) return -1;
  lat[0] = (double)(now_ns() - t0) / 1e6;
  atomic_fetch_add(&run->tokens_done, (uint_fast64_t)r->prompt_len);
  for (int d = 0; d < r->decode; d++) {
    int32_t tok = forward_argmax(s->logits, a->mdl.cfg.vocab);
    t0 = now_ns();
    if (forward_step(&a->mdl, &a->tab, &fo, run->ctx, w, s, &tok, 1) != 0) return -1;
    lat[d + 1] = (double)(now_ns() - t0) / 1e6;
    atomic_fetch_add(&run->tokens_done, 1);
  }
  run->checksums[r->id] = logits_checksum(s->logits, a->mdl.cfg.vocab);
  return 0;
}

static void serving_done(mode_run *run) {
  pthread_mutex_lock(&run->mu);
  run->running--;
  pthread_cond_signal(&run->cv);
  pthread_mutex_unlock(&run->mu);
}

static void *serving_thread(void *p) {
  worker_arg *wa = p;
  mode_run *run = wa->run;
  const app *a = run->app;
  sequence seq;
  /* This thread's share of the cores for oneDNN's OpenMP regions (the ICV is
   * per thread, so each serving thread sets its own).  oneDNN reads it when
   * a primitive is created: every thread must use the same count, since a
   * primitive created here may run on another serving thread. */
  omp_set_num_threads(a->omp_threads);
  wa->w.omp_threads = a->omp_threads;
  if (dnnl_stream_create(&wa->w.stream, a->engine, dnnl_stream_default_flags) != dnnl_success) {
    fprintf(stderr, "onednn_serving: dnnl_stream_create failed\n");
    atomic_store(&run->failed, 1);
    serving_done(run);
    return NULL;
  }
  if (sequence_init(&seq, &a->mdl.cfg, a->tab.cap) != 0) {
    fprintf(stderr, "onednn_serving: out of memory for a sequence\n");
    atomic_store(&run->failed, 1);
  } else {
    int i;
    while (!atomic_load(&run->failed) && (i = atomic_fetch_add(&run->next, 1)) < a->rs.n) {
      if (serve_request(run, &wa->w, &seq, &a->rs.reqs[i]) != 0) {
        atomic_store(&run->failed, 1);
        break;
      }
      atomic_fetch_add(&run->done, 1);
    }
    sequence_free(&seq);
  }
  wa->scratch_bytes = wa->w.scratch_cap;
  if (prims_worker_fini(run->ctx, &wa->w) != 0) atomic_store(&run->failed, 1);
  if (dnnl_stream_destroy(wa->w.stream) != dnnl_success) atomic_store(&run->failed, 1);
  serving_done(run);
  return NULL;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double percentile(const double *sorted, size_t n, double q) {
  if (n == 0) return 0.0;
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return sorted[i < n ? i : n - 1];
}

/* Wait for the serving threads, reporting progress every interval. */
static void wait_serving(mode_run *run) {
  uint64_t every = run->app->progress_tty ? PROGRESS_TTY_NS : PROGRESS_LINE_NS;
  uint64_t next = now_ns() + every;
  pthread_mutex_lock(&run->mu);
  while (run->running > 0) {
    struct timespec dl = {.tv_sec = (time_t)(next / 1000000000u),
                          .tv_nsec = (long)(next % 1000000000u)};
    pthread_cond_timedwait(&run->cv, &run->mu, &dl);
    if (run->running > 0 && now_ns() >= next) {
      pthread_mutex_unlock(&run->mu);
      progress(run, 0);
      next = now_ns() + every;
      pthread_mutex_lock(&run->mu);
    }
  }
  pthread_mutex_unlock(&run->mu);
}

/* Run the stream on opt.threads threads; fill the timing part of @p res. */
int serve_all(mode_run *run, mode_result *res) {
  const app *a = run->app;
  int nt = a->opt.threads, rc = 0;
  worker_arg *wa = calloc((size_t)nt, sizeof *wa);
  pthread_t *th = calloc((size_t)nt, sizeof *th);
  size_t n_lat = (size_t)a->rs.n * (size_t)(a->opt.decode + 1);
  run->latency_ms = calloc(n_lat, sizeof *run->latency_ms);
  pthread_condattr_t ca;
  int sync_ok = pthread_condattr_init(&ca) == 0;
  sync_ok = sync_ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
            pthread_cond_init(&run->cv, &ca) == 0;
  if (sync_ok && pthread_mutex_init(&run->mu, NULL) != 0) {
    pthread_cond_destroy(&run->cv);
    sync_ok = 0;
  }
  pthread_condattr_destroy(&ca);
  if (!wa || !th || !run->latency_ms || !sync_ok) {
    fprintf(stderr, "onednn_serving: out of memory or thread resources\n");
    if (sync_ok) {
      pthread_cond_destroy(&run->cv);
      pthread_mutex_destroy(&run->mu);
    }
    free(run->latency_ms);
    free(th);
    free(wa);
    return -1;
  }
  run->workers = wa;
  run->n_workers = nt;
  run->running = nt;
  run->start_ns = now_ns();
  int started = 0;
  for (; started < nt; started++) {
    wa[started].run = run;
    prims_worker_init(&wa[started].w);
    if (pthread_create(&th[started], NULL, serving_thread, &wa[started]) != 0) {
      fprintf(stderr, "onednn_serving: pthread_create failed\n");
      atomic_store(&run->failed, 1);
      pthread_mutex_lock(&run->mu);
      run->running -= nt - started;
      pthread_mutex_unlock(&run->mu);
      rc = -1;
      break;
    }
  }
  wait_serving(run);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  res->wall_ms = (double)(now_ns() - run->start_ns) / 1e6;
  progress(run, 1);
  if (atomic_load(&run->failed)) rc = -1;
  for (int i = 0; rc == 0 && i < nt; i++) {
    const prim_worker *w = &wa[i].w;
    res->prim_requests += w->requests;
    res->acquire_ms += (double)w->acquire_ns / 1e6;
    res->compile_ms += (double)w->compile_ns / 1e6;
    res->exec_ms += (double)w->exec_ns / 1e6;
    res->tl_hits += w->tl_hits;
    res->tl_misses += w->tl_misses;
    res->tl_clears += w->tl_clears;
    res->tl_entries_cleared += w->tl_entries_cleared;
    res->fetch_hits += w->fetch_hits;
    res->key_ms += (double)w->key_ns / 1e6;
    if (wa[i].scratch_bytes > res->scratch_bytes_max) res->scratch_bytes_max = wa[i].scratch_bytes;
  }
  if (rc == 0) {
    qsort(run->latency_ms, n_lat, sizeof *run->latency_ms, cmp_double);
    res->p50_ms = percentile(run->latency_ms, n_lat, 0.50);
    res->p99_ms = percentile(run->latency_ms, n_lat, 0.99);
  }
  pthread_cond_destroy(&run->cv);
  pthread_mutex_destroy(&run->mu);
  run->workers = NULL;
  free(run->latency_ms);
  free(th);
  free(wa);
  return rc;
}
