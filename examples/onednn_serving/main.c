/* main.c: the four modes and the agreement check; the command line is in
 * options.c, the serving loop in serve.c, --check in checks.c and the
 * printed report in report.c.
 *
 * One request stream is served four times in one process: without any
 * primitive cache, with oneDNN's own primitive cache, through ccache, and
 * with an RLX-style table per serving thread.  The final logits of every
 * request must agree bit for bit across modes; if they do not, the program
 * names the request and modes and exits 1. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ccache.h>

#include "checks.h"
#include "forward.h"
#include "model.h"
#include "options.h"
#include "prims.h"
#include "report.h"
#include "requests.h"
#include "serve.h"

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
