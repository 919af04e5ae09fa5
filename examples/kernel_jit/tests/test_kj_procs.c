/* test_kj_procs.c: kernel_jit as processes - its command line, and (with
 * the directory tier) warm restarts, processes sharing a directory, foreign
 * runtime tags, the directory cap, and the descriptors `cc` inherits.  The
 * Redis cases are in test_kj_procs_redis.c.  Every count asserted is exact
 * unless a comment says why it cannot be. */
#include <ftw.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kj_procs_support.h"

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
      {EXE, "--cache-dir", NULL},
      {EXE, "--cache-dir", "", NULL},
      {EXE, "--cache-max-bytes", "100000", NULL}, /* without --cache-dir */
      {EXE, "--cache-dir", "/tmp/x", "--cache-max-bytes", "0", NULL},
      {EXE, "--redis", NULL},
      {EXE, "--redis", "", NULL},
      {EXE, "--redis", "localhost", NULL},
      {EXE, "--redis", "localhost:0", NULL},
      {EXE, "--redis", "localhost:65536", NULL},
      {EXE, "--redis", "127.0.0.1:6379,", NULL},
      {EXE, "--redis", ":6379", NULL},
      {EXE, "--redis-sentinel", NULL},
      {EXE, "--redis-sentinel", "127.0.0.1:26379", NULL},
      {EXE, "--redis-sentinel", "127.0.0.1:26379/", NULL},
      {EXE, "--redis-sentinel", "/mym", NULL},
      {EXE, "--redis-sentinel", "127.0.0.1:26379/a,", NULL},
      {EXE, "--redis", "127.0.0.1:6379", "--redis-sentinel", "127.0.0.1:26379/mym", NULL},
      {EXE, "--redis-sentinel", "127.0.0.1:26379/mym", "--redis", "127.0.0.1:6379", NULL},
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

/* A second process with the same directory compiles nothing and computes
 * the same outputs. */
static void warm_restart_same_checksum(void **state) {
  char ref[40], dir[300];
  reference_checksum(ref);
  sub(*state, "cache", dir, sizeof dir);
  jit_out cold, warm;
  run_jit(&cold, "--cache-dir", dir, NULL, NULL);
  assert_cold(&cold, ref);
  run_jit(&warm, "--cache-dir", dir, NULL, NULL);
  assert_warm(&warm, ref);
}

/* 4 processes released together on a directory that does not exist yet:
 * each kernel is compiled by exactly one of them; the others wait for its
 * compile lock and load what it wrote. */
static void four_processes_compile_once(void **state) {
  char ref[40], cache[300];
  reference_checksum(ref);
  sub(*state, "cache", cache, sizeof cache);
  char *argv[12];
  argv_for(argv, "--cache-dir", cache, NULL, NULL);
  kj_child c[4];
  assert_int_equal(kj_run_together(c, 4, argv), 0);
  uint64_t compiles = 0, waits = 0;
  for (int i = 0; i < 4; i++) {
    jit_out r;
    parse(&c[i], &r);
    fprintf(stderr,
            "process %d: %" PRIu64 " compiles, %" PRIu64 " tier hits, %" PRIu64 " lock waits\n", i,
            r.compiles, r.tier_hits, r.lock_waits);
    assert_int_equal(r.compiles + r.tier_hits, K);
    assert_int_equal(r.tier_errors, 0);
    assert_int_equal(r.tier_corrupt, 0);
    assert_string_equal(r.checksum, ref);
    compiles += r.compiles;
    waits += r.lock_waits;
    kj_child_free(&c[i]);
  }
  assert_int_equal(compiles, K);
  (void)waits; /* how many waited depends on timing: reported above, not asserted */
}

/* Another runtime tag lives in its own namespace: a miss (compiled again,
 * never a load, never "corrupt"), and it does not overwrite the first. */
static void foreign_runtime_tag_compiles_again(void **state) {
  char ref[40], dir[300];
  reference_checksum(ref);
  sub(*state, "cache", dir, sizeof dir);
  jit_out r;
  run_jit(&r, "--cache-dir", dir, NULL, NULL);
  assert_cold(&r, ref);
  run_jit(&r, "--cache-dir", dir, "--runtime-tag", "another-runtime");
  assert_cold(&r, ref);
  run_jit(&r, "--cache-dir", dir, NULL, NULL);
  assert_warm(&r, ref);
  run_jit(&r, "--cache-dir", dir, "--runtime-tag", "another-runtime");
  assert_warm(&r, ref);
}

/* Entry files under a disk tier's directory: their count, total and
 * largest size (the "lock" and "size" files are not entries). */
static size_t entries_n, entries_bytes, entries_max;

static int count_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  const char *name = path + ftw->base;
  if (flag == FTW_F && strlen(name) == 32 && strspn(name, "0123456789abcdef") == 32) {
    entries_n++;
    entries_bytes += (size_t)st->st_size;
    if ((size_t)st->st_size > entries_max) entries_max = (size_t)st->st_size;
  }
  return 0;
}

static void count_entries(const char *dir) {
  entries_n = entries_bytes = entries_max = 0;
  assert_int_equal(nftw(dir, count_entry, 16, FTW_PHYS), 0);
}

/* --cache-max-bytes reaches the disk tier: 10 kernels of ~15 KB each under
 * a 60,000-byte cap leave at most the cap plus one entry, and a warm run
 * recompiles what was evicted, with the same outputs. */
static void cache_max_bytes_caps_directory(void **state) {
  char ref[40], dir[300];
  reference_checksum(ref);
  sub(*state, "cache", dir, sizeof dir);
  jit_out r;
  run_jit(&r, "--cache-dir", dir, "--cache-max-bytes", "60000");
  assert_int_equal(r.compiles, K);
  assert_int_equal(r.tier_writes, K);
  count_entries(dir);
  fprintf(stderr, "after the cold run: %zu entries, %zu bytes (largest %zu)\n", entries_n,
          entries_bytes, entries_max);
  assert_true(entries_n >= 1); /* the cap is above one entry: the newest stay */
  assert_true(entries_bytes <= 60000 + entries_max);
  assert_true(entries_n < K);
  size_t kept = entries_n;
  run_jit(&r, "--cache-dir", dir, "--cache-max-bytes", "60000");
  assert_int_equal(r.compiles + r.tier_hits, K);
  assert_true(r.compiles >= K - kept); /* kept entries may be evicted by this run's writes */
  assert_string_equal(r.checksum, ref);
  count_entries(dir);
  assert_true(entries_bytes <= 60000 + entries_max);
}

/* ------------------------------------------------- descriptors of cc */

/* The first "cc" on PATH (the one kernel_jit would run). */
static void real_cc(char *out, size_t n) {
  const char *path = getenv("PATH");
  out[0] = '\0';
  for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
    size_t len = strcspn(p, ":");
    char cand[512];
    snprintf(cand, sizeof cand, "%.*s/cc", (int)len, p);
    if (len && access(cand, X_OK) == 0) {
      snprintf(out, n, "%s", cand);
      return;
    }
    p += len + (p[len] == ':');
  }
}

/* kernel_jit runs `cc` (PATH lookup) for its probes and for every kernel it
 * compiles, while it holds the kernel's compile lock, and with a small cap
 * its cleaner thread lists the directory meanwhile.  A `cc` first on PATH
 * writes what every one of its descriptors names (/proc/self/fd, as the
 * shell sees it before it execs the real compiler): nothing may be under
 * the cache directory (the lock files, the size file, the directory and
 * its folders).  (No socket either: a Redis variant needs only --redis.) */
static void cc_inherits_no_cache_descriptor(void **state) {
  const fixture *fx = *state;
  char dir[300], bin[300], log[300], wrapper[320], cc[512], cmd[1400];
  sub(fx, "cache", dir, sizeof dir);
  sub(fx, "bin", bin, sizeof bin);
  sub(fx, "fds.log", log, sizeof log);
  real_cc(cc, sizeof cc);
  assert_true(cc[0] != '\0');
  assert_int_equal(mkdir(bin, 0700), 0);
  snprintf(wrapper, sizeof wrapper, "%s/cc", bin);
  FILE *f = fopen(wrapper, "w");
  assert_non_null(f);
  fprintf(f,
          "#!/bin/sh\n"
          "for fd in /proc/$$/fd/*; do t=$(readlink \"$fd\") && echo \"$t\"; done >> \"%s\"\n"
          "echo end >> \"%s\"\n"
          "exec \"%s\" \"$@\"\n",
          log, log, cc);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(chmod(wrapper, 0700), 0);
  const char *old = getenv("PATH");
  char *saved = strdup(old ? old : "/usr/bin:/bin");
  snprintf(cmd, sizeof cmd, "%s:%s", bin, saved);
  setenv("PATH", cmd, 1);
  jit_out r;
  run_jit(&r, "--cache-dir", dir, "--cache-max-bytes", "60000");
  setenv("PATH", saved, 1);
  free(saved);
  assert_int_equal(r.compiles, K);
  assert_int_equal(r.tier_writes, K);
  size_t len = 0;
  FILE *lf = fopen(log, "r");
  assert_non_null(lf);
  char line[1200];
  int runs = 0, named = 0, bad = 0;
  while (fgets(line, sizeof line, lf)) {
    len = strcspn(line, "\n");
    line[len] = '\0';
    if (strcmp(line, "end") == 0) {
      runs++;
      continue;
    }
    named++;
    if (strncmp(line, dir, strlen(dir)) == 0 || strncmp(line, "socket:", 7) == 0) {
      fprintf(stderr, "cc inherited: %s\n", line);
      bad++;
    }
  }
  fclose(lf);
  fprintf(stderr, "%d runs of cc, %d descriptors listed\n", runs, named);
  assert_int_equal(runs, K + 2); /* --version, -dumpmachine, one per kernel */
  assert_true(named >= 3 * runs);
  assert_int_equal(bad, 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bad_flags_exit_2),
      cmocka_unit_test_setup_teardown(warm_restart_same_checksum, dir_setup, teardown),
      cmocka_unit_test_setup_teardown(four_processes_compile_once, dir_setup, teardown),
      cmocka_unit_test_setup_teardown(foreign_runtime_tag_compiles_again, dir_setup, teardown),
      cmocka_unit_test_setup_teardown(cache_max_bytes_caps_directory, dir_setup, teardown),
      cmocka_unit_test_setup_teardown(cc_inherits_no_cache_descriptor, dir_setup, teardown),
  };
  return KJ_RUN("kernel_jit_procs", tests, argc, argv);
}
