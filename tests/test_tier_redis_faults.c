/*
 * test_tier_redis_faults.c - the Redis tier when a real server fails:
 * absent at start, killed and restarted, dropped connections, a slow
 * server's command timeout and a stopped one's connect timeout, out of
 * memory, SIGPIPE, and renewals past a stalled server.  Each test starts
 * its own redis-server processes (redis_support.c); without one they skip,
 * or fail when CCACHE_TEST_REQUIRE_REDIS=1.  Sockets across exec, the
 * remove race and health are test_tier_redis_faults_edges.c; a fake server
 * answering wrong or not at all is test_tier_redis_faults_fake.c.
 *
 * The real-time case (SIGSTOP, wall-clock bounds) runs with the argument
 * `realtime` (ctest tier_redis_faults_realtime, label realtime).  SIGPIPE
 * stays at its default action for the whole run (set in main).
 */
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "redis_tier_support.h"

/* -------------------------------------------------------------- faults */
static void redis_absent_at_start(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_redis_kill(s); /* its port and directory stay ours */
  t_be b;
  t_be_open_simple(&b, s->addr);
  assert_int_equal(t_counters(&b).connect_failures, 0); /* creating connects nothing */
  assert_int_equal(t_put_n(&b, 1, 10), CCACHE_EIO);
  void *l = NULL;
  assert_int_equal(b.ops.lock(b.r, PK(1), &l), CCACHE_EIO);
  assert_null(l);
  ccache__rcounters c = t_counters(&b);
  assert_int_equal(c.connects, 0);
  assert_true(c.connect_failures >= 1);
  assert_int_equal(c.connect_failures + c.refused_backoff, 2);
  assert_non_null(strstr(t_last_error(&b), "connect"));
  /* The server appears: the backend connects after its backoff. */
  assert_int_equal(t_redis_restart(s), 0);
  assert_int_equal(t_get_until_reachable(&b, 1, 10), CCACHE_MISS);
  assert_int_equal(t_put_n(&b, 1, 10), CCACHE_OK);
  assert_int_equal(t_get_check(&b, 1, 10), CCACHE_OK);
  assert_int_equal(t_counters(&b).connects, 1);
  t_be_close(&b);
  t_redis_stop(s);
}

static void redis_killed_mid_run_then_restarted(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  t_be b, slow;
  t_be_open(&b, &o, T_NS);
  o.reconnect_min_ms = o.reconnect_max_ms = 3600000; /* backoff longer than the test */
  t_be_open(&slow, &o, T_NS);
  assert_int_equal(t_put_n(&b, 1, 5000), CCACHE_OK);
  assert_int_equal(t_get_check(&slow, 1, 5000), CCACHE_OK);
  t_redis_kill(s);
  /* The pooled connections are seen closed before use (dropped, issue 33)
   * and the fresh connect fails: one failure each, then backoff. */
  assert_int_equal(t_get_check(&b, 1, 5000), CCACHE_EIO);
  assert_int_equal(t_counters(&b).connect_failures, 1);
  assert_int_equal(t_get_check(&slow, 1, 5000), CCACHE_EIO);
  for (int i = 0; i < 10; i++) assert_int_equal(t_put_n(&slow, 2, 10), CCACHE_EIO);
  ccache__rcounters c = t_counters(&slow);
  assert_int_equal(c.io_errors, 0);
  assert_int_equal(c.idle_closed, 1);
  assert_int_equal(c.refused_backoff, 10); /* no connect attempt while backing off */
  assert_int_equal(c.connect_failures, 1);
  /* Restarted (empty: no persistence): b reconnects, slow still waits. */
  assert_int_equal(t_redis_restart(s), 0);
  assert_int_equal(t_get_until_reachable(&b, 1, 5000), CCACHE_MISS);
  assert_int_equal(t_put_n(&b, 1, 5000), CCACHE_OK);
  assert_int_equal(t_get_check(&b, 1, 5000), CCACHE_OK);
  assert_int_equal(t_get_check(&slow, 1, 5000), CCACHE_EIO);
  assert_int_equal(t_counters(&slow).refused_backoff, 11);
  assert_int_equal(t_counters(&b).connects, 2);
  t_be_close(&b);
  t_be_close(&slow);
  t_redis_stop(s);
}

static void redis_dropped_connection(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_be b;
  t_be_open_simple(&b, s->addr);
  assert_int_equal(t_put_n(&b, 1, 100), CCACHE_OK);
  void *l = NULL;
  assert_int_equal(b.ops.lock(b.r, PK(2), &l), CCACHE_OK);
  assert_int_equal(b.ops.renew(b.r, l), CCACHE_OK);
  assert_int_equal(t_counters(&b).connects, 2);
  /* Kill every client but the admin one (SKIPME yes): pool and renewal.
   * Both are seen closed before the next command, dropped and replaced at
   * once: no I/O error, no backoff (issue 33). */
  assert_int_equal(t_redis_int(s, "CLIENT KILL TYPE normal"), 2);
  struct timespec fin = {0, 50000000}; /* the FINs are in (loopback: microseconds) */
  nanosleep(&fin, NULL);
  assert_int_equal(t_get_check(&b, 1, 100), CCACHE_OK);
  assert_int_equal(b.ops.renew(b.r, l), CCACHE_OK);
  b.ops.unlock(b.r, l);
  ccache__rcounters c = t_counters(&b);
  assert_int_equal(c.io_errors, 0);
  assert_int_equal(c.idle_closed, 2);
  assert_int_equal(c.connects, 4);
  t_be_close(&b);
  t_redis_stop(s);
}

static void redis_slow_server_command_timeout(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  o.command_timeout_ms = 250;
  t_be b;
  t_be_open(&b, &o, T_NS);
  assert_int_equal(t_put_n(&b, 1, 100), CCACHE_OK);
  t_redis_pause(s); /* the server stops answering */
  t_async_get g;
  pthread_t t;
  t_async_start(&g, &t, &b, 1, 100);
  int finished = t_async_wait(&g, T_WAIT_MS);
  t_redis_resume(s);
  pthread_join(t, NULL);
  assert_true(finished); /* the command timeout, not the server, ended it */
  assert_int_equal(g.rc, CCACHE_EIO);
  assert_int_equal(t_counters(&b).io_errors, 1);
  assert_non_null(strstr(t_last_error(&b), "GET"));
  /* Back to normal once the server answers again. */
  assert_int_equal(t_get_until_reachable(&b, 1, 100), CCACHE_OK);
  assert_int_equal(t_counters(&b).connects, 2);
  t_be_close(&b);
  t_redis_stop(s);
}

/* Connect timeout: the server is stopped and its accept queue (backlog 1)
 * is full, so the kernel drops further SYNs and a connect can only end by
 * the client's own timeout. */
static void redis_connect_timeout(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  static const char *const args[] = {"--tcp-backlog", "1", NULL};
  t_must_start(s, args);
  t_redis_pause(s);
  int fill[8];
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)s->port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < 8; i++) {
    fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(fill[i] >= 0);
    connect(fill[i], (struct sockaddr *)&a, sizeof a); /* EINPROGRESS or queued */
  }
  ccache_redis_options o;
  t_opts(&o, s->addr);
  o.connect_timeout_ms = 200;
  t_be b;
  t_be_open(&b, &o, T_NS);
  t_async_get g;
  pthread_t t;
  t_async_start(&g, &t, &b, 1, 10);
  int finished = t_async_wait(&g, T_WAIT_MS);
  for (int i = 0; i < 8; i++) close(fill[i]);
  t_redis_resume(s);
  pthread_join(t, NULL);
  assert_true(finished);
  assert_int_equal(g.rc, CCACHE_EIO);
  ccache__rcounters c = t_counters(&b);
  assert_int_equal(c.connect_failures, 1);
  assert_int_equal(c.connects, 0);
  assert_non_null(strstr(t_last_error(&b), "connect"));
  assert_non_null(strstr(t_last_error(&b), "timed out"));
  assert_int_equal(t_get_until_reachable(&b, 1, 10), CCACHE_MISS);
  t_be_close(&b);
  t_redis_stop(s);
}

static void redis_oom_under_maxmemory(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  static const char *const args[] = {"--maxmemory", "3mb", "--maxmemory-policy", "noeviction",
                                     NULL};
  t_must_start(s, args);
  t_be b;
  t_be_open_simple(&b, s->addr);
  int first_fail = -1, rc = CCACHE_OK;
  for (int i = 0; i < 256 && first_fail < 0; i++) {
    rc = t_put_n(&b, (uint64_t)i, 64 * 1024);
    if (rc != CCACHE_OK) first_fail = i;
  }
  assert_true(first_fail >= 0);
  assert_int_equal(rc, CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&b), "OOM command not allowed"));
  ccache__rcounters c = t_counters(&b);
  assert_int_equal(c.reply_errors, 1);
  assert_int_equal(c.io_errors + c.refused_backoff + c.connect_failures, 0);
  /* The connection is fine: a second write fails the same way (no backoff),
   * reads still work, and nothing reconnected. */
  assert_int_equal(t_put_n(&b, 1000, 64 * 1024), CCACHE_EIO);
  assert_int_equal(t_counters(&b).reply_errors, 2);
  if (first_fail > 0) assert_int_equal(t_get_check(&b, 0, 64 * 1024), CCACHE_OK);
  assert_int_equal(t_counters(&b).connects, 1);
  assert_int_equal(t_counters(&b).refused_backoff, 0);
  t_be_close(&b);
  t_redis_stop(s);
}

/* SIGPIPE: the server closes a pooled connection after it was taken (CLIENT
 * KILL from the hook, which runs after the connection's closed check and
 * before the command is sent: its FIN arrives, the socket is in
 * CLOSE_WAIT); the put writes a large value,
 * the server's kernel answers the first bytes with a reset, and the
 * following write() fails with EPIPE and raises SIGPIPE.  Run in a child
 * with SIGPIPE at its default action and unblocked: without the library's
 * guard the child dies of it. */
static int sigpipe_kill_next; /* the hook kills the connection once */

static void sigpipe_hook(void *arg, size_t server, const char *cmd) {
  (void)server;
  (void)cmd;
  if (!sigpipe_kill_next) return;
  sigpipe_kill_next = 0;
  if (t_redis_int(arg, "CLIENT KILL TYPE normal") != 1) abort();
  struct timespec ts = {0, 20000000}; /* the FIN is in */
  nanosleep(&ts, NULL);
}

static int sigpipe_child(t_redis_server *s) {
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, NULL);
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  o.servers = s->addr;
  o.reconnect_min_ms = o.reconnect_max_ms = 1;
  o.command_timeout_ms = 5000;
  ccache_tier_ops ops;
  ccache__redis *r;
  char why[256];
  if (ccache__redis_new(&o, &ops, &r, why, sizeof why) != CCACHE_OK) return 10;
  ccache__redis_set_hook(r, sigpipe_hook, s);
  size_t len = 16u << 20;
  unsigned char *big = calloc(1, len);
  if (!big) return 11;
  int code = 3; /* no SIGPIPE in 50 tries */
  unsigned long long deadline = t_redis_now_ms() + T_WAIT_MS;
  for (int i = 0; i < 50 && t_redis_now_ms() < deadline; i++) {
    if (ops.put(r, PK(1), "x", 1) != CCACHE_OK) { /* (re)connect the pool */
      t_redis_poll_pause();
      continue;
    }
    sigpipe_kill_next = 1;
    if (ops.put(r, PK(2), big, len) != CCACHE_EIO) return 13;
    ccache__rcounters c;
    ccache__rpool_counters(ccache__redis_pool(r), &c);
    if (c.sigpipes > 0) {
      code = 0;
      break;
    }
  }
  /* The signal mask is as before and nothing is left pending. */
  sigset_t mask, pending;
  pthread_sigmask(SIG_SETMASK, NULL, &mask);
  sigpending(&pending);
  if (code == 0 && (sigismember(&mask, SIGPIPE) || sigismember(&pending, SIGPIPE))) code = 4;
  free(big);
  ops.close(r);
  return code;
}

static void redis_sigpipe_default_disposition(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  struct sigaction sa;
  sigaction(SIGPIPE, NULL, &sa);
  assert_true(sa.sa_handler == SIG_DFL); /* main() made sure */
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) t_child_exit(sigpipe_child(s)); /* no admin connection yet to share */
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status)) fail_msg("the child died of signal %d", WTERMSIG(status));
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  t_redis_stop(s);
}

/* ------------------------------------------------------ a stalled server */
/* Item 1: a stalled server never starves the renewals of another.  This
 * process holds a lease on server A (an outer compile) and, nested, one on
 * server B for a 3 s compile (lease_ms 600, command_timeout_ms 2000); A is
 * SIGSTOPped as the inner compile starts, so A's next renew (due within
 * lease/3) blocks for the whole command timeout.  B's lease must never
 * lapse, and a second process waiting on B's key must load the entry
 * published at the end (0 compiles). */
#define STALL_LEASE_MS   600
#define STALL_TIMEOUT_MS 2000
#define STALL_COMPILE_MS 3000

static uint64_t stall_key_a, stall_key_b;
static int stall_go_fd = -1;
static char stall_lease_b[256];
static long long stall_min_pttl;
static int stall_lapsed;

static int stall_inner_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                               uint64_t *cost_out) {
  (void)ud, (void)c;
  t_redis_pause(&t_servers[0]); /* A stops answering: its renew is due within lease/3 */
  if (write(stall_go_fd, "G", 1) != 1) stall_lapsed = 1; /* the waiter starts */
  unsigned long long end = t_redis_now_ms() + STALL_COMPILE_MS;
  stall_min_pttl = STALL_LEASE_MS;
  while (t_redis_now_ms() < end) { /* the compile: 3 s, watching B's lease */
    long long pttl = t_redis_int(&t_servers[1], "PTTL %s", stall_lease_b);
    if (pttl < 0) stall_lapsed = 1; /* -2: gone (lapsed) */
    if (pttl < stall_min_pttl) stall_min_pttl = pttl;
    t_redis_poll_pause();
  }
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return 0;
}

static int stall_outer_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                               uint64_t *cost_out) {
  (void)ud;
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(c, PK(stall_key_b), stall_inner_compile, NULL, &p);
  if (rc == CCACHE_OK) ccache_program_release(c, p);
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return rc;
}

static void redis_e2e_stalled_server_never_starves_renewals(void **state) {
  (void)state;
  t_need_redis();
  t_must_start(&t_servers[0], NULL);
  t_must_start(&t_servers[1], NULL);
  char list[80];
  snprintf(list, sizeof list, "%s,%s", t_servers[0].addr, t_servers[1].addr);
  t_be pick;
  t_be_open_simple(&pick, list);
  stall_key_a = stall_key_b = 0;
  for (uint64_t n = 200; n < 400 && (!stall_key_a || !stall_key_b); n++) {
    size_t srv = ccache__redis_server_of(pick.r, PK(n));
    if (srv == 0 && !stall_key_a) stall_key_a = n;
    if (srv == 1 && !stall_key_b) stall_key_b = n;
  }
  t_be_close(&pick);
  assert_true(stall_key_a && stall_key_b);
  t_e2e_entry_key(stall_lease_b, sizeof stall_lease_b, T_E2E_TAG, stall_key_b);
  strcat(stall_lease_b, ":lease");

  int go[2], out[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(out), 0);
  fflush(NULL);
  pid_t w = fork();
  assert_true(w >= 0);
  if (w == 0) { /* the second process: waits on B's key */
    close(go[1]);
    char g;
    if (read(go[0], &g, 1) != 1) t_child_exit(30);
    atomic_store(&t_e2e_compiles, 0);
    ccache_redis_options o;
    t_opts(&o, list);
    o.lease_ms = STALL_LEASE_MS;
    o.command_timeout_ms = STALL_TIMEOUT_MS;
    o.poll_ms = 5;
    o.poll_max_ms = 50;
    o.wait_ms = 4 * STALL_COMPILE_MS; /* a lease held to the end is waited for */
    t_ctx wctx = {0};
    ccache *wc = t_e2e_open(&wctx, &o, T_E2E_TAG);
    int id = t_e2e_get(wc, stall_key_b);
    t_fleet_send(out[1], wc, id == (int)stall_key_b || id == (int)stall_key_b + 100000);
    ccache_close(wc);
    t_child_exit(0);
  }
  close(go[0]);
  stall_go_fd = go[1];
  stall_lapsed = 0;
  atomic_store(&t_e2e_compiles, 0);
  ccache_redis_options o;
  t_opts(&o, list);
  o.lease_ms = STALL_LEASE_MS;
  o.command_timeout_ms = STALL_TIMEOUT_MS;
  o.reconnect_min_ms = o.reconnect_max_ms = 60000; /* A, once failed, is left alone */
  t_ctx ctx = {0};
  ccache *c = t_e2e_open(&ctx, &o, T_E2E_TAG);
  ccache_program *p = NULL;
  unsigned long long t0 = t_redis_now_ms();
  int rc = ccache_program_get_or_compile(c, PK(stall_key_a), stall_outer_compile, NULL, &p);
  unsigned long long took = t_redis_now_ms() - t0;
  if (rc == CCACHE_OK) ccache_program_release(c, p);
  t_redis_resume(&t_servers[0]);
  t_fleet_report rep;
  int got = t_fleet_recv(out[0], &rep);
  int st = 0;
  assert_int_equal(waitpid(w, &st, 0), w);
  ccache_stats cs = t_stats(c);
  print_message(
      "B's lease: lowest PTTL %lld ms, lapsed %d; the waiter: compiles %llu, tier hits "
      "%llu; here: leases lost %llu, tier errors %llu (%llu ms)\n",
      stall_min_pttl, stall_lapsed, (unsigned long long)rep.compiles,
      (unsigned long long)rep.tier_hits, (unsigned long long)cs.tier_leases_lost,
      (unsigned long long)cs.tier_errors, took);
  assert_int_equal(rc, CCACHE_OK);
  assert_int_equal(got, 0);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_true(rep.ok);
  assert_false(stall_lapsed);
  assert_int_equal(rep.compiles, 0); /* loaded what this process published */
  assert_int_equal(rep.tier_hits, 1);
  assert_int_equal(cs.program_compiles, 2);
  assert_int_equal(cs.tier_leases_lost, 1); /* A's, and only A's */
  close(go[1]);
  close(out[0]);
  close(out[1]);
  t_close(c);
  t_redis_stop(&t_servers[0]);
  t_redis_stop(&t_servers[1]);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_absent_at_start, t_stop_all),
      cmocka_unit_test_teardown(redis_killed_mid_run_then_restarted, t_stop_all),
      cmocka_unit_test_teardown(redis_dropped_connection, t_stop_all),
      cmocka_unit_test_teardown(redis_slow_server_command_timeout, t_stop_all),
      cmocka_unit_test_teardown(redis_connect_timeout, t_stop_all),
      cmocka_unit_test_teardown(redis_oom_under_maxmemory, t_stop_all),
      cmocka_unit_test_teardown(redis_sigpipe_default_disposition, t_stop_all),
  };
  /* Real-time fault tests (SIGSTOP, timeouts measured on the wall clock):
   * `test_tier_redis_faults realtime` runs them (CTest label realtime: plain
   * and checked builds only, not under the sanitizers or valgrind). */
  const struct CMUnitTest realtime[] = {
      cmocka_unit_test_teardown(redis_e2e_stalled_server_never_starves_renewals, t_stop_all),
  };
  if (argc > 1 && strcmp(argv[1], "realtime") == 0)
    return cmocka_run_group_tests_name("realtime", realtime, NULL, NULL);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
