/* kj_procs_support.h: what the process-level tests share (test_kj_procs.c,
 * test_kj_procs_redis.c): running kernel_jit with --json and parsing what it
 * printed, the reference checksum, the cold and warm run's exact counts, a
 * command line that must be a usage error, and each test's scratch
 * directory (and Redis server) as a cmocka fixture. */
#ifndef KJ_PROCS_SUPPORT_H
#define KJ_PROCS_SUPPORT_H

#include "kj_test.h"

#include <stddef.h>
#include <stdint.h>

#include "harness.h"

#ifndef KERNEL_JIT_EXE
#error "KERNEL_JIT_EXE: the path of the kernel_jit binary (set by CMake)"
#endif

#define EXE KERNEL_JIT_EXE

/* Kernels per run: 10 distinct (2 shapes x 5 ops), about 0.5 s cold. */
#define K     10
#define K_STR "10"

/* What one run printed, parsed. */
typedef struct jit_out {
  int status;
  uint64_t compiles, program_misses, tier_hits, tier_misses, tier_writes, tier_errors, tier_corrupt,
      lock_waits;
  char checksum[40];
} jit_out;

/* Each test's scratch directory (and Redis server, for the Redis tests),
 * removed in the teardown, which cmocka runs even when the test fails. */
typedef struct fixture {
  char dir[256];
  int has_redis;
  kj_redis redis;
} fixture;

/* c's exit status and the fields of its JSON (asserted present), into r;
 * a status other than 0 fails the test. */
void parse(const kj_child *c, jit_out *r);
/* kernel_jit --json --kernels K, then up to 6 more arguments. */
void argv_for(char **argv, const char *a1, const char *a2, const char *a3, const char *a4);
/* One run with those arguments (NULL: none), parsed into r. */
void run_jit(jit_out *r, const char *a1, const char *a2, const char *a3, const char *a4);
/* The checksum of the K kernels' outputs with no tier at all. */
void reference_checksum(char *sum);
/* A fresh cold run: every kernel compiled and written, nothing else. */
void assert_cold(const jit_out *r, const char *ref);
/* A warm run: every kernel loaded from the (one) tier, nothing compiled. */
void assert_warm(const jit_out *r, const char *ref);

/* The fixture's setup (a scratch directory) and teardown (the directory,
 * and the Redis server if has_redis). */
int dir_setup(void **state);
int teardown(void **state);
/* path = the fixture's directory + "/" + name (not created). */
const char *sub(const fixture *fx, const char *name, char *path, size_t n);
/* Exit 2, nothing on stdout, exactly one line on stderr. */
void assert_usage_error(char *const argv[]);

#endif
