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
  json_num(f, "compile_ms_median", r->compile_ms_median, ", ");
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
  fprintf(f, "runtime tag: %s\n\n", r->runtime_tag);
  fprintf(f, "%-30s %" PRIu64 "\n", "compiled here", s->program_compiles);
  ms_or_dash(f, "compile time, median", r->compile_ms_median, "ms");
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
