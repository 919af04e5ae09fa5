/*
 * test_tier_redis_backend_pool.c - the Redis tier's backend through its
 * ops table, its servers and connections: keys spread over several servers
 * by rendezvous (one down), AUTH with a password and with ACL users (the
 * least a tier needs), concurrent misses on the shared pool, and a fork
 * child that never touches the parent's connections.  Each test starts and
 * stops its own redis-server processes (redis_support.c); without
 * redis-server every test skips with a message, or fails when
 * CCACHE_TEST_REQUIRE_REDIS=1.  The options, round trip, keys, TTLs and the
 * lease are test_tier_redis_backend.c.
 *
 * SIGPIPE stays at its default action for the whole run (set in main), so a
 * write to a reset connection that the library failed to guard kills the
 * test.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_tier_support.h"

/* ------------------------------------------------------ several servers */

static void redis_rendezvous_spread_and_one_down(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = t_servers;
  for (int i = 0; i < 3; i++) t_must_start(&s[i], NULL);
  char list[800], reversed[800], two[800];
  snprintf(list, sizeof list, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  snprintf(reversed, sizeof reversed, "%.31s,%.31s,%.31s", s[2].addr, s[1].addr, s[0].addr);
  snprintf(two, sizeof two, "%.31s,%.31s", s[1].addr, s[0].addr);
  t_be b, rev, b2;
  t_be_open_simple(&b, list);
  t_be_open_simple(&rev, reversed);
  t_be_open_simple(&b2, two);
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) assert_int_equal(t_put_n(&b, k, 32), CCACHE_OK);
  long long size[3], total = 0;
  for (int i = 0; i < 3; i++) {
    size[i] = t_redis_int(&s[i], "DBSIZE");
    total += size[i];
    /* Binomial(300, 1/3): mean 100, sd 8.2; +-40 is ~5 sd. */
    assert_true(size[i] >= 60 && size[i] <= 140);
  }
  assert_int_equal(total, T_SPREAD_KEYS);
  /* Every key is where server_of says, and only there; the reversed list
   * (another process's view) reads every key; the list without s[2] maps
   * every key of s[0] and s[1] to the same server (only s[2]'s share moves). */
  int moved = 0;
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) {
    size_t at = ccache__redis_server_of(b.r, PK(k));
    char key[256];
    t_entry_key(key, sizeof key, "ccache", "v1:0123456789abcdef", k);
    for (size_t i = 0; i < 3; i++) assert_int_equal(t_redis_int(&s[i], "EXISTS %s", key), i == at);
    assert_int_equal(t_get_check(&rev, k, 32), CCACHE_OK);
    size_t at2 = ccache__redis_server_of(b2.r, PK(k));
    const char *name2 = at2 == 0 ? s[1].addr : s[0].addr;
    if (at == 2)
      moved++;
    else
      assert_string_equal(name2, s[at].addr);
  }
  assert_int_equal(moved, size[2]);

  /* s[1] goes down: only its share is lost (misses on the fallback
   * servers, which answer), the rest hits where it was. */
  t_redis_kill(&s[1]);
  int ok = 0, err = 0, miss = 0;
  for (uint64_t k = 0; k < T_SPREAD_KEYS; k++) {
    int rc = t_get_check(&b, k, 32);
    ok += rc == CCACHE_OK;
    err += rc == CCACHE_EIO;
    miss += rc == CCACHE_MISS;
  }
  assert_int_equal(ok, size[0] + size[2]);
  assert_int_equal(err, 0);
  assert_int_equal(miss, size[1]);
  ccache__rcounters c = t_counters(&b);
  /* Each failed get: a refused connect (the first after the dead pooled
   * connection was seen closed and dropped), or a skip during the backoff. */
  assert_int_equal(c.io_errors + c.connect_failures + c.refused_backoff, size[1]);
  assert_int_equal(c.io_errors, 0);
  assert_int_equal(c.idle_closed, 1);
  t_be_close(&b);
  t_be_close(&rev);
  t_be_close(&b2);
  for (int i = 0; i < 3; i++) t_redis_stop(&s[i]);
}

/* ---------------------------------------------------------------- auth */
static void redis_auth_password(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  static const char *const args[] = {"--requirepass", "s3cret-pw", NULL};
  t_must_start(s, args);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  t_be none, wrong, good;
  t_be_open(&none, &o, T_NS);
  o.password = "wrong";
  t_be_open(&wrong, &o, T_NS);
  o.password = "s3cret-pw";
  t_be_open(&good, &o, T_NS);
  assert_int_equal(t_put_n(&good, 1, 100), CCACHE_OK);
  assert_int_equal(t_get_check(&good, 1, 100), CCACHE_OK);
  assert_int_equal(t_counters(&good).connects, 1);
  /* Without a password the server answers NOAUTH: a reply error, the
   * connection stays. */
  assert_int_equal(t_get_check(&none, 1, 100), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&none), "NOAUTH"));
  assert_int_equal(t_counters(&none).reply_errors, 1);
  assert_int_equal(t_counters(&none).io_errors, 0);
  /* A wrong password fails the connection's AUTH. */
  assert_int_equal(t_get_check(&wrong, 1, 100), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&wrong), "AUTH"));
  assert_non_null(strstr(t_last_error(&wrong), "WRONGPASS"));
  assert_int_equal(t_counters(&wrong).connect_failures, 1);
  assert_int_equal(t_counters(&wrong).connects, 0);
  t_be_close(&none);
  t_be_close(&wrong);
  t_be_close(&good);
  t_redis_stop(s);
}

static void redis_auth_acl_user(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  memset(s, 0, sizeof *s);
  s->admin_user = "alice";
  s->admin_pass = "wonderland";
  /* Each word a separate argument: redis-server joins them into the
   * config line "user alice on >wonderland ~* +@all". */
  static const char *const args[] = {
      "--user", "alice", "on", ">wonderland", "~*", "+@all", "--user", "default", "off",
      /* the least a tier needs, as documented */
      "--user", "ccache", "on", ">tier-pw", "~ccache:*", "+get", "+set", "+del", "+eval",
      "+pexpire", "+strlen", "+getrange", "+pttl", NULL};
  t_must_start(s, args);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  o.user = "alice";
  o.password = "wonderland";
  t_be alice, bad, anon;
  t_be_open(&alice, &o, T_NS);
  o.password = "rabbit-hole";
  t_be_open(&bad, &o, T_NS);
  o.user = NULL;
  o.password = NULL;
  t_be_open(&anon, &o, T_NS);
  assert_int_equal(t_put_n(&alice, 4, 1000), CCACHE_OK);
  assert_int_equal(t_get_check(&alice, 4, 1000), CCACHE_OK);
  void *l = NULL;
  assert_int_equal(alice.ops.lock(alice.r, PK(4), &l), CCACHE_OK);
  assert_int_equal(alice.ops.renew(alice.r, l), CCACHE_OK);
  alice.ops.unlock(alice.r, l);
  assert_int_equal(t_counters(&alice).connects, 2); /* pool + renewal */
  assert_int_equal(t_get_check(&bad, 4, 1000), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&bad), "WRONGPASS"));
  assert_int_equal(t_counters(&bad).connect_failures, 1);
  /* The minimal ACL of the header's example runs every op. */
  o.user = "ccache";
  o.password = "tier-pw";
  o.entry_ttl_ms = 3600000; /* SET ... PX as well */
  t_be least;
  t_be_open(&least, &o, T_NS);
  assert_int_equal(t_put_n(&least, 8, 100), CCACHE_OK);
  assert_int_equal(t_get_check(&least, 8, 100), CCACHE_OK);
  assert_int_equal(least.ops.lock(least.r, PK(8), &l), CCACHE_OK);
  assert_int_equal(least.ops.renew(least.r, l), CCACHE_OK);
  least.ops.unlock(least.r, l);
  unsigned char *p8 = t_payload(8, 100), *p9 = t_payload(9, 100);
  /* The remove-if script, both ways: not the value read (kept), then it. */
  assert_int_equal(least.ops.remove_if(least.r, PK(8), p9, 100), CCACHE_MISS);
  assert_int_equal(least.ops.remove_if(least.r, PK(8), p8, 100), CCACHE_OK);
  free(p8);
  free(p9);
  assert_int_equal(t_redis_int(s, "DBSIZE"), 1); /* alice's entry only: lease and entry 8 gone */
  ccache__rcounters lc = t_counters(&least);
  assert_int_equal(lc.reply_errors + lc.io_errors + lc.connect_failures, 0);
  t_be_close(&least);
  /* Outside its key pattern it is refused (a reply error). */
  o.prefix = "other";
  t_be_open(&least, &o, T_NS);
  assert_int_equal(t_put_n(&least, 8, 100), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&least), "NOPERM"));
  t_be_close(&least);
  /* The default user is off: no access without credentials. */
  assert_int_equal(t_get_check(&anon, 4, 1000), CCACHE_EIO);
  assert_non_null(strstr(t_last_error(&anon), "NOAUTH"));
  t_be_close(&alice);
  t_be_close(&bad);
  t_be_close(&anon);
  t_redis_stop(s);
}

/* ------------------------------------------------------- concurrency */
static _Thread_local int block_here;
typedef struct hold {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int blocked, release;
} hold;
static hold the_hold = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void hold_hook(void *arg, size_t server, const char *cmd) {
  (void)server, (void)cmd;
  hold *h = arg;
  if (!block_here) return;
  pthread_mutex_lock(&h->mu);
  h->blocked = 1;
  pthread_cond_broadcast(&h->cv);
  while (!h->release) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
}

static void *blocked_get_main(void *arg) {
  block_here = 1;
  return t_async_get_main(arg);
}

/* A miss on one thread holds its connection (here: parked inside the
 * command); a miss on another thread does not wait for it. */
static void redis_concurrent_misses_do_not_queue(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_be b;
  t_be_open_simple(&b, s->addr);
  assert_int_equal(t_put_n(&b, 1, 100), CCACHE_OK);
  assert_int_equal(t_put_n(&b, 2, 200), CCACHE_OK);
  assert_int_equal(t_counters(&b).connects, 1);
  hold *h = &the_hold;
  h->blocked = h->release = 0;
  ccache__redis_set_hook(b.r, hold_hook, h);
  t_async_get a, c;
  pthread_t ta, tc;
  memset(&a, 0, sizeof a);
  a.b = &b, a.n = 1, a.len = 100;
  pthread_mutex_init(&a.mu, NULL);
  pthread_cond_init(&a.cv, NULL);
  assert_int_equal(pthread_create(&ta, NULL, blocked_get_main, &a), 0);
  pthread_mutex_lock(&h->mu);
  unsigned long long deadline = t_redis_now_ms() + T_WAIT_MS;
  while (!h->blocked && t_redis_now_ms() < deadline) {
    pthread_mutex_unlock(&h->mu);
    t_redis_poll_pause();
    pthread_mutex_lock(&h->mu);
  }
  int blocked = h->blocked;
  pthread_mutex_unlock(&h->mu);
  t_async_start(&c, &tc, &b, 2, 200);
  int c_done = t_async_wait(&c, T_WAIT_MS);
  pthread_mutex_lock(&h->mu);
  h->release = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  pthread_join(ta, NULL);
  pthread_join(tc, NULL);
  ccache__redis_set_hook(b.r, NULL, NULL);
  assert_true(blocked);
  assert_true(c_done); /* finished while the other thread held its connection */
  assert_int_equal(a.rc, CCACHE_OK);
  assert_int_equal(c.rc, CCACHE_OK);
  assert_int_equal(t_counters(&b).connects, 2);
  t_be_close(&b);
  t_redis_stop(s);
}

/* A fork child never touches the parent's connections. */
static void redis_fork_child_refuses(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_be b;
  t_be_open_simple(&b, s->addr);
  assert_int_equal(t_put_n(&b, 1, 100), CCACHE_OK);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int rc = t_put_n(&b, 2, 100);
    void *blob;
    size_t len;
    int rc2 = b.ops.get(b.r, PK(1), &blob, &len);
    t_be_close(&b); /* frees the child's copy; the parent's sockets stay open */
    t_child_exit(rc == CCACHE_EFORKED && rc2 == CCACHE_EFORKED ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(t_get_check(&b, 1, 100), CCACHE_OK);
  assert_int_equal(t_get_check(&b, 2, 100), CCACHE_MISS);
  ccache__rcounters c = t_counters(&b);
  assert_int_equal(c.connects, 1);
  assert_int_equal(c.io_errors + c.reply_errors, 0);
  t_be_close(&b);
  t_redis_stop(s);
}

int main(void) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_rendezvous_spread_and_one_down, t_stop_all),
      cmocka_unit_test_teardown(redis_auth_password, t_stop_all),
      cmocka_unit_test_teardown(redis_auth_acl_user, t_stop_all),
      cmocka_unit_test_teardown(redis_concurrent_misses_do_not_queue, t_stop_all),
      cmocka_unit_test_teardown(redis_fork_child_refuses, t_stop_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
