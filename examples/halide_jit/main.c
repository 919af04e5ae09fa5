/* main.c: halide_jit - walk SmolLM2-135M's layers, obtaining each call
 * site's Halide pipeline through ccache, run and check every call, report. */
#include <stdio.h>
#include <time.h>

#include <ccache.h>

#include "cli.h"
#include "jit.h"
#include "report.h"
#include "runner.h"
#include "walk.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  double t0 = now_ms();
  hj_options o;
  int parsed = hj_parse_args(argc, argv, &o);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  hj_runtime_init();
  static hj_jit j; /* large (the samples): not on the stack */
  char err[640];
  hj_jit_options jo = {o.cache_dir,   o.redis,        o.runtime_tag, o.max_items,
                       o.signing_key, o.trusted_keys, o.n_trusted,   o.trust_unsigned};
  int opened = hj_jit_open(&j, &jo, err, sizeof err);
  if (opened != 0) {
    fprintf(stderr, "halide_jit: %s\n", err);
    return opened == HJ_JIT_EUSAGE ? 2 : 1;
  }
  hj_walk_options wo = {o.layers, o.tokens, o.threads, o.repeat, o.seed, (float)HJ_RMS_EPS};
  static hj_walk_result w;
  int rc = hj_walk(&j, &wo, &w);
  hj_report r = {.o = &o, .j = &j, .w = &w};
  r.stats.size = sizeof r.stats;
  ccache_stats_get(j.cache, &r.stats);
  r.unloads = hj_jit_unloads(&j);
  r.wall_ms = now_ms() - t0;
  if (rc != 0) {
    fprintf(stderr, "halide_jit: %s\n", w.err);
    hj_jit_close(&j);
    return 1;
  }
  if (o.json)
    hj_report_json(stdout, &r);
  else
    hj_report_human(stdout, &r);
  hj_jit_close(&j);
  return w.mismatches ? 1 : 0;
}
