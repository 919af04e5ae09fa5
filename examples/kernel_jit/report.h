/* report.h: what a run prints (formatting only; main.c measures). */
#ifndef KJ_REPORT_H
#define KJ_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include <ccache.h>

typedef struct kj_report {
  uint32_t distinct_kernels;
  uint64_t seed;
  const char *runtime_tag;
  const char *cache_dir, *redis; /* the tiers (NULL: none) */
  ccache_stats stats;
  double compile_ms_median; /* NAN: nothing compiled */
  double compile_ms_total;  /* every compile callback's time, summed (0: none) */
  /* Each compile of this process: which kernel of the run (0 first), its
   * program key and callback time, ms (n_compiled of each; owned by the
   * caller). */
  const uint32_t *compiled_nth;
  const ccache_key *compiled_key;
  const double *compiled_ms;
  size_t n_compiled;
  double tier_load_us_median; /* NAN: nothing came from a tier */
  char checksum[33];          /* XXH3-128 (ccache_fp) of every kernel's output, hex */
  uint32_t mismatches;        /* kernels whose output differed from the reference */
  double max_abs_err;
  double wall_ms, acquire_ms;
} kj_report;

void kj_report_json(FILE *f, const kj_report *r);
void kj_report_human(FILE *f, const kj_report *r);

/* Median of v[0..n) (v is sorted in place); NAN when n is 0. */
double kj_median(double *v, size_t n);

#endif
