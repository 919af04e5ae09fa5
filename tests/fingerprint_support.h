/*
 * fingerprint_support.h - helpers shared by the fingerprint tests
 * (test_fingerprint.c, test_fingerprint_format.c,
 * test_fingerprint_invalid.c): key comparison, the key of a graph that must
 * be valid, node constructors, and the flip table's base graph (the
 * fixture), whose key test_fingerprint_format.c pins.
 *
 * dtype codes used throughout (the library does not interpret them):
 *   1 = f32, 2 = bf16, 3 = i32.
 */
#ifndef CCACHE_TEST_FINGERPRINT_SUPPORT_H
#define CCACHE_TEST_FINGERPRINT_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ccache.h"

enum { DT_F32 = 1, DT_BF16 = 2, DT_I32 = 3 };

#define MIB       (1024u * 1024u)
#define MAX_NODES 32

static inline int key_eq(ccache_key a, ccache_key b) { return a.lo == b.lo && a.hi == b.hi; }

#define assert_key_equal(a, b)     assert_true(key_eq((a), (b)))
#define assert_key_not_equal(a, b) assert_false(key_eq((a), (b)))

/* The key of a graph that must be valid. */
ccache_key gkey(const ccache_fp_node *nodes, size_t n, const ccache_fp_ref *outs, size_t n_outs,
                const char *device);

/* Node constructors (designated initialisers keep the rest zero/NULL). */
static inline ccache_fp_node param_node(int64_t pos, const ccache_fp_tensor *t) {
  ccache_fp_node n = {.outputs = t, .n_outputs = 1, .param_index = pos};
  return n;
}

static inline ccache_fp_node op_node(const char *op, const ccache_fp_ref *ops, uint32_t n_ops,
                                     const ccache_fp_tensor *t) {
  ccache_fp_node n = {.op_name = op,
                      .outputs = t,
                      .n_outputs = 1,
                      .operands = ops,
                      .n_operands = n_ops,
                      .param_index = -1};
  return n;
}

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

/* The fixture's device and matmul op name (A) and what the flips swap them
 * for (B).  The flips tell them apart by address, so each is one object,
 * declared with its size (a test takes sizeof DEV_A). */
extern const char DEV_A[sizeof "cpu:avx2"];
extern const char DEV_B[sizeof "cpu:avx512"];
extern const char OP_A[sizeof "matmul"];
extern const char OP_B[sizeof "matmuL"];

void fixture_init(fixture *f);
void fixture_free(fixture *f);
ccache_key fixture_key(const fixture *f);

#endif
