/* test_hj_cache.c: the pipelines through ccache in one process - call
 * sites share one program, threads asking at once compile once, the
 * bounds unload modules for real (their mappings leave /proc/self/maps),
 * and eviction under load (threads running parallel pipelines on Halide's
 * thread pool while max_items evicts and unloads) neither crashes nor
 * changes an output.  Counts are exact unless a comment says why not. */
#include "kj_test.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"
#include "jit.h"
#include "runner.h"
#include "walk.h"

typedef struct fixture {
  char dir[256], cache[300];
  hj_jit jit;
} fixture;

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  if (!fx || kj_scratch(fx->dir, sizeof fx->dir, "hj") != 0) {
    free(fx);
    return -1;
  }
  snprintf(fx->cache, sizeof fx->cache, "%s/cache", fx->dir);
  hj_runtime_init();
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  kj_scratch_remove(fx->dir);
  free(fx);
  return 0;
}

static void open_jit(fixture *fx, int disk, uint64_t max_items) {
  char err[640] = "";
  hj_jit_options o = {.cache_dir = disk ? fx->cache : NULL, .max_items = max_items};
  int rc = hj_jit_open(&fx->jit, &o, err, sizeof err);
  if (rc != 0) fprintf(stderr, "hj_jit_open: %s\n", err);
  assert_int_equal(rc, 0);
}

static ccache_stats stats(hj_jit *j) {
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(j->cache, &st);
  return st;
}

static void walk(hj_jit *j, uint32_t layers, uint32_t tokens, uint32_t threads, uint32_t repeat,
                 hj_walk_result *r) {
  hj_walk_options o = {layers, tokens, threads, repeat, 1, (float)HJ_RMS_EPS};
  int rc = hj_walk(j, &o, r);
  if (rc != 0) fprintf(stderr, "walk: %s\n", r->err);
  assert_int_equal(rc, 0);
  assert_int_equal(r->mismatches, 0);
}

/* Distinct pipeline objects mapped in this process (/memfd:hj_<key>). */
static int mapped_pipelines(void) {
  FILE *f = fopen("/proc/self/maps", "re");
  assert_non_null(f);
  char line[512], names[64][64];
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    const char *m = strstr(line, "/memfd:hj_");
    if (!m) continue;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(m, " \n"), m);
    int seen = 0;
    for (int i = 0; i < n && !seen; i++) seen = strcmp(names[i], name) == 0;
    if (!seen && n < 64) strcpy(names[n++], name);
  }
  fclose(f);
  return n;
}

/* 30 layers x 5 call sites, each building its pipeline afresh: 150
 * closures, 5 programs, 5 compiles; the other 145 sites find theirs made. */
static void call_sites_share_one_program(void **state) {
  fixture *fx = *state;
  open_jit(fx, 0, 0);
  hj_walk_result r;
  walk(&fx->jit, HJ_LAYERS, 4, 1, 1, &r);
  ccache_stats st = stats(&fx->jit);
  assert_int_equal(r.site_visits, HJ_LAYERS * HJ_SLOTS);
  assert_int_equal(st.items, HJ_LAYERS * HJ_SLOTS);
  assert_int_equal(st.compiles, HJ_LAYERS * HJ_SLOTS); /* closure compiles: one per site */
  assert_int_equal(st.program_compiles, HJ_N_KINDS);
  assert_int_equal(st.programs, HJ_N_KINDS);
  assert_int_equal(st.program_hits, HJ_LAYERS * HJ_SLOTS - HJ_N_KINDS);
  assert_int_equal(mapped_pipelines(), HJ_N_KINDS);
  /* A second walk: every site a closure hit, nothing made. */
  walk(&fx->jit, HJ_LAYERS, 4, 1, 1, &r);
  st = stats(&fx->jit);
  assert_int_equal(st.hits, HJ_LAYERS * HJ_SLOTS);
  assert_int_equal(st.program_compiles, HJ_N_KINDS);
  hj_jit_close(&fx->jit);
  assert_int_equal(mapped_pipelines(), 0);
}

typedef struct asker {
  hj_jit *j;
  pthread_rwlock_t *gate;
  ccache_program *p;
  int rc;
} asker;

static void *ask(void *arg) {
  asker *a = arg;
  pthread_rwlock_rdlock(a->gate);
  pthread_rwlock_unlock(a->gate);
  hj_spec s = hj_spec_default(HJ_SOFTMAX);
  char err[640];
  a->rc = hj_jit_program(a->j, &s, &a->p, err, sizeof err);
  return NULL;
}

/* 4 threads released together ask for one pipeline (a compile takes
 * ~100 ms, so they all arrive during it): one compile, one native. */
static void threads_compile_once(void **state) {
  fixture *fx = *state;
  open_jit(fx, 0, 0);
  pthread_rwlock_t gate;
  pthread_rwlock_init(&gate, NULL);
  pthread_rwlock_wrlock(&gate);
  asker a[4];
  pthread_t t[4];
  for (int i = 0; i < 4; i++) {
    a[i] = (asker){&fx->jit, &gate, NULL, -1};
    assert_int_equal(pthread_create(&t[i], NULL, ask, &a[i]), 0);
  }
  pthread_rwlock_unlock(&gate);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  pthread_rwlock_destroy(&gate);
  ccache_stats st = stats(&fx->jit);
  fprintf(stderr, "4 threads: %" PRIu64 " compiles, %" PRIu64 " waits, %" PRIu64 " hits\n",
          st.program_compiles, st.program_waits, st.program_hits);
  assert_int_equal(st.program_compiles, 1);
  /* A waiter of the compile counts a miss and a program wait; a thread that
   * came after it a hit. */
  assert_int_equal(st.program_misses, 1 + st.program_waits);
  assert_int_equal(st.program_misses + st.program_hits, 4);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(a[i].rc, CCACHE_OK);
    assert_ptr_equal(ccache_program_native(a[i].p), ccache_program_native(a[0].p));
  }
  assert_int_equal(fx->jit.codec_state.loads, 1);
  for (int i = 0; i < 4; i++) ccache_program_release(fx->jit.cache, a[i].p);
  hj_jit_close(&fx->jit);
}

/* max_items 1 over one layer's 5 sites, walked twice: each insert evicts
 * the previous site's closure, the last reference to its pipeline, which
 * is unloaded there and then (9 evictions, 9 unloads); the second walk
 * loads the pipelines back from the disk tier (0 compiles).  Only the one
 * pipeline still referenced stays mapped. */
static void bounds_unload_modules(void **state) {
  fixture *fx = *state;
  open_jit(fx, 1, 1);
  hj_walk_result r;
  walk(&fx->jit, 1, 4, 1, 2, &r);
  ccache_stats st = stats(&fx->jit);
  assert_int_equal(r.site_visits, 2 * HJ_SLOTS);
  assert_int_equal(st.program_compiles, HJ_N_KINDS);
  assert_int_equal(st.tier_hits, HJ_N_KINDS);
  assert_int_equal(st.evicted_capacity, 2 * HJ_SLOTS - 1);
  assert_int_equal(hj_jit_unloads(&fx->jit), 2 * HJ_SLOTS - 1);
  assert_int_equal(st.programs, 1);
  assert_int_equal(mapped_pipelines(), 1);
  hj_jit_close(&fx->jit);
  assert_int_equal(mapped_pipelines(), 0);
}

/* 4 threads x 3 walks of 30 layers at 64 tokens (parallel schedules: each
 * call fans out over Halide's thread pool) with max_items 2, the
 * pipelines coming back from the disk tier after each unload.  Every
 * output still matches its reference, and pipelines were unloaded while
 * other threads ran theirs. */
static void eviction_under_load(void **state) {
  fixture *fx = *state;
  open_jit(fx, 1, 0);
  hj_walk_result r;
  walk(&fx->jit, 1, 4, 1, 1, &r); /* fill the disk tier */
  hj_jit_close(&fx->jit);
  open_jit(fx, 1, 2);
  walk(&fx->jit, HJ_LAYERS, 64, 4, 3, &r);
  ccache_stats st = stats(&fx->jit);
  uint64_t unloads = hj_jit_unloads(&fx->jit);
  fprintf(stderr,
          "%" PRIu64 " visits, %" PRIu64 " evictions, %" PRIu64 " unloads, %" PRIu64
          " tier loads, %" PRIu64 " compiles\n",
          r.site_visits, st.evicted_capacity, unloads, st.tier_hits, st.program_compiles);
  assert_int_equal(r.site_visits, 4 * 3 * HJ_LAYERS * HJ_SLOTS);
  assert_int_equal(st.program_compiles, 0); /* every reload came from the tier */
  assert_true(st.items <= 2);
  assert_int_equal(st.evicted_capacity, st.inserts - st.items);
  /* Between a thread's visits of one site in two walks, 149 other sites'
   * closures were in the table, so each (site, walk) inserted at least once:
   * at least 3 x 150 inserts, all but 2 evicting.  How many evictions also
   * unloaded depends on what other threads still leased (966 of 1,761 in
   * a run on 2 cores): at least a few. */
  assert_true(st.evicted_capacity >= 3 * HJ_LAYERS * HJ_SLOTS - 2);
  assert_true(unloads >= 10);
  assert_int_equal(unloads, st.programs_destroyed);
  assert_int_equal(st.tier_hits, unloads + st.programs); /* each reload follows an unload */
  hj_jit_close(&fx->jit);
  assert_int_equal(mapped_pipelines(), 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(call_sites_share_one_program, setup, teardown),
      cmocka_unit_test_setup_teardown(threads_compile_once, setup, teardown),
      cmocka_unit_test_setup_teardown(bounds_unload_modules, setup, teardown),
      cmocka_unit_test_setup_teardown(eviction_under_load, setup, teardown),
  };
  return KJ_RUN("halide_jit_cache", tests, argc, argv);
}
