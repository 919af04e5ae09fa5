/* runner.c: inputs, halide_buffer_t, execution, comparison. */
#include "runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

static _Thread_local char runtime_err[512];

static void on_halide_error(void *user_context, const char *msg) {
  (void)user_context;
  snprintf(runtime_err, sizeof runtime_err, "%.*s", (int)strcspn(msg, "\n"), msg);
}

void hj_runtime_init(void) { halide_set_error_handler(on_halide_error); }

const char *hj_runtime_error(void) { return runtime_err; }

/* splitmix64: a fixed, portable stream from (seed, site, buffer). */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static void fill(float *v, size_t n, uint64_t stream, float lo, float hi) {
  for (size_t i = 0; i < n; i++) {
    double u = (double)(mix(stream + i * 0x632be59bd9b4e019ull) >> 11) * 0x1p-53;
    v[i] = lo + (hi - lo) * (float)u;
  }
}

/* A dense float buffer of rank dims, extents innermost first. */
typedef struct hj_buf {
  halide_buffer_t b;
  halide_dimension_t d[3];
} hj_buf;

static void buf(hj_buf *hb, float *p, int dims, const int32_t *extent) {
  memset(hb, 0, sizeof *hb);
  hb->b.host = (uint8_t *)p;
  hb->b.type.code = halide_type_float;
  hb->b.type.bits = 32;
  hb->b.type.lanes = 1;
  hb->b.dimensions = dims;
  hb->b.dim = hb->d;
  int32_t stride = 1;
  for (int i = 0; i < dims; i++) {
    hb->d[i].extent = extent[i];
    hb->d[i].stride = stride;
    stride *= extent[i];
  }
}

typedef int (*fn2)(halide_buffer_t *, halide_buffer_t *);
typedef int (*fn3)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
typedef int (*fn_rope)(halide_buffer_t *, halide_buffer_t *, int32_t, halide_buffer_t *);

/* The arguments Halide says n takes (outputs included) must be this
 * kind's: a call through the wrong prototype is never made. */
static int arguments_match(hj_kind kind, const hj_native *n) {
  static const int count[HJ_N_KINDS] = {3, 3, 4, 4, 2};
  static const char *const first[HJ_N_KINDS] = {"x", "gate", "x", "x", "scores"};
  const struct halide_filter_metadata_t *m = n->meta;
  return m && m->num_arguments == count[kind] && strcmp(m->arguments[0].name, first[kind]) == 0;
}

static int call(const hj_call *c, const hj_native *n) {
  hj_buf a, b, out;
  int32_t q = (int32_t)c->q, kv = (int32_t)c->kv;
  int32_t heads = (int32_t)hj_rope_heads(c->kind), half = HJ_HEAD_DIM / 2;
  switch (c->kind) {
    case HJ_RMSNORM:
    case HJ_SILU_GATE: {
      int32_t width = c->kind == HJ_RMSNORM ? HJ_HIDDEN : HJ_INTERMEDIATE;
      int32_t e2[2] = {width, q};
      buf(&a, (float *)c->a, 2, e2);
      buf(&b, (float *)c->b, c->kind == HJ_RMSNORM ? 1 : 2, e2);
      buf(&out, c->out, 2, e2);
      return ((fn3)n->fn)(&a.b, &b.b, &out.b);
    }
    case HJ_ROPE_Q:
    case HJ_ROPE_K: {
      int32_t e3[3] = {HJ_HEAD_DIM, heads, q};
      buf(&a, (float *)c->a, 3, e3);
      buf(&b, (float *)c->b, 1, &half);
      buf(&out, c->out, 3, e3);
      return ((fn_rope)n->fn)(&a.b, &b.b, c->pos0, &out.b);
    }
    case HJ_SOFTMAX: {
      int32_t e3[3] = {kv, q, HJ_HEADS};
      buf(&a, (float *)c->a, 3, e3);
      buf(&out, c->out, 3, e3);
      return ((fn2)n->fn)(&a.b, &out.b);
    }
    default:
      return -1;
  }
}

static void inputs(hj_kind kind, uint32_t q, uint32_t kv, uint64_t seed, uint32_t site, float *a,
                   float *b) {
  uint64_t base = mix(seed) ^ ((uint64_t)site << 32) ^ ((uint64_t)q << 16) ^ kv;
  /* Realistic ranges: activations around 0, norm weights around 1, gates
   * over silu's curve, scores spanning e^+-8 after the 1/8 scale. */
  static const float range_a[HJ_N_KINDS][2] = {{-2, 2}, {-6, 6}, {-1, 1}, {-1, 1}, {-64, 64}};
  fill(a, hj_in_a(kind, q, kv), mix(base + 1), range_a[kind][0], range_a[kind][1]);
  if (kind == HJ_RMSNORM) fill(b, hj_in_b(kind, q), mix(base + 2), 0.5f, 1.5f);
  if (kind == HJ_SILU_GATE) fill(b, hj_in_b(kind, q), mix(base + 2), -1, 1);
  if (kind == HJ_ROPE_Q || kind == HJ_ROPE_K) hj_inv_freq(b);
}

static void compare(const float *got, const float *want, size_t n, hj_result *res) {
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - (double)want[i]);
    int bad = !(d <= HJ_REL_TOL * fabs((double)want[i]) + HJ_ABS_TOL); /* NaN is bad */
    if (bad && res->ok) {
      res->ok = 0;
      res->first_bad = i;
    }
    if (!(d <= res->max_abs_err)) res->max_abs_err = d;
  }
}

int hj_run_checked(hj_kind kind, const hj_native *n, uint32_t q, uint32_t kv, uint64_t seed,
                   uint32_t site, float rms_eps, ccache_fp *checksum, hj_result *res) {
  if (!arguments_match(kind, n)) return -1;
  size_t na = hj_in_a(kind, q, kv), nb = hj_in_b(kind, q), no = hj_out(kind, q, kv);
  float *a = malloc(na * sizeof *a), *b = nb ? malloc(nb * sizeof *b) : NULL;
  float *out = malloc(no * sizeof *out), *ref = malloc(no * sizeof *ref);
  int rc = -1;
  if (a && (b || !nb) && out && ref) {
    inputs(kind, q, kv, seed, site, a, b);
    hj_call c = {kind, q, kv, (int32_t)(kv - q), a, b, out};
    memset(out, 0xff, no * sizeof *out); /* NaN: an element never written fails */
    *res = (hj_result){.ok = 1};
    res->status = call(&c, n);
    c.out = ref;
    hj_reference(&c, rms_eps);
    if (res->status != 0)
      res->ok = 0;
    else
      compare(out, ref, no, res);
    if (checksum) ccache_fp_bytes(checksum, out, no * sizeof *out);
    rc = 0;
  }
  free(a);
  free(b);
  free(out);
  free(ref);
  return rc;
}
