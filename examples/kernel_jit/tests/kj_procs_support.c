/* kj_procs_support.c: the process-level tests' shared helpers (see
 * kj_procs_support.h). */
#include "kj_procs_support.h"

#include <stdlib.h>

void parse(const kj_child *c, jit_out *r) {
  r->status = c->status;
  if (c->status != 0) fprintf(stderr, "kernel_jit exited %d:\n%s%s", c->status, c->out, c->err);
  assert_int_equal(c->status, 0);
  struct {
    const char *name;
    uint64_t *v;
  } f[] = {{"compiles", &r->compiles},         {"program_misses", &r->program_misses},
           {"tier_hits", &r->tier_hits},       {"tier_misses", &r->tier_misses},
           {"tier_writes", &r->tier_writes},   {"tier_errors", &r->tier_errors},
           {"tier_corrupt", &r->tier_corrupt}, {"lock_waits", &r->lock_waits}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    if (kj_json_u64(c->out, f[i].name, f[i].v) != 0)
      fprintf(stderr, "no %s in: %s\n", f[i].name, c->out);
    assert_int_equal(kj_json_u64(c->out, f[i].name, f[i].v), 0);
  }
  assert_int_equal(kj_json_str(c->out, "checksum", r->checksum, sizeof r->checksum), 0);
  assert_int_equal(strlen(r->checksum), 32);
}

/* kernel_jit --json --kernels K, then up to 6 more arguments. */
void argv_for(char **argv, const char *a1, const char *a2, const char *a3, const char *a4) {
  /* Unsigned by name (these runs test the tiers; redis_without_keys_refused
   * tests the refusal): harmless without --redis. */
  const char *v[] = {EXE, "--json", "--kernels", K_STR, "--trust-unsigned", a1, a2, a3, a4, NULL};
  size_t n = 0;
  for (size_t i = 0; i < sizeof v / sizeof v[0] && v[i]; i++) argv[n++] = (char *)v[i];
  argv[n] = NULL;
}

void run_jit(jit_out *r, const char *a1, const char *a2, const char *a3, const char *a4) {
  char *argv[12];
  argv_for(argv, a1, a2, a3, a4);
  kj_child c;
  kj_run(&c, argv);
  parse(&c, r);
  kj_child_free(&c);
}

/* The checksum of the K kernels' outputs with no tier at all. */
void reference_checksum(char *sum) {
  jit_out r;
  run_jit(&r, NULL, NULL, NULL, NULL);
  assert_int_equal(r.compiles, K);
  assert_int_equal(r.tier_misses, 0); /* no tiers: nothing asked */
  strcpy(sum, r.checksum);
}

/* A fresh cold run: every kernel compiled and written, nothing else. */
void assert_cold(const jit_out *r, const char *ref) {
  assert_int_equal(r->compiles, K);
  assert_int_equal(r->tier_misses, K);
  assert_int_equal(r->tier_hits, 0);
  assert_int_equal(r->tier_writes, K);
  assert_int_equal(r->tier_errors, 0);
  assert_int_equal(r->tier_corrupt, 0);
  assert_string_equal(r->checksum, ref);
}

/* A warm run: every kernel loaded from the (one) tier, nothing compiled. */
void assert_warm(const jit_out *r, const char *ref) {
  assert_int_equal(r->compiles, 0);
  assert_int_equal(r->program_misses, K);
  assert_int_equal(r->tier_hits, K);
  assert_int_equal(r->tier_misses, 0);
  assert_int_equal(r->tier_writes, 0);
  assert_int_equal(r->tier_errors, 0);
  assert_int_equal(r->tier_corrupt, 0);
  assert_string_equal(r->checksum, ref);
}

int dir_setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  if (!fx || kj_scratch(fx->dir, sizeof fx->dir, "test") != 0) {
    free(fx);
    return -1;
  }
  *state = fx;
  return 0;
}

int teardown(void **state) {
  fixture *fx = *state;
  if (!fx) return 0;
  if (fx->has_redis) {
    kj_redis_stop(&fx->redis);
    kj_redis_free(&fx->redis);
  }
  kj_scratch_remove(fx->dir);
  free(fx);
  return 0;
}

/* path = the fixture's directory + "/" + name (not created). */
const char *sub(const fixture *fx, const char *name, char *path, size_t n) {
  snprintf(path, n, "%s/%s", fx->dir, name);
  return path;
}

/* Exit 2, nothing on stdout, exactly one line on stderr. */
void assert_usage_error(char *const argv[]) {
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
