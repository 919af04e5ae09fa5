/*
 * test_fingerprint_format.c - the fingerprint's byte encoding, pinned twice
 * over: a reference encoder written here from the spec must give the same
 * XXH3-128 as the library on every buffering path of the builder and the
 * graph helper, and known-answer keys are pinned, so the format cannot drift
 * without bumping CCACHE_FP_FORMAT_VERSION.  Another process computes the
 * same key.
 *
 * Run with "--print-key" the binary prints the key of a fixed graph (the
 * fixture of fingerprint_support.c) and exits; the cross-process test
 * spawns itself that way.
 */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "fingerprint_support.h"

extern char **environ;

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
  char arg0[] = "test_fingerprint_format", arg1[] = "--print-key";
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

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--print-key") == 0) return print_key_main();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(known_answer_keys_are_pinned),
      cmocka_unit_test(another_process_computes_the_same_key),
      cmocka_unit_test(builder_buffering_paths_give_the_spec_key),
      cmocka_unit_test(graph_paths_give_the_spec_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
