/* test_default.c - the process-wide default instance.  Each scenario runs in
 * a forked child (the instance is created once per process), before this
 * process ever creates it. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

typedef int (*scenario_fn)(void);

static int run_child(scenario_fn fn, const char *items, const char *ttl, const char *cost) {
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("CLOSURE_CACHE_MAX_ITEMS");
    unsetenv("CLOSURE_CACHE_TTL_MS");
    unsetenv("CLOSURE_CACHE_MAX_COST");
    if (items) setenv("CLOSURE_CACHE_MAX_ITEMS", items, 1);
    if (ttl) setenv("CLOSURE_CACHE_TTL_MS", ttl, 1);
    if (cost) setenv("CLOSURE_CACHE_MAX_COST", cost, 1);
    _exit(fn());
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 99;
  return WEXITSTATUS(status);
}

/* Exit codes: 0 ok, otherwise the number of the failed check. */
static int sc_defaults_and_identity(void) {
  ccache *a = NULL, *b = NULL;
  if (ccache_default(&a) != CCACHE_OK || !a) return 1;
  if (ccache_default(&b) != CCACHE_OK || a != b) return 2;
  uint64_t mi, ttl, mc;
  if (ccache_get_limits(a, &mi, &ttl, &mc) != CCACHE_OK) return 3;
  if (mi != CCACHE_UNBOUNDED || ttl != CCACHE_UNBOUNDED || mc != CCACHE_UNBOUNDED) return 4;
  if (ccache_close(a) != CCACHE_EINVAL) return 5; /* lives until exit */
  ccache_config cfg;
  ccache_config_init(&cfg);
  if (ccache_default_init(&cfg) != CCACHE_EBUSY) return 6; /* after first use */
  if (ccache_default(NULL) != CCACHE_EINVAL) return 7;
  return 0;
}

static int sc_env_bounds(void) {
  ccache *a = NULL;
  if (ccache_default(&a) != CCACHE_OK) return 1;
  uint64_t mi, ttl, mc;
  ccache_get_limits(a, &mi, &ttl, &mc);
  if (mi != 128 || ttl != 60000 || mc != CCACHE_UNBOUNDED) return 2;
  return 0;
}

static int sc_invalid_every_time(void) {
  ccache *a = NULL;
  for (int i = 0; i < 3; i++) {
    if (ccache_default(&a) != CCACHE_EINVAL) return 1 + i;
    /* Which variable and which value were refused (the library prints
     * nothing): the one bad variable this scenario set. */
    const char *names[] = {"CLOSURE_CACHE_MAX_ITEMS", "CLOSURE_CACHE_TTL_MS",
                           "CLOSURE_CACHE_MAX_COST"};
    char want[256] = "";
    for (int k = 0; k < 3; k++)
      if (getenv(names[k]))
        snprintf(want, sizeof want,
                 "%s=\"%s\": not a decimal integer from 1 to 2^64 - 2, \"unbounded\" or "
                 "\"infinity\"",
                 names[k], getenv(names[k]));
    if (strcmp(ccache_error_detail(), want) != 0) return 10 + i;
  }
  return 0;
}

static int destroyed;
static void count_destroy(void *obj, void *ctx) {
  (void)obj, (void)ctx;
  destroyed++;
}

static int sc_init_then_env_override(void) {
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.max_items = 7;
  cfg.max_cost_bytes = 1000;
  cfg.sweeper_thread = 0;
  cfg.destroy_program = count_destroy;
  if (ccache_default_init(&cfg) != CCACHE_OK) return 1;
  cfg.max_items = 0;
  if (ccache_default_init(&cfg) != CCACHE_EINVAL) return 2;
  ccache *a = NULL;
  if (ccache_default(&a) != CCACHE_OK) return 3;
  uint64_t mi, ttl, mc;
  ccache_get_limits(a, &mi, &ttl, &mc);
  if (mi != 7 || ttl != CCACHE_UNBOUNDED || mc != 50) return 4; /* env wins for cost */
  static int native;
  ccache_program *p = NULL;
  if (ccache_program_intern(a, PK(1), &native, 1, &p) != CCACHE_OK) return 5;
  ccache_program_release(a, p);
  if (destroyed != 1) return 6; /* the supplied callbacks are used */
  return 0;
}

static int sc_fork_gets_a_new_instance(void) {
  ccache *parent = NULL;
  if (ccache_default(&parent) != CCACHE_OK) return 1;
  pid_t pid = fork();
  if (pid == 0) {
    ccache *child = NULL;
    if (ccache_default(&child) != CCACHE_OK) _exit(2);
    if (child == parent) _exit(3);
    ccache_lease l;
    if (ccache_fetch(parent, PK(1), &l) != CCACHE_EFORKED) _exit(4);
    if (ccache_clear(parent) != CCACHE_EFORKED) _exit(4);
    ccache_program *p = NULL;
    if (ccache_program_intern(child, PK(1), NULL, 1, &p) != CCACHE_OK) _exit(5);
    if (ccache_put(child, K(1), NULL, p) != CCACHE_OK) _exit(6);
    if (ccache_fetch(child, K(1), &l) != CCACHE_OK) _exit(7);
    ccache_lease_release(child, &l);
    ccache_program_release(child, p);
    _exit(0);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 8;
  if (WEXITSTATUS(status) != 0) return 10 + WEXITSTATUS(status);
  ccache *again = NULL;
  if (ccache_default(&again) != CCACHE_OK || again != parent) return 9;
  return 0;
}

static void default_instance_after_fork(void **state) {
  (void)state;
  assert_int_equal(run_child(sc_fork_gets_a_new_instance, NULL, NULL, NULL), 0);
}

static void default_instance_defaults(void **state) {
  (void)state;
  assert_int_equal(run_child(sc_defaults_and_identity, NULL, NULL, NULL), 0);
}

static void default_instance_bounds_from_environment(void **state) {
  (void)state;
  assert_int_equal(run_child(sc_env_bounds, "128", "60000", "unbounded"), 0);
  assert_int_equal(run_child(sc_env_bounds, "128", "60000", "infinity"), 0);
}

static void default_instance_invalid_environment(void **state) {
  (void)state;
  const char *bad[] = {
      "0",   "-5",       "12abc", "", " 12", "+3", "18446744073709551615", "99999999999999999999",
      "1e3", "Unbounded"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(run_child(sc_invalid_every_time, bad[i], NULL, NULL), 0);
    assert_int_equal(run_child(sc_invalid_every_time, NULL, bad[i], NULL), 0);
    assert_int_equal(run_child(sc_invalid_every_time, NULL, NULL, bad[i]), 0);
  }
}

static void default_instance_init_before_first_use(void **state) {
  (void)state;
  assert_int_equal(run_child(sc_init_then_env_override, NULL, NULL, "50"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(default_instance_defaults),
      cmocka_unit_test(default_instance_bounds_from_environment),
      cmocka_unit_test(default_instance_invalid_environment),
      cmocka_unit_test(default_instance_init_before_first_use),
      cmocka_unit_test(default_instance_after_fork),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
