/* jit.h: the runtime's JIT path: call site -> closure key -> ccache ->
 * (program key -> ccache -> tier | Halide compile + link) -> pipeline. */
#ifndef HJ_JIT_H
#define HJ_JIT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <ccache.h>

#include "keys.h"
#include "native.h"
#include "spec.h"

typedef struct hj_jit_options {
  const char *cache_dir;           /* the disk tier's directory, or NULL */
  const char *redis;               /* the Redis tier's servers, or NULL */
  const char *runtime_tag_extra;   /* appended to the runtime tag, or NULL */
  uint64_t max_items;              /* closure entries kept (0: unbounded) */
  const char *signing_key;         /* --signing-key FILE, or NULL */
  const char *const *trusted_keys; /* --trusted-key FILEs */
  uint32_t n_trusted;
  int trust_unsigned; /* --trust-unsigned */
} hj_jit_options;

#define HJ_JIT_EFAIL  (-1) /* a run-time failure (exit 1) */
#define HJ_JIT_EUSAGE (-2) /* a configuration the library refused (exit 2) */

/* Samples kept per pipeline kind. */
#define HJ_MAX_SAMPLES 256

typedef struct hj_kind_stats {
  uint32_t compiles, tier_loads;
  double compile_ms[HJ_MAX_SAMPLES]; /* each compile: Halide compile_to_object + cc + load */
  double halide_ms[HJ_MAX_SAMPLES];  /* of which Halide's compile_to_object */
  double tier_us[HJ_MAX_SAMPLES];    /* each get a tier served: fetch + verify + load */
} hj_kind_stats;

typedef struct hj_jit {
  ccache *cache;
  hj_ident id;
  char runtime_tag[1024];
  char tmpdir[256]; /* private scratch directory for .o / .so files */
  _Atomic unsigned serial;
  hj_codec_state codec_state;
  ccache_codec codec;
  pthread_mutex_t mu; /* guards kinds[] */
  hj_kind_stats kinds[HJ_N_KINDS];
} hj_jit;

/* A call site's closure: what ccache_get_or_compile's lease holds. */
typedef struct hj_closure {
  hj_spec spec;
  uint32_t layer, slot;
} hj_closure;

/* Open the cache (codec, tiers, bounds) and find the target, the versions
 * and `cc`.  0, or HJ_JIT_EFAIL / HJ_JIT_EUSAGE with one line in err. */
int hj_jit_open(hj_jit *j, const hj_jit_options *o, char *err, size_t errlen);
/* Release every lease and handle first. */
void hj_jit_close(hj_jit *j);

/* The pipeline for s: a program handle (+1) whose native is an hj_native.
 * A ccache status; on failure err says why. */
int hj_jit_program(hj_jit *j, const hj_spec *s, ccache_program **out, char *err, size_t errlen);

/* The closure of call site (layer, slot) running s: a lease (its closure an
 * hj_closure, its native an hj_native).  A ccache status. */
int hj_jit_site(hj_jit *j, uint32_t layer, uint32_t slot, const hj_spec *s, ccache_lease *out,
                char *err, size_t errlen);

/* Unloads so far (destroy callbacks that dlclosed a pipeline). */
uint64_t hj_jit_unloads(hj_jit *j);

#endif
