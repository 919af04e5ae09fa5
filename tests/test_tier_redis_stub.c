/* test_tier_redis_stub.c - a build without hiredis (CCACHE_REDIS=OFF, or no
 * libhiredis-dev): the Redis tier reports CCACHE_ENOTSUP and says which
 * package enables it; the options still have their defaults. */
#include <string.h>

#include "support.h"

static void redis_stub_reports_enotsup(void **state) {
  (void)state;
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  assert_int_equal(o.size, sizeof o);
  assert_string_equal(o.prefix, "ccache");
  assert_int_equal(o.lease_ms, 10000);
  o.servers = "127.0.0.1:6379";
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_redis(&o, &t), CCACHE_ENOTSUP);
  assert_null(t);
  assert_non_null(strstr(ccache_error_detail(), "libhiredis-dev"));
  assert_int_equal(ccache_tier_redis(NULL, &t), CCACHE_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(redis_stub_reports_enotsup)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
