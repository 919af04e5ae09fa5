/* cli.c: option parsing; every error is one line on stderr. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"

void hj_usage(FILE *f) {
  fprintf(f,
          "usage: halide_jit [options]\n"
          "SmolLM2-135M's RMSNorm, RoPE (q and k), causal softmax and SiLU gate written in\n"
          "Halide. A runtime's builder makes each pipeline afresh at every call site (5 per\n"
          "layer); ccache keys it by what it is, so the call sites share one compile per\n"
          "pipeline, and the tiers share compiled pipelines across restarts and machines.\n"
          "Every call is checked against a plain C reference.\n\n"
          "  --layers N         layers walked, 1..%d (default %d)\n"
          "  --tokens T         prefill length: each site runs T tokens, then one decode\n"
          "                     step at context T + 1; 1..1024 (default 32)\n"
          "  --threads N        serving threads walking the layers at once, 1..64 (default 1)\n"
          "  --repeat N         walks per thread, 1..1000 (default 1)\n"
          "  --seed N           seed of the inputs (default 1)\n"
          "  --max-items N      keep at most N call-site closures (ccache's max_items);\n"
          "                     pipelines no closure uses are unloaded\n"
          "  --cache-dir DIR    keep compiled pipelines in DIR (ccache's disk tier)\n"
          "  --redis HOST:PORT[,HOST:PORT...]  share compiled pipelines through Redis\n"
          "                     (below --cache-dir when both are given)\n"
          "  --signing-key FILE  sign the pipelines it publishes with this secret key\n"
          "                     (closure-cache-keys generate); it also trusts its own key\n"
          "  --trusted-key FILE  load only pipelines a trusted key signed (repeatable, up\n"
          "                     to 16); without --signing-key the run publishes nothing\n"
          "  --trust-unsigned   with --redis and no keys: load unsigned pipelines (anyone\n"
          "                     who can write the server can plant one); without it such\n"
          "                     a run is refused\n"
          "  --runtime-tag S    appended to the runtime tag (Halide, target, cc)\n"
          "  --json             one JSON object on stdout\n"
          "  --help             this text\n"
          "Exit status: 0 every call matched its reference; 1 a failure; 2 a bad option.\n",
          HJ_LAYERS, HJ_LAYERS);
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  if (!s || *s < '0' || *s > '9') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

/* "host:port" with a port in 1..65535, or "unix:/path". */
static int server_ok(const char *s, size_t len) {
  if (len > 6 && strncmp(s, "unix:/", 6) == 0) return 0;
  const char *colon = NULL;
  for (const char *p = s; p < s + len; p++)
    if (*p == ':') colon = p;
  if (!colon || colon == s || colon + 1 == s + len || s + len - colon > 6) return -1;
  unsigned port = 0;
  for (const char *p = colon + 1; p < s + len; p++) {
    if (*p < '0' || *p > '9') return -1;
    port = port * 10 + (unsigned)(*p - '0');
  }
  return port >= 1 && port <= 65535 ? 0 : -1;
}

static int servers_ok(const char *list) {
  for (;;) {
    size_t len = strcspn(list, ",");
    if (server_ok(list, len) != 0) return -1;
    if (!list[len]) return 0;
    list += len + 1;
  }
}

/* --name VALUE: 1 matched, 0 not this kind of option, -1 bad value. */
static int valued(hj_options *o, const char *a, const char *val) {
  static const struct {
    const char *name;
    uint64_t lo, hi;
  } nums[] = {{"--layers", 1, HJ_LAYERS}, {"--tokens", 1, 1024},
              {"--threads", 1, 64},       {"--repeat", 1, 1000},
              {"--seed", 0, UINT64_MAX},  {"--max-items", 1, UINT64_MAX - 1}};
  uint64_t *dst[] = {NULL, NULL, NULL, NULL, &o->seed, &o->max_items};
  uint32_t *dst32[] = {&o->layers, &o->tokens, &o->threads, &o->repeat, NULL, NULL};
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
    if (strcmp(a, nums[i].name) != 0) continue;
    uint64_t v;
    if (parse_u64(val, nums[i].lo, nums[i].hi, &v) != 0) return -1;
    if (dst[i])
      *dst[i] = v;
    else
      *dst32[i] = (uint32_t)v;
    return 1;
  }
  if (strcmp(a, "--cache-dir") == 0) {
    if (!val || !*val) return -1;
    o->cache_dir = val;
  } else if (strcmp(a, "--redis") == 0) {
    if (!val || servers_ok(val) != 0) return -1;
    o->redis = val;
  } else if (strcmp(a, "--runtime-tag") == 0) {
    if (!val) return -1;
    o->runtime_tag = val;
  } else if (strcmp(a, "--signing-key") == 0) {
    if (!val || !*val || o->signing_key) return -1;
    o->signing_key = val;
  } else if (strcmp(a, "--trusted-key") == 0) {
    if (!val || !*val || o->n_trusted >= sizeof o->trusted_keys / sizeof o->trusted_keys[0])
      return -1;
    o->trusted_keys[o->n_trusted++] = val;
  } else {
    return 0;
  }
  return 1;
}

static int bad(const char *what, const char *a) {
  fprintf(stderr, "halide_jit: %s %s (see --help)\n", what, a);
  return -1;
}

int hj_parse_args(int argc, char **argv, hj_options *o) {
  *o = (hj_options){.layers = HJ_LAYERS, .tokens = 32, .threads = 1, .repeat = 1, .seed = 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int m = valued(o, a, i + 1 < argc ? argv[i + 1] : NULL);
    if (m < 0) return bad("bad or missing value for", a);
    if (m > 0) {
      i++;
    } else if (strcmp(a, "--json") == 0) {
      o->json = 1;
    } else if (strcmp(a, "--trust-unsigned") == 0) {
      o->trust_unsigned = 1;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      hj_usage(stdout);
      return 1;
    } else {
      return bad("unknown option", a);
    }
  }
  return 0;
}
