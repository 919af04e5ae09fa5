/* ccache.h must compile warning-free as C11 with -Wall -Wextra -Wpedantic
 * (built as an object library when CCACHE_BUILD_TESTS is on). */
#include <ccache.h>
#include <ccache.h> /* include guard */

#include <stdalign.h>

_Static_assert(alignof(ccache_fp) == 64, "ccache_fp is 64-byte aligned");
_Static_assert(CCACHE_VERSION_NUMBER ==
                   CCACHE_VERSION_MAJOR * 10000 + CCACHE_VERSION_MINOR * 100 + CCACHE_VERSION_PATCH,
               "CCACHE_VERSION_NUMBER");
_Static_assert(CCACHE_OK == 0 && CCACHE_MISS == 1 && CCACHE_EINVAL < 0, "status codes");

int ccache_header_c_check(void);
int ccache_header_c_check(void) {
  ccache_config cfg;
  ccache_lease lease = {0};
  ccache_key key = {1, 2};
  ccache_stats st = {0};
  ccache_status s = CCACHE_OK;
  (void)cfg;
  (void)lease;
  (void)st;
  return (int)s + (int)(key.lo + key.hi) + (CCACHE_UNBOUNDED == UINT64_MAX);
}
