/* test_kj_procs.c: kernel_jit as processes - its command line, and (with
 * the tiers) warm restarts, processes sharing a directory or a Redis, and
 * foreign runtime tags.  Every count asserted is exact unless a comment says
 * why it cannot be. */
#include "kj_test.h"

#include <stdlib.h>

#include "harness.h"

#ifndef KERNEL_JIT_EXE
#error "KERNEL_JIT_EXE: the path of the kernel_jit binary (set by CMake)"
#endif

#define EXE KERNEL_JIT_EXE

/* Exit 2, nothing on stdout, exactly one line on stderr. */
static void assert_usage_error(char *const argv[]) {
  kj_child c;
  int status = kj_run(&c, argv);
  size_t lines = 0;
  for (const char *p = c.err; *p; p++) lines += *p == '\n';
  if (status != 2 || c.out_len != 0 || lines != 1 || c.err[c.err_len - 1] != '\n')
    fprintf(stderr, "argv[1] '%s': exit %d, stdout '%s', stderr '%s'\n", argv[1] ? argv[1] : "",
            status, c.out, c.err);
  assert_int_equal(status, 2);
  assert_int_equal(c.out_len, 0);
  assert_int_equal(lines, 1);
  assert_true(strncmp(c.err, "kernel_jit: ", 12) == 0);
  kj_child_free(&c);
}

static void bad_flags_exit_2(void **state) {
  (void)state;
  char *cases[][6] = {
      {EXE, "--bogus", NULL},
      {EXE, "--kernels", NULL},
      {EXE, "--kernels", "0", NULL},
      {EXE, "--kernels", "abc", NULL},
      {EXE, "--kernels", "-1", NULL},
      {EXE, "--kernels", "99999", NULL},
      {EXE, "--kernels", "10x", NULL},
      {EXE, "--seed", "", NULL},
      {EXE, "--runtime-tag", NULL},
      {EXE, "--json", "--nope", NULL},
      {EXE, "json", NULL},
      {EXE, "--hold-after", "0", NULL},
      {EXE, "--kernels", "5", "--hold-after", "6", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) assert_usage_error(cases[i]);
  /* --help is not an error: usage on stdout, exit 0. */
  char *help[] = {EXE, "--help", NULL};
  kj_child c;
  assert_int_equal(kj_run(&c, help), 0);
  assert_non_null(strstr(c.out, "usage: kernel_jit"));
  assert_int_equal(c.err_len, 0);
  kj_child_free(&c);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bad_flags_exit_2),
  };
  return KJ_RUN("kernel_jit_procs", tests, argc, argv);
}
