/*
 * bench_fingerprint.c - P5: what does a key cost?
 *
 *  - bytes: ccache_fp_init + ccache_fp_bytes over 64 MiB + ccache_fp_final,
 *    against the faster of the plain XXH3_128bits() and, where Debian's
 *    libxxhash exports it, XXH3_128bits_dispatch() (AVX2/AVX-512 kernels)
 *    over the same buffer, one-shot.  Ratio = baseline time / ccache time
 *    (1 = as fast as raw XXH3).
 *  - graph: ns per node of ccache_fp_graph() on a SmolLM2-135M decoder
 *    layer (hidden 576, 9 query heads and 3 KV heads of 64, intermediate
 *    1536): parameters, RMSNorm, q/k/v projections, RoPE, KV-cache concat,
 *    attention, o projection, residual, gated MLP, residual; and on the
 *    whole 30-layer stack with embedding and LM head (vocab 49152).  The
 *    one-shot XXH3-128 of a node-sized (160-byte) buffer is shown beside it.
 *  - strong keys (issue 22), each against the fast mode in the same
 *    repetition: bytes/s of the strong builder over the same 64 MiB and
 *    ns/node of ccache_fp_graph_strong() on the same graphs; and the hash
 *    choice itself, libsodium's BLAKE2b-256 (crypto_generichash) against its
 *    SHA-256 (crypto_hash_sha256) over 64 MiB and on one 160-byte input.
 *    Those rows are in bench_fingerprint_strong.c; what the two files share
 *    (the fast key, the graphs) is declared in bench_fingerprint.h.
 */
#include <string.h>

#define XXH_STATIC_LINKING_ONLY 1
#include <xxhash.h>
#if defined(__x86_64__) && defined(__has_include)
#if __has_include(<xxh_x86dispatch.h>)
#define XXH_DISPATCH_DISABLE_REPLACE 1
#include <xxh_x86dispatch.h>
#define HAVE_DISPATCH 1
#endif
#endif

#include "bench_fingerprint.h"

/* ------------------------------------------------------------- bytes */

ccache_key fp_bytes(const void *buf, size_t len) {
  ccache_fp fp;
  ccache_key k;
  ccache_fp_init(&fp);
  BENCH_OK(ccache_fp_bytes(&fp, buf, len));
  BENCH_OK(ccache_fp_final(&fp, &k));
  return k;
}

volatile uint64_t sink;

#ifdef HAVE_DISPATCH
/* libxxhash 0.8.1's AVX2 kernel returns without vzeroupper: clear the upper
 * halves after each baseline call, or every SSE instruction measured after
 * it (the graph figures included) pays the AVX-SSE transition.  The library
 * does the same after its own dispatched calls (src/fp_encode.h). */
__attribute__((target("avx"))) static void avx_clean_(void) { __builtin_ia32_vzeroupper(); }
static void avx_clean(void) {
  if (__builtin_cpu_supports("avx")) avx_clean_();
}
#endif

static void bytes_bench(bench_report *rep, const bench_opts *o) {
  const size_t len = 64u << 20;
  const int reps = o->quick ? 3 : 15;
  unsigned char *buf = malloc(len);
  BENCH_CHECK(buf != NULL, "out of memory");
  uint64_t st = 42;
  for (size_t i = 0; i < len; i += 8) {
    uint64_t v = bench_rand(&st);
    memcpy(buf + i, &v, 8);
  }
  /* Real errors: the key must be deterministic and must see every byte. */
  ccache_key k0 = fp_bytes(buf, len);
  buf[len / 2] ^= 1;
  ccache_key k1 = fp_bytes(buf, len);
  buf[len / 2] ^= 1;
  BENCH_CHECK(k0.lo != k1.lo || k0.hi != k1.hi, "a flipped byte did not change the key");
  /* Warm-up: every variant once (also faults the pages in). */
  sink = XXH3_128bits(buf, len).low64;
#ifdef HAVE_DISPATCH
  sink = XXH3_128bits_dispatch(buf, len).low64;
  avx_clean();
#endif
  double *tc = malloc(sizeof(double) * (size_t)reps), *tp = malloc(sizeof(double) * (size_t)reps),
         *td = malloc(sizeof(double) * (size_t)reps),
         *ratio = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(tc && tp && td && ratio, "out of memory");
  for (int r = 0; r < reps; r++) {
    uint64_t t0 = bench_now_ns();
    ccache_key k = fp_bytes(buf, len);
    uint64_t t1 = bench_now_ns();
    sink = XXH3_128bits(buf, len).low64;
    uint64_t t2 = bench_now_ns();
#ifdef HAVE_DISPATCH
    sink = XXH3_128bits_dispatch(buf, len).low64;
    avx_clean();
#endif
    uint64_t t3 = bench_now_ns();
    BENCH_CHECK(k.lo == k0.lo && k.hi == k0.hi, "the key is not deterministic");
    tc[r] = (double)(t1 - t0);
    tp[r] = (double)(t2 - t1);
#ifdef HAVE_DISPATCH
    td[r] = (double)(t3 - t2);
#else
    (void)t3;
    td[r] = tp[r];
#endif
    double best = tp[r] < td[r] ? tp[r] : td[r];
    ratio[r] = best / tc[r];
  }
  double gb = (double)len / 1e9;
  bench_stat sc = bench_stats(tc, reps), sp = bench_stats(tp, reps), sd = bench_stats(td, reps);
  double best_med = sp.med < sd.med ? sp.med : sd.med;
  bench_row *row =
      bench_add(rep, "P5 ccache_fp_bytes over 64 MiB", gb / (sc.med * 1e-9), "GB/s",
                gb / (best_med * 1e-9), sp.med <= sd.med ? "XXH3_128bits" : "XXH3_128bits_dispatch",
                bench_stats(ratio, reps), "throughput ccache / best XXH3", BENCH_RATIO_GE, 0.8);
#ifdef HAVE_DISPATCH
  snprintf(row->note, sizeof row->note, "plain XXH3_128bits %.1f GB/s, _dispatch %.1f GB/s",
           gb / (sp.med * 1e-9), gb / (sd.med * 1e-9));
#else
  snprintf(row->note, sizeof row->note, "no XXH3_128bits_dispatch in this libxxhash");
#endif
  free(tc);
  free(tp);
  free(td);
  free(ratio);
  free(buf);
}

/* ------------------------------------------------------------- graph */

enum { DT_F32 = 1, DT_I32 = 2 };

/* Appends a node with one output of the given type; returns its index. */
static uint32_t node(graph *g, const char *op, const void *attrs, size_t attrs_len, uint32_t rank,
                     const int64_t *dims, int nops, const uint32_t *operands, bool param) {
  BENCH_CHECK(g->n < MAXN && rank <= 4 && nops <= MAXOPS, "graph too big");
  size_t i = g->n++;
  memcpy(g->dims[i], dims, rank * sizeof *dims);
  g->outs[i] = (ccache_fp_tensor){.dtype = DT_F32, .rank = rank, .dims = g->dims[i]};
  for (int k = 0; k < nops; k++) g->ops[i][k] = (ccache_fp_ref){.node = operands[k], .slot = 0};
  g->nodes[i] = (ccache_fp_node){.op_name = op,
                                 .attrs = attrs,
                                 .attrs_len = attrs_len,
                                 .outputs = &g->outs[i],
                                 .n_outputs = 1,
                                 .n_operands = (uint32_t)nops,
                                 .operands = g->ops[i],
                                 .param_index = param ? g->next_param++ : -1};
  return (uint32_t)i;
}

#define D(...)    ((const int64_t[]){__VA_ARGS__})
#define OPS(...)  ((const uint32_t[]){__VA_ARGS__})
#define NOPS(...) ((int)(sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t)))
#define PARAM(g, ...) \
  node((g), "parameter", NULL, 0, NOPS(__VA_ARGS__), D(__VA_ARGS__), 0, NULL, true)
#define RANK(dims_) ((uint32_t)(sizeof(dims_) / sizeof(int64_t)))
#define OP(g, name, attr, dims_, ...)                                                \
  node((g), (name), (attr), sizeof *(attr), RANK(dims_), (dims_), NOPS(__VA_ARGS__), \
       OPS(__VA_ARGS__), false)
#define OP0(g, name, dims_, ...) \
  node((g), (name), NULL, 0, RANK(dims_), (dims_), NOPS(__VA_ARGS__), OPS(__VA_ARGS__), false)

/* Serialized attributes, as a runtime would pass them. */
typedef struct {
  double eps;
} a_norm;
typedef struct {
  int64_t tr_a, tr_b;
} a_matmul;
typedef struct {
  double theta;
  int64_t head_dim;
} a_rope;
typedef struct {
  int64_t axis;
} a_axis;
typedef struct {
  int64_t shape[4];
} a_reshape;
typedef struct {
  double scalar;
} a_scalar;

/* SmolLM2-135M: hidden 576, heads 9 x 64, kv heads 3, intermediate 1536. */
#define H   576
#define NH  9
#define NKV 3
#define HD  64
#define FF  1536
#define M   1  /* decode: one token */
#define T   64 /* positions in the KV cache before this token */

static const a_norm norm_attr = {1e-5};
static const a_matmul mm_attr = {0, 0};
static const a_matmul mm_bt_attr = {0, 1};
static const a_rope rope_attr = {100000.0, HD};
static const a_axis axis_last = {-1}, axis_seq = {1};
static const a_reshape q_shape = {{M, NH, HD, 0}}, kv_shape = {{M, NKV, HD, 0}},
                       o_shape = {{M, H, 0, 0}};
static const a_scalar scale_attr = {0.125};

/* One decoder layer on hidden state x, with its position input pos; returns
 * the layer's output node. */
static uint32_t decoder_layer(graph *g, uint32_t x, uint32_t pos) {
  uint32_t w_an = PARAM(g, H), w_q = PARAM(g, H, NH * HD), w_k = PARAM(g, H, NKV * HD),
           w_v = PARAM(g, H, NKV * HD), w_o = PARAM(g, NH * HD, H), w_mn = PARAM(g, H),
           w_g = PARAM(g, H, FF), w_u = PARAM(g, H, FF), w_d = PARAM(g, FF, H),
           kc = PARAM(g, NKV, T, HD), vc = PARAM(g, NKV, T, HD);
  uint32_t xn = OP(g, "rms_norm", &norm_attr, D(M, H), x, w_an);
  uint32_t q = OP(g, "matmul", &mm_attr, D(M, NH * HD), xn, w_q);
  uint32_t k = OP(g, "matmul", &mm_attr, D(M, NKV * HD), xn, w_k);
  uint32_t v = OP(g, "matmul", &mm_attr, D(M, NKV * HD), xn, w_v);
  uint32_t q3 = OP(g, "reshape", &q_shape, D(NH, M, HD), q);
  uint32_t k3 = OP(g, "reshape", &kv_shape, D(NKV, M, HD), k);
  uint32_t v3 = OP(g, "reshape", &kv_shape, D(NKV, M, HD), v);
  uint32_t qr = OP(g, "rope", &rope_attr, D(NH, M, HD), q3, pos);
  uint32_t kr = OP(g, "rope", &rope_attr, D(NKV, M, HD), k3, pos);
  uint32_t kall = OP(g, "concat", &axis_seq, D(NKV, T + M, HD), kc, kr);
  uint32_t vall = OP(g, "concat", &axis_seq, D(NKV, T + M, HD), vc, v3);
  uint32_t krep = OP(g, "repeat_kv", &axis_seq, D(NH, T + M, HD), kall);
  uint32_t vrep = OP(g, "repeat_kv", &axis_seq, D(NH, T + M, HD), vall);
  uint32_t s = OP(g, "matmul", &mm_bt_attr, D(NH, M, T + M), qr, krep);
  uint32_t ss = OP(g, "multiply_scalar", &scale_attr, D(NH, M, T + M), s);
  uint32_t p = OP(g, "softmax", &axis_last, D(NH, M, T + M), ss);
  uint32_t a = OP(g, "matmul", &mm_attr, D(NH, M, HD), p, vrep);
  uint32_t a2 = OP(g, "transpose_reshape", &o_shape, D(M, NH * HD), a);
  uint32_t o = OP(g, "matmul", &mm_attr, D(M, H), a2, w_o);
  uint32_t h1 = OP0(g, "add", D(M, H), x, o);
  uint32_t hn = OP(g, "rms_norm", &norm_attr, D(M, H), h1, w_mn);
  uint32_t gt = OP(g, "matmul", &mm_attr, D(M, FF), hn, w_g);
  uint32_t up = OP(g, "matmul", &mm_attr, D(M, FF), hn, w_u);
  uint32_t act = OP0(g, "silu", D(M, FF), gt);
  uint32_t gu = OP0(g, "multiply", D(M, FF), act, up);
  uint32_t dn = OP(g, "matmul", &mm_attr, D(M, H), gu, w_d);
  return OP0(g, "add", D(M, H), h1, dn);
}

/* layers == 0: one decoder layer alone (x and pos are its inputs);
 * else the whole stack with embedding, final norm and LM head. */
void build(graph *g, int layers, ccache_fp_ref *out) {
  memset(g, 0, sizeof *g);
  if (layers == 0) {
    uint32_t x = PARAM(g, M, H), pos = PARAM(g, M);
    *out = (ccache_fp_ref){decoder_layer(g, x, pos), 0};
    return;
  }
  uint32_t tok = PARAM(g, M), pos = PARAM(g, M), emb = PARAM(g, 49152, H);
  uint32_t h = OP(g, "gather", &axis_seq, D(M, H), emb, tok);
  for (int l = 0; l < layers; l++) h = decoder_layer(g, h, pos);
  uint32_t fn = PARAM(g, H);
  uint32_t hn = OP(g, "rms_norm", &norm_attr, D(M, H), h, fn);
  *out = (ccache_fp_ref){OP(g, "matmul", &mm_bt_attr, D(M, 49152), hn, emb), 0};
}

__attribute__((noipa)) ccache_key graph_key(const graph *g, const ccache_fp_ref *out,
                                            ccache_key *scratch) {
  ccache_key k;
  BENCH_OK(ccache_fp_graph(g->nodes, g->n, out, 1, "cpu", scratch, &k));
  return k;
}

static void graph_bench(bench_report *rep, const bench_opts *o, int layers) {
  graph *g = malloc(sizeof *g);
  ccache_key *scratch = malloc(MAXN * sizeof *scratch);
  BENCH_CHECK(g && scratch, "out of memory");
  ccache_fp_ref out;
  build(g, layers, &out);
  /* Real errors: deterministic; a changed dim changes the key. */
  ccache_key k0 = graph_key(g, &out, scratch);
  g->dims[g->n / 2][0]++;
  ccache_key k1 = graph_key(g, &out, scratch);
  g->dims[g->n / 2][0]--;
  BENCH_CHECK(k0.lo != k1.lo || k0.hi != k1.hi, "a changed dim did not change the graph key");

  const int reps = o->quick ? 3 : 15;
  /* Enough calls per repetition for ~5 ms (quick: ~1 ms). */
  size_t calls = (size_t)((o->quick ? 20000 : 100000) / (double)g->n) + 1;
  unsigned char nodebuf[160];
  memset(nodebuf, 0x5a, sizeof nodebuf);
  double *tg = malloc(sizeof(double) * (size_t)reps), *tx = malloc(sizeof(double) * (size_t)reps),
         *ratio = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(tg && tx && ratio, "out of memory");
  for (int r = -1; r < reps; r++) { /* r == -1: warm-up */
    uint64_t t0 = bench_now_ns();
    for (size_t c = 0; c < calls; c++) {
      ccache_key k = graph_key(g, &out, scratch);
      BENCH_CHECK(k.lo == k0.lo && k.hi == k0.hi, "graph key not deterministic");
    }
    uint64_t t1 = bench_now_ns();
    uint64_t acc = 0;
    for (size_t c = 0; c < calls * g->n; c++) {
      nodebuf[0] = (unsigned char)c;
      acc += XXH3_128bits(nodebuf, sizeof nodebuf).low64;
    }
    sink = acc;
    uint64_t t2 = bench_now_ns();
    if (r < 0) continue;
    tg[r] = (double)(t1 - t0) / (double)(calls * g->n);
    tx[r] = (double)(t2 - t1) / (double)(calls * g->n);
    ratio[r] = tg[r] / tx[r];
  }
  char fig[96];
  if (layers == 0)
    snprintf(fig, sizeof fig, "P5 ccache_fp_graph, one decoder layer (%zu nodes)", g->n);
  else
    snprintf(fig, sizeof fig, "ccache_fp_graph, %d-layer stack + head (%zu nodes)", layers, g->n);
  bench_add(rep, fig, bench_stats(tg, reps).med, "ns/node", bench_stats(tx, reps).med,
            "XXH3_128bits of 160 B", bench_stats(ratio, reps), "graph / XXH3 per node",
            layers == 0 ? BENCH_VALUE_LE : BENCH_REPORT, 40.0);
  free(tg);
  free(tx);
  free(ratio);
  free(scratch);
  free(g);
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(argc, argv, &o,
              "P5: fingerprint throughput vs raw XXH3-128; ns/node of a decoder graph", false);
  bench_report rep;
  bench_report_init(&rep, "bench_fingerprint",
                    "what does a key cost? (bytes vs raw XXH3-128; graph ns/node)");
  bench_pin(0);
  bytes_bench(&rep, &o);
  graph_bench(&rep, &o, 0);
  graph_bench(&rep, &o, 30);
  strong_bytes_bench(&rep, &o);
  strong_graph_bench(&rep, &o, 0);
  strong_graph_bench(&rep, &o, 30);
  bench_note(&rep,
             "bytes: one-shot XXH3 over the same 64 MiB buffer, in the same repetition; "
             "ratio = best XXH3 time / ccache time (1 = as fast as raw XXH3)");
  bench_note(&rep,
             "graph: SmolLM2-135M shapes (hidden 576, 9x64 heads, 3 KV heads, FF 1536, "
             "vocab 49152), decode M=1 with 64 cached positions");
  if (o.quick) bench_note(&rep, "quick mode: 3 repetitions");
  return bench_report_print(&rep, &o);
}
