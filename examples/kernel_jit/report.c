/* report.c: the JSON object and the human summary. */
#include "report.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double kj_median(double *v, size_t n) {
  if (n == 0) return NAN;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* JSON has no NaN: a median of nothing is null. */
static void json_num(FILE *f, const char *name, double v, const char *sep) {
  if (isnan(v))
    fprintf(f, "\"%s\": null%s", name, sep);
  else
    fprintf(f, "\"%s\": %.3f%s", name, v, sep);
}

/* The runtime tag is printed inside a JSON string: escape what JSON needs. */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", (unsigned char)*s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

void kj_report_json(FILE *f, const kj_report *r) {
  const ccache_stats *s = &r->stats;
  fprintf(f, "{\"distinct_kernels\": %" PRIu32 ", ", r->distinct_kernels);
  fprintf(f, "\"compiles\": %" PRIu64 ", ", s->program_compiles);
  fprintf(f, "\"program_misses\": %" PRIu64 ", ", s->program_misses);
  fprintf(f, "\"tier_hits\": %" PRIu64 ", ", s->tier_hits);
  fprintf(f, "\"tier_misses\": %" PRIu64 ", ", s->tier_misses);
  fprintf(f, "\"tier_writes\": %" PRIu64 ", ", s->tier_writes);
  fprintf(f, "\"tier_errors\": %" PRIu64 ", ", s->tier_errors);
  fprintf(f, "\"tier_corrupt\": %" PRIu64 ", ", s->tier_corrupt);
  fprintf(f, "\"tier_oversize\": %" PRIu64 ", ", s->tier_oversize);
  fprintf(f, "\"tier_rejected\": %" PRIu64 ", ", s->tier_rejected);
  fprintf(f, "\"tier_unpublished\": %" PRIu64 ", ", s->tier_unpublished);
  fprintf(f, "\"tier_bytes_read\": %" PRIu64 ", ", s->tier_bytes_read);
  fprintf(f, "\"tier_bytes_written\": %" PRIu64 ", ", s->tier_bytes_written);
  fprintf(f, "\"lock_waits\": %" PRIu64 ", ", s->tier_lock_waits);
  fprintf(f, "\"wait_ms_max\": %" PRIu64 ", ", s->tier_wait_ms_max);
  json_num(f, "compile_ms_median", r->compile_ms_median, ", ");
  fprintf(f, "\"compile_ms_total\": %.3f, ", r->compile_ms_total);
  fprintf(f, "\"compiled\": [");
  for (size_t i = 0; i < r->n_compiled; i++)
    fprintf(f,
            "%s{\"kernel\": %" PRIu32 ", \"key\": \"%016" PRIx64 "%016" PRIx64 "\", \"ms\": %.3f}",
            i ? ", " : "", r->compiled_nth[i], r->compiled_key[i].hi, r->compiled_key[i].lo,
            r->compiled_ms[i]);
  fprintf(f, "], ");
  json_num(f, "tier_load_us_median", r->tier_load_us_median, ", ");
  fprintf(f, "\"checksum\": \"%s\", ", r->checksum);
  fprintf(f, "\"mismatches\": %" PRIu32 ", ", r->mismatches);
  fprintf(f, "\"max_abs_err\": %.3g, ", r->max_abs_err);
  json_num(f, "wall_ms", r->wall_ms, ", ");
  json_num(f, "acquire_ms", r->acquire_ms, ", ");
  fprintf(f, "\"seed\": %" PRIu64 ", \"runtime_tag\": ", r->seed);
  json_str(f, r->runtime_tag);
  fprintf(f, "}\n");
}

static void ms_or_dash(FILE *f, const char *label, double v, const char *unit) {
  if (isnan(v))
    fprintf(f, "%-30s -\n", label);
  else
    fprintf(f, "%-30s %.3f %s\n", label, v, unit);
}

void kj_report_human(FILE *f, const kj_report *r) {
  const ccache_stats *s = &r->stats;
  fprintf(f, "kernel_jit: %" PRIu32 " distinct kernels of SmolLM2-135M, input seed %" PRIu64 "\n",
          r->distinct_kernels, r->seed);
  fprintf(f, "runtime tag: %s\n", r->runtime_tag);
  fprintf(f, "tiers: %s%s%s%s%s\n\n", r->cache_dir ? "disk " : "", r->cache_dir ? r->cache_dir : "",
          r->cache_dir && r->redis ? ", then " : "", r->redis ? "redis " : "",
          r->redis ? r->redis : (r->cache_dir ? "" : "none"));
  fprintf(f, "%-30s %" PRIu64 "\n", "compiled here", s->program_compiles);
  fprintf(f, "%-30s %" PRIu64 "\n", "loaded from a tier", s->tier_hits);
  fprintf(f, "%-30s %" PRIu64 " (%" PRIu64 " bytes)\n", "written to a tier", s->tier_writes,
          s->tier_bytes_written);
  fprintf(f, "%-30s %" PRIu64 " errors, %" PRIu64 " corrupt entries\n", "tier faults",
          s->tier_errors, s->tier_corrupt);
  fprintf(f, "%-30s %" PRIu64 "\n", "entries over the size bound", s->tier_oversize);
  fprintf(f, "%-30s %" PRIu64 " rejected (unsigned or untrusted), %" PRIu64 " not published\n",
          "signatures", s->tier_rejected, s->tier_unpublished);
  fprintf(f, "%-30s %" PRIu64 " (longest %" PRIu64 " ms)\n", "waits for another process",
          s->tier_lock_waits, s->tier_wait_ms_max);
  ms_or_dash(f, "compile time, median", r->compile_ms_median, "ms");
  ms_or_dash(f, "tier fetch + load, median", r->tier_load_us_median, "us");
  ms_or_dash(f, "time obtaining kernels", r->acquire_ms, "ms");
  ms_or_dash(f, "wall time", r->wall_ms, "ms");
  fprintf(f, "\n");
  if (r->mismatches == 0)
    fprintf(f, "all %" PRIu32 " kernels match the reference (max abs error %.3g)\n",
            r->distinct_kernels, r->max_abs_err);
  else
    fprintf(f, "%" PRIu32 " of %" PRIu32 " kernels DIFFER from the reference\n", r->mismatches,
            r->distinct_kernels);
  fprintf(f, "checksum of all kernel outputs: %s\n", r->checksum);
}
