/* Consumer test (issue 8): one ccache_get_or_compile() round trip against
 * the installed library, found with find_package(ccache CONFIG). */
#include <ccache.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static int compiles, closures_destroyed, programs_destroyed;
static int native_program = 42; /* stands for the compiled code */
static int closure_object = 7;  /* stands for the runtime's callable */

static void destroy_closure(void *obj, void *ctx) {
  (void)ctx;
  CHECK(obj == &closure_object);
  closures_destroyed++;
}

static void destroy_program(void *obj, void *ctx) {
  (void)ctx;
  CHECK(obj == &native_program);
  programs_destroyed++;
}

static int compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                   ccache_program **program_out) {
  (void)key;
  compiles++;
  ccache_key pkey = *(const ccache_key *)ud;
  ccache_program *p = NULL;
  if (ccache_program_intern(c, pkey, &native_program, 4096, &p) != CCACHE_OK) return 1;
  *closure_out = &closure_object;
  *program_out = p;
  return 0;
}

int main(void) {
  CHECK(ccache_version() == CCACHE_VERSION_NUMBER);
  CHECK(strcmp(ccache_strerror(CCACHE_MISS), "") != 0);

  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.max_items = 16;
  cfg.destroy_closure = destroy_closure;
  cfg.destroy_program = destroy_program;
  ccache *c = NULL;
  CHECK(ccache_open(&cfg, &c) == CCACHE_OK);

  ccache_fp fp;
  ccache_key key, pkey;
  ccache_fp_init(&fp);
  CHECK(ccache_fp_str(&fp, "matmul", 6) == CCACHE_OK);
  CHECK(ccache_fp_final(&fp, &pkey) == CCACHE_OK);
  CHECK(ccache_fp_u64(&fp, 3) == CCACHE_OK); /* the call site: layer 3 */
  CHECK(ccache_fp_final(&fp, &key) == CCACHE_OK);

  for (int round = 0; round < 2; round++) { /* miss + compile, then hit */
    ccache_lease lease = {0};
    CHECK(ccache_get_or_compile(c, key, compile, &pkey, &lease) == CCACHE_OK);
    CHECK(lease.closure == &closure_object && lease.native == &native_program);
    ccache_lease_release(c, &lease);
  }
  CHECK(compiles == 1);

  ccache_stats st;
  memset(&st, 0, sizeof st);
  st.size = sizeof st;
  ccache_stats_get(c, &st);
  CHECK(st.hits == 1 && st.misses == 1 && st.compiles == 1 && st.items == 1);

  CHECK(ccache_close(c) == CCACHE_OK);
  CHECK(closures_destroyed == 1 && programs_destroyed == 1);

  /* The Redis tier links (hiredis, for static consumers); no connection is
   * made until a miss, so nothing needs to listen on port 1. */
  ccache_redis_options ro;
  ccache_redis_options_init(&ro);
  ro.servers = "127.0.0.1:1";
  ccache_tier *tier = NULL;
  int trc = ccache_tier_redis(&ro, &tier);
  CHECK(trc == CCACHE_OK || trc == CCACHE_ENOTSUP);
  ccache_tier_free(tier);

  printf("ccache %u (header %d): get_or_compile round trip ok (C); Redis tier %s\n",
         ccache_version(), CCACHE_VERSION_NUMBER, trc == CCACHE_OK ? "built in" : "not built");
  return 0;
}
