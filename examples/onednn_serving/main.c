/* main.c: command line, serving threads, the three modes, and --check.
 *
 * One request stream is served three times in one process: without any
 * primitive cache, with oneDNN's own primitive cache, and through ccache.
 * The final logits of every request must agree bit for bit across modes. */
#include <errno.h>
#include <inttypes.h>
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

#define N_MODES 3

typedef struct options {
  int requests, decode, threads, layers, json, check, runtime_dims;
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

typedef struct mode_run {
  const app *app;
  prim_ctx *ctx;
  const char *name;
  int index; /* 1..3, for the progress line */
  atomic_int next, done, failed;
  uint64_t start_ns;
  double *latency_ms; /* [request][1 + decode] */
  uint64_t *checksums;
} mode_run;

typedef struct worker_arg {
  mode_run *run;
  prim_worker w;
} worker_arg;

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
          "weights) with oneDNN primitives, three times: no primitive cache, oneDNN's\n"
          "primitive cache, ccache.  Prints a comparison table.\n\n"
          "  --requests N     requests in the stream (default 8)\n"
          "  --decode N       decode steps per request (default 16)\n"
          "  --seed N         seed for weights and requests (default 1)\n"
          "  --threads N      serving threads sharing one cache (default 2); the cores are\n"
          "                   divided among them for oneDNN's OpenMP threads\n"
          "  --layers N       decoder layers, 1..30 (default 30)\n"
          "  --max-items N    ccache bound on closure entries (default unbounded)\n"
          "  --ttl-ms N       ccache time to live in ms (default unbounded)\n"
          "  --max-cost N     ccache bound on program cost in bytes (default unbounded)\n"
          "  --runtime-dims   attention matmuls take the context length at run time\n"
          "  --config PATH    model config.json (default the source tree's copy)\n"
          "  --json           machine-readable output\n"
          "  --check          verify the smoke-test assertions; exit 1 if one fails\n"
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
  *o = (options){.requests = 8, .decode = 16, .threads = 2, .layers = 30, .seed = 1,
                 .max_items = CCACHE_UNBOUNDED, .ttl_ms = CCACHE_UNBOUNDED,
                 .max_cost = CCACHE_UNBOUNDED, .config = ONEDNN_SERVING_CONFIG};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t v;
    struct {
      const char *name;
      uint64_t lo, hi;
      int *i32;
      uint64_t *u64;
    } nums[] = {
        {"--requests", 1, 100000, &o->requests, NULL}, {"--decode", 0, 1024, &o->decode, NULL},
        {"--threads", 1, 64, &o->threads, NULL},       {"--layers", 1, 1000, &o->layers, NULL},
        {"--seed", 0, UINT64_MAX, NULL, &o->seed},
        {"--max-items", 1, UINT64_MAX - 1, NULL, &o->max_items},
        {"--ttl-ms", 1, UINT64_MAX - 1, NULL, &o->ttl_ms},
        {"--max-cost", 1, UINT64_MAX - 1, NULL, &o->max_cost},
    };
    int matched = 0;
    for (size_t k = 0; k < sizeof nums / sizeof nums[0] && !matched; k++) {
      if (strcmp(a, nums[k].name) != 0) continue;
      matched = 1;
      if (parse_u64(val, nums[k].lo, nums[k].hi, &v) != 0) {
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
/* Serving.                                                                */

static uint64_t logits_checksum(const float *logits, int vocab) {
  ccache_fp fp;
  ccache_key k = {0, 0};
  ccache_fp_init(&fp);
  ccache_fp_bytes(&fp, logits, (size_t)vocab * sizeof *logits);
  ccache_fp_final(&fp, &k);
  return k.lo;
}

static void progress(mode_run *run, int done) {
  const app *a = run->app;
  double s = (double)(now_ns() - run->start_ns) / 1e9;
  if (a->progress_tty || done == a->rs.n)
    fprintf(stderr, "%s[mode %d/3 %-13s] %d/%d requests, %.1f s%s", a->progress_tty ? "\r" : "",
            run->index, run->name, done, a->rs.n, s, done == a->rs.n ? "\n" : "");
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
  for (int d = 0; d < r->decode; d++) {
    int32_t tok = forward_argmax(s->logits, a->mdl.cfg.vocab);
    t0 = now_ns();
    if (forward_step(&a->mdl, &a->tab, &fo, run->ctx, w, s, &tok, 1) != 0) return -1;
    lat[d + 1] = (double)(now_ns() - t0) / 1e6;
  }
  run->checksums[r->id] = logits_checksum(s->logits, a->mdl.cfg.vocab);
  return 0;
}

static void *serving_thread(void *p) {
  worker_arg *wa = p;
  mode_run *run = wa->run;
  const app *a = run->app;
  sequence seq;
  /* This thread's share of the cores for oneDNN's OpenMP regions (the ICV is
   * per thread, so each serving thread sets its own). */
  omp_set_num_threads(a->omp_threads);
  wa->w.omp_threads = a->omp_threads;
  if (dnnl_stream_create(&wa->w.stream, a->engine, dnnl_stream_default_flags) != dnnl_success) {
    fprintf(stderr, "onednn_serving: dnnl_stream_create failed\n");
    atomic_store(&run->failed, 1);
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
      progress(run, atomic_fetch_add(&run->done, 1) + 1);
    }
    sequence_free(&seq);
  }
  if (dnnl_stream_destroy(wa->w.stream) != dnnl_success) atomic_store(&run->failed, 1);
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

/* Run the stream on opt.threads threads; fill the timing part of @p res. */
static int serve_all(mode_run *run, mode_result *res) {
  const app *a = run->app;
  int nt = a->opt.threads, rc = 0;
  worker_arg *wa = calloc((size_t)nt, sizeof *wa);
  pthread_t *th = calloc((size_t)nt, sizeof *th);
  size_t n_lat = (size_t)a->rs.n * (size_t)(a->opt.decode + 1);
  run->latency_ms = calloc(n_lat, sizeof *run->latency_ms);
  if (!wa || !th || !run->latency_ms) rc = -1;
  run->start_ns = now_ns();
  int started = 0;
  for (; rc == 0 && started < nt; started++) {
    wa[started].run = run;
    if (pthread_create(&th[started], NULL, serving_thread, &wa[started]) != 0) {
      atomic_store(&run->failed, 1);
      rc = -1;
    }
  }
  for (int i = 0; i < started - (rc != 0); i++) pthread_join(th[i], NULL);
  res->wall_ms = (double)(now_ns() - run->start_ns) / 1e6;
  if (atomic_load(&run->failed)) rc = -1;
  for (int i = 0; rc == 0 && i < nt; i++) {
    res->prim_requests += wa[i].w.requests;
    res->acquire_ms += (double)wa[i].w.acquire_ns / 1e6;
    res->compile_ms += (double)wa[i].w.compile_ns / 1e6;
    res->exec_ms += (double)wa[i].w.exec_ns / 1e6;
  }
  if (rc == 0) {
    qsort(run->latency_ms, n_lat, sizeof *run->latency_ms, cmp_double);
    res->p50_ms = percentile(run->latency_ms, n_lat, 0.50);
    res->p99_ms = percentile(run->latency_ms, n_lat, 0.99);
  }
  free(run->latency_ms);
  free(th);
  free(wa);
  return rc;
}

static const char *mode_name(acquire_mode m) {
  return m == MODE_NO_CACHE ? "no-cache" : m == MODE_ONEDNN_CACHE ? "onednn-cache" : "ccache";
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
  res->closure_compiles = st.compiles;
  res->program_hits = st.program_hits;
  res->programs_end = st.programs;
  res->items_end = st.items;
  res->ev_capacity = st.evicted_capacity;
  res->ev_ttl = st.evicted_ttl;
  res->ev_cost = st.evicted_cost;
  int rc = ccache_close(ctx->cache);
  if (rc != CCACHE_OK) {
    fprintf(stderr, "onednn_serving: ccache_close: %s\n", ccache_strerror(rc));
    return -1;
  }
  ctx->cache = NULL;
  res->programs_peak = atomic_load(&ctx->programs_peak);
  return 0;
}

/* Mode 3's accounting, checked after the cache is closed. */
typedef struct accounting {
  uint64_t created, destroyed, bad, closures_created, closures_destroyed;
} accounting;

static int run_mode(app *a, acquire_mode mode, mode_result *res, accounting *acc) {
  prim_ctx ctx;
  mode_run run = {.app = a, .ctx = &ctx, .name = mode_name(mode), .index = (int)mode,
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
  if (mode == MODE_NO_CACHE) {
    res->compiles = res->prim_requests;
  } else if (mode == MODE_ONEDNN_CACHE) {
    res->estimated = 1;
    res->compiles = ctx.n_keys;
    res->hits = res->prim_requests - ctx.n_keys;
  }
  *acc = (accounting){atomic_load(&ctx.programs_created), atomic_load(&ctx.programs_destroyed),
                      atomic_load(&ctx.bad_destroys), atomic_load(&ctx.closures_created),
                      atomic_load(&ctx.closures_destroyed)};
  prims_fini(&ctx);
  return rc;
}

/* ---------------------------------------------------------------------- */
/* --check: the smoke-test assertions.                                     */

static int expect(int ok, const char *what) {
  fprintf(stderr, "check: %-66s %s\n", what, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

static int run_checks(const app *a, const mode_result *r, const accounting *acc) {
  const mode_result *cc = &r[N_MODES - 1];
  const options *o = &a->opt;
  int bad = 0, same = 1;
  char msg[160];
  for (int q = 0; q < a->rs.n; q++)
    for (int i = 1; i < N_MODES; i++) same &= r[i].checksums[q] == r[0].checksums[q];
  bad += expect(same, "final logits agree bit for bit across the three modes");
  bad += expect(cc->hits > 0, "ccache: hits > 0");
  if (o->max_items == CCACHE_UNBOUNDED && o->ttl_ms == CCACHE_UNBOUNDED && o->max_cost == CCACHE_UNBOUNDED) {
    snprintf(msg, sizeof msg, "ccache: program_compiles (%" PRIu64 ") == distinct program keys (%" PRIu64 ")",
             cc->compiles, cc->distinct_programs);
    bad += expect(cc->compiles == cc->distinct_programs, msg);
  } else {
    /* Evicted programs may be compiled again when asked for later. */
    snprintf(msg, sizeof msg, "ccache: program_compiles (%" PRIu64 ") >= distinct program keys (%" PRIu64 ")",
             cc->compiles, cc->distinct_programs);
    bad += expect(cc->compiles >= cc->distinct_programs, msg);
  }
  snprintf(msg, sizeof msg, "every program destroyed exactly once (%" PRIu64 " created, %" PRIu64 " destroyed)",
           acc->created, acc->destroyed);
  bad += expect(acc->created == cc->compiles && acc->destroyed == acc->created && acc->bad == 0, msg);
  snprintf(msg, sizeof msg, "every closure destroyed exactly once (%" PRIu64 " created, %" PRIu64 " destroyed)",
           acc->closures_created, acc->closures_destroyed);
  bad += expect(acc->closures_created == cc->closure_compiles &&
                    acc->closures_destroyed == acc->closures_created, msg);
  if (o->max_items != CCACHE_UNBOUNDED) {
    /* Entries <= max_items after every insert.  Beyond them, each serving
     * thread holds at most one lease or one freshly compiled program, plus
     * at most one evicted program whose destroy runs on it right after the
     * insert: peak <= max_items + 2 * threads. */
    uint64_t limit = o->max_items + 2u * (uint64_t)o->threads;
    snprintf(msg, sizeof msg, "programs alive at peak (%" PRIu64 ") <= max_items + 2 x threads (%" PRIu64 ")",
             cc->programs_peak, limit);
    bad += expect(cc->programs_peak <= limit, msg);
    snprintf(msg, sizeof msg, "closure entries at end (%" PRIu64 ") <= max_items", cc->items_end);
    bad += expect(cc->items_end <= o->max_items, msg);
    bad += expect(cc->ev_capacity > 0, "the bound evicted something (capacity evictions > 0)");
  }
  return bad;
}

/* ---------------------------------------------------------------------- */

static int setup(app *a, char *err, size_t errlen) {
  model_config cfg;
  if (model_config_load(a->opt.config, &cfg, err, errlen) != 0) return -1;
  if (a->opt.layers > cfg.layers) {
    snprintf(err, errlen, "--layers %d exceeds the model's %d layers", a->opt.layers, cfg.layers);
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
  char err[256] = "";
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
  for (int i = 0; i < N_MODES && rc == 0; i++) {
    res[i].checksums = calloc((size_t)a.rs.n, sizeof *res[i].checksums);
    rc = res[i].checksums ? run_mode(&a, (acquire_mode)(i + 1), &res[i], &acc[i]) : -1;
  }
  if (rc == 0) {
    run_info ri = {.layers = a.opt.layers, .requests = a.opt.requests, .decode = a.opt.decode,
                   .threads = a.opt.threads, .omp_threads = a.omp_threads,
                   .runtime_dims = a.opt.runtime_dims, .seed = a.opt.seed,
                   .max_items = a.opt.max_items, .ttl_ms = a.opt.ttl_ms, .max_cost = a.opt.max_cost};
    if (a.opt.json)
      report_json(stdout, &ri, res, N_MODES);
    else
      report_table(stdout, &ri, res, N_MODES);
    if (a.opt.check && run_checks(&a, res, &acc[N_MODES - 1]) != 0) rc = 1;
  }
  for (int i = 0; i < N_MODES; i++) free(res[i].checksums);
  teardown(&a);
  return rc == 0 ? 0 : 1;
}
