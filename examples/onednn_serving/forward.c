/* forward.c: SmolLM2's decoder layer built from oneDNN primitives.
 *
 * Per layer and step (M new tokens, context T = pos + M):
 *   RMSNorm                         C loop (oneDNN 2.6 has no RMS norm)
 *   q/k/v projections               matmul x3 (k and v share one program)
 *   RoPE, KV-cache append           C loops
 *   scores = Q K^T / sqrt(d)        batched matmul + eltwise-linear post-op
 *   causal mask                     C loop (prefill only)
 *   softmax over the context        softmax primitive
 *   attn = P V                      batched matmul
 *   o projection                    matmul (same program as q: 576x576)
 *   residual add                    binary add primitive
 *   RMSNorm                         C loop
 *   up projection                   matmul
 *   SiLU(gate) * up                 matmul + swish and binary-mul post-ops
 *   down projection                 matmul
 *   residual add                    binary add primitive
 * then the final RMSNorm (C) and the tied LM head (matmul over the embedding
 * table read transposed through strides) for the last position.
 *
 * Grouped-query attention without copies: the 9 query heads are viewed as
 * [3 kv groups][3 heads per group][M][64] straight out of the q projection's
 * [M][576] output (through strides), and K/V as [3 groups][1][...], so the
 * matmul broadcasts each KV head over its group.  The attention output is
 * written through strides straight into [M][576] for the o projection.
 */
#include "forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int forward_tables_init(forward_tables *t, const model_config *cfg, int cap) {
  int half = cfg->head_dim / 2;
  t->cap = cap;
  t->cos = malloc((size_t)cap * (size_t)half * sizeof *t->cos);
  t->sin = malloc((size_t)cap * (size_t)half * sizeof *t->sin);
  if (!t->cos || !t->sin) {
    forward_tables_free(t);
    return -1;
  }
  for (int p = 0; p < cap; p++)
    for (int i = 0; i < half; i++) {
      double freq = pow(cfg->rope_theta, -2.0 * i / cfg->head_dim);
      t->cos[(size_t)p * half + i] = (float)cos(p * freq);
      t->sin[(size_t)p * half + i] = (float)sin(p * freq);
    }
  return 0;
}

void forward_tables_free(forward_tables *t) {
  free(t->cos);
  free(t->sin);
  t->cos = t->sin = NULL;
}

int sequence_init(sequence *s, const model_config *c, int cap) {
  memset(s, 0, sizeof *s);
  size_t n = (size_t)cap, hq = (size_t)c->heads * c->head_dim,
         hkv = (size_t)c->kv_heads * c->head_dim;
  size_t kv = (size_t)c->layers * hkv * n;
  s->cap = cap;
  s->kcache = malloc(kv * sizeof(float));
  s->vcache = malloc(kv * sizeof(float));
  s->h = malloc(n * c->hidden * sizeof(float));
  s->xn = malloc(n * c->hidden * sizeof(float));
  s->q = malloc(n * hq * sizeof(float));
  s->k = malloc(n * hkv * sizeof(float));
  s->v = malloc(n * hkv * sizeof(float));
  s->attn = malloc(n * hq * sizeof(float));
  s->tmp = malloc(n * c->hidden * sizeof(float));
  s->up = malloc(n * c->intermediate * sizeof(float));
  s->act = malloc(n * c->intermediate * sizeof(float));
  s->scores = malloc((size_t)c->heads * n * n * sizeof(float));
  s->logits = malloc((size_t)c->vocab * sizeof(float));
  if (!s->kcache || !s->vcache || !s->h || !s->xn || !s->q || !s->k || !s->v || !s->attn ||
      !s->tmp || !s->up || !s->act || !s->scores || !s->logits) {
    sequence_free(s);
    return -1;
  }
  return 0;
}

void sequence_free(sequence *s) {
  float *bufs[] = {s->kcache, s->vcache, s->h,  s->xn,  s->q,      s->k,     s->v,
                   s->attn,   s->tmp,    s->up, s->act, s->scores, s->logits};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
  memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------------- */
/* The plain C ops.                                                        */

static void rmsnorm(const float *x, const float *gain, float *y, int rows, int n, float eps) {
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (size_t)r * n;
    float *yr = y + (size_t)r * n;
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += xr[i] * xr[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) yr[i] = xr[i] * inv * gain[i];
  }
}

/* Llama-style rotary embedding (rotate-half pairing) on [rows][heads*D]. */
static void rope(const forward_tables *t, float *x, int rows, int heads, int D, int pos0) {
  int half = D / 2;
  for (int m = 0; m < rows; m++) {
    const float *c = t->cos + (size_t)(pos0 + m) * half, *s = t->sin + (size_t)(pos0 + m) * half;
    for (int h = 0; h < heads; h++) {
      float *b = x + ((size_t)m * heads + h) * D;
      for (int i = 0; i < half; i++) {
        float a0 = b[i], a1 = b[i + half];
        b[i] = a0 * c[i] - a1 * s[i];
        b[i + half] = a1 * c[i] + a0 * s[i];
      }
    }
  }
}

/* Copy the step's K or V rows [M][kv_heads*D] into the layer's cache
 * [kv_heads][cap][D] at positions pos..pos+M-1. */
static void kv_append(float *cache, const float *rows, int M, int kvh, int D, int cap, int pos) {
  for (int g = 0; g < kvh; g++)
    for (int m = 0; m < M; m++)
      memcpy(cache + ((size_t)g * cap + pos + m) * D, rows + ((size_t)m * kvh + g) * D,
             (size_t)D * sizeof(float));
}

/* Query row m (position pos+m) may not see positions after its own. */
static void causal_mask(float *scores, int heads, int M, int T, int pos) {
  for (int h = 0; h < heads; h++)
    for (int m = 0; m < M; m++) {
      float *row = scores + ((size_t)h * M + m) * T;
      for (int j = pos + m + 1; j < T; j++) row[j] = -INFINITY;
    }
}

static void embed(const model *mdl, const int32_t *tokens, int M, float *h) {
  int H = mdl->cfg.hidden;
  for (int m = 0; m < M; m++)
    memcpy(h + (size_t)m * H, mdl->embed + (size_t)tokens[m] * H, (size_t)H * sizeof(float));
}

/* ---------------------------------------------------------------------- */
/* Primitive specs.                                                        */

static tensor_spec t_2d(int64_t rows, int64_t cols) {
  int64_t d[2] = {rows, cols};
  return tensor_dense(2, d);
}

static tensor_spec t_4d(int64_t a, int64_t b, int64_t c, int64_t d, int64_t sa, int64_t sb,
                        int64_t sc, int64_t sd) {
  return (tensor_spec){.ndims = 4, .dims = {a, b, c, d}, .strides = {sa, sb, sc, sd}};
}

static prim_spec matmul_spec(int64_t M, int64_t K, int64_t N) {
  return (prim_spec){.kind = OP_MATMUL, .src = t_2d(M, K), .wei = t_2d(K, N), .dst = t_2d(M, N)};
}

static prim_spec add_spec(int64_t M, int64_t N) {
  return (prim_spec){
      .kind = OP_BINARY_ADD, .src = t_2d(M, N), .wei = t_2d(M, N), .dst = t_2d(M, N)};
}

/* The shapes of the attention step; T may be DNNL_RUNTIME_DIM_VAL. */
typedef struct attn_shapes {
  tensor_spec q, k, s, v, o;
} attn_shapes;

static attn_shapes attention_shapes(const model_config *c, int cap, int64_t M, int64_t T) {
  int64_t G = c->kv_heads, R = c->heads / c->kv_heads, D = c->head_dim, HQ = (int64_t)c->heads * D;
  int64_t kvs = (int64_t)cap * D; /* one KV head's slab in the cache */
  int rt = T == DNNL_RUNTIME_DIM_VAL;
  attn_shapes a;
  a.q = t_4d(G, R, M, D, R * D, D, HQ, 1);
  a.k = t_4d(G, 1, D, T, kvs, kvs, 1, D); /* K^T, read through strides */
  a.s = rt ? t_4d(G, R, M, T, T, T, T, 1) : t_4d(G, R, M, T, R * M * T, M * T, T, 1);
  a.v = t_4d(G, 1, T, D, kvs, kvs, D, 1);
  a.o = a.q; /* written back as [M][heads*D] */
  return a;
}

/* One primitive call: spec + call site + buffers. */
static int call(prim_ctx *ctx, prim_worker *w, int layer, const char *name, const float *weights,
                const prim_spec *spec, const prim_args *args) {
  call_site site = {.layer = layer, .name = name, .weights = weights};
  return prims_run(ctx, w, &site, spec, args);
}

static int attention(const model *mdl, const forward_opts *opt, prim_ctx *ctx, prim_worker *w,
                     sequence *s, int l, int M) {
  const model_config *c = &mdl->cfg;
  int T = s->pos + M;
  size_t layer_off = (size_t)l * c->kv_heads * s->cap * c->head_dim;
  const float *kc = s->kcache + layer_off, *vc = s->vcache + layer_off;
  attn_shapes concrete = attention_shapes(c, s->cap, M, T);
  attn_shapes a =
      opt->runtime_dims ? attention_shapes(c, s->cap, M, DNNL_RUNTIME_DIM_VAL) : concrete;
  const tensor_spec *rk = opt->runtime_dims ? &concrete.k : NULL;
  const tensor_spec *rs = opt->runtime_dims ? &concrete.s : NULL;
  const tensor_spec *rv = opt->runtime_dims ? &concrete.v : NULL;

  prim_spec scores = {.kind = OP_MATMUL,
                      .src = a.q,
                      .wei = a.k,
                      .dst = a.s,
                      .n_post = 1,
                      .post = {{.kind = POST_SCALE, .alpha = 1.0f / sqrtf((float)c->head_dim)}}};
  prim_args sa = {.src = s->q, .wei = kc, .dst = s->scores, .rt_wei = rk, .rt_dst = rs};
  if (call(ctx, w, l, "attn_scores", NULL, &scores, &sa) != 0) return -1;

  if (M > 1) causal_mask(s->scores, c->heads, M, T, s->pos);

  /* Softmax has no runtime dims in oneDNN 2.6: one program per (M, T). */
  prim_spec sm = {.kind = OP_SOFTMAX,
                  .src = t_2d((int64_t)c->heads * M, T),
                  .dst = t_2d((int64_t)c->heads * M, T),
                  .axis = 1};
  prim_args ma = {.src = s->scores, .dst = s->scores};
  if (call(ctx, w, l, "attn_softmax", NULL, &sm, &ma) != 0) return -1;

  prim_spec values = {.kind = OP_MATMUL, .src = a.s, .wei = a.v, .dst = a.o};
  prim_args va = {.src = s->scores, .wei = vc, .dst = s->attn, .rt_src = rs, .rt_wei = rv};
  return call(ctx, w, l, "attn_values", NULL, &values, &va);
}

static int layer_forward(const model *mdl, const forward_tables *tab, const forward_opts *opt,
                         prim_ctx *ctx, prim_worker *w, sequence *s, int l, int M) {
  const model_config *c = &mdl->cfg;
  const layer_weights *lw = &mdl->layers[l];
  int H = c->hidden, HQ = c->heads * c->head_dim, HKV = c->kv_heads * c->head_dim;
  int I = c->intermediate;
  float eps = (float)c->rms_eps;

  rmsnorm(s->h, lw->attn_norm, s->xn, M, H, eps);
  prim_spec q = matmul_spec(M, H, HQ), kv = matmul_spec(M, H, HKV);
  prim_args qa = {.src = s->xn, .dst = s->q}, ka = {.src = s->xn, .dst = s->k},
            va = {.src = s->xn, .dst = s->v};
  if (call(ctx, w, l, "q_proj", lw->wq, &q, &qa) || call(ctx, w, l, "k_proj", lw->wk, &kv, &ka) ||
      call(ctx, w, l, "v_proj", lw->wv, &kv, &va))
    return -1;
  rope(tab, s->q, M, c->heads, c->head_dim, s->pos);
  rope(tab, s->k, M, c->kv_heads, c->head_dim, s->pos);
  size_t layer_off = (size_t)l * c->kv_heads * s->cap * c->head_dim;
  kv_append(s->kcache + layer_off, s->k, M, c->kv_heads, c->head_dim, s->cap, s->pos);
  kv_append(s->vcache + layer_off, s->v, M, c->kv_heads, c->head_dim, s->cap, s->pos);
  if (attention(mdl, opt, ctx, w, s, l, M) != 0) return -1;

  prim_spec o = matmul_spec(M, HQ, H), add = add_spec(M, H);
  prim_args oa = {.src = s->attn, .dst = s->tmp};
  prim_args ra = {.src = s->h, .wei = s->tmp, .dst = s->h}; /* in place */
  if (call(ctx, w, l, "o_proj", lw->wo, &o, &oa) ||
      call(ctx, w, l, "attn_residual", NULL, &add, &ra))
    return -1;

  rmsnorm(s->h, lw->mlp_norm, s->xn, M, H, eps);
  prim_spec up = matmul_spec(M, H, I), gate = matmul_spec(M, H, I), down = matmul_spec(M, I, H);
  gate.n_post = 2;
  gate.post[0] = (post_op){.kind = POST_SWISH, .alpha = 1.0f}; /* SiLU */
  gate.post[1] = (post_op){.kind = POST_MUL, .src1 = t_2d(M, I)};
  prim_args ua = {.src = s->xn, .dst = s->up};
  prim_args ga = {.src = s->xn, .dst = s->act, .post_src1 = {NULL, s->up}};
  prim_args da = {.src = s->act, .dst = s->tmp};
  if (call(ctx, w, l, "up_proj", lw->wup, &up, &ua) ||
      call(ctx, w, l, "gate_proj", lw->wgate, &gate, &ga) ||
      call(ctx, w, l, "down_proj", lw->wdown, &down, &da) ||
      call(ctx, w, l, "mlp_residual", NULL, &add, &ra))
    return -1;
  return 0;
}

/* Final norm on the last position and the tied LM head: the embedding table
 * [vocab][hidden] read as a [hidden][vocab] weights matrix via strides. */
static int lm_head(const model *mdl, prim_ctx *ctx, prim_worker *w, sequence *s, int M) {
  const model_config *c = &mdl->cfg;
  int H = c->hidden;
  rmsnorm(s->h + (size_t)(M - 1) * H, mdl->final_norm, s->xn, 1, H, (float)c->rms_eps);
  prim_spec head = {.kind = OP_MATMUL,
                    .src = t_2d(1, H),
                    .wei = {.ndims = 2, .dims = {H, c->vocab}, .strides = {1, H}},
                    .dst = t_2d(1, c->vocab)};
  prim_args a = {.src = s->xn, .dst = s->logits};
  return call(ctx, w, -1, "lm_head", mdl->embed, &head, &a);
}

int forward_step(const model *m, const forward_tables *tab, const forward_opts *opt, prim_ctx *ctx,
                 prim_worker *w, sequence *s, const int32_t *tokens, int n_tokens) {
  if (n_tokens < 1 || s->pos + n_tokens > s->cap || s->pos + n_tokens > tab->cap) return -1;
  embed(m, tokens, n_tokens, s->h);
  for (int l = 0; l < m->cfg.layers; l++)
    if (layer_forward(m, tab, opt, ctx, w, s, l, n_tokens) != 0) return -1;
  s->pos += n_tokens;
  return lm_head(m, ctx, w, s, n_tokens);
}

int32_t forward_argmax(const float *logits, int vocab) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; i++)
    if (logits[i] > logits[best]) best = i;
  return best;
}
