/* jit.h: the runtime's JIT path: key -> ccache -> (compile | tier) -> kernel. */
#ifndef KJ_JIT_H
#define KJ_JIT_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ccache.h>

#include "codec.h"
#include "compiler.h"
#include "loader.h"
#include "spec.h"

typedef struct kj_jit_options {
  const char *runtime_tag_extra;   /* appended to the compiler's tag (--runtime-tag), or NULL */
  const char *cache_dir;           /* the disk tier's directory (--cache-dir), or NULL */
  uint64_t cache_max_bytes;        /* its cap (--cache-max-bytes); 0 means CCACHE_UNBOUNDED */
  const char *redis;               /* the Redis tier's servers (--redis), or NULL */
  const char *signing_key;         /* --signing-key FILE, or NULL */
  const char *const *trusted_keys; /* --trusted-key FILEs */
  uint32_t n_trusted;
  int trust_unsigned; /* --trust-unsigned: load unsigned kernels from Redis */
  int note_redis;     /* --verbose: note when each get last used Redis (kj_jit.redis_ns) */
} kj_jit_options;

/* What kj_jit_open returns besides 0: a run-time failure (exit 1), or a
 * configuration the library refused as invalid (exit 2). */
#define KJ_JIT_EFAIL  (-1)
#define KJ_JIT_EUSAGE (-2)

typedef struct kj_jit {
  ccache *cache;
  kj_compiler cc;
  kj_codec_state codec_state;
  ccache_codec codec; /* loads fresh compiles and tier hits alike */
  char runtime_tag[640];
  /* Measurements, one sample per event (sized for every kernel of a run). */
  double *compile_ms;      /* each compile callback: codegen + cc + load */
  ccache_key *compile_key; /* the program key of each, in the same order */
  uint32_t *compile_nth;   /* and which kj_jit_get of the run it was (0 first) */
  size_t n_compiles;
  uint32_t n_gets; /* kj_jit_get calls so far */
  double *tier_us; /* each get whose program came from a tier: fetch + check + load */
  size_t n_tier_loads;
  double acquire_ms; /* summed time of every kj_jit_get */
  /* With note_redis: CLOCK_MONOTONIC ns of the last answer from the Redis
   * tier (hit, miss, write, a bad or refused entry; not a failure to reach
   * it) in the latest kj_jit_get, 0 if it had none.  Set from the event hook (atomic: events may come from a
   * library thread). */
  _Atomic uint64_t redis_ns;
  char err[512]; /* the last compile or load failure */
} kj_jit;

/* The cache with its tiers (disk above Redis, each when asked for).
 * 0, or KJ_JIT_EFAIL / KJ_JIT_EUSAGE with one line in err. */
int kj_jit_open(kj_jit *j, const kj_jit_options *o, char *err, size_t errlen);
/* Release every handle first. */
void kj_jit_close(kj_jit *j);

/* The kernel for s (a program handle of j->cache, +1; its native is a
 * kj_native).  A ccache status; on failure j->err says why. */
int kj_jit_get(kj_jit *j, kj_spec s, ccache_program **out);

static inline kj_kernel_fn kj_program_fn(const ccache_program *p) {
  return ((const kj_native *)ccache_program_native(p))->fn;
}

#endif
