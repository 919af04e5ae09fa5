/*
 * bench_onednn.c - P3: against a real runtime's own cache.
 *
 * The call sites of the oneDNN serving example (examples/onednn_serving):
 * one decode step (M = 1 token, 64 cached positions) of SmolLM2-135M, i.e.
 * 30 decoder layers x 12 primitives (q/k/v projections, attention scores
 * with a scale post-op, softmax, attention values, o projection, residual
 * add, up projection, gate projection with SiLU and multiply post-ops, down
 * projection, residual add) plus the tied LM head: 361 call sites, with
 * hidden 576, intermediate 1536, 9 heads x 64, 3 KV heads, vocab 49152.
 *
 *  - ccache: what the example's hit path does (run_ccache in
 *    examples/onednn_serving/prims.c): build the closure key only (the
 *    structure, then the call site, one ccache_fp_final), then ccache_fetch
 *    (a hit; the example calls ccache_get_or_compile only after a miss) +
 *    ccache_lease_release.  Every call is a hit (the cache is filled first).
 *    The program key is built only on a miss, inside the compile callback.
 *    A report row times the example's former hit path as well: both keys
 *    finalised on every call (two ccache_fp_final), then the lookup.
 *  - oneDNN: what the same call site costs with oneDNN's own primitive cache
 *    warm (capacity 1024): build the op and memory descriptors and the
 *    attributes (user-managed scratchpad, as the example),
 *    dnnl_primitive_desc_create + dnnl_primitive_create (a cache hit), and
 *    destroy the descriptor, the attributes and the primitive.
 * Ratio = oneDNN time / ccache time, per call site, over the whole step.
 */
#include <math.h>
#include <oneapi/dnnl/dnnl.h>

#include "bench_util.h"
#include "keys.h"
#include "prims.h"

#define DNNL_CHECK(call)                                                     \
  do {                                                                       \
    dnnl_status_t st_ = (call);                                              \
    BENCH_CHECK(st_ == dnnl_success, "%s: dnnl status %d", #call, (int)st_); \
  } while (0)

/* ------------------------------------------------------------ specs */

/* A call site of the example and the primitive it asks for. */
typedef struct site {
  call_site where; /* weights stay NULL: no site is executed here */
  const prim_spec *spec;
} site;

static tensor_spec d2(int64_t r, int64_t c) {
  return (tensor_spec){.ndims = 2, .dims = {r, c}, .strides = {c, 1}};
}

static tensor_spec d4s(int64_t a, int64_t b, int64_t c, int64_t d, int64_t sa, int64_t sb,
                       int64_t sc, int64_t sd) {
  return (tensor_spec){.ndims = 4, .dims = {a, b, c, d}, .strides = {sa, sb, sc, sd}};
}

static prim_spec matmul(int64_t m, int64_t k, int64_t n) {
  return (prim_spec){.kind = OP_MATMUL, .src = d2(m, k), .wei = d2(k, n), .dst = d2(m, n)};
}

enum {
  HID = 576,
  INTER = 1536,
  HEADS = 9,
  KV_HEADS = 3,
  HEAD_DIM = 64,
  VOCAB = 49152,
  LAYERS = 30,
  TOKENS = 1,
  POS = 64,
  CAP = 256
};

#define NSPECS 12
#define NSITES (LAYERS * 12 + 1)

typedef struct model {
  prim_spec q, kv, scores, softmax, values, o, add, up, gate, down, head;
  site sites[NSITES];
  int n_sites;
} model;

static void model_init(model *m) {
  const int64_t M = TOKENS, T = POS + TOKENS, G = KV_HEADS, R = HEADS / KV_HEADS, D = HEAD_DIM;
  const int64_t HQ = HEADS * HEAD_DIM, HKV = KV_HEADS * HEAD_DIM, kvs = (int64_t)CAP * D;
  m->q = matmul(M, HID, HQ);
  m->kv = matmul(M, HID, HKV);
  tensor_spec q4 = d4s(G, R, M, D, R * D, D, HQ, 1);
  m->scores = (prim_spec){.kind = OP_MATMUL,
                          .src = q4,
                          .wei = d4s(G, 1, D, T, kvs, kvs, 1, D), /* K^T through strides */
                          .dst = d4s(G, R, M, T, R * M * T, M * T, T, 1),
                          .n_post = 1,
                          .post = {{.kind = POST_SCALE, .alpha = 1.0f / sqrtf((float)D)}}};
  m->softmax =
      (prim_spec){.kind = OP_SOFTMAX, .src = d2(HEADS * M, T), .dst = d2(HEADS * M, T), .axis = 1};
  m->values = (prim_spec){
      .kind = OP_MATMUL, .src = m->scores.dst, .wei = d4s(G, 1, T, D, kvs, kvs, D, 1), .dst = q4};
  m->o = matmul(M, HQ, HID);
  m->add =
      (prim_spec){.kind = OP_BINARY_ADD, .src = d2(M, HID), .wei = d2(M, HID), .dst = d2(M, HID)};
  m->up = matmul(M, HID, INTER);
  m->gate = matmul(M, HID, INTER);
  m->gate.n_post = 2;
  m->gate.post[0] = (post_op){.kind = POST_SWISH, .alpha = 1.0f};
  m->gate.post[1] = (post_op){.kind = POST_MUL, .src1 = d2(M, INTER)};
  m->down = matmul(M, INTER, HID);
  m->head = (prim_spec){.kind = OP_MATMUL,
                        .src = d2(1, HID),
                        .wei = {.ndims = 2, .dims = {HID, VOCAB}, .strides = {1, HID}},
                        .dst = d2(1, VOCAB)};
  m->n_sites = 0;
  for (int l = 0; l < LAYERS; l++) {
    const struct {
      const char *name;
      const prim_spec *s;
    } layer[12] = {{"q_proj", &m->q},
                   {"k_proj", &m->kv},
                   {"v_proj", &m->kv},
                   {"attn_scores", &m->scores},
                   {"attn_softmax", &m->softmax},
                   {"attn_values", &m->values},
                   {"o_proj", &m->o},
                   {"attn_residual", &m->add},
                   {"up_proj", &m->up},
                   {"gate_proj", &m->gate},
                   {"down_proj", &m->down},
                   {"mlp_residual", &m->add}};
    for (int i = 0; i < 12; i++)
      m->sites[m->n_sites++] =
          (site){.where = {.layer = l, .name = layer[i].name}, .spec = layer[i].s};
  }
  m->sites[m->n_sites++] = (site){.where = {.layer = -1, .name = "lm_head"}, .spec = &m->head};
  BENCH_CHECK(m->n_sites == NSITES, "site count");
}

/* ------------------------------------------------------------ oneDNN */

static void md_of(const tensor_spec *t, dnnl_memory_desc_t *md) {
  DNNL_CHECK(dnnl_memory_desc_init_by_strides(md, t->ndims, t->dims, dnnl_f32, t->strides));
}

/* Descriptors, attributes, primitive descriptor, primitive: the oneDNN way
 * of getting a primitive for a call site.  With the primitive cache warm,
 * dnnl_primitive_create is a lookup. */
static dnnl_primitive_t onednn_get(dnnl_engine_t eng, const prim_spec *s) {
  union {
    dnnl_matmul_desc_t mm;
    dnnl_softmax_v2_desc_t sm;
    dnnl_binary_desc_t bin;
  } d;
  dnnl_memory_desc_t src, wei, dst;
  md_of(&s->src, &src);
  md_of(&s->dst, &dst);
  if (s->kind == OP_SOFTMAX) {
    DNNL_CHECK(dnnl_softmax_v2_forward_desc_init(&d.sm, dnnl_forward_inference,
                                                 dnnl_softmax_accurate, &src, &dst, s->axis));
  } else {
    md_of(&s->wei, &wei);
    if (s->kind == OP_MATMUL)
      DNNL_CHECK(dnnl_matmul_desc_init(&d.mm, &src, &wei, NULL, &dst));
    else
      DNNL_CHECK(dnnl_binary_desc_init(&d.bin, dnnl_binary_add, &src, &wei, &dst));
  }
  dnnl_primitive_attr_t attr;
  DNNL_CHECK(dnnl_primitive_attr_create(&attr));
  /* As the example: user-managed scratchpad, so primitives may be shared. */
  DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
  if (s->n_post) {
    dnnl_post_ops_t po;
    DNNL_CHECK(dnnl_post_ops_create(&po));
    for (int i = 0; i < s->n_post; i++) {
      const post_op *p = &s->post[i];
      if (p->kind == POST_SCALE) {
        DNNL_CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, p->alpha, 0.0f));
      } else if (p->kind == POST_SWISH) {
        DNNL_CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_swish, p->alpha, 0.0f));
      } else {
        dnnl_memory_desc_t md;
        md_of(&p->src1, &md);
        DNNL_CHECK(dnnl_post_ops_append_binary(po, dnnl_binary_mul, &md));
      }
    }
    DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
    DNNL_CHECK(dnnl_post_ops_destroy(po));
  }
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t prim;
  DNNL_CHECK(dnnl_primitive_desc_create(&pd, &d, attr, eng, NULL));
  DNNL_CHECK(dnnl_primitive_create(&prim, pd));
  DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
  DNNL_CHECK(dnnl_primitive_attr_destroy(attr));
  return prim;
}

/* ------------------------------------------------------------- keys */

/* The program and closure keys come from the example's keys.c, compiled in,
 * so the ccache side times exactly the example's key code. */

static void closure_key(const site *st, ccache_key *ckey) {
  BENCH_CHECK(onednn_closure_key(&st->where, st->spec, ckey) == 0, "closure key for %s",
              st->where.name);
}

/* The example's former hit path (commit a70d314's make_keys): one pass that
 * finalises the program key, then extends the same builder with the call
 * site and finalises the closure key.  Same keys, two finals.  noipa keeps
 * it a call, as onednn_closure_key (in another file) is. */
__attribute__((noipa)) static void both_keys(const site *st, ccache_key *pkey, ccache_key *ckey) {
  ccache_fp fp;
  onednn_fp_structure(&fp, st->spec);
  BENCH_OK(ccache_fp_final(&fp, pkey));
  onednn_fp_site(&fp, &st->where);
  BENCH_OK(ccache_fp_final(&fp, ckey));
}

static void destroy_program(void *native, void *ctx) {
  (void)ctx;
  DNNL_CHECK(dnnl_primitive_destroy(native));
}

typedef struct closure {
  dnnl_primitive_t prim;
  const site *site;
} closure;

static void destroy_closure(void *obj, void *ctx) {
  (void)ctx;
  free(obj);
}

/* ------------------------------------------------------------- loops */

static bool is_matmul(const site *s) { return s->spec->kind == OP_MATMUL; }

/* One pass over the sites (those passing `want`, if given); returns how many. */
static bool two_keys; /* the former hit path: program key finalised too */

__attribute__((noipa)) static int pass_ccache(ccache *c, const model *m,
                                              bool (*want)(const site *)) {
  int n = 0;
  for (int i = 0; i < m->n_sites; i++) {
    const site *s = &m->sites[i];
    if (want && !want(s)) continue;
    ccache_key pk, ck;
    if (two_keys)
      both_keys(s, &pk, &ck);
    else
      closure_key(s, &ck);
    ccache_lease l;
    BENCH_OK(ccache_fetch(c, ck, &l)); /* every call is a hit: a miss fails the bench */
    BENCH_CHECK(((closure *)l.closure)->site == s && l.native, "wrong closure for %s",
                s->where.name);
    ccache_lease_release(c, &l);
    n++;
  }
  return n;
}

static int pass_onednn(dnnl_engine_t eng, const model *m, bool (*want)(const site *)) {
  int n = 0;
  for (int i = 0; i < m->n_sites; i++) {
    const site *s = &m->sites[i];
    if (want && !want(s)) continue;
    dnnl_primitive_t p = onednn_get(eng, s->spec);
    DNNL_CHECK(dnnl_primitive_destroy(p));
    n++;
  }
  return n;
}

/* ns per call of ccache's hit (the compile-avoidance figure's memory-tier
 * warm bar), from the first measure(). */
static double hit_ns = NAN;

static void measure(bench_report *rep, const bench_opts *o, ccache *c, dnnl_engine_t eng,
                    const model *m, bool (*want)(const site *), const char *what, bool target) {
  const int reps = o->quick ? 3 : 15;
  const int cc_passes = o->quick ? 20 : 300, dn_passes = o->quick ? 1 : 15;
  double *tc = malloc(sizeof(double) * (size_t)reps), *td = malloc(sizeof(double) * (size_t)reps),
         *ratio = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(tc && td && ratio, "out of memory");
  pass_ccache(c, m, want); /* warm-up */
  pass_onednn(eng, m, want);
  int per = 0;
  for (int r = 0; r < reps; r++) {
    uint64_t t0 = bench_now_ns();
    int nc = 0, nd = 0;
    for (int p = 0; p < cc_passes; p++) nc += pass_ccache(c, m, want);
    uint64_t t1 = bench_now_ns();
    for (int p = 0; p < dn_passes; p++) nd += pass_onednn(eng, m, want);
    uint64_t t2 = bench_now_ns();
    per = nc / cc_passes;
    tc[r] = (double)(t1 - t0) / nc;
    td[r] = (double)(t2 - t1) / nd;
    ratio[r] = td[r] / tc[r];
  }
  char fig[96];
  snprintf(fig, sizeof fig, "P3 %s (%d call sites per token)", what, per);
  bench_add(rep, fig, bench_stats(tc, reps).med, "ns/call", bench_stats(td, reps).med,
            "oneDNN pd+primitive create, cache warm", bench_stats(ratio, reps), "oneDNN / ccache",
            target ? BENCH_RATIO_GE : BENCH_REPORT, 20);
  if (isnan(hit_ns)) hit_ns = bench_stats(tc, reps).med;
  free(tc);
  free(td);
  free(ratio);
}

/* Cold: every call site's primitive created with oneDNN's primitive cache
 * off (capacity 0), so each creation generates its code; against ccache's
 * hit at the same call sites.  One report row and the compile-avoidance
 * figure's memory-tier points. */
static void cold_create(bench_report *rep, const bench_opts *o, dnnl_engine_t eng, const model *m) {
  const int reps = o->quick ? 1 : 3;
  double cold[3];
  DNNL_CHECK(dnnl_set_primitive_cache_capacity(0));
  int n = 0;
  for (int r = 0; r < reps; r++) {
    uint64_t t0 = bench_now_ns();
    n = pass_onednn(eng, m, NULL);
    cold[r] = (double)(bench_now_ns() - t0) / n;
  }
  DNNL_CHECK(dnnl_set_primitive_cache_capacity(1024));
  double med = bench_stats(cold, reps).med, q[3];
  for (int r = 0; r < reps; r++) q[r] = cold[r] / hit_ns;
  char fig[96];
  snprintf(fig, sizeof fig, "oneDNN primitive created cold (primitive cache off), %d call sites",
           n);
  bench_row *row = bench_add(rep, fig, med / 1e3, "us/call", hit_ns / 1e3, "ccache hit (us/call)",
                             bench_stats(q, reps), "cold / ccache hit", BENCH_REPORT, 0);
  snprintf(row->note, sizeof row->note,
           "dnnl_set_primitive_cache_capacity(0): every create generates its kernel; %d pass(es)",
           reps);
  bench_point(o, "compile_avoidance", "cold: compile", "memory, oneDNN", med / 1e3, "us");
  bench_point(o, "compile_avoidance", "warm: tier hit", "memory, oneDNN", hit_ns / 1e3, "us");
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(
      argc, argv, &o,
      "P3: closure key + hit lookup + release vs oneDNN primitive creation with its cache warm",
      false);
  bench_report rep;
  bench_report_init(
      &rep, "bench_onednn",
      "against a real runtime's cache: the oneDNN example's call sites (SmolLM2-135M decode)");
  bench_pin(0);
  model *m = malloc(sizeof *m);
  BENCH_CHECK(m != NULL, "out of memory");
  model_init(m);

  DNNL_CHECK(dnnl_set_primitive_cache_capacity(1024));
  dnnl_engine_t eng;
  DNNL_CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));

  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.sweeper_thread = 0;
  cfg.destroy_program = destroy_program;
  cfg.destroy_closure = destroy_closure;
  ccache *c;
  BENCH_OK(ccache_open(&cfg, &c));
  /* Fill: one program per distinct structure, one closure per call site. */
  for (int i = 0; i < m->n_sites; i++) {
    const site *s = &m->sites[i];
    ccache_key pk, ck;
    BENCH_CHECK(onednn_program_key(s->spec, &pk) == 0, "program key for %s", s->where.name);
    closure_key(s, &ck);
    ccache_program *p;
    if (ccache_program_fetch(c, pk, &p) == CCACHE_MISS)
      BENCH_OK(ccache_program_intern(c, pk, onednn_get(eng, s->spec), 65536, &p));
    closure *cl = malloc(sizeof *cl);
    BENCH_CHECK(cl != NULL, "out of memory");
    cl->prim = ccache_program_native(p);
    cl->site = s;
    BENCH_OK(ccache_put(c, ck, cl, p));
    ccache_program_release(c, p);
  }
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(c, &st);
  BENCH_CHECK(st.items == NSITES, "closures: %llu, want %d", (unsigned long long)st.items, NSITES);
  uint64_t programs = st.programs;

  measure(&rep, &o, c, eng, m, NULL, "all call sites", true);
  cold_create(&rep, &o, eng, m);
  measure(&rep, &o, c, eng, m, is_matmul, "matmul call sites", false);
  two_keys = true;
  measure(&rep, &o, c, eng, m, NULL, "all call sites, former hit path: both keys", false);

  ccache_stats_get(c, &st);
  BENCH_CHECK(st.misses == 0, "%llu misses", (unsigned long long)st.misses);
  BENCH_CHECK(st.items == NSITES, "closures: %llu, want %d", (unsigned long long)st.items, NSITES);
  BENCH_OK(ccache_close(c));
  DNNL_CHECK(dnnl_engine_destroy(eng));
  free(m);
  bench_note(&rep,
             "%d call sites sharing %llu programs (oneDNN %d.%d.%d primitives); every "
             "ccache call a hit; keys built by the example's keys.c",
             NSITES, (unsigned long long)programs, (int)dnnl_version()->major,
             (int)dnnl_version()->minor, (int)dnnl_version()->patch);
  bench_note(&rep,
             "oneDNN side: descriptors + attributes + dnnl_primitive_desc_create + "
             "dnnl_primitive_create (a primitive-cache hit, capacity 1024) + destroys");
  bench_note(&rep,
             "ccache side: closure key (structure + call site, one ccache_fp_final) + "
             "ccache_fetch (hit) + ccache_lease_release, as prims.c run_ccache");
  bench_note(&rep,
             "former-hit-path row: the program key finalised on every call too (two "
             "ccache_fp_final per call), as the example did before it moved the program "
             "key into the compile callback");
  if (o.quick) bench_note(&rep, "quick mode: 3 repetitions, fewer passes");
  return bench_report_print(&rep, &o);
}
