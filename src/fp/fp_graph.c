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
 * of nanoseconds per update call).  A node whose worst-case size (from its
 * counts and blob lengths, node_fits()) fits the buffer is written without
 * any room check; any other node goes through the checked encoder, which
 * spills to a streaming XXH3 state when the buffer fills.  Both are compiled
 * from one node_stream(), so the digest does not depend on the path.
 */
#include "ccache.h"

#include <stdbool.h>
#include <string.h>

#include "fp/fp_encode.h"

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
 * FPG_TENSOR_MAX bytes, so it always fits a flushed buffer. */
#define FPG_BUF_SIZE   1024u
#define FPG_DIRECT_MIN 256u

/* Encoded sizes: one output slot at most (i32 dtype, u32 rank, dims), one
 * operand (lo, hi, slot), and a node's fixed part (node tag, op tag and u64,
 * u64 attrs_len, u32 n_outputs, u32 n_operands, flags, u64 constant_len,
 * u64 param position), all of which a node may need beside its blobs. */
#define FPG_TENSOR_MAX (8u + 8u * CCACHE_FP_MAX_RANK)
#define FPG_REF_SIZE   20u
#define FPG_NODE_FIXED (1u + 9u + 8u + 4u + 4u + 1u + 8u + 8u)
_Static_assert(FPG_TENSOR_MAX <= FPG_BUF_SIZE, "an item must fit the buffer");

#if defined(__GNUC__)
#define FPG_NOINLINE      __attribute__((noinline))
#define FPG_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define FPG_NOINLINE
#define FPG_ALWAYS_INLINE inline
#endif

/*
 * ---- the checked encoder: stack buffer first, streaming state if needed ----
 *
 * Used by the graph stream and by nodes too big for the unchecked path.
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
  if (p != e->buf) ccache__fp_update(e->st, e->buf, (size_t)(p - e->buf));
  return e->buf;
}

/* A cursor with room for @p n more bytes (n <= FPG_BUF_SIZE). */
static inline unsigned char *enc_room(enc *e, unsigned char *p, size_t n) {
  if ((size_t)(p - e->buf) + n > FPG_BUF_SIZE) return enc_spill(e, p);
  return p;
}

/* Raw payload bytes (their length was written before them). */
static inline unsigned char *enc_blob(enc *e, unsigned char *p, const void *data, size_t len) {
  if (len < FPG_DIRECT_MIN) {
    p = enc_room(e, p, len);
    if (len) memcpy(p, data, len);
    return p + len;
  }
  p = enc_spill(e, p);
  ccache__fp_update(e->st, data, len);
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

static inline void store_key(ccache_key *out, XXH128_hash_t h) {
  out->lo = in_gpr(h.low64);
  out->hi = in_gpr(h.high64);
}

static void enc_final(enc *e, unsigned char *p, ccache_key *out) {
  if (!e->spilled) {
    store_key(out, XXH3_128bits(e->buf, (size_t)(p - e->buf)));
  } else {
    enc_spill(e, p);
    store_key(out, XXH3_128bits_digest(e->st));
  }
}

/*
 * ---- validation (all of it happens before anything is written) ----
 *
 * Hashing writes each digest into scratch as it goes, so checking a node
 * only when it is hashed would leave scratch written on an error found
 * mid-walk: the whole graph is checked in a pass of its own first.
 */

static bool tensor_ok(const ccache_fp_tensor *t) {
  return t->rank <= CCACHE_FP_MAX_RANK && (t->dims || !t->rank);
}

/* A reference to an output slot of one of the first @p limit nodes. */
static bool ref_ok(const ccache_fp_node *nodes, size_t limit, ccache_fp_ref r) {
  return r.node < limit && r.slot < nodes[r.node].n_outputs;
}

static bool outputs_ok(const ccache_fp_node *n) {
  if (!n->n_outputs) return true;
  if (!n->outputs) return false;
  for (uint32_t k = 0; k < n->n_outputs; k++)
    if (!tensor_ok(&n->outputs[k])) return false;
  return true;
}

/* Operands may only name earlier nodes: this rejects forward references,
 * self references and cycles at once, and keeps the walk single-pass. */
static bool operands_ok(const ccache_fp_node *nodes, size_t i) {
  const ccache_fp_node *n = &nodes[i];
  if (!n->n_operands) return true;
  if (!n->operands) return false;
  for (uint32_t k = 0; k < n->n_operands; k++)
    if (!ref_ok(nodes, i, n->operands[k])) return false;
  return true;
}

static bool node_ok(const ccache_fp_node *nodes, size_t i) {
  const ccache_fp_node *n = &nodes[i];
  if ((!n->attrs && n->attrs_len) || (!n->constant && n->constant_len) || n->param_index < -1)
    return false;
  return outputs_ok(n) && operands_ok(nodes, i);
}

static bool graph_ok(const ccache_fp_node *nodes, size_t n_nodes, const ccache_fp_ref *outputs,
                     size_t n_outputs, const char *device, const void *scratch, const void *out) {
  if (!outputs || !n_outputs || !device || !scratch || !out || (!nodes && n_nodes)) return false;
  for (size_t i = 0; i < n_nodes; i++)
    if (!node_ok(nodes, i)) return false;
  for (size_t k = 0; k < n_outputs; k++)
    if (!ref_ok(nodes, n_nodes, outputs[k])) return false;
  return true;
}

/* The same rules for the strong helper (fp_graph_strong.c); the fast one
 * keeps its own static copy, which the compiler may inline. */
bool ccache__fp_graph_ok(const ccache_fp_node *nodes, size_t n_nodes, const ccache_fp_ref *outputs,
                         size_t n_outputs, const char *device, const void *scratch,
                         const void *out) {
  return graph_ok(nodes, n_nodes, outputs, n_outputs, device, scratch, out);
}

/* ---- items shared by both node encoders (the caller ensures the room) ---- */

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FPG_LITTLE_ENDIAN 1
#endif

/*
 * Copies @p len bytes.  Up to 32 bytes (op names, typical attributes and
 * dims) take two possibly overlapping fixed-size moves of one size class,
 * inlined: for such sizes the libc call costs more than the copy.  Never
 * reads outside [src, src + len).
 */
static inline unsigned char *put_bytes(unsigned char *p, const void *src, size_t len) {
  const unsigned char *s = src;
  if (len > 32)
    memcpy(p, s, len);
  else if (len >= 16) {
    memcpy(p, s, 16);
    memcpy(p + len - 16, s + len - 16, 16);
  } else if (len >= 8) {
    memcpy(p, s, 8);
    memcpy(p + len - 8, s + len - 8, 8);
  } else if (len >= 4) {
    memcpy(p, s, 4);
    memcpy(p + len - 4, s + len - 4, 4);
  } else if (len) {
    p[0] = s[0];
    p[len / 2] = s[len / 2];
    p[len - 1] = s[len - 1];
  }
  return p + len;
}

/* One output slot, 8 + 8 * rank bytes. */
static inline unsigned char *put_tensor(unsigned char *p, const ccache_fp_tensor *t) {
  p = put_u32(p, (uint32_t)t->dtype);
  p = put_u32(p, t->rank);
#ifdef FPG_LITTLE_ENDIAN
  /* The dims array already is their little-endian i64 encoding. */
  return put_bytes(p, t->dims, 8u * t->rank);
#else
  for (uint32_t d = 0; d < t->rank; d++) p = put_u64(p, (uint64_t)t->dims[d]);
  return p;
#endif
}

/* An (earlier) node's digest and the slot used, FPG_REF_SIZE bytes. */
static inline unsigned char *put_ref(unsigned char *p, const ccache_key *digests, ccache_fp_ref r) {
  const ccache_key *d = &digests[r.node];
  p = put_u64(p, d->lo);
  p = put_u64(p, d->hi);
  return put_u32(p, r.slot);
}

/*
 * The flags byte says which optional parts follow, so a node without them
 * pays one byte, not two 9-byte fields (that keeps a typical node under 128
 * bytes, XXH3's cheaper short-input path).  A NULL constant ("none") and a
 * non-NULL empty one are different nodes.
 */
static inline unsigned put_flags_of(const ccache_fp_node *n) {
  return (n->constant ? FPG_FLAG_CONSTANT : 0u) | (n->param_index >= 0 ? FPG_FLAG_PARAM : 0u);
}

/* ---- the node stream, in a checked and an unchecked version ---- */

/*
 * Whether the node's worst-case stream fits the buffer, so that it can be
 * written without checking the room item by item.  Any length over the
 * buffer fails the OR test alone, so the sum below cannot wrap (the counts
 * are u32, their products fit a u64).
 */
static inline bool node_fits(const ccache_fp_node *n, size_t name_len) {
  if ((uint64_t)(name_len | n->attrs_len | n->constant_len) > FPG_BUF_SIZE) return false;
  uint64_t worst = FPG_NODE_FIXED + (uint64_t)n->n_outputs * FPG_TENSOR_MAX +
                   (uint64_t)n->n_operands * FPG_REF_SIZE + name_len + n->attrs_len +
                   n->constant_len;
  return worst <= FPG_BUF_SIZE;
}

/* Room for @p n more bytes: made (spilling if need be) when @p checked,
 * else already reserved as a whole by node_fits(). */
static inline unsigned char *room(enc *e, unsigned char *p, size_t n, bool checked) {
  return checked ? enc_room(e, p, n) : p;
}

static inline unsigned char *blob(enc *e, unsigned char *p, const void *data, size_t len,
                                  bool checked) {
  return checked ? enc_blob(e, p, data, len) : put_bytes(p, data, len);
}

/*
 * Writes and hashes the node stream after its tag.  Always inlined with a
 * constant @p checked, so that the compiler makes two encoders of it: the
 * checked one takes any node, the unchecked one (no room test at all) the
 * nodes node_fits() accepts.  One source keeps their streams identical.
 */
static FPG_ALWAYS_INLINE void node_stream(enc *e, unsigned char *p, const ccache_fp_node *n,
                                          size_t name_len, const ccache_key *digests, bool checked,
                                          ccache_key *out) {
  p = room(e, p, 9, checked);
  if (n->op_name) {
    p = put_u8(p, FPG_TAG_OP_NAME);
    p = put_u64(p, (uint64_t)name_len);
    p = blob(e, p, n->op_name, name_len, checked);
  } else {
    p = put_u8(p, FPG_TAG_OP_ID);
    p = put_u64(p, n->op_id);
  }
  p = put_u64(room(e, p, 8, checked), (uint64_t)n->attrs_len);
  p = blob(e, p, n->attrs, n->attrs_len, checked);

  p = put_u32(room(e, p, 4, checked), n->n_outputs);
  for (uint32_t k = 0; k < n->n_outputs; k++) {
    const ccache_fp_tensor *t = &n->outputs[k];
    p = put_tensor(room(e, p, 8u + 8u * t->rank, checked), t);
  }
  p = put_u32(room(e, p, 4, checked), n->n_operands);
  for (uint32_t k = 0; k < n->n_operands; k++)
    p = put_ref(room(e, p, FPG_REF_SIZE, checked), digests, n->operands[k]);

  p = put_u8(room(e, p, 9, checked), put_flags_of(n));
  if (n->constant) {
    p = put_u64(p, (uint64_t)n->constant_len);
    p = blob(e, p, n->constant, n->constant_len, checked);
  }
  if (n->param_index >= 0) p = put_u64(room(e, p, 8, checked), (uint64_t)n->param_index);
  if (checked)
    enc_final(e, p, out);
  else /* never spilled: the whole stream is in the buffer */
    store_key(out, XXH3_128bits(e->buf, (size_t)(p - e->buf)));
}

/* Kept out of line: inlined into the node loop, its state and cursor
 * juggling costs the common path registers (stack spills on every node). */
FPG_NOINLINE static void node_digest_checked(const ccache_fp_node *n, size_t name_len,
                                             const ccache_key *digests, unsigned char *buf,
                                             XXH3_state_t *st, ccache_key *out) {
  enc e;
  unsigned char *p = enc_begin(&e, buf, st, FPG_TAG_NODE);
  node_stream(&e, p, n, name_len, digests, true, out);
}

static inline void node_digest(const ccache_fp_node *n, const ccache_key *digests,
                               unsigned char *buf, XXH3_state_t *st, ccache_key *out) {
  /* libc strlen() rather than an inline byte loop: a few vector compares
   * for a short name, and no per-byte branch to mispredict on the varying
   * lengths of op names. */
  size_t name_len = n->op_name ? strlen(n->op_name) : 0;
  if (!node_fits(n, name_len)) {
    node_digest_checked(n, name_len, digests, buf, st, out);
    return;
  }
  enc e;
  unsigned char *p = enc_begin(&e, buf, st, FPG_TAG_NODE);
  node_stream(&e, p, n, name_len, digests, false, out);
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
    p = put_ref(enc_room(&e, p, FPG_REF_SIZE), digests, outputs[k]);
  enc_final(&e, p, out);
}

CCACHE_API int ccache_fp_graph(const ccache_fp_node *nodes, size_t n_nodes,
                               const ccache_fp_ref *outputs, size_t n_outputs, const char *device,
                               ccache_key *scratch, ccache_key *out) {
  if (!graph_ok(nodes, n_nodes, outputs, n_outputs, device, scratch, out)) return CCACHE_EINVAL;
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
