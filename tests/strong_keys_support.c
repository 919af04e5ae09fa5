/* strong_keys_support.c - see strong_keys_support.h. */
#include <string.h>

#define XXH_STATIC_LINKING_ONLY 1 /* XXH3_generateSecret_fromSeed() */
#include <xxhash.h>

#include "strong_keys_support.h"

void plant(unsigned char *buf, size_t len, size_t prefix, unsigned lane, unsigned s1, unsigned s2,
           uint32_t delta) {
  unsigned char secret[XXH3_SECRET_DEFAULT_SIZE];
  XXH3_generateSecret_fromSeed(secret, 0);
  for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)(i * 7 + 1);
  const unsigned s[2] = {s1, s2};
  const uint64_t hi[2] = {0x1000u + (uint64_t)delta, 0x2000u - (uint64_t)delta};
  for (int k = 0; k < 2; k++) {
    size_t off = 64u * s[k] + 8u * lane; /* in the stream */
    assert_true(off >= prefix && off + 8 <= prefix + len);
    uint64_t low = le64(secret + 8u * s[k] + 8u * lane) & 0xffffffffu;
    put64(buf + off - prefix, low | hi[k] << 32);
  }
}

static const int64_t d128[] = {128};
static const ccache_fp_tensor t128 = {1, 1, d128};

static ccache_fp_node const_node(const unsigned char *bytes) {
  ccache_fp_node n;
  memset(&n, 0, sizeof n);
  n.op_id = 7;
  n.outputs = &t128;
  n.n_outputs = 1;
  n.constant = bytes;
  n.constant_len = CONST_LEN;
  n.param_index = -1;
  return n;
}

void graph_of(const unsigned char *w, ccache_fp_node nodes[3]) {
  static const ccache_fp_ref add_ops[] = {{0, 0}, {1, 0}};
  memset(nodes, 0, 3 * sizeof *nodes);
  nodes[0].op_name = "parameter";
  nodes[0].outputs = &t128;
  nodes[0].n_outputs = 1;
  nodes[0].param_index = 0;
  nodes[1] = const_node(w);
  nodes[2].op_name = "add";
  nodes[2].outputs = &t128;
  nodes[2].n_outputs = 1;
  nodes[2].operands = add_ops;
  nodes[2].n_operands = 2;
  nodes[2].param_index = -1;
}

const ccache_fp_ref graph_out[1] = {{2, 0}};

ccache_key fast_graph(const unsigned char *w) {
  ccache_fp_node nodes[3];
  graph_of(w, nodes);
  ccache_key scratch[3], k;
  assert_int_equal(ccache_fp_graph(nodes, 3, graph_out, 1, "cpu", scratch, &k), CCACHE_OK);
  return k;
}

ccache_strong_key strong_graph(const unsigned char *w) {
  ccache_fp_node nodes[3];
  graph_of(w, nodes);
  ccache_strong_key scratch[3], k;
  assert_int_equal(ccache_fp_graph_strong(nodes, 3, graph_out, 1, "cpu", scratch, &k), CCACHE_OK);
  return k;
}

unsigned char w_a[CONST_LEN], w_b[CONST_LEN];

void make_pair(void) {
  plant(w_a, CONST_LEN, NODE_PREFIX, 2, 1, 3, 0);
  plant(w_b, CONST_LEN, NODE_PREFIX, 2, 1, 3, 1);
}

void need_strong_fp(void) {
  ccache_fp fp;
  if (ccache_fp_init_strong(&fp) == CCACHE_ENOTSUP) skip();
}
