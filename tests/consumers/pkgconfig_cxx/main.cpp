// Consumer test (issue 8): one ccache_get_or_compile() round trip from C++
// against the installed library, compiled with `pkg-config --cflags --libs
// ccache` (see .ci/consumers.sh).
#include <ccache.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

namespace {

struct Program {
  std::string code;
};
struct Closure {
  Program *program;
  int layer;
};

struct Counts {
  int compiles = 0;
  int closures_destroyed = 0;
  int programs_destroyed = 0;
};

struct Site {
  ccache_key pkey;
  int layer;
  Counts *counts;
};

ccache_key key_of(const char *op, int layer) {
  ccache_fp fp;
  ccache_fp_init(&fp);
  ccache_key k{};
  CHECK(ccache_fp_str(&fp, op, std::strlen(op)) == CCACHE_OK);
  if (layer >= 0) CHECK(ccache_fp_i64(&fp, layer) == CCACHE_OK);
  CHECK(ccache_fp_final(&fp, &k) == CCACHE_OK);
  return k;
}

} // namespace

// Callbacks with C language linkage, as the C API expects.
extern "C" {

static void destroy_closure(void *obj, void *ctx) {
  delete static_cast<Closure *>(obj);
  static_cast<Counts *>(ctx)->closures_destroyed++;
}

static void destroy_program(void *obj, void *ctx) {
  delete static_cast<Program *>(obj);
  static_cast<Counts *>(ctx)->programs_destroyed++;
}

static int compile(void *ud, ccache *c, ccache_key, void **closure_out,
                   ccache_program **program_out) {
  Site *site = static_cast<Site *>(ud);
  site->counts->compiles++;
  Program *native = new Program{"jit code"};
  ccache_program *p = nullptr;
  // intern takes ownership of native in every case
  if (ccache_program_intern(c, site->pkey, native, native->code.size(), &p) != CCACHE_OK) return 1;
  *closure_out = new Closure{native, site->layer};
  *program_out = p;
  return 0;
}

} // extern "C"

int main() {
  CHECK(ccache_version() == CCACHE_VERSION_NUMBER);

  Counts counts;
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.destroy_closure = destroy_closure;
  cfg.destroy_program = destroy_program;
  cfg.ctx = &counts;
  ccache *c = nullptr;
  CHECK(ccache_open(&cfg, &c) == CCACHE_OK);

  Site site{key_of("softmax", -1), 5, &counts};
  const ccache_key key = key_of("softmax", 5);
  Program *first = nullptr;
  for (int round = 0; round < 2; round++) { // miss + compile, then hit
    ccache_lease lease{};
    CHECK(ccache_get_or_compile(c, key, compile, &site, &lease) == CCACHE_OK);
    Closure *closure = static_cast<Closure *>(lease.closure);
    CHECK(closure->layer == 5 && closure->program == lease.native);
    if (round == 0) first = closure->program;
    CHECK(closure->program == first);
    ccache_lease_release(c, &lease);
  }
  CHECK(counts.compiles == 1);

  ccache_lease none{};
  CHECK(ccache_fetch(c, key_of("softmax", 6), &none) == CCACHE_MISS);

  CHECK(ccache_close(c) == CCACHE_OK);
  CHECK(counts.closures_destroyed == 1 && counts.programs_destroyed == 1);

  // The Redis tier links (hiredis, for static consumers); no connection yet.
  ccache_redis_options ro;
  ccache_redis_options_init(&ro);
  ro.servers = "127.0.0.1:1";
  ccache_tier *tier = nullptr;
  const int trc = ccache_tier_redis(&ro, &tier);
  CHECK(trc == CCACHE_OK || trc == CCACHE_ENOTSUP);
  ccache_tier_free(tier);

  std::printf("ccache %u (header %d): get_or_compile round trip ok (C++%ld); Redis tier %s\n",
              ccache_version(), CCACHE_VERSION_NUMBER, static_cast<long>(__cplusplus),
              trc == CCACHE_OK ? "built in" : "not built");
  return 0;
}
