/*
 * test_tier_redis_faults_fake.c - the Redis tier against servers that
 * answer wrong or not at all: a fake server on 127.0.0.1 (a thread of the
 * test) that trickles its reply a byte at a time, answers more than was
 * asked for, or sends bytes after a whole reply; and a real redis-server,
 * stopped, whose listen backlog accepts every connect and answers nothing.
 * The redis-server case starts its own (redis_support.c); without one it
 * skips, or fails when CCACHE_TEST_REQUIRE_REDIS=1.  A real server failing
 * is test_tier_redis_faults.c.
 *
 * The real-time cases (SIGSTOP, wall-clock bounds) run with the argument
 * `realtime` (ctest tier_redis_faults_fake_realtime, label realtime).
 * SIGPIPE stays at its default action for the whole run (set in main).
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "redis_tier_support.h"

/* ------------------------------------------------------------ the fake server */
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

/* -------------------------------------------------------- a silent server */
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

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_reply_longer_than_asked_is_cut_off, t_stop_all),
      cmocka_unit_test_teardown(redis_bytes_after_a_reply_drop_the_connection, t_stop_all),
  };
  /* Real-time fault tests (SIGSTOP, timeouts measured on the wall clock):
   * `test_tier_redis_faults_fake realtime` runs them (CTest label realtime:
   * plain and checked builds only, not under the sanitizers or valgrind). */
  const struct CMUnitTest realtime[] = {
      cmocka_unit_test_teardown(redis_command_timeout_bounds_the_whole_command, t_stop_all),
      cmocka_unit_test_teardown(redis_accepting_but_silent_server_is_backed_off, t_stop_all),
  };
  if (argc > 1 && strcmp(argv[1], "realtime") == 0)
    return cmocka_run_group_tests_name("realtime", realtime, NULL, NULL);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
