/* serve.h: the serving loop (serve.c): one mode's run of the request
 * stream on the serving threads, with progress on stderr. */
#ifndef ONEDNN_SERVING_SERVE_H
#define ONEDNN_SERVING_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "forward.h"
#include "model.h"
#include "options.h"
#include "prims.h"
#include "report.h"
#include "requests.h"

#define N_MODES PRIM_N_MODES

/* Everything a serving thread reads (shared) or writes (own slots). */
typedef struct app {
  options opt;
  model mdl;
  forward_tables tab;
  request_stream rs;
  dnnl_engine_t engine;
  int omp_threads;
  int progress_tty;
} app;

typedef struct worker_arg worker_arg;

typedef struct mode_run {
  const app *app;
  prim_ctx *ctx;
  const char *name;
  int index; /* 1..N_MODES, for the progress line */
  atomic_int next, done, failed;
  atomic_uint_fast64_t tokens_done;
  uint64_t start_ns;
  double *latency_ms; /* [request][1 + decode] */
  uint64_t *checksums;
  worker_arg *workers;
  int n_workers;
  /* Serving threads still running; the main thread waits on cv for it. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int running;
} mode_run;

/* Run the stream on opt.threads threads; fill the timing part of @p res. */
int serve_all(mode_run *run, mode_result *res);

#endif
