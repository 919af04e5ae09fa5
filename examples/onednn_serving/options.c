/* options.c: the command line: --help's text and the option parser.  The
 * upper end of --layers is the config's layer count, checked by main.c's
 * setup() once the config is read. */
#include "options.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <ccache.h>

#ifndef ONEDNN_SERVING_CONFIG
#define ONEDNN_SERVING_CONFIG "smollm2-135m-config.json"
#endif

void usage(FILE *f) {
  fprintf(f,
          "usage: onednn_serving [options]\n"
          "Serve a deterministic request stream through SmolLM2-135M's decoder (random\n"
          "weights) with oneDNN primitives, four times: no primitive cache, oneDNN's\n"
          "primitive cache, ccache, and an RLX-style table per serving thread.  Prints a\n"
          "comparison table.  Exits 1 if the modes' final logits disagree, 2 on a bad\n"
          "option or config.\n\n"
          "  --requests N     requests in the stream, 1..100000 (default 8)\n"
          "  --decode N       decode steps per request, 0..1024 (default 16)\n"
          "  --seed N         seed for weights and requests (default 1)\n"
          "  --threads N      serving threads sharing one cache, 1..64 (default 2); the cores\n"
          "                   are divided among them for oneDNN's OpenMP threads\n"
          "  --layers N       decoder layers, " LAYERS_RANGE
          "\n"
          "                   (default L)\n"
          "  --max-items N    ccache bound on closure entries (default unbounded)\n"
          "  --ttl-ms N       ccache time to live in ms (default unbounded)\n"
          "  --max-cost N     ccache bound on program cost in bytes (default unbounded)\n"
          "  --runtime-dims   attention matmuls take the context length at run time\n"
          "  --strong-keys    ccache keys are BLAKE2b-256 (ccache_fp_init_strong, a\n"
          "                   CCACHE_KEYS_STRONG cache) instead of XXH3-128: for graphs\n"
          "                   from parties you do not trust\n"
          "  --config PATH    model config.json (default the source tree's copy)\n"
          "  --json           machine-readable output\n"
          "  --check          also verify the cache accounting; exit 1 if a check fails\n"
          "  --help           this text\n");
}

/* A decimal integer in [lo, hi], nothing else. */
static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  if (!s || *s < '0' || *s > '9') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int parse_args(int argc, char **argv, options *o) {
  *o = (options){.requests = 8,
                 .decode = 16,
                 .threads = 2,
                 .layers = 0,
                 .seed = 1,
                 .max_items = CCACHE_UNBOUNDED,
                 .ttl_ms = CCACHE_UNBOUNDED,
                 .max_cost = CCACHE_UNBOUNDED,
                 .config = ONEDNN_SERVING_CONFIG};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t v;
    struct {
      const char *name;
      uint64_t lo, hi;
      int *i32;
      uint64_t *u64;
      const char *range; /* stated instead of [lo, hi] */
    } nums[] = {
        {"--requests", 1, 100000, &o->requests, NULL, NULL},
        {"--decode", 0, 1024, &o->decode, NULL, NULL},
        {"--threads", 1, 64, &o->threads, NULL, NULL},
        /* The upper end is the config's layer count, checked once it is read. */
        {"--layers", 1, INT_MAX, &o->layers, NULL, LAYERS_RANGE},
        {"--seed", 0, UINT64_MAX, NULL, &o->seed, NULL},
        {"--max-items", 1, UINT64_MAX - 1, NULL, &o->max_items, NULL},
        {"--ttl-ms", 1, UINT64_MAX - 1, NULL, &o->ttl_ms, NULL},
        {"--max-cost", 1, UINT64_MAX - 1, NULL, &o->max_cost, NULL},
    };
    int matched = 0;
    for (size_t k = 0; k < sizeof nums / sizeof nums[0] && !matched; k++) {
      if (strcmp(a, nums[k].name) != 0) continue;
      matched = 1;
      if (parse_u64(val, nums[k].lo, nums[k].hi, &v) != 0) {
        if (nums[k].range)
          fprintf(stderr, "onednn_serving: %s needs an integer in %s\n", a, nums[k].range);
        else
          fprintf(stderr, "onednn_serving: %s needs an integer in [%" PRIu64 ", %" PRIu64 "]\n", a,
                  nums[k].lo, nums[k].hi);
        return -1;
      }
      if (nums[k].i32) *nums[k].i32 = (int)v;
      if (nums[k].u64) *nums[k].u64 = v;
      i++;
    }
    if (matched) continue;
    if (strcmp(a, "--json") == 0) {
      o->json = 1;
    } else if (strcmp(a, "--check") == 0) {
      o->check = 1;
    } else if (strcmp(a, "--strong-keys") == 0) {
      o->strong_keys = 1;
    } else if (strcmp(a, "--runtime-dims") == 0) {
      o->runtime_dims = 1;
    } else if (strcmp(a, "--config") == 0 && val) {
      o->config = val;
      i++;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    } else {
      fprintf(stderr, "onednn_serving: unknown or incomplete option '%s'\n", a);
      return -1;
    }
  }
  return 0;
}
