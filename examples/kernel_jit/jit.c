/* jit.c: obtaining kernels through ccache. */
#include "jit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen.h"
#include "keys.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void destroy_native(void *native, void *ctx) {
  (void)ctx;
  kj_unload(native);
}

typedef struct compile_job {
  kj_jit *j;
  kj_spec spec;
} compile_job;

/* Generate, compile, and load through the same path as a tier hit. */
static int compile_kernel(void *ud, ccache *c, ccache_key pkey, void **native_out,
                          uint64_t *cost_out) {
  (void)c;
  compile_job *job = ud;
  kj_jit *j = job->j;
  double t0 = now_ms();
  char *src = kj_codegen(job->spec, pkey);
  void *bytes = NULL;
  size_t len = 0;
  kj_native *n = NULL;
  if (!src)
    snprintf(j->err, sizeof j->err, "out of memory generating %s", kj_op_name(job->spec.op));
  else if (kj_compile(&j->cc, src, &bytes, &len, j->err, sizeof j->err) == 0)
    n = kj_load(bytes, len, pkey, j->err, sizeof j->err);
  free(src);
  free(bytes);
  if (!n) return -1;
  j->compile_ms[j->n_compiles++] = now_ms() - t0;
  *native_out = n;
  *cost_out = n->len;
  return 0;
}

int kj_jit_open(kj_jit *j, const kj_jit_options *o, char *err, size_t errlen) {
  memset(j, 0, sizeof *j);
  if (kj_compiler_open(&j->cc, err, errlen) != 0) return -1;
  char cc_tag[512];
  kj_compiler_tag(&j->cc, cc_tag, sizeof cc_tag);
  snprintf(j->runtime_tag, sizeof j->runtime_tag, "%s%s%s", cc_tag,
           o->runtime_tag_extra ? "; " : "", o->runtime_tag_extra ? o->runtime_tag_extra : "");
  j->compile_ms = calloc(KJ_MAX_KERNELS, sizeof *j->compile_ms);
  j->tier_us = calloc(KJ_MAX_KERNELS, sizeof *j->tier_us);
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.destroy_program = destroy_native;
  int rc = j->compile_ms && j->tier_us ? ccache_open(&cfg, &j->cache) : CCACHE_ENOMEM;
  if (rc != CCACHE_OK) {
    snprintf(err, errlen, "ccache_open: %s", ccache_strerror(rc));
    kj_jit_close(j);
    return -1;
  }
  return 0;
}

void kj_jit_close(kj_jit *j) {
  if (j->cache) ccache_close(j->cache);
  j->cache = NULL;
  kj_compiler_close(&j->cc);
  free(j->compile_ms);
  free(j->tier_us);
  j->compile_ms = j->tier_us = NULL;
}

int kj_jit_get(kj_jit *j, kj_spec s, ccache_program **out) {
  double t0 = now_ms();
  ccache_key pkey;
  int rc = kj_program_key(s, &j->cc, &pkey);
  if (rc == CCACHE_OK) {
    compile_job job = {j, s};
    rc = ccache_program_get_or_compile(j->cache, pkey, compile_kernel, &job, out);
  }
  j->acquire_ms += now_ms() - t0;
  return rc;
}
