/* keys.c: the program and closure keys of a primitive request. */
#include "keys.h"

#include <string.h>

static void fp_tensor(ccache_fp *fp, const tensor_spec *t) {
  ccache_fp_shape(fp, dnnl_f32, (uint32_t)t->ndims, t->dims);
  /* Only the used strides: the rest of dnnl_dims_t is not part of the layout. */
  ccache_fp_bytes(fp, t->strides, (size_t)t->ndims * sizeof t->strides[0]);
}

/* The structure's fields, after the builder's start. */
static void fp_structure_fields(ccache_fp *fp, const prim_spec *s) {
  ccache_fp_str(fp, "onednn-2.6/cpu", 14);
  /* Every primitive is built with the user-managed scratchpad (prims_dnnl.c); a
   * primitive built for oneDNN's own scratchpad would be a different program. */
  ccache_fp_u64(fp, (uint64_t)dnnl_scratchpad_mode_user);
  ccache_fp_u64(fp, (uint64_t)s->kind);
  fp_tensor(fp, &s->src);
  if (s->kind != OP_SOFTMAX) fp_tensor(fp, &s->wei);
  fp_tensor(fp, &s->dst);
  ccache_fp_i64(fp, s->kind == OP_SOFTMAX ? s->axis : 0);
  ccache_fp_u64(fp, (uint64_t)s->n_post);
  for (int i = 0; i < s->n_post; i++) {
    ccache_fp_u64(fp, (uint64_t)s->post[i].kind);
    if (s->post[i].kind == POST_MUL)
      fp_tensor(fp, &s->post[i].src1);
    else
      ccache_fp_f64(fp, s->post[i].alpha);
  }
}

void onednn_fp_structure(ccache_fp *fp, const prim_spec *s) {
  ccache_fp_init(fp);
  fp_structure_fields(fp, s);
}

void onednn_fp_site(ccache_fp *fp, const call_site *site) {
  ccache_fp_str(fp, "site", 4);
  ccache_fp_i64(fp, site->layer);
  ccache_fp_str(fp, site->name, strlen(site->name));
}

/* The structure alone, so the 30 layers share one program.  The example
 * builds it only on a miss (and, outside the timed region, for the count of
 * distinct programs): a hit needs just the closure key. */
int onednn_program_key(const prim_spec *s, ccache_key *out) {
  ccache_fp fp;
  onednn_fp_structure(&fp, s);
  return ccache_fp_final(&fp, out) == CCACHE_OK ? 0 : -1;
}

int onednn_program_key_strong(const prim_spec *s, ccache_strong_key *out) {
  ccache_fp fp;
  if (ccache_fp_init_strong(&fp) != CCACHE_OK) return -1;
  fp_structure_fields(&fp, s);
  return ccache_fp_final_strong(&fp, out) == CCACHE_OK ? 0 : -1;
}

int onednn_closure_key_strong(const call_site *site, const prim_spec *s, ccache_strong_key *out) {
  ccache_fp fp;
  if (ccache_fp_init_strong(&fp) != CCACHE_OK) return -1;
  fp_structure_fields(&fp, s);
  onednn_fp_site(&fp, site);
  return ccache_fp_final_strong(&fp, out) == CCACHE_OK ? 0 : -1;
}

int onednn_closure_key(const call_site *site, const prim_spec *s, ccache_key *out) {
  ccache_fp fp;
  onednn_fp_structure(&fp, s);
  onednn_fp_site(&fp, site);
  return ccache_fp_final(&fp, out) == CCACHE_OK ? 0 : -1;
}
