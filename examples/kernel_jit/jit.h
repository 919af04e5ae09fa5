/* jit.h: the runtime's JIT path: key -> ccache -> (compile | tier) -> kernel. */
#ifndef KJ_JIT_H
#define KJ_JIT_H

#include <stddef.h>
#include <stdint.h>

#include <ccache.h>

#include "compiler.h"
#include "loader.h"
#include "spec.h"

typedef struct kj_jit_options {
  const char *runtime_tag_extra; /* appended to the compiler's tag (--runtime-tag), or NULL */
} kj_jit_options;

typedef struct kj_jit {
  ccache *cache;
  kj_compiler cc;
  char runtime_tag[640];
  /* Measurements, one sample per event (sized for every kernel of a run). */
  double *compile_ms; /* each compile callback: codegen + cc + load */
  size_t n_compiles;
  double *tier_us; /* each get whose program came from a tier: fetch + check + load */
  size_t n_tier_loads;
  double acquire_ms; /* summed time of every kj_jit_get */
  char err[512];     /* the last compile or load failure */
} kj_jit;

/* 0, or -1 with one line in err. */
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
