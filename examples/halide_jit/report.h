/* report.h: what a run prints (formatting only; main.c measures). */
#ifndef HJ_REPORT_H
#define HJ_REPORT_H

#include <stdio.h>

#include <ccache.h>

#include "cli.h"
#include "jit.h"
#include "walk.h"

typedef struct hj_report {
  const hj_options *o;
  const hj_jit *j;         /* identity, tag, per-kind samples */
  const hj_walk_result *w; /* per-kind runs and errors, checksum */
  ccache_stats stats;
  uint64_t unloads; /* pipelines unloaded (destroy callbacks) */
  double wall_ms;
} hj_report;

/* Median of v[0..n) (v sorted in place); NAN when n is 0. */
double hj_median(double *v, size_t n);

void hj_report_json(FILE *f, hj_report *r);
void hj_report_human(FILE *f, hj_report *r);

#endif
