/*
 * test_tier_redis_fleet.c - what a fleet's machines cost the Redis
 * servers: with a directory tier above Redis, a machine's processes
 * coalesce on the directory tier's compile lock, so Redis sees one lease
 * per key from the machine and only the lock holder's lookups.  Real child
 * processes sharing one scratch directory over a private redis-server
 * (redis_support.c), counted with INFO commandstats; without a server the
 * tests skip, or fail when CCACHE_TEST_REQUIRE_REDIS=1.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis_tier_support.h"

#define MACHINE_PROCS 4
#define WAVE_KEYS     20
#define COMPILE_MS    60 /* long enough for the machine's others to arrive */

/* calls=N of cmdstat_<name> in an INFO commandstats text (0: never called). */
static long long stat_calls(const char *info, const char *name) {
  char tag[64];
  snprintf(tag, sizeof tag, "cmdstat_%s:calls=", name);
  const char *p = strstr(info, tag);
  return p ? strtoll(p + strlen(tag), NULL, 10) : 0;
}

/* One server's commands of a kind, from INFO commandstats. */
typedef struct cmd_counts {
  long long strlen_, getrange, set, eval, evalsha;
} cmd_counts;

static cmd_counts counts_of(t_redis_server *s) {
  redisReply *rep = t_redis_cmd(s, "INFO commandstats");
  assert_non_null(rep);
  assert_int_equal(rep->type, REDIS_REPLY_STRING);
  cmd_counts c = {stat_calls(rep->str, "strlen"), stat_calls(rep->str, "getrange"),
                  stat_calls(rep->str, "set"), stat_calls(rep->str, "eval"),
                  stat_calls(rep->str, "evalsha")};
  freeReplyObject(rep);
  return c;
}

static void reset_stats(t_redis_server *s) {
  redisReply *rep = t_redis_cmd(s, "CONFIG RESETSTAT");
  assert_non_null(rep);
  freeReplyObject(rep);
}

/* A compile that takes COMPILE_MS (native id = key), counted. */
static int slow_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                        uint64_t *cost_out) {
  (void)ud, (void)c;
  atomic_fetch_add(&t_e2e_compiles, 1);
  if (pkey.lo < T_E2E_KEYS_COUNTED) atomic_fetch_add(&t_e2e_key_compiles[pkey.lo], 1);
  struct timespec ts = {0, COMPILE_MS * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return 0;
}

/* A cache over a directory tier over the Redis tier (the documented fleet
 * setup), in a child (no cmocka: exits on failure). */
static ccache *machine_cache(t_ctx *ctx, const char *dir, const char *servers, uint64_t lease_ms) {
  ccache_disk_options d;
  ccache_disk_options_init(&d);
  d.dir = dir;
  d.lock_poll_ms = 1;
  d.lock_poll_max_ms = 8;
  d.lock_wait_ms = 30000;
  ccache_redis_options o;
  t_opts(&o, servers);
  o.poll_ms = 1;
  o.poll_max_ms = 20;
  o.lease_ms = lease_ms;
  ccache_tier *tiers[2] = {NULL, NULL};
  if (ccache_tier_disk(&d, &tiers[0]) != CCACHE_OK) _exit(4);
  if (ccache_tier_redis(&o, &tiers[1]) != CCACHE_OK) _exit(4);
  ccache_config cfg;
  t_e2e_config(&cfg, ctx, tiers, T_E2E_TAG);
  cfg.n_tiers = 2;
  ccache *c = NULL;
  if (ccache_open(&cfg, &c) != CCACHE_OK) _exit(5);
  return c;
}

/* One process of the machine: machine_cache, the wave of keys from offset
 * `first`. */
static void machine_child(const char *dir, const char *servers, int go_fd, int out_fd, int first) {
  t_ctx ctx = {0};
  ccache *c = machine_cache(&ctx, dir, servers, 10000);
  char go;
  if (read(go_fd, &go, 1) != 1) _exit(6);
  int ok = 1;
  for (int i = 0; i < WAVE_KEYS; i++) {
    uint64_t k = (uint64_t)((first + i) % WAVE_KEYS) + 1;
    ccache_program *p = NULL;
    int rc = ccache_program_get_or_compile(c, PK(k), slow_compile, NULL, &p);
    if (rc != CCACHE_OK) {
      ok = 0;
      continue;
    }
    int id = t_id(ccache_program_native(p));
    ok = ok && (id == (int)k || id == (int)k + 100000);
    ccache_program_release(c, p);
  }
  t_fleet_send(out_fd, c, ok);
  ccache_close(c);
  t_child_exit(0);
}

/* Four processes of one machine share a directory over one Redis and
 * fetch a wave of 20 keys at once, in the same order (so all four want
 * each key at about the same time).  Redis sees, per key, the holder's lookup
 * before its lease and the one after it (STRLEN + GETRANGE each), one
 * lease (SET NX), one store (SET) and one release (a script, which reads
 * the token with GETRANGE): nothing from
 * the three processes that waited on the directory's lock.  Every key is
 * compiled once on the machine. */
static void redis_machine_coalesces_on_the_directory_lock(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  char dir[] = "/tmp/ccache-fleet-XXXXXX";
  assert_non_null(mkdtemp(dir));
  reset_stats(s);
  int go[2], out[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(out), 0);
  pid_t pid[MACHINE_PROCS];
  for (int i = 0; i < MACHINE_PROCS; i++) {
    pid[i] = fork();
    assert_true(pid[i] >= 0);
    if (pid[i] == 0) {
      close(go[1]);
      close(out[0]);
      t_redis_forget_admin(s);
      machine_child(dir, s->addr, go[0], out[1], 0);
    }
  }
  close(go[0]);
  close(out[1]);
  char bytes[MACHINE_PROCS];
  memset(bytes, 'g', sizeof bytes);
  assert_int_equal(write(go[1], bytes, sizeof bytes), (ssize_t)sizeof bytes);
  uint32_t per_key[T_E2E_KEYS_COUNTED] = {0};
  uint64_t compiles = 0, waits = 0;
  int oks = 0;
  for (int i = 0; i < MACHINE_PROCS; i++) {
    t_fleet_report rep;
    assert_int_equal(t_fleet_recv(out[0], &rep), 0);
    oks += rep.ok;
    compiles += rep.compiles;
    waits += rep.lock_waits;
    for (int k = 0; k < T_E2E_KEYS_COUNTED; k++) per_key[k] += rep.per_key[k];
  }
  for (int i = 0; i < MACHINE_PROCS; i++) {
    int st = 0;
    assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  close(go[1]);
  close(out[0]);
  cmd_counts c = counts_of(s);
  long long leases = t_redis_int(s, "DBSIZE");
  print_message(
      "compiles %llu, lock waits %llu; redis: STRLEN %lld GETRANGE %lld SET %lld "
      "EVAL %lld EVALSHA %lld, keys %lld\n",
      (unsigned long long)compiles, (unsigned long long)waits, c.strlen_, c.getrange, c.set, c.eval,
      c.evalsha, leases);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(oks, MACHINE_PROCS);
  assert_int_equal(compiles, WAVE_KEYS);
  for (int k = 1; k <= WAVE_KEYS; k++) assert_int_equal(per_key[k], 1);
  assert_int_equal(c.strlen_, 2 * WAVE_KEYS); /* the holder's lookups, before and after */
  /* GETRANGE: each lookup's, and the release script's (it reads the token). */
  assert_int_equal(c.getrange, 2 * WAVE_KEYS + WAVE_KEYS);
  assert_int_equal(c.set, 2 * WAVE_KEYS);          /* one lease and one store per key */
  assert_int_equal(c.eval + c.evalsha, WAVE_KEYS); /* one release per key */
  assert_int_equal(leases, WAVE_KEYS);             /* the entries; no lease left */
  t_redis_stop(s);
}

static int stuck_fd = -1; /* the dying holder's "compiling" signal */

/* A compile that says it started, then never ends (its process is killed). */
static int stuck_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                         uint64_t *cost_out) {
  (void)ud, (void)c, (void)pkey, (void)native_out, (void)cost_out;
  if (write(stuck_fd, "C", 1) != 1) _exit(8);
  for (;;) pause();
}

/* A child that gets PK(k) through machine_cache (lease_ms 600) and reports
 * its counts on out_fd; stuck: it compiles with stuck_compile instead,
 * saying so on out_fd. */
static pid_t getter(const char *dir, const char *servers, uint64_t k, int out_fd, int stuck) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid) return pid;
  t_redis_forget_admin(&t_servers[0]);
  t_ctx ctx = {0};
  ccache *c = machine_cache(&ctx, dir, servers, 600);
  ccache_program *p = NULL;
  if (stuck) {
    stuck_fd = out_fd;
    (void)ccache_program_get_or_compile(c, PK(k), stuck_compile, NULL, &p);
    _exit(9);
  }
  int ok = ccache_program_get_or_compile(c, PK(k), slow_compile, NULL, &p) == CCACHE_OK;
  if (ok) {
    int id = t_id(ccache_program_native(p));
    ok = id == (int)k || id == (int)k + 100000;
    ccache_program_release(c, p);
  }
  t_fleet_send(out_fd, c, ok);
  ccache_close(c);
  t_child_exit(0);
  return 0;
}

/* The machine's holder dies mid-compile (SIGKILL), holding the directory
 * tier's lock and the Redis lease (lease_ms 600): the kernel drops its
 * lock at once, so the machine's waiter B takes over; B and a process C
 * of another machine (its own directory) find the dead holder's lease on
 * Redis and wait for it to expire (no renewal comes), then one of them
 * compiles and the other loads: one compile in all, in bounded time, and
 * no lease left behind. */
static void redis_machine_holder_dies(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  char dir1[] = "/tmp/ccache-fleet-XXXXXX", dir2[] = "/tmp/ccache-fleet-XXXXXX";
  assert_non_null(mkdtemp(dir1));
  assert_non_null(mkdtemp(dir2));
  const uint64_t k = 5;
  int sig[2], out[2];
  assert_int_equal(pipe(sig), 0);
  assert_int_equal(pipe(out), 0);
  pid_t a = getter(dir1, s->addr, k, sig[1], 1);
  char ch;
  assert_int_equal(read(sig[0], &ch, 1), 1); /* A compiles, both locks held */
  unsigned long long t0 = t_redis_now_ms();
  pid_t b = getter(dir1, s->addr, k, out[1], 0);
  pid_t c = getter(dir2, s->addr, k, out[1], 0);
  struct timespec ts = {0, 300 * 1000000L}; /* B and C wait by now */
  nanosleep(&ts, NULL);
  assert_int_equal(kill(a, SIGKILL), 0);
  assert_int_equal(waitpid(a, NULL, 0), a);
  t_fleet_report rb, rc;
  assert_int_equal(t_fleet_recv(out[0], &rb), 0);
  assert_int_equal(t_fleet_recv(out[0], &rc), 0);
  unsigned long long took = t_redis_now_ms() - t0;
  int st = 0;
  assert_int_equal(waitpid(b, &st, 0), b);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_int_equal(waitpid(c, &st, 0), c);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  for (int i = 0; i < 2; i++) {
    close(sig[i]);
    close(out[i]);
  }
  char key[256];
  t_e2e_entry_key(key, sizeof key, T_E2E_TAG, k);
  long long entry = t_redis_int(s, "EXISTS %s", key);
  strcat(key, ":lease");
  long long lease = t_redis_int(s, "EXISTS %s", key);
  print_message(
      "after the holder's death: compiles %llu + %llu, tier hits %llu + %llu, both "
      "done %llu ms after B and C started; entry %lld, lease %lld\n",
      (unsigned long long)rb.compiles, (unsigned long long)rc.compiles,
      (unsigned long long)rb.tier_hits, (unsigned long long)rc.tier_hits, took, entry, lease);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir1, dir2);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(rb.ok + rc.ok, 2);
  assert_int_equal(rb.compiles + rc.compiles, 1);
  assert_int_equal(rb.tier_hits + rc.tier_hits, 1);
  assert_true(took < T_WAIT_MS);
  assert_int_equal(entry, 1);
  assert_int_equal(lease, 0);
  t_redis_stop(s);
}

/* Clients connected to s other than the test's admin connection. */
static long long clients_of(t_redis_server *s) {
  redisReply *rep = t_redis_cmd(s, "INFO clients");
  assert_non_null(rep);
  const char *p = strstr(rep->str, "connected_clients:");
  assert_non_null(p);
  long long n = strtoll(p + 18, NULL, 10);
  freeReplyObject(rep);
  return n - 1;
}

/* A pooled connection and the renewal connection, both unused for
 * idle_close_ms (300 ms here; the default is 20 s), are closed by the tier
 * itself: the server sees them go (no command needed), not before
 * idle_close_ms, and a later command connects again. */
static void redis_unused_connections_are_closed(void **state) {
  (void)state;
  ccache_redis_options d;
  ccache_redis_options_init(&d);
  assert_int_equal(d.idle_close_ms, 20000);
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  o.idle_close_ms = 300;
  t_be b;
  t_be_open(&b, &o, T_NS);
  assert_int_equal(t_put_n(&b, 1, 100), CCACHE_OK);
  void *lk = NULL;
  assert_int_equal(b.ops.lock(b.r, PK(2), &lk), CCACHE_OK);
  assert_int_equal(b.ops.renew(b.r, lk), CCACHE_OK); /* on the renewal connection */
  b.ops.unlock(b.r, lk);
  unsigned long long used = t_redis_now_ms();
  long long open_before = clients_of(s);
  unsigned long long until = used + T_WAIT_MS;
  while (clients_of(s) > 0 && t_redis_now_ms() < until) t_redis_poll_pause();
  unsigned long long gone = t_redis_now_ms() - used;
  /* The closing thread counts a connection just after closing it: the
   * server may see it go first (a slow TSan run did). */
  while (t_counters(&b).idle_expired < 2 && t_redis_now_ms() < until) t_redis_poll_pause();
  ccache__rcounters c = t_counters(&b);
  print_message(
      "connections open after use %lld, all closed after %llu ms, now %lld open; "
      "idle_expired %llu\n",
      open_before, gone, clients_of(s), (unsigned long long)c.idle_expired);
  assert_int_equal(open_before, 2); /* the pooled one and the renewal one */
  assert_int_equal(clients_of(s), 0);
  assert_true(gone >= 250); /* not before idle_close_ms (less the test's own lag) */
  assert_int_equal(c.idle_expired, 2);
  assert_int_equal(t_get_check(&b, 1, 100), CCACHE_OK);
  assert_int_equal(t_counters(&b).connects, c.connects + 1);
  assert_int_equal(t_counters(&b).io_errors, 0);
  t_be_close(&b);
  t_redis_stop(s);
}

/* Three servers, their list, and PK(n)'s rendezvous order over it. */
static void start_three(char *list, size_t len, uint64_t n, uint8_t order[3]) {
  t_need_redis();
  t_redis_server *s = t_servers;
  for (int i = 0; i < 3; i++) t_must_start(&s[i], NULL);
  snprintf(list, len, "%.31s,%.31s,%.31s", s[0].addr, s[1].addr, s[2].addr);
  t_be b;
  t_be_open_simple(&b, list);
  ccache__rpool *p = ccache__redis_pool(b.r);
  ccache__rendezvous_order(p->servers, p->n, PK(n), order);
  t_be_close(&b);
}

static void print_counts(const char *what, cmd_counts c[3]) {
  for (int k = 0; k < 3; k++)
    print_message(
        "%s, server %d of the key's order: STRLEN %lld GETRANGE %lld SET %lld EVAL "
        "%lld\n",
        what, k, c[k].strlen_, c[k].getrange, c[k].set, c[k].eval);
}

/* With every server up and none seen failing, a lookup that misses reads
 * the key's first server only (one STRLEN + GETRANGE): the two others see
 * nothing, and neither do they when a cache misses, leases, compiles and
 * stores the key. */
static void redis_miss_reads_one_server(void **state) {
  (void)state;
  char list[200];
  uint8_t order[3];
  const uint64_t n = 11;
  start_three(list, sizeof list, n, order);
  t_redis_server *s = t_servers;
  for (int i = 0; i < 3; i++) reset_stats(&s[i]);
  t_be b;
  t_be_open_simple(&b, list);
  assert_int_equal(t_get_check(&b, n, 100), CCACHE_MISS);
  t_be_close(&b);
  cmd_counts c[3];
  for (int k = 0; k < 3; k++) c[k] = counts_of(&s[order[k]]);
  print_counts("a lookup's miss", c);
  assert_int_equal(c[0].strlen_, 1);
  assert_int_equal(c[0].getrange, 1);
  for (int k = 1; k < 3; k++) {
    assert_int_equal(c[k].strlen_, 0);
    assert_int_equal(c[k].getrange, 0);
  }
  /* Through a cache: lookup, lease, lookup, compile, store, release. */
  for (int i = 0; i < 3; i++) reset_stats(&s[i]);
  ccache_redis_options o;
  t_opts(&o, list);
  t_ctx ctx = {0};
  ccache *a = t_e2e_open(&ctx, &o, T_E2E_TAG);
  uint64_t pk = 0;
  uint8_t eorder[3];
  {
    t_be x;
    t_be_open_simple(&x, list);
    ccache__rpool *p = ccache__redis_pool(x.r);
    for (pk = 1; pk < 64; pk++) { /* a key whose home is the same first server */
      ccache__rendezvous_order(p->servers, p->n, PK(pk), eorder);
      if (eorder[0] == order[0]) break;
    }
    t_be_close(&x);
  }
  assert_int_equal(t_e2e_get(a, pk), (int)pk);
  t_close(a);
  for (int k = 0; k < 3; k++) c[k] = counts_of(&s[eorder[k]]);
  print_counts("a cache's miss", c);
  assert_int_equal(c[0].strlen_, 2);
  assert_int_equal(c[0].set, 2); /* the lease and the entry */
  for (int k = 1; k < 3; k++) {
    assert_int_equal(c[k].strlen_ + c[k].getrange + c[k].set + c[k].eval, 0);
  }
  for (int i = 0; i < 3; i++) t_redis_stop(&s[i]);
}

/* The rule's other half: a process that saw the key's first server fail
 * (and wrote the entry on the second meanwhile) still finds that copy once
 * the first is back, and copies it there; a process that never saw it fail
 * reads the first server only. */
static void redis_fallback_read_after_a_seen_failure(void **state) {
  (void)state;
  char list[200];
  uint8_t order[3];
  const uint64_t n = 12;
  start_three(list, sizeof list, n, order);
  t_redis_server *s = t_servers;
  t_be saw, fresh;
  t_be_open_simple(&saw, list);
  t_redis_kill(&s[order[0]]);
  assert_int_equal(t_get_until_reachable(&saw, n, 100), CCACHE_MISS);
  assert_int_equal(t_put_n(&saw, n, 100), CCACHE_OK); /* on the second server */
  assert_int_equal(t_redis_restart(&s[order[0]]), 0);
  for (int i = 0; i < 3; i++) reset_stats(&s[i]);
  t_be_open_simple(&fresh, list);
  assert_int_equal(t_get_check(&fresh, n, 100), CCACHE_MISS); /* never saw it fail */
  unsigned long long until = t_redis_now_ms() + T_WAIT_MS;
  int rc = CCACHE_EIO;
  while (t_redis_now_ms() < until) { /* past the first server's backoff */
    if ((rc = t_get_check(&saw, n, 100)) == CCACHE_OK && t_redis_int(&s[order[0]], "DBSIZE") == 1)
      break;
    t_redis_poll_pause();
  }
  cmd_counts c[3];
  for (int k = 0; k < 3; k++) c[k] = counts_of(&s[order[k]]);
  print_counts("fresh miss, then the lookup of the process that saw the failure", c);
  assert_int_equal(rc, CCACHE_OK);
  assert_int_equal(t_redis_int(&s[order[0]], "DBSIZE"), 1); /* copied back */
  assert_true(c[0].strlen_ >= 2);
  assert_true(c[1].strlen_ >= 1); /* read only by the process that saw the failure */
  assert_int_equal(c[2].strlen_, 0);
  t_be_close(&saw);
  t_be_close(&fresh);
  for (int i = 0; i < 3; i++) t_redis_stop(&s[i]);
}

int main(void) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_machine_coalesces_on_the_directory_lock, t_stop_all),
      cmocka_unit_test_teardown(redis_machine_holder_dies, t_stop_all),
      cmocka_unit_test_teardown(redis_unused_connections_are_closed, t_stop_all),
      cmocka_unit_test_teardown(redis_miss_reads_one_server, t_stop_all),
      cmocka_unit_test_teardown(redis_fallback_read_after_a_seen_failure, t_stop_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
