/*
 * fp_graph_strong.c - the strong (BLAKE2b-256) structural fingerprint of a
 * graph, ccache_fp_graph_strong().  The streams are fp.h's; they are
 * ccache_fp_graph()'s with 32-byte digests, the mode byte in the graph
 * stream's domain, and a sorted list of parameter digests instead of their
 * sums (a sum of digests is a multiset hash that a generalised-birthday
 * search can match with many parameters; a sorted list is injective).
 *
 * Simpler than fp_graph.c's encoder on purpose: BLAKE2b costs hundreds of
 * nanoseconds per node, so the byte-level tricks that pay for XXH3 (the
 * unchecked node path, the in-register cursor) would not show here.  Each
 * stream is written into a stack buffer and hashed in one call when it
 * fits, else spilled to a streaming state as the buffer fills.
 */
#include "ccache.h"

#include <stdbool.h>
#include <string.h>

#include "fp/fp_encode.h"
#include "fp/fp_strong.h"

/* Pinned tags: fp_graph.c's, plus the mode byte of the graph stream. */
enum {
  SG_TAG_NODE = 0x10,
  SG_TAG_OP_NAME = 0x11,
  SG_TAG_OP_ID = 0x12,
  SG_TAG_GRAPH = 0x20,
  SG_MODE_STRONG = 0x53, /* 'S' */
  SG_FLAG_CONSTANT = 0x01,
  SG_FLAG_PARAM = 0x02,
};

#define SG_BUF_SIZE 1024u

typedef struct senc {
  _Alignas(CCACHE__SHASH_STATE_ALIGN) unsigned char st[CCACHE__SHASH_STATE_LEN];
  unsigned char buf[SG_BUF_SIZE];
  size_t used;
  bool spilled;
} senc;

static void s_flush(senc *e) {
  if (!e->spilled) {
    ccache__shash_init(e->st);
    e->spilled = true;
  }
  if (e->used) ccache__shash_update(e->st, e->buf, e->used);
  e->used = 0;
}

/* Bytes into the stream: copied while they fit, else straight to the state. */
static void s_put(senc *e, const void *data, size_t len) {
  if (len > SG_BUF_SIZE - e->used) {
    s_flush(e);
    if (len > SG_BUF_SIZE) {
      ccache__shash_update(e->st, data, len);
      return;
    }
  }
  if (len) memcpy(e->buf + e->used, data, len);
  e->used += len;
}

static void s_u8(senc *e, unsigned v) {
  unsigned char b[1];
  put_u8(b, v);
  s_put(e, b, 1);
}

static void s_u32(senc *e, uint32_t v) {
  unsigned char b[4];
  put_u32(b, v);
  s_put(e, b, 4);
}

static void s_u64(senc *e, uint64_t v) {
  unsigned char b[8];
  put_u64(b, v);
  s_put(e, b, 8);
}

static void s_digest(senc *e, const ccache_strong_key *k) {
  unsigned char b[32];
  put_u64(put_u64(put_u64(put_u64(b, k->key.lo), k->key.hi), k->check.lo), k->check.hi);
  s_put(e, b, sizeof b);
}

static void s_begin(senc *e) {
  e->used = 0;
  e->spilled = false;
}

static void s_final(senc *e, ccache_strong_key *out) {
  if (!e->spilled) {
    ccache__shash(e->buf, e->used, out);
    return;
  }
  s_flush(e);
  ccache__shash_final(e->st, out);
}

static void node_digest(senc *e, const ccache_fp_node *n, const ccache_strong_key *digests,
                        ccache_strong_key *out) {
  s_begin(e);
  s_u8(e, SG_TAG_NODE);
  if (n->op_name) {
    size_t len = strlen(n->op_name);
    s_u8(e, SG_TAG_OP_NAME);
    s_u64(e, (uint64_t)len);
    s_put(e, n->op_name, len);
  } else {
    s_u8(e, SG_TAG_OP_ID);
    s_u64(e, n->op_id);
  }
  s_u64(e, (uint64_t)n->attrs_len);
  s_put(e, n->attrs, n->attrs_len);
  s_u32(e, n->n_outputs);
  for (uint32_t k = 0; k < n->n_outputs; k++) {
    const ccache_fp_tensor *t = &n->outputs[k];
    s_u32(e, (uint32_t)t->dtype);
    s_u32(e, t->rank);
    for (uint32_t d = 0; d < t->rank; d++) s_u64(e, (uint64_t)t->dims[d]);
  }
  s_u32(e, n->n_operands);
  for (uint32_t k = 0; k < n->n_operands; k++) {
    s_digest(e, &digests[n->operands[k].node]);
    s_u32(e, n->operands[k].slot);
  }
  s_u8(e, (n->constant ? SG_FLAG_CONSTANT : 0u) | (n->param_index >= 0 ? SG_FLAG_PARAM : 0u));
  if (n->constant) {
    s_u64(e, (uint64_t)n->constant_len);
    s_put(e, n->constant, n->constant_len);
  }
  if (n->param_index >= 0) s_u64(e, (uint64_t)n->param_index);
  s_final(e, out);
}

/* ---- the parameter digests in order: a heapsort (no allocation, and
 * O(n log n) whatever the graph, so a graph built to be slow is not) ---- */

static bool key_less(const ccache_strong_key *a, const ccache_strong_key *b) {
  if (a->key.lo != b->key.lo) return a->key.lo < b->key.lo;
  if (a->key.hi != b->key.hi) return a->key.hi < b->key.hi;
  if (a->check.lo != b->check.lo) return a->check.lo < b->check.lo;
  return a->check.hi < b->check.hi;
}

static void sift_down(ccache_strong_key *a, size_t root, size_t n) {
  for (;;) {
    size_t child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && key_less(&a[child], &a[child + 1])) child++;
    if (!key_less(&a[root], &a[child])) return;
    ccache_strong_key t = a[root];
    a[root] = a[child];
    a[child] = t;
    root = child;
  }
}

static void sort_keys(ccache_strong_key *a, size_t n) {
  for (size_t i = n / 2; i-- > 0;) sift_down(a, i, n);
  for (size_t end = n; end-- > 1;) {
    ccache_strong_key t = a[0];
    a[0] = a[end];
    a[end] = t;
    sift_down(a, 0, end);
  }
}

CCACHE_API int ccache_fp_graph_strong(const ccache_fp_node *nodes, size_t n_nodes,
                                      const ccache_fp_ref *outputs, size_t n_outputs,
                                      const char *device, ccache_strong_key *scratch,
                                      ccache_strong_key *out) {
  if (!ccache__fp_graph_ok(nodes, n_nodes, outputs, n_outputs, device, scratch, out))
    return CCACHE_EINVAL;
  if (!ccache__shash_ready()) return CCACHE_ENOTSUP;
  senc e;
  for (size_t i = 0; i < n_nodes; i++) node_digest(&e, &nodes[i], scratch, &scratch[i]);

  s_begin(&e);
  s_put(&e, CCACHE__FP_MAGIC, CCACHE__FP_MAGIC_LEN);
  s_u32(&e, CCACHE_FP_FORMAT_VERSION);
  s_u8(&e, SG_MODE_STRONG);
  s_u8(&e, SG_TAG_GRAPH);
  size_t dlen = strlen(device);
  s_u64(&e, (uint64_t)dlen);
  s_put(&e, device, dlen);
  s_u64(&e, (uint64_t)n_outputs);
  for (size_t k = 0; k < n_outputs; k++) {
    s_digest(&e, &scratch[outputs[k].node]);
    s_u32(&e, outputs[k].slot);
  }
  /* The outputs are in the stream: scratch may now be reused, so the
   * parameters' digests are packed at its front (k <= i) and sorted. */
  size_t np = 0;
  for (size_t i = 0; i < n_nodes; i++)
    if (nodes[i].param_index >= 0) scratch[np++] = scratch[i];
  sort_keys(scratch, np);
  s_u64(&e, (uint64_t)np);
  for (size_t k = 0; k < np; k++) s_digest(&e, &scratch[k]);
  s_final(&e, out);
  return CCACHE_OK;
}
