/* report.c: formatting only; every number is computed by main.c. */
#include "report.h"

#include <inttypes.h>

#include <ccache.h>

static void bound(char *buf, size_t n, uint64_t v) {
  if (v == CCACHE_UNBOUNDED)
    snprintf(buf, n, "unbounded");
  else
    snprintf(buf, n, "%" PRIu64, v);
}

static double per_request_us(const mode_result *r) {
  return r->prim_requests ? r->acquire_ms * 1000.0 / (double)r->prim_requests : 0.0;
}

/* Acquire time in mode 2 over mode 3: how much more oneDNN's own cache costs
 * per primitive request than ccache (> 1: ccache is cheaper). */
static double lookup_ratio(const mode_result *r, int n) {
  const mode_result *m2 = NULL, *m3 = NULL;
  for (int i = 0; i < n; i++) {
    if (r[i].mode == MODE_ONEDNN_CACHE) m2 = &r[i];
    if (r[i].mode == MODE_CCACHE) m3 = &r[i];
  }
  return m2 && m3 && m3->acquire_ms > 0 ? m2->acquire_ms / m3->acquire_ms : 0.0;
}

#define ROW_U64(label, field)                                            \
  do {                                                                   \
    fprintf(f, "%-34s", label);                                          \
    for (int i = 0; i < n; i++) fprintf(f, " %16" PRIu64, r[i].field);   \
    fputc('\n', f);                                                      \
  } while (0)

#define ROW_DBL(label, fmt, expr)                             \
  do {                                                        \
    fprintf(f, "%-34s", label);                               \
    for (int i = 0; i < n; i++) fprintf(f, " %16" fmt, expr); \
    fputc('\n', f);                                           \
  } while (0)

/* A row only ccache has: "-" for the other modes. */
#define ROW_CACHE(label, field)                                              \
  do {                                                                       \
    fprintf(f, "%-34s", label);                                              \
    for (int i = 0; i < n; i++)                                              \
      if (r[i].have_cache_stats)                                             \
        fprintf(f, " %16" PRIu64, r[i].field);                               \
      else                                                                   \
        fprintf(f, " %16s", "-");                                            \
    fputc('\n', f);                                                          \
  } while (0)

void report_table(FILE *f, const run_info *ri, const mode_result *r, int n) {
  char items[24], ttl[24], cost[24];
  bound(items, sizeof items, ri->max_items);
  bound(ttl, sizeof ttl, ri->ttl_ms);
  bound(cost, sizeof cost, ri->max_cost);
  fprintf(f,
          "SmolLM2-135M decoder, %d layer(s), %d request(s) x %d decode step(s), seed %" PRIu64
          ", %d serving thread(s) x %d OpenMP thread(s)%s\n",
          ri->layers, ri->requests, ri->decode, ri->seed, ri->threads, ri->omp_threads,
          ri->runtime_dims ? ", runtime dims for attention" : "");
  fprintf(f, "ccache bounds: max-items %s, ttl-ms %s, max-cost %s\n\n", items, ttl, cost);
  fprintf(f, "%-34s", "");
  for (int i = 0; i < n; i++) fprintf(f, " %16s", r[i].name);
  fputc('\n', f);
  ROW_U64("requests", requests);
  ROW_U64("tokens (prompt + decode)", tokens);
  ROW_U64("primitive requests", prim_requests);
  fprintf(f, "%-34s", "compiles (primitives created)");
  for (int i = 0; i < n; i++) fprintf(f, " %15" PRIu64 "%s", r[i].compiles, r[i].estimated ? "~" : " ");
  fputc('\n', f);
  fprintf(f, "%-34s", "hits");
  for (int i = 0; i < n; i++) fprintf(f, " %15" PRIu64 "%s", r[i].hits, r[i].estimated ? "~" : " ");
  fputc('\n', f);
  ROW_U64("distinct program keys", distinct_programs);
  ROW_CACHE("closure compiles (call sites)", closure_compiles);
  ROW_CACHE("program hits (shared by layers)", program_hits);
  ROW_CACHE("programs alive at end", programs_end);
  ROW_CACHE("programs alive at peak", programs_peak);
  ROW_CACHE("closure entries at end", items_end);
  ROW_CACHE("evictions: capacity", ev_capacity);
  ROW_CACHE("evictions: ttl", ev_ttl);
  ROW_CACHE("evictions: cost", ev_cost);
  ROW_DBL("create/lookup time (ms)", ".1f", r[i].acquire_ms);
  ROW_DBL("  of which creating (ms)", ".1f", r[i].compile_ms);
  ROW_DBL("  per primitive request (us)", ".2f", per_request_us(&r[i]));
  ROW_DBL("execution time (ms)", ".1f", r[i].exec_ms);
  ROW_DBL("wall time (ms)", ".1f", r[i].wall_ms);
  ROW_DBL("per-token latency p50 (ms)", ".2f", r[i].p50_ms);
  ROW_DBL("per-token latency p99 (ms)", ".2f", r[i].p99_ms);
  fprintf(f, "\nlookup overhead, oneDNN cache / ccache: %.2fx\n", lookup_ratio(r, n));
  fprintf(f, "~ = inferred: oneDNN's cache has no hit counter; compiles = distinct keys (<= capacity 1024)\n");
  fprintf(f, "\nfinal-logits checksum per request:\n");
  for (int q = 0; q < ri->requests; q++) {
    int same = 1;
    fprintf(f, "  request %3d:", q);
    for (int i = 0; i < n; i++) {
      fprintf(f, " %016" PRIx64, r[i].checksums[q]);
      same &= r[i].checksums[q] == r[0].checksums[q];
    }
    fprintf(f, "  %s\n", same ? "match" : "MISMATCH");
  }
}

void report_json(FILE *f, const run_info *ri, const mode_result *r, int n) {
  fprintf(f,
          "{\n  \"model\": \"SmolLM2-135M\", \"layers\": %d, \"requests\": %d, \"decode\": %d, "
          "\"seed\": %" PRIu64 ", \"threads\": %d, \"omp_threads\": %d, \"runtime_dims\": %s,\n",
          ri->layers, ri->requests, ri->decode, ri->seed, ri->threads, ri->omp_threads,
          ri->runtime_dims ? "true" : "false");
  /* Unbounded is null in JSON: UINT64_MAX does not survive doubles. */
  fprintf(f, "  \"bounds\": {");
  const char *names[] = {"max_items", "ttl_ms", "max_cost_bytes"};
  uint64_t vals[] = {ri->max_items, ri->ttl_ms, ri->max_cost};
  for (int i = 0; i < 3; i++) {
    fprintf(f, "%s\"%s\": ", i ? ", " : "", names[i]);
    if (vals[i] == CCACHE_UNBOUNDED)
      fprintf(f, "null");
    else
      fprintf(f, "%" PRIu64, vals[i]);
  }
  fprintf(f, "},\n  \"lookup_overhead_ratio_onednn_over_ccache\": %.4f,\n  \"modes\": [\n",
          lookup_ratio(r, n));
  for (int i = 0; i < n; i++) {
    const mode_result *m = &r[i];
    fprintf(f,
            "    {\"mode\": %d, \"name\": \"%s\", \"requests\": %" PRIu64 ", \"tokens\": %" PRIu64
            ", \"generated\": %" PRIu64 ", \"primitive_requests\": %" PRIu64
            ", \"compiles\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"estimated\": %s"
            ", \"distinct_program_keys\": %" PRIu64,
            (int)m->mode, m->name, m->requests, m->tokens, m->generated, m->prim_requests,
            m->compiles, m->hits, m->estimated ? "true" : "false", m->distinct_programs);
    if (m->have_cache_stats)
      fprintf(f,
              ",\n     \"closure_compiles\": %" PRIu64 ", \"program_hits\": %" PRIu64
              ", \"programs_alive_end\": %" PRIu64 ", \"programs_alive_peak\": %" PRIu64
              ", \"items_end\": %" PRIu64 ", \"evicted_capacity\": %" PRIu64
              ", \"evicted_ttl\": %" PRIu64 ", \"evicted_cost\": %" PRIu64,
              m->closure_compiles, m->program_hits, m->programs_end, m->programs_peak, m->items_end,
              m->ev_capacity, m->ev_ttl, m->ev_cost);
    fprintf(f,
            ",\n     \"acquire_ms\": %.3f, \"compile_ms\": %.3f, \"exec_ms\": %.3f, \"wall_ms\": %.3f"
            ", \"token_latency_p50_ms\": %.3f, \"token_latency_p99_ms\": %.3f,\n     \"checksums\": [",
            m->acquire_ms, m->compile_ms, m->exec_ms, m->wall_ms, m->p50_ms, m->p99_ms);
    for (int q = 0; q < ri->requests; q++) fprintf(f, "%s\"%016" PRIx64 "\"", q ? ", " : "", m->checksums[q]);
    fprintf(f, "]}%s\n", i + 1 < n ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
}
