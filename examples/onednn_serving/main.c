/* main.c: command line, serving threads, the four modes, the agreement
 * check and --check.
 *
 * One request stream is served four times in one process: without any
 * primitive cache, with oneDNN's own primitive cache, through ccache, and
 * with an RLX-style table per serving thread.  The final logits of every
 * request must agree bit for bit across modes; if they do not, the program
 * names the request and modes and exits 1. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ccache.h>

#include "forward.h"
#include "model.h"
#include "prims.h"
#include "report.h"
#include "requests.h"

#ifndef ONEDNN_SERVING_CONFIG
#define ONEDNN_SERVING_CONFIG "smollm2-135m-config.json"
#endif

#define N_MODES PRIM_N_MODES

/* The --layers range, stated the same way by --help and by the error. */
#define LAYERS_RANGE "1..L, L = num_hidden_layers in the config (30 for SmolLM2-135M)"

/* Progress: redrawn in place this often on a terminal, else one line on
 * stderr this often (both within the 2 s). */
#define PROGRESS_TTY_NS  500000000u
#define PROGRESS_LINE_NS 1500000000u

typedef struct options {
  int requests, decode, threads, layers, json, check, runtime_dims, strong_keys;
  uint64_t seed, max_items, ttl_ms, max_cost;
  const char *config;
} options;

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
/* Command line.                                                           */

static void usage(FILE *f) {
  fprintf(f,
          "usage: onednn_serving [options]\n"
          "Serve a deterministic request stream through SmolLM2-135M's decoder (random\n"
          "weights) with oneDNN primitives, four times: no primitive cache, oneDNN's\n"
          "primitive cache, ccache, and an RLX-style table per serving thread.  Prints a\n"
          "comparison table.  Exits 1 if the modes' final logits disagree, 2 on a bad\n"
          "option or config.\n\n"
          "  --requests N     requests in the stream, 1..100000 (default 8)\n"
          "  --decode N       decode steps per request, 0..1024 (default 16)\n"
          "  --seed N         seed for weights and requests (default 1)\n"
          "  --threads N      serving threads sharing one cache, 1..64 (default 2); the cores\n"
          "                   are divided among them for oneDNN's OpenMP threads\n"
          "  --layers N       decoder layers, " LAYERS_RANGE
          "\n"
          "                   (default L)\n"
          "  --max-items N    ccache bound on closure entries (default unbounded)\n"
          "  --ttl-ms N       ccache time to live in ms (default unbounded)\n"
          "  --max-cost N     ccache bound on program cost in bytes (default unbounded)\n"
          "  --runtime-dims   attention matmuls take the context length at run time\n"
          "  --strong-keys    ccache keys are BLAKE2b-256 (ccache_fp_init_strong, a\n"
          "                   CCACHE_KEYS_STRONG cache) instead of XXH3-128: for graphs\n"
          "                   from parties you do not trust\n"
          "  --config PATH    model config.json (default the source tree's copy)\n"
          "  --json           machine-readable output\n"
          "  --check          also verify the cache accounting; exit 1 if a check fails\n"
          "  --help           this text\n");
}

/* A decimal integer in [lo, hi], nothing else. */
static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  if (!s || *s < '0' || *s > '9') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.requests = 8,
                 .decode = 16,
                 .threads = 2,
                 .layers = 0,
                 .seed = 1,
                 .max_items = CCACHE_UNBOUNDED,
                 .ttl_ms = CCACHE_UNBOUNDED,
                 .max_cost = CCACHE_UNBOUNDED,
                 .config = ONEDNN_SERVING_CONFIG};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t v;
    struct {
      const char *name;
      uint64_t lo, hi;
      int *i32;
      uint64_t *u64;
      const char *range; /* stated instead of [lo, hi] */
    } nums[] = {
        {"--requests", 1, 100000, &o->requests, NULL, NULL},
        {"--decode", 0, 1024, &o->decode, NULL, NULL},
        {"--threads", 1, 64, &o->threads, NULL, NULL},
        /* The upper end is the config's layer count, checked once it is read. */
        {"--layers", 1, INT_MAX, &o->layers, NULL, LAYERS_RANGE},
        {"--seed", 0, UINT64_MAX, NULL, &o->seed, NULL},
        {"--max-items", 1, UINT64_MAX - 1, NULL, &o->max_items, NULL},
        {"--ttl-ms", 1, UINT64_MAX - 1, NULL, &o->ttl_ms, NULL},
        {"--max-cost", 1, UINT64_MAX - 1, NULL, &o->max_cost, NULL},
    };
    int matched = 0;
    for (size_t k = 0; k < sizeof nums / sizeof nums[0] && !matched; k++) {
      if (strcmp(a, nums[k].name) != 0) continue;
      matched = 1;
      if (parse_u64(val, nums[k].lo, nums[k].hi, &v) != 0) {
        if (nums[k].range)
          fprintf(stderr, "onednn_serving: %s needs an integer in %s\n", a, nums[k].range);
        else
          fprintf(stderr, "onednn_serving: %s needs an integer in [%" PRIu64 ", %" PRIu64 "]\n", a,
                  nums[k].lo, nums[k].hi);
        return -1;
      }
      if (nums[k].i32) *nums[k].i32 = (int)v;
      if (nums[k].u64) *nums[k].u64 = v;
      i++;
    }
    if (matched) continue;
    if (strcmp(a, "--json") == 0) {
      o->json = 1;
    } else if (strcmp(a, "--check") == 0) {
      o->check = 1;
    } else if (strcmp(a, "--strong-keys") == 0) {
      o->strong_keys = 1;
    } else if (strcmp(a, "--runtime-dims") == 0) {
      o->runtime_dims = 1;
    } else if (strcmp(a, "--config") == 0 && val) {
      o->config = val;
      i++;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    } else {
      fprintf(stderr, "onednn_serving: unknown or incomplete option '%s'\n", a);
      return -1;
    }
  }
  return 0;
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
static int serve_all(mode_run *run, mode_result *res) {
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

static const char *mode_name(acquire_mode m) {
  switch (m) {
    case MODE_NO_CACHE:
      return "no-cache";
    case MODE_ONEDNN_CACHE:
      return "onednn-cache";
    case MODE_CCACHE:
      return "ccache";
    default:
      return "rlx-per-thread";
  }
}

static int open_cache(const app *a, prim_ctx *ctx) {
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.max_items = a->opt.max_items;
  cfg.ttl_ms = a->opt.ttl_ms;
  cfg.max_cost_bytes = a->opt.max_cost;
  cfg.destroy_closure = prims_destroy_closure;
  cfg.destroy_program = prims_destroy_program;
  cfg.ctx = ctx;
  cfg.on_event = prims_on_event; /* counts compiles per program */
  cfg.event_ctx = ctx;
  cfg.key_mode = a->opt.strong_keys ? CCACHE_KEYS_STRONG : CCACHE_KEYS_FAST;
  ctx->strong_keys = a->opt.strong_keys;
  int st = ccache_open(&cfg, &ctx->cache);
  if (st != CCACHE_OK) fprintf(stderr, "onednn_serving: ccache_open: %s\n", ccache_strerror(st));
  return st == CCACHE_OK ? 0 : -1;
}

/* Take ccache's view before closing it; closing destroys what is left. */
static int close_cache(prim_ctx *ctx, mode_result *res) {
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(ctx->cache, &st);
  res->have_cache_stats = 1;
  res->compiles = st.program_compiles;
  res->hits = st.hits;
  res->misses = st.misses;
  res->closure_compiles = st.compiles;
  res->program_hits = st.program_hits;
  res->programs_end = st.programs;
  res->items_end = st.items;
  res->ev_capacity = st.evicted_capacity;
  res->ev_ttl = st.evicted_ttl;
  res->ev_cost = st.evicted_cost;
  res->waits = st.waits + st.program_waits; /* both levels */
  prims_compile_counts(ctx, &res->event_compiles, &res->programs_recompiled,
                       &res->most_compiles_of_one);
  res->closure_waits = st.waits;
  int rc = ccache_close(ctx->cache);
  if (rc != CCACHE_OK) {
    fprintf(stderr, "onednn_serving: ccache_close: %s\n", ccache_strerror(rc));
    return -1;
  }
  ctx->cache = NULL;
  return 0;
}

/* What the program and closure callbacks counted, read after the mode ends
 * (the cache closed, every worker's table destroyed). */
typedef struct accounting {
  uint64_t created, destroyed, bad, closures_created, closures_destroyed;
} accounting;

static int run_mode(app *a, acquire_mode mode, mode_result *res, accounting *acc) {
  prim_ctx ctx;
  mode_run run = {.app = a,
                  .ctx = &ctx,
                  .name = mode_name(mode),
                  .index = (int)mode,
                  .checksums = res->checksums};
  res->mode = mode;
  res->name = run.name;
  res->requests = (uint64_t)a->rs.n;
  res->tokens = requests_tokens(&a->rs);
  res->generated = (uint64_t)a->rs.n * (uint64_t)(a->opt.decode + 1);
  /* oneDNN's primitive cache is global: on only for mode 2. */
  if (dnnl_set_primitive_cache_capacity(mode == MODE_ONEDNN_CACHE ? 1024 : 0) != dnnl_success) {
    fprintf(stderr, "onednn_serving: dnnl_set_primitive_cache_capacity failed\n");
    return -1;
  }
  if (prims_init(&ctx, mode, a->engine) != 0) return -1;
  int rc = mode == MODE_CCACHE ? open_cache(a, &ctx) : 0;
  if (rc == 0) rc = serve_all(&run, res);
  if (ctx.cache && close_cache(&ctx, res) != 0) rc = -1;
  res->distinct_programs = ctx.n_keys;
  res->programs_peak = atomic_load(&ctx.programs_peak);
  if (mode == MODE_NO_CACHE) {
    res->compiles = res->prim_requests;
  } else if (mode == MODE_ONEDNN_CACHE) {
    res->estimated = 1;
    res->compiles = ctx.n_keys;
    res->hits = res->prim_requests - ctx.n_keys;
  } else if (mode == MODE_PER_THREAD) {
    res->have_tl_stats = 1;
    res->compiles = res->tl_misses;
    res->hits = res->tl_hits;
    res->misses = res->tl_misses;
  }
  /* Mode 1 has no lookup: every request creates.  The others' lookup time
   * is what getting a primitive cost, miss paths excluded. */
  res->have_lookup = mode != MODE_NO_CACHE;
  res->lookup_ms = res->have_lookup ? res->acquire_ms - res->compile_ms : 0.0;
  /* The requests whose getting is lookup time: ccache's fetch hits (a fetch
   * miss is booked as compile time even when it found a shared program),
   * the other modes' hits. */
  res->lookups = mode == MODE_CCACHE ? res->fetch_hits : res->hits;
  res->have_key_ms = mode == MODE_CCACHE && a->opt.strong_keys;
  *acc = (accounting){atomic_load(&ctx.programs_created), atomic_load(&ctx.programs_destroyed),
                      atomic_load(&ctx.bad_destroys), atomic_load(&ctx.closures_created),
                      atomic_load(&ctx.closures_destroyed)};
  prims_fini(&ctx);
  return rc;
}

/* ---------------------------------------------------------------------- */
/* Agreement: every mode's final logits equal mode 1's, request by request. */

/* @return 1 if every request's checksum agrees across modes; else 0, and
 * each disagreeing request and mode is named on @p f (if not NULL). */
static int checksums_agree(const app *a, const mode_result *r, FILE *f) {
  int agree = 1;
  for (int q = 0; q < a->rs.n; q++)
    for (int i = 1; i < N_MODES; i++)
      if (r[i].checksums[q] != r[0].checksums[q]) {
        if (f)
          fprintf(f,
                  "onednn_serving: MISMATCH: request %d: final logits of mode %s (%016" PRIx64
                  ") differ from mode %s (%016" PRIx64 ")\n",
                  q, r[i].name, r[i].checksums[q], r[0].name, r[0].checksums[q]);
        agree = 0;
      }
  return agree;
}

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

static int run_checks(const app *a, const mode_result *r, const accounting *accs, int agree) {
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

/* ---------------------------------------------------------------------- */

/* @return 0; 2 for a bad config or --layers (usage error); -1 otherwise. */
static int setup(app *a, char *err, size_t errlen) {
  model_config cfg;
  if (model_config_load(a->opt.config, &cfg, err, errlen) != 0) return 2;
  if (a->opt.layers == 0) a->opt.layers = cfg.layers;
  if (a->opt.layers > cfg.layers) {
    snprintf(err, errlen, "--layers needs an integer in %s; %s has L = %d", LAYERS_RANGE,
             a->opt.config, cfg.layers);
    return 2;
  }
  int cap = REQUESTS_MAX_PROMPT + a->opt.decode;
  if (model_init(&a->mdl, &cfg, a->opt.layers, a->opt.seed) != 0 ||
      forward_tables_init(&a->tab, &cfg, cap) != 0 ||
      requests_make(&a->rs, a->opt.requests, a->opt.decode, cfg.vocab, a->opt.seed) != 0) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (dnnl_engine_create(&a->engine, dnnl_cpu, 0) != dnnl_success) {
    snprintf(err, errlen, "dnnl_engine_create failed");
    return -1;
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  a->omp_threads = cores > a->opt.threads ? (int)(cores / a->opt.threads) : 1;
  a->progress_tty = isatty(2);
  return 0;
}

static void teardown(app *a) {
  if (a->engine) dnnl_engine_destroy(a->engine);
  requests_free(&a->rs);
  forward_tables_free(&a->tab);
  model_free(&a->mdl);
}

int main(int argc, char **argv) {
  static app a; /* zeroed: teardown is safe after any setup failure */
  if (parse_args(argc, argv, &a.opt) != 0) {
    usage(stderr);
    return 2;
  }
  char err[512] = "";
  int rc = setup(&a, err, sizeof err);
  if (rc != 0) {
    fprintf(stderr, "onednn_serving: %s\n", err);
    if (rc == 2) usage(stderr);
    teardown(&a);
    return rc == 2 ? 2 : 1;
  }
  mode_result res[N_MODES];
  accounting acc[N_MODES];
  memset(res, 0, sizeof res);
  memset(acc, 0, sizeof acc);
  for (int i = 0; i < N_MODES && rc == 0; i++) {
    res[i].checksums = calloc((size_t)a.rs.n, sizeof *res[i].checksums);
    rc = res[i].checksums ? run_mode(&a, (acquire_mode)(i + 1), &res[i], &acc[i]) : -1;
  }
  if (rc == 0) {
    int agree = checksums_agree(&a, res, NULL);
    run_info ri = {.layers = a.opt.layers,
                   .requests = a.opt.requests,
                   .decode = a.opt.decode,
                   .threads = a.opt.threads,
                   .omp_threads = a.omp_threads,
                   .runtime_dims = a.opt.runtime_dims,
                   .strong_keys = a.opt.strong_keys,
                   .seed = a.opt.seed,
                   .max_items = a.opt.max_items,
                   .ttl_ms = a.opt.ttl_ms,
                   .max_cost = a.opt.max_cost,
                   .checksums_agree = agree};
    if (a.opt.json)
      report_json(stdout, &ri, res, N_MODES);
    else
      report_table(stdout, &ri, res, N_MODES);
    fflush(stdout);
    if (a.opt.check && run_checks(&a, res, acc, agree) != 0) rc = 1;
    if (!agree) {
      checksums_agree(&a, res, stderr);
      fprintf(stderr, "onednn_serving: the modes' final logits disagree: exit 1\n");
      rc = 1;
    }
  }
  for (int i = 0; i < N_MODES; i++) free(res[i].checksums);
  teardown(&a);
  return rc == 0 ? 0 : 1;
}
