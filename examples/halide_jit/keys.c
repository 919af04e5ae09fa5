/* keys.c: one ccache_fp stream per key. */
#include "keys.h"

#include <string.h>

static void str(ccache_fp *fp, const char *s) { ccache_fp_str(fp, s, strlen(s)); }

int hj_program_key(const hj_spec *s, const hj_ident *id, ccache_key *out) {
  ccache_fp fp;
  ccache_fp_init(&fp);
  str(&fp, "halide_jit");
  ccache_fp_u64(&fp, HJ_BUILDER_VERSION);
  str(&fp, hj_kind_name(s->kind));
  ccache_fp_u64(&fp, s->sched.vector);
  ccache_fp_u64(&fp, s->sched.parallel);
  const uint64_t dims[] = {HJ_HIDDEN, HJ_INTERMEDIATE, HJ_HEADS, HJ_KV_HEADS, HJ_HEAD_DIM};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) ccache_fp_u64(&fp, dims[i]);
  ccache_fp_f64(&fp, (double)HJ_RMS_EPS);
  str(&fp, id->target);
  str(&fp, id->halide);
  str(&fp, id->cc);
  str(&fp, HJ_LINK_FLAGS " " HJ_LINK_LIBS);
  return ccache_fp_final(&fp, out);
}

int hj_site_key(uint32_t layer, uint32_t slot, ccache_key pkey, ccache_key *out) {
  ccache_fp fp;
  ccache_fp_init(&fp);
  str(&fp, "halide_jit call site");
  ccache_fp_u64(&fp, layer);
  ccache_fp_u64(&fp, slot);
  ccache_fp_u64(&fp, pkey.lo);
  ccache_fp_u64(&fp, pkey.hi);
  return ccache_fp_final(&fp, out);
}
