/*
 * test_tier_redis_faults.c - the Redis tier when servers and connections
 * fail: absent at start, killed and restarted, dropped connections, slow or
 * silent servers, timeouts, out of memory, SIGPIPE, fork children, sockets
 * across exec, the remove race, health fields, and renewals past a stalled
 * server.  Each test starts its own redis-server processes
 * (redis_support.c); without one they skip, or fail when
 * CCACHE_TEST_REQUIRE_REDIS=1.
 *
 * The real-time cases (SIGSTOP, wall-clock bounds) run with the argument
 * `realtime` (ctest tier_redis_faults_realtime, label realtime).  SIGPIPE
 * stays at its default action for the whole run (set in main).
 */
#include <errno.h>
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

/* ------------------------------------------------------ issue 20 faults */

/* The socket inode of a connection, as /proc/<pid>/fd shows it. */
static unsigned long sock_ino(int fd) {
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  return (unsigned long)st.st_ino;
}

/* fork + exec `ls -l /proc/self/fd` and return its output (malloc'd). */
static char *exec_ls_fds(void) {
  int out[2];
  assert_int_equal(pipe(out), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(out[1], 1);
    execl("/bin/ls", "ls", "-l", "/proc/self/fd", (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  size_t cap = 1 << 16, got = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  ssize_t n;
  while ((n = read(out[0], buf + got, cap - 1 - got)) > 0) got += (size_t)n;
  buf[got] = '\0';
  close(out[0]);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return buf;
}

/* Item 5: the tier's sockets (a pooled connection and the renewal one, TCP
 * and unix) never reach an exec'd child. */
static void redis_sockets_close_on_exec(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  char list[400];
  snprintf(list, sizeof list, "%s,%s", s->addr, s->unix_addr);
  t_be b;
  t_be_open_simple(&b, list);
  /* A key on each server: a pooled connection and a renewal one on each. */
  uint64_t key_of[2] = {0, 0};
  for (uint64_t n = 1; n < 100 && (!key_of[0] || !key_of[1]); n++) {
    size_t srv = ccache__redis_server_of(b.r, PK(n));
    if (!key_of[srv]) key_of[srv] = n;
  }
  assert_true(key_of[0] && key_of[1]);
  void *l[2];
  for (int i = 0; i < 2; i++) {
    assert_int_equal(t_put_n(&b, key_of[i], 100), CCACHE_OK);
    assert_int_equal(b.ops.lock(b.r, PK(key_of[i]), &l[i]), CCACHE_OK);
    assert_int_equal(b.ops.renew(b.r, l[i]), CCACHE_OK);
  }
  ccache__rpool *p = ccache__redis_pool(b.r);
  unsigned long ino[4];
  int nino = 0;
  for (int i = 0; i < 2; i++) { /* under the locks the idle reaper takes */
    ccache__lock(&p->servers[i].server_mu);
    int n_idle = p->servers[i].n_idle;
    int fd = n_idle ? p->servers[i].idle[0]->fd : -1;
    ccache__unlock(&p->servers[i].server_mu);
    ccache__lock(&p->servers[i].renew_mu);
    int renew_fd = p->servers[i].renew_ctx ? p->servers[i].renew_ctx->fd : -1;
    ccache__unlock(&p->servers[i].renew_mu);
    assert_int_equal(n_idle, 1);
    ino[nino++] = sock_ino(fd);
    assert_true(renew_fd >= 0);
    ino[nino++] = sock_ino(renew_fd);
  }
  char *ls = exec_ls_fds();
  int leaked = 0;
  for (int i = 0; i < nino; i++) {
    char pat[48];
    snprintf(pat, sizeof pat, "socket:[%lu]", ino[i]);
    if (strstr(ls, pat)) {
      print_message("leaked into the child: %s\n", pat);
      leaked++;
    }
  }
  free(ls);
  for (int i = 0; i < 2; i++) b.ops.unlock(b.r, l[i]);
  t_be_close(&b);
  t_redis_stop(s);
  assert_int_equal(leaked, 0);
}

/* Item 4, the backend alone: remove_if deletes only the value read. */
static void redis_remove_if_only_the_value_read(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_be b;
  t_be_open_simple(&b, s->addr);
  unsigned char *old = t_payload(5, 3000), *newer = t_payload(6, 3000), *tiny = t_payload(7, 5);
  assert_int_equal(b.ops.put(b.r, PK(5), old, 3000), CCACHE_OK);
  /* Another process replaces it between our read and our remove. */
  assert_int_equal(b.ops.put(b.r, PK(5), newer, 3000), CCACHE_OK);
  assert_int_equal(b.ops.remove_if(b.r, PK(5), old, 3000), CCACHE_MISS);
  assert_int_equal(b.ops.remove_if(b.r, PK(5), newer, 2999), CCACHE_MISS); /* length differs */
  /* Same length and same last 16 bytes, another byte in the body: kept. */
  unsigned char *body = t_payload(6, 3000);
  body[100] ^= 1;
  assert_int_equal(b.ops.remove_if(b.r, PK(5), body, 3000), CCACHE_MISS);
  free(body);
  void *blob = NULL;
  size_t len = 0;
  assert_int_equal(b.ops.get(b.r, PK(5), &blob, &len), CCACHE_OK);
  assert_true(len == 3000 && memcmp(blob, newer, len) == 0);
  b.ops.free_blob(b.r, blob, len);
  assert_int_equal(b.ops.remove_if(b.r, PK(5), newer, 3000), CCACHE_OK);
  assert_int_equal(b.ops.get(b.r, PK(5), &blob, &len), CCACHE_MISS);
  /* Shorter than the trailer, and empty. */
  assert_int_equal(b.ops.put(b.r, PK(7), tiny, 5), CCACHE_OK);
  assert_int_equal(b.ops.remove_if(b.r, PK(7), tiny, 5), CCACHE_OK);
  assert_int_equal(b.ops.put(b.r, PK(7), NULL, 0), CCACHE_OK);
  assert_int_equal(b.ops.remove_if(b.r, PK(7), NULL, 0), CCACHE_OK);
  assert_int_equal(b.ops.remove_if(b.r, PK(7), NULL, 0), CCACHE_MISS);
  assert_int_equal(t_redis_int(s, "DBSIZE"), 0);
  ccache__rcounters c = t_counters(&b);
  assert_int_equal(c.reply_errors + c.io_errors, 0);
  free(old);
  free(newer);
  free(tiny);
  t_be_close(&b);
  t_redis_stop(s);
}

/* The hook of the next test: publish the saved valid entry just before the
 * first command after the lookup's GET (the removal of the bad entry). */
static t_redis_server *race_srv;
static char race_key[256];
static char *race_valid;
static size_t race_valid_len;
static int race_armed, race_published;

static void race_hook(void *arg, size_t server, const char *cmd) {
  (void)arg, (void)server;
  if (!race_armed || strcmp(cmd, "GET") == 0) return;
  race_armed = 0;
  redisReply *r = t_redis_cmd(race_srv, "SET %s %b", race_key, race_valid, race_valid_len);
  race_published = r && r->type == REDIS_REPLY_STATUS;
  if (r) freeReplyObject(r);
}

/* Item 4 through the core: a valid entry published between the read of a
 * damaged one and its removal survives, and is loaded (no compile). */
static void redis_e2e_entry_published_between_read_and_remove_survives(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  t_ctx ctx = {0};
  atomic_store(&t_e2e_compiles, 0);
  ccache *a = t_e2e_open(&ctx, &o, T_E2E_TAG);
  assert_int_equal(t_e2e_get(a, 1), 1); /* compiled and stored */
  t_close(a);
  race_srv = s;
  t_e2e_entry_key(race_key, sizeof race_key, T_E2E_TAG, 1);
  redisReply *r = t_redis_cmd(s, "GET %s", race_key);
  assert_true(r && r->type == REDIS_REPLY_STRING);
  race_valid_len = r->len;
  race_valid = malloc(r->len);
  assert_non_null(race_valid);
  memcpy(race_valid, r->str, r->len);
  freeReplyObject(r);
  r = t_redis_cmd(s, "SETRANGE %s 100 XYZ", race_key); /* damaged */
  assert_non_null(r);
  freeReplyObject(r);

  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_redis(&o, &t), CCACHE_OK);
  ccache__redis_set_hook((ccache__redis *)t->state, race_hook, NULL);
  ccache_config cfg;
  t_e2e_config(&cfg, &ctx, &t, T_E2E_TAG);
  ccache *b = NULL;
  assert_int_equal(ccache_open(&cfg, &b), CCACHE_OK);
  race_armed = 1;
  race_published = 0;
  int id = t_e2e_get(b, 1);
  ccache_stats st = t_stats(b);
  print_message("after the race: id %d, compiles %llu, tier_corrupt %llu, tier_hits %llu\n", id,
                (unsigned long long)atomic_load(&t_e2e_compiles),
                (unsigned long long)st.tier_corrupt, (unsigned long long)st.tier_hits);
  assert_true(race_published);
  assert_int_equal(st.tier_corrupt, 1);
  assert_int_equal(id, 100001); /* loaded: the entry published meanwhile stayed */
  assert_int_equal(st.tier_hits, 1);
  assert_int_equal(st.program_compiles, 0);
  assert_int_equal(atomic_load(&t_e2e_compiles), 1); /* the first cache's only */
  r = t_redis_cmd(s, "GET %s", race_key);
  assert_true(r && r->type == REDIS_REPLY_STRING && r->len == race_valid_len &&
              memcmp(r->str, race_valid, race_valid_len) == 0);
  freeReplyObject(r);
  free(race_valid);
  race_valid = NULL;
  t_close(b);
  t_redis_stop(s);
}

/* Item 10: each server of a Redis tier is a part of its health report. */
static ccache *health_cache;
static ccache_tier_health health_during;
static int health_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                          uint64_t *cost_out) {
  (void)ud, (void)c;
  health_during.size = sizeof health_during;
  ccache_tier_health_get(health_cache, 0, 0, &health_during); /* the lease is held */
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return 0;
}

static void redis_tier_health_reports_each_server(void **state) {
  (void)state;
  t_need_redis();
  t_must_start(&t_servers[0], NULL);
  t_must_start(&t_servers[1], NULL);
  t_redis_kill(&t_servers[1]); /* B is down from the start */
  char list[80];
  snprintf(list, sizeof list, "%s,%s", t_servers[0].addr, t_servers[1].addr);
  ccache_redis_options o;
  t_opts(&o, list);
  o.reconnect_min_ms = o.reconnect_max_ms = 60000;
  o.poll_ms = 1;
  o.poll_max_ms = 5;
  t_be pick;
  t_be_open_simple(&pick, list);
  uint64_t ka = 0, kb = 0;
  for (uint64_t n = 500; n < 700 && (!ka || !kb); n++) {
    size_t srv = ccache__redis_server_of(pick.r, PK(n));
    if (srv == 0 && !ka) ka = n;
    if (srv == 1 && !kb) kb = n;
  }
  t_be_close(&pick);
  t_ctx ctx = {0};
  ccache *c = t_e2e_open(&ctx, &o, T_E2E_TAG);
  health_cache = c;
  /* A's lease is held by "another process" for 50 ms: waits, then ours. */
  char lkey[256];
  t_e2e_entry_key(lkey, sizeof lkey, T_E2E_TAG, ka);
  strcat(lkey, ":lease");
  redisReply *r = t_redis_cmd(&t_servers[0], "SET %s other PX 50", lkey);
  assert_non_null(r);
  freeReplyObject(r);
  ccache_program *p = NULL;
  memset(&health_during, 0, sizeof health_during);
  assert_int_equal(ccache_program_get_or_compile(c, PK(ka), health_compile, NULL, &p), CCACHE_OK);
  ccache_program_release(c, p);
  assert_int_equal(t_e2e_get(c, kb), (int)kb); /* B down: compiled, stored on A */
  assert_int_equal(health_during.leases_held, 1);
  ccache_tier_health h[2];
  for (uint32_t i = 0; i < 2; i++) {
    memset(&h[i], 0, sizeof h[i]);
    h[i].size = sizeof h[i];
    assert_int_equal(ccache_tier_health_get(c, 0, i, &h[i]), CCACHE_OK);
    assert_int_equal(h[i].parts, 2);
    assert_string_equal(h[i].kind, "redis");
    assert_string_equal(h[i].where, t_servers[i].addr);
    print_message(
        "%s: status %u, backoff %llu ms (%llu left), errors %llu, leases %llu held "
        "%llu lost, lock waits %llu, last error \"%s\"\n",
        h[i].where, h[i].status, (unsigned long long)h[i].backoff_ms,
        (unsigned long long)h[i].backoff_left_ms, (unsigned long long)h[i].errors,
        (unsigned long long)h[i].leases_held, (unsigned long long)h[i].leases_lost,
        (unsigned long long)h[i].lock_waits, h[i].last_error);
  }
  ccache_tier_health end;
  end.size = sizeof end;
  assert_int_equal(ccache_tier_health_get(c, 0, 2, &end), CCACHE_MISS);
  assert_int_equal(ccache_tier_health_get(c, 1, 0, &end), CCACHE_MISS);
  assert_int_equal(h[0].status, CCACHE_TIER_UP);
  assert_int_equal(h[0].errors, 0);
  assert_int_equal(h[0].backoff_ms, 0);
  assert_string_equal(h[0].last_error, "");
  assert_true(h[0].lock_waits >= 1);
  assert_int_equal(h[0].leases_held, 0);
  assert_int_equal(h[1].status, CCACHE_TIER_DOWN);
  assert_int_equal(h[1].backoff_ms, 60000);
  assert_true(h[1].backoff_left_ms > 0 && h[1].backoff_left_ms <= 60000);
  /* ka's misses on A read A only (this process never saw A fail, so no
   * copy can sit past it); kb's get is refused at connect on B, then its
   * lock, get and put in B's backoff, each answered by A, its fallback,
   * which took kb's lease and entry. */
  assert_int_equal(h[1].errors, 4);
  assert_non_null(strstr(h[1].last_error, "connect"));
  assert_int_equal(h[1].leases_held + h[1].lock_waits, 0);
  assert_int_equal(h[0].fallback_writes, 2);
  assert_int_equal(h[0].fallback_reads, 0);
  assert_int_equal(h[1].fallback_writes + h[1].fallback_reads + h[1].failovers, 0);
  assert_int_equal(h[0].failovers, 0);
  ccache_stats st = t_stats(c);
  assert_int_equal(st.tier_errors, 0); /* every op found a server that answered */
  t_close(c);
  t_redis_stop(&t_servers[0]);
  t_redis_stop(&t_servers[1]);
}

/* A fake server for the timeout tests: accepts one connection on
 * 127.0.0.1, reads the request, then answers a bulk string one byte every
 * trickle_ms, until told to stop.  flood > 0: instead, STRLEN's answer is
 * flood, and GETRANGE's a bulk string of a billion bytes sent as fast as
 * the client takes them. */
typedef struct trickler {
  int lfd, port, trickle_ms, flood;
  int junk;                  /* answer the lookup with a whole reply and 5 bytes more */
  _Atomic long long flooded; /* bytes of the flood sent */
  _Atomic int stop;
  _Atomic int sent;
  pthread_t t;
} trickler;

static void flood(trickler *tr, int fd) {
  char head[64];
  int hl = snprintf(head, sizeof head, ":%d\r\n$1000000000\r\n", tr->flood);
  if (send(fd, head, (size_t)hl, MSG_NOSIGNAL) != hl) return;
  static char chunk[16384];
  memset(chunk, 'x', sizeof chunk);
  while (!atomic_load(&tr->stop)) {
    struct pollfd pf = {fd, POLLOUT, 0};
    if (poll(&pf, 1, 10) != 1) continue;
    ssize_t n = send(fd, chunk, sizeof chunk, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN) break; /* the client closed */
    if (n > 0) atomic_fetch_add(&tr->flooded, n);
  }
}

static void *trickle_main(void *arg) {
  trickler *tr = arg;
  int fd = -1;
  while (fd < 0 && !atomic_load(&tr->stop)) {
    struct pollfd pf = {tr->lfd, POLLIN, 0};
    if (poll(&pf, 1, 10) == 1) fd = accept(tr->lfd, NULL, NULL);
  }
  if (fd < 0) return NULL;
  char req[4096];
  struct pollfd pf = {fd, POLLIN, 0};
  if (tr->flood && poll(&pf, 1, (int)T_WAIT_MS) == 1 && read(fd, req, sizeof req) > 0) {
    flood(tr, fd);
  } else if (tr->junk && poll(&pf, 1, (int)T_WAIT_MS) == 1 && read(fd, req, sizeof req) > 0) {
    /* STRLEN's and GETRANGE's replies, whole, then "+OK\r\n" nobody asked
     * for, in one write; the connection stays open until the test ends. */
    char out[160];
    int n = snprintf(out, sizeof out, ":100\r\n$100\r\n%0100d\r\n+OK\r\n", 0);
    if (send(fd, out, (size_t)n, MSG_NOSIGNAL) == n)
      while (!atomic_load(&tr->stop)) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
      }
  } else if (poll(&pf, 1, (int)T_WAIT_MS) == 1 && read(fd, req, sizeof req) > 0) {
    const char head[] = "$1000\r\n";
    if (write(fd, head, sizeof head - 1) == (ssize_t)sizeof head - 1) {
      while (!atomic_load(&tr->stop) && atomic_load(&tr->sent) < 1000) {
        struct timespec ts = {0, (long)tr->trickle_ms * 1000000L};
        nanosleep(&ts, NULL);
        if (send(fd, "x", 1, MSG_NOSIGNAL) != 1) break;
        atomic_fetch_add(&tr->sent, 1);
      }
    }
  }
  close(fd);
  return NULL;
}

static void trickler_start_as(trickler *tr, int trickle_ms, int flood, int junk) {
  memset(tr, 0, sizeof *tr);
  tr->trickle_ms = trickle_ms;
  tr->flood = flood;
  tr->junk = junk;
  tr->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(tr->lfd >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(tr->lfd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  assert_int_equal(getsockname(tr->lfd, (struct sockaddr *)&a, &len), 0);
  tr->port = ntohs(a.sin_port);
  assert_int_equal(listen(tr->lfd, 4), 0);
  assert_int_equal(pthread_create(&tr->t, NULL, trickle_main, tr), 0);
}

static void trickler_start(trickler *tr, int trickle_ms, int flood) {
  trickler_start_as(tr, trickle_ms, flood, 0);
}

static void trickler_stop(trickler *tr) {
  atomic_store(&tr->stop, 1);
  pthread_join(tr->t, NULL);
  close(tr->lfd);
}

typedef struct timed_fetch {
  ccache *c;
  uint64_t n;
  int id;
  unsigned long long took_ms;
  t_async_get sync; /* only its mu/cv/done */
} timed_fetch;

static void *timed_fetch_main(void *arg) {
  timed_fetch *f = arg;
  unsigned long long t0 = t_redis_now_ms();
  int id = t_e2e_get(f->c, f->n);
  unsigned long long took = t_redis_now_ms() - t0;
  pthread_mutex_lock(&f->sync.mu);
  f->id = id;
  f->took_ms = took;
  f->sync.done = 1;
  pthread_cond_broadcast(&f->sync.cv);
  pthread_mutex_unlock(&f->sync.mu);
  return NULL;
}

/* A cache over the fake server tr (command_timeout_ms timeout, no second
 * connect), fetching key n on a new thread *t into *f. */
static ccache *fetch_from_fake(trickler *tr, uint64_t timeout_ms, uint64_t n, t_ctx *ctx,
                               timed_fetch *f, pthread_t *t) {
  char addr[32];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", tr->port);
  ccache_redis_options o;
  t_opts(&o, addr);
  o.command_timeout_ms = timeout_ms;
  o.reconnect_min_ms = o.reconnect_max_ms = 3600000; /* no second connect */
  atomic_store(&t_e2e_compiles, 0);
  ccache *c = t_e2e_open(ctx, &o, T_E2E_TAG);
  memset(f, 0, sizeof *f);
  f->c = c;
  f->n = n;
  pthread_mutex_init(&f->sync.mu, NULL);
  pthread_cond_init(&f->sync.cv, NULL);
  assert_int_equal(pthread_create(t, NULL, timed_fetch_main, f), 0);
  return c;
}

#define TRICKLE_TIMEOUT_MS 300
#define TRICKLE_STEP_MS    200 /* a byte well inside each read's timeout */

/* Item 6: a server trickling its reply a byte at a time, each just inside
 * the timeout, cannot hold a fetch past command_timeout_ms + 50 ms. */
static void redis_command_timeout_bounds_the_whole_command(void **state) {
  (void)state;
  trickler tr;
  trickler_start(&tr, TRICKLE_STEP_MS, 0);
  t_ctx ctx = {0};
  timed_fetch f;
  pthread_t t;
  ccache *c = fetch_from_fake(&tr, TRICKLE_TIMEOUT_MS, 3, &ctx, &f, &t);
  int finished = t_async_wait(&f.sync, 5 * TRICKLE_TIMEOUT_MS + 2000);
  int sent = atomic_load(&tr.sent);
  trickler_stop(&tr); /* ends a fetch the timeout did not */
  pthread_join(t, NULL);
  print_message("fetch took %llu ms (command_timeout_ms %d, a byte every %d ms; %d sent)\n",
                f.took_ms, TRICKLE_TIMEOUT_MS, TRICKLE_STEP_MS, sent);
  assert_true(finished);
  assert_int_equal(f.id, 3); /* compiled: the tier failed, the fetch did not */
  assert_true(f.took_ms <= TRICKLE_TIMEOUT_MS + 50);
  ccache_stats st = t_stats(c);
  assert_int_equal(st.program_compiles, 1);
  assert_true(st.tier_errors >= 1);
  t_close(c);
}

/* A server answering more than was asked for (STRLEN says `strlen` bytes,
 * the range read of 128 KiB + 1 comes back as a billion, sent as fast as
 * they are taken): the fetch stops reading at the size it asked for, well
 * before command_timeout_ms, drops the connection and compiles. */
static void reply_longer_than_asked(int strlen_says) {
  trickler tr;
  trickler_start(&tr, 0, strlen_says);
  t_ctx ctx = {0};
  timed_fetch f;
  pthread_t t;
  ccache *c = fetch_from_fake(&tr, 10000, 4, &ctx, &f, &t);
  int finished = t_async_wait(&f.sync, 20000);
  trickler_stop(&tr); /* ends a fetch the bound did not */
  pthread_join(t, NULL);
  long long sent = atomic_load(&tr.flooded);
  ccache_tier_health h;
  memset(&h, 0, sizeof h);
  h.size = sizeof h;
  assert_int_equal(ccache_tier_health_get(c, 0, 0, &h), CCACHE_OK);
  print_message(
      "STRLEN %d: fetch took %llu ms (command_timeout_ms 10000); %lld bytes flooded; "
      "last error: %s\n",
      strlen_says, f.took_ms, sent, h.last_error);
  assert_true(finished);
  assert_int_equal(f.id, 4); /* compiled: the tier failed, the fetch did not */
  assert_true(f.took_ms < 2000);
  assert_non_null(strstr(h.last_error, "a reply longer than the 131073 bytes asked for"));
  assert_int_equal(t_stats(c).program_compiles, 1);
  t_close(c);
}

/* A server answering the lookup whole and then 5 bytes more, nobody
 * having asked for them: the connection is dropped at once with a clear
 * error (before, the bytes stayed in the reader and were taken for the
 * next command's reply), and the fetch compiles. */
static void redis_bytes_after_a_reply_drop_the_connection(void **state) {
  (void)state;
  trickler tr;
  trickler_start_as(&tr, 0, 0, 1);
  t_ctx ctx = {0};
  timed_fetch f;
  pthread_t t;
  ccache *c = fetch_from_fake(&tr, 10000, 5, &ctx, &f, &t);
  int finished = t_async_wait(&f.sync, 20000);
  trickler_stop(&tr);
  pthread_join(t, NULL);
  ccache_tier_health h;
  memset(&h, 0, sizeof h);
  h.size = sizeof h;
  assert_int_equal(ccache_tier_health_get(c, 0, 0, &h), CCACHE_OK);
  ccache_stats st = t_stats(c);
  print_message("fetch took %llu ms; tier_corrupt %llu, tier_errors %llu; last error: %s\n",
                f.took_ms, (unsigned long long)st.tier_corrupt, (unsigned long long)st.tier_errors,
                h.last_error);
  assert_true(finished);
  assert_int_equal(f.id, 5); /* compiled: the tier failed, the fetch did not */
  assert_non_null(strstr(h.last_error, "5 bytes after the reply that were not asked for"));
  assert_int_equal(st.tier_corrupt, 0); /* the 100 bytes never reached the core */
  assert_int_equal(st.program_compiles, 1);
  t_close(c);
}

static void redis_reply_longer_than_asked_is_cut_off(void **state) {
  (void)state;
  reply_longer_than_asked(200000); /* a long entry: read_long */
  reply_longer_than_asked(100);    /* a short one */
}

/* Item 7: a stopped server whose listen backlog is open accepts every
 * connect and answers nothing: it is backed off like an unreachable one
 * (the step doubles), and only an answered command resets the backoff. */
static void redis_accepting_but_silent_server_is_backed_off(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  o.command_timeout_ms = 100;
  o.reconnect_min_ms = 40;
  o.reconnect_max_ms = 320;
  t_be b;
  t_be_open(&b, &o, T_NS);
  t_redis_pause(s);
  static const uint64_t want[] = {40, 80, 160, 320, 320};
  uint64_t got[5];
  for (int i = 0; i < 5; i++) {
    t_wait_backoff_over(&b, 0);
    assert_int_equal(t_get_check(&b, 1, 10), CCACHE_EIO);
    got[i] = t_backoff_of(&b, 0);
  }
  print_message("backoff after each timed-out command: %llu %llu %llu %llu %llu ms\n",
                (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2],
                (unsigned long long)got[3], (unsigned long long)got[4]);
  ccache__rcounters c = t_counters(&b);
  t_redis_resume(s);
  assert_int_equal(c.connects, 5); /* every connect succeeded ... */
  assert_int_equal(c.connect_failures, 0);
  assert_int_equal(c.io_errors, 5); /* ... and led nowhere */
  for (int i = 0; i < 5; i++) assert_int_equal(got[i], want[i]);
  /* The server answers again: the first answered command resets it. */
  t_wait_backoff_over(&b, 0);
  assert_int_equal(t_get_check(&b, 1, 10), CCACHE_MISS);
  assert_int_equal(t_backoff_of(&b, 0), 0);
  t_be_close(&b);
  t_redis_stop(s);
}

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
      cmocka_unit_test_teardown(redis_sockets_close_on_exec, t_stop_all),
      cmocka_unit_test_teardown(redis_remove_if_only_the_value_read, t_stop_all),
      cmocka_unit_test_teardown(redis_e2e_entry_published_between_read_and_remove_survives,
                                t_stop_all),
      cmocka_unit_test_teardown(redis_tier_health_reports_each_server, t_stop_all),
      cmocka_unit_test_teardown(redis_reply_longer_than_asked_is_cut_off, t_stop_all),
      cmocka_unit_test_teardown(redis_bytes_after_a_reply_drop_the_connection, t_stop_all),
  };
  /* Real-time fault tests (SIGSTOP, timeouts measured on the wall clock):
   * `test_tier_redis_faults realtime` runs them (CTest label realtime: plain
   * and checked builds only, not under the sanitizers or valgrind). */
  const struct CMUnitTest realtime[] = {
      cmocka_unit_test_teardown(redis_command_timeout_bounds_the_whole_command, t_stop_all),
      cmocka_unit_test_teardown(redis_accepting_but_silent_server_is_backed_off, t_stop_all),
      cmocka_unit_test_teardown(redis_e2e_stalled_server_never_starves_renewals, t_stop_all),
  };
  if (argc > 1 && strcmp(argv[1], "realtime") == 0)
    return cmocka_run_group_tests_name("realtime", realtime, NULL, NULL);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
