/* test_status.c - status codes, texts and versions. */
#include <string.h>

#include "support.h"

static void status_values_are_pinned(void **state) {
  (void)state;
  assert_int_equal(CCACHE_OK, 0);
  assert_int_equal(CCACHE_MISS, 1);
  assert_int_equal(CCACHE_EINVAL, -1);
  assert_int_equal(CCACHE_ENOMEM, -2);
  assert_int_equal(CCACHE_EBUSY, -3);
  assert_int_equal(CCACHE_ECOMPILE, -4);
  assert_int_equal(CCACHE_EDEADLK, -5);
  assert_int_equal(CCACHE_EFORKED, -6);
  assert_int_equal(CCACHE_ETHREAD, -7);
  assert_int_equal(CCACHE_ENOTSUP, -8);
  assert_int_equal(CCACHE_EPERM, -9);
  assert_int_equal(CCACHE_EIO, -10);
}

static void every_status_has_a_distinct_text(void **state) {
  (void)state;
  static const int codes[] = {
#define CODE(name, value, text) value,
      CCACHE_STATUS_MAP(CODE)
#undef CODE
  };
  size_t n = sizeof codes / sizeof codes[0];
  assert_int_equal(n, 12);
  const char *unknown = ccache_strerror(12345);
  assert_non_null(unknown);
  assert_true(strlen(unknown) > 0);
  for (size_t i = 0; i < n; i++) {
    const char *t = ccache_strerror(codes[i]);
    assert_non_null(t);
    assert_true(strlen(t) > 0);
    assert_string_not_equal(t, unknown);
    for (size_t j = 0; j < i; j++) assert_string_not_equal(t, ccache_strerror(codes[j]));
  }
  assert_string_equal(ccache_strerror(-100), unknown);
}

static void version_matches_header(void **state) {
  (void)state;
  assert_int_equal(ccache_version(), CCACHE_VERSION_NUMBER);
  assert_int_equal(CCACHE_VERSION_NUMBER, CCACHE_VERSION_MAJOR * 10000 +
                                              CCACHE_VERSION_MINOR * 100 + CCACHE_VERSION_PATCH);
}

static void config_init_defaults(void **state) {
  (void)state;
  ccache_config cfg;
  memset(&cfg, 0x5A, sizeof cfg);
  ccache_config_init(&cfg);
  assert_int_equal(cfg.size, sizeof cfg);
  assert_int_equal(cfg.sweeper_thread, 1);
  assert_true(cfg.max_items == CCACHE_UNBOUNDED);
  assert_true(cfg.ttl_ms == CCACHE_UNBOUNDED);
  assert_true(cfg.max_cost_bytes == CCACHE_UNBOUNDED);
  assert_null(cfg.destroy_closure);
  assert_null(cfg.destroy_program);
  assert_null(cfg.clock_ms);
  assert_null(cfg.alloc);
  assert_null(cfg.free);
  assert_null(cfg.codec);
  assert_null(cfg.runtime_tag);
  assert_true(cfg.tier_min_compile_us == 1000);
  assert_null(cfg.tiers);
  assert_int_equal(cfg.n_tiers, 0);
  ccache_config_init(NULL); /* no-op */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(status_values_are_pinned),
      cmocka_unit_test(every_status_has_a_distinct_text),
      cmocka_unit_test(version_matches_header),
      cmocka_unit_test(config_init_defaults),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
