/* keys.c: one ccache_fp stream per kernel. */
#include "keys.h"

#include <string.h>

#include "codegen.h"

static void str(ccache_fp *fp, const char *s) { ccache_fp_str(fp, s, strlen(s)); }

int kj_program_key(kj_spec s, const kj_compiler *cc, ccache_key *out) {
  ccache_fp fp;
  ccache_fp_init(&fp);
  str(&fp, "kernel_jit");
  ccache_fp_u64(&fp, KJ_CODEGEN_VERSION);
  str(&fp, kj_op_name(s.op));
  ccache_fp_u64(&fp, s.q_len);
  ccache_fp_u64(&fp, s.kv_len);
  const uint64_t dims[] = {KJ_HIDDEN, KJ_INTERMEDIATE, KJ_HEADS, KJ_KV_HEADS, KJ_HEAD_DIM};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) ccache_fp_u64(&fp, dims[i]);
  ccache_fp_f64(&fp, (double)KJ_RMS_EPS);
  ccache_fp_f64(&fp, (double)KJ_ROPE_THETA);
  str(&fp, cc->version);
  str(&fp, KJ_CC_FLAGS " " KJ_CC_LIBS);
  str(&fp, cc->target);
  /* Appends cannot fail on an initialised builder with valid data; final
   * reports it if one did. */
  return ccache_fp_final(&fp, out);
}
