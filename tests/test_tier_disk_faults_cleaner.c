/*
 * test_tier_disk_faults_cleaner.c - the directory tier's cleaner against
 * the faults of issue 20: the clean and the recount off the miss path (an
 * entry grown from outside, a missing size file), and the running total
 * under 4 processes x 2 threads writing, removing and cleaning at once.
 *
 * Forked children never use cmocka: they report through pipes and their
 * exit status.  The parent forks only while it has no other thread.
 */
#define _GNU_SOURCE 1 /* pthread_getname_np */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "disk_proc_support.h"
#include "disk_support.h"
#include "tier/disk/disk.h"
#include "tier/tier.h"

/* ---------------------------------------------- the clean off the miss path */

static pthread_t caller;
static _Atomic int scans, scans_on_caller, scans_elsewhere_named;
static _Atomic int *xscans; /* scans in every process (shared memory; one test) */
static int count_scans(const char *point) {
  if (strcmp(point, "scan") != 0) return 0;
  atomic_fetch_add(&scans, 1);
  if (xscans) atomic_fetch_add(xscans, 1);
  if (pthread_equal(pthread_self(), caller)) {
    atomic_fetch_add(&scans_on_caller, 1);
  } else {
    char name[16] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    if (strcmp(name, "ccache-clean") == 0) atomic_fetch_add(&scans_elsewhere_named, 1);
  }
  return 0;
}

/* Writes that keep crossing a small cap: every scan runs on the tier's
 * cleaner thread, none on the thread that missed. */
static void clean_runs_on_the_cleaner_thread(void **state) {
  (void)state;
  enum { PAYLOAD = 1000, PUTS = 60 };
  const uint64_t e = ccache__tier_entry_len(PAYLOAD);
  char *dir = t_tempdir("offpath");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  caller = pthread_self();
  scans = scans_on_caller = scans_elsewhere_named = 0;
  ccache__disk_fault = count_scans;
  ccache_tier *tier = t_disk_tier(dir, 10 * e, 60000);
  ccache *c = t_cache_over(&t, &tc, PAYLOAD, tier, T_DISK_TAG);
  assert_non_null(c);
  for (int i = 0; i < PUTS; i++) {
    assert_int_equal(t_goc(c, PK(i), &comp, CCACHE_OK), i);
    assert_true(ccache__disk_settle(tier, 30000));
  }
  t_close(c);
  ccache__disk_fault = NULL;
  /* 60 entries through a cap of 10, down to 9 each time: a clean every
   * second write after the first ten. */
  assert_true(scans >= 20);
  assert_int_equal(scans_on_caller, 0);
  assert_int_equal(scans_elsewhere_named, scans);
  t_tree_scan(dir);
  assert_true(t_tree_entries <= 10);
  assert_int_equal(t_size_total(dir), t_tree_bytes);
  t_rmrf(dir);
  free(dir);
}

/* An entry grown from outside (a planted 100 MiB file in an entry's
 * place): the write that replaces it takes more off the total than the
 * total holds.  The total is then known wrong, and the cleaner recounts the
 * directory, so the cap keeps working; without the recount it stayed at 0
 * while the entries stayed on disk. */
static void entry_grown_from_outside_recounts_the_total(void **state) {
  (void)state;
  char *dir = t_tempdir("drift");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 500, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  for (int i = 0; i < 8; i++) assert_int_equal(t_goc(c, PK(i), &comp, CCACHE_OK), i);
  t_close(c);
  t_tree_scan(dir);
  assert_int_equal(t_tree_entries, 8);
  assert_int_equal(t_size_total(dir), t_tree_bytes);
  char path[1024];
  t_entry_path(dir, T_DISK_TAG, PK(3), path, sizeof path);
  assert_int_equal(truncate(path, (off_t)100 << 20), 0); /* sparse: over the entry bound */
  ccache_tier *tier = t_disk_tier(dir, CCACHE_UNBOUNDED, 60000);
  c = t_cache_over(&t, &tc, 500, tier, T_DISK_TAG);
  int before = atomic_load(&comp.calls);
  assert_int_equal(t_goc(c, PK(3), &comp, CCACHE_OK), 3); /* oversize: compiled, replaced */
  assert_int_equal(atomic_load(&comp.calls), before + 1);
  assert_true(ccache__disk_settle(tier, 30000));
  t_close(c);
  t_tree_scan(dir);
  assert_int_equal(t_tree_entries, 8);
  assert_int_equal(t_size_total(dir), t_tree_bytes);
  t_rmrf(dir);
  free(dir);
}

/* A size file deleted (or damaged) between runs: ccache_open does not
 * count the directory; the cleaner thread does, and the total is right. */
static void missing_size_file_recounted_off_the_open_path(void **state) {
  (void)state;
  char *dir = t_tempdir("recount");
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 500, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  for (int i = 0; i < 12; i++) assert_int_equal(t_goc(c, PK(i), &comp, CCACHE_OK), i);
  t_close(c);
  char sizef[1200];
  snprintf(sizef, sizeof sizef, "%s/v1/size", dir);
  assert_int_equal(unlink(sizef), 0);
  caller = pthread_self();
  scans = scans_on_caller = scans_elsewhere_named = 0;
  ccache__disk_fault = count_scans;
  ccache_tier *tier = t_disk_tier(dir, CCACHE_UNBOUNDED, 60000);
  c = t_cache_over(&t, &tc, 500, tier, T_DISK_TAG);
  assert_non_null(c);
  assert_true(ccache__disk_settle(tier, 30000));
  assert_int_equal(scans_on_caller, 0);
  assert_int_equal(scans, 1);
  /* A write after the recount counts on top of it. */
  assert_int_equal(t_goc(c, PK(100), &comp, CCACHE_OK), 100);
  t_close(c);
  ccache__disk_fault = NULL;
  t_tree_scan(dir);
  assert_int_equal(t_tree_entries, 13);
  assert_int_equal(t_size_total(dir), t_tree_bytes);
  t_rmrf(dir);
  free(dir);
}

/* ------------------------------------------------- the total stays exact */

enum { XPROCS = 4, XTHREADS = 2, XKEYS = 512, XMAXLEN = 2000 };
#define XOPS (600 / CCACHE_TEST_SCALE > 60 ? 600 / CCACHE_TEST_SCALE : 60)

typedef struct xarg {
  ccache_tier *t;
  uint64_t seed;
  int bad;
} xarg;

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

/* Keys spread over the folders (key.hi's top byte), so a clean's listing
 * takes a while and writes land in folders it has yet to read. */
static ccache_key XK(uint64_t n) {
  ccache_key k = {n, n * 0x9E3779B97F4A7C15ull};
  return k;
}

/* Puts of random sizes over the same keys in every process (so entries
 * are replaced and removed under each other), and removes, until the
 * first thread of any process has done XOPS (a flag shared by the
 * processes): the writing ends everywhere at once, with no quiet stretch
 * for a last clean to count alone. */
static unsigned char blob[XMAXLEN];
static _Atomic int *xstop;
static void *xwriter(void *p) {
  xarg *a = p;
  for (int i = 0; !atomic_load(xstop); i++) {
    /* Stop after XOPS once some cleaner has scanned while writes go on (a
     * slow sanitizer run may start its cleaners late), or at 50 x XOPS. */
    if (i >= XOPS && (atomic_load(xscans) > 0 || i >= 50 * XOPS)) atomic_store(xstop, 1);
    ccache_key k = XK(lcg(&a->seed) % XKEYS);
    if (lcg(&a->seed) % 10 < 8) {
      size_t len = 64 + lcg(&a->seed) % (XMAXLEN - 64);
      /* CCACHE_EBUSY: withheld at the cap's bound, the cleaner behind for
       * io_lock_ms (a loaded sanitizer run): nothing published, nothing
       * to account, so the total stays exact either way. */
      int rc = a->t->ops.put(a->t->state, k, blob, len);
      if (rc != CCACHE_OK && rc != CCACHE_EBUSY) a->bad++;
    } else {
      int rc = a->t->ops.remove(a->t->state, k);
      if (rc != CCACHE_OK && rc != CCACHE_MISS) a->bad++;
    }
  }
  return NULL;
}

/* Then, once every process is through that, each removes the first half
 * of the keys (and cleans nothing more): the total ends below the cap, so
 * no quiet final clean can hide what went wrong while they all ran. */
static void *xremover(void *p) {
  xarg *a = p;
  for (int k = 0; k < XKEYS / 2; k++) {
    int rc = a->t->ops.remove(a->t->state, XK((uint64_t)k));
    if (rc != CCACHE_OK && rc != CCACHE_MISS) a->bad++;
  }
  return NULL;
}

static int xprocess(const char *dir, int id, int gate, int done, int gate2, int report) {
  char b;
  if (read(gate, &b, 1) != 0) return 9; /* the parent closes the pipe: go */
  ccache_tier *t = t_disk_tier_io(dir, 64 * 1024, 2000);
  if (!t) return 10;
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash(T_DISK_TAG), ns);
  if (t->ops.attach(t->state, ns) != CCACHE_OK) return 11;
  pthread_t th[XTHREADS];
  xarg a[XTHREADS];
  for (int i = 0; i < XTHREADS; i++) {
    a[i] = (xarg){t, (uint64_t)(id * XTHREADS + i + 1) * 7919u, 0};
    if (pthread_create(&th[i], NULL, xwriter, &a[i]) != 0) return 12;
  }
  for (int i = 0; i < XTHREADS; i++) pthread_join(th[i], NULL);
  /* The writes crossed the cap, so one process's cleaner thread has a clean
   * to run; on a slow build (TSan) it may not have been scheduled yet.  Wait
   * for it (bounded: 20 s), so the removals below run with a cleaner that
   * has really cleaned. */
  for (int ms = 0; atomic_load(xscans) == 0 && ms < 20000; ms++) {
    struct timespec one = {0, 1000000L};
    nanosleep(&one, NULL);
  }
  if (write(done, "d", 1) != 1 || read(gate2, &b, 1) != 0) return 15;
  for (int i = 0; i < XTHREADS; i++)
    if (pthread_create(&th[i], NULL, xremover, &a[i]) != 0) return 12;
  int bad = 0;
  for (int i = 0; i < XTHREADS; i++) {
    pthread_join(th[i], NULL);
    bad += a[i].bad;
  }
  ccache_tier_free(t); /* stops the cleaner, writes what is pending */
  int n = atomic_load(&scans);
  if (write(report, &n, sizeof n) != (ssize_t)sizeof n) return 13;
  return bad ? 14 : 0;
}

static void exact_total_after_concurrent_writes_and_cleans(void **state) {
  (void)state;
  char *dir = t_tempdir("exact");
  int gate[2], rep[2], done[2], gate2[2];
  assert_int_equal(pipe(gate), 0);
  assert_int_equal(pipe(rep), 0);
  assert_int_equal(pipe(done), 0);
  assert_int_equal(pipe(gate2), 0);
  scans = 0;
  caller = pthread_self();
  xstop = mmap(NULL, sizeof *xstop, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(xstop != MAP_FAILED);
  atomic_store(xstop, 0);
  xscans = mmap(NULL, sizeof *xscans, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(xscans != MAP_FAILED);
  atomic_store(xscans, 0);
  ccache__disk_fault = count_scans; /* (inherited by the children) */
  fflush(NULL);
  for (int i = 0; i < XPROCS; i++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(gate[1]);
      close(rep[0]);
      close(done[0]);
      close(gate2[1]);
      int rc = xprocess(dir, i, gate[0], done[1], gate2[0], rep[1]);
      free(dir);
      _exit(rc);
    }
    t_kids[i] = pid;
  }
  ccache__disk_fault = NULL;
  close(gate[0]);
  close(rep[1]);
  close(done[1]);
  close(gate2[0]);
  close(gate[1]); /* all four start together */
  char d[XPROCS];
  assert_true(t_read_within(done[0], d, sizeof d, 120000)); /* all through the first part */
  close(done[0]);
  close(gate2[1]); /* the removals start together */
  for (int i = 0; i < XPROCS; i++) {
    assert_int_equal(t_wait_within(t_kids[i], 120000), 0);
    t_kids[i] = 0;
  }
  int total_scans = 0, n;
  for (int i = 0; i < XPROCS; i++) {
    assert_true(t_read_within(rep[0], &n, sizeof n, 1000));
    total_scans += n;
  }
  close(rep[0]);
  /* The cap (64 KiB) is well under what 512 keys of up to 2 KB hold: the
   * cleaners ran while the others wrote. */
  assert_true(total_scans >= 1);
  print_message("%d scans\n", total_scans);
  char ns[1024];
  t_ns_path(dir, T_DISK_TAG, ns, sizeof ns);
  t_tree_scan(dir);
  uint64_t recorded = t_size_total(dir);
  if (recorded != t_tree_bytes)
    fail_msg("recorded total %llu, entry files %llu (%d entries, %d scans)",
             (unsigned long long)recorded, (unsigned long long)t_tree_bytes, t_tree_entries,
             total_scans);
  munmap((void *)xstop, sizeof *xstop);
  munmap((void *)xscans, sizeof *xscans);
  xscans = NULL;
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(clean_runs_on_the_cleaner_thread, t_reap_kids),
      cmocka_unit_test_teardown(entry_grown_from_outside_recounts_the_total, t_reap_kids),
      cmocka_unit_test_teardown(missing_size_file_recounted_off_the_open_path, t_reap_kids),
      cmocka_unit_test_teardown(exact_total_after_concurrent_writes_and_cleans, t_reap_kids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
