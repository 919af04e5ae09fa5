/*
 * test_tier_disk_lock.c - the directory tier's compile lock across caches,
 * threads and processes over one directory: a nested compile in a second
 * cache, two caches in one process and two processes missing on one key,
 * nested work handed to a pool thread, and one compile per machine (4
 * processes, each key compiled once).
 *
 * Forked children never use cmocka: they report through their exit status.
 * The parent forks only while it has no other thread.
 */
#define _GNU_SOURCE 1

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "disk_support.h"
#include "tier/disk/disk.h"
#include "tier/tier.h"

/* Two caches over one directory in one process (two tier objects: two
 * open file descriptions of the lock file, whose locks exclude each other
 * even within a process).  A compile in the first needs the same program
 * from the second (a nested compile): the second shares the lock this
 * process holds instead of waiting for itself, and when its compile ends
 * the lock stays held (for other processes) until the outer one ends. */
static const char *nest_dir;
static ccache *nest_second;
static int nest_held_after_inner = -1;
static void nest_b(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)c;
  t_compiler *inner = comp->arg;
  ccache_program *p = NULL;
  if (ccache_program_get_or_compile(nest_second, pkey, t_compile, inner, &p) == CCACHE_OK)
    ccache_program_release(nest_second, p);
  nest_held_after_inner = t_key_locked(nest_dir, T_DISK_TAG, pkey);
}

static void nested_compile_in_a_second_cache_does_not_wait(void **state) {
  (void)state;
  char *dir = t_tempdir("nest");
  t_ctx t = {0};
  t_codec tc = {0}, tc2 = {0};
  t_compiler comp = {0}, inner = {0};
  comp.during = nest_b;
  comp.arg = &inner;
  nest_dir = dir;
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  o.lock_poll_ms = 1;
  o.lock_poll_max_ms = 8;
  o.lock_wait_ms = 3000; /* what it would wait for itself */
  ccache_tier *t2 = NULL;
  assert_int_equal(ccache_tier_disk(&o, &t2), CCACHE_OK);
  nest_second = t_cache_over(&t, &tc2, 100, t2, T_DISK_TAG);
  assert_non_null(nest_second);
  assert_int_equal(t_goc(c, PK(7), &comp, CCACHE_OK), 7);
  assert_int_equal(inner.calls, 1);
  assert_int_equal(nest_held_after_inner, 1);
  assert_false(t_key_locked(dir, T_DISK_TAG, PK(7))); /* released when the outer compile ended */
  ccache_stats s = t_stats(nest_second);
  assert_int_equal(s.tier_lock_waits, 0);
  assert_int_equal(s.tier_writes, 1);
  assert_int_equal(t_stats(c).tier_writes, 1);
  t_close(nest_second);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* Two caches over one directory in one process, two threads, one key (two
 * libraries in one runtime, a cache per model): the first thread compiles
 * for 600 ms; the second misses 200 ms into it.  The held-lock table lets
 * only the thread that holds the byte pass, so the second waits for the
 * lock (polling the entry) and loads the first's entry: one compile.
 * Before: the table handed the held byte to any thread of the process, and
 * the second compiled too (inner.calls 1, tier_lock_waits 0). */
typedef struct slow_arg {
  ccache *c;
  t_compiler *comp;
  ccache_key key;
  int rc, id;
} slow_arg;
static _Atomic int slow_started;
static void slow_compile(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)c;
  (void)pkey;
  atomic_store(&slow_started, 1);
  struct timespec d = {0, (long)(intptr_t)comp->arg * 1000000L};
  nanosleep(&d, NULL);
}
static void *slow_fetch(void *p) {
  slow_arg *a = p;
  ccache_program *prog = NULL;
  a->rc = ccache_program_get_or_compile(a->c, a->key, t_compile, a->comp, &prog);
  if (a->rc == CCACHE_OK) {
    a->id = t_id(ccache_program_native(prog));
    ccache_program_release(a->c, prog);
  }
  return NULL;
}
/* Until slow_started is set (at most 30 s), then ms more. */
static void after_start(int ms) {
  for (int i = 0; !atomic_load(&slow_started) && i < 30000; i++) {
    struct timespec one = {0, 1000000L};
    nanosleep(&one, NULL);
  }
  assert_true(atomic_load(&slow_started));
  struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
}

static void two_caches_in_one_process_compile_once(void **state) {
  (void)state;
  char *dir = t_tempdir("twocaches");
  t_ctx t = {0};
  t_codec tc = {0}, tc2 = {0};
  t_compiler first = {0}, second = {0};
  first.during = slow_compile;
  first.arg = (void *)(intptr_t)600;
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  ccache *c2 = t_cache_over(&t, &tc2, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_non_null(c);
  assert_non_null(c2);
  atomic_store(&slow_started, 0);
  slow_arg a = {c, &first, PK(11), -100, -1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, slow_fetch, &a), 0);
  after_start(200);
  int id = t_goc(c2, PK(11), &second, CCACHE_OK);
  pthread_join(th, NULL);
  assert_int_equal(a.rc, CCACHE_OK);
  assert_int_equal(a.id, 11);
  assert_int_equal(id, 11);
  ccache_stats s2 = t_stats(c2);
  print_message(
      "first: %d compile(s); second: %d compile(s), %llu lock wait(s), %llu tier hit(s)\n",
      (int)first.calls, (int)second.calls, (unsigned long long)s2.tier_lock_waits,
      (unsigned long long)s2.tier_hits);
  assert_int_equal(first.calls, 1);
  assert_int_equal(second.calls, 0); /* it loaded the first's entry */
  assert_int_equal(s2.tier_lock_waits, 1);
  assert_int_equal(s2.tier_hits, 1);
  assert_int_equal(s2.tier_writes, 0);
  assert_true(s2.tier_wait_ms_max < 30000);
  assert_int_equal(t_stats(c).tier_writes, 1);
  t_close(c2);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* The same in two processes (kept as the reference: the kernel's lock
 * already excludes another process). */
static void two_processes_compile_once(void **state) {
  (void)state;
  char *dir = t_tempdir("twoprocs");
  int ready[2], logp[2];
  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(logp), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(ready[0]);
    close(logp[0]);
    t_ctx t = {0};
    t_codec tc = {0};
    t_compiler comp = {0};
    comp.during = slow_compile;
    comp.arg = (void *)(intptr_t)600;
    ccache_tier *tier = NULL;
    ccache_disk_options o;
    ccache_disk_options_init(&o);
    o.dir = dir;
    if (ccache_tier_disk(&o, &tier) != CCACHE_OK) _exit(10);
    ccache *c = t_cache_over(&t, &tc, 100, tier, T_DISK_TAG);
    if (!c) _exit(11);
    atomic_store(&slow_started, 0);
    slow_arg a = {c, &comp, PK(12), -100, -1};
    pthread_t th;
    if (pthread_create(&th, NULL, slow_fetch, &a) != 0) _exit(12);
    for (int i = 0; !atomic_load(&slow_started) && i < 30000; i++) {
      struct timespec one = {0, 1000000L};
      nanosleep(&one, NULL);
    }
    if (write(ready[1], "s", 1) != 1) _exit(13);
    pthread_join(th, NULL);
    int calls = comp.calls;
    if (write(logp[1], &calls, sizeof calls) != (ssize_t)sizeof calls) _exit(14);
    _exit(a.rc == CCACHE_OK && a.id == 12 && ccache_close(c) == CCACHE_OK ? 0 : 15);
  }
  close(ready[1]);
  close(logp[1]);
  char b;
  assert_int_equal(read(ready[0], &b, 1), 1); /* the child is compiling */
  struct timespec d = {0, 200000000L};
  nanosleep(&d, NULL);
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(12), &comp, CCACHE_OK), 12);
  int st = 0, child_calls = -1;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  assert_int_equal(read(logp[0], &child_calls, sizeof child_calls), (ssize_t)sizeof child_calls);
  close(ready[0]);
  close(logp[0]);
  assert_int_equal(child_calls, 1);
  assert_int_equal(comp.calls, 0);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_lock_waits, 1);
  assert_int_equal(s.tier_hits, 1);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* Nested work handed to another thread (a pool): the pool thread does not
 * hold the byte, so it waits like any other thread, lock_wait_ms (here
 * 300 ms) at most, then compiles without the lock.  The compile that handed
 * it over waits for it meanwhile: the documented cost of handing the same
 * key to a pool. */
static ccache *pool_second;
static int pool_waited_ms = -1;
static void hand_to_pool(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)c;
  slow_arg a = {pool_second, comp->arg, pkey, -100, -1};
  pthread_t th;
  struct timespec s0, s1;
  clock_gettime(CLOCK_MONOTONIC, &s0);
  if (pthread_create(&th, NULL, slow_fetch, &a) != 0) return;
  pthread_join(th, NULL);
  clock_gettime(CLOCK_MONOTONIC, &s1);
  pool_waited_ms = (int)((s1.tv_sec - s0.tv_sec) * 1000 + (s1.tv_nsec - s0.tv_nsec) / 1000000);
}

static void nested_work_on_a_pool_thread_waits_lock_wait_ms(void **state) {
  (void)state;
  char *dir = t_tempdir("pool");
  t_ctx t = {0};
  t_codec tc = {0}, tc2 = {0};
  t_compiler comp = {0}, inner = {0};
  comp.during = hand_to_pool;
  comp.arg = &inner;
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  o.lock_poll_ms = 1;
  o.lock_poll_max_ms = 8;
  o.lock_wait_ms = 300;
  ccache_tier *t2 = NULL;
  assert_int_equal(ccache_tier_disk(&o, &t2), CCACHE_OK);
  pool_second = t_cache_over(&t, &tc2, 100, t2, T_DISK_TAG);
  assert_non_null(pool_second);
  assert_int_equal(t_goc(c, PK(13), &comp, CCACHE_OK), 13);
  print_message("the pool thread: %d compile(s) after %d ms\n", (int)inner.calls, pool_waited_ms);
  assert_int_equal(inner.calls, 1);
  assert_true(pool_waited_ms >= 300);
  assert_true(pool_waited_ms < 20000);
  ccache_stats s = t_stats(pool_second);
  assert_int_equal(s.tier_lock_waits, 1);
  assert_true(s.tier_wait_ms_max >= 300);
  t_close(pool_second);
  t_close(c);
  t_rmrf(dir);
  free(dir);
}

/* ------------------------------------------------- one compile per machine */

enum { PROCS = 4, KEYS = 40 };

/* A compile's work: a fixed amount of computation, long enough (a few ms)
 * that the other processes ask for the same key while it runs. */
static _Atomic uint64_t work_sink;
static void busy_compile(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)c;
  uint64_t x = pkey.lo;
  for (int i = 0; i < 3000000; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
  atomic_store(&work_sink, x);
  int fd = (int)(intptr_t)comp->arg;
  char line[64];
  int n = snprintf(line, sizeof line, "%ld %llu\n", (long)getpid(), (unsigned long long)pkey.lo);
  if (write(fd, line, (size_t)n) != n) _exit(30);
}

static int racer(const char *dir, int logfd, int gate) {
  char b;
  if (read(gate, &b, 1) != 0) return 9; /* the parent closes the pipe: go */
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  comp.during = busy_compile;
  comp.arg = (void *)(intptr_t)logfd;
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = dir;
  o.lock_poll_ms = 1;
  o.lock_poll_max_ms = 4;
  ccache_tier *tier = NULL;
  if (ccache_tier_disk(&o, &tier) != CCACHE_OK) return 10;
  ccache *c = t_cache_over(&t, &tc, 1000, tier, T_DISK_TAG);
  if (!c) return 11;
  for (int i = 0; i < KEYS; i++) {
    ccache_program *p = NULL;
    if (ccache_program_get_or_compile(c, PK(i), t_compile, &comp, &p) != CCACHE_OK) return 12;
    if (t_id(ccache_program_native(p)) != i) return 13;
    ccache_program_release(c, p);
  }
  if (tc.bad_loads != 0) return 14;
  return ccache_close(c) == CCACHE_OK ? 0 : 15;
}

static void four_processes_compile_each_key_once(void **state) {
  (void)state;
  char *dir = t_tempdir("race");
  char logpath[1200];
  snprintf(logpath, sizeof logpath, "%s.log", dir);
  int logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  assert_true(logfd >= 0);
  int gate[2];
  assert_int_equal(pipe(gate), 0);
  fflush(NULL);
  pid_t pids[PROCS];
  for (int i = 0; i < PROCS; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) {
      close(gate[1]);
      int rc = racer(dir, logfd, gate[0]);
      free(dir);
      _exit(rc);
    }
  }
  close(gate[0]);
  close(gate[1]); /* all four start together */
  for (int i = 0; i < PROCS; i++) {
    int st = 0;
    assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
  }
  close(logfd);
  /* Exactly one compile per key, across the four processes. */
  FILE *f = fopen(logpath, "r");
  assert_non_null(f);
  int seen[KEYS] = {0}, total = 0;
  long p;
  unsigned long long k;
  while (fscanf(f, "%ld %llu", &p, &k) == 2) {
    assert_true(k < KEYS);
    seen[k]++;
    total++;
  }
  fclose(f);
  for (int i = 0; i < KEYS; i++) assert_int_equal(seen[i], 1);
  assert_int_equal(total, KEYS);
  unlink(logpath);
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nested_compile_in_a_second_cache_does_not_wait),
      cmocka_unit_test(two_caches_in_one_process_compile_once),
      cmocka_unit_test(two_processes_compile_once),
      cmocka_unit_test(nested_work_on_a_pool_thread_waits_lock_wait_ms),
      cmocka_unit_test(four_processes_compile_each_key_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
