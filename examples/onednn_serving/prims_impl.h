/* prims_impl.h: what prims.c, prims_dnnl.c and prims_ctx.c share; not part
 * of prims.h's interface. */
#ifndef ONEDNN_SERVING_PRIMS_IMPL_H
#define ONEDNN_SERVING_PRIMS_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#include "prims.h"

/* What the cache stores per call site.  The primitive is borrowed from the
 * program the entry references, so it lives at least as long as the closure. */
typedef struct closure {
  dnnl_primitive_t prim;
  dnnl_memory_t weights; /* this layer's constant weights, or NULL */
  size_t scratch_bytes;  /* the primitive's scratchpad need (executing worker's buffer) */
} closure;

/* MODE_PER_THREAD: one entry of a serving thread's own table, keyed by the
 * closure key.  It owns its primitive outright. */
struct tl_entry {
  ccache_key key;
  dnnl_primitive_t prim;
  dnnl_memory_t weights;
  size_t scratch_bytes;
  UT_hash_handle hh;
};

/* prims_dnnl.c: talking to oneDNN. */

/* Primitive descriptor + primitive.  The descriptor is destroyed at once:
 * the primitive keeps what it needs, so the primitive is the whole program.
 * @p scratch_out receives its scratchpad need. */
int build_primitive(dnnl_engine_t engine, const prim_spec *s, dnnl_primitive_t *out,
                    size_t *scratch_out);
/* The scratchpad need of a primitive (its descriptor is owned by the primitive). */
int prim_scratch_bytes(const_dnnl_primitive_t prim, size_t *out);
/* The charge against --max-cost. */
uint64_t cost_estimate(const prim_spec *s);
/* The call site's constant weights as a memory object (*out NULL if none). */
int make_weights_memory(prim_ctx *ctx, const call_site *site, const prim_spec *s,
                        dnnl_memory_t *out);
/* Run @p prim on the worker's stream with the worker's own scratchpad. */
int execute(prim_ctx *ctx, prim_worker *w, dnnl_primitive_t prim, const prim_spec *s,
            const prim_args *a, dnnl_memory_t weights, size_t scratch_bytes);

/* prims_ctx.c: the bookkeeping. */

/* Remember a program key, to count the distinct ones.  @return 1 if it is
 * new (the first request for that program in this mode), else 0. */
int record_key(prim_ctx *ctx, ccache_key k);
/* A program was created: count it and add it to the live set. */
void program_born(prim_ctx *ctx, void *native);
/* Destroy every entry of the worker's table; @return how many. */
uint64_t tl_destroy_all(prim_ctx *ctx, prim_worker *w, int *failed);

#endif
