/* prims.h: every oneDNN primitive the forward pass needs comes through here.
 *
 * A call site describes *what* it wants (prim_spec: op, shapes, strides,
 * post-ops) and *where* it is (call_site: layer, op name, its weights).
 * prims_run() then gets a primitive in one of four ways and executes it:
 *
 *   MODE_NO_CACHE      create the primitive descriptor and primitive on every
 *                      call, destroy after use (oneDNN cache capacity 0);
 *   MODE_ONEDNN_CACHE  the same code, but oneDNN's own primitive cache
 *                      (capacity 1024) turns creation into a lookup;
 *   MODE_CCACHE        two-level ccache: closure key = call site, program
 *                      key = structure only (oneDNN cache capacity 0);
 *   MODE_PER_THREAD    RLX-style: each serving thread keeps its own table of
 *                      primitives keyed by the call site (closure key),
 *                      cleared entirely when it reaches 512 entries.
 *
 * Sharing rule (see "Sharing a program between threads" in ccache.h): every
 * primitive is created with dnnl_scratchpad_mode_user, and each serving
 * worker passes its own scratchpad buffer as DNNL_ARG_SCRATCHPAD, so one
 * primitive may run on several threads at the same moment and on threads
 * other than the one that created it.  The same in all four modes.
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
  tensor_spec src; /**< matmul src, softmax src, binary src0 */
  tensor_spec wei; /**< matmul weights, binary src1; unused for softmax */
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

typedef enum acquire_mode {
  MODE_NO_CACHE = 1,
  MODE_ONEDNN_CACHE = 2,
  MODE_CCACHE = 3,
  MODE_PER_THREAD = 4
} acquire_mode;

#define PRIM_N_MODES 4

/** MODE_PER_THREAD clears a thread's whole table when an insert finds it
 *  this full (RLX's MAX_ENTRIES). */
#define PER_THREAD_MAX_ENTRIES 512

/** Per serving thread: its stream, its scratchpad, its MODE_PER_THREAD table
 *  and its own counters (summed at the end).  Only its thread touches it,
 *  except @c prims_done, which the progress reporter reads. */
typedef struct prim_worker {
  dnnl_stream_t stream;
  /* The worker's scratchpad: grown to the largest dnnl_query_scratchpad_md
   * size of the primitives it has run, passed on every execute. */
  void *scratch;
  size_t scratch_cap;        /**< bytes at scratch */
  dnnl_memory_t scratch_mem; /**< a u8 memory object over scratch (NULL while 0) */
  /* MODE_PER_THREAD: this thread's table (uthash), never shared. */
  struct tl_entry *tl;
  uint64_t tl_hits, tl_misses, tl_clears, tl_entries_cleared;
  uint64_t fetch_hits; /**< MODE_CCACHE: requests served by ccache_fetch alone */
  uint64_t key_ns;     /**< MODE_CCACHE with strong keys: building the keys of those */
  uint64_t requests;   /**< primitive requests */
  uint64_t acquire_ns; /**< getting a primitive: creation, lookup, key building, release */
  uint64_t compile_ns; /**< of which on the miss path (mode 1: all; mode 2: a program's
                            first request; modes 3 and 4: a miss's whole getting, a wait
                            for another thread's compile included); the rest is lookup
                            (keys, hits, releases) */
  uint64_t exec_ns;    /**< binding memory, executing, waiting */
  atomic_uint_fast64_t prims_done; /**< primitive requests finished (progress) */
  int omp_threads;
} prim_worker;

/** Shared by all serving threads of one mode. */
typedef struct prim_ctx {
  acquire_mode mode;
  dnnl_engine_t engine;
  ccache *cache;   /**< MODE_CCACHE only */
  int strong_keys; /**< MODE_CCACHE: 256-bit BLAKE2b keys, a CCACHE_KEYS_STRONG cache */
  /* Program accounting (modes 3 and 4), maintained where primitives that
   * outlive one request are created and destroyed. */
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
  /* Compiles per program key, counted by the event hook (MODE_CCACHE). */
  struct key_count *compiled;
} prim_ctx;

/** ccache's event hook (ccache_config::on_event, ctx = the prim_ctx): counts
 *  each successful program compile under its program key.  Runs on the
 *  compiling serving thread, no cache lock held; takes ctx->lock. */
void prims_on_event(void *ctx, const ccache_event *ev);
/** Sum, number of keys compiled more than once, and the most compiles of one
 *  key, over what prims_on_event() counted. */
void prims_compile_counts(prim_ctx *ctx, uint64_t *total, uint64_t *recompiled, uint64_t *most);

/** Set up @p ctx for @p mode (the engine is borrowed). */
int prims_init(prim_ctx *ctx, acquire_mode mode, dnnl_engine_t engine);
/** Free the key sets (after the cache, if any, is closed). */
void prims_fini(prim_ctx *ctx);

/** Zero a serving worker's own state (its stream is created by the caller). */
void prims_worker_init(prim_worker *w);
/** Destroy what the worker owns: its MODE_PER_THREAD table (destroying those
 *  primitives) and its scratchpad.  @return 0, or -1 if oneDNN refused. */
int prims_worker_fini(prim_ctx *ctx, prim_worker *w);

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
