/*
 * test_fingerprint.c - the structural fingerprint builder and graph helper:
 * what changes a key and what does not.
 *
 * Every single field of a graph changes the key (the flip table over the
 * fixture in fingerprint_support.c), as do operand order, an unused
 * parameter, the boundaries and kinds of builder fields, the kinds of graph
 * fields and a double's bits; node order, dead nodes and addresses do not.
 * A final leaves the builder appendable.  The encoding itself is pinned in
 * test_fingerprint_format.c, the refusals in test_fingerprint_invalid.c.
 */
#include <stdlib.h>
#include <string.h>

#include "fingerprint_support.h"

static void operand_order_changes_the_key(void **state) {
  (void)state;
  static const int64_t d4[] = {4};
  static const ccache_fp_tensor t = {DT_F32, 1, d4};
  static const ccache_fp_ref ab[] = {{0, 0}, {1, 0}}, ba[] = {{1, 0}, {0, 0}};
  static const ccache_fp_ref out1[] = {{2, 0}};
  ccache_fp_node g1[3] = {param_node(0, &t), param_node(1, &t), op_node("sub", ab, 2, &t)};
  ccache_fp_node g2[3] = {param_node(0, &t), param_node(1, &t), op_node("sub", ba, 2, &t)};
  assert_key_not_equal(gkey(g1, 3, out1, 1, "cpu"), gkey(g2, 3, out1, 1, "cpu"));
  assert_key_equal(gkey(g1, 3, out1, 1, "cpu"), gkey(g1, 3, out1, 1, "cpu"));

  /* add(mul(p0, p1), p2) vs add(mul(p0, p2), p1) */
  static const ccache_fp_ref m01[] = {{0, 0}, {1, 0}}, m02[] = {{0, 0}, {2, 0}};
  static const ccache_fp_ref a2[] = {{3, 0}, {2, 0}}, a1[] = {{3, 0}, {1, 0}};
  static const ccache_fp_ref out2[] = {{4, 0}};
  ccache_fp_node h1[5] = {param_node(0, &t), param_node(1, &t), param_node(2, &t),
                          op_node("mul", m01, 2, &t), op_node("add", a2, 2, &t)};
  ccache_fp_node h2[5] = {param_node(0, &t), param_node(1, &t), param_node(2, &t),
                          op_node("mul", m02, 2, &t), op_node("add", a1, 2, &t)};
  assert_key_not_equal(gkey(h1, 5, out2, 1, "cpu"), gkey(h2, 5, out2, 1, "cpu"));
}

/* Each flip is an involution on the fixture: applying it twice restores it. */
typedef struct flip {
  const char *what;
  void (*apply)(fixture *f);
} flip;

static void fl_op(fixture *f) { f->nodes[2].op_name = f->nodes[2].op_name == OP_A ? OP_B : OP_A; }
static void fl_attr(fixture *f) { f->attrs[2] ^= 0x01; }
static void fl_dim(fixture *f) { f->x_dims[1] ^= 7; /* 3 <-> 4 */ }
static void fl_dtype(fixture *f) { f->x_t.dtype ^= DT_F32 ^ DT_BF16; }
static void fl_rank(fixture *f) { f->x_t.rank ^= 3; /* 2 <-> 1 */ }
static void fl_const_first(fixture *f) { f->weights[0] ^= 0x80; }
static void fl_const_mid(fixture *f) { f->weights[MIB / 2 + 3] ^= 0x01; }
static void fl_const_last(fixture *f) { f->weights[MIB - 1] ^= 0x01; }
static void fl_out_slot(fixture *f) { f->outs[1].slot ^= 1; }
static void fl_out_node(fixture *f) { f->outs[0].node ^= 7; /* add (5) <-> matmul (2) */ }
static void fl_out_order(fixture *f) {
  ccache_fp_ref t = f->outs[0];
  f->outs[0] = f->outs[1];
  f->outs[1] = t;
}
static void fl_device(fixture *f) { f->device = f->device == DEV_A ? DEV_B : DEV_A; }
static void fl_param_pos(fixture *f) { f->nodes[4].param_index ^= 2; /* 1 <-> 3 */ }
static void fl_param_flag(fixture *f) {
  f->nodes[4].param_index = f->nodes[4].param_index == -1 ? 1 : -1;
}
static void fl_operand_slot(fixture *f) { f->add_ops[0].slot ^= 1; }
static void fl_operand_order(fixture *f) {
  ccache_fp_ref t = f->add_ops[0];
  f->add_ops[0] = f->add_ops[1];
  f->add_ops[1] = t;
}

static void every_single_field_changes_the_key(void **state) {
  (void)state;
  static const flip flips[] = {
      {"op name", fl_op},
      {"attribute byte", fl_attr},
      {"dim", fl_dim},
      {"dtype", fl_dtype},
      {"rank", fl_rank},
      {"constant first byte", fl_const_first},
      {"constant middle byte", fl_const_mid},
      {"constant last byte of 1 MiB", fl_const_last},
      {"output slot", fl_out_slot},
      {"output node", fl_out_node},
      {"output order", fl_out_order},
      {"device", fl_device},
      {"param position", fl_param_pos},
      {"param flag", fl_param_flag},
      {"operand slot", fl_operand_slot},
      {"operand order", fl_operand_order},
  };
  enum { N = sizeof flips / sizeof flips[0] };
  fixture f;
  fixture_init(&f);
  const ccache_key base = fixture_key(&f);
  ccache_key flipped[N];
  for (size_t i = 0; i < N; i++) {
    flips[i].apply(&f);
    flipped[i] = fixture_key(&f);
    if (key_eq(flipped[i], base)) fail_msg("flipping the %s did not change the key", flips[i].what);
    flips[i].apply(&f);
    if (!key_eq(fixture_key(&f), base))
      fail_msg("restoring the %s did not restore the key", flips[i].what);
  }
  /* And no two flips land on the same key. */
  for (size_t i = 0; i < N; i++)
    for (size_t j = i + 1; j < N; j++)
      if (key_eq(flipped[i], flipped[j]))
        fail_msg("flips '%s' and '%s' collide", flips[i].what, flips[j].what);
  fixture_free(&f);
}

static void contents_not_addresses_make_the_key(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  const ccache_key base = fixture_key(&f);

  /* The same bytes at another address: the same key. */
  unsigned char *copy = malloc(MIB);
  assert_non_null(copy);
  memcpy(copy, f.weights, MIB);
  f.nodes[1].constant = copy;
  char dev[sizeof DEV_A];
  memcpy(dev, DEV_A, sizeof dev);
  f.device = dev;
  unsigned char attrs2[sizeof f.attrs];
  memcpy(attrs2, f.attrs, sizeof attrs2);
  f.nodes[2].attrs = attrs2;
  assert_key_equal(fixture_key(&f), base);

  /* The buffer rewritten in place (same address): a new key. */
  copy[12345] ^= 0x5a;
  assert_key_not_equal(fixture_key(&f), base);
  copy[12345] ^= 0x5a;
  assert_key_equal(fixture_key(&f), base);

  /* Builder: the same for bytes fields, small and large. */
  ccache_fp a, b;
  ccache_key ka, kb;
  ccache_fp_init(&a);
  ccache_fp_init(&b);
  assert_int_equal(ccache_fp_bytes(&a, f.weights, MIB), CCACHE_OK);
  assert_int_equal(ccache_fp_bytes(&a, f.attrs, sizeof f.attrs), CCACHE_OK);
  assert_int_equal(ccache_fp_bytes(&b, copy, MIB), CCACHE_OK);
  assert_int_equal(ccache_fp_bytes(&b, attrs2, sizeof attrs2), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&a, &ka), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&b, &kb), CCACHE_OK);
  assert_key_equal(ka, kb);
  attrs2[0] ^= 1;
  ccache_fp_init(&b);
  assert_int_equal(ccache_fp_bytes(&b, copy, MIB), CCACHE_OK);
  assert_int_equal(ccache_fp_bytes(&b, attrs2, sizeof attrs2), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&b, &kb), CCACHE_OK);
  assert_key_not_equal(ka, kb);

  free(copy);
  fixture_free(&f);
}

/* Rebuild the fixture's graph with nodes in the order @p order (a valid
 * topological order): operands and outputs are renumbered to match. */
static ccache_key permuted_key(const fixture *f, const unsigned *order) {
  enum { N = 6 };
  unsigned inv[N];
  ccache_fp_node nodes[N];
  ccache_fp_ref ops[N][4];
  ccache_fp_ref outs[2];
  for (unsigned j = 0; j < N; j++) inv[order[j]] = j;
  for (unsigned j = 0; j < N; j++) {
    nodes[j] = f->nodes[order[j]];
    assert_true(nodes[j].n_operands <= 4);
    for (uint32_t k = 0; k < nodes[j].n_operands; k++) {
      ops[j][k] = nodes[j].operands[k];
      ops[j][k].node = inv[ops[j][k].node];
    }
    nodes[j].operands = nodes[j].n_operands ? ops[j] : NULL;
  }
  for (unsigned k = 0; k < 2; k++) {
    outs[k] = f->outs[k];
    outs[k].node = inv[outs[k].node];
  }
  return gkey(nodes, N, outs, 2, f->device);
}

static void node_order_and_dead_nodes_keep_the_key(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  const ccache_key base = fixture_key(&f);
  static const unsigned identity[] = {0, 1, 2, 3, 4, 5};
  static const unsigned params_last[] = {1, 0, 2, 3, 4, 5}; /* swap independent leaves */
  static const unsigned y_first[] = {4, 1, 0, 2, 3, 5};     /* param 1 built first */
  static const unsigned late_y[] = {0, 1, 2, 4, 3, 5};      /* param 1 before split */
  static const unsigned mixed[] = {1, 4, 0, 2, 3, 5};
  assert_key_equal(permuted_key(&f, identity), base);
  assert_key_equal(permuted_key(&f, params_last), base);
  assert_key_equal(permuted_key(&f, y_first), base);
  assert_key_equal(permuted_key(&f, late_y), base);
  assert_key_equal(permuted_key(&f, mixed), base);

  /* An extra op node that no output reaches does not change it either (it
   * is not part of the computation)... */
  ccache_fp_node more[8];
  memcpy(more, f.nodes, sizeof f.nodes);
  more[6] = op_node("dead", f.add_ops, 2, &f.y_t);
  assert_key_equal(gkey(more, 7, f.outs, 2, f.device), base);
  fixture_free(&f);
}

/* ...but an unused parameter does: f(x, y) = x and f(x) = x are called
 * differently.  Parameters count wherever they sit in the array. */
static void unused_parameter_changes_the_key(void **state) {
  (void)state;
  static const int64_t d2[] = {2}, d3[] = {3};
  static const ccache_fp_tensor t2 = {DT_F32, 1, d2}, t3 = {DT_F32, 1, d3};
  static const ccache_fp_ref neg0[] = {{0, 0}}, neg1[] = {{1, 0}};
  static const ccache_fp_ref out1[] = {{1, 0}}, out2[] = {{2, 0}};
  /* f(x) = neg(x) */
  const ccache_fp_node f1[] = {param_node(0, &t2), op_node("neg", neg0, 1, &t2)};
  /* f(x, y) = neg(x), y unused, built last or first */
  const ccache_fp_node f2_last[] = {param_node(0, &t2), op_node("neg", neg0, 1, &t2),
                                    param_node(1, &t2)};
  const ccache_fp_node f2_first[] = {param_node(1, &t2), param_node(0, &t2),
                                     op_node("neg", neg1, 1, &t2)};
  /* the same with y of another shape */
  const ccache_fp_node f2_shape[] = {param_node(0, &t2), op_node("neg", neg0, 1, &t2),
                                     param_node(1, &t3)};
  /* y at position 2 instead of 1 */
  const ccache_fp_node f2_pos[] = {param_node(0, &t2), op_node("neg", neg0, 1, &t2),
                                   param_node(2, &t2)};
  const ccache_key k1 = gkey(f1, 2, out1, 1, "cpu");
  const ccache_key k2 = gkey(f2_last, 3, out1, 1, "cpu");
  assert_key_not_equal(k1, k2);
  assert_key_equal(gkey(f2_first, 3, out2, 1, "cpu"), k2);
  assert_key_not_equal(gkey(f2_shape, 3, out1, 1, "cpu"), k2);
  assert_key_not_equal(gkey(f2_pos, 3, out1, 1, "cpu"), k2);
  assert_key_not_equal(gkey(f2_shape, 3, out1, 1, "cpu"), k1);
}

/* ------------------------------------------------------------------------ */
/* Builder field framing. */

typedef int (*append_fn)(ccache_fp *fp);

static ccache_key seq_key(append_fn f) {
  ccache_fp fp;
  ccache_key k = {0, 0};
  ccache_fp_init(&fp);
  assert_int_equal(f(&fp), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&fp, &k), CCACHE_OK);
  return k;
}

static int s_ab_c(ccache_fp *fp) { return ccache_fp_str(fp, "ab", 2) | ccache_fp_str(fp, "c", 1); }
static int s_a_bc(ccache_fp *fp) { return ccache_fp_str(fp, "a", 1) | ccache_fp_str(fp, "bc", 2); }
static int s_abc(ccache_fp *fp) { return ccache_fp_str(fp, "abc", 3); }
static int b_ab_c(ccache_fp *fp) {
  return ccache_fp_bytes(fp, "ab", 2) | ccache_fp_bytes(fp, "c", 1);
}
static int b_a_bc(ccache_fp *fp) {
  return ccache_fp_bytes(fp, "a", 1) | ccache_fp_bytes(fp, "bc", 2);
}
static int u_1(ccache_fp *fp) { return ccache_fp_u64(fp, 1); }
static int i_1(ccache_fp *fp) { return ccache_fp_i64(fp, 1); }
static int f_1(ccache_fp *fp) { return ccache_fp_f64(fp, 4.9406564584124654e-324); /* bits 1 */ }
static int b_le1(ccache_fp *fp) { return ccache_fp_bytes(fp, "\x01\0\0\0\0\0\0\0", 8); }
static int s_le1(ccache_fp *fp) { return ccache_fp_str(fp, "\x01\0\0\0\0\0\0\0", 8); }
static int s_x(ccache_fp *fp) { return ccache_fp_str(fp, "x", 1); }
static int b_x(ccache_fp *fp) { return ccache_fp_bytes(fp, "x", 1); }
static int b_null(ccache_fp *fp) { return ccache_fp_bytes(fp, NULL, 0); }
static int b_empty(ccache_fp *fp) { return ccache_fp_bytes(fp, "", 0); }
static int s_null(ccache_fp *fp) { return ccache_fp_str(fp, NULL, 0); }
static int s_empty(ccache_fp *fp) { return ccache_fp_str(fp, "", 0); }
static int none(ccache_fp *fp) {
  (void)fp;
  return CCACHE_OK;
}
static int sh_scalar(ccache_fp *fp) { return ccache_fp_shape(fp, DT_F32, 0, NULL); }
static int sh_1x(ccache_fp *fp) {
  static const int64_t one[] = {1};
  return ccache_fp_shape(fp, DT_F32, 1, one);
}
static int u_then_u(ccache_fp *fp) { return ccache_fp_u64(fp, 1) | ccache_fp_u64(fp, 2); }
static int u_swapped(ccache_fp *fp) { return ccache_fp_u64(fp, 2) | ccache_fp_u64(fp, 1); }

static void field_boundaries_and_kinds_change_the_key(void **state) {
  (void)state;
  /* Every one of these sequences must give a different key. */
  static const append_fn distinct[] = {s_ab_c, s_a_bc,    s_abc, b_ab_c,   b_a_bc,   u_1,    i_1,
                                       f_1,    b_le1,     s_le1, s_x,      b_x,      b_null, s_null,
                                       none,   sh_scalar, sh_1x, u_then_u, u_swapped};
  enum { N = sizeof distinct / sizeof distinct[0] };
  ccache_key keys[N];
  for (size_t i = 0; i < N; i++) keys[i] = seq_key(distinct[i]);
  for (size_t i = 0; i < N; i++)
    for (size_t j = i + 1; j < N; j++)
      if (key_eq(keys[i], keys[j])) fail_msg("sequences %zu and %zu collide", i, j);

  /* NULL with length 0 is the empty field of the same kind. */
  assert_key_equal(seq_key(b_null), seq_key(b_empty));
  assert_key_equal(seq_key(s_null), seq_key(s_empty));
}

/* Op by name vs by id; constant absent vs empty; param vs not. */
static void graph_name_id_constant_and_param_kinds_differ(void **state) {
  (void)state;
  static const int64_t d[] = {8};
  static const ccache_fp_tensor t = {DT_F32, 1, d};
  static const ccache_fp_ref outs[] = {{0, 0}};
  ccache_fp_node by_name = op_node("3", NULL, 0, &t);
  ccache_fp_node by_id = op_node(NULL, NULL, 0, &t);
  by_id.op_id = 3;
  ccache_fp_node by_id4 = by_id;
  by_id4.op_id = 4;
  assert_key_not_equal(gkey(&by_name, 1, outs, 1, "cpu"), gkey(&by_id, 1, outs, 1, "cpu"));
  assert_key_not_equal(gkey(&by_id4, 1, outs, 1, "cpu"), gkey(&by_id, 1, outs, 1, "cpu"));
  /* op_id is ignored when a name is given. */
  ccache_fp_node by_name2 = by_name;
  by_name2.op_id = 12345;
  assert_key_equal(gkey(&by_name, 1, outs, 1, "cpu"), gkey(&by_name2, 1, outs, 1, "cpu"));

  /* Constant: absent (NULL) differs from present-but-empty; attrs NULL/0
   * equals attrs empty. */
  ccache_fp_node absent = by_name, empty = by_name;
  empty.constant = "";
  assert_key_not_equal(gkey(&absent, 1, outs, 1, "cpu"), gkey(&empty, 1, outs, 1, "cpu"));
  ccache_fp_node attrs_empty = by_name;
  attrs_empty.attrs = "";
  assert_key_equal(gkey(&absent, 1, outs, 1, "cpu"), gkey(&attrs_empty, 1, outs, 1, "cpu"));

  /* Parameter 0 vs not a parameter. */
  ccache_fp_node p0 = by_name;
  p0.param_index = 0;
  assert_key_not_equal(gkey(&absent, 1, outs, 1, "cpu"), gkey(&p0, 1, outs, 1, "cpu"));

  /* Moving bytes between attrs and constant changes the key. */
  ccache_fp_node in_attrs = by_name, in_const = by_name;
  in_attrs.attrs = "abc", in_attrs.attrs_len = 3;
  in_attrs.constant = "", in_attrs.constant_len = 0;
  in_const.attrs = "", in_const.attrs_len = 0;
  in_const.constant = "abc", in_const.constant_len = 3;
  assert_key_not_equal(gkey(&in_attrs, 1, outs, 1, "cpu"), gkey(&in_const, 1, outs, 1, "cpu"));
}

/* ------------------------------------------------------------------------ */

static ccache_key f64_key(double v) {
  ccache_fp fp;
  ccache_key k = {0, 0};
  ccache_fp_init(&fp);
  assert_int_equal(ccache_fp_f64(&fp, v), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&fp, &k), CCACHE_OK);
  return k;
}

static double f64_of_bits(uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

static void f64_key_follows_the_bits(void **state) {
  (void)state;
  assert_key_not_equal(f64_key(0.0), f64_key(-0.0));

  /* Same bits, same key (values computed differently). */
  volatile double x = 0.1, y = 0.2;
  double s = x + y, t = 0.30000000000000004;
  assert_memory_equal(&s, &t, sizeof s);
  assert_key_equal(f64_key(s), f64_key(t));

  /* Two NaNs with different payloads differ; the same NaN bits agree. */
  const double n1 = f64_of_bits(0x7ff8000000000001ull), n2 = f64_of_bits(0x7ff8000000000002ull);
  assert_key_not_equal(f64_key(n1), f64_key(n2));
  assert_key_equal(f64_key(n1), f64_key(f64_of_bits(0x7ff8000000000001ull)));
}

static void check_final_keeps(size_t big_len) {
  unsigned char *big = malloc(big_len ? big_len : 1);
  assert_non_null(big);
  memset(big, 0xab, big_len);
  ccache_fp a, b;
  ccache_key k1, k2, k3, kb;
  ccache_fp_init(&a);
  ccache_fp_init(&b);
  assert_int_equal(ccache_fp_u64(&a, 7), CCACHE_OK);
  assert_int_equal(ccache_fp_bytes(&a, big, big_len), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&a, &k1), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&a, &k2), CCACHE_OK);
  assert_key_equal(k1, k2);
  assert_int_equal(ccache_fp_str(&a, "more", 4), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&a, &k3), CCACHE_OK);
  assert_key_not_equal(k1, k3);

  /* Appending after final continues the same stream. */
  assert_int_equal(ccache_fp_u64(&b, 7), CCACHE_OK);
  assert_int_equal(ccache_fp_bytes(&b, big, big_len), CCACHE_OK);
  assert_int_equal(ccache_fp_str(&b, "more", 4), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&b, &kb), CCACHE_OK);
  assert_key_equal(k3, kb);

  /* A copy of a builder forks the fingerprint. */
  ccache_fp c = a;
  ccache_key kc;
  assert_int_equal(ccache_fp_final(&c, &kc), CCACHE_OK);
  assert_key_equal(kc, k3);
  assert_int_equal(ccache_fp_u64(&c, 1), CCACHE_OK);
  assert_int_equal(ccache_fp_final(&a, &k1), CCACHE_OK);
  assert_key_equal(k1, k3);
  free(big);
}

static void final_leaves_the_builder_appendable(void **state) {
  (void)state;
  check_final_keeps(0);   /* all buffered, never streamed */
  check_final_keeps(300); /* direct path */
  check_final_keeps(MIB);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(operand_order_changes_the_key),
      cmocka_unit_test(every_single_field_changes_the_key),
      cmocka_unit_test(contents_not_addresses_make_the_key),
      cmocka_unit_test(node_order_and_dead_nodes_keep_the_key),
      cmocka_unit_test(unused_parameter_changes_the_key),
      cmocka_unit_test(field_boundaries_and_kinds_change_the_key),
      cmocka_unit_test(graph_name_id_constant_and_param_kinds_differ),
      cmocka_unit_test(f64_key_follows_the_bits),
      cmocka_unit_test(final_leaves_the_builder_appendable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
