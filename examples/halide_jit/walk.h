/* walk.h: what a serving process does with the pipelines - walk the
 * model's layers, and at each of a layer's five call sites obtain the
 * site's closure through ccache, run it for a prefill and a decode step,
 * and check both against the reference. */
#ifndef HJ_WALK_H
#define HJ_WALK_H

#include <stdint.h>

#include "jit.h"

/* The five call sites of a layer, in the order a forward pass meets them. */
#define HJ_SLOTS 5
hj_kind hj_slot_kind(uint32_t slot);

typedef struct hj_walk_options {
  uint32_t layers;  /* 1 .. HJ_LAYERS */
  uint32_t tokens;  /* prefill length T: each site runs q = kv = T, then q = 1, kv = T + 1 */
  uint32_t threads; /* walking threads, started together */
  uint32_t repeat;  /* walks per thread */
  uint64_t seed;    /* inputs only */
  float rms_eps;    /* what the reference uses (HJ_RMS_EPS; tests change it) */
} hj_walk_options;

typedef struct hj_walk_kind {
  uint64_t runs;       /* pipeline calls (two per site visit) */
  uint64_t mismatches; /* calls whose output differed from the reference */
  double max_abs_err;
} hj_walk_kind;

typedef struct hj_walk_result {
  uint64_t site_visits; /* closures obtained (layers * 5 * threads * repeat) */
  uint64_t mismatches;  /* over every kind */
  hj_walk_kind kinds[HJ_N_KINDS];
  double obtain_ms;  /* summed over threads: time in hj_jit_site */
  char checksum[33]; /* ccache_fp of thread 0's first walk's outputs, hex */
  int failed;        /* a get or a run failed (err says which) */
  char err[640];
} hj_walk_result;

/* Walk; 0, or -1 when something failed (r->err; mismatches are not
 * failures, they are counted). */
int hj_walk(hj_jit *j, const hj_walk_options *o, hj_walk_result *r);

#endif
