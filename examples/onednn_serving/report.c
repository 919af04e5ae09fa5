/* report.c: formatting only; every number is computed by main.c and serve.c. */
#include "report.h"

#include <inttypes.h>

#include <ccache.h>

static void bound(char *buf, size_t n, uint64_t v) {
  if (v == CCACHE_UNBOUNDED)
    snprintf(buf, n, "unbounded");
  else
    snprintf(buf, n, "%" PRIu64, v);
}

static const mode_result *find_mode(const mode_result *r, int n, acquire_mode m) {
  for (int i = 0; i < n; i++)
    if (r[i].mode == m) return &r[i];
  return NULL;
}

/* P7: per primitive request, lookup and execution in microseconds. */
static double lookup_us(const mode_result *r) {
  return r->prim_requests ? r->lookup_ms * 1000.0 / (double)r->prim_requests : 0.0;
}
static double exec_us(const mode_result *r) {
  return r->prim_requests ? r->exec_ms * 1000.0 / (double)r->prim_requests : 0.0;
}
/* Lookup over execution, in percent. */
static double lookup_pct(const mode_result *r) {
  return r->exec_ms > 0 ? 100.0 * r->lookup_ms / r->exec_ms : 0.0;
}

/* Per lookup actually done: lookup time over the requests it was spent on
 * (report.h, lookups).  Fairer across modes than per primitive request,
 * since the modes book different requests as compiles: ccache's fetch
 * misses that found a shared program are compile time, while oneDNN's
 * cache counts the same requests as lookups. */
static int have_per_lookup(const mode_result *r) { return r->have_lookup && r->lookups > 0; }
static double per_lookup_us(const mode_result *r) {
  return have_per_lookup(r) ? r->lookup_ms * 1000.0 / (double)r->lookups : 0.0;
}
/* Per-lookup time over per-request execution, in percent. */
static double per_lookup_pct(const mode_result *r) {
  double e = exec_us(r);
  return e > 0 ? 100.0 * per_lookup_us(r) / e : 0.0;
}

/* Mode 2 over mode 3 (> 1: ccache is cheaper).  @return the ratio, or -1 if
 * either mode is absent or ccache's side is zero (no hits, or no time). */
static double lookup_ratio(const mode_result *r, int n) {
  const mode_result *m2 = find_mode(r, n, MODE_ONEDNN_CACHE), *m3 = find_mode(r, n, MODE_CCACHE);
  if (!m2 || !m3 || !have_per_lookup(m2) || !have_per_lookup(m3) || per_lookup_us(m3) <= 0)
    return -1.0;
  return per_lookup_us(m2) / per_lookup_us(m3);
}
static double acquire_ratio(const mode_result *r, int n) {
  const mode_result *m2 = find_mode(r, n, MODE_ONEDNN_CACHE), *m3 = find_mode(r, n, MODE_CCACHE);
  return m2 && m3 && m3->acquire_ms > 0 ? m2->acquire_ms / m3->acquire_ms : -1.0;
}

/* P7's goal, judged at one serving thread: ccache's lookup <= 1 % of its
 * execution, and below oneDNN's own cache's share in the same run.
 * @return 1 met, 0 missed, -1 not judged (more than one serving thread). */
static int p7_met(const run_info *ri, const mode_result *r, int n) {
  const mode_result *m2 = find_mode(r, n, MODE_ONEDNN_CACHE), *m3 = find_mode(r, n, MODE_CCACHE);
  if (ri->threads != 1 || !m2 || !m3) return -1;
  return lookup_pct(m3) <= 1.0 && lookup_pct(m3) < lookup_pct(m2);
}

#define LABEL_W 38

#define ROW_U64(label, field)                                          \
  do {                                                                 \
    fprintf(f, "%-*s", LABEL_W, label);                                \
    for (int i = 0; i < n; i++) fprintf(f, " %16" PRIu64, r[i].field); \
    fputc('\n', f);                                                    \
  } while (0)

#define ROW_DBL(label, fmt, expr)                             \
  do {                                                        \
    fprintf(f, "%-*s", LABEL_W, label);                       \
    for (int i = 0; i < n; i++) fprintf(f, " %16" fmt, expr); \
    fputc('\n', f);                                           \
  } while (0)

/* A row only some modes have: "-" for the others. */
#define ROW_IF(label, has, fmt, expr)   \
  do {                                  \
    fprintf(f, "%-*s", LABEL_W, label); \
    for (int i = 0; i < n; i++)         \
      if (has)                          \
        fprintf(f, " %16" fmt, expr);   \
      else                              \
        fprintf(f, " %16s", "-");       \
    fputc('\n', f);                     \
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
  fprintf(f,
          "ccache bounds: max-items %s, ttl-ms %s, max-cost %s; per-thread tables cleared at %d\n",
          items, ttl, cost, PER_THREAD_MAX_ENTRIES);
  /* Said only when not the default, so the default table is as before. */
  if (ri->strong_keys)
    fprintf(f, "ccache keys: strong (BLAKE2b-256, 256 bits compared on every match)\n");
  fputc('\n', f);
  fprintf(f, "%-*s", LABEL_W, "");
  for (int i = 0; i < n; i++) fprintf(f, " %16s", r[i].name);
  fputc('\n', f);
  ROW_U64("requests", requests);
  ROW_U64("tokens (prompt + decode)", tokens);
  ROW_U64("primitive requests", prim_requests);
  fprintf(f, "%-*s", LABEL_W, "compiles (primitives created)");
  for (int i = 0; i < n; i++)
    fprintf(f, " %15" PRIu64 "%s", r[i].compiles, r[i].estimated ? "~" : " ");
  fputc('\n', f);
  fprintf(f, "%-*s", LABEL_W, "hits");
  for (int i = 0; i < n; i++) fprintf(f, " %15" PRIu64 "%s", r[i].hits, r[i].estimated ? "~" : " ");
  fputc('\n', f);
  ROW_U64("distinct program keys", distinct_programs);
  ROW_IF("closure compiles (call sites)", r[i].have_cache_stats, PRIu64, r[i].closure_compiles);
  ROW_IF("program hits (shared by layers)", r[i].have_cache_stats, PRIu64, r[i].program_hits);
  ROW_IF("program compiles seen by event hook", r[i].have_cache_stats, PRIu64, r[i].event_compiles);
  ROW_IF("  programs compiled more than once", r[i].have_cache_stats, PRIu64,
         r[i].programs_recompiled);
  ROW_IF("  most compiles of one program", r[i].have_cache_stats, PRIu64,
         r[i].most_compiles_of_one);
  ROW_IF("programs alive at end", r[i].have_cache_stats, PRIu64, r[i].programs_end);
  ROW_IF("programs alive at peak", r[i].have_cache_stats || r[i].have_tl_stats, PRIu64,
         r[i].programs_peak);
  ROW_IF("closure entries at end", r[i].have_cache_stats, PRIu64, r[i].items_end);
  ROW_IF("single-flight waits", r[i].have_cache_stats, PRIu64, r[i].waits);
  ROW_IF("evictions: capacity", r[i].have_cache_stats, PRIu64, r[i].ev_capacity);
  ROW_IF("evictions: ttl", r[i].have_cache_stats, PRIu64, r[i].ev_ttl);
  ROW_IF("evictions: cost", r[i].have_cache_stats, PRIu64, r[i].ev_cost);
  ROW_IF("per-thread table clears", r[i].have_tl_stats, PRIu64, r[i].tl_clears);
  ROW_IF("  entries cleared", r[i].have_tl_stats, PRIu64, r[i].tl_entries_cleared);
  ROW_DBL("largest worker scratchpad (KiB)", PRIu64, (r[i].scratch_bytes_max + 1023) / 1024);
  ROW_DBL("create/lookup time (ms)", ".1f", r[i].acquire_ms);
  ROW_DBL("  of which compiles (ms)", ".1f", r[i].compile_ms);
  ROW_IF("  lookup: keys + lookups + releases (ms)", r[i].have_lookup, ".1f", r[i].lookup_ms);
  ROW_DBL("execution time (ms)", ".1f", r[i].exec_ms);
  ROW_IF("lookup per primitive request (us)", r[i].have_lookup, ".3f", lookup_us(&r[i]));
  ROW_DBL("execution per primitive request (us)", ".1f", exec_us(&r[i]));
  ROW_IF("lookup / execution (%)", r[i].have_lookup, ".3f", lookup_pct(&r[i]));
  ROW_IF("lookups (requests not compiling)", r[i].have_lookup, PRIu64, r[i].lookups);
  ROW_IF("lookup per lookup (us)", have_per_lookup(&r[i]), ".3f", per_lookup_us(&r[i]));
  ROW_IF("lookup per lookup / execution (%)", have_per_lookup(&r[i]), ".3f", per_lookup_pct(&r[i]));
  if (ri->strong_keys) {
    ROW_IF("  of which strong key, per lookup (us)", r[i].have_key_ms && r[i].lookups, ".3f",
           r[i].key_ms * 1000.0 / (double)r[i].lookups);
    ROW_IF("  fetch + release, per lookup (us)", r[i].have_key_ms && r[i].lookups, ".3f",
           per_lookup_us(&r[i]) - r[i].key_ms * 1000.0 / (double)r[i].lookups);
  }
  ROW_DBL("wall time (ms)", ".1f", r[i].wall_ms);
  ROW_DBL("per-token latency p50 (ms)", ".2f", r[i].p50_ms);
  ROW_DBL("per-token latency p99 (ms)", ".2f", r[i].p99_ms);
  const mode_result *m2 = find_mode(r, n, MODE_ONEDNN_CACHE), *m3 = find_mode(r, n, MODE_CCACHE);
  double lr = lookup_ratio(r, n), ar = acquire_ratio(r, n);
  if (lr > 0)
    fprintf(f, "\nper lookup, oneDNN cache / ccache: %.2fx (%.3f / %.3f us)\n", lr,
            per_lookup_us(m2), per_lookup_us(m3));
  else
    fprintf(f, "\nper lookup, oneDNN cache / ccache: n/a (ccache made no lookup that hit)\n");
  if (ar > 0)
    fprintf(f, "getting primitives (lookups + compiles), oneDNN cache / ccache: %.2fx\n", ar);
  int p7 = p7_met(ri, r, n);
  if (m2 && m3)
    fprintf(f,
            "P7 lookup / execution: ccache %.3f %%, oneDNN cache %.3f %% (goal at --threads 1: "
            "ccache <= 1 %% and below oneDNN's: %s)\n",
            lookup_pct(m3), lookup_pct(m2),
            p7 < 0 ? "not judged here"
            : p7   ? "met"
                   : "MISSED");
  if (m2 && m3 && have_per_lookup(m2) && have_per_lookup(m3))
    fprintf(f, "   per lookup instead of per request: ccache %.3f %%, oneDNN cache %.3f %%\n",
            per_lookup_pct(m3), per_lookup_pct(m2));
  fprintf(f,
          "~ = inferred: oneDNN's cache has no hit counter; compiles = distinct keys (<= capacity "
          "1024)\n");
  fprintf(f, "\nfinal-logits checksum per request:\n");
  int bad = 0;
  for (int q = 0; q < ri->requests; q++) {
    int same = 1;
    fprintf(f, "  request %3d:", q);
    for (int i = 0; i < n; i++) {
      fprintf(f, " %016" PRIx64, r[i].checksums[q]);
      same &= r[i].checksums[q] == r[0].checksums[q];
    }
    fprintf(f, "  %s\n", same ? "match" : "MISMATCH");
    bad += !same;
  }
  if (bad == 0)
    fprintf(f, "(all %d final-logits checksums match bit for bit across the %d modes)\n",
            ri->requests, n);
  else
    fprintf(f, "(MISMATCH: %d of %d requests' final logits differ between modes)\n", bad,
            ri->requests);
}

static void json_opt_double(FILE *f, const char *key, int have, double v) {
  if (have)
    fprintf(f, ", \"%s\": %.4f", key, v);
  else
    fprintf(f, ", \"%s\": null", key);
}

void report_json(FILE *f, const run_info *ri, const mode_result *r, int n) {
  fprintf(f,
          "{\n  \"model\": \"SmolLM2-135M\", \"layers\": %d, \"requests\": %d, \"decode\": %d, "
          "\"seed\": %" PRIu64
          ", \"threads\": %d, \"omp_threads\": %d, \"runtime_dims\": %s, "
          "\"key_mode\": \"%s\",\n",
          ri->layers, ri->requests, ri->decode, ri->seed, ri->threads, ri->omp_threads,
          ri->runtime_dims ? "true" : "false", ri->strong_keys ? "strong" : "fast");
  fprintf(f, "  \"checksums_agree\": %s,\n", ri->checksums_agree ? "true" : "false");
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
  int p7 = p7_met(ri, r, n);
  fprintf(f, "}, \"per_thread_max_entries\": %d\n", PER_THREAD_MAX_ENTRIES);
  double lr = lookup_ratio(r, n), ar = acquire_ratio(r, n);
  fprintf(f, " ");
  json_opt_double(f, "per_lookup_ratio_onednn_over_ccache", lr > 0, lr);
  json_opt_double(f, "acquire_ratio_onednn_over_ccache", ar > 0, ar);
  fprintf(f, ", \"p7_goal_met\": %s,\n  \"modes\": [\n", p7 < 0 ? "null" : p7 ? "true" : "false");
  for (int i = 0; i < n; i++) {
    const mode_result *m = &r[i];
    fprintf(f,
            "    {\"mode\": %d, \"name\": \"%s\", \"requests\": %" PRIu64 ", \"tokens\": %" PRIu64
            ", \"generated\": %" PRIu64 ", \"primitive_requests\": %" PRIu64
            ", \"compiles\": %" PRIu64 ", \"hits\": %" PRIu64
            ", \"estimated\": %s"
            ", \"distinct_program_keys\": %" PRIu64 ", \"scratchpad_bytes_max\": %" PRIu64,
            (int)m->mode, m->name, m->requests, m->tokens, m->generated, m->prim_requests,
            m->compiles, m->hits, m->estimated ? "true" : "false", m->distinct_programs,
            m->scratch_bytes_max);
    if (m->have_cache_stats)
      fprintf(f,
              ",\n     \"misses\": %" PRIu64 ", \"closure_compiles\": %" PRIu64
              ", \"program_hits\": %" PRIu64 ", \"programs_alive_end\": %" PRIu64
              ", \"programs_alive_peak\": %" PRIu64 ", \"items_end\": %" PRIu64
              ", \"evicted_capacity\": %" PRIu64 ", \"evicted_ttl\": %" PRIu64
              ", \"evicted_cost\": %" PRIu64 ", \"fetch_hits\": %" PRIu64 ", \"waits\": %" PRIu64,
              m->misses, m->closure_compiles, m->program_hits, m->programs_end, m->programs_peak,
              m->items_end, m->ev_capacity, m->ev_ttl, m->ev_cost, m->fetch_hits, m->waits);
    if (m->have_tl_stats)
      fprintf(f,
              ",\n     \"misses\": %" PRIu64 ", \"clears\": %" PRIu64
              ", \"entries_cleared\": %" PRIu64 ", \"programs_alive_peak\": %" PRIu64,
              m->misses, m->tl_clears, m->tl_entries_cleared, m->programs_peak);
    fprintf(f, ",\n     \"acquire_ms\": %.3f, \"compile_ms\": %.3f", m->acquire_ms, m->compile_ms);
    json_opt_double(f, "lookup_ms", m->have_lookup, m->lookup_ms);
    json_opt_double(f, "strong_key_ms", m->have_key_ms, m->key_ms);
    fprintf(f, ", \"exec_ms\": %.3f, \"wall_ms\": %.3f", m->exec_ms, m->wall_ms);
    json_opt_double(f, "lookup_us_per_request", m->have_lookup, lookup_us(m));
    fprintf(f, ", \"exec_us_per_request\": %.4f", exec_us(m));
    json_opt_double(f, "lookup_over_exec_percent", m->have_lookup, lookup_pct(m));
    if (m->have_lookup) fprintf(f, ", \"lookups\": %" PRIu64, m->lookups);
    json_opt_double(f, "lookup_us_per_lookup", have_per_lookup(m), per_lookup_us(m));
    json_opt_double(f, "per_lookup_over_exec_percent", have_per_lookup(m), per_lookup_pct(m));
    fprintf(f,
            ",\n     \"token_latency_p50_ms\": %.3f, \"token_latency_p99_ms\": %.3f,\n     "
            "\"checksums\": [",
            m->p50_ms, m->p99_ms);
    for (int q = 0; q < ri->requests; q++)
      fprintf(f, "%s\"%016" PRIx64 "\"", q ? ", " : "", m->checksums[q]);
    fprintf(f, "]}%s\n", i + 1 < n ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
}
