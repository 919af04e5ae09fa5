/* kj_test.h: running one named cmocka test of an executable's list. */
#ifndef KJ_TEST_H
#define KJ_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

/* argv[1] names the test to run (ctest registers one entry per name); with
 * no argument every test runs.  An unknown name fails rather than passing
 * with zero tests. */
static inline int kj_run_named(const char *group, const struct CMUnitTest *tests, size_t n,
                               int argc, char **argv) {
  if (argc < 2) return _cmocka_run_group_tests(group, tests, n, NULL, NULL);
  for (size_t i = 0; i < n; i++)
    if (strcmp(tests[i].name, argv[1]) == 0)
      return _cmocka_run_group_tests(group, &tests[i], 1, NULL, NULL);
  fprintf(stderr, "%s: no test named %s\n", group, argv[1]);
  return 1;
}

#define KJ_RUN(group, tests, argc, argv) \
  kj_run_named(group, tests, sizeof(tests) / sizeof((tests)[0]), argc, argv)

#endif
