/*
 * bench_fingerprint_strong.c - bench_fingerprint's strong-key rows (issue
 * 22), each against the fast mode in the same repetition: bytes/s of the
 * strong builder over the same 64 MiB as the P5 row and ns/node of
 * ccache_fp_graph_strong() on the same decoder graphs
 * (bench_fingerprint.c builds them); and the hash choice itself,
 * libsodium's BLAKE2b-256 (crypto_generichash) against its SHA-256
 * (crypto_hash_sha256) over 64 MiB and on one 160-byte input.  Without
 * libsodium in the build the rows are skipped with a note.
 */
#include <string.h>

#ifdef BENCH_HAVE_SODIUM
#include <sodium.h>
#endif

#include "bench_fingerprint.h"

/* The strong builder over the same bytes; false if this build has none. */
static bool fp_bytes_strong(const void *buf, size_t len, ccache_strong_key *k) {
  ccache_fp fp;
  if (ccache_fp_init_strong(&fp) != CCACHE_OK) return false;
  BENCH_OK(ccache_fp_bytes(&fp, buf, len));
  BENCH_OK(ccache_fp_final_strong(&fp, k));
  return true;
}

/* ------------------------------------------------------ strong bytes */

static unsigned char *random_buf(size_t len) {
  unsigned char *buf = malloc(len);
  BENCH_CHECK(buf != NULL, "out of memory");
  uint64_t st = 42;
  for (size_t i = 0; i < len; i += 8) {
    uint64_t v = bench_rand(&st);
    memcpy(buf + i, &v, 8);
  }
  return buf;
}

void strong_bytes_bench(bench_report *rep, const bench_opts *o) {
  /* Quick mode (CI): 8 MiB, so the slow hashes cost seconds, not tens. */
  const size_t len = o->quick ? 8u << 20 : 64u << 20;
  const char *mib = o->quick ? "8 MiB" : "64 MiB";
  char fig[96];
  const int reps = o->quick ? 3 : 9;
  unsigned char *buf = random_buf(len);
  ccache_strong_key s0, s1;
  if (!fp_bytes_strong(buf, len, &s0)) {
    bench_note(rep, "strong keys: not in this build (no libsodium): rows skipped");
    free(buf);
    return;
  }
  buf[len / 3] ^= 1;
  BENCH_CHECK(fp_bytes_strong(buf, len, &s1), "strong builder");
  buf[len / 3] ^= 1;
  BENCH_CHECK(s0.key.lo != s1.key.lo || s0.check.hi != s1.check.hi,
              "a flipped byte did not change the strong key");
  double *ts = malloc(sizeof(double) * (size_t)reps), *tf = malloc(sizeof(double) * (size_t)reps),
         *ratio = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(ts && tf && ratio, "out of memory");
  for (int r = 0; r < reps; r++) {
    ccache_strong_key k;
    uint64_t t0 = bench_now_ns();
    BENCH_CHECK(fp_bytes_strong(buf, len, &k), "strong builder");
    uint64_t t1 = bench_now_ns();
    sink = fp_bytes(buf, len).lo;
    uint64_t t2 = bench_now_ns();
    BENCH_CHECK(k.key.lo == s0.key.lo && k.check.hi == s0.check.hi, "strong key not deterministic");
    ts[r] = (double)(t1 - t0);
    tf[r] = (double)(t2 - t1);
    ratio[r] = tf[r] / ts[r];
  }
  double gb = (double)len / 1e9;
  snprintf(fig, sizeof fig, "strong ccache_fp_bytes (BLAKE2b-256) over %s", mib);
  bench_add(rep, fig, gb / (bench_stats(ts, reps).med * 1e-9), "GB/s",
            gb / (bench_stats(tf, reps).med * 1e-9), "fast ccache_fp_bytes (XXH3-128)",
            bench_stats(ratio, reps), "throughput strong / fast", BENCH_REPORT, 0);

#ifdef BENCH_HAVE_SODIUM
  /* The choice: libsodium's two 256-bit hashes on the same bytes. */
  unsigned char d[32];
  double *tb = malloc(sizeof(double) * (size_t)reps), *th = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(tb && th, "out of memory");
  for (int r = 0; r < reps; r++) {
    uint64_t t0 = bench_now_ns();
    crypto_generichash(d, sizeof d, buf, len, NULL, 0);
    uint64_t t1 = bench_now_ns();
    sink = d[0];
    crypto_hash_sha256(d, buf, len);
    uint64_t t2 = bench_now_ns();
    sink = d[0];
    tb[r] = (double)(t1 - t0);
    th[r] = (double)(t2 - t1);
    ratio[r] = th[r] / tb[r];
  }
  snprintf(fig, sizeof fig, "hash choice over %s: BLAKE2b-256 (crypto_generichash)", mib);
  bench_add(rep, fig, gb / (bench_stats(tb, reps).med * 1e-9), "GB/s",
            gb / (bench_stats(th, reps).med * 1e-9), "SHA-256 (crypto_hash_sha256)",
            bench_stats(ratio, reps), "throughput BLAKE2b / SHA-256", BENCH_REPORT, 0);
  /* Small inputs: one node-sized (160-byte) input per call. */
  const size_t calls = o->quick ? 5000 : 200000;
  unsigned char small[160];
  memset(small, 0x5a, sizeof small);
  for (int r = 0; r < reps; r++) {
    uint64_t t0 = bench_now_ns();
    for (size_t c = 0; c < calls; c++) {
      small[0] = (unsigned char)c;
      crypto_generichash(d, sizeof d, small, sizeof small, NULL, 0);
    }
    uint64_t t1 = bench_now_ns();
    for (size_t c = 0; c < calls; c++) {
      small[0] = (unsigned char)c;
      crypto_hash_sha256(d, small, sizeof small);
    }
    uint64_t t2 = bench_now_ns();
    sink = d[0];
    tb[r] = (double)(t1 - t0) / (double)calls;
    th[r] = (double)(t2 - t1) / (double)calls;
    ratio[r] = th[r] / tb[r];
  }
  bench_add(rep, "hash choice, one 160-byte input: BLAKE2b-256", bench_stats(tb, reps).med, "ns",
            bench_stats(th, reps).med, "SHA-256", bench_stats(ratio, reps),
            "time SHA-256 / BLAKE2b", BENCH_REPORT, 0);
  free(tb);
  free(th);
#endif
  free(ts);
  free(tf);
  free(ratio);
  free(buf);
}

__attribute__((noipa)) static ccache_strong_key graph_key_strong(const graph *g,
                                                                 const ccache_fp_ref *out,
                                                                 ccache_strong_key *scratch) {
  ccache_strong_key k;
  BENCH_OK(ccache_fp_graph_strong(g->nodes, g->n, out, 1, "cpu", scratch, &k));
  return k;
}

/* ns/node of the strong graph key against the fast one, same graph, same
 * repetition. */
void strong_graph_bench(bench_report *rep, const bench_opts *o, int layers) {
  graph *g = malloc(sizeof *g);
  ccache_strong_key *ss = malloc(MAXN * sizeof *ss);
  ccache_key *fs = malloc(MAXN * sizeof *fs);
  BENCH_CHECK(g && ss && fs, "out of memory");
  ccache_fp_ref out;
  build(g, layers, &out);
  ccache_strong_key k0;
  if (ccache_fp_graph_strong(g->nodes, g->n, &out, 1, "cpu", ss, &k0) != CCACHE_OK) {
    free(g), free(ss), free(fs);
    return; /* no libsodium: noted by strong_bytes_bench */
  }
  g->dims[g->n / 2][0]++;
  ccache_strong_key k1 = graph_key_strong(g, &out, ss);
  g->dims[g->n / 2][0]--;
  BENCH_CHECK(k0.key.lo != k1.key.lo, "a changed dim did not change the strong graph key");
  const int reps = o->quick ? 3 : 9;
  size_t calls = (size_t)((o->quick ? 500 : 10000) / (double)g->n) + 1;
  double *ts = malloc(sizeof(double) * (size_t)reps), *tf = malloc(sizeof(double) * (size_t)reps),
         *ratio = malloc(sizeof(double) * (size_t)reps);
  BENCH_CHECK(ts && tf && ratio, "out of memory");
  for (int r = -1; r < reps; r++) {
    uint64_t t0 = bench_now_ns();
    for (size_t c = 0; c < calls; c++) {
      ccache_strong_key k = graph_key_strong(g, &out, ss);
      BENCH_CHECK(k.key.lo == k0.key.lo && k.check.hi == k0.check.hi, "not deterministic");
    }
    uint64_t t1 = bench_now_ns();
    for (size_t c = 0; c < calls; c++) sink = graph_key(g, &out, fs).lo;
    uint64_t t2 = bench_now_ns();
    if (r < 0) continue;
    ts[r] = (double)(t1 - t0) / (double)(calls * g->n);
    tf[r] = (double)(t2 - t1) / (double)(calls * g->n);
    ratio[r] = ts[r] / tf[r];
  }
  char fig[96];
  if (layers == 0)
    snprintf(fig, sizeof fig, "ccache_fp_graph_strong, one decoder layer (%zu nodes)", g->n);
  else
    snprintf(fig, sizeof fig, "ccache_fp_graph_strong, %d-layer stack + head (%zu nodes)", layers,
             g->n);
  bench_add(rep, fig, bench_stats(ts, reps).med, "ns/node", bench_stats(tf, reps).med,
            "fast ccache_fp_graph", bench_stats(ratio, reps), "time strong / fast", BENCH_REPORT,
            0);
  free(ts);
  free(tf);
  free(ratio);
  free(ss);
  free(fs);
  free(g);
}
