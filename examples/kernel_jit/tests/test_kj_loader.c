/* test_kj_loader.c: the memfd + dlopen loader.
 *
 * glibc's dlopen() returns the already-loaded object whose name matches the
 * path asked for.  Our path is /proc/self/fd/N, so a loader that closes the
 * fd too early (or a destroy that closes it without dlclose) makes the next
 * kernel, which gets the same fd number, silently run the previous kernel's
 * code.  This test loads kernels in sequence with the first one closed
 * before the second is loaded, and with two loaded at once, and checks each
 * computes its own op. */
#include "kj_test.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen.h"
#include "compiler.h"
#include "keys.h"
#include "loader.h"
#include "runner.h"

typedef struct built {
  void *bytes;
  size_t len;
  ccache_key key;
} built;

static void build(kj_compiler *cc, kj_spec s, built *b) {
  char err[512] = "";
  assert_int_equal(kj_program_key(s, cc, &b->key), CCACHE_OK);
  char *src = kj_codegen(s, b->key);
  assert_non_null(src);
  int rc = kj_compile(cc, src, &b->bytes, &b->len, err, sizeof err);
  if (rc != 0) fprintf(stderr, "compile failed: %s\n", err);
  assert_int_equal(rc, 0);
  free(src);
}

static kj_native *load(const built *b) {
  char err[512] = "";
  kj_native *n = kj_load(b->bytes, b->len, b->key, NULL, err, sizeof err);
  if (!n) fprintf(stderr, "load failed: %s\n", err);
  assert_non_null(n);
  return n;
}

/* The kernel computes its own op: its output matches that op's reference. */
static void assert_computes(kj_spec s, const kj_native *n) {
  kj_result res;
  assert_int_equal(kj_run_checked(s, n->fn, 7, 0, NULL, &res), 0);
  if (!res.ok)
    fprintf(stderr, "%s q_len %u: element %zu differs (max abs err %g)\n", kj_op_name(s.op),
            s.q_len, res.first_bad, res.max_abs_err);
  assert_true(res.ok);
}

static void loader_two_kernels_in_sequence(void **state) {
  (void)state;
  char err[512];
  kj_compiler cc;
  assert_int_equal(kj_compiler_open(&cc, err, sizeof err), 0);
  /* rmsnorm and residual at decode read and write buffers of the same sizes
   * (576 floats each), so running one in place of the other is not a crash
   * but a wrong answer: exactly what the reference check sees. */
  kj_spec a = {KJ_OP_RMSNORM, 1, KJ_DECODE_CONTEXT};
  kj_spec b = {KJ_OP_RESIDUAL, 1, KJ_DECODE_CONTEXT};
  kj_spec c = {KJ_OP_SOFTMAX, 1, KJ_DECODE_CONTEXT};
  built ba, bb, bc;
  build(&cc, a, &ba);
  build(&cc, b, &bb);
  build(&cc, c, &bc);

  kj_native *na = load(&ba);
  int fd_a = na->so.fd;
  assert_computes(a, na);
  kj_unload(na); /* the first kernel is closed ... */
  kj_native *nb = load(&bb);
  /* ... so the second gets the same fd number, hence the same path: the
   * case this test exists for (if not, the kernel never saw it). */
  assert_int_equal(nb->so.fd, fd_a);
  assert_computes(b, nb);

  /* Two alive at once: each keeps computing its own op. */
  kj_native *nc = load(&bc);
  assert_int_not_equal(nc->so.fd, nb->so.fd);
  assert_computes(c, nc);
  assert_computes(b, nb);
  kj_unload(nb);
  kj_unload(nc);

  /* And the first kernel loads again from its bytes after all that. */
  na = load(&ba);
  assert_computes(a, na);
  kj_unload(na);

  free(ba.bytes);
  free(bb.bytes);
  free(bc.bytes);
  kj_compiler_close(&cc);
}

/* What decode tells the cache: a truncated object, and another key's
 * object, are bad bytes (the entry goes); a host that cannot make a memfd
 * (here: a child with no file descriptors to spare) failed to load good
 * bytes (the entry stays). */
static void loader_bad_bytes_and_local_failure_told_apart(void **state) {
  (void)state;
  char err[512];
  kj_compiler cc;
  assert_int_equal(kj_compiler_open(&cc, err, sizeof err), 0);
  kj_spec a = {KJ_OP_RMSNORM, 1, KJ_DECODE_CONTEXT};
  kj_spec b = {KJ_OP_RESIDUAL, 1, KJ_DECODE_CONTEXT};
  built ba, bb;
  build(&cc, a, &ba);
  build(&cc, b, &bb);
  int bad = -1;
  for (size_t cut = 1; cut <= 4; cut++) { /* truncated at 1/2, 1/4, ... of its length */
    bad = -1;
    assert_null(kj_load(ba.bytes, ba.len >> cut, ba.key, &bad, err, sizeof err));
    assert_int_equal(bad, 1);
  }
  bad = -1;
  assert_null(kj_load(bb.bytes, bb.len, ba.key, &bad, err, sizeof err)); /* b's object for a */
  assert_int_equal(bad, 1);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct rlimit rl = {3, 3}; /* stdin, stdout, stderr: no room for a memfd */
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(3);
    int cbad = -1;
    kj_native *n = kj_load(ba.bytes, ba.len, ba.key, &cbad, err, sizeof err);
    _exit(n ? 4 : cbad == 0 ? 0 : 5);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  kj_native *n = kj_load(ba.bytes, ba.len, ba.key, &bad, err, sizeof err); /* whole: loads */
  assert_non_null(n);
  kj_unload(n);
  free(ba.bytes);
  free(bb.bytes);
  kj_compiler_close(&cc);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(loader_two_kernels_in_sequence),
      cmocka_unit_test(loader_bad_bytes_and_local_failure_told_apart),
  };
  return KJ_RUN("kernel_jit_loader", tests, argc, argv);
}
