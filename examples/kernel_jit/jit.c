/* jit.c: obtaining kernels through ccache. */
#include "jit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen.h"
#include "keys.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --verbose: when the current get last had an answer from the Redis tier
 * (a hit, a miss, a write, an entry found bad or refused: a failure to
 * reach it is not one), so a fleet measurement knows which process of a
 * machine went to Redis for a kernel (bench/fleet_measure.py), not only
 * when it was done with it. */
static void note_redis(void *ctx, const ccache_event *ev) {
  kj_jit *j = ctx;
  bool answered = ev->kind == CCACHE_EVENT_TIER_HIT || ev->kind == CCACHE_EVENT_TIER_MISS ||
                  ev->kind == CCACHE_EVENT_TIER_WRITE || ev->kind == CCACHE_EVENT_TIER_CORRUPT ||
                  ev->kind == CCACHE_EVENT_TIER_REJECTED;
  if (answered && ev->tier_name && strcmp(ev->tier_name, "redis") == 0)
    atomic_store(&j->redis_ns, now_ns());
}

static void destroy_native(void *native, void *ctx) {
  (void)ctx;
  kj_unload(native);
}

typedef struct compile_job {
  kj_jit *j;
  kj_spec spec;
} compile_job;

/* Generate, compile, and load through the same path as a tier hit. */
static int compile_kernel(void *ud, ccache *c, ccache_key pkey, void **native_out,
                          uint64_t *cost_out) {
  (void)c;
  compile_job *job = ud;
  kj_jit *j = job->j;
  double t0 = now_ms();
  char *src = kj_codegen(job->spec, pkey);
  void *bytes = NULL;
  size_t len = 0;
  int rc = -1;
  if (!src)
    snprintf(j->err, sizeof j->err, "out of memory generating %s", kj_op_name(job->spec.op));
  else if (kj_compile(&j->cc, src, &bytes, &len, j->err, sizeof j->err) == 0 &&
           (rc = j->codec.decode(j->codec.ctx, pkey, bytes, len, native_out, cost_out)) != 0)
    snprintf(j->err, sizeof j->err, "%s", j->codec_state.err);
  free(src);
  free(bytes);
  if (rc == 0 && j->n_compiles < KJ_MAX_KERNELS) {
    j->compile_key[j->n_compiles] = pkey;
    j->compile_nth[j->n_compiles] = j->n_gets - 1;
    j->compile_ms[j->n_compiles++] = now_ms() - t0;
  }
  return rc;
}

static void free_tiers(ccache_tier **t, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) ccache_tier_free(t[i]);
}

/* The library's status and its detail line, for a tier it refused. */
static int tier_error(int rc, const char *flag, const char *value, char *err, size_t errlen) {
  const char *detail = ccache_error_detail();
  snprintf(err, errlen, "%s %s: %s%s%s", flag, value, ccache_strerror(rc), *detail ? ": " : "",
           detail);
  return rc == CCACHE_EINVAL ? KJ_JIT_EUSAGE : KJ_JIT_EFAIL;
}

/* tiers[0] is asked first: the local directory, then the fleet's Redis. */
static int open_tiers(const kj_jit_options *o, ccache_tier **t, uint32_t *n, char *err,
                      size_t errlen) {
  *n = 0;
  if (o->cache_dir) {
    ccache_disk_options d;
    ccache_disk_options_init(&d);
    d.dir = o->cache_dir;
    if (o->cache_max_bytes) d.max_bytes = o->cache_max_bytes;
    int rc = ccache_tier_disk(&d, &t[*n]);
    if (rc != CCACHE_OK) return tier_error(rc, "--cache-dir", o->cache_dir, err, errlen);
    (*n)++;
  }
  if (o->redis) {
    ccache_redis_options r;
    ccache_redis_options_init(&r);
    r.servers = o->redis;
    int rc = ccache_tier_redis(&r, &t[*n]);
    if (rc != CCACHE_OK) {
      free_tiers(t, *n);
      return tier_error(rc, "--redis", o->redis, err, errlen);
    }
    (*n)++;
  }
  return 0;
}

/* The keys of --signing-key and --trusted-key, or *out NULL for none.
 * 0, or KJ_JIT_EFAIL / KJ_JIT_EUSAGE with one line in err. */
static int open_trust(const kj_jit_options *o, ccache_trust **out, char *err, size_t errlen) {
  *out = NULL;
  if (!o->signing_key && !o->n_trusted) return 0;
  if (ccache_trust_new(out) != CCACHE_OK) {
    snprintf(err, errlen, "out of memory");
    return KJ_JIT_EFAIL;
  }
  int rc = 0;
  if (o->signing_key) {
    int st = ccache_trust_set_signing_key_file(*out, o->signing_key);
    if (st != CCACHE_OK) rc = tier_error(st, "--signing-key", o->signing_key, err, errlen);
  }
  for (uint32_t i = 0; rc == 0 && i < o->n_trusted; i++) {
    int st = ccache_trust_add_key_file(*out, o->trusted_keys[i]);
    if (st != CCACHE_OK) rc = tier_error(st, "--trusted-key", o->trusted_keys[i], err, errlen);
  }
  if (rc == 0) return 0;
  ccache_trust_free(*out);
  *out = NULL;
  return rc;
}

/* The cache, its codec and its tiers; 0, KJ_JIT_EFAIL or KJ_JIT_EUSAGE. */
static int open_cache(kj_jit *j, const kj_jit_options *o, char *err, size_t errlen) {
  ccache_tier *tiers[2];
  uint32_t n_tiers = 0;
  ccache_trust *trust = NULL;
  int rc = open_trust(o, &trust, err, errlen);
  if (rc != 0) return rc;
  rc = open_tiers(o, tiers, &n_tiers, err, errlen);
  if (rc != 0) {
    ccache_trust_free(trust);
    return rc;
  }
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.destroy_program = destroy_native;
  cfg.codec = &j->codec;
  cfg.runtime_tag = j->runtime_tag;
  cfg.tiers = tiers;
  cfg.n_tiers = n_tiers;
  cfg.trust = trust;
  /* Safe by default: without keys, a Redis tier opens only when the user
   * said --trust-unsigned (the library refuses it otherwise). */
  if (o->trust_unsigned) cfg.trust_flags = CCACHE_TRUST_UNSIGNED;
  if (o->note_redis && o->redis) {
    cfg.on_event = note_redis;
    cfg.event_ctx = j;
  }
  rc = ccache_open(&cfg, &j->cache);
  ccache_trust_free(trust); /* the cache keeps its own copy */
  if (rc == CCACHE_OK) return 0;
  free_tiers(tiers, n_tiers); /* still ours when the open fails */
  if (rc == CCACHE_EINVAL && o->redis && !trust) {
    snprintf(err, errlen,
             "--redis without keys: give --trusted-key FILE (and --signing-key FILE to "
             "publish; closure-cache-keys generate makes them), or --trust-unsigned to load "
             "unsigned kernels that anyone who can write the Redis server can plant");
    return KJ_JIT_EUSAGE;
  }
  return tier_error(rc, "ccache_open", "", err, errlen);
}

int kj_jit_open(kj_jit *j, const kj_jit_options *o, char *err, size_t errlen) {
  memset(j, 0, sizeof *j);
  if (kj_compiler_open(&j->cc, err, errlen) != 0) return KJ_JIT_EFAIL;
  char cc_tag[512];
  kj_compiler_tag(&j->cc, cc_tag, sizeof cc_tag);
  snprintf(j->runtime_tag, sizeof j->runtime_tag, "%s%s%s", cc_tag,
           o->runtime_tag_extra ? "; " : "", o->runtime_tag_extra ? o->runtime_tag_extra : "");
  j->codec = kj_codec(&j->codec_state);
  j->compile_ms = calloc(KJ_MAX_KERNELS, sizeof *j->compile_ms);
  j->compile_key = calloc(KJ_MAX_KERNELS, sizeof *j->compile_key);
  j->compile_nth = calloc(KJ_MAX_KERNELS, sizeof *j->compile_nth);
  j->tier_us = calloc(KJ_MAX_KERNELS, sizeof *j->tier_us);
  int rc = KJ_JIT_EFAIL;
  if (!j->compile_ms || !j->compile_key || !j->compile_nth || !j->tier_us)
    snprintf(err, errlen, "out of memory");
  else
    rc = open_cache(j, o, err, errlen);
  if (rc != 0) kj_jit_close(j);
  return rc;
}

void kj_jit_close(kj_jit *j) {
  if (j->cache) ccache_close(j->cache);
  j->cache = NULL;
  kj_compiler_close(&j->cc);
  free(j->compile_ms);
  free(j->compile_key);
  free(j->compile_nth);
  free(j->tier_us);
  j->compile_ms = j->tier_us = NULL;
  j->compile_key = NULL;
  j->compile_nth = NULL;
}

static uint64_t tier_hits(ccache *c) {
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(c, &st);
  return st.tier_hits;
}

int kj_jit_get(kj_jit *j, kj_spec s, ccache_program **out) {
  uint64_t hits_before = tier_hits(j->cache);
  j->n_gets++;
  atomic_store(&j->redis_ns, 0);
  double t0 = now_ms();
  ccache_key pkey;
  int rc = kj_program_key(s, &j->cc, &pkey);
  if (rc == CCACHE_OK) {
    compile_job job = {j, s};
    rc = ccache_program_get_or_compile(j->cache, pkey, compile_kernel, &job, out);
  }
  double ms = now_ms() - t0;
  j->acquire_ms += ms;
  /* A get whose program a tier supplied: its whole time is fetch + verify +
   * load (+ filling the tiers above), what the tier saves a compile for. */
  if (tier_hits(j->cache) > hits_before && j->n_tier_loads < KJ_MAX_KERNELS)
    j->tier_us[j->n_tier_loads++] = ms * 1e3;
  return rc;
}
