/*
 * jit_path.c - the JIT path of a toy runtime, through ccache.
 *
 * The "runtime" traces a tiny graph per layer, out = (x * w) + b, elementwise
 * over n floats.  Its "compiler" turns a graph into a program (here: a list
 * of opcodes for a little interpreter, standing in for native code).  Thirty
 * decoder layers share one structure, so they share one program: the program
 * key is the graph's structural fingerprint; the closure key adds the call
 * site (the layer), because each layer's closure binds its own weights.
 *
 * The first layer shows the explicit path (fetch -> miss -> compile ->
 * intern -> put -> lease -> release); the rest use ccache_get_or_compile,
 * which does the same with single-flight.  An event hook counts the compiles
 * per level, as a runtime would export them.  Last, a layer whose shape the
 * "compiler" refuses is asked for by two threads at once: one compiles, the
 * other waits, and both get the compiler's message.  Exit status 0 when
 * every check holds, 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccache.h"

enum { OP_PARAM = 1, OP_MUL = 2, OP_ADD = 3 };
enum { DT_F32 = 1 };
#define LAYERS 30
#define N      8

/* A compiled program: the opcodes of out = (x * w) + b. */
typedef struct program {
  int ops[2];
  int compiled_for_n;
} program;

/* A closure: a call site bound to its program and its layer's weights. */
typedef struct closure {
  const program *prog; /* borrowed: valid while a lease holds the entry */
  float w[N], b[N];
} closure;

static int compiles, programs_freed, closures_freed;

/* The event hook: what a runtime would log or export.  It runs on the
 * thread the event happens on, with no cache lock held. */
static _Atomic int compile_events[3], evictions;
static void on_event(void *ctx, const ccache_event *ev) {
  (void)ctx;
  if (ev->kind == CCACHE_EVENT_COMPILE_END) compile_events[ev->level]++;
  if (ev->kind == CCACHE_EVENT_EVICT) evictions++;
}

static void free_program(void *p, void *ctx) {
  (void)ctx;
  programs_freed++;
  free(p);
}
static void free_closure(void *p, void *ctx) {
  (void)ctx;
  closures_freed++;
  free(p);
}

/* The graph's structural fingerprint: nodes in topological order, operands
 * by (node, slot); parameters by position.  No layer index, no addresses. */
static ccache_key graph_key(void) {
  int64_t dims[1] = {N};
  ccache_fp_tensor t = {DT_F32, 1, dims};
  ccache_fp_ref mul_in[2] = {{0, 0}, {1, 0}}, add_in[2] = {{3, 0}, {2, 0}};
  ccache_fp_node nodes[4] = {
      {.op_id = OP_PARAM, .outputs = &t, .n_outputs = 1, .param_index = 0}, /* x */
      {.op_id = OP_PARAM, .outputs = &t, .n_outputs = 1, .param_index = 1}, /* w */
      {.op_id = OP_PARAM, .outputs = &t, .n_outputs = 1, .param_index = 2}, /* b */
      {.op_id = OP_MUL,
       .outputs = &t,
       .n_outputs = 1,
       .operands = mul_in,
       .n_operands = 2,
       .param_index = -1},
  };
  ccache_fp_node all[5];
  memcpy(all, nodes, sizeof nodes);
  all[4] = (ccache_fp_node){.op_id = OP_ADD,
                            .outputs = &t,
                            .n_outputs = 1,
                            .operands = add_in,
                            .n_operands = 2,
                            .param_index = -1};
  ccache_fp_ref out = {4, 0};
  ccache_key scratch[5], key = {0, 0};
  if (ccache_fp_graph(all, 5, &out, 1, "cpu", scratch, &key) != CCACHE_OK) {
    fprintf(stderr, "fingerprint failed\n");
    exit(1);
  }
  return key;
}

/* Closure key = program key + call site (the key rule: a closure key that
 * left out the program key would hand one program to another's calls). */
static ccache_key site_key(ccache_key pkey, int layer) {
  ccache_fp fp;
  ccache_key k = {0, 0};
  ccache_fp_init(&fp);
  ccache_fp_str(&fp, "layer_affine", 12);
  ccache_fp_key(&fp, pkey);
  ccache_fp_i64(&fp, layer);
  ccache_fp_final(&fp, &k);
  return k;
}

/* The expensive step a real runtime wants to skip. */
static int compile_program(void *ud, ccache *c, ccache_key pkey, void **native_out,
                           uint64_t *cost_out) {
  (void)ud, (void)c, (void)pkey;
  program *p = malloc(sizeof *p);
  if (!p) return 1;
  p->ops[0] = OP_MUL;
  p->ops[1] = OP_ADD;
  p->compiled_for_n = N;
  compiles++;
  *native_out = p;
  *cost_out = sizeof *p + 4096; /* the caller's estimate of native memory */
  return 0;
}

typedef struct site {
  ccache_key pkey;
  int layer;
} site;

static closure *make_closure(int layer) {
  closure *cl = malloc(sizeof *cl);
  if (!cl) return NULL;
  for (int i = 0; i < N; i++) {
    cl->w[i] = (float)(layer + 1);
    cl->b[i] = (float)i;
  }
  cl->prog = NULL;
  return cl;
}

static int compile_closure(void *ud, ccache *c, ccache_key key, void **closure_out,
                           ccache_program **program_out) {
  site *s = ud;
  (void)key;
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(c, s->pkey, compile_program, NULL, &p);
  if (rc != CCACHE_OK) return rc;
  closure *cl = make_closure(s->layer);
  if (!cl) {
    ccache_program_release(c, p);
    return 1;
  }
  *closure_out = cl;
  *program_out = p; /* the handle passes to the cache */
  return 0;
}

static void run(const closure *cl, const program *p, const float *x, float *out) {
  for (int i = 0; i < N; i++) {
    float acc = x[i];
    for (int k = 0; k < 2; k++) acc = p->ops[k] == OP_MUL ? acc * cl->w[i] : acc + cl->b[i];
    out[i] = acc;
  }
}

/* Layer 0: every step of the JIT path spelled out. */
static int explicit_path(ccache *c, ccache_key pkey, const float *x, float *y) {
  ccache_key key = site_key(pkey, 0);
  ccache_lease lease;
  int rc = ccache_fetch(c, key, &lease);
  if (rc == CCACHE_MISS) {
    void *native = NULL;
    uint64_t cost = 0;
    if (compile_program(NULL, c, pkey, &native, &cost)) return CCACHE_ECOMPILE;
    ccache_program *prog = NULL;
    rc = ccache_program_intern(c, pkey, native, cost, &prog); /* takes native */
    if (rc != CCACHE_OK) return rc;
    rc = ccache_put(c, key, make_closure(0), prog); /* the entry takes its own ref */
    ccache_program_release(c, prog);
    if (rc != CCACHE_OK) return rc;
    rc = ccache_fetch(c, key, &lease);
  }
  if (rc != CCACHE_OK) return rc;
  run(lease.closure, lease.native, x, y);
  ccache_lease_release(c, &lease);
  return CCACHE_OK;
}

/* ---- an error that travels: two threads miss on a layer that cannot be
 * compiled; one compiles, the other waits, both learn why. */
typedef struct bad_layer {
  ccache *c;
  int rc;
  char why[512];
} bad_layer;

static int compile_bad(void *ud, ccache *c, ccache_key key, void **closure_out,
                       ccache_program **program_out) {
  (void)ud, (void)key, (void)closure_out, (void)program_out;
  /* Let the other thread join the flight first (bounded: 10 s), so it is a
   * waiter; a real compile is simply slow. */
  ccache_stats st;
  ccache_stats_init(&st);
  for (int i = 0; i < 10000 && ccache_stats_get(c, &st) == CCACHE_OK && st.waits == 0; i++)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  return ccache_compile_fail(CCACHE_ECOMPILE, "jit: layer 30: dim %d is not a multiple of %d", 7,
                             N);
}

static void *ask_bad_layer(void *arg) { /* run by two threads at once */
  bad_layer *b = arg;
  ccache_lease lease;
  ccache_key key = {0xbad, 30};
  b->rc = ccache_get_or_compile(b->c, key, compile_bad, NULL, &lease);
  snprintf(b->why, sizeof b->why, "%s", ccache_error_detail()); /* read after a failure */
  return NULL;
}

int main(void) {
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.destroy_closure = free_closure;
  cfg.destroy_program = free_program;
  cfg.on_event = on_event; /* NULL (the default) costs nothing */
  cfg.max_items = 64;
  ccache *c = NULL;
  int rc = ccache_open(&cfg, &c);
  if (rc != CCACHE_OK) {
    fprintf(stderr, "ccache_open: %s\n", ccache_strerror(rc));
    return 1;
  }
  ccache_key pkey = graph_key();
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = 1.0f;

  for (int step = 0; step < 3; step++) { /* three decode steps */
    x[0] = (float)step;
    if ((rc = explicit_path(c, pkey, x, y)) != CCACHE_OK) break;
    for (int layer = 1; layer < LAYERS && rc == CCACHE_OK; layer++) {
      site s = {pkey, layer};
      ccache_lease lease;
      rc = ccache_get_or_compile(c, site_key(pkey, layer), compile_closure, &s, &lease);
      if (rc != CCACHE_OK) break;
      run(lease.closure, lease.native, y, y);
      ccache_lease_release(c, &lease);
    }
  }
  if (rc != CCACHE_OK) {
    fprintf(stderr, "jit path failed: %s\n", ccache_strerror(rc));
    return 1;
  }
  ccache_stats st;
  ccache_stats_init(&st);
  ccache_stats_get(c, &st);
  printf("ccache jit_path example: %d layers x 3 steps\n", LAYERS);
  printf("  closure lookups: %llu hits, %llu misses; closures cached: %llu\n",
         (unsigned long long)st.hits, (unsigned long long)st.misses, (unsigned long long)st.items);
  printf("  programs: %llu alive, %d compiled (30 layers share one structure)\n",
         (unsigned long long)st.programs, compiles);
  printf("  events: %d closure compiles, %d program compiles (layer 0 compiled it by hand)\n",
         compile_events[CCACHE_LEVEL_CLOSURE], compile_events[CCACHE_LEVEL_PROGRAM]);
  printf("  y[0] after the last step: %g\n", (double)y[0]);

  bad_layer b[2] = {{c, 0, ""}, {c, 0, ""}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, ask_bad_layer, &b[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  ccache_stats_get(c, &st);
  for (int i = 0; i < 2; i++)
    printf("  bad layer, thread %d: %s: %s\n", i, ccache_strerror(b[i].rc), b[i].why);
  printf("  (%llu compile, %llu waiter)\n", (unsigned long long)st.compile_failures,
         (unsigned long long)st.waits);
  int travelled = st.compile_failures == 1 && st.waits == 1;
  for (int i = 0; i < 2; i++)
    travelled = travelled && b[i].rc == CCACHE_ECOMPILE &&
                strcmp(b[i].why, "jit: layer 30: dim 7 is not a multiple of 8") == 0;

  rc = ccache_close(c);
  int ok = rc == CCACHE_OK && compiles == 1 && st.programs == 1 && st.items == LAYERS &&
           programs_freed == 1 && closures_freed == LAYERS && travelled &&
           compile_events[CCACHE_LEVEL_CLOSURE] == LAYERS - 1 + 1 &&
           compile_events[CCACHE_LEVEL_PROGRAM] == 0 && evictions == LAYERS;
  printf("  closed: %d closures and %d program destroyed -> %s\n", closures_freed, programs_freed,
         ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
