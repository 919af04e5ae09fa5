/* prims.c: getting primitives (four ways) and executing them.
 *
 * Every primitive is created with dnnl_scratchpad_mode_user.  In oneDNN
 * 2.6's default (library) mode, with DNNL_ENABLE_CONCURRENT_EXEC off as in
 * Debian's build, a primitive's scratchpad is the creating thread's global
 * one: running it on another thread, or on two threads at once, races on
 * that buffer and gives wrong answers.  In user mode the caller passes the
 * scratchpad with every execute, so each serving worker brings its own
 * (prim_worker.scratch) and a primitive is safe to share. */
#include "prims.h"

#include "keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uthash.h>

/* A guess at the code a JIT'ed oneDNN kernel occupies; oneDNN does not
 * report it.  See cost_estimate(). */
#define CODE_SIZE_GUESS (64u * 1024u)

struct key_entry {
  ccache_key key;
  UT_hash_handle hh;
};

struct ptr_entry {
  void *ptr;
  UT_hash_handle hh;
};

struct key_count {
  ccache_key key;
  uint64_t n;
  UT_hash_handle hh;
};

/* How a runtime counts compiles per program with the event hook: one
 * COMPILE_END at the program level per compile that ran (a tier hit or a
 * shared program is none). */
void prims_on_event(void *arg, const ccache_event *ev) {
  prim_ctx *ctx = arg;
  if (ev->kind != CCACHE_EVENT_COMPILE_END || ev->level != CCACHE_LEVEL_PROGRAM) return;
  struct key_count *e;
  pthread_mutex_lock(&ctx->lock);
  HASH_FIND(hh, ctx->compiled, &ev->key, sizeof ev->key, e);
  if (!e && (e = calloc(1, sizeof *e)) != NULL) {
    e->key = ev->key;
    HASH_ADD(hh, ctx->compiled, key, sizeof e->key, e);
  }
  if (e) e->n++;
  pthread_mutex_unlock(&ctx->lock);
}

void prims_compile_counts(prim_ctx *ctx, uint64_t *total, uint64_t *recompiled, uint64_t *most) {
  *total = *recompiled = *most = 0;
  pthread_mutex_lock(&ctx->lock);
  for (struct key_count *e = ctx->compiled; e; e = e->hh.next) {
    *total += e->n;
    *recompiled += e->n > 1;
    if (e->n > *most) *most = e->n;
  }
  pthread_mutex_unlock(&ctx->lock);
}

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

/* The state a compile callback needs; lives on the caller's stack. */
typedef struct compile_job {
  prim_ctx *ctx;
  prim_worker *w;
  const call_site *site;
  const prim_spec *spec;
} compile_job;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define DNNL_TRY(call)                                                                          \
  do {                                                                                          \
    dnnl_status_t st_ = (call);                                                                 \
    if (st_ != dnnl_success) {                                                                  \
      fprintf(stderr, "onednn_serving: %s failed (dnnl status %d) at %s:%d\n", #call, (int)st_, \
              __FILE__, __LINE__);                                                              \
      goto fail;                                                                                \
    }                                                                                           \
  } while (0)

tensor_spec tensor_dense(int ndims, const int64_t *dims) {
  tensor_spec t = {.ndims = ndims};
  int64_t stride = 1;
  for (int i = ndims - 1; i >= 0; i--) {
    t.dims[i] = dims[i];
    t.strides[i] = stride;
    stride *= dims[i];
  }
  return t;
}

static dnnl_status_t md_of(const tensor_spec *t, dnnl_memory_desc_t *md) {
  return dnnl_memory_desc_init_by_strides(md, t->ndims, t->dims, dnnl_f32, t->strides);
}

/* ---------------------------------------------------------------------- */
/* Building a primitive from its spec: what a compile is here.             */

static int make_attr(const prim_spec *s, dnnl_primitive_attr_t *attr_out) {
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  DNNL_TRY(dnnl_primitive_attr_create(&attr));
  /* The scratchpad comes with each execute (the worker's own): what makes a
   * primitive safe to run from any thread, on several at once. */
  DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
  if (s->n_post > 0) {
    DNNL_TRY(dnnl_post_ops_create(&po));
    for (int i = 0; i < s->n_post; i++) {
      const post_op *p = &s->post[i];
      if (p->kind == POST_SCALE) {
        DNNL_TRY(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, p->alpha, 0.0f));
      } else if (p->kind == POST_SWISH) {
        DNNL_TRY(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_swish, p->alpha, 0.0f));
      } else {
        dnnl_memory_desc_t md;
        DNNL_TRY(md_of(&p->src1, &md));
        DNNL_TRY(dnnl_post_ops_append_binary(po, dnnl_binary_mul, &md));
      }
    }
    DNNL_TRY(dnnl_primitive_attr_set_post_ops(attr, po));
    DNNL_TRY(dnnl_post_ops_destroy(po));
  }
  *attr_out = attr;
  return 0;
fail:
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return -1;
}

/* The op descriptor types differ per primitive kind; a union holds any. */
typedef union op_desc {
  dnnl_matmul_desc_t matmul;
  dnnl_softmax_v2_desc_t softmax;
  dnnl_binary_desc_t binary;
} op_desc;

static int init_op_desc(const prim_spec *s, op_desc *d) {
  dnnl_memory_desc_t src, wei, dst;
  DNNL_TRY(md_of(&s->src, &src));
  DNNL_TRY(md_of(&s->dst, &dst));
  if (s->kind == OP_SOFTMAX) {
    DNNL_TRY(dnnl_softmax_v2_forward_desc_init(&d->softmax, dnnl_forward_inference,
                                               dnnl_softmax_accurate, &src, &dst, s->axis));
    return 0;
  }
  DNNL_TRY(md_of(&s->wei, &wei));
  if (s->kind == OP_MATMUL)
    DNNL_TRY(dnnl_matmul_desc_init(&d->matmul, &src, &wei, NULL, &dst));
  else
    DNNL_TRY(dnnl_binary_desc_init(&d->binary, dnnl_binary_add, &src, &wei, &dst));
  return 0;
fail:
  return -1;
}

/* Bytes of scratchpad a primitive descriptor asks for (0: none). */
static size_t pd_scratch_bytes(const_dnnl_primitive_desc_t pd) {
  const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  return md ? dnnl_memory_desc_get_size(md) : 0;
}

/* The same for a primitive (its descriptor is owned by the primitive). */
static int prim_scratch_bytes(const_dnnl_primitive_t prim, size_t *out) {
  const_dnnl_primitive_desc_t pd = NULL;
  DNNL_TRY(dnnl_primitive_get_primitive_desc(prim, &pd));
  *out = pd_scratch_bytes(pd);
  return 0;
fail:
  return -1;
}

/* Primitive descriptor + primitive.  The descriptor is destroyed at once:
 * the primitive keeps what it needs, so the primitive is the whole program.
 * @p scratch_out receives its scratchpad need. */
static int build_primitive(dnnl_engine_t engine, const prim_spec *s, dnnl_primitive_t *out,
                           size_t *scratch_out) {
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  op_desc d;
  *out = NULL;
  if (init_op_desc(s, &d) != 0 || make_attr(s, &attr) != 0) goto fail;
  DNNL_TRY(dnnl_primitive_desc_create(&pd, &d, attr, engine, NULL));
  *scratch_out = pd_scratch_bytes(pd);
  DNNL_TRY(dnnl_primitive_create(out, pd));
  DNNL_TRY(dnnl_primitive_desc_destroy(pd));
  DNNL_TRY(dnnl_primitive_attr_destroy(attr));
  return 0;
fail:
  if (*out) dnnl_primitive_destroy(*out);
  *out = NULL;
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return -1;
}

static uint64_t tensor_bytes(const tensor_spec *t) {
  uint64_t n = t->ndims > 0 ? sizeof(float) : 0;
  /* A runtime dim is unknown at creation; count it as 1 (a lower bound). */
  for (int i = 0; i < t->ndims; i++)
    n *= t->dims[i] == DNNL_RUNTIME_DIM_VAL ? 1 : (uint64_t)t->dims[i];
  return n;
}

/* The charge against --max-cost.  oneDNN does not report the size of its
 * generated code, and the scratchpad belongs to the executing worker, not to
 * the program, so: cost = bytes of src + weights + dst (+ post-op tensors),
 * the working set the kernel's blocking is tuned for, plus a fixed 64 KiB
 * for the code. */
static uint64_t cost_estimate(const prim_spec *s) {
  uint64_t c = CODE_SIZE_GUESS + tensor_bytes(&s->src) + tensor_bytes(&s->dst);
  if (s->kind != OP_SOFTMAX) c += tensor_bytes(&s->wei);
  for (int i = 0; i < s->n_post; i++)
    if (s->post[i].kind == POST_MUL) c += tensor_bytes(&s->post[i].src1);
  return c;
}

/* ---------------------------------------------------------------------- */
/* Program keys seen (the keys themselves are built in keys.c).            */

/* Remember a program key, to count the distinct ones.  @return 1 if it is
 * new (the first request for that program in this mode), else 0. */
static int record_key(prim_ctx *ctx, ccache_key k) {
  struct key_entry *e;
  int fresh = 0;
  pthread_mutex_lock(&ctx->lock);
  HASH_FIND(hh, ctx->keys, &k, sizeof k, e);
  if (!e && (e = calloc(1, sizeof *e)) != NULL) {
    e->key = k;
    HASH_ADD(hh, ctx->keys, key, sizeof e->key, e);
    ctx->n_keys++;
    fresh = 1;
  }
  pthread_mutex_unlock(&ctx->lock);
  return fresh;
}

/* ---------------------------------------------------------------------- */
/* Program accounting: a set of live native pointers catches a double or   */
/* foreign destroy, the counters give live/peak.                           */

static void program_born(prim_ctx *ctx, void *native) {
  struct ptr_entry *e = calloc(1, sizeof *e);
  pthread_mutex_lock(&ctx->lock);
  if (e) {
    e->ptr = native;
    HASH_ADD_PTR(ctx->live, ptr, e);
  }
  pthread_mutex_unlock(&ctx->lock);
  atomic_fetch_add(&ctx->programs_created, 1);
  uint_fast64_t live = atomic_fetch_add(&ctx->programs_live, 1) + 1;
  uint_fast64_t peak = atomic_load(&ctx->programs_peak);
  while (live > peak && !atomic_compare_exchange_weak(&ctx->programs_peak, &peak, live)) {
  }
}

static void program_died(prim_ctx *ctx, void *native) {
  struct ptr_entry *e;
  pthread_mutex_lock(&ctx->lock);
  HASH_FIND_PTR(ctx->live, &native, e);
  if (e) HASH_DEL(ctx->live, e);
  pthread_mutex_unlock(&ctx->lock);
  if (!e) {
    atomic_fetch_add(&ctx->bad_destroys, 1);
    return;
  }
  free(e);
  atomic_fetch_add(&ctx->programs_destroyed, 1);
  atomic_fetch_sub(&ctx->programs_live, 1);
}

void prims_destroy_program(void *native, void *vctx) {
  prim_ctx *ctx = vctx;
  program_died(ctx, native);
  dnnl_status_t st = dnnl_primitive_destroy(native);
  if (st != dnnl_success)
    fprintf(stderr, "onednn_serving: dnnl_primitive_destroy: status %d\n", (int)st);
}

void prims_destroy_closure(void *obj, void *vctx) {
  prim_ctx *ctx = vctx;
  closure *cl = obj;
  if (cl->weights) {
    dnnl_status_t st = dnnl_memory_destroy(cl->weights);
    if (st != dnnl_success)
      fprintf(stderr, "onednn_serving: dnnl_memory_destroy: status %d\n", (int)st);
  }
  free(cl);
  atomic_fetch_add(&ctx->closures_destroyed, 1);
}

int prims_init(prim_ctx *ctx, acquire_mode mode, dnnl_engine_t engine) {
  memset(ctx, 0, sizeof *ctx);
  ctx->mode = mode;
  ctx->engine = engine;
  return pthread_mutex_init(&ctx->lock, NULL) == 0 ? 0 : -1;
}

void prims_fini(prim_ctx *ctx) {
  struct key_entry *k, *kt;
  HASH_ITER(hh, ctx->keys, k, kt) {
    HASH_DEL(ctx->keys, k);
    free(k);
  }
  struct key_count *q, *qt;
  HASH_ITER(hh, ctx->compiled, q, qt) {
    HASH_DEL(ctx->compiled, q);
    free(q);
  }
  struct ptr_entry *p, *pt;
  HASH_ITER(hh, ctx->live, p, pt) {
    HASH_DEL(ctx->live, p);
    free(p);
  }
  pthread_mutex_destroy(&ctx->lock);
}

/* ---------------------------------------------------------------------- */
/* Serving workers: scratchpad and the per-thread table.                   */

void prims_worker_init(prim_worker *w) {
  memset(w, 0, sizeof *w);
  atomic_init(&w->prims_done, 0);
}

/* Grow the worker's scratchpad to at least @p need bytes (page-aligned,
 * whole pages).  Called before every execute; grows only on a new maximum. */
static int scratch_ensure(prim_ctx *ctx, prim_worker *w, size_t need) {
  if (need <= w->scratch_cap) return 0;
  size_t cap = (need + 4095u) & ~(size_t)4095u;
  dnnl_memory_t mem = NULL;
  dnnl_memory_desc_t md;
  dnnl_dims_t dims = {(dnnl_dim_t)cap};
  void *buf = aligned_alloc(4096, cap);
  if (!buf) {
    fprintf(stderr, "onednn_serving: out of memory for a %zu-byte scratchpad\n", cap);
    return -1;
  }
  DNNL_TRY(dnnl_memory_desc_init_by_tag(&md, 1, dims, dnnl_u8, dnnl_a));
  DNNL_TRY(dnnl_memory_create(&mem, &md, ctx->engine, buf));
  if (w->scratch_mem) dnnl_memory_destroy(w->scratch_mem);
  free(w->scratch);
  w->scratch = buf;
  w->scratch_cap = cap;
  w->scratch_mem = mem;
  return 0;
fail:
  free(buf);
  return -1;
}

/* Destroy every entry of the worker's table; @return how many. */
static uint64_t tl_destroy_all(prim_ctx *ctx, prim_worker *w, int *failed) {
  struct tl_entry *e, *tmp;
  uint64_t n = 0;
  HASH_ITER(hh, w->tl, e, tmp) {
    HASH_DEL(w->tl, e);
    program_died(ctx, e->prim);
    if (dnnl_primitive_destroy(e->prim) != dnnl_success) *failed = 1;
    if (e->weights && dnnl_memory_destroy(e->weights) != dnnl_success) *failed = 1;
    free(e);
    n++;
  }
  return n;
}

int prims_worker_fini(prim_ctx *ctx, prim_worker *w) {
  int failed = 0;
  tl_destroy_all(ctx, w, &failed);
  if (w->scratch_mem && dnnl_memory_destroy(w->scratch_mem) != dnnl_success) failed = 1;
  free(w->scratch);
  w->scratch = NULL;
  w->scratch_mem = NULL;
  w->scratch_cap = 0;
  if (failed) fprintf(stderr, "onednn_serving: destroying a worker's oneDNN objects failed\n");
  return failed ? -1 : 0;
}

/* ---------------------------------------------------------------------- */
/* Execution.                                                              */

/* Run @p prim on the worker's stream with the worker's own scratchpad. */
static int execute(prim_ctx *ctx, prim_worker *w, dnnl_primitive_t prim, const prim_spec *s,
                   const prim_args *a, dnnl_memory_t weights, size_t scratch_bytes) {
  enum { MAX_ARGS = 4 + PRIM_MAX_POST };
  dnnl_exec_arg_t args[MAX_ARGS];
  dnnl_memory_t owned[MAX_ARGS];
  int n = 0, n_owned = 0, rc = -1;
  dnnl_memory_desc_t md;
  const tensor_spec *src = a->rt_src ? a->rt_src : &s->src;
  const tensor_spec *wei = a->rt_wei ? a->rt_wei : &s->wei;
  const tensor_spec *dst = a->rt_dst ? a->rt_dst : &s->dst;

  if (scratch_ensure(ctx, w, scratch_bytes) != 0) return -1;
    /* Memory objects wrap the caller's buffers; creating them is cheap and the
   * same in every mode.  Constant weights come bound in the closure. */
#define BIND(arg_id, spec, ptr)                                                     \
  do {                                                                              \
    DNNL_TRY(md_of((spec), &md));                                                   \
    DNNL_TRY(dnnl_memory_create(&owned[n_owned], &md, ctx->engine, (void *)(ptr))); \
    args[n].arg = (arg_id);                                                         \
    args[n++].memory = owned[n_owned++];                                            \
  } while (0)

  if (s->kind == OP_BINARY_ADD) {
    BIND(DNNL_ARG_SRC_0, src, a->src);
    BIND(DNNL_ARG_SRC_1, wei, a->wei);
  } else {
    BIND(DNNL_ARG_SRC, src, a->src);
  }
  if (s->kind == OP_MATMUL) {
    if (weights) {
      args[n].arg = DNNL_ARG_WEIGHTS;
      args[n++].memory = weights;
    } else {
      BIND(DNNL_ARG_WEIGHTS, wei, a->wei);
    }
  }
  BIND(DNNL_ARG_DST, dst, a->dst);
  for (int i = 0; i < s->n_post; i++)
    if (s->post[i].kind == POST_MUL)
      BIND(DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1, &s->post[i].src1, a->post_src1[i]);
#undef BIND
  /* The worker's scratchpad, never shared: at least scratch_bytes long. */
  if (w->scratch_mem) {
    args[n].arg = DNNL_ARG_SCRATCHPAD;
    args[n++].memory = w->scratch_mem;
  }
  DNNL_TRY(dnnl_primitive_execute(prim, w->stream, n, args));
  /* CPU streams run synchronously here, but waiting keeps the contract:
   * the primitive (and its lease) and the scratchpad must outlive the work. */
  DNNL_TRY(dnnl_stream_wait(w->stream));
  rc = 0;
fail:
  for (int i = 0; i < n_owned; i++) dnnl_memory_destroy(owned[i]);
  return rc;
}

static int make_weights_memory(prim_ctx *ctx, const call_site *site, const prim_spec *s,
                               dnnl_memory_t *out) {
  dnnl_memory_desc_t md;
  *out = NULL;
  if (!site->weights) return 0;
  DNNL_TRY(md_of(&s->wei, &md));
  DNNL_TRY(dnnl_memory_create(out, &md, ctx->engine, (void *)site->weights));
  return 0;
fail:
  return -1;
}

static void report_failure(const call_site *site, const char *what) {
  fprintf(stderr, "onednn_serving: %s for %s (layer %d)\n", what, site->name, site->layer);
}

/* Modes 1 and 2: the plain oneDNN way, create-use-destroy.  With oneDNN's
 * cache enabled, dnnl_primitive_create becomes a lookup; the descriptor is
 * still built every time.  @p first: the first request for this program in
 * this mode, whose creation is a compile in mode 2 too. */
static int run_uncached(prim_ctx *ctx, prim_worker *w, const call_site *site, const prim_spec *s,
                        const prim_args *a, int first) {
  dnnl_primitive_t prim = NULL;
  dnnl_memory_t weights = NULL;
  size_t scratch = 0;
  uint64_t t0 = now_ns();
  if (build_primitive(ctx->engine, s, &prim, &scratch) != 0) {
    report_failure(site, "creating the primitive failed");
    return -1;
  }
  uint64_t t1 = now_ns();
  int rc = make_weights_memory(ctx, site, s, &weights);
  if (rc == 0) rc = execute(ctx, w, prim, s, a, weights, scratch);
  if (weights) dnnl_memory_destroy(weights);
  uint64_t t2 = now_ns();
  dnnl_status_t st = dnnl_primitive_destroy(prim);
  uint64_t t3 = now_ns();
  w->acquire_ns += (t1 - t0) + (t3 - t2);
  if (ctx->mode == MODE_NO_CACHE || first) w->compile_ns += (t1 - t0) + (t3 - t2);
  w->exec_ns += t2 - t1;
  if (rc != 0) report_failure(site, "execution failed");
  return rc == 0 && st == dnnl_success ? 0 : -1;
}

/* Program-level compile: runs once per program key, whichever call site
 * (layer) asks first.  Its time is counted by the closure compile around it. */
static int compile_program(void *ud, ccache *c, ccache_key pkey, void **native_out,
                           uint64_t *cost_out) {
  (void)c;
  (void)pkey;
  compile_job *job = ud;
  dnnl_primitive_t prim = NULL;
  size_t scratch = 0;
  if (build_primitive(job->ctx->engine, job->spec, &prim, &scratch) != 0) {
    report_failure(job->site, "creating the primitive failed");
    return -1;
  }
  program_born(job->ctx, prim);
  *native_out = prim;
  *cost_out = cost_estimate(job->spec);
  return 0;
}

/* Closure-level compile: runs once per call site; shares the program. */
static int compile_closure(void *ud, ccache *c, ccache_key ckey, void **closure_out,
                           ccache_program **program_out) {
  (void)ckey;
  compile_job *job = ud;
  ccache_program *prog = NULL;
  closure *cl = NULL;
  ccache_key pkey;
  ccache_strong_key spkey;
  int rc = -1, st;
  if (job->ctx->strong_keys) {
    if (onednn_program_key_strong(job->spec, &spkey) != 0) goto out;
    st = ccache_program_get_or_compile_strong(c, &spkey, compile_program, job, &prog);
  } else {
    if (onednn_program_key(job->spec, &pkey) != 0) goto out;
    st = ccache_program_get_or_compile(c, pkey, compile_program, job, &prog);
  }
  if (st != CCACHE_OK) {
    fprintf(stderr, "onednn_serving: ccache_program_get_or_compile: %s\n", ccache_strerror(st));
    goto out;
  }
  cl = calloc(1, sizeof *cl);
  if (!cl || make_weights_memory(job->ctx, job->site, job->spec, &cl->weights) != 0 ||
      prim_scratch_bytes(ccache_program_native(prog), &cl->scratch_bytes) != 0) {
    if (cl && cl->weights) dnnl_memory_destroy(cl->weights);
    free(cl);
    ccache_program_release(c, prog);
    goto out;
  }
  cl->prim = ccache_program_native(prog);
  atomic_fetch_add(&job->ctx->closures_created, 1);
  *closure_out = cl;
  *program_out = prog;
  rc = 0;
out:
  return rc;
}

static int run_ccache(prim_ctx *ctx, prim_worker *w, const call_site *site, const prim_spec *s,
                      const prim_args *a) {
  compile_job job = {.ctx = ctx, .w = w, .site = site, .spec = s};
  ccache_key ckey;
  ccache_strong_key sckey;
  ccache_lease lease = {0};
  uint64_t t0 = now_ns();
  /* With --strong-keys the key is BLAKE2b-256 and the cache compares all
   * 256 bits: the cost of that shows in the lookup rows. */
  int kr = ctx->strong_keys ? onednn_closure_key_strong(site, s, &sckey)
                            : onednn_closure_key(site, s, &ckey);
  /* Only with strong keys is the key timed on its own (one more clock read,
   * which the default run does not pay). */
  uint64_t tk = ctx->strong_keys ? now_ns() : 0;
  if (kr != 0) {
    report_failure(site, "building the keys failed");
    return -1;
  }
  /* The hit path is a fetch.  On a miss, get-or-compile compiles, or waits
   * for another thread compiling the same key (single-flight). */
  int st = ctx->strong_keys ? ccache_fetch_strong(ctx->cache, &sckey, &lease)
                            : ccache_fetch(ctx->cache, ckey, &lease);
  int hit = st == CCACHE_OK;
  if (st == CCACHE_MISS)
    st = ctx->strong_keys
             ? ccache_get_or_compile_strong(ctx->cache, &sckey, compile_closure, &job, &lease)
             : ccache_get_or_compile(ctx->cache, ckey, compile_closure, &job, &lease);
  uint64_t t1 = now_ns();
  if (st != CCACHE_OK) {
    fprintf(stderr, "onednn_serving: ccache_fetch / ccache_get_or_compile: %s\n",
            ccache_strerror(st));
    report_failure(site, "getting the primitive failed");
    return -1;
  }
  /* The lease is this thread's until released: the closure and primitive may
   * be leased by other workers at this very moment, which user-mode
   * scratchpads make safe. */
  const closure *cl = lease.closure;
  int rc = execute(ctx, w, cl->prim, s, a, cl->weights, cl->scratch_bytes);
  uint64_t t2 = now_ns();
  ccache_lease_release(ctx->cache, &lease);
  uint64_t t3 = now_ns();
  w->acquire_ns += (t1 - t0) + (t3 - t2);
  /* A miss's whole getting (the failed fetch, then the compile with ccache's
   * insert path around it, or the wait for another thread's compile) is
   * compile time; a hit's is lookup time. */
  if (hit) {
    w->fetch_hits++;
    if (ctx->strong_keys) w->key_ns += tk - t0;
  } else
    w->compile_ns += (t1 - t0) + (t3 - t2);
  w->exec_ns += t2 - t1;
  if (rc != 0) report_failure(site, "execution failed");
  return rc;
}

/* MODE_PER_THREAD's miss path: clear the whole table if it is full (as RLX's
 * cache.rs), then create the primitive and insert it. */
static struct tl_entry *tl_insert(prim_ctx *ctx, prim_worker *w, ccache_key key,
                                  const call_site *site, const prim_spec *s) {
  if (HASH_COUNT(w->tl) >= PER_THREAD_MAX_ENTRIES) {
    int failed = 0;
    w->tl_entries_cleared += tl_destroy_all(ctx, w, &failed);
    w->tl_clears++;
    if (failed) return NULL;
  }
  struct tl_entry *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->key = key;
  if (build_primitive(ctx->engine, s, &e->prim, &e->scratch_bytes) != 0) {
    report_failure(site, "creating the primitive failed");
    free(e);
    return NULL;
  }
  if (make_weights_memory(ctx, site, s, &e->weights) != 0) {
    dnnl_primitive_destroy(e->prim);
    free(e);
    return NULL;
  }
  program_born(ctx, e->prim);
  HASH_ADD(hh, w->tl, key, sizeof e->key, e);
  return e;
}

static int run_per_thread(prim_ctx *ctx, prim_worker *w, const call_site *site, const prim_spec *s,
                          const prim_args *a) {
  ccache_key ckey;
  struct tl_entry *e;
  uint64_t t0 = now_ns();
  if (onednn_closure_key(site, s, &ckey) != 0) {
    report_failure(site, "building the keys failed");
    return -1;
  }
  HASH_FIND(hh, w->tl, &ckey, sizeof ckey, e);
  int miss = e == NULL;
  if (miss) {
    w->tl_misses++;
    e = tl_insert(ctx, w, ckey, site, s);
    if (!e) return -1;
  } else {
    w->tl_hits++;
  }
  uint64_t t1 = now_ns();
  int rc = execute(ctx, w, e->prim, s, a, e->weights, e->scratch_bytes);
  uint64_t t2 = now_ns();
  w->acquire_ns += t1 - t0;
  /* As in run_ccache: a miss's whole getting (key, failed lookup, clear,
   * creation, insert) is compile time. */
  if (miss) w->compile_ns += t1 - t0;
  w->exec_ns += t2 - t1;
  if (rc != 0) report_failure(site, "execution failed");
  return rc;
}

int prims_run(prim_ctx *ctx, prim_worker *w, const call_site *site, const prim_spec *spec,
              const prim_args *args) {
  /* The program key is built outside the timed regions, only to count the
   * distinct programs asked for (modes 3 and 4 need only the closure key on
   * a hit; modes 1 and 2 need no key at all). */
  ccache_key pkey;
  int have_key = onednn_program_key(spec, &pkey) == 0, rc;
  w->requests++;
  if (ctx->mode == MODE_CCACHE) {
    rc = run_ccache(ctx, w, site, spec, args);
  } else if (ctx->mode == MODE_PER_THREAD) {
    rc = run_per_thread(ctx, w, site, spec, args);
  } else {
    rc = run_uncached(ctx, w, site, spec, args, have_key && record_key(ctx, pkey));
    have_key = 0;
  }
  if (have_key) record_key(ctx, pkey);
  atomic_fetch_add_explicit(&w->prims_done, 1, memory_order_relaxed);
  return rc;
}
