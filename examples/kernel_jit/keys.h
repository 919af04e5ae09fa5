/* keys.h: the program key of a kernel. */
#ifndef KJ_KEYS_H
#define KJ_KEYS_H

#include <ccache.h>

#include "compiler.h"
#include "spec.h"

/* Fingerprint of everything the compiled bytes depend on: the generator's
 * version, the op and its shape, the model constants baked in, and the
 * compiler's identity and flags.  Stable across processes and machines
 * (ccache_fp encodes fixed-width little-endian fields). */
int kj_program_key(kj_spec s, const kj_compiler *cc, ccache_key *out);

#endif
