/*
 * test_fingerprint.c - the structural fingerprint builder and graph helper.
 *
 * dtype codes used throughout (the library does not interpret them):
 *   1 = f32, 2 = bf16, 3 = i32.
 *
 * Besides behaviour (what must and must not change a key), the tests pin the
 * byte encoding twice over: a reference encoder written here from the spec
 * must give the same XXH3-128 as the library, and known-answer keys are
 * pinned, so the format cannot drift without bumping CCACHE_FP_FORMAT_VERSION.
 *
 * Run with "--print-key" the binary prints the key of a fixed graph and exits;
 * the cross-process test spawns itself that way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "ccache.h"

extern char **environ;

enum { DT_F32 = 1, DT_BF16 = 2, DT_I32 = 3 };

#define MIB       (1024u * 1024u)
#define MAX_NODES 32

static int key_eq(ccache_key a, ccache_key b) { return a.lo == b.lo && a.hi == b.hi; }

#define assert_key_equal(a, b)     assert_true(key_eq((a), (b)))
#define assert_key_not_equal(a, b) assert_false(key_eq((a), (b)))

/* The key of a graph that must be valid. */
static ccache_key gkey(const ccache_fp_node *nodes, size_t n, const ccache_fp_ref *outs,
                       size_t n_outs, const char *device) {
  ccache_key scratch[MAX_NODES];
  ccache_key k = {0, 0};
  assert_true(n <= MAX_NODES);
  assert_int_equal(ccache_fp_graph(nodes, n, outs, n_outs, device, scratch, &k), CCACHE_OK);
  return k;
}

/* Node constructors (designated initialisers keep the rest zero/NULL). */
static ccache_fp_node param_node(int64_t pos, const ccache_fp_tensor *t) {
  ccache_fp_node n = {.outputs = t, .n_outputs = 1, .param_index = pos};
  return n;
}

static ccache_fp_node op_node(const char *op, const ccache_fp_ref *ops, uint32_t n_ops,
                              const ccache_fp_tensor *t) {
  ccache_fp_node n = {.op_name = op,
                      .outputs = t,
                      .n_outputs = 1,
                      .operands = ops,
                      .n_operands = n_ops,
                      .param_index = -1};
  return n;
}

/* ------------------------------------------------------------------------ */
/* A reference encoder written from the documented format. */

typedef struct ref_enc {
  unsigned char *p;
  size_t len, cap;
} ref_enc;

static void re_raw(ref_enc *e, const void *d, size_t n) {
  if (e->len + n > e->cap) {
    e->cap = (e->len + n) * 2 + 64;
    e->p = realloc(e->p, e->cap);
    assert_non_null(e->p);
  }
  if (n) memcpy(e->p + e->len, d, n);
  e->len += n;
}

static void re_u8(ref_enc *e, unsigned v) {
  unsigned char b = (unsigned char)v;
  re_raw(e, &b, 1);
}

static void re_le(ref_enc *e, uint64_t v, unsigned width) {
  for (unsigned i = 0; i < width; i++) re_u8(e, (unsigned)(v >> (8 * i)) & 0xffu);
}

static void re_header(ref_enc *e) {
  e->len = 0;
  re_raw(e, "ccache-fp", 9);
  re_le(e, CCACHE_FP_FORMAT_VERSION, 4);
}

static ccache_key re_key(const ref_enc *e) {
  XXH128_hash_t h = XXH3_128bits(e->p, e->len);
  ccache_key k = {h.low64, h.high64};
  return k;
}

/* ------------------------------------------------------------------------ */
/* The base graph for the flip table: params, a 1 MiB constant, a matmul, a
 * two-output split (both slots the same type, so only the slot number tells
 * them apart) and an add; two graph outputs. */

typedef struct fixture {
  int64_t x_dims[2], w_dims[2], mm_dims[2], half_dims[2];
  ccache_fp_tensor x_t, w_t, mm_t, half_t[2], y_t;
  unsigned char attrs[4];
  unsigned char *weights;
  ccache_fp_ref mm_ops[2], add_ops[2], split_ops[1];
  ccache_fp_node nodes[6];
  ccache_fp_ref outs[2];
  const char *device;
} fixture;

static const char DEV_A[] = "cpu:avx2";
static const char DEV_B[] = "cpu:avx512";
static const char OP_A[] = "matmul";
static const char OP_B[] = "matmuL";

static void fixture_init(fixture *f) {
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

static void fixture_free(fixture *f) { free(f->weights); }

static ccache_key fixture_key(const fixture *f) { return gkey(f->nodes, 6, f->outs, 2, f->device); }

/* ------------------------------------------------------------------------ */

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
/* Pinned known answers: three small graphs and a few builder sequences.  If
 * one of these fails, the encoding changed: bump CCACHE_FP_FORMAT_VERSION
 * and re-pin. */

static const int64_t kat_d23[] = {2, 3};
static const int64_t kat_d3[] = {3};
static const ccache_fp_tensor kat_t23 = {DT_F32, 2, kat_d23};
static const ccache_fp_tensor kat_t3 = {DT_BF16, 1, kat_d3};

/* Graph A: relu(p0 + p1), device "cpu". */
static ccache_key kat_graph_a(void) {
  static const ccache_fp_ref add_ops[] = {{0, 0}, {1, 0}}, relu_ops[] = {{2, 0}};
  static const ccache_fp_ref outs[] = {{3, 0}};
  const ccache_fp_node nodes[] = {param_node(0, &kat_t23), param_node(1, &kat_t23),
                                  op_node("add", add_ops, 2, &kat_t23),
                                  op_node("relu", relu_ops, 1, &kat_t23)};
  return gkey(nodes, 4, outs, 1, "cpu");
}

/* Graph B: numeric op ids, attributes and a small constant, device "cuda:sm_90". */
static ccache_key kat_graph_b(void) {
  static const unsigned char attrs[] = {0x2a, 0x00, 0xff};
  static const unsigned char cst[] = {1, 2, 3, 4, 5, 6};
  static const ccache_fp_ref mul_ops[] = {{0, 0}, {1, 0}};
  static const ccache_fp_ref outs[] = {{2, 0}};
  ccache_fp_node nodes[3] = {param_node(0, &kat_t3), op_node(NULL, NULL, 0, &kat_t3),
                             op_node(NULL, mul_ops, 2, &kat_t3)};
  nodes[1].op_id = 7;
  nodes[1].constant = cst;
  nodes[1].constant_len = sizeof cst;
  nodes[2].op_id = 42;
  nodes[2].attrs = attrs;
  nodes[2].attrs_len = sizeof attrs;
  return gkey(nodes, 3, outs, 1, "cuda:sm_90");
}

/* Graph C: a two-output node, a scalar output and two graph outputs. */
static ccache_key kat_graph_c(void) {
  static const ccache_fp_tensor two[] = {{DT_F32, 2, kat_d23}, {DT_I32, 0, NULL}};
  static const ccache_fp_ref top_ops[] = {{0, 0}};
  static const ccache_fp_ref outs[] = {{1, 1}, {1, 0}};
  ccache_fp_node nodes[2] = {param_node(0, &kat_t23), op_node("topk", top_ops, 1, two)};
  nodes[1].n_outputs = 2;
  return gkey(nodes, 2, outs, 2, "");
}

static ccache_key kat_builder(int which) {
  ccache_fp fp;
  ccache_key k = {0, 0};
  ccache_fp_init(&fp);
  switch (which) {
    case 0: /* nothing but the header */
      break;
    case 1:
      assert_int_equal(ccache_fp_u64(&fp, 1), CCACHE_OK);
      assert_int_equal(ccache_fp_i64(&fp, -1), CCACHE_OK);
      assert_int_equal(ccache_fp_f64(&fp, 1.5), CCACHE_OK);
      break;
    case 2:
      assert_int_equal(ccache_fp_str(&fp, "matmul", 6), CCACHE_OK);
      assert_int_equal(ccache_fp_bytes(&fp, "\x00\x01\x02", 3), CCACHE_OK);
      assert_int_equal(ccache_fp_shape(&fp, DT_F32, 2, kat_d23), CCACHE_OK);
      assert_int_equal(ccache_fp_shape(&fp, DT_I32, 0, NULL), CCACHE_OK);
      break;
    case 3: { /* a large field, through the direct path */
      static unsigned char big[1000];
      for (unsigned i = 0; i < sizeof big; i++) big[i] = (unsigned char)i;
      assert_int_equal(ccache_fp_u64(&fp, 99), CCACHE_OK);
      assert_int_equal(ccache_fp_bytes(&fp, big, sizeof big), CCACHE_OK);
      assert_int_equal(ccache_fp_str(&fp, "tail", 4), CCACHE_OK);
      break;
    }
  }
  assert_int_equal(ccache_fp_final(&fp, &k), CCACHE_OK);
  return k;
}

static void assert_kat(const char *what, ccache_key got, uint64_t lo, uint64_t hi) {
  if (got.lo != lo || got.hi != hi)
    fail_msg("%s: got lo=0x%016llx hi=0x%016llx, pinned lo=0x%016llx hi=0x%016llx", what,
             (unsigned long long)got.lo, (unsigned long long)got.hi, (unsigned long long)lo,
             (unsigned long long)hi);
}

static ccache_key print_key_graph(void);

static void known_answer_keys_are_pinned(void **state) {
  (void)state;
  assert_int_equal(CCACHE_FP_FORMAT_VERSION, 1);
  assert_kat("graph A", kat_graph_a(), 0x2067edd1e31644adull, 0xdc4ac788cd144af6ull);
  assert_kat("graph B", kat_graph_b(), 0x3c2e07715f08be9full, 0xf1cc3c0e59066eb4ull);
  assert_kat("graph C", kat_graph_c(), 0xc7d85b698832a1fcull, 0xb3bb3c41dd9ba1ffull);
  /* The flip-table fixture: a 1 MiB constant, through the streaming path. */
  assert_kat("fixture", print_key_graph(), 0xfef17d3328191e8eull, 0x5fdc3b4595308cb0ull);
  assert_kat("builder empty", kat_builder(0), 0xf84652fcdc0bae51ull, 0xabb4b39b94cdc5feull);
  assert_kat("builder ints", kat_builder(1), 0xa1b219aa397756afull, 0xc9bd0941e128a67aull);
  assert_kat("builder str/bytes/shape", kat_builder(2), 0x9d43769792fc9732ull,
             0x54a6dfa81a82118bull);
  assert_kat("builder large", kat_builder(3), 0x6cd4d2e4799c60a9ull, 0xee850d5f4d9725dbull);
}

/* ------------------------------------------------------------------------ */
/* The same key in another process (exec'd: fresh address space layout). */

static void format_key(ccache_key k, char buf[33]) {
  snprintf(buf, 33, "%016llx%016llx", (unsigned long long)k.hi, (unsigned long long)k.lo);
}

/* The graph printed by "--print-key": the fixture (with its 1 MiB constant). */
static ccache_key print_key_graph(void) {
  fixture f;
  fixture_init(&f);
  ccache_key k = fixture_key(&f);
  fixture_free(&f);
  return k;
}

static int print_key_main(void) {
  char buf[33];
  format_key(print_key_graph(), buf);
  printf("%s\n", buf);
  return fflush(stdout) == 0 ? 0 : 1;
}

/* This executable's path.  readlink() rather than exec'ing /proc/self/exe
 * directly: under valgrind the latter is valgrind's own tool binary, while
 * readlink() is answered with the client's path. */
static const char *self_path(char *buf, size_t size) {
  ssize_t n = readlink("/proc/self/exe", buf, size - 1);
  if (n <= 0 || (size_t)n >= size - 1) return "/proc/self/exe";
  buf[n] = '\0';
  return buf;
}

static void another_process_computes_the_same_key(void **state) {
  (void)state;
  char path[4096];
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  posix_spawn_file_actions_t fa;
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, fds[0]), 0);
  char arg0[] = "test_fingerprint", arg1[] = "--print-key";
  char *argv[] = {arg0, arg1, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, self_path(path, sizeof path), &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  assert_int_equal(rc, 0);

  char got[128] = {0};
  size_t n = 0;
  while (n < sizeof got - 1) {
    ssize_t r = read(fds[0], got + n, sizeof got - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);

  char want[33];
  format_key(print_key_graph(), want);
  assert_int_equal(n, 33);
  assert_memory_equal(got, want, 32);
  assert_int_equal(got[32], '\n');
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

/* ------------------------------------------------------------------------ */
/* Path equivalence: whatever the batching buffer holds when a field comes
 * in, and whichever path a field takes, the key is XXH3-128 of the spec's
 * byte stream (checked against the reference encoder). */

static void builder_buffering_paths_give_the_spec_key(void **state) {
  (void)state;
  static const size_t sizes[] = {0, 1, 7, 200, 255, 256, 257, 370, 383, 384, 385, 1000, 4096, MIB};
  unsigned char *big = malloc(MIB);
  assert_non_null(big);
  for (size_t i = 0; i < MIB; i++) big[i] = (unsigned char)(i ^ (i >> 9));
  ref_enc e = {0};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    for (unsigned prefix = 0; prefix < 48; prefix += 5) {
      ccache_fp fp;
      ccache_key k, k2;
      ccache_fp_init(&fp);
      re_header(&e);
      for (unsigned i = 0; i < prefix; i++) {
        assert_int_equal(ccache_fp_u64(&fp, i * 0x0101010101010101ull), CCACHE_OK);
        re_u8(&e, 0x01);
        re_le(&e, i * 0x0101010101010101ull, 8);
      }
      assert_int_equal(ccache_fp_bytes(&fp, big, sizes[s]), CCACHE_OK);
      re_u8(&e, 0x04);
      re_le(&e, sizes[s], 8);
      re_raw(&e, big, sizes[s]);
      assert_int_equal(ccache_fp_str(&fp, (const char *)big + 1, sizes[s] / 2), CCACHE_OK);
      re_u8(&e, 0x05);
      re_le(&e, sizes[s] / 2, 8);
      re_raw(&e, big + 1, sizes[s] / 2);
      static const int64_t dims[] = {-1, 5, 1ll << 40};
      assert_int_equal(ccache_fp_shape(&fp, -2, 3, dims), CCACHE_OK);
      re_u8(&e, 0x06);
      re_le(&e, (uint32_t)-2, 4);
      re_le(&e, 3, 4);
      for (int d = 0; d < 3; d++) re_le(&e, (uint64_t)dims[d], 8);
      assert_int_equal(ccache_fp_i64(&fp, -3), CCACHE_OK);
      re_u8(&e, 0x02);
      re_le(&e, (uint64_t)-3, 8);
      assert_int_equal(ccache_fp_f64(&fp, -2.0), CCACHE_OK);
      re_u8(&e, 0x03);
      re_le(&e, 0xc000000000000000ull, 8);
      assert_int_equal(ccache_fp_final(&fp, &k), CCACHE_OK);
      assert_key_equal(k, re_key(&e));
      /* Determinism across builders. */
      assert_int_equal(ccache_fp_final(&fp, &k2), CCACHE_OK);
      assert_key_equal(k, k2);
    }
  }
  free(e.p);
  free(big);
}

/* Reference node stream (see fp_graph.c) for a node without operands. */
static ccache_key ref_leaf_digest(const ccache_fp_node *n) {
  ref_enc e = {0};
  re_u8(&e, 0x10); /* node streams carry no version prefix: the key does */
  if (n->op_name) {
    re_u8(&e, 0x11);
    re_le(&e, strlen(n->op_name), 8);
    re_raw(&e, n->op_name, strlen(n->op_name));
  } else {
    re_u8(&e, 0x12);
    re_le(&e, n->op_id, 8);
  }
  re_le(&e, n->attrs_len, 8);
  re_raw(&e, n->attrs, n->attrs_len);
  re_le(&e, n->n_outputs, 4);
  for (uint32_t k = 0; k < n->n_outputs; k++) {
    re_le(&e, (uint32_t)n->outputs[k].dtype, 4);
    re_le(&e, n->outputs[k].rank, 4);
    for (uint32_t d = 0; d < n->outputs[k].rank; d++) re_le(&e, (uint64_t)n->outputs[k].dims[d], 8);
  }
  re_le(&e, 0, 4); /* no operands */
  re_u8(&e, (n->constant ? 0x01u : 0u) | (n->param_index >= 0 ? 0x02u : 0u));
  if (n->constant) {
    re_le(&e, n->constant_len, 8);
    re_raw(&e, n->constant, n->constant_len);
  }
  if (n->param_index >= 0) re_le(&e, (uint64_t)n->param_index, 8);
  ccache_key k = re_key(&e);
  free(e.p);
  return k;
}

static void graph_paths_give_the_spec_key(void **state) {
  (void)state;
  static const size_t sizes[] = {0, 1, 255, 256, 700, 900, 1000, 1023, 1024, 1025, 5000, MIB};
  static const int64_t d[] = {3, 5, 7};
  static const ccache_fp_tensor outs_t[] = {{DT_F32, 3, d}, {DT_BF16, 1, d}};
  static const ccache_fp_ref outs[] = {{0, 1}};
  unsigned char *big = malloc(MIB);
  assert_non_null(big);
  for (size_t i = 0; i < MIB; i++) big[i] = (unsigned char)(i * 7u + (i >> 11));
  char long_name[600];
  memset(long_name, 'n', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';

  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    for (int variant = 0; variant < 3; variant++) {
      ccache_fp_node n = op_node(variant == 1 ? long_name : "const", NULL, 0, outs_t);
      n.n_outputs = 2;
      n.constant = big;
      n.constant_len = sizes[s];
      n.attrs = big + 3;
      n.attrs_len = variant == 2 ? sizes[s] / 3 : 5;
      n.param_index = variant == 0 ? 5 : -1; /* a parameter with a "constant": legal */
      ccache_key scratch[1], k1, k2;
      assert_int_equal(ccache_fp_graph(&n, 1, outs, 1, "cpu", scratch, &k1), CCACHE_OK);
      assert_key_equal(scratch[0], ref_leaf_digest(&n));

      /* The graph key over that digest, also from the reference. */
      ref_enc e = {0};
      re_header(&e);
      re_u8(&e, 0x20);
      re_le(&e, 3, 8);
      re_raw(&e, "cpu", 3);
      const int is_param = n.param_index >= 0;
      re_le(&e, (uint64_t)is_param, 8);
      re_le(&e, is_param ? scratch[0].lo : 0, 8);
      re_le(&e, is_param ? scratch[0].hi : 0, 8);
      re_le(&e, 1, 8);
      re_le(&e, scratch[0].lo, 8);
      re_le(&e, scratch[0].hi, 8);
      re_le(&e, 1, 4);
      assert_key_equal(k1, re_key(&e));
      free(e.p);

      assert_int_equal(ccache_fp_graph(&n, 1, outs, 1, "cpu", scratch, &k2), CCACHE_OK);
      assert_key_equal(k1, k2);
    }
  }
  free(big);
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--print-key") == 0) return print_key_main();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(operand_order_changes_the_key),
      cmocka_unit_test(every_single_field_changes_the_key),
      cmocka_unit_test(contents_not_addresses_make_the_key),
      cmocka_unit_test(node_order_and_dead_nodes_keep_the_key),
      cmocka_unit_test(unused_parameter_changes_the_key),
      cmocka_unit_test(known_answer_keys_are_pinned),
      cmocka_unit_test(another_process_computes_the_same_key),
      cmocka_unit_test(field_boundaries_and_kinds_change_the_key),
      cmocka_unit_test(builder_refuses_bad_calls_and_poisons_until_init),
      cmocka_unit_test(invalid_graph_is_einval_and_writes_nothing),
      cmocka_unit_test(graph_name_id_constant_and_param_kinds_differ),
      cmocka_unit_test(f64_key_follows_the_bits),
      cmocka_unit_test(final_leaves_the_builder_appendable),
      cmocka_unit_test(builder_buffering_paths_give_the_spec_key),
      cmocka_unit_test(graph_paths_give_the_spec_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
