/* codegen.h: C source of one kernel, specialised to its shape. */
#ifndef KJ_CODEGEN_H
#define KJ_CODEGEN_H

#include <ccache.h>

#include "spec.h"

/* Bumped whenever the generated code changes, so that old tier entries stop
 * matching (it enters every program key). */
#define KJ_CODEGEN_VERSION 1u

/* The source of kernel @p s: it defines
 *   void kj_kernel(const float *a, const float *b, float *out);
 *   const unsigned long long kj_key[2];   (key.lo, key.hi)
 * with every shape and model constant baked in.  kj_key lets the loader
 * check that the object it got back from dlopen is the one it asked for.
 * Returns a malloc'd NUL-terminated string, or NULL (out of memory). */
char *kj_codegen(kj_spec s, ccache_key key);

#endif
