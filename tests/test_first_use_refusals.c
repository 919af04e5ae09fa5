/*
 * test_first_use_refusals.c - what a runtime author meets first (issue 29):
 * no silent no-ops (tiers without a codec, a stats struct never set up, a
 * NULL argument named in the detail), a refused close that says what is
 * out, and a close that can abandon what a dead thread held (each object
 * destroyed once).  The checked build's handle misuses and close listing
 * are in test_caller_errors.c.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "tier_support.h"

#define U CCACHE_UNBOUNDED

/* ----------------------------------------------------- no silent no-ops */

static void tiers_without_codec_are_refused(void **state) {
  (void)state;
  t_ctx tc = {0};
  char *dir = t_tempdir("nocodec");
  ccache_disk_options d;
  ccache_disk_options_init(&d);
  d.dir = dir;
  ccache_tier *tier = NULL;
  assert_int_equal(ccache_tier_disk(&d, &tier), CCACHE_OK);
  ccache_config cfg;
  t_config(&cfg, &tc);
  cfg.tiers = &tier;
  cfg.n_tiers = 1;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_EINVAL);
  assert_null(c);
  assert_non_null(strstr(ccache_error_detail(), "1 tier(s) but no codec"));
  assert_int_equal(ccache_default_init(&cfg), CCACHE_EINVAL); /* the same check */
  /* A NULL argument says so, not what the failure before it said. */
  assert_int_equal(ccache_open(NULL, &c), CCACHE_EINVAL);
  assert_string_equal(ccache_error_detail(), "ccache_open: cfg is NULL");
  assert_int_equal(ccache_open(&cfg, NULL), CCACHE_EINVAL);
  assert_string_equal(ccache_error_detail(), "ccache_open: out is NULL");
  assert_int_equal(ccache_default_init(NULL), CCACHE_EINVAL);
  assert_string_equal(ccache_error_detail(), "ccache_default_init: cfg is NULL");
  ccache_tier_free(tier); /* still the caller's */
  t_rmrf(dir);
  free(dir);
}

static void stats_never_set_up_is_refused(void **state) {
  (void)state;
  t_ctx tc = {0};
  ccache *c = t_open(&tc, U, U, U);
  ccache_stats s;
  memset(&s, 0, sizeof s); /* a zeroed struct: size 0 */
  s.hits = 77;
  assert_int_equal(ccache_stats_get(c, &s), CCACHE_EINVAL);
  assert_int_equal(s.hits, 77); /* nothing written */
  assert_non_null(strstr(ccache_error_detail(), "stats size 0 was never set"));
  s.size = CCACHE_STRUCT_SIZE_MAX + 1;
  assert_int_equal(ccache_stats_get(c, &s), CCACHE_EINVAL);
  assert_int_equal(ccache_stats_get(c, NULL), CCACHE_EINVAL);
  ccache_stats_init(&s);
  assert_int_equal(s.size, sizeof s);
  assert_int_equal(s.hits, 0);
  assert_int_equal(t_fetch_id(c, 1), -1);
  assert_int_equal(ccache_stats_get(c, &s), CCACHE_OK);
  assert_int_equal(s.misses, 1);
  s.misses = 5;
  assert_int_equal(ccache_stats_get(NULL, &s), CCACHE_EINVAL);
  assert_int_equal(s.misses, 0); /* NULL cache: zeroes */
  t_close(c);
}

/* ----------------------------------------------- what a refused close says */

static void refused_close_says_what_is_out(void **state) {
  (void)state;
  t_ctx tc = {0};
  ccache *c = t_open(&tc, U, U, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  ccache_program *p2 = NULL;
  assert_int_equal(ccache_program_fetch(c, PK(1), &p2), CCACHE_OK);
  t_put(c, 1, 1, p);
  ccache_lease l;
  assert_int_equal(ccache_fetch(c, K(1), &l), CCACHE_OK);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.handles_out, 2);
  assert_int_equal(s.leases_out, 1);
  assert_int_equal(ccache_close(c), CCACHE_EBUSY);
  assert_string_equal(ccache_error_detail(),
                      "ccache_close: busy: 1 lease(s), 2 program handle(s), 0 compile(s) in "
                      "flight out");
  ccache_program_release(c, p);
  ccache_program_release(c, p2);
  assert_int_equal(t_stats(c).handles_out, 0);
  assert_int_equal(ccache_close(c), CCACHE_EBUSY);
  assert_string_equal(ccache_error_detail(),
                      "ccache_close: busy: 1 lease(s), 0 program handle(s), 0 compile(s) in "
                      "flight out");
  ccache_lease_release(c, &l);
  assert_int_equal(ccache_close_ex(c, 2), CCACHE_EINVAL); /* unknown flag */
  t_close(c);
}

typedef struct lost {
  ccache *c;
  ccache_lease lease[3];
  ccache_program *handle;
} lost;

/* A worker that takes leases and a handle, then exits without giving any of
 * them back (a crashed request, a cancelled thread). */
static void *leaky_worker(void *arg) {
  lost *w = arg;
  ccache_fetch(w->c, K(1), &w->lease[0]);
  ccache_fetch(w->c, K(1), &w->lease[1]);
  ccache_fetch(w->c, K(2), &w->lease[2]);
  ccache_program_fetch(w->c, PK(2), &w->handle);
  return NULL;
}

static void lease_of_exited_thread_can_be_abandoned(void **state) {
  (void)state;
  t_ctx tc = {0};
  lost w;
  memset(&w, 0, sizeof w);
  w.c = t_open(&tc, U, U, U);
  ccache_program *p1 = t_intern(w.c, 1, 100, 1), *p2 = t_intern(w.c, 2, 200, 1);
  t_put(w.c, 1, 1, p1);
  t_put(w.c, 2, 2, p2);
  t_put(w.c, 3, 3, p2);
  ccache_program_release(w.c, p1);
  ccache_program_release(w.c, p2);
  pthread_t th;
  pthread_create(&th, NULL, leaky_worker, &w);
  pthread_join(th, NULL);
  /* K2 leaves the table while the dead thread's lease still holds it. */
  assert_int_equal(ccache_remove(w.c, K(2)), CCACHE_OK);
  assert_int_equal(tc.closures_destroyed, 0);
  assert_int_equal(ccache_close(w.c), CCACHE_EBUSY);
  assert_string_equal(ccache_error_detail(),
                      "ccache_close: busy: 3 lease(s), 1 program handle(s), 0 compile(s) in "
                      "flight out");
  assert_int_equal(ccache_close(w.c), CCACHE_EBUSY); /* for ever, without the flag */
  assert_int_equal(ccache_close_ex(w.c, CCACHE_CLOSE_ABANDON), CCACHE_OK);
  /* Each closure and program exactly once (support.c's destroys free the
   * objects: a second destroy is a double free ASan reports). */
  assert_int_equal(tc.closures_destroyed, 3);
  assert_int_equal(tc.programs_destroyed, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tiers_without_codec_are_refused),
      cmocka_unit_test(stats_never_set_up_is_refused),
      cmocka_unit_test(refused_close_says_what_is_out),
      cmocka_unit_test(lease_of_exited_thread_can_be_abandoned),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
