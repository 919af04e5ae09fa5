/*
 * test_fingerprint_invalid.c - what the fingerprint calls refuse: bad
 * builder calls (NULL arguments, a builder never initialised, a failing
 * append that poisons it until ccache_fp_init()) and every kind of invalid
 * graph, each CCACHE_EINVAL with nothing written.
 */
#include <string.h>

#include "fingerprint_support.h"

static void builder_refuses_bad_calls_and_poisons_until_init(void **state) {
  (void)state;
  ccache_fp fp;
  ccache_key k = {0x1111, 0x2222};
  static const int64_t dims[CCACHE_FP_MAX_RANK + 1] = {0};

  /* NULL builder / out. */
  ccache_fp_init(NULL);
  assert_int_equal(ccache_fp_u64(NULL, 1), CCACHE_EINVAL);
  assert_int_equal(ccache_fp_i64(NULL, 1), CCACHE_EINVAL);
  assert_int_equal(ccache_fp_f64(NULL, 1), CCACHE_EINVAL);
  assert_int_equal(ccache_fp_bytes(NULL, "a", 1), CCACHE_EINVAL);
  assert_int_equal(ccache_fp_str(NULL, "a", 1), CCACHE_EINVAL);
  assert_int_equal(ccache_fp_shape(NULL, 1, 0, NULL), CCACHE_EINVAL);
  assert_int_equal(ccache_fp_final(NULL, &k), CCACHE_EINVAL);
  ccache_fp_init(&fp);
  assert_int_equal(ccache_fp_final(&fp, NULL), CCACHE_EINVAL);

  /* A builder that never saw ccache_fp_init() is refused. */
  ccache_fp zero;
  memset(&zero, 0, sizeof zero);
  assert_int_equal(ccache_fp_u64(&zero, 1), CCACHE_EINVAL);
  assert_int_equal(ccache_fp_final(&zero, &k), CCACHE_EINVAL);

  /* Each failing append poisons: later appends and final fail, *out is
   * untouched, and ccache_fp_init() starts over. */
  for (int c = 0; c < 4; c++) {
    ccache_fp_init(&fp);
    assert_int_equal(ccache_fp_u64(&fp, 5), CCACHE_OK);
    int rc = c == 0   ? ccache_fp_bytes(&fp, NULL, 1)
             : c == 1 ? ccache_fp_str(&fp, NULL, 3)
             : c == 2 ? ccache_fp_shape(&fp, DT_F32, CCACHE_FP_MAX_RANK + 1, dims)
                      : ccache_fp_shape(&fp, DT_F32, 2, NULL);
    assert_int_equal(rc, CCACHE_EINVAL);
    assert_int_equal(ccache_fp_u64(&fp, 6), CCACHE_EINVAL);
    assert_int_equal(ccache_fp_final(&fp, &k), CCACHE_EINVAL);
    assert_true(k.lo == 0x1111 && k.hi == 0x2222);
  }
  ccache_fp_init(&fp);
  assert_int_equal(ccache_fp_shape(&fp, DT_F32, CCACHE_FP_MAX_RANK, dims), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&fp, &k), CCACHE_OK);
}

/* ------------------------------------------------------------------------ */
/* Graph validation: every bad input is EINVAL and nothing is written. */

typedef struct vgraph {
  int64_t dims[2];
  ccache_fp_tensor t[2];
  ccache_fp_ref ops1[1], ops2[2];
  ccache_fp_node nodes[3];
  ccache_fp_ref outs[1];
  size_t n_nodes, n_outs;
  const char *device;
  int null_nodes, null_outs, null_scratch, null_out;
} vgraph;

/* p0 -> neg(p0) -> add(neg, p0); a valid graph. */
static void vgraph_init(vgraph *g) {
  memset(g, 0, sizeof *g);
  g->dims[0] = 4, g->dims[1] = 4;
  g->t[0] = g->t[1] = (ccache_fp_tensor){DT_F32, 2, g->dims};
  g->ops1[0] = (ccache_fp_ref){0, 0};
  g->ops2[0] = (ccache_fp_ref){1, 0};
  g->ops2[1] = (ccache_fp_ref){0, 0};
  g->nodes[0] = param_node(0, g->t);
  g->nodes[1] = op_node("neg", g->ops1, 1, g->t);
  g->nodes[2] = op_node("add", g->ops2, 2, g->t);
  g->outs[0] = (ccache_fp_ref){2, 0};
  g->n_nodes = 3, g->n_outs = 1;
  g->device = "cpu";
}

static int vgraph_run(const vgraph *g, ccache_key *scratch, ccache_key *out) {
  return ccache_fp_graph(g->null_nodes ? NULL : g->nodes, g->n_nodes, g->null_outs ? NULL : g->outs,
                         g->n_outs, g->device, g->null_scratch ? NULL : scratch,
                         g->null_out ? NULL : out);
}

static int64_t big_rank_dims[CCACHE_FP_MAX_RANK + 1];

static void bad_forward(vgraph *g) { g->ops1[0].node = 2; }
static void bad_self(vgraph *g) { g->ops1[0].node = 1; }
static void bad_range(vgraph *g) { g->ops2[1].node = 99; }
static void bad_operand_slot(vgraph *g) { g->ops2[0].slot = 1; }
static void bad_out_range(vgraph *g) { g->outs[0].node = 3; }
static void bad_out_slot(vgraph *g) { g->outs[0].slot = 1; }
static void bad_rank(vgraph *g) {
  g->t[1].rank = CCACHE_FP_MAX_RANK + 1;
  g->t[1].dims = big_rank_dims;
  g->nodes[1].outputs = &g->t[1];
}
static void bad_null_dims(vgraph *g) { g->t[0].dims = NULL; }
static void bad_attrs(vgraph *g) { g->nodes[1].attrs_len = 3; }
static void bad_constant(vgraph *g) { g->nodes[1].constant_len = 1; }
static void bad_node_outputs(vgraph *g) { g->nodes[2].outputs = NULL; }
static void bad_node_operands(vgraph *g) { g->nodes[2].operands = NULL; }
static void bad_param(vgraph *g) { g->nodes[0].param_index = -2; }
static void bad_null_nodes(vgraph *g) { g->null_nodes = 1; }
static void bad_null_outs(vgraph *g) { g->null_outs = 1; }
static void bad_zero_outs(vgraph *g) { g->n_outs = 0; }
static void bad_device(vgraph *g) { g->device = NULL; }
static void bad_scratch(vgraph *g) { g->null_scratch = 1; }
static void bad_out(vgraph *g) { g->null_out = 1; }
static void bad_no_nodes(vgraph *g) { g->n_nodes = 0; /* the output then points nowhere */ }

static void invalid_graph_is_einval_and_writes_nothing(void **state) {
  (void)state;
  static const struct {
    const char *what;
    void (*apply)(vgraph *g);
  } cases[] = {
      {"operand pointing forward", bad_forward},
      {"operand pointing to itself", bad_self},
      {"operand out of range", bad_range},
      {"operand slot its node lacks", bad_operand_slot},
      {"output out of range", bad_out_range},
      {"output slot its node lacks", bad_out_slot},
      {"rank over CCACHE_FP_MAX_RANK", bad_rank},
      {"NULL dims with rank > 0", bad_null_dims},
      {"NULL attrs with length", bad_attrs},
      {"NULL constant with length", bad_constant},
      {"NULL node outputs with n_outputs > 0", bad_node_outputs},
      {"NULL node operands with n_operands > 0", bad_node_operands},
      {"param_index < -1", bad_param},
      {"NULL nodes with n_nodes > 0", bad_null_nodes},
      {"NULL graph outputs", bad_null_outs},
      {"n_outputs == 0", bad_zero_outs},
      {"NULL device", bad_device},
      {"NULL scratch", bad_scratch},
      {"NULL out", bad_out},
      {"no nodes", bad_no_nodes},
  };
  vgraph g;
  vgraph_init(&g);
  ccache_key scratch[3], out = {0, 0};
  assert_int_equal(vgraph_run(&g, scratch, &out), CCACHE_OK);

  const ccache_key sentinel = {0xdeadbeefcafef00dull, 0x0123456789abcdefull};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    vgraph_init(&g);
    cases[i].apply(&g);
    out = sentinel;
    for (int s = 0; s < 3; s++) scratch[s] = sentinel;
    int rc = vgraph_run(&g, scratch, &out);
    if (rc != CCACHE_EINVAL) fail_msg("%s: got %d, want CCACHE_EINVAL", cases[i].what, rc);
    if (!key_eq(out, sentinel)) fail_msg("%s: *out was written", cases[i].what);
    for (int s = 0; s < 3; s++)
      if (!key_eq(scratch[s], sentinel)) fail_msg("%s: scratch was written", cases[i].what);
  }

  /* The boundary itself is fine: rank CCACHE_FP_MAX_RANK, NULL/0 fields. */
  vgraph_init(&g);
  g.t[1].rank = CCACHE_FP_MAX_RANK;
  g.t[1].dims = big_rank_dims;
  g.nodes[1].outputs = &g.t[1];
  g.nodes[0].attrs = NULL, g.nodes[0].attrs_len = 0;
  assert_int_equal(vgraph_run(&g, scratch, &out), CCACHE_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(builder_refuses_bad_calls_and_poisons_until_init),
      cmocka_unit_test(invalid_graph_is_einval_and_writes_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
