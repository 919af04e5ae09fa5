/* fingerprint_support.c - see fingerprint_support.h. */
#include <stdlib.h>
#include <string.h>

#include "fingerprint_support.h"

ccache_key gkey(const ccache_fp_node *nodes, size_t n, const ccache_fp_ref *outs, size_t n_outs,
                const char *device) {
  ccache_key scratch[MAX_NODES];
  ccache_key k = {0, 0};
  assert_true(n <= MAX_NODES);
  assert_int_equal(ccache_fp_graph(nodes, n, outs, n_outs, device, scratch, &k), CCACHE_OK);
  return k;
}

const char DEV_A[] = "cpu:avx2";
const char DEV_B[] = "cpu:avx512";
const char OP_A[] = "matmul";
const char OP_B[] = "matmuL";

void fixture_init(fixture *f) {
  memset(f, 0, sizeof *f);
  f->x_dims[0] = 2, f->x_dims[1] = 3;
  f->w_dims[0] = 256, f->w_dims[1] = 1024;
  f->mm_dims[0] = 2, f->mm_dims[1] = 1024;
  f->half_dims[0] = 2, f->half_dims[1] = 512;
  f->x_t = (ccache_fp_tensor){DT_F32, 2, f->x_dims};
  f->w_t = (ccache_fp_tensor){DT_F32, 2, f->w_dims};
  f->mm_t = (ccache_fp_tensor){DT_F32, 2, f->mm_dims};
  f->half_t[0] = f->half_t[1] = (ccache_fp_tensor){DT_F32, 2, f->half_dims};
  f->y_t = f->half_t[0];
  memcpy(f->attrs, "\x01\x00\x07\x09", 4);
  f->weights = malloc(MIB);
  assert_non_null(f->weights);
  for (size_t i = 0; i < MIB; i++) f->weights[i] = (unsigned char)(i * 131u + 7u);

  f->nodes[0] = param_node(0, &f->x_t);
  f->nodes[1] = op_node("constant", NULL, 0, &f->w_t);
  f->nodes[1].constant = f->weights;
  f->nodes[1].constant_len = MIB;
  f->mm_ops[0] = (ccache_fp_ref){0, 0};
  f->mm_ops[1] = (ccache_fp_ref){1, 0};
  f->nodes[2] = op_node(OP_A, f->mm_ops, 2, &f->mm_t);
  f->nodes[2].attrs = f->attrs;
  f->nodes[2].attrs_len = sizeof f->attrs;
  f->split_ops[0] = (ccache_fp_ref){2, 0};
  f->nodes[3] = op_node("split", f->split_ops, 1, f->half_t);
  f->nodes[3].n_outputs = 2;
  f->nodes[4] = param_node(1, &f->y_t);
  f->add_ops[0] = (ccache_fp_ref){3, 0};
  f->add_ops[1] = (ccache_fp_ref){4, 0};
  f->nodes[5] = op_node("add", f->add_ops, 2, &f->y_t);
  f->outs[0] = (ccache_fp_ref){5, 0};
  f->outs[1] = (ccache_fp_ref){3, 1};
  f->device = DEV_A;
}

void fixture_free(fixture *f) { free(f->weights); }

ccache_key fixture_key(const fixture *f) { return gkey(f->nodes, 6, f->outs, 2, f->device); }
