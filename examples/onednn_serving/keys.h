/* keys.h: the ccache keys of a oneDNN primitive request.
 *
 * Two levels: the program key names what oneDNN builds (the structure of a
 * prim_spec), so call sites of the same shape share one primitive; the
 * closure key adds the call site, so each site keeps its own bound weights.
 * A separate file so that bench/bench_onednn.c times exactly this code.
 */
#ifndef ONEDNN_SERVING_KEYS_H
#define ONEDNN_SERVING_KEYS_H

#include <ccache.h>

#include "prims.h"

/** Start @p fp and append the structure of @p s: engine, scratchpad mode,
 *  op, shapes, strides, dtype, post-ops; never the call site. */
void onednn_fp_structure(ccache_fp *fp, const prim_spec *s);

/** Append the call site (layer, op name) to @p fp, after the structure. */
void onednn_fp_site(ccache_fp *fp, const call_site *site);

/** Program key: the structure alone.  @return 0, or -1 if finalising fails. */
int onednn_program_key(const prim_spec *s, ccache_key *out);

/** Closure key: the structure, then the call site.  @return 0, or -1. */
int onednn_closure_key(const call_site *site, const prim_spec *s, ccache_key *out);

/** The same two keys in the strong mode (--strong-keys): the same fields,
 *  hashed with BLAKE2b-256 into 256-bit keys (ccache_fp_init_strong()).
 *  @return 0, or -1 (e.g. a build without libsodium). */
int onednn_program_key_strong(const prim_spec *s, ccache_strong_key *out);
int onednn_closure_key_strong(const call_site *site, const prim_spec *s, ccache_strong_key *out);

#endif
