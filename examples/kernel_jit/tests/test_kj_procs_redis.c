/* test_kj_procs_redis.c: kernel_jit as processes with --redis - refused
 * without keys, processes sharing one Redis, a server killed mid-run or
 * absent at start, a disk tier filled from Redis above it, one of three
 * servers dead.  Built and registered only with redis-server and the Redis
 * tier (CMakeLists.txt).  Every count asserted is exact unless a comment
 * says why it cannot be. */
#include <inttypes.h>

#include "kj_procs_support.h"

#ifndef KJ_REDIS_SERVER
#error "KJ_REDIS_SERVER: the path of redis-server (set by CMake)"
#endif

/* A Redis test's own redis-server, on a free port of 127.0.0.1, stopped
 * (killed if need be) in the teardown. */
static int redis_setup(void **state) {
  if (dir_setup(state) != 0) return -1;
  fixture *fx = *state;
  if (kj_redis_start(&fx->redis, KJ_REDIS_SERVER) != 0) {
    teardown(state);
    return -1;
  }
  fx->has_redis = 1;
  return 0;
}

/* Safe by default (issue 35): --redis with neither keys nor --trust-unsigned
 * is refused before anything runs (exit 2, one line naming the ways out),
 * with or without a disk tier above it; the same with --trust-unsigned
 * runs (nothing listens there: every kernel compiles). */
static void redis_without_keys_refused(void **state) {
  (void)state;
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", kj_free_port());
  char *plain[] = {EXE, "--kernels", "2", "--redis", addr, NULL};
  kj_child c;
  int status = kj_run(&c, plain);
  if (status != 2) fprintf(stderr, "exit %d, stdout '%s', stderr '%s'\n", status, c.out, c.err);
  assert_int_equal(status, 2);
  assert_non_null(strstr(c.err, "--trusted-key"));
  assert_non_null(strstr(c.err, "--trust-unsigned"));
  kj_child_free(&c);
  assert_usage_error(plain);
  char *opted[] = {EXE, "--json", "--kernels", "2", "--redis", addr, "--trust-unsigned", NULL};
  jit_out r;
  kj_run(&c, opted);
  parse(&c, &r);
  kj_child_free(&c);
  assert_int_equal(r.compiles, 2);
}

/* 4 processes released together against one Redis, no disk tier: each
 * kernel compiled exactly once in the fleet; a fifth process compiles 0. */
static void redis_four_processes_then_fifth(void **state) {
  kj_redis *srv = &((fixture *)*state)->redis;
  char ref[40];
  reference_checksum(ref);
  char *argv[12];
  argv_for(argv, "--redis", srv->addr, NULL, NULL);
  kj_child c[4];
  assert_int_equal(kj_run_together(c, 4, argv), 0);
  uint64_t compiles = 0;
  for (int i = 0; i < 4; i++) {
    jit_out r;
    parse(&c[i], &r);
    fprintf(stderr,
            "process %d: %" PRIu64 " compiles, %" PRIu64 " tier hits, %" PRIu64 " lock waits\n", i,
            r.compiles, r.tier_hits, r.lock_waits);
    assert_int_equal(r.compiles + r.tier_hits, K);
    assert_int_equal(r.tier_errors, 0);
    assert_int_equal(r.tier_corrupt, 0);
    assert_string_equal(r.checksum, ref);
    compiles += r.compiles;
    kj_child_free(&c[i]);
  }
  assert_int_equal(compiles, K);
  jit_out fifth;
  run_jit(&fifth, "--redis", srv->addr, NULL, NULL);
  assert_warm(&fifth, ref);
}

/* A run whose Redis is killed after 3 kernels (the run holds there until the
 * server is dead): the first 3 came from Redis, the other 7 are compiled
 * locally; the tier errors are counted, the process neither crashes nor
 * dies of SIGPIPE (it runs with SIGPIPE at its default action), and the
 * outputs are the same. */
static void redis_killed_mid_run(void **state) {
  kj_redis *srv = &((fixture *)*state)->redis;
  char ref[40];
  reference_checksum(ref);
  jit_out r;
  run_jit(&r, "--redis", srv->addr, NULL, NULL);
  assert_cold(&r, ref);

  char *argv[14];
  argv_for(argv, "--redis", srv->addr, "--hold-after", "3");
  kj_child c;
  assert_int_equal(kj_child_start(&c, argv, NULL), 0);
  assert_int_equal(kj_child_wait_output(&c, 2, "holding after 3 kernels"), 0);
  kj_redis_kill(srv);
  kj_child_close_stdin(&c);
  kj_child_finish(&c);
  parse(&c, &r); /* exit 0 */
  assert_int_equal(r.tier_hits, 3);
  assert_int_equal(r.compiles, K - 3);
  assert_true(r.tier_errors >= 1); /* how many ops fail per miss depends on the backend's retries */
  assert_int_equal(r.tier_corrupt, 0);
  assert_string_equal(r.checksum, ref);
  kj_child_free(&c);
}

/* Nothing listens at the address: every kernel compiles, the errors are
 * counted, the answer is the same; with a disk tier above it the disk tier
 * still works (and a warm run never needs Redis). */
static void redis_absent_at_start(void **state) {
  char ref[40], addr[64], dir[300];
  reference_checksum(ref);
  snprintf(addr, sizeof addr, "127.0.0.1:%d", kj_free_port());
  jit_out r;
  run_jit(&r, "--redis", addr, NULL, NULL);
  assert_int_equal(r.compiles, K);
  assert_int_equal(r.tier_hits, 0);
  assert_int_equal(r.tier_writes, 0);
  assert_true(r.tier_errors >= 1);
  assert_string_equal(r.checksum, ref);

  sub(*state, "cache", dir, sizeof dir);
  run_jit(&r, "--cache-dir", dir, "--redis", addr);
  assert_int_equal(r.compiles, K);
  assert_int_equal(r.tier_writes, K); /* the disk tier's; Redis's puts fail */
  assert_true(r.tier_errors >= 1);
  assert_string_equal(r.checksum, ref);
  run_jit(&r, "--cache-dir", dir, "--redis", addr);
  assert_warm(&r, ref); /* served by the disk tier: Redis never asked, no error */
}

/* Disk above Redis: a machine with an empty directory loads from Redis and
 * fills its directory, after which the directory alone serves it. */
static void redis_fills_disk_tier_above(void **state) {
  kj_redis *srv = &((fixture *)*state)->redis;
  char ref[40], one[300], two[300];
  reference_checksum(ref);
  sub(*state, "one", one, sizeof one);
  sub(*state, "two", two, sizeof two);
  jit_out r;
  run_jit(&r, "--cache-dir", one, "--redis", srv->addr);
  assert_int_equal(r.compiles, K);
  assert_int_equal(r.tier_misses, K);
  assert_int_equal(r.tier_writes, 2 * K); /* both tiers */
  assert_int_equal(r.tier_errors, 0);
  run_jit(&r, "--cache-dir", two, "--redis", srv->addr);
  assert_int_equal(r.compiles, 0);
  assert_int_equal(r.tier_hits, K);
  assert_int_equal(r.tier_writes, K); /* the fills of the directory above */
  assert_int_equal(r.tier_errors, 0);
  assert_string_equal(r.checksum, ref);
  run_jit(&r, "--cache-dir", two, NULL, NULL);
  assert_warm(&r, ref);
}

/* Three servers, one dead before the run (issue 23): the dead server's
 * kernels go to the next server of their rendezvous order in every
 * process, so 4 processes still compile each of 40 kernels once between
 * them (before fallback each process compiled the dead server's share).
 * 40 kernels, so the dead server's share (Binomial(40, 1/3)) is never
 * empty in practice. */
#define FB_K     40
#define FB_K_STR "40"
static void redis_one_of_three_dead_compiles_once(void **state) {
  fixture *fx = *state;
  kj_redis more[2];
  memset(more, 0, sizeof more);
  assert_int_equal(kj_redis_start(&more[0], KJ_REDIS_SERVER), 0);
  assert_int_equal(kj_redis_start(&more[1], KJ_REDIS_SERVER), 0);
  char list[200];
  snprintf(list, sizeof list, "%s,%s,%s", fx->redis.addr, more[0].addr, more[1].addr);
  kj_redis_kill(&more[0]);
  char *ref_argv[] = {(char *)EXE, "--json", "--kernels", FB_K_STR, NULL};
  kj_child c[4];
  assert_int_equal(kj_run(&c[0], ref_argv), 0);
  jit_out ref;
  parse(&c[0], &ref);
  kj_child_free(&c[0]);
  char *argv[] = {(char *)EXE, "--json", "--kernels",        FB_K_STR,
                  "--redis",   list,     "--trust-unsigned", NULL};
  assert_int_equal(kj_run_together(c, 4, argv), 0);
  uint64_t compiles = 0;
  for (int i = 0; i < 4; i++) {
    jit_out r;
    parse(&c[i], &r);
    fprintf(stderr,
            "process %d: %" PRIu64 " compiles, %" PRIu64 " tier hits, %" PRIu64 " tier errors\n", i,
            r.compiles, r.tier_hits, r.tier_errors);
    assert_int_equal(r.compiles + r.tier_hits, FB_K);
    assert_int_equal(r.tier_errors, 0); /* every op answered by a live server */
    assert_string_equal(r.checksum, ref.checksum);
    compiles += r.compiles;
    kj_child_free(&c[i]);
  }
  fprintf(stderr, "one of 3 servers dead: %" PRIu64 " compiles for %d kernels\n", compiles, FB_K);
  assert_int_equal(compiles, FB_K);
  for (int i = 0; i < 2; i++) {
    kj_redis_stop(&more[i]);
    kj_redis_free(&more[i]);
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(redis_without_keys_refused),
      cmocka_unit_test_setup_teardown(redis_four_processes_then_fifth, redis_setup, teardown),
      cmocka_unit_test_setup_teardown(redis_killed_mid_run, redis_setup, teardown),
      cmocka_unit_test_setup_teardown(redis_absent_at_start, dir_setup, teardown),
      cmocka_unit_test_setup_teardown(redis_fills_disk_tier_above, redis_setup, teardown),
      cmocka_unit_test_setup_teardown(redis_one_of_three_dead_compiles_once, redis_setup, teardown),
  };
  return KJ_RUN("kernel_jit_procs_redis", tests, argc, argv);
}
