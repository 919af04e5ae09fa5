/*
 * fp_graph.c - structural (Merkle) fingerprint of a whole graph.
 *
 * Every node digest and the graph key are XXH3-128 (unseeded, default
 * secret) of a byte stream; all integers little-endian, fixed width:
 *
 *   node:  0x10
 *          op       0x11, u64 len, name bytes   |   0x12, u64 op_id
 *          attrs    u64 len, bytes
 *          outputs  u32 n, n x (i32 dtype, u32 rank, rank x i64 dim)
 *          operands u32 n, n x (u64 lo, u64 hi of the operand's digest, u32 slot)
 *          flags    u8: 0x01 constant != NULL, 0x02 param_index >= 0
 *          constant (if 0x01) u64 len, bytes
 *          param    (if 0x02) u64 position
 *   graph: "ccache-fp", u32 CCACHE_FP_FORMAT_VERSION, 0x20
 *          device   u64 len, bytes
 *          params   u64 count, u64 sum of lo, u64 sum of hi (mod 2^64) over
 *                   the digests of all parameter nodes
 *          outputs  u64 n, n x (u64 lo, u64 hi of the node's digest, u32 slot)
 *
 * The version prefix is in the graph stream only (it reaches every key from
 * there; 13 more bytes per node would cost a hash round).  Builder streams
 * start with the same prefix and then a field tag (0x01..0x06), never 0x20,
 * and node streams start with 0x10, not "c": no builder sequence can produce
 * a node or graph stream.
 *
 * Node indices never enter a stream: operands contribute their digests and
 * parameters their positions, so renumbering nodes or reordering independent
 * ones leaves the key alone.
 *
 * Speed: a typical node encodes to ~100 bytes, written into a stack buffer
 * and hashed by one one-shot XXH3_128bits() call (streaming XXH3 costs tens
 * of nanoseconds per update call).  A node with a large name, attribute blob
 * or constant spills to a streaming XXH3 state instead; both paths hash the
 * same stream, so the digest does not depend on the path.
 */
#include "ccache.h"

#include <stdbool.h>
#include <string.h>

#include "fp_encode.h"

/* Domain and section tags.  Pinned: changing one needs a format bump. */
enum {
  FPG_TAG_NODE = 0x10,
  FPG_TAG_OP_NAME = 0x11,
  FPG_TAG_OP_ID = 0x12,
  FPG_TAG_GRAPH = 0x20,
};

/* The node's flags byte: which optional parts follow it. */
enum {
  FPG_FLAG_CONSTANT = 0x01, /* u64 constant_len, constant bytes */
  FPG_FLAG_PARAM = 0x02,    /* u64 parameter position */
};


/* Stack buffer for one stream, and the blob size from which a payload is
 * fed to XXH3 directly rather than copied.  Every fixed-size item is at most
 * 8 + 8 * CCACHE_FP_MAX_RANK bytes, so it always fits a flushed buffer. */
#define FPG_BUF_SIZE 1024u
#define FPG_DIRECT_MIN 256u
_Static_assert(8u + 8u * CCACHE_FP_MAX_RANK <= FPG_BUF_SIZE, "an item must fit the buffer");


/*
 * ---- the encoder: a stack buffer first, a streaming state only if needed ----
 *
 * The write cursor is passed and returned by value (not kept in the struct)
 * so that it stays in a register across the whole node: the struct is only
 * touched when the buffer overflows, which typical nodes never do.
 */
typedef struct enc {
  unsigned char *buf; /* FPG_BUF_SIZE bytes */
  XXH3_state_t *st;   /* reset on first spill */
  bool spilled;       /* st holds a prefix of the stream */
} enc;

/* Move buf[0, p) into the streaming state; returns the emptied cursor. */
static unsigned char *enc_spill(enc *e, unsigned char *p) {
  if (!e->spilled) {
    XXH3_128bits_reset(e->st);
    e->spilled = true;
  }
  if (p != e->buf)
    CCACHE__FP_XXH_UPDATE(e->st, e->buf, (size_t)(p - e->buf));
  return e->buf;
}

/* A cursor with room for @p n more bytes (n <= FPG_BUF_SIZE). */
static inline unsigned char *enc_room(enc *e, unsigned char *p, size_t n) {
  if ((size_t)(p - e->buf) + n > FPG_BUF_SIZE)
    return enc_spill(e, p);
  return p;
}

/* Raw payload bytes (their length was written before them). */
static inline unsigned char *enc_blob(enc *e, unsigned char *p, const void *data, size_t len) {
  if (len < FPG_DIRECT_MIN) {
    p = enc_room(e, p, len);
    if (len)
      memcpy(p, data, len);
    return p + len;
  }
  p = enc_spill(e, p);
  CCACHE__FP_XXH_UPDATE(e->st, data, len);
  return p;
}

/* Start a stream: the version prefix (graph streams only) and the domain. */
static inline unsigned char *enc_begin(enc *e, unsigned char *buf, XXH3_state_t *st,
                                       unsigned domain) {
  e->buf = buf;
  e->st = st;
  e->spilled = false;
  unsigned char *p = buf;
  if (domain == FPG_TAG_GRAPH) {
    memcpy(p, CCACHE__FP_MAGIC, CCACHE__FP_MAGIC_LEN);
    p = put_u32(p + CCACHE__FP_MAGIC_LEN, CCACHE_FP_FORMAT_VERSION);
  }
  return put_u8(p, domain);
}

/*
 * Keeps a value in a general register.  The XXH128_hash_t comes back in two
 * registers; left alone, compilers spill it and reload it as one 16-byte
 * vector to store the key, and that wide load of two narrow stores defeats
 * store forwarding (a stall measured at ~20% of the per-node time).
 */
static inline uint64_t in_gpr(uint64_t v) {
#if defined(__GNUC__)
  __asm__("" : "+r"(v));
#endif
  return v;
}

static void enc_final(enc *e, unsigned char *p, ccache_key *out) {
  XXH128_hash_t h;
  if (!e->spilled) {
    h = ccache__fp_oneshot(e->buf, (size_t)(p - e->buf));
  } else {
    enc_spill(e, p);
    h = XXH3_128bits_digest(e->st);
  }
  out->lo = in_gpr(h.low64);
  out->hi = in_gpr(h.high64);
}

/* ---- validation (all of it happens before anything is written) ---- */

static bool tensor_ok(const ccache_fp_tensor *t) {
  return t->rank <= CCACHE_FP_MAX_RANK && (t->dims || !t->rank);
}

/* A reference to an output slot of one of the first @p limit nodes. */
static bool ref_ok(const ccache_fp_node *nodes, size_t limit, ccache_fp_ref r) {
  return r.node < limit && r.slot < nodes[r.node].n_outputs;
}

static bool node_ok(const ccache_fp_node *nodes, size_t i) {
  const ccache_fp_node *n = &nodes[i];
  if ((!n->attrs && n->attrs_len) || (!n->constant && n->constant_len))
    return false;
  if ((!n->outputs && n->n_outputs) || (!n->operands && n->n_operands))
    return false;
  if (n->param_index < -1)
    return false;
  for (uint32_t k = 0; k < n->n_outputs; k++)
    if (!tensor_ok(&n->outputs[k]))
      return false;
  /* Operands may only name earlier nodes: this rejects forward references,
   * self references and cycles at once, and keeps the walk single-pass. */
  for (uint32_t k = 0; k < n->n_operands; k++)
    if (!ref_ok(nodes, i, n->operands[k]))
      return false;
  return true;
}

static bool graph_ok(const ccache_fp_node *nodes, size_t n_nodes, const ccache_fp_ref *outputs,
                     size_t n_outputs, const char *device, const ccache_key *scratch,
                     const ccache_key *out) {
  if (!outputs || !n_outputs || !device || !scratch || !out || (!nodes && n_nodes))
    return false;
  for (size_t i = 0; i < n_nodes; i++)
    if (!node_ok(nodes, i))
      return false;
  for (size_t k = 0; k < n_outputs; k++)
    if (!ref_ok(nodes, n_nodes, outputs[k]))
      return false;
  return true;
}

/* ---- encoding ---- */

static inline unsigned char *put_op(enc *e, unsigned char *p, const ccache_fp_node *n) {
  p = enc_room(e, p, 9);
  if (!n->op_name) {
    p = put_u8(p, FPG_TAG_OP_ID);
    return put_u64(p, n->op_id);
  }
  size_t len = strlen(n->op_name);
  p = put_u8(p, FPG_TAG_OP_NAME);
  p = put_u64(p, (uint64_t)len);
  return enc_blob(e, p, n->op_name, len);
}

static inline unsigned char *put_outputs(enc *e, unsigned char *p, const ccache_fp_node *n) {
  p = put_u32(enc_room(e, p, 4), n->n_outputs);
  for (uint32_t k = 0; k < n->n_outputs; k++) {
    const ccache_fp_tensor *t = &n->outputs[k];
    p = enc_room(e, p, 8u + 8u * t->rank);
    p = put_u32(p, (uint32_t)t->dtype);
    p = put_u32(p, t->rank);
    for (uint32_t d = 0; d < t->rank; d++)
      p = put_u64(p, (uint64_t)t->dims[d]);
  }
  return p;
}

/* An (earlier) node's digest and the slot used, 20 bytes. */
static inline unsigned char *put_ref(unsigned char *p, const ccache_key *digests, ccache_fp_ref r) {
  const ccache_key *d = &digests[r.node];
  p = put_u64(p, d->lo);
  p = put_u64(p, d->hi);
  return put_u32(p, r.slot);
}

static inline unsigned char *put_operands(enc *e, unsigned char *p, const ccache_fp_node *n,
                                          const ccache_key *digests) {
  p = put_u32(enc_room(e, p, 4), n->n_operands);
  for (uint32_t k = 0; k < n->n_operands; k++)
    p = put_ref(enc_room(e, p, 20), digests, n->operands[k]);
  return p;
}

static void node_digest(const ccache_fp_node *n, const ccache_key *digests, unsigned char *buf,
                        XXH3_state_t *st, ccache_key *out) {
  enc e;
  unsigned char *p = enc_begin(&e, buf, st, FPG_TAG_NODE);
  p = put_op(&e, p, n);

  p = put_u64(enc_room(&e, p, 8), (uint64_t)n->attrs_len);
  p = enc_blob(&e, p, n->attrs, n->attrs_len);

  p = put_outputs(&e, p, n);
  p = put_operands(&e, p, n, digests);

  /* One flags byte says which optional parts follow, so a node without
   * them pays one byte, not two 9-byte fields (that keeps a typical node
   * under 128 bytes, XXH3's cheaper short-input path).  A NULL constant
   * ("none") and a non-NULL empty one are different nodes. */
  const bool has_const = n->constant != NULL, is_param = n->param_index >= 0;
  p = put_u8(enc_room(&e, p, 9),
             (has_const ? FPG_FLAG_CONSTANT : 0u) | (is_param ? FPG_FLAG_PARAM : 0u));
  if (has_const) {
    p = put_u64(p, (uint64_t)n->constant_len);
    p = enc_blob(&e, p, n->constant, n->constant_len);
  }
  if (is_param)
    p = put_u64(enc_room(&e, p, 8), (uint64_t)n->param_index);
  enc_final(&e, p, out);
}

/*
 * Every parameter node, used or not, enters the key through an
 * order-independent summary: their count and the sums (mod 2^64) of the
 * halves of their digests.  A digest includes the position, so the summary
 * tells f(x, y) = x from f(x) = x (different calling conventions) without
 * depending on where the parameter nodes sit in the array.
 */
typedef struct param_sum {
  uint64_t count, lo, hi;
} param_sum;

static inline void param_add(param_sum *ps, const ccache_fp_node *n, const ccache_key *d) {
  if (n->param_index >= 0) {
    ps->count++;
    ps->lo += d->lo;
    ps->hi += d->hi;
  }
}

static void graph_key(const ccache_fp_ref *outputs, size_t n_outputs, const char *device,
                      const param_sum *ps, const ccache_key *digests, unsigned char *buf,
                      XXH3_state_t *st, ccache_key *out) {
  enc e;
  unsigned char *p = enc_begin(&e, buf, st, FPG_TAG_GRAPH);
  size_t dlen = strlen(device);
  p = put_u64(enc_room(&e, p, 8), (uint64_t)dlen);
  p = enc_blob(&e, p, device, dlen);
  p = enc_room(&e, p, 32);
  p = put_u64(p, ps->count);
  p = put_u64(p, ps->lo);
  p = put_u64(p, ps->hi);
  p = put_u64(p, (uint64_t)n_outputs);
  for (size_t k = 0; k < n_outputs; k++)
    p = put_ref(enc_room(&e, p, 20), digests, outputs[k]);
  enc_final(&e, p, out);
}

CCACHE_API int ccache_fp_graph(const ccache_fp_node *nodes, size_t n_nodes,
                               const ccache_fp_ref *outputs, size_t n_outputs, const char *device,
                               ccache_key *scratch, ccache_key *out) {
  if (!graph_ok(nodes, n_nodes, outputs, n_outputs, device, scratch, out))
    return CCACHE_EINVAL;
  /* One buffer and one (lazily reset) state serve every stream in turn. */
  XXH3_state_t st;
  unsigned char buf[FPG_BUF_SIZE];
  param_sum ps = {0, 0, 0};
  for (size_t i = 0; i < n_nodes; i++) {
    node_digest(&nodes[i], scratch, buf, &st, &scratch[i]);
    param_add(&ps, &nodes[i], &scratch[i]);
  }
  graph_key(outputs, n_outputs, device, &ps, scratch, buf, &st, out);
  return CCACHE_OK;
}
