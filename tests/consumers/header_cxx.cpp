// ccache.h must compile warning-free as C++11 and C++17 with
// -Wall -Wextra -Wpedantic, and link (extern "C") against the C library.
#include <ccache.h>
#include <ccache.h> // include guard

#include <cstdio>
#include <cstring>
#include <type_traits>

static_assert(alignof(ccache_fp) == 64, "ccache_fp is 64-byte aligned");
static_assert(std::is_trivially_copyable<ccache_key>::value, "ccache_key is plain data");
static_assert(CCACHE_VERSION_NUMBER ==
                  CCACHE_VERSION_MAJOR * 10000 + CCACHE_VERSION_MINOR * 100 + CCACHE_VERSION_PATCH,
              "CCACHE_VERSION_NUMBER");
static_assert(CCACHE_OK == 0 && CCACHE_MISS == 1 && CCACHE_EINVAL < 0, "status codes");

int main() {
  if (ccache_version() != CCACHE_VERSION_NUMBER) {
    std::fprintf(stderr, "ccache_version() %u != CCACHE_VERSION_NUMBER %d\n", ccache_version(),
                 CCACHE_VERSION_NUMBER);
    return 1;
  }
  if (std::strcmp(ccache_strerror(CCACHE_OK), "success") != 0) return 1;
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.sweeper_thread = 0;
  ccache *c = nullptr;
  if (ccache_open(&cfg, &c) != CCACHE_OK) return 1;
  ccache_fp fp;
  ccache_fp_init(&fp);
  ccache_key key{};
  if (ccache_fp_str(&fp, "c++", 3) != CCACHE_OK || ccache_fp_final(&fp, &key) != CCACHE_OK)
    return 1;
  ccache_lease lease{};
  if (ccache_fetch(c, key, &lease) != CCACHE_MISS) return 1;
  ccache_lease_release(c, &lease);
  if (ccache_close(c) != CCACHE_OK) return 1;
  std::printf("ccache %d.%d.%d from C++%ld: ok\n", CCACHE_VERSION_MAJOR, CCACHE_VERSION_MINOR,
              CCACHE_VERSION_PATCH, static_cast<long>(__cplusplus));
  return 0;
}
