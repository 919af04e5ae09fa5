/*
 * test_caller_errors.c - a careless integrator's mistakes.
 *
 * Refused in every build (cheap to detect): a config that never went
 * through ccache_config_init(), a stats struct whose size was never set.
 * In the default build a lease copy released after the original leaves the
 * gauges exact (no wrap).  In the checked build (CCACHE_CHECKED) the rest is
 * detected and aborts with exactly one line, `ccache: <misuse> (<function>)`;
 * those cases run in a forked child and are skipped in other builds (there
 * they are undefined behaviour, as documented).
 */
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

#define U CCACHE_UNBOUNDED

/* ------------------------------------------------------ every build */

static void garbage_config_refused(void **state) {
  (void)state;
  ccache_config cfg;
  ccache *c = NULL;
  memset(&cfg, 0xA5, sizeof cfg); /* stack garbage: alloc/free point nowhere */
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  assert_null(c);
  assert_string_equal(ccache_error_detail(),
                      "ccache_config: size 2779096485, magic 0xa5a5a5a5: not set up by "
                      "ccache_config_init()");
  assert_int_equal(ccache_default_init(&cfg), CCACHE_EINVAL);
  /* A plausible size is not enough: the marker is missing. */
  memset(&cfg, 0, sizeof cfg);
  cfg.size = sizeof cfg;
  cfg.max_items = cfg.ttl_ms = cfg.max_cost_bytes = U;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  /* The marker with a size no struct of this API has. */
  ccache_config_init(&cfg);
  cfg.size = CCACHE_STRUCT_SIZE_MAX + 1;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  cfg.size = UINT32_MAX;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  /* A later, larger struct (up to the bound) is accepted. */
  ccache_config_init(&cfg);
  cfg.size = CCACHE_STRUCT_SIZE_MAX;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  assert_int_equal(ccache_close(c), CCACHE_OK);
  ccache_config_init(&cfg);
  assert_int_equal(cfg.magic, CCACHE_CONFIG_MAGIC);
}

static void stats_size_never_set_writes_nothing(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  ccache_stats s;
  memset(&s, 0x5A, sizeof s);
  s.size = CCACHE_STRUCT_SIZE_MAX + 1;
  ccache_stats_get(c, &s);
  unsigned char *b = (unsigned char *)&s;
  for (size_t i = sizeof s.size; i < sizeof s; i++)
    if (b[i] != 0x5A) fail_msg("byte %zu written", i);
  t_close(c);
}

#ifndef CCACHE_CHECKED
/* Default build: a copy of a lease released after the original, while the
 * entry is still in the table, changes nothing (no gauge wraps). */
static void lease_copy_released_after_original(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  t_put(c, 1, 1, p);
  ccache_program_release(c, p);
  ccache_lease l, copy;
  assert_int_equal(ccache_fetch(c, K(1), &l), CCACHE_OK);
  copy = l;
  ccache_lease_release(c, &l);
  ccache_lease_release(c, &copy);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.leases_out, 0);
  assert_int_equal(s.hits, 1);
  assert_int_equal(t.closures_destroyed, 0);
  t_close(c);
  assert_int_equal(t.closures_destroyed, 1);
  assert_int_equal(t.programs_destroyed, 1);
}
#endif

/* ------------------------------------------------------ checked build */

#ifdef CCACHE_CHECKED
/* fn must abort after printing exactly `want` (one line). */
static void aborts_with(void (*fn)(void), const char *want) {
  char err[512];
  int aborted = 0;
  t_run_child(fn, err, sizeof err, &aborted);
  if (!aborted) fail_msg("child did not abort; stderr: %s", err);
  assert_string_equal(err, want);
}

static ccache *child_cache(t_ctx *t) {
  ccache_config cfg;
  t_config(&cfg, t);
  ccache *c = NULL;
  if (ccache_open(&cfg, &c) != CCACHE_OK) _exit(3);
  return c;
}

static ccache_program *child_program(ccache *c, uint64_t pk, int id) {
  ccache_program *p = NULL;
  if (ccache_program_intern(c, PK(pk), t_native(id), 1, &p) != CCACHE_OK) _exit(4);
  return p;
}

static void do_release_twice(void) {
  t_ctx t = {0};
  ccache *c = child_cache(&t);
  ccache_program *p = child_program(c, 1, 100);
  ccache_put(c, K(1), t_closure(1), p);
  ccache_lease l, copy;
  ccache_fetch(c, K(1), &l);
  copy = l;
  ccache_lease_release(c, &l);
  ccache_lease_release(c, &copy);
}

static void checked_lease_released_twice(void **state) {
  (void)state;
  aborts_with(do_release_twice, "ccache: lease released twice (ccache_lease_release)\n");
}

static void do_uninitialised_lease(void) {
  t_ctx t = {0};
  ccache *c = child_cache(&t);
  ccache_lease l;
  memset(&l, 0xA5, sizeof l); /* never filled by a fetch */
  ccache_lease_release(c, &l);
}

static void checked_uninitialised_lease(void **state) {
  (void)state;
  aborts_with(do_uninitialised_lease,
              "ccache: lease never taken, or uninitialised (ccache_lease_release)\n");
}

static void do_fetch_after_close(void) {
  t_ctx t = {0};
  ccache *c = child_cache(&t);
  ccache_close(c);
  ccache_lease l;
  ccache_fetch(c, K(1), &l);
}

static void checked_fetch_after_close(void **state) {
  (void)state;
  aborts_with(do_fetch_after_close,
              "ccache: cache used after ccache_close(), or never opened (ccache_fetch)\n");
}

static void do_closure_under_two_keys(void) {
  t_ctx t = {0};
  ccache *c = child_cache(&t);
  ccache_program *p = child_program(c, 1, 100);
  t_obj *x = t_closure(1);
  ccache_put(c, K(1), x, p);
  ccache_put(c, K(2), x, p);
}

static void checked_closure_put_under_two_keys(void **state) {
  (void)state;
  aborts_with(do_closure_under_two_keys,
              "ccache: closure put under two keys, or put again after it left the table "
              "(ccache_put)\n");
}

static void do_native_under_two_keys(void) {
  t_ctx t = {0};
  ccache *c = child_cache(&t);
  t_obj *n = t_native(7);
  ccache_program *a = NULL, *b = NULL;
  ccache_program_intern(c, PK(1), n, 1, &a);
  ccache_program_intern(c, PK(2), n, 1, &b);
}

static void checked_native_interned_under_two_keys(void **state) {
  (void)state;
  aborts_with(do_native_under_two_keys,
              "ccache: native program interned under two keys (ccache_program_intern)\n");
}

/* What the checked build must not flag: NULL closures and natives under
 * several keys, the allowed re-put, a pointer reused after its destroy, a
 * zeroed lease, and leases released on time. */
static void checked_allows_the_legal_cases(void **state) {
  (void)state;
  static int obj; /* never freed by the destroy callbacks below */
  t_ctx t = {0};
  ccache_config cfg;
  t_config(&cfg, &t);
  cfg.destroy_closure = NULL;
  cfg.destroy_program = NULL;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  ccache_program *p = NULL, *q = NULL;
  assert_int_equal(ccache_program_intern(c, PK(1), NULL, 1, &p), CCACHE_OK);
  assert_int_equal(ccache_program_intern(c, PK(2), NULL, 1, &q), CCACHE_OK);
  assert_int_equal(ccache_put(c, K(1), NULL, p), CCACHE_OK);
  assert_int_equal(ccache_put(c, K(2), NULL, p), CCACHE_OK);
  assert_int_equal(ccache_put(c, K(3), &obj, p), CCACHE_OK);
  assert_int_equal(ccache_put(c, K(3), &obj, p), CCACHE_OK); /* the re-put */
  assert_int_equal(ccache_remove(c, K(3)), CCACHE_OK);       /* destroyed: forgotten */
  assert_int_equal(ccache_put(c, K(4), &obj, p), CCACHE_OK);
  ccache_lease l = {0};
  ccache_lease_release(c, &l);
  assert_int_equal(ccache_fetch(c, K(4), &l), CCACHE_OK);
  ccache_lease_release(c, &l);
  ccache_program_release(c, p);
  ccache_program_release(c, q);
  assert_int_equal(ccache_close(c), CCACHE_OK);
}
#endif

#ifdef CCACHE_CHECKED
/* Program handles (issue 29): tracked like leases. */
static int compile_releasing_handle(void *ud, ccache *c, ccache_key key, void **closure_out,
                                    ccache_program **program_out) {
  (void)ud;
  if (ccache_program_intern(c, PK(7), t_native(7), 1, program_out) != CCACHE_OK) return -1;
  ccache_program_release(c, *program_out); /* the mistake: it is the cache's on success */
  *closure_out = t_closure((int)key.hi);
  return 0;
}

static void do_compile_releases_its_handle(void) {
  t_ctx t = {0};
  ccache *c = child_cache(&t);
  ccache_lease l;
  ccache_get_or_compile(c, K(1), compile_releasing_handle, NULL, &l);
}

static void checked_compile_releases_its_handle(void **state) {
  (void)state;
  aborts_with(do_compile_releases_its_handle,
              "ccache: compile handed the cache a program handle it had released (or never "
              "had) (ccache_get_or_compile)\n");
}

static void do_handle_released_twice(void) {
  t_ctx t = {0};
  ccache *c = child_cache(&t);
  ccache_program *p = child_program(c, 1, 100);
  ccache_program *again = NULL;
  ccache_program_fetch(c, PK(1), &again);
  ccache_program_release(c, p);
  ccache_program_release(c, again);
  ccache_program_release(c, p);
}

static void checked_program_handle_released_twice(void **state) {
  (void)state;
  aborts_with(do_handle_released_twice,
              "ccache: program handle released twice, or never handed out "
              "(ccache_program_release)\n");
}

/* A refused close lists what is out: each lease and handle, its key, the
 * thread that took it and whether that thread has exited. */
static ccache *lister;
static ccache_lease lost_lease;
static void *take_and_exit(void *arg) {
  (void)arg;
  ccache_fetch(lister, K(1), &lost_lease);
  return NULL;
}

static void do_close_lists_what_is_out(void) {
  t_ctx t = {0};
  lister = child_cache(&t);
  ccache_program *p = child_program(lister, 1, 100);
  ccache_put(lister, K(1), t_closure(1), p);
  pthread_t th;
  pthread_create(&th, NULL, take_and_exit, NULL);
  pthread_join(th, NULL);
  if (ccache_close(lister) != CCACHE_EBUSY) _exit(5);
  ccache_program_release(lister, p);
  if (ccache_close_ex(lister, CCACHE_CLOSE_ABANDON) != CCACHE_OK) _exit(6);
}

static void checked_close_lists_what_is_out(void **state) {
  (void)state;
  char err[1024], hex1[CCACHE_KEY_HEX_LEN], hexp[CCACHE_KEY_HEX_LEN], want[256];
  int aborted = 1;
  t_run_child(do_close_lists_what_is_out, err, sizeof err, &aborted);
  assert_false(aborted);
  /* Two lines, the lease's then the handle's; the thread ids vary. */
  snprintf(want, sizeof want, "ccache: close refused: lease on key %s taken by thread ",
           ccache_key_hex(K(1), hex1));
  assert_true(strncmp(err, want, strlen(want)) == 0);
  char *nl = strchr(err, '\n');
  assert_non_null(nl);
  assert_true(strncmp(nl - strlen(" (exited)"), " (exited)", strlen(" (exited)")) == 0);
  snprintf(want, sizeof want, "ccache: close refused: program handle for key %s taken by thread ",
           ccache_key_hex(PK(1), hexp));
  assert_true(strncmp(nl + 1, want, strlen(want)) == 0);
  assert_null(strstr(nl + 1, "(exited)")); /* the main thread holds it */
  assert_int_equal(strchr(nl + 1, '\n')[1], '\0');
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(garbage_config_refused),
      cmocka_unit_test(stats_size_never_set_writes_nothing),
#ifndef CCACHE_CHECKED
      cmocka_unit_test(lease_copy_released_after_original),
#else
      cmocka_unit_test(checked_lease_released_twice),
      cmocka_unit_test(checked_uninitialised_lease),
      cmocka_unit_test(checked_fetch_after_close),
      cmocka_unit_test(checked_closure_put_under_two_keys),
      cmocka_unit_test(checked_native_interned_under_two_keys),
      cmocka_unit_test(checked_allows_the_legal_cases),
      cmocka_unit_test(checked_compile_releases_its_handle),
      cmocka_unit_test(checked_program_handle_released_twice),
      cmocka_unit_test(checked_close_lists_what_is_out),
#endif
  };
#ifndef CCACHE_CHECKED
  printf(
      "test_caller_errors: default build; the checked build's cases run with "
      "-DCCACHE_CHECKED=ON (cmake --workflow --preset checked)\n");
#endif
  return cmocka_run_group_tests(tests, NULL, NULL);
}
