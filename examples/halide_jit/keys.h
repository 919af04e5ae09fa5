/* keys.h: the program key of a pipeline and the closure key of a call site.
 *
 * The program key is a ccache_fp fingerprint of the builder's parameters,
 * not of the lowered statement: the builder (halide_build.cpp) is a pure
 * function of (HJ_BUILDER_VERSION, kind, schedule, the model constants), so
 * those parameters, with the target, Halide's and LLVM's versions and the
 * link command, are everything the compiled code depends on.  Hashing the
 * lowered statement instead would cost a lowering (milliseconds) at every
 * call site, on every hit, and its text is not stable: Halide numbers the
 * names it makes unique per process ("x$1", "t13"), so two builds of one
 * pipeline lower to different text (test_hj_keys shows both facts). */
#ifndef HJ_KEYS_H
#define HJ_KEYS_H

#include <stdint.h>

#include <ccache.h>

#include "spec.h"

/* How a compiled object is linked into the shared object a tier stores. */
#define HJ_LINK_FLAGS "-shared"
#define HJ_LINK_LIBS  "-lm"

/* What the code depends on besides the pipeline itself. */
typedef struct hj_ident {
  char target[256]; /* Halide target string, e.g. x86-64-linux-avx-avx2-...-no_runtime */
  char halide[64];  /* "Halide 14.0.0, LLVM 140" */
  char cc[256];     /* first line of `cc --version` (it links the .so) */
} hj_ident;

/* Fingerprint of: "halide_jit", HJ_BUILDER_VERSION, the kind, the schedule,
 * the model constants baked into the definitions, the target, the Halide
 * and LLVM versions, the linker and its flags.  Stable across processes and
 * machines.  A ccache status (CCACHE_OK). */
int hj_program_key(const hj_spec *s, const hj_ident *id, ccache_key *out);

/* A call site: (layer, slot) of the model and the program it runs. */
int hj_site_key(uint32_t layer, uint32_t slot, ccache_key pkey, ccache_key *out);

#endif
