/* codegen.c: C source generation, one emitter per op.
 *
 * Like Inductor's CPU backend, every loop bound and model constant is a
 * literal in the generated code, so the compiler sees fixed trip counts.
 * Floats are printed with 9 significant digits, which round-trips every
 * float exactly (so a kernel uses bit for bit the constants the reference
 * computes), and always with a point ("1f" is not C; "1.00000000f" is). */
#include "codegen.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "reference.h"

#define D    KJ_HEAD_DIM
#define NQKV (KJ_HEADS + KJ_KV_HEADS)

static void emit_rmsnorm(FILE *f, kj_spec s) {
  fprintf(f,
          "void kj_kernel(const float *restrict x, const float *restrict w, float *restrict y) {\n"
          "  for (long t = 0; t < %u; t++) {\n"
          "    const float *xr = x + t * %d;\n"
          "    float *yr = y + t * %d;\n"
          "    float ss = 0.0f;\n"
          "    for (int i = 0; i < %d; i++) ss += xr[i] * xr[i];\n"
          "    const float r = 1.0f / sqrtf(ss / %d.0f + %#.9gf);\n"
          "    for (int i = 0; i < %d; i++) yr[i] = xr[i] * r * w[i];\n"
          "  }\n"
          "}\n",
          s.q_len, KJ_HIDDEN, KJ_HIDDEN, KJ_HIDDEN, KJ_HIDDEN, (double)(float)KJ_RMS_EPS,
          KJ_HIDDEN);
}

static void emit_silu_mul(FILE *f, kj_spec s) {
  fprintf(f,
          "void kj_kernel(const float *restrict g, const float *restrict u, float *restrict y) {\n"
          "  for (long i = 0; i < %zu; i++) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];\n"
          "}\n",
          kj_spec_out(s));
}

/* The rotation frequencies are constants: a table in the source. */
static void emit_rope(FILE *f, kj_spec s) {
  float inv_freq[D / 2];
  kj_rope_inv_freq(inv_freq);
  fprintf(f, "static const float inv_freq[%d] = {", D / 2);
  for (int i = 0; i < D / 2; i++) fprintf(f, "%s%#.9gf", i ? ", " : "", (double)inv_freq[i]);
  fprintf(f, "};\n");
  fprintf(
      f,
      "void kj_kernel(const float *restrict x, const float *restrict unused, float *restrict y) {\n"
      "  (void)unused;\n"
      "  for (long t = 0; t < %u; t++) {\n"
      "    const float pos = (float)(t + %u);\n"
      "    float c[%d], s[%d];\n"
      "    for (int i = 0; i < %d; i++) {\n"
      "      const float ang = pos * inv_freq[i];\n"
      "      c[i] = cosf(ang);\n"
      "      s[i] = sinf(ang);\n"
      "    }\n"
      "    for (int h = 0; h < %d; h++) {\n"
      "      const float *xr = x + (t * %d + h) * %d;\n"
      "      float *yr = y + (t * %d + h) * %d;\n"
      "      for (int i = 0; i < %d; i++) {\n"
      "        const float x1 = xr[i], x2 = xr[i + %d];\n"
      "        yr[i] = x1 * c[i] - x2 * s[i];\n"
      "        yr[i + %d] = x2 * c[i] + x1 * s[i];\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n",
      s.q_len, s.kv_len - s.q_len, D / 2, D / 2, D / 2, NQKV, NQKV, D, NQKV, D, D / 2, D / 2,
      D / 2);
}

static void emit_residual(FILE *f, kj_spec s) {
  fprintf(f,
          "void kj_kernel(const float *restrict a, const float *restrict b, float *restrict y) {\n"
          "  for (long i = 0; i < %zu; i++) y[i] = a[i] + b[i];\n"
          "}\n",
          kj_spec_out(s));
}

/* Row t of head h is query position kv_len - q_len + t: it sees keys 0..pos. */
static void emit_softmax(FILE *f, kj_spec s) {
  fprintf(
      f,
      "void kj_kernel(const float *restrict x, const float *restrict unused, float *restrict y) {\n"
      "  (void)unused;\n"
      "  for (long h = 0; h < %d; h++)\n"
      "    for (long t = 0; t < %u; t++) {\n"
      "      const long last = t + %u;\n"
      "      const float *xr = x + (h * %u + t) * %u;\n"
      "      float *yr = y + (h * %u + t) * %u;\n"
      "      float m = -INFINITY;\n"
      "      for (long j = 0; j <= last; j++) {\n"
      "        const float v = xr[j] * %#.9gf;\n"
      "        if (v > m) m = v;\n"
      "      }\n"
      "      float sum = 0.0f;\n"
      "      for (long j = 0; j <= last; j++) {\n"
      "        yr[j] = expf(xr[j] * %#.9gf - m);\n"
      "        sum += yr[j];\n"
      "      }\n"
      "      const float inv = 1.0f / sum;\n"
      "      for (long j = 0; j <= last; j++) yr[j] *= inv;\n"
      "      for (long j = last + 1; j < %u; j++) yr[j] = 0.0f;\n"
      "    }\n"
      "}\n",
      KJ_HEADS, s.q_len, s.kv_len - s.q_len, s.q_len, s.kv_len, s.q_len, s.kv_len,
      (double)kj_softmax_scale(), (double)kj_softmax_scale(), s.kv_len);
}

char *kj_codegen(kj_spec s, ccache_key key) {
  char *src = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&src, &len);
  if (!f) return NULL;
  fprintf(f,
          "/* kernel_jit v%u: %s, q_len %u, kv_len %u (SmolLM2-135M) */\n"
          "#include <math.h>\n"
          "const unsigned long long kj_key[2] = {0x%016" PRIx64 "ull, 0x%016" PRIx64 "ull};\n",
          KJ_CODEGEN_VERSION, kj_op_name(s.op), s.q_len, s.kv_len, key.lo, key.hi);
  switch (s.op) {
    case KJ_OP_RMSNORM:
      emit_rmsnorm(f, s);
      break;
    case KJ_OP_SILU_MUL:
      emit_silu_mul(f, s);
      break;
    case KJ_OP_ROPE:
      emit_rope(f, s);
      break;
    case KJ_OP_RESIDUAL:
      emit_residual(f, s);
      break;
    case KJ_OP_SOFTMAX:
      emit_softmax(f, s);
      break;
    default:
      break;
  }
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    free(src);
    return NULL;
  }
  return src;
}
