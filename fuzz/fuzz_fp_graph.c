/*
 * fuzz_fp_graph.c - libFuzzer target for ccache_fp_graph() and, on the same
 * graphs, ccache_fp_graph_strong().
 *
 * The input bytes decode into a graph with random node counts, op names or
 * ids, attribute and constant blobs, output slots with random ranks (some
 * over CCACHE_FP_MAX_RANK), operand and output references (some forward,
 * self, out of range or to a missing slot), parameter indices, and NULL
 * pointers with non-zero lengths.  Every array is its own heap block of
 * exactly the size the graph claims, so any read past one is an ASan error.
 *
 * An independent validity predicate, written from the contract in ccache.h,
 * says whether the call must succeed or return CCACHE_EINVAL (leaving the
 * key untouched); a valid graph must hash deterministically.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ccache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct rd {
  const uint8_t *p;
  size_t n, at;
} rd;

static unsigned byte(rd *r) { return r->at < r->n ? r->p[r->at++] : 0u; }

/* A heap block of exactly len bytes (len may be 0) filled from the input. */
static void *blob(rd *r, size_t len) {
  unsigned char *b = malloc(len ? len : 1);
  if (!b) abort();
  for (size_t i = 0; i < len; i++) b[i] = (unsigned char)byte(r);
  return b;
}

/* A pointer/length pair: NULL/0, NULL/len (invalid), data/len, data/0. */
static const void *ptr_len(rd *r, size_t *len, void **to_free) {
  unsigned mode = byte(r) % 4;
  *len = mode == 0 ? 0 : 1 + byte(r) % 40;
  if (mode == 3) *len = 0;
  if (mode == 0 || mode == 1) return NULL;
  void *b = blob(r, *len);
  *to_free = b;
  return b;
}

typedef struct arena {
  void *ptrs[1024];
  size_t n;
} arena;

static void *keep(arena *a, void *p) {
  if (p && a->n < 1024)
    a->ptrs[a->n++] = p;
  else if (p)
    abort();
  return p;
}

static ccache_fp_ref read_ref(rd *r, size_t n_nodes) {
  ccache_fp_ref ref;
  ref.node = byte(r) % (uint32_t)(n_nodes + 2);
  ref.slot = byte(r) % 5;
  if (byte(r) % 32 == 0) ref.node = UINT32_MAX - byte(r); /* far out of range */
  return ref;
}

/* The contract of ccache_fp_graph(), checked independently. */
static bool ref_valid(const ccache_fp_node *nodes, size_t limit, ccache_fp_ref ref) {
  return ref.node < limit && ref.slot < nodes[ref.node].n_outputs;
}

static bool graph_valid(const ccache_fp_node *nodes, size_t n_nodes, const ccache_fp_ref *outs,
                        size_t n_outs, const char *device, const ccache_key *scratch,
                        const ccache_key *out) {
  if ((!nodes && n_nodes) || !outs || !n_outs || !device || !scratch || !out) return false;
  for (size_t i = 0; i < n_nodes; i++) {
    const ccache_fp_node *nd = &nodes[i];
    if ((!nd->attrs && nd->attrs_len) || (!nd->constant && nd->constant_len)) return false;
    if ((!nd->outputs && nd->n_outputs) || (!nd->operands && nd->n_operands)) return false;
    if (nd->param_index < -1) return false;
    for (uint32_t k = 0; k < nd->n_outputs; k++)
      if (nd->outputs[k].rank > CCACHE_FP_MAX_RANK || (!nd->outputs[k].dims && nd->outputs[k].rank))
        return false;
    for (uint32_t k = 0; k < nd->n_operands; k++)
      if (!ref_valid(nodes, i, nd->operands[k])) return false; /* earlier nodes only */
  }
  for (size_t k = 0; k < n_outs; k++)
    if (!ref_valid(nodes, n_nodes, outs[k])) return false;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rd r = {data, size, 0};
  arena a = {.n = 0};
  size_t n_nodes = byte(&r) % 12;
  ccache_fp_node *nodes = keep(&a, malloc(n_nodes ? n_nodes * sizeof *nodes : 1));
  for (size_t i = 0; i < n_nodes; i++) {
    ccache_fp_node *nd = &nodes[i];
    memset(nd, 0, sizeof *nd);
    unsigned flags = byte(&r);
    if (flags & 1) {
      size_t len = byte(&r) % 12;
      char *name = keep(&a, blob(&r, len + 1));
      for (size_t k = 0; k < len; k++)
        if (!name[k]) name[k] = 'x';
      name[len] = '\0';
      nd->op_name = name;
    }
    nd->op_id = byte(&r);
    void *f = NULL;
    nd->attrs = ptr_len(&r, &nd->attrs_len, &f);
    keep(&a, f);
    f = NULL;
    nd->constant = ptr_len(&r, &nd->constant_len, &f);
    keep(&a, f);
    nd->n_outputs = byte(&r) % 4;
    if (nd->n_outputs && byte(&r) % 16 == 0) {
      nd->outputs = NULL; /* NULL with a count */
    } else {
      ccache_fp_tensor *t = keep(&a, malloc(nd->n_outputs ? nd->n_outputs * sizeof *t : 1));
      for (uint32_t k = 0; k < nd->n_outputs; k++) {
        t[k].dtype = (int32_t)(byte(&r) - 128);
        t[k].rank = byte(&r) % 20; /* 17..19: over the maximum */
        if (t[k].rank && byte(&r) % 16 == 0) {
          t[k].dims = NULL;
        } else {
          int64_t *dims = keep(&a, malloc(t[k].rank ? t[k].rank * sizeof *dims : 1));
          for (uint32_t d = 0; d < t[k].rank; d++) dims[d] = (int64_t)byte(&r) - 1;
          t[k].dims = dims;
        }
      }
      nd->outputs = t;
    }
    nd->n_operands = byte(&r) % 4;
    if (nd->n_operands && byte(&r) % 16 == 0) {
      nd->operands = NULL;
    } else {
      ccache_fp_ref *ops = keep(&a, malloc(nd->n_operands ? nd->n_operands * sizeof *ops : 1));
      for (uint32_t k = 0; k < nd->n_operands; k++) {
        ops[k] = read_ref(&r, n_nodes);
        if (byte(&r) % 4 && i > 0) ops[k].node %= (uint32_t)i; /* mostly backward */
      }
      nd->operands = ops;
    }
    nd->param_index = (int64_t)(byte(&r) % 6) - 2; /* -2 is out of domain */
  }
  size_t n_outs = byte(&r) % 4;
  ccache_fp_ref *outs = NULL;
  if (byte(&r) % 16) {
    outs = keep(&a, malloc(n_outs ? n_outs * sizeof *outs : 1));
    for (size_t k = 0; k < n_outs; k++) outs[k] = read_ref(&r, n_nodes);
  }
  const char *device = NULL;
  if (byte(&r) % 16) {
    size_t len = byte(&r) % 8;
    char *d = keep(&a, blob(&r, len + 1));
    for (size_t k = 0; k < len; k++)
      if (!d[k]) d[k] = 'd';
    d[len] = '\0';
    device = d;
  }
  ccache_key *scratch = NULL;
  if (byte(&r) % 16) scratch = keep(&a, malloc(n_nodes ? n_nodes * sizeof *scratch : 1));
  ccache_key key = {0x1111, 0x2222}, *out = byte(&r) % 16 ? &key : NULL;
  const ccache_fp_node *np = nodes;
  if (n_nodes && byte(&r) % 32 == 0) np = NULL; /* NULL nodes with a count */

  bool valid = graph_valid(np, n_nodes, outs, n_outs, device, scratch, out);
  int rc = ccache_fp_graph(np, n_nodes, outs, n_outs, device, scratch, out);
  if (valid) {
    if (rc != CCACHE_OK) abort();
    ccache_key again = {0, 0};
    if (ccache_fp_graph(np, n_nodes, outs, n_outs, device, scratch, &again) != CCACHE_OK ||
        again.lo != key.lo || again.hi != key.hi)
      abort(); /* not deterministic */
  } else {
    if (rc != CCACHE_EINVAL) abort();
    if (key.lo != 0x1111 || key.hi != 0x2222) abort(); /* no key is written */
  }

  /* The strong helper on the same graph (issue 22): the same validity, a
   * deterministic key, nothing written on error; its scratch is its own
   * (256-bit digests) and may start as garbage. */
  ccache_strong_key *sscratch = NULL;
  if (scratch) {
    sscratch = keep(&a, malloc(n_nodes ? n_nodes * sizeof *sscratch : 1));
    memset(sscratch, 0xa5, n_nodes ? n_nodes * sizeof *sscratch : 1);
  }
  ccache_strong_key skey = {{0x1111, 0x2222}, {0x3333, 0x4444}}, *sout = out ? &skey : NULL;
  int src = ccache_fp_graph_strong(np, n_nodes, outs, n_outs, device, sscratch, sout);
  if (valid) {
    if (src == CCACHE_ENOTSUP) goto done; /* a build without libsodium */
    if (src != CCACHE_OK) abort();
    ccache_strong_key again = {{0, 0}, {0, 0}};
    if (ccache_fp_graph_strong(np, n_nodes, outs, n_outs, device, sscratch, &again) != CCACHE_OK ||
        memcmp(&again, &skey, sizeof again) != 0)
      abort(); /* not deterministic (the scratch now holds the first call's digests) */
  } else {
    if (src != CCACHE_EINVAL) abort();
    if (skey.key.lo != 0x1111 || skey.check.hi != 0x4444) abort();
  }
done:
  for (size_t i = 0; i < a.n; i++) free(a.ptrs[i]);
  return 0;
}
