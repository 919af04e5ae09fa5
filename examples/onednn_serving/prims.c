/* prims.c: getting primitives, four ways (see prims.h), and prims_run().
 * Building and executing them is prims_dnnl.c; the counting around them
 * (keys seen, programs alive, destroy callbacks) is prims_ctx.c.  Every
 * primitive is created with a user-mode scratchpad, which makes it safe to
 * share between serving threads (prims_dnnl.c says why). */
#include "prims_impl.h"

#include "keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The state a compile callback needs; lives on the caller's stack. */
typedef struct compile_job {
  prim_ctx *ctx;
  prim_worker *w;
  const call_site *site;
  const prim_spec *spec;
} compile_job;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void report_failure(const call_site *site, const char *what) {
  fprintf(stderr, "onednn_serving: %s for %s (layer %d)\n", what, site->name, site->layer);
}

/* Modes 1 and 2: the plain oneDNN way, create-use-destroy.  With oneDNN's
 * cache enabled, dnnl_primitive_create becomes a lookup; the descriptor is
 * still built every time.  @p first: the first request for this program in
 * this mode, whose creation is a compile in mode 2 too. */
static int run_uncached(prim_ctx *ctx, prim_worker *w, const call_site *site, const prim_spec *s,
                        const prim_args *a, int first) {
  dnnl_primitive_t prim = NULL;
  dnnl_memory_t weights = NULL;
  size_t scratch = 0;
  uint64_t t0 = now_ns();
  if (build_primitive(ctx->engine, s, &prim, &scratch) != 0) {
    report_failure(site, "creating the primitive failed");
    return -1;
  }
  uint64_t t1 = now_ns();
  int rc = make_weights_memory(ctx, site, s, &weights);
  if (rc == 0) rc = execute(ctx, w, prim, s, a, weights, scratch);
  if (weights) dnnl_memory_destroy(weights);
  uint64_t t2 = now_ns();
  dnnl_status_t st = dnnl_primitive_destroy(prim);
  uint64_t t3 = now_ns();
  w->acquire_ns += (t1 - t0) + (t3 - t2);
  if (ctx->mode == MODE_NO_CACHE || first) w->compile_ns += (t1 - t0) + (t3 - t2);
  w->exec_ns += t2 - t1;
  if (rc != 0) report_failure(site, "execution failed");
  return rc == 0 && st == dnnl_success ? 0 : -1;
}

/* Program-level compile: runs once per program key, whichever call site
 * (layer) asks first.  Its time is counted by the closure compile around it. */
static int compile_program(void *ud, ccache *c, ccache_key pkey, void **native_out,
                           uint64_t *cost_out) {
  (void)c;
  (void)pkey;
  compile_job *job = ud;
  dnnl_primitive_t prim = NULL;
  size_t scratch = 0;
  if (build_primitive(job->ctx->engine, job->spec, &prim, &scratch) != 0) {
    report_failure(job->site, "creating the primitive failed");
    return -1;
  }
  program_born(job->ctx, prim);
  *native_out = prim;
  *cost_out = cost_estimate(job->spec);
  return 0;
}

/* Closure-level compile: runs once per call site; shares the program. */
static int compile_closure(void *ud, ccache *c, ccache_key ckey, void **closure_out,
                           ccache_program **program_out) {
  (void)ckey;
  compile_job *job = ud;
  ccache_program *prog = NULL;
  closure *cl = NULL;
  ccache_key pkey;
  ccache_strong_key spkey;
  int rc = -1, st;
  if (job->ctx->strong_keys) {
    if (onednn_program_key_strong(job->spec, &spkey) != 0) goto out;
    st = ccache_program_get_or_compile_strong(c, &spkey, compile_program, job, &prog);
  } else {
    if (onednn_program_key(job->spec, &pkey) != 0) goto out;
    st = ccache_program_get_or_compile(c, pkey, compile_program, job, &prog);
  }
  if (st != CCACHE_OK) {
    fprintf(stderr, "onednn_serving: ccache_program_get_or_compile: %s\n", ccache_strerror(st));
    goto out;
  }
  cl = calloc(1, sizeof *cl);
  if (!cl || make_weights_memory(job->ctx, job->site, job->spec, &cl->weights) != 0 ||
      prim_scratch_bytes(ccache_program_native(prog), &cl->scratch_bytes) != 0) {
    if (cl && cl->weights) dnnl_memory_destroy(cl->weights);
    free(cl);
    ccache_program_release(c, prog);
    goto out;
  }
  cl->prim = ccache_program_native(prog);
  atomic_fetch_add(&job->ctx->closures_created, 1);
  *closure_out = cl;
  *program_out = prog;
  rc = 0;
out:
  return rc;
}

static int run_ccache(prim_ctx *ctx, prim_worker *w, const call_site *site, const prim_spec *s,
                      const prim_args *a) {
  compile_job job = {.ctx = ctx, .w = w, .site = site, .spec = s};
  ccache_key ckey;
  ccache_strong_key sckey;
  ccache_lease lease = {0};
  uint64_t t0 = now_ns();
  /* With --strong-keys the key is BLAKE2b-256 and the cache compares all
   * 256 bits: the cost of that shows in the lookup rows. */
  int kr = ctx->strong_keys ? onednn_closure_key_strong(site, s, &sckey)
                            : onednn_closure_key(site, s, &ckey);
  /* Only with strong keys is the key timed on its own (one more clock read,
   * which the default run does not pay). */
  uint64_t tk = ctx->strong_keys ? now_ns() : 0;
  if (kr != 0) {
    report_failure(site, "building the keys failed");
    return -1;
  }
  /* The hit path is a fetch.  On a miss, get-or-compile compiles, or waits
   * for another thread compiling the same key (single-flight). */
  int st = ctx->strong_keys ? ccache_fetch_strong(ctx->cache, &sckey, &lease)
                            : ccache_fetch(ctx->cache, ckey, &lease);
  int hit = st == CCACHE_OK;
  if (st == CCACHE_MISS)
    st = ctx->strong_keys
             ? ccache_get_or_compile_strong(ctx->cache, &sckey, compile_closure, &job, &lease)
             : ccache_get_or_compile(ctx->cache, ckey, compile_closure, &job, &lease);
  uint64_t t1 = now_ns();
  if (st != CCACHE_OK) {
    fprintf(stderr, "onednn_serving: ccache_fetch / ccache_get_or_compile: %s\n",
            ccache_strerror(st));
    report_failure(site, "getting the primitive failed");
    return -1;
  }
  /* The lease is this thread's until released: the closure and primitive may
   * be leased by other workers at this very moment, which user-mode
   * scratchpads make safe. */
  const closure *cl = lease.closure;
  int rc = execute(ctx, w, cl->prim, s, a, cl->weights, cl->scratch_bytes);
  uint64_t t2 = now_ns();
  ccache_lease_release(ctx->cache, &lease);
  uint64_t t3 = now_ns();
  w->acquire_ns += (t1 - t0) + (t3 - t2);
  /* A miss's whole getting (the failed fetch, then the compile with ccache's
   * insert path around it, or the wait for another thread's compile) is
   * compile time; a hit's is lookup time. */
  if (hit) {
    w->fetch_hits++;
    if (ctx->strong_keys) w->key_ns += tk - t0;
  } else
    w->compile_ns += (t1 - t0) + (t3 - t2);
  w->exec_ns += t2 - t1;
  if (rc != 0) report_failure(site, "execution failed");
  return rc;
}

/* MODE_PER_THREAD's miss path: clear the whole table if it is full (as RLX's
 * cache.rs), then create the primitive and insert it. */
static struct tl_entry *tl_insert(prim_ctx *ctx, prim_worker *w, ccache_key key,
                                  const call_site *site, const prim_spec *s) {
  if (HASH_COUNT(w->tl) >= PER_THREAD_MAX_ENTRIES) {
    int failed = 0;
    w->tl_entries_cleared += tl_destroy_all(ctx, w, &failed);
    w->tl_clears++;
    if (failed) return NULL;
  }
  struct tl_entry *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->key = key;
  if (build_primitive(ctx->engine, s, &e->prim, &e->scratch_bytes) != 0) {
    report_failure(site, "creating the primitive failed");
    free(e);
    return NULL;
  }
  if (make_weights_memory(ctx, site, s, &e->weights) != 0) {
    dnnl_primitive_destroy(e->prim);
    free(e);
    return NULL;
  }
  program_born(ctx, e->prim);
  HASH_ADD(hh, w->tl, key, sizeof e->key, e);
  return e;
}

static int run_per_thread(prim_ctx *ctx, prim_worker *w, const call_site *site, const prim_spec *s,
                          const prim_args *a) {
  ccache_key ckey;
  struct tl_entry *e;
  uint64_t t0 = now_ns();
  if (onednn_closure_key(site, s, &ckey) != 0) {
    report_failure(site, "building the keys failed");
    return -1;
  }
  HASH_FIND(hh, w->tl, &ckey, sizeof ckey, e);
  int miss = e == NULL;
  if (miss) {
    w->tl_misses++;
    e = tl_insert(ctx, w, ckey, site, s);
    if (!e) return -1;
  } else {
    w->tl_hits++;
  }
  uint64_t t1 = now_ns();
  int rc = execute(ctx, w, e->prim, s, a, e->weights, e->scratch_bytes);
  uint64_t t2 = now_ns();
  w->acquire_ns += t1 - t0;
  /* As in run_ccache: a miss's whole getting (key, failed lookup, clear,
   * creation, insert) is compile time. */
  if (miss) w->compile_ns += t1 - t0;
  w->exec_ns += t2 - t1;
  if (rc != 0) report_failure(site, "execution failed");
  return rc;
}

int prims_run(prim_ctx *ctx, prim_worker *w, const call_site *site, const prim_spec *spec,
              const prim_args *args) {
  /* The program key is built outside the timed regions, only to count the
   * distinct programs asked for (modes 3 and 4 need only the closure key on
   * a hit; modes 1 and 2 need no key at all). */
  ccache_key pkey;
  int have_key = onednn_program_key(spec, &pkey) == 0, rc;
  w->requests++;
  if (ctx->mode == MODE_CCACHE) {
    rc = run_ccache(ctx, w, site, spec, args);
  } else if (ctx->mode == MODE_PER_THREAD) {
    rc = run_per_thread(ctx, w, site, spec, args);
  } else {
    rc = run_uncached(ctx, w, site, spec, args, have_key && record_key(ctx, pkey));
    have_key = 0;
  }
  if (have_key) record_key(ctx, pkey);
  atomic_fetch_add_explicit(&w->prims_done, 1, memory_order_relaxed);
  return rc;
}
