/*
 * test_read_side.c - the read side's two modes (issue 36): hits without a
 * fence where the kernel offers membarrier(2), the writer's rule that pays
 * the heavy barrier once per batch of puts, and the fenced fallback when
 * membarrier is refused (a seccomp filter, ENOSYS, CLOSURE_CACHE_MEMBARRIER
 * =off), decided once per process.  Every case counts blockings, heavy
 * barriers and destroys exactly; the expected counts depend on the mode the
 * process runs in, which ctest runs twice: read_side (the kernel's choice)
 * and read_side_fenced (CLOSURE_CACHE_MEMBARRIER=off).
 *
 * Built with -DREAD_SIDE_ON_MAIN it compiles against a library without the
 * read-side stats (main before issue 36): only the destroy counts are
 * checked there, and main destroys every evicted entry at once.
 *
 * Worker threads record results in plain variables; only the main thread
 * asserts (cmocka is not thread-safe).
 */
#define _GNU_SOURCE 1 /* syscall() */
#include <errno.h>
#include <linux/filter.h>
#include <linux/membarrier.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

#define U CCACHE_UNBOUNDED

/* The mode this process must be in: membarrier where the kernel lists
 * private expedited and the variable does not turn it off. */
static int expect_asym(void) {
  const char *v = getenv("CLOSURE_CACHE_MEMBARRIER");
  if (v && strcmp(v, "off") == 0) return 0;
  long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0u, 0);
  return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

/* ------------------------------------------------------------ a reader */

/* A thread that takes a lease on `key` (its reader's slot), says so, and
 * keeps it until told to go; then releases it (unless given away) and
 * exits, which retires its reader. */
typedef struct holder {
  ccache *c;
  uint64_t key;
  ccache_lease lease;
  int hit, give_away;
  int stage; /* 1: holding; 2: told to go */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t th;
} holder;

static void set_stage(holder *h, int s) {
  pthread_mutex_lock(&h->mu);
  h->stage = s;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

static void wait_stage(holder *h, int s) {
  pthread_mutex_lock(&h->mu);
  while (h->stage < s) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
}

static void *holder_main(void *arg) {
  holder *h = arg;
  h->hit = ccache_fetch(h->c, K(h->key), &h->lease) == CCACHE_OK;
  set_stage(h, 1);
  wait_stage(h, 2);
  if (h->hit && !h->give_away) ccache_lease_release(h->c, &h->lease);
  return NULL;
}

static void holder_start(holder *h, ccache *c, uint64_t key) {
  memset(h, 0, sizeof *h);
  h->c = c;
  h->key = key;
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  assert_int_equal(pthread_create(&h->th, NULL, holder_main, h), 0);
  wait_stage(h, 1);
  assert_true(h->hit);
}

static void holder_stop(holder *h) {
  set_stage(h, 2);
  assert_int_equal(pthread_join(h->th, NULL), 0);
  pthread_mutex_destroy(&h->mu);
  pthread_cond_destroy(&h->cv);
}

static void put_n(ccache *c, ccache_program *p, uint64_t from, uint64_t n) {
  for (uint64_t k = from; k < from + n; k++) t_put(c, k, (int)k, p);
}

#ifndef READ_SIDE_ON_MAIN
/* ThreadSanitizer builds block the read side for every change in both modes
 * (docs/design.md, "ThreadSanitizer"): their membarrier mode counts the
 * fenced mode's blockings, each a heavy barrier while another thread reads
 * (tsan_heavy); destroys still wait for the batches. */
static void expect_blocks(ccache *c, uint64_t asym_blocks, uint64_t asym_heavy,
                          uint64_t fenced_blocks, uint64_t tsan_heavy) {
  ccache_stats s = t_stats(c);
#if defined(__SANITIZE_THREAD__)
  asym_blocks = fenced_blocks;
  asym_heavy = tsan_heavy;
#else
  (void)tsan_heavy;
#endif
  if (expect_asym()) {
    assert_int_equal(s.read_side, CCACHE_READ_SIDE_MEMBARRIER);
    assert_int_equal(s.reader_blocks, asym_blocks);
    assert_int_equal(s.heavy_barriers, asym_heavy);
  } else {
    assert_int_equal(s.read_side, CCACHE_READ_SIDE_FENCED);
    assert_int_equal(s.reader_blocks, fenced_blocks);
    assert_int_equal(s.heavy_barriers, 0);
  }
}
#else
#define expect_blocks(c, a, h, f, t) ((void)(c))
#endif

/* ---------------------------------------------------------------- cases */

static void mode_is_membarrier_where_the_kernel_offers_it(void **state) {
  (void)state;
  t_ctx tc = {0};
  ccache *c = t_open(&tc, U, U, U);
#ifndef READ_SIDE_ON_MAIN
  ccache_stats s = t_stats(c);
  assert_int_equal(s.read_side,
                   expect_asym() ? CCACHE_READ_SIDE_MEMBARRIER : CCACHE_READ_SIDE_FENCED);
  assert_int_equal(s.reader_blocks, 0);
  char line[4096];
  assert_true(ccache_stats_format(&s, line, sizeof line) > 0);
  assert_non_null(strstr(line, expect_asym() ? " read_side=1 " : " read_side=2 "));
#else
  fail_msg("main has no read_side in ccache_stats");
#endif
  t_close(c);
}

/* 8 items, a second thread holding a lease on key 1, then 2B + 20 evicting
 * puts (B = CCACHE_RECLAIM_BATCH, 128).  Membarrier mode: the evicted
 * entries wait, and every B-th put reclaims them under one blocking with
 * one heavy barrier (2); key 1 is held, so 2B - 1 of 2B are destroyed.
 * Fenced mode (and main): each put blocks and destroys what it evicts at
 * once (2B + 19).  Once the thread is gone, the next put reclaims the rest
 * without a heavy barrier. */
#ifndef CCACHE_RECLAIM_BATCH
#define CCACHE_RECLAIM_BATCH 128u /* main: the counts below still follow */
#endif
#define B       CCACHE_RECLAIM_BATCH
#define N_EVICT (2 * B + 20)
static void evicting_puts_pay_one_heavy_barrier_per_batch(void **state) {
  (void)state;
  t_ctx tc = {0};
  ccache *c = t_open(&tc, 8, U, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  put_n(c, p, 1, 8);
  expect_blocks(c, 1, 0, 8, 0); /* membarrier: only the first insert (uthash makes its table) */
  holder h;
  holder_start(&h, c, 1);
  put_n(c, p, 9, N_EVICT);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.evicted_capacity, N_EVICT);
  assert_int_equal(s.items, 8);
  assert_int_equal(tc.closures_destroyed, expect_asym() ? 2 * B - 1 : N_EVICT - 1);
  expect_blocks(c, 1 + 2, 2, 8 + N_EVICT, N_EVICT);
  holder_stop(&h); /* its release destroys key 1's closure */
  assert_int_equal(tc.closures_destroyed, expect_asym() ? 2 * B : N_EVICT);
  /* Alone again: reclaims the 20 pending and the one it evicts. */
  t_put(c, 9 + N_EVICT, 1, p);
  assert_int_equal(tc.closures_destroyed, N_EVICT + 1);
  expect_blocks(c, 1 + 2 + 1, 2, 8 + N_EVICT + 1, N_EVICT);
  t_check(c, &tc);
  ccache_program_release(c, p);
  t_close(c);
  assert_int_equal(tc.closures_destroyed, 8 + N_EVICT + 1);
}

/* A lease in a thread's slot on an entry a put evicted, released by
 * another thread before the reclaim: the entry is destroyed exactly once,
 * after both.  A remove (not a put) reclaims at once. */
static void lease_released_elsewhere_before_the_reclaim(void **state) {
  (void)state;
  t_ctx tc = {0};
  ccache *c = t_open(&tc, 2, U, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  put_n(c, p, 1, 2);
  holder h;
  holder_start(&h, c, 1);
  h.give_away = 1;
  t_put(c, 3, 3, p);                 /* evicts key 1 */
  ccache_lease_release(c, &h.lease); /* on this thread: counts in refs */
  assert_int_equal(tc.closures_destroyed, expect_asym() ? 0 : 1);
  assert_int_equal(ccache_remove(c, K(2)), CCACHE_OK);
  assert_int_equal(tc.closures_destroyed, 2);
  expect_blocks(c, 2, 1, 4, 2); /* membarrier: the first insert, the remove's reclaim */
  ccache_stats s = t_stats(c);
  assert_int_equal(s.leases_out, 0);
  holder_stop(&h);
  t_check(c, &tc);
  ccache_program_release(c, p);
  t_close(c);
  assert_int_equal(tc.closures_destroyed, 3);
}

/* A replacing put: the replaced entry waits like an evicted one, and a
 * fetch meanwhile finds the new closure. */
static void replaced_entry_waits_and_fetch_sees_the_new_one(void **state) {
  (void)state;
  t_ctx tc = {0};
  ccache *c = t_open(&tc, U, U, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  put_n(c, p, 1, 2);
  holder h;
  holder_start(&h, c, 2);
  t_put(c, 1, 1001, p);
  assert_int_equal(t_fetch_id(c, 1), 1001);
  assert_int_equal(tc.closures_destroyed, expect_asym() ? 0 : 1);
  holder_stop(&h);
  assert_int_equal(ccache_clear(c), CCACHE_OK);
  assert_int_equal(tc.closures_destroyed, 3);
  t_check(c, &tc);
  ccache_program_release(c, p);
  t_close(c);
}

/* ------------------------------------------------- hits during puts */

#define HP_KEYS    2048u
#define HP_ITEMS   1024u
#define HP_FETCHES (400000 / CCACHE_TEST_SCALE)
#define HP_PUTS    (60000 / CCACHE_TEST_SCALE)

typedef struct hitter {
  ccache *c;
  uint64_t seed;
  _Atomic int *stop;
  uint64_t hits, wrong, fetches;
} hitter;

static void *hitter_main(void *arg) {
  hitter *h = arg;
  uint64_t x = h->seed;
  for (int i = 0; i < HP_FETCHES && !atomic_load(h->stop); i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t k = (x >> 33) % HP_KEYS;
    ccache_lease l;
    h->fetches++;
    if (ccache_fetch(h->c, K(k), &l) != CCACHE_OK) continue;
    h->hits++;
    /* The closure of key k always has id k (replacements included). */
    if (t_id(l.closure) != (int)k) h->wrong++;
    ccache_lease_release(h->c, &l);
  }
  return NULL;
}

/* Two threads fetch while this one puts, evicts, replaces and (at first)
 * grows the table: every hit sees the closure of its key, and every entry
 * is destroyed exactly once. */
static void hits_during_puts_see_whole_entries(void **state) {
  (void)state;
  t_ctx tc = {0};
  ccache *c = t_open(&tc, HP_ITEMS, U, U);
  ccache_program *p = t_intern(c, 1, 100, 1);
  _Atomic int stop = 0;
  hitter hs[2] = {{c, 1, &stop, 0, 0, 0}, {c, 2, &stop, 0, 0, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, hitter_main, &hs[i]), 0);
  uint64_t x = 7;
  for (int i = 0; i < HP_PUTS; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t k = (x >> 33) % HP_KEYS;
    t_put(c, k, (int)k, p);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  assert_int_equal(hs[0].wrong + hs[1].wrong, 0);
  assert_true(hs[0].hits + hs[1].hits > 0);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.inserts, HP_PUTS);
  assert_int_equal(s.hits, hs[0].hits + hs[1].hits);
  assert_int_equal(s.leases_out, 0);
  assert_int_equal(ccache_clear(c), CCACHE_OK); /* reclaims what is pending */
  assert_int_equal(tc.closures_destroyed, HP_PUTS);
  t_check(c, &tc);
  ccache_program_release(c, p);
  t_close(c);
}

/* --------------------------------------------- the fallback, forced */

/* The child's side (the test binary run again with --child MODE): a seccomp
 * filter that fails membarrier(2) with errno (EPERM: what a container
 * profile does; ENOSYS: an old kernel), or the environment variable; then a
 * cache, two threads, evicting puts.  Exit status 0 when the cache reports
 * the fenced mode and the counts are exact. */
static int refuse_membarrier(int err) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static int child_main(const char *mode) {
  t_ctx tc = {0};
  ccache_config cfg;
  t_config(&cfg, &tc);
  cfg.max_items = 8;
  ccache *c = NULL;
  if (ccache_open(&cfg, &c) != CCACHE_OK) return 10;
  ccache_program *p = NULL;
  if (ccache_program_intern(c, PK(1), t_native(1), 1, &p) != CCACHE_OK) return 11;
  for (uint64_t k = 1; k <= 8; k++) ccache_put(c, K(k), t_closure((int)k), p);
  holder h;
  memset(&h, 0, sizeof h);
  h.c = c;
  h.key = 1;
  pthread_mutex_init(&h.mu, NULL);
  pthread_cond_init(&h.cv, NULL);
  if (pthread_create(&h.th, NULL, holder_main, &h) != 0) return 12;
  wait_stage(&h, 1);
  for (uint64_t k = 9; k < 9 + 100; k++) ccache_put(c, K(k), t_closure((int)k), p);
  ccache_stats s;
  ccache_stats_init(&s);
  ccache_stats_get(c, &s);
  uint64_t destroyed = tc.closures_destroyed; /* key 1 still held */
  set_stage(&h, 2);
  pthread_join(h.th, NULL);
  int rc = 0;
#ifndef READ_SIDE_ON_MAIN
  /* Fenced: one blocking per put, none heavy, every eviction at once. */
  if (s.read_side != CCACHE_READ_SIDE_FENCED || s.reader_blocks != 108 || s.heavy_barriers != 0)
    rc = 20;
#endif
  if (!h.hit || destroyed != 99 || tc.closures_destroyed != 100) rc = 21;
  fprintf(stderr, "child %s: rc %d, hit %d, destroyed %llu then %llu\n", mode, rc, h.hit,
          (unsigned long long)destroyed, (unsigned long long)tc.closures_destroyed);
  ccache_program_release(c, p);
  ccache_close(c);
  return rc;
}

static char self_exe[4096];

static int run_child(const char *mode) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (strcmp(mode, "eperm") == 0 && refuse_membarrier(EPERM) != 0) _exit(30);
    if (strcmp(mode, "enosys") == 0 && refuse_membarrier(ENOSYS) != 0) _exit(30);
    if (strcmp(mode, "env") == 0) setenv("CLOSURE_CACHE_MEMBARRIER", "off", 1);
    char *argv[] = {self_exe, (char *)"--child", (char *)mode, NULL};
    execv(self_exe, argv);
    _exit(31);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static void fallback_when_seccomp_refuses_membarrier(void **state) {
  (void)state;
  assert_int_equal(run_child("eperm"), 0);
}

static void fallback_when_the_kernel_lacks_membarrier(void **state) {
  (void)state;
  assert_int_equal(run_child("enosys"), 0);
}

static void fallback_when_turned_off_by_environment(void **state) {
  (void)state;
  assert_int_equal(run_child("env"), 0);
}

/* A fork child opens a cache and puts past two batches with a second
 * thread reading: its heavy barriers work (it registered again) or it fell
 * back; either way the counts are exact and nothing aborts.  Run in a
 * re-executed child (--child fork) that registers, then forks while it has
 * one thread (ThreadSanitizer refuses threads after a multi-threaded
 * fork). */
static int fork_grandchild(void) {
  t_ctx tc = {0};
  ccache_config cfg;
  t_config(&cfg, &tc);
  cfg.max_items = 8;
  ccache *c = NULL;
  ccache_program *p = NULL;
  if (ccache_open(&cfg, &c) != CCACHE_OK ||
      ccache_program_intern(c, PK(1), t_native(1), 1, &p) != CCACHE_OK)
    return 10;
  for (uint64_t k = 1; k <= 8; k++) ccache_put(c, K(k), t_closure((int)k), p);
  holder h;
  memset(&h, 0, sizeof h);
  h.c = c;
  h.key = 2;
  pthread_mutex_init(&h.mu, NULL);
  pthread_cond_init(&h.cv, NULL);
  if (pthread_create(&h.th, NULL, holder_main, &h) != 0) return 12;
  wait_stage(&h, 1);
  for (uint64_t k = 9; k < 9 + 2 * B + 2; k++) ccache_put(c, K(k), t_closure((int)k), p);
  ccache_stats s;
  ccache_stats_init(&s);
  ccache_stats_get(c, &s);
  set_stage(&h, 2);
  pthread_join(h.th, NULL);
  int rc = 0;
#ifndef READ_SIDE_ON_MAIN
#if defined(__SANITIZE_THREAD__)
  const uint64_t heavy = 2 * B + 2; /* every put blocks there */
#else
  const uint64_t heavy = 2;
#endif
  if (s.read_side == CCACHE_READ_SIDE_MEMBARRIER && s.heavy_barriers != heavy) rc = 20;
  if (s.read_side == CCACHE_READ_SIDE_FENCED && s.reader_blocks != 8 + 2 * B + 2) rc = 21;
  fprintf(stderr, "fork child: read_side %llu, heavy barriers %llu\n",
          (unsigned long long)s.read_side, (unsigned long long)s.heavy_barriers);
#endif
  ccache_program_release(c, p);
  ccache_close(c);
  return tc.closures_destroyed == 8 + 2 * B + 2 ? rc : 22;
}

static int fork_child_main(void) {
  t_ctx tc = {0};
  ccache *c = NULL;
  ccache_config cfg;
  t_config(&cfg, &tc);
  if (ccache_open(&cfg, &c) != CCACHE_OK) return 40; /* registers, in this process */
  ccache_close(c);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return 41;
  if (pid == 0) _exit(fork_grandchild());
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 42;
  return WEXITSTATUS(status);
}

static void fork_child_reads_and_reclaims(void **state) {
  (void)state;
  assert_int_equal(run_child("fork"), 0);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0)
    return strcmp(argv[2], "fork") == 0 ? fork_child_main() : child_main(argv[2]);
  ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (n <= 0) return 2;
  self_exe[n] = '\0';
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mode_is_membarrier_where_the_kernel_offers_it),
      cmocka_unit_test(evicting_puts_pay_one_heavy_barrier_per_batch),
      cmocka_unit_test(lease_released_elsewhere_before_the_reclaim),
      cmocka_unit_test(replaced_entry_waits_and_fetch_sees_the_new_one),
      cmocka_unit_test(hits_during_puts_see_whole_entries),
      cmocka_unit_test(fallback_when_seccomp_refuses_membarrier),
      cmocka_unit_test(fallback_when_the_kernel_lacks_membarrier),
      cmocka_unit_test(fallback_when_turned_off_by_environment),
      cmocka_unit_test(fork_child_reads_and_reclaims),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
