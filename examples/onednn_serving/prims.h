/* prims.h: every oneDNN primitive the forward pass needs comes through here.
 *
 * A call site describes *what* it wants (prim_spec: op, shapes, strides,
 * post-ops) and *where* it is (call_site: layer, op name, its weights).
 * prims_run() then gets a primitive in one of three ways and executes it:
 *
 *   MODE_NO_CACHE      create the primitive descriptor and primitive on every
 *                      call, destroy after use (oneDNN cache capacity 0);
 *   MODE_ONEDNN_CACHE  the same code, but oneDNN's own primitive cache
 *                      (capacity 1024) turns creation into a lookup;
 *   MODE_CCACHE        two-level ccache: closure key = call site, program
 *                      key = structure only (oneDNN cache capacity 0).
 */
#ifndef ONEDNN_SERVING_PRIMS_H
#define ONEDNN_SERVING_PRIMS_H

#include <ccache.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define PRIM_MAX_DIMS 4
#define PRIM_MAX_POST 2

/** A plain f32 tensor layout: dims and strides in elements.  A dim or stride
 *  of DNNL_RUNTIME_DIM_VAL is only known at execution (--runtime-dims). */
typedef struct tensor_spec {
  int ndims;
  dnnl_dims_t dims;    /* DNNL_MAX_NDIMS long: the C API reads the whole array */
  dnnl_dims_t strides; /* only the first ndims are used (and hashed) */
} tensor_spec;

typedef enum op_kind { OP_MATMUL = 1, OP_SOFTMAX = 2, OP_BINARY_ADD = 3 } op_kind;

typedef enum post_kind {
  POST_SCALE = 1, /**< eltwise linear: alpha * x */
  POST_SWISH = 2, /**< eltwise swish: x * sigmoid(alpha * x); alpha 1 = SiLU */
  POST_MUL = 3,   /**< binary mul with a second tensor (src1) */
} post_kind;

typedef struct post_op {
  post_kind kind;
  float alpha;      /**< POST_SCALE, POST_SWISH */
  tensor_spec src1; /**< POST_MUL */
} post_op;

/** Everything that decides which primitive is built: the program key. */
typedef struct prim_spec {
  op_kind kind;
  tensor_spec src;  /**< matmul src, softmax src, binary src0 */
  tensor_spec wei;  /**< matmul weights, binary src1; unused for softmax */
  tensor_spec dst;
  int n_post;
  post_op post[PRIM_MAX_POST];
  int axis; /**< softmax axis */
} prim_spec;

/** Where a primitive is used: the rest of the closure key. */
typedef struct call_site {
  int layer;            /**< decoder layer, or -1 for the LM head */
  const char *name;     /**< e.g. "q_proj" */
  const float *weights; /**< constant matmul weights bound into the closure, or NULL */
} call_site;

/** Buffers for one execution.  rt_* give the concrete layouts when the spec
 *  has runtime dims (NULL: the spec's own). */
typedef struct prim_args {
  const float *src;
  const float *wei; /**< ignored when the call site has weights */
  float *dst;
  const float *post_src1[PRIM_MAX_POST];
  const tensor_spec *rt_src, *rt_wei, *rt_dst;
} prim_args;

typedef enum acquire_mode { MODE_NO_CACHE = 1, MODE_ONEDNN_CACHE = 2, MODE_CCACHE = 3 } acquire_mode;

/** Per serving thread: its stream and its own counters (summed at the end). */
typedef struct prim_worker {
  dnnl_stream_t stream;
  uint64_t requests;   /**< primitive requests */
  uint64_t acquire_ns; /**< getting a primitive: creation, lookup, key building, release */
  uint64_t compile_ns; /**< of which in creating primitives (modes 1 and 3) */
  uint64_t exec_ns;    /**< binding memory, executing, waiting */
  int omp_threads;
} prim_worker;

/** Shared by all serving threads of one mode. */
typedef struct prim_ctx {
  acquire_mode mode;
  dnnl_engine_t engine;
  ccache *cache; /**< MODE_CCACHE only */
  /* Program accounting, maintained by the compile and destroy callbacks. */
  atomic_uint_fast64_t programs_created;
  atomic_uint_fast64_t programs_destroyed;
  atomic_uint_fast64_t programs_live;
  atomic_uint_fast64_t programs_peak;
  atomic_uint_fast64_t closures_created;
  atomic_uint_fast64_t closures_destroyed;
  atomic_uint_fast64_t bad_destroys; /**< destroys of an unknown or already destroyed program */
  /* Set of distinct program keys requested, and of live native programs. */
  pthread_mutex_t lock;
  struct key_entry *keys;
  uint64_t n_keys;
  struct ptr_entry *live;
} prim_ctx;

/** Set up @p ctx for @p mode (the engine is borrowed). */
int prims_init(prim_ctx *ctx, acquire_mode mode, dnnl_engine_t engine);
/** Free the key sets (after the cache, if any, is closed). */
void prims_fini(prim_ctx *ctx);

/** ccache destroy callbacks; config.ctx must be the prim_ctx. */
void prims_destroy_program(void *native, void *ctx);
void prims_destroy_closure(void *closure, void *ctx);

/**
 * Get the primitive for (@p site, @p spec) according to ctx->mode and run it
 * on @p w's stream.
 * @return 0, or -1 after printing the failing call to stderr.
 */
int prims_run(prim_ctx *ctx, prim_worker *w, const call_site *site, const prim_spec *spec,
              const prim_args *args);

/** Dense row-major layout of the given dims. */
tensor_spec tensor_dense(int ndims, const int64_t *dims);

#endif
