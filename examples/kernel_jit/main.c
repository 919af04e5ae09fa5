/* main.c: kernel_jit - obtain --kernels N specialised kernels through
 * ccache, run each on deterministic inputs, check it against the reference,
 * and report. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ccache.h>

#include "cli.h"
#include "jit.h"
#include "report.h"
#include "runner.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void verbose_line(const kj_options *o, kj_jit *j, uint32_t i, kj_spec s,
                         const kj_result *res) {
  if (!o->verbose) return;
  char redis[48] = "";
  uint64_t ns = atomic_load(&j->redis_ns);
  if (ns) /* CLOCK_MONOTONIC, s: what the fleet measurement compares */
    snprintf(redis, sizeof redis, " (redis at %.6f)", (double)ns / 1e9);
  fprintf(stderr, "kernel %" PRIu32 "/%" PRIu32 ": %s q_len %" PRIu32 " kv_len %" PRIu32 ": %s%s\n",
          i + 1, o->kernels, kj_op_name(s.op), s.q_len, s.kv_len,
          res->ok ? "matches the reference" : "DIFFERS from the reference", redis);
  fflush(stderr);
}

/* --hold-after: tell the test we got here, then wait until it closes our
 * stdin (it changes the world meanwhile, e.g. kills the Redis server). */
static void hold(const kj_options *o, uint32_t done) {
  if (done != o->hold_after) return;
  fprintf(stderr, "kernel_jit: holding after %" PRIu32 " kernels\n", done);
  fflush(stderr);
  char buf[64];
  for (;;) { /* until EOF (or an error other than EINTR) */
    ssize_t r = read(STDIN_FILENO, buf, sizeof buf);
    if (r == 0 || (r < 0 && errno != EINTR)) break;
  }
}

/* Obtain, run and check every kernel; the handles stay held (a runtime keeps
 * its kernels) until the end of the run.  0, or -1 after a message. */
static int run_all(const kj_options *o, kj_jit *j, ccache_program **progs, kj_report *r) {
  ccache_fp sum;
  ccache_fp_init(&sum);
  for (uint32_t i = 0; i < o->kernels; i++) {
    kj_spec s = kj_spec_nth(i);
    int rc = kj_jit_get(j, s, &progs[i]);
    if (rc != CCACHE_OK) {
      fprintf(stderr, "kernel_jit: %s q_len %" PRIu32 ": %s%s%s\n", kj_op_name(s.op), s.q_len,
              ccache_strerror(rc), j->err[0] ? ": " : "", j->err);
      return -1;
    }
    kj_result res;
    if (kj_run_checked(s, kj_program_fn(progs[i]), o->seed, i, &sum, &res) != 0) {
      fprintf(stderr, "kernel_jit: out of memory for the buffers of kernel %" PRIu32 "\n", i);
      return -1;
    }
    r->mismatches += !res.ok;
    if (res.max_abs_err > r->max_abs_err || isnan(res.max_abs_err))
      r->max_abs_err = res.max_abs_err;
    verbose_line(o, j, i, s, &res);
    hold(o, i + 1);
  }
  ccache_key k;
  ccache_fp_final(&sum, &k);
  snprintf(r->checksum, sizeof r->checksum, "%016" PRIx64 "%016" PRIx64, k.hi, k.lo);
  return 0;
}

int main(int argc, char **argv) {
  double t0 = now_ms();
  kj_options o;
  int parsed = kj_parse_args(argc, argv, &o);
  if (parsed != 0) return parsed > 0 ? 0 : 2;

  kj_jit j;
  char err[512];
  kj_jit_options jo = {.runtime_tag_extra = o.runtime_tag,
                       .cache_dir = o.cache_dir,
                       .cache_max_bytes = o.cache_max_bytes,
                       .redis = o.redis,
                       .signing_key = o.signing_key,
                       .trusted_keys = o.trusted_keys,
                       .n_trusted = o.n_trusted,
                       .trust_unsigned = o.trust_unsigned,
                       .note_redis = o.verbose};
  int opened = kj_jit_open(&j, &jo, err, sizeof err);
  if (opened != 0) {
    fprintf(stderr, "kernel_jit: %s\n", err);
    return opened == KJ_JIT_EUSAGE ? 2 : 1;
  }
  ccache_program **progs = calloc(o.kernels, sizeof *progs);
  kj_report r = {.distinct_kernels = o.kernels,
                 .seed = o.seed,
                 .runtime_tag = j.runtime_tag,
                 .cache_dir = o.cache_dir,
                 .redis = o.redis};
  int rc = progs ? run_all(&o, &j, progs, &r) : -1;
  if (!progs) fprintf(stderr, "kernel_jit: out of memory\n");
  r.stats.size = sizeof r.stats;
  ccache_stats_get(j.cache, &r.stats);
  for (uint32_t i = 0; progs && i < o.kernels; i++) ccache_program_release(j.cache, progs[i]);
  free(progs);
  for (size_t i = 0; i < j.n_compiles; i++) r.compile_ms_total += j.compile_ms[i];
  /* The report keeps the compiles in order; the median sorts a copy. */
  double *compiled_ms = j.compile_ms;
  ccache_key *compiled_key = j.compile_key;
  uint32_t *compiled_nth = j.compile_nth;
  j.compile_ms = calloc(KJ_MAX_KERNELS, sizeof *j.compile_ms);
  j.compile_key = NULL;
  j.compile_nth = NULL;
  if (j.compile_ms) memcpy(j.compile_ms, compiled_ms, j.n_compiles * sizeof *j.compile_ms);
  r.compiled_nth = compiled_nth;
  r.compiled_key = compiled_key;
  r.compiled_ms = compiled_ms;
  r.n_compiled = j.compile_ms ? j.n_compiles : 0;
  r.compile_ms_median = j.compile_ms ? kj_median(j.compile_ms, j.n_compiles) : NAN;
  r.tier_load_us_median = kj_median(j.tier_us, j.n_tier_loads);
  r.acquire_ms = j.acquire_ms;
  kj_jit_close(&j);
  r.wall_ms = now_ms() - t0;
  if (rc == 0 && o.json)
    kj_report_json(stdout, &r);
  else if (rc == 0)
    kj_report_human(stdout, &r);
  free(compiled_ms);
  free(compiled_key);
  free(compiled_nth);
  if (rc != 0) return 1;
  return r.mismatches ? 1 : 0;
}
