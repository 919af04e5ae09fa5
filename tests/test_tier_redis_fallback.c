/*
 * test_tier_redis_fallback.c - the Redis tier's rendezvous fallback: a
 * key's order is its removal order, a dead server's keys are written to
 * and read from the next server and given back when it returns, and fleets
 * of processes compile each key once with a server dead or killed
 * mid-run.  Each test starts its own redis-server processes
 * (redis_support.c); without one they skip, or fail when
 * CCACHE_TEST_REQUIRE_REDIS=1.
 *
 * The real-time case runs with the argument `realtime` (ctest
 * tier_redis_fallback_realtime, label realtime).  SIGPIPE stays at its
 * default action for the whole run (set in main).
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis_tier_support.h"

/* ------------------------------------------------------------ fallback */
/* A key's rendezvous order is the order it would move in as servers are
 * removed: its second server is where it maps without its first, its third
 * where it maps without both.  (No server is contacted.) */
static void redis_rendezvous_order_is_the_removal_order(void **state) {
  (void)state;
  static const char *const names[3] = {"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"};
  t_be all, without[3];
  t_be_open_simple(&all, "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003");
  for (int d = 0; d < 3; d++) {
    char two[64];
    snprintf(two, sizeof two, "%s,%s", names[(d + 1) % 3], names[(d + 2) % 3]);
    t_be_open_simple(&without[d], two);
  }
  ccache__rpool *p = ccache__redis_pool(all.r);
  int second_moved[3] = {0, 0, 0};
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) {
    uint8_t order[3];
    ccache__rendezvous_order(p->servers, p->n, PK(k), order);
    assert_int_equal(order[0], ccache__redis_server_of(all.r, PK(k)));
    assert_true(order[0] != order[1] && order[1] != order[2] && order[0] != order[2]);
    ccache__rpool *q = ccache__redis_pool(without[order[0]].r);
    size_t alt = ccache__redis_server_of(without[order[0]].r, PK(k));
    assert_string_equal(q->servers[alt].name, names[order[1]]);
    second_moved[order[1]]++;
  }
  for (int i = 0; i < 3; i++) assert_true(second_moved[i] > 0); /* fallbacks spread too */
  t_be_close(&all);
  for (int d = 0; d < 3; d++) t_be_close(&without[d]);
}

static uint64_t fb_count(t_be *b, size_t server, int writes) {
  ccache__rserver *sv = &ccache__redis_pool(b->r)->servers[server];
  return atomic_load(writes ? &sv->fallback_writes : &sv->fallback_reads);
}

/* A dead server's keys are written to the next server of their order and
 * read from there; when it comes back it takes its keys back: reads find
 * the fallback copy and fill it in, new writes and leases go to it. */
static void redis_fallback_written_read_filled_and_given_back(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = t_servers;
  for (int i = 0; i < 3; i++) t_must_start(&s[i], NULL);
  char list[200];
  snprintf(list, sizeof list, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  t_be b;
  t_be_open_simple(&b, list);
  ccache__rpool *p = ccache__redis_pool(b.r);
  long long share = 0;
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) share += ccache__redis_server_of(b.r, PK(k)) == 1;
  assert_true(share >= 60 && share <= 140); /* Binomial(300, 1/3) */
  t_redis_kill(&s[1]);
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) assert_int_equal(t_put_n(&b, k, 32), CCACHE_OK);
  assert_int_equal(t_redis_int(&s[0], "DBSIZE") + t_redis_int(&s[2], "DBSIZE"), T_SPREAD_KEYS);
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) {
    uint8_t order[3];
    ccache__rendezvous_order(p->servers, p->n, PK(k), order);
    if (order[0] != 1) continue;
    char key[256];
    t_entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", k);
    assert_int_equal(t_redis_int(&s[order[1]], "EXISTS %s", key), 1);
  }
  assert_int_equal(fb_count(&b, 0, 1) + fb_count(&b, 2, 1), share);
  assert_int_equal(fb_count(&b, 1, 1), 0);
  /* Read back while s[1] is down: every key hits, s[1]'s on their fallback. */
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) assert_int_equal(t_get_check(&b, k, 32), CCACHE_OK);
  assert_int_equal(fb_count(&b, 0, 0) + fb_count(&b, 2, 0), share);

  /* s[1] comes back empty: its keys miss there, hit on the fallback and are
   * copied back to it. */
  assert_int_equal(t_redis_restart(&s[1]), 0);
  t_wait_backoff_over(&b, 1);
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) assert_int_equal(t_get_check(&b, k, 32), CCACHE_OK);
  assert_int_equal(t_redis_int(&s[1], "DBSIZE"), share);
  assert_int_equal(fb_count(&b, 0, 0) + fb_count(&b, 2, 0), 2 * share);
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) assert_int_equal(t_get_check(&b, k, 32), CCACHE_OK);
  assert_int_equal(fb_count(&b, 0, 0) + fb_count(&b, 2, 0), 2 * share); /* all first hits */
  assert_int_equal(fb_count(&b, 1, 0), 0);
  /* New keys of s[1]: entry and lease there. */
  int checked = 0;
  for (uint64_t k = T_SPREAD_KEYS; k < T_SPREAD_KEYS + 60; k++) {
    if (ccache__redis_server_of(b.r, PK(k)) != 1) continue;
    assert_int_equal(t_put_n(&b, k, 32), CCACHE_OK);
    void *l = NULL;
    assert_int_equal(b.ops.lock(b.r, PK(k), &l), CCACHE_OK);
    char key[256];
    t_entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", k);
    assert_int_equal(t_redis_int(&s[1], "EXISTS %s", key), 1);
    assert_int_equal(t_redis_int(&s[1], "EXISTS %s:lease", key), 1);
    b.ops.unlock(b.r, l);
    checked++;
  }
  assert_true(checked > 0);
  assert_int_equal(fb_count(&b, 0, 1) + fb_count(&b, 2, 1), share); /* no new fallback write */
  t_be_close(&b);
  for (int i = 0; i < 3; i++) t_redis_stop(&s[i]);
}

/* Fork n fleet children over list (ready_fd: see t_fleet_child2). */
static void fleet_fork(pid_t *pid, int n, const char *list, int go_rd, int ready_wr, int out_wr,
                       int *close_in_child, int n_close) {
  fflush(NULL);
  for (int i = 0; i < n; i++) {
    pid[i] = fork();
    assert_true(pid[i] >= 0);
    if (pid[i] == 0) {
      for (int j = 0; j < n_close; j++) close(close_in_child[j]);
      t_fleet_child2(list, go_rd, ready_wr, out_wr, i * (T_FLEET_KEYS / 8));
    }
  }
}

/* Reports of n children, summed per key into per_key (fleet-wide). */
static uint64_t fleet_collect(pid_t *pid, int n, int out_rd, uint32_t *per_key, uint64_t *errors) {
  uint64_t compiles = 0;
  *errors = 0;
  memset(per_key, 0, T_E2E_KEYS_COUNTED * sizeof *per_key);
  for (int i = 0; i < n; i++) {
    t_fleet_report rep;
    assert_int_equal(t_fleet_recv(out_rd, &rep), 0);
    assert_true(rep.ok); /* every fetch gave the right program */
    compiles += rep.compiles;
    *errors += rep.tier_errors;
    for (int k = 0; k < T_E2E_KEYS_COUNTED; k++) per_key[k] += rep.per_key[k];
  }
  for (int i = 0; i < n; i++) {
    int st = 0;
    assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  return compiles;
}

/* The server of list's three with the most of keys from..T_FLEET_KEYS (the
 * ports, hence the shares, change from run to run); *share: how many. */
static int fleet_victim(const char *list, uint64_t from, int *share) {
  t_be b;
  t_be_open_simple(&b, list);
  int n[3] = {0, 0, 0};
  for (uint64_t k = from; k <= T_FLEET_KEYS; k++) n[ccache__redis_server_of(b.r, PK(k))]++;
  t_be_close(&b);
  int v = 0;
  for (int i = 1; i < 3; i++)
    if (n[i] > n[v]) v = i;
  *share = n[v];
  return v;
}

/* Three servers, one dead before the run: 4 processes still compile each
 * key once between them (its keys go to their fallback, where the
 * processes all look).  Before fallback, each process compiled the dead
 * server's share itself. */
static void redis_e2e_one_server_dead_fleet_compiles_each_key_once(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = t_servers;
  for (int i = 0; i < 3; i++) t_must_start(&s[i], NULL);
  char list[200];
  snprintf(list, sizeof list, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  int share;
  int v = fleet_victim(list, 1, &share); /* >= 8 of 24 */
  t_redis_kill(&s[v]);
  int go[2], out[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(out), 0);
  pid_t pid[4];
  int cl[2] = {go[1], out[0]};
  fleet_fork(pid, 4, list, go[0], -1, out[1], cl, 2);
  close(go[0]);
  assert_int_equal(write(go[1], "GGGG", 4), 4);
  close(go[1]);
  uint32_t per_key[T_E2E_KEYS_COUNTED];
  uint64_t errors;
  uint64_t compiles = fleet_collect(pid, 4, out[0], per_key, &errors);
  print_message("one of 3 servers dead (%d of %d keys its own): 4 processes, %llu compiles\n",
                share, T_FLEET_KEYS, (unsigned long long)compiles);
  for (int k = 1; k <= T_FLEET_KEYS; k++) assert_int_equal(per_key[k], 1);
  assert_int_equal(compiles, T_FLEET_KEYS);
  assert_int_equal(errors, 0); /* every op answered by a live server */
  long long stored = 0;
  for (int i = 0; i < 3; i++) stored += i == v ? 0 : t_redis_int(&s[i], "DBSIZE");
  assert_int_equal(stored, T_FLEET_KEYS);
  close(out[0]);
  close(out[1]);
  for (int i = 0; i < 3; i++) t_redis_stop(&s[i]);
}

/* Killed between two halves of a run (every process has used it, and holds
 * pooled connections to it): each process's next op on it fails, and from
 * then on its keys go to their fallback in every process, so the second
 * half too compiles each key once. */
static void redis_e2e_server_killed_between_halves_compiles_each_key_once(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = t_servers;
  for (int i = 0; i < 3; i++) t_must_start(&s[i], NULL);
  char list[200];
  snprintf(list, sizeof list, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  int late; /* the victim's keys in the second half: >= 4 of 12 */
  int v = fleet_victim(list, T_FLEET_KEYS / 2 + 1, &late);
  int go[2], ready[2], out[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(out), 0);
  pid_t pid[4];
  int cl[3] = {go[1], out[0], ready[0]};
  fleet_fork(pid, 4, list, go[0], ready[1], out[1], cl, 3);
  close(go[0]);
  close(ready[1]);
  assert_int_equal(write(go[1], "GGGG", 4), 4);
  for (int i = 0; i < 4; i++) { /* bounded: a child that dies closes its end */
    char r;
    assert_int_equal(read(ready[0], &r, 1), 1);
  }
  t_redis_kill(&s[v]);
  assert_int_equal(write(go[1], "GGGG", 4), 4);
  close(go[1]);
  uint32_t per_key[T_E2E_KEYS_COUNTED];
  uint64_t errors;
  uint64_t compiles = fleet_collect(pid, 4, out[0], per_key, &errors);
  print_message(
      "killed between halves (%d second-half keys its own): %llu compiles, %llu tier "
      "errors\n",
      late, (unsigned long long)compiles, (unsigned long long)errors);
  for (int k = 1; k <= T_FLEET_KEYS; k++) assert_int_equal(per_key[k], 1);
  assert_int_equal(compiles, T_FLEET_KEYS);
  close(ready[0]);
  close(out[0]);
  close(out[1]);
  for (int i = 0; i < 3; i++) t_redis_stop(&s[i]);
}

/* Killed at an arbitrary point while 4 processes run: every fetch is
 * right, every key of the other servers still compiles once, and a key of
 * the killed server at most once more per process (the guarantee of the
 * header's "Fallback" paragraph). */
static void redis_e2e_server_killed_mid_run_one_extra_per_process_at_most(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = t_servers;
  for (int i = 0; i < 3; i++) t_must_start(&s[i], NULL);
  char list[200];
  snprintf(list, sizeof list, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  int share;
  int v = fleet_victim(list, 1, &share);
  int go[2], out[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(out), 0);
  pid_t pid[4];
  int cl[2] = {go[1], out[0]};
  fleet_fork(pid, 4, list, go[0], -1, out[1], cl, 2);
  close(go[0]);
  assert_int_equal(write(go[1], "GGGG", 4), 4);
  close(go[1]);
  /* Kill once the victim holds its first entry (a bounded wait). */
  unsigned long long deadline = t_redis_now_ms() + T_WAIT_MS;
  while (t_redis_int(&s[v], "DBSIZE") < 1 && t_redis_now_ms() < deadline) t_redis_poll_pause();
  t_redis_kill(&s[v]);
  uint32_t per_key[T_E2E_KEYS_COUNTED];
  uint64_t errors;
  uint64_t compiles = fleet_collect(pid, 4, out[0], per_key, &errors);
  print_message("killed mid-run (%d of %d keys its own): %llu compiles\n", share, T_FLEET_KEYS,
                (unsigned long long)compiles);
  t_be pick;
  t_be_open_simple(&pick, list);
  for (uint64_t k = 1; k <= T_FLEET_KEYS; k++) {
    if (ccache__redis_server_of(pick.r, PK(k)) == (size_t)v)
      assert_true(per_key[k] >= 1 && per_key[k] <= 4); /* the fleet's one + one per other process */
    else
      assert_int_equal(per_key[k], 1);
  }
  t_be_close(&pick);
  assert_true(compiles <= (uint64_t)(T_FLEET_KEYS + 4 * share));
  close(out[0]);
  close(out[1]);
  for (int i = 0; i < 3; i++) t_redis_stop(&s[i]);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_rendezvous_order_is_the_removal_order, t_stop_all),
      cmocka_unit_test_teardown(redis_fallback_written_read_filled_and_given_back, t_stop_all),
      cmocka_unit_test_teardown(redis_e2e_one_server_dead_fleet_compiles_each_key_once, t_stop_all),
      cmocka_unit_test_teardown(redis_e2e_server_killed_between_halves_compiles_each_key_once,
                                t_stop_all),
  };
  /* Real-time fault tests (SIGSTOP, timeouts measured on the wall clock):
   * `test_tier_redis_fallback realtime` runs them (CTest label realtime: plain
   * and checked builds only, not under the sanitizers or valgrind). */
  const struct CMUnitTest realtime[] = {
      cmocka_unit_test_teardown(redis_e2e_server_killed_mid_run_one_extra_per_process_at_most,
                                t_stop_all),
  };
  if (argc > 1 && strcmp(argv[1], "realtime") == 0)
    return cmocka_run_group_tests_name("realtime", realtime, NULL, NULL);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
