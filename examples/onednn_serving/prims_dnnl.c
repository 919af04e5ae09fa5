/* prims_dnnl.c: talking to oneDNN: building a primitive from its spec (what
 * a compile is here), its cost, and executing it with the worker's own
 * scratchpad.  How a primitive is obtained (the four modes) is prims.c.
 *
 * Every primitive is created with dnnl_scratchpad_mode_user.  In oneDNN
 * 2.6's default (library) mode, with DNNL_ENABLE_CONCURRENT_EXEC off as in
 * Debian's build, a primitive's scratchpad is the creating thread's global
 * one: running it on another thread, or on two threads at once, races on
 * that buffer and gives wrong answers.  In user mode the caller passes the
 * scratchpad with every execute, so each serving worker brings its own
 * (prim_worker.scratch) and a primitive is safe to share. */
#include "prims_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A guess at the code a JIT'ed oneDNN kernel occupies; oneDNN does not
 * report it.  See cost_estimate(). */
#define CODE_SIZE_GUESS (64u * 1024u)

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
int prim_scratch_bytes(const_dnnl_primitive_t prim, size_t *out) {
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
int build_primitive(dnnl_engine_t engine, const prim_spec *s, dnnl_primitive_t *out,
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
uint64_t cost_estimate(const prim_spec *s) {
  uint64_t c = CODE_SIZE_GUESS + tensor_bytes(&s->src) + tensor_bytes(&s->dst);
  if (s->kind != OP_SOFTMAX) c += tensor_bytes(&s->wei);
  for (int i = 0; i < s->n_post; i++)
    if (s->post[i].kind == POST_MUL) c += tensor_bytes(&s->post[i].src1);
  return c;
}

/* ---------------------------------------------------------------------- */
/* Execution: the worker's scratchpad, then the execute.                  */

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

/* Run @p prim on the worker's stream with the worker's own scratchpad. */
int execute(prim_ctx *ctx, prim_worker *w, dnnl_primitive_t prim, const prim_spec *s,
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

int make_weights_memory(prim_ctx *ctx, const call_site *site, const prim_spec *s,
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
