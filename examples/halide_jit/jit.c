/* jit.c: obtaining pipelines through ccache. */
#include "jit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ex_spawn.h"
#include "halide_build.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void destroy_native(void *native, void *ctx) {
  hj_jit *j = ctx;
  hj_unload(native);
  j->codec_state.unloads++;
}

static void destroy_closure(void *closure, void *ctx) {
  (void)ctx;
  free(closure);
}

uint64_t hj_jit_unloads(hj_jit *j) { return j->codec_state.unloads; }

static void sample(hj_jit *j, hj_kind k, double compile_ms, double halide_ms, double tier_us) {
  pthread_mutex_lock(&j->mu);
  hj_kind_stats *s = &j->kinds[k];
  if (compile_ms >= 0 && s->compiles < HJ_MAX_SAMPLES) {
    s->compile_ms[s->compiles] = compile_ms;
    s->halide_ms[s->compiles++] = halide_ms;
  }
  if (tier_us >= 0 && s->tier_loads < HJ_MAX_SAMPLES) s->tier_us[s->tier_loads++] = tier_us;
  pthread_mutex_unlock(&j->mu);
}

/* cc -shared -o so o -lm; 0 or -1 with the linker's first line in err. */
static int link_so(hj_jit *j, const char *obj, const char *so, const char *log, char *err,
                   size_t errlen) {
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(err, errlen, "cannot create %s: %s", log, strerror(errno));
    return -1;
  }
  char *argv[] = {"cc", HJ_LINK_FLAGS, "-o", (char *)so, (char *)obj, HJ_LINK_LIBS, NULL};
  int status = ex_spawn_wait(argv, fd);
  close(fd);
  (void)j;
  if (status == 0) return 0;
  void *diag = NULL;
  size_t dlen = 0;
  if (status > 0 && ex_read_file(log, &diag, &dlen) == 0)
    snprintf(err, errlen, "cc exited with %d: %.*s", status, (int)strcspn(diag, "\n"),
             (char *)diag);
  else
    snprintf(err, errlen, "cannot run cc: %s", status < 0 ? strerror(errno) : "no output");
  free(diag);
  return -1;
}

typedef struct program_job {
  hj_jit *j;
  const hj_spec *spec;
  char *err;
  size_t errlen;
  int compiled; /* the compile callback ran */
} program_job;

/* Halide compile_to_object, cc, and the codec's decode (the very path a
 * tier hit takes). */
static int compile_pipeline(void *ud, ccache *c, ccache_key pkey, void **native_out,
                            uint64_t *cost_out) {
  (void)c;
  program_job *job = ud;
  hj_jit *j = job->j;
  job->compiled = 1;
  unsigned id = j->serial++;
  char obj[300], so[300], log[300], entry[48];
  snprintf(obj, sizeof obj, "%s/p%u.o", j->tmpdir, id);
  snprintf(so, sizeof so, "%s/p%u.so", j->tmpdir, id);
  snprintf(log, sizeof log, "%s/p%u.log", j->tmpdir, id);
  hj_entry_name(pkey, entry, sizeof entry);
  int rc = -1;
  void *bytes = NULL;
  size_t len = 0;
  double halide_ms = 0, t0 = 0;
  if (hj_halide_compile(job->spec, j->id.target, entry, obj, &halide_ms, job->err, job->errlen) ==
      0) {
    t0 = now_ms(); /* from here: cc and the load */
    if (link_so(j, obj, so, log, job->err, job->errlen) == 0) {
      if (ex_read_file(so, &bytes, &len) != 0)
        snprintf(job->err, job->errlen, "cannot read %s: %s", so, strerror(errno));
      else if ((rc = j->codec.decode(j->codec.ctx, pkey, bytes, len, native_out, cost_out)) != 0)
        snprintf(job->err, job->errlen, "%s", hj_codec_error());
    }
  }
  free(bytes);
  unlink(obj);
  unlink(so);
  unlink(log);
  /* The compile's time: Halide's (without waiting for its mutex), cc's, the load's. */
  if (rc == 0) sample(j, job->spec->kind, halide_ms + now_ms() - t0, halide_ms, -1);
  return rc;
}

int hj_jit_program(hj_jit *j, const hj_spec *s, ccache_program **out, char *err, size_t errlen) {
  ccache_key pkey;
  if (hj_spec_valid(s) != 0) {
    snprintf(err, errlen, "not a pipeline the builder makes");
    return CCACHE_EINVAL;
  }
  int rc = hj_program_key(s, &j->id, &pkey);
  if (rc != CCACHE_OK) return rc;
  uint64_t loads = j->codec_state.loads;
  double t0 = now_ms();
  program_job job = {j, s, err, errlen, 0};
  rc = ccache_program_get_or_compile(j->cache, pkey, compile_pipeline, &job, out);
  /* Loaded, not compiled, by this call: a tier served it.  (With several
   * threads another thread's load may fall in between: then a compile or a
   * wait is timed as a tier load; the counts come from ccache_stats.) */
  if (rc == CCACHE_OK && !job.compiled && j->codec_state.loads > loads)
    sample(j, s->kind, -1, -1, (now_ms() - t0) * 1e3);
  return rc;
}

typedef struct site_job {
  hj_jit *j;
  const hj_spec *spec;
  uint32_t layer, slot;
  char *err;
  size_t errlen;
} site_job;

/* A call site's first use: its closure, running the shared program. */
static int compile_site(void *ud, ccache *c, ccache_key key, void **closure_out,
                        ccache_program **program_out) {
  (void)c, (void)key;
  site_job *job = ud;
  hj_closure *cl = malloc(sizeof *cl);
  if (!cl) return -1;
  *cl = (hj_closure){*job->spec, job->layer, job->slot};
  if (hj_jit_program(job->j, job->spec, program_out, job->err, job->errlen) != CCACHE_OK) {
    free(cl);
    return -1;
  }
  *closure_out = cl;
  return 0;
}

int hj_jit_site(hj_jit *j, uint32_t layer, uint32_t slot, const hj_spec *s, ccache_lease *out,
                char *err, size_t errlen) {
  ccache_key pkey, key;
  if (hj_spec_valid(s) != 0) {
    snprintf(err, errlen, "not a pipeline the builder makes");
    return CCACHE_EINVAL;
  }
  int rc = hj_program_key(s, &j->id, &pkey);
  if (rc == CCACHE_OK) rc = hj_site_key(layer, slot, pkey, &key);
  if (rc != CCACHE_OK) return rc;
  site_job job = {j, s, layer, slot, err, errlen};
  return ccache_get_or_compile(j->cache, key, compile_site, &job, out);
}

static void free_tiers(ccache_tier **t, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) ccache_tier_free(t[i]);
}

static int tier_error(int rc, const char *flag, const char *value, char *err, size_t errlen) {
  const char *detail = ccache_error_detail();
  snprintf(err, errlen, "%s %s: %s%s%s", flag, value, ccache_strerror(rc), *detail ? ": " : "",
           detail);
  return rc == CCACHE_EINVAL ? HJ_JIT_EUSAGE : HJ_JIT_EFAIL;
}

/* tiers[0] is asked first: the local directory, then the fleet's Redis. */
static int open_tiers(const hj_jit_options *o, ccache_tier **t, uint32_t *n, char *err,
                      size_t errlen) {
  *n = 0;
  if (o->cache_dir) {
    ccache_disk_options d;
    ccache_disk_options_init(&d);
    d.dir = o->cache_dir;
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
 * 0, or HJ_JIT_EFAIL / HJ_JIT_EUSAGE with one line in err. */
static int open_trust(const hj_jit_options *o, ccache_trust **out, char *err, size_t errlen) {
  *out = NULL;
  if (!o->signing_key && !o->n_trusted) return 0;
  if (ccache_trust_new(out) != CCACHE_OK) {
    snprintf(err, errlen, "out of memory");
    return HJ_JIT_EFAIL;
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

static int open_cache(hj_jit *j, const hj_jit_options *o, char *err, size_t errlen) {
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
  cfg.destroy_closure = destroy_closure;
  cfg.ctx = j;
  cfg.codec = &j->codec;
  cfg.runtime_tag = j->runtime_tag;
  cfg.tiers = tiers;
  cfg.n_tiers = n_tiers;
  if (o->max_items) cfg.max_items = o->max_items;
  cfg.trust = trust;
  /* Safe by default: without keys, a Redis tier opens only when the user
   * said --trust-unsigned (the library refuses it otherwise). */
  if (o->trust_unsigned) cfg.trust_flags = CCACHE_TRUST_UNSIGNED;
  rc = ccache_open(&cfg, &j->cache);
  ccache_trust_free(trust); /* the cache keeps its own copy */
  if (rc == CCACHE_OK) return 0;
  free_tiers(tiers, n_tiers);
  if (rc == CCACHE_EINVAL && o->redis && !trust) {
    snprintf(err, errlen,
             "--redis without keys: give --trusted-key FILE (and --signing-key FILE to "
             "publish; closure-cache-keys generate makes them), or --trust-unsigned to load "
             "unsigned pipelines that anyone who can write the Redis server can plant");
    return HJ_JIT_EUSAGE;
  }
  snprintf(err, errlen, "ccache_open: %s", ccache_strerror(rc));
  return rc == CCACHE_EINVAL ? HJ_JIT_EUSAGE : HJ_JIT_EFAIL;
}

/* The first line of `cc --version`. */
static int cc_version(const char *tmpdir, char *out, size_t n) {
  char path[300];
  snprintf(path, sizeof path, "%s/cc-version.txt", tmpdir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  char *argv[] = {"cc", "--version", NULL};
  int status = ex_spawn_wait(argv, fd);
  close(fd);
  void *text = NULL;
  size_t len = 0;
  int rc = status == 0 ? ex_read_file(path, &text, &len) : -1;
  unlink(path);
  if (rc != 0) return -1;
  snprintf(out, n, "%.*s", (int)strcspn(text, "\n"), (char *)text);
  free(text);
  return out[0] ? 0 : -1;
}

static int ident(hj_jit *j, char *err, size_t errlen) {
  if (hj_halide_pipeline_target(j->id.target, sizeof j->id.target) != 0) {
    snprintf(err, errlen, "Halide's host target does not fit");
    return -1;
  }
  snprintf(j->id.halide, sizeof j->id.halide, "Halide %s, LLVM %d", HJ_HALIDE_VERSION,
           hj_halide_llvm_version());
  if (cc_version(j->tmpdir, j->id.cc, sizeof j->id.cc) != 0) {
    snprintf(err, errlen, "cannot run the system C compiler `cc` (is build-essential installed?)");
    return -1;
  }
  return 0;
}

int hj_jit_open(hj_jit *j, const hj_jit_options *o, char *err, size_t errlen) {
  memset(j, 0, sizeof *j);
  pthread_mutex_init(&j->mu, NULL);
  const char *tmp = getenv("TMPDIR");
  snprintf(j->tmpdir, sizeof j->tmpdir, "%s/halide_jit.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(j->tmpdir)) { /* 0700 */
    snprintf(err, errlen, "cannot create a scratch directory %s: %s", j->tmpdir, strerror(errno));
    j->tmpdir[0] = '\0';
    pthread_mutex_destroy(&j->mu);
    return HJ_JIT_EFAIL;
  }
  int rc = ident(j, err, errlen) == 0 ? 0 : HJ_JIT_EFAIL;
  if (rc == 0) {
    snprintf(j->runtime_tag, sizeof j->runtime_tag, "halide_jit; %s; %s; cc %s%s%s", j->id.halide,
             j->id.target, j->id.cc, o->runtime_tag_extra ? "; " : "",
             o->runtime_tag_extra ? o->runtime_tag_extra : "");
    j->codec = hj_codec(&j->codec_state);
    rc = open_cache(j, o, err, errlen);
  }
  if (rc != 0) hj_jit_close(j);
  return rc;
}

void hj_jit_close(hj_jit *j) {
  if (j->cache) ccache_close(j->cache);
  j->cache = NULL;
  if (j->tmpdir[0]) rmdir(j->tmpdir);
  j->tmpdir[0] = '\0';
  pthread_mutex_destroy(&j->mu);
}
