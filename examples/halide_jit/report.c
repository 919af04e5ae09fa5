/* report.c: the JSON object and the table. */
#include "report.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double hj_median(double *v, size_t n) {
  if (n == 0) return NAN;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* Medians over every kind's samples (a copy: the per-kind arrays stay). */
static double all_median(const hj_jit *j, int tier) {
  double v[HJ_N_KINDS * HJ_MAX_SAMPLES];
  size_t n = 0;
  for (int k = 0; k < HJ_N_KINDS; k++) {
    const hj_kind_stats *s = &j->kinds[k];
    uint32_t m = tier ? s->tier_loads : s->compiles;
    for (uint32_t i = 0; i < m; i++) v[n++] = tier ? s->tier_us[i] : s->compile_ms[i];
  }
  return hj_median(v, n);
}

static double kind_median(const hj_jit *j, int k, int what) {
  double v[HJ_MAX_SAMPLES];
  const hj_kind_stats *s = &j->kinds[k];
  uint32_t n = what == 2 ? s->tier_loads : s->compiles;
  const double *src = what == 0 ? s->compile_ms : what == 1 ? s->halide_ms : s->tier_us;
  memcpy(v, src, n * sizeof *v);
  return hj_median(v, n);
}

static void json_num(FILE *f, const char *name, double v, const char *sep) {
  if (isnan(v))
    fprintf(f, "\"%s\": null%s", name, sep);
  else
    fprintf(f, "\"%s\": %.3f%s", name, v, sep);
}

static void json_str(FILE *f, const char *name, const char *s, const char *sep) {
  fprintf(f, "\"%s\": \"", name);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", (unsigned char)*s);
    else
      fputc(*s, f);
  }
  fprintf(f, "\"%s", sep);
}

void hj_report_json(FILE *f, hj_report *r) {
  const ccache_stats *s = &r->stats;
  const hj_walk_result *w = r->w;
  fprintf(f,
          "{\"layers\": %" PRIu32 ", \"tokens\": %" PRIu32 ", \"threads\": %" PRIu32
          ", \"repeat\": %" PRIu32 ", ",
          r->o->layers, r->o->tokens, r->o->threads, r->o->repeat);
  fprintf(f, "\"site_visits\": %" PRIu64 ", \"distinct_pipelines\": %d, ", w->site_visits,
          HJ_N_KINDS);
  const struct {
    const char *name;
    uint64_t v;
  } u[] = {{"compiles", s->program_compiles},
           {"closure_hits", s->hits},
           {"closure_misses", s->misses},
           {"closures", s->items},
           {"programs", s->programs},
           {"program_hits", s->program_hits},
           {"program_misses", s->program_misses},
           {"waits", s->waits},
           {"program_waits", s->program_waits},
           {"evicted", s->evicted_capacity},
           {"unloaded", r->unloads},
           {"tier_hits", s->tier_hits},
           {"tier_misses", s->tier_misses},
           {"tier_writes", s->tier_writes},
           {"tier_errors", s->tier_errors},
           {"tier_corrupt", s->tier_corrupt},
           {"tier_bytes_written", s->tier_bytes_written},
           {"lock_waits", s->tier_lock_waits},
           {"mismatches", w->mismatches}};
  for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
    fprintf(f, "\"%s\": %" PRIu64 ", ", u[i].name, u[i].v);
  json_num(f, "compile_ms_median", all_median(r->j, 0), ", ");
  json_num(f, "tier_load_us_median", all_median(r->j, 1), ", ");
  json_num(f, "obtain_ms", w->obtain_ms, ", ");
  json_num(f, "wall_ms", r->wall_ms, ", ");
  json_str(f, "checksum", w->checksum, ", ");
  json_str(f, "target", r->j->id.target, ", ");
  json_str(f, "halide", r->j->id.halide, ", ");
  json_str(f, "runtime_tag", r->j->runtime_tag, ", ");
  fprintf(f, "\"pipelines\": [");
  for (int k = 0; k < HJ_N_KINDS; k++) {
    const hj_kind_stats *ks = &r->j->kinds[k];
    fprintf(f, "%s{", k ? ", " : "");
    json_str(f, "name", hj_kind_name((hj_kind)k), ", ");
    fprintf(f, "\"runs\": %" PRIu64 ", \"compiled\": %" PRIu32 ", \"tier_loads\": %" PRIu32 ", ",
            w->kinds[k].runs, ks->compiles, ks->tier_loads);
    json_num(f, "compile_ms", kind_median(r->j, k, 0), ", ");
    json_num(f, "halide_ms", kind_median(r->j, k, 1), ", ");
    json_num(f, "tier_load_us", kind_median(r->j, k, 2), ", ");
    fprintf(f, "\"max_abs_err\": %.3g, \"mismatches\": %" PRIu64 "}", w->kinds[k].max_abs_err,
            w->kinds[k].mismatches);
  }
  fprintf(f, "]}\n");
}

static void cell(FILE *f, double v, const char *fmt) {
  if (isnan(v))
    fprintf(f, "%12s", "-");
  else
    fprintf(f, fmt, v);
}

void hj_report_human(FILE *f, hj_report *r) {
  const ccache_stats *s = &r->stats;
  const hj_walk_result *w = r->w;
  const hj_options *o = r->o;
  fprintf(f,
          "halide_jit: SmolLM2-135M, %" PRIu32 " layers x %d call sites, prefill %" PRIu32
          " tokens + 1 decode step, %" PRIu32 " thread%s x %" PRIu32 " walk%s\n",
          o->layers, HJ_SLOTS, o->tokens, o->threads, o->threads == 1 ? "" : "s", o->repeat,
          o->repeat == 1 ? "" : "s");
  fprintf(f, "target: %s (%s)\n", r->j->id.target, r->j->id.halide);
  fprintf(f, "tiers: %s%s%s%s%s\n\n", o->cache_dir ? "disk " : "", o->cache_dir ? o->cache_dir : "",
          o->cache_dir && o->redis ? ", then " : "", o->redis ? "redis " : "",
          o->redis ? o->redis : (o->cache_dir ? "" : "none"));
  fprintf(f, "%-10s %6s %9s %7s %12s %12s %12s %12s\n", "pipeline", "calls", "compiled", "loaded",
          "compile ms", "Halide ms", "load us", "max |err|");
  for (int k = 0; k < HJ_N_KINDS; k++) {
    const hj_kind_stats *ks = &r->j->kinds[k];
    fprintf(f, "%-10s %6" PRIu64 " %9" PRIu32 " %7" PRIu32 " ", hj_kind_name((hj_kind)k),
            w->kinds[k].runs, ks->compiles, ks->tier_loads);
    cell(f, kind_median(r->j, k, 0), "%12.1f");
    fputc(' ', f);
    cell(f, kind_median(r->j, k, 1), "%12.1f");
    fputc(' ', f);
    cell(f, kind_median(r->j, k, 2), "%12.0f");
    fprintf(f, " %12.2g%s\n", w->kinds[k].max_abs_err, w->kinds[k].mismatches ? "  DIFFERS" : "");
  }
  fprintf(f,
          "(compile: Halide build + compile_to_object + cc -shared + load, waits for\n"
          " Halide's mutex excluded; loaded: from a tier; medians; calls: one prefill\n"
          " and one decode call per call-site visit)\n\n");
  fprintf(f, "%-34s %" PRIu64 " (closure hits %" PRIu64 ", misses %" PRIu64 ")\n",
          "call-site visits", w->site_visits, s->hits, s->misses);
  fprintf(f, "%-34s %" PRIu64 " of %d distinct\n", "pipelines compiled here", s->program_compiles,
          HJ_N_KINDS);
  fprintf(f, "%-34s %" PRIu64 "\n", "call sites given one already made",
          s->program_hits + s->program_waits);
  fprintf(f, "%-34s %" PRIu64 "\n", "pipelines loaded from a tier", s->tier_hits);
  fprintf(f, "%-34s %" PRIu64 " (%" PRIu64 " bytes)\n", "written to a tier", s->tier_writes,
          s->tier_bytes_written);
  fprintf(f, "%-34s %" PRIu64 " errors, %" PRIu64 " corrupt\n", "tier faults", s->tier_errors,
          s->tier_corrupt);
  fprintf(f, "%-34s %" PRIu64 " (single-flight), %" PRIu64 " (tier locks)\n",
          "waits for another thread", s->waits + s->program_waits, s->tier_lock_waits);
  fprintf(f, "%-34s %" PRIu64 " closures evicted, %" PRIu64 " pipelines unloaded\n", "bounds",
          s->evicted_capacity, r->unloads);
  fprintf(f, "%-34s %.3f ms\n",
          o->threads > 1 ? "obtaining closures, all threads" : "time obtaining closures",
          w->obtain_ms);
  fprintf(f, "%-34s %.3f ms\n\n", "wall time", r->wall_ms);
  uint64_t calls = 0;
  for (int k = 0; k < HJ_N_KINDS; k++) calls += w->kinds[k].runs;
  if (w->mismatches == 0)
    fprintf(f, "all %" PRIu64 " calls match the C reference (|err| <= %g*|ref| + %g)\n", calls,
            HJ_REL_TOL, HJ_ABS_TOL);
  else
    fprintf(f, "%" PRIu64 " of %" PRIu64 " calls DIFFER from the C reference\n", w->mismatches,
            calls);
  fprintf(f, "checksum of thread 0's outputs: %s\n", w->checksum);
}
