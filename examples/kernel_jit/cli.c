/* cli.c: option parsing; every error is one line on stderr. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"

void kj_usage(FILE *f) {
  fprintf(f,
          "usage: kernel_jit [options]\n"
          "A small JIT for SmolLM2-135M's element-wise kernels (RMSNorm, SiLU-gated multiply,\n"
          "RoPE, residual add, causal softmax), specialised to decode and prefill shapes:\n"
          "it generates C, compiles it with the system `cc` into a shared object, loads it\n"
          "from a memfd, checks every kernel against a plain C reference, and obtains each\n"
          "kernel through ccache.\n\n"
          "  --kernels N        distinct kernels the run needs, 1..%u (default %u)\n"
          "  --seed N           seed of the kernels' inputs (default 1)\n"
          "  --cache-dir DIR    keep compiled kernels in DIR (ccache's disk tier; created\n"
          "                     0700; shared by the processes of this machine)\n"
          "  --cache-max-bytes N  cap DIR at N bytes (oldest entries go first)\n"
          "  --redis HOST:PORT[,HOST:PORT...]  share compiled kernels through Redis\n"
          "                     (ccache's Redis tier; below --cache-dir when both are given)\n"
          "  --redis-sentinel HOST:PORT[,HOST:PORT...]/NAME[,NAME...]  the Redis tier on\n"
          "                     the primaries the Sentinels name (not with --redis)\n"
          "  --signing-key FILE  sign the kernels it publishes with this secret key\n"
          "                     (closure-cache-keys generate); it also trusts its own key\n"
          "  --trusted-key FILE  load only kernels a trusted key signed (repeatable, up to\n"
          "                     16); without --signing-key the run publishes nothing\n"
          "  --trust-unsigned   with --redis and no keys: load unsigned kernels (anyone\n"
          "                     who can write the server can plant one); without it such\n"
          "                     a run is refused\n"
          "  --runtime-tag S    appended to the runtime tag (compiler, flags, target);\n"
          "                     a different tag never loads another tag's kernels\n"
          "  --json             one JSON object on stdout\n"
          "  --verbose          one line per kernel on stderr\n"
          "  --hold-after K     after K kernels, say so on stderr and wait for EOF on stdin\n"
          "                     (for tests that change the tiers in the middle of a run)\n"
          "  --help             this text\n"
          "Exit status: 0 every kernel matched its reference; 1 a failure; 2 a bad option.\n",
          KJ_MAX_KERNELS, KJ_DEFAULT_KERNELS);
}

/* A decimal integer in [lo, hi], nothing else (no sign, no spaces). */
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

/* A comma-separated list of servers, none empty. */
static int servers_ok(const char *list) {
  for (;;) {
    size_t len = strcspn(list, ",");
    if (server_ok(list, len) != 0) return -1;
    if (!list[len]) return 0;
    list += len + 1;
  }
}

/* HOST:PORT[,HOST:PORT...]/NAME[,NAME...], names non-empty, at most 1000
 * bytes in all (the tier checks the rest). */
static int sentinel_ok(const char *spec) {
  const char *slash = strchr(spec, '/');
  if (!slash || strlen(spec) > 1000 || !slash[1] || strchr(slash + 1, '/')) return -1;
  char list[1024];
  snprintf(list, sizeof list, "%.*s", (int)(slash - spec), spec);
  if (servers_ok(list) != 0) return -1;
  for (const char *n = slash + 1;;) {
    size_t len = strcspn(n, ",");
    if (len == 0) return -1;
    if (!n[len]) return 0;
    n += len + 1;
  }
}

static int bad(const char *what, const char *a) {
  fprintf(stderr, "kernel_jit: %s %s (see --help)\n", what, a);
  return -1;
}

/* --name VALUE options: returns 1 if a matched (and consumed its value),
 * 0 if not, -1 on a bad value. */
static int valued(kj_options *o, const char *a, const char *val) {
  uint64_t v;
  if (strcmp(a, "--kernels") == 0) {
    if (parse_u64(val, 1, KJ_MAX_KERNELS, &v) != 0) return -1;
    o->kernels = (uint32_t)v;
  } else if (strcmp(a, "--seed") == 0) {
    if (parse_u64(val, 0, UINT64_MAX, &v) != 0) return -1;
    o->seed = v;
  } else if (strcmp(a, "--hold-after") == 0) {
    if (parse_u64(val, 1, KJ_MAX_KERNELS, &v) != 0) return -1;
    o->hold_after = (uint32_t)v;
  } else if (strcmp(a, "--cache-max-bytes") == 0) {
    if (parse_u64(val, 1, UINT64_MAX - 1, &v) != 0) return -1;
    o->cache_max_bytes = v;
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
  } else if (strcmp(a, "--cache-dir") == 0) {
    if (!val || !*val) return -1;
    o->cache_dir = val;
  } else if (strcmp(a, "--redis") == 0) {
    if (!val || servers_ok(val) != 0) return -1;
    if (o->redis) return -2; /* --redis-sentinel too */
    o->redis = val;
  } else if (strcmp(a, "--redis-sentinel") == 0) {
    if (!val || sentinel_ok(val) != 0) return -1;
    if (o->redis) return -2;
    /* The tier's own form: "sentinel:" + SPEC (kept for the whole run). */
    static char spec[1024];
    snprintf(spec, sizeof spec, "sentinel:%s", val);
    o->redis = spec;
  } else {
    return 0;
  }
  return 1;
}

int kj_parse_args(int argc, char **argv, kj_options *o) {
  *o = (kj_options){.kernels = KJ_DEFAULT_KERNELS, .seed = 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int m = valued(o, a, i + 1 < argc ? argv[i + 1] : NULL);
    if (m == -2) return bad("--redis and --redis-sentinel exclude each other:", a);
    if (m < 0) return bad("bad or missing value for", a);
    if (m > 0) {
      i++;
      continue;
    }
    if (strcmp(a, "--json") == 0) {
      o->json = 1;
    } else if (strcmp(a, "--verbose") == 0) {
      o->verbose = 1;
    } else if (strcmp(a, "--trust-unsigned") == 0) {
      o->trust_unsigned = 1;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      kj_usage(stdout);
      return 1;
    } else {
      return bad("unknown option", a);
    }
  }
  if (o->hold_after > o->kernels) return bad("--hold-after is past the last kernel:", "--kernels");
  if (o->cache_max_bytes && !o->cache_dir) return bad("--cache-max-bytes needs", "--cache-dir");
  return 0;
}
