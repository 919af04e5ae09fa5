/*
 * bench_trust.c - what signed tier entries cost (issue 21): signing an
 * entry (BLAKE2b-256 of the payload, one Ed25519 signature) and checking
 * one (the same digest, one verification), per entry of 1 KiB, 64 KiB and
 * 1 MiB, against fetching that entry from the directory tier (a get from
 * the page cache, the fastest tier fetch there is), measured in the same
 * repetition.  No target: the figures say what a store and a checked load
 * add to a tier round trip.  A signature that does not verify is a real
 * error (exit 2).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "tier/tier.h"
#include "tier/tier_trust.h"

#define MAX_REPS 9

static const ccache_strong_key KEY = {{0x0123456789abcdefull, 0x1122334455667788ull}, {0, 0}};
static const uint64_t TAG = 0x7a67a67a67a67a6ull;

typedef struct sample {
  double fetch_us, sign_us, verify_us;
} sample;

/* One repetition at one size: per-op medians of its rounds. */
static sample one_rep(ccache_tier *t, const ccache_trust *trust, const unsigned char *payload,
                      size_t plen, int iters) {
  size_t len = ccache__tier_entry_len_signed(plen, false, true);
  unsigned char *blob = malloc(len);
  BENCH_CHECK(blob != NULL, "malloc");
  unsigned char ns[1][CCACHE__NS_DIGEST];
  uint32_t which = 0;
  ccache__trust_ns_digest(false, "bench", "redis:ccache", 12, ns[0]);
  ccache__tier_frame_signed(blob, &KEY, false, TAG, 1, payload, plen, trust, ns[0]);
  BENCH_OK(t->ops.put(t->state, KEY.key, blob, len));
  const char *why = NULL;
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < iters; i++) {
    void *b = NULL;
    size_t n = 0;
    BENCH_OK(t->ops.get(t->state, KEY.key, &b, &n));
    BENCH_CHECK(n == len, "fetched %zu bytes", n);
    t->ops.free_blob(t->state, b, n);
  }
  uint64_t t1 = bench_now_ns();
  unsigned char block[CCACHE__TIER_SIG];
  for (int i = 0; i < iters; i++)
    ccache__trust_sign_entry(trust, ns[0], blob, CCACHE__TIER_HDR, blob + CCACHE__TIER_HDR, plen,
                             block);
  uint64_t t2 = bench_now_ns();
  for (int i = 0; i < iters; i++)
    BENCH_CHECK(ccache__trust_entry_ok(trust, blob, len, false, ns, 1, &which, &why), "verify: %s",
                why);
  uint64_t t3 = bench_now_ns();
  free(blob);
  sample s = {(double)(t1 - t0) / 1e3 / iters, (double)(t2 - t1) / 1e3 / iters,
              (double)(t3 - t2) / 1e3 / iters};
  return s;
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(argc, argv, &o, "signed entries: sign and verify cost vs a tier fetch", false);
  bench_report rep;
  bench_report_init(&rep, "bench_trust",
                    "what do signed tier entries cost per entry, against fetching it?");
  if (!ccache_trust_available()) {
    bench_note(&rep, "not measured: this build has no libsodium");
    return bench_report_print(&rep, &o);
  }
  char dir[] = "/tmp/ccache-bench-trust-XXXXXX";
  BENCH_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char sec[256], pub[256], cache[256];
  snprintf(sec, sizeof sec, "%s/k.sec", dir);
  snprintf(pub, sizeof pub, "%s/k.pub", dir);
  snprintf(cache, sizeof cache, "%s/cache", dir);
  BENCH_OK(ccache_trust_generate("bench", sec, pub));
  ccache_trust *trust = NULL;
  BENCH_OK(ccache_trust_new(&trust));
  BENCH_OK(ccache_trust_set_signing_key_file(trust, sec));
  ccache_disk_options d;
  ccache_disk_options_init(&d);
  d.dir = cache;
  ccache_tier *t = NULL;
  BENCH_OK(ccache_tier_disk(&d, &t));
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(TAG, ns);
  BENCH_OK(t->ops.attach(t->state, ns));

  static const size_t sizes[] = {1024, 64 * 1024, 1024 * 1024};
  static const int iters_full[] = {4000, 400, 40};
  int reps = o.quick ? 1 : 7;
  for (size_t z = 0; z < 3; z++) {
    size_t plen = sizes[z];
    unsigned char *payload = malloc(plen);
    BENCH_CHECK(payload != NULL, "malloc");
    for (size_t i = 0; i < plen; i++) payload[i] = (unsigned char)bench_mix64(i);
    int iters = o.quick ? iters_full[z] / 20 + 1 : iters_full[z];
    double fetch[MAX_REPS], sign[MAX_REPS], verify[MAX_REPS], rs[MAX_REPS], rv[MAX_REPS];
    for (int r = 0; r < reps; r++) {
      sample s = one_rep(t, trust, payload, plen, iters);
      fetch[r] = s.fetch_us;
      sign[r] = s.sign_us;
      verify[r] = s.verify_us;
      rs[r] = s.sign_us / s.fetch_us;
      rv[r] = s.verify_us / s.fetch_us;
    }
    free(payload);
    char fig[96], base[64];
    const char *sz = z == 0 ? "1 KiB" : z == 1 ? "64 KiB" : "1 MiB";
    snprintf(base, sizeof base, "disk tier get of the entry (%s)", sz);
    snprintf(fig, sizeof fig, "sign a %s entry (BLAKE2b-256 + Ed25519)", sz);
    bench_row *row =
        bench_add(&rep, fig, bench_stats(sign, reps).med, "us", bench_stats(fetch, reps).med, base,
                  bench_stats(rs, reps), "sign / fetch", BENCH_REPORT, 0);
    snprintf(row->note, sizeof row->note, "once per store; %d ops per rep", iters);
    snprintf(fig, sizeof fig, "verify a %s entry (BLAKE2b-256 + Ed25519)", sz);
    row = bench_add(&rep, fig, bench_stats(verify, reps).med, "us", bench_stats(fetch, reps).med,
                    base, bench_stats(rv, reps), "verify / fetch", BENCH_REPORT, 0);
    snprintf(row->note, sizeof row->note, "once per tier load with keys; %d ops per rep", iters);
  }
  bench_note(&rep,
             "%d rep(s); each times the fetch, the signing and the check of the same entry back "
             "to back (the fetch from the page cache: a warm directory tier)",
             reps);
  ccache_tier_free(t);
  ccache_trust_free(trust);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_trust: could not remove %s\n", dir);
  return bench_report_print(&rep, &o);
}
