/*
 * bench_fingerprint.h - what bench_fingerprint's two sources share: the
 * fast keys that every row times or compares against (bench_fingerprint.c)
 * and the decoder graphs both the fast and the strong graph rows key
 * (bench_fingerprint_strong.c times the strong ones).
 */
#ifndef BENCH_FINGERPRINT_H
#define BENCH_FINGERPRINT_H

#include "bench_util.h"

/* Where results go so the compiler cannot drop the work that made them. */
extern volatile uint64_t sink;

/* The fast key of buf: ccache_fp_init + ccache_fp_bytes + ccache_fp_final. */
ccache_key fp_bytes(const void *buf, size_t len);

/* ------------------------------------------------------------- graph */

#define MAXN   1400
#define MAXOPS 4

typedef struct graph {
  ccache_fp_node nodes[MAXN];
  ccache_fp_tensor outs[MAXN];
  int64_t dims[MAXN][4];
  ccache_fp_ref ops[MAXN][MAXOPS];
  size_t n;
  int64_t next_param;
} graph;

/* layers == 0: one SmolLM2-135M decoder layer alone (x and pos are its
 * inputs); else the whole stack with embedding, final norm and LM head.
 * *out: the graph's output. */
void build(graph *g, int layers, ccache_fp_ref *out);

/* ccache_fp_graph of g (noipa: every call is timed as a call). */
ccache_key graph_key(const graph *g, const ccache_fp_ref *out, ccache_key *scratch);

/* The strong-key rows (bench_fingerprint_strong.c): the strong builder
 * over the same bytes and libsodium's hash choice; the strong graph key on
 * a decoder layer (layers 0) or the stack. */
void strong_bytes_bench(bench_report *rep, const bench_opts *o);
void strong_graph_bench(bench_report *rep, const bench_opts *o, int layers);

#endif
