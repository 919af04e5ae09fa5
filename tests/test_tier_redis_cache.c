/*
 * test_tier_redis_cache.c - the Redis tier through a cache (the tier core's
 * counting: tier_hits, tier_errors, ...): a hit is a tier hit and not a
 * compile, a down server never fails a fetch, a fleet of processes
 * compiles each key once, leases renewed through a long compile and freed
 * when their holder dies, and CLOSURE_CACHE_REDIS for the default
 * instance.  Each test starts its own redis-server processes
 * (redis_support.c); without one they skip, or fail when
 * CCACHE_TEST_REQUIRE_REDIS=1.  SIGPIPE stays at its default action (main).
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

static void redis_e2e_hit_is_a_tier_hit_not_a_compile(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  t_ctx ctx = {0};
  atomic_store(&t_e2e_compiles, 0);
  ccache *a = t_e2e_open(&ctx, &o, T_E2E_TAG);
  assert_int_equal(t_e2e_get(a, 1), 1); /* compiled */
  ccache_stats st = t_stats(a);
  assert_int_equal(st.program_compiles, 1);
  assert_int_equal(st.tier_misses, 1);
  assert_int_equal(st.tier_writes, 1);
  assert_int_equal(st.tier_hits + st.tier_errors + st.tier_corrupt, 0);
  /* Stored under <prefix>:v1:<tag hash>:<key>, lease released. */
  char key[256];
  t_e2e_entry_key(key, sizeof key, T_E2E_TAG, 1);
  assert_int_equal(t_redis_int(s, "EXISTS %s", key), 1);
  assert_int_equal(t_redis_int(s, "DBSIZE"), 1);
  long long entry_len = t_redis_int(s, "STRLEN %s", key);
  assert_true(entry_len > T_E2E_PAYLOAD);
  t_close(a);

  /* Another cache (another process would do the same): a tier hit. */
  ccache *b = t_e2e_open(&ctx, &o, T_E2E_TAG);
  assert_int_equal(t_e2e_get(b, 1), 100001); /* loaded from Redis */
  st = t_stats(b);
  assert_int_equal(st.program_misses, 1);
  assert_int_equal(st.tier_hits, 1);
  assert_int_equal(st.program_compiles, 0);
  assert_int_equal(st.tier_misses + st.tier_errors + st.tier_writes, 0);
  assert_int_equal(st.tier_bytes_read, entry_len);
  assert_int_equal(atomic_load(&t_e2e_compiles), 1);
  t_close(b);

  /* Another runtime tag lives in another namespace: a miss, a compile. */
  ccache *other = t_e2e_open(&ctx, &o, "test-runtime 2.0");
  assert_int_equal(t_e2e_get(other, 1), 1);
  st = t_stats(other);
  assert_int_equal(st.tier_misses, 1);
  assert_int_equal(st.tier_corrupt, 0);
  assert_int_equal(t_redis_int(s, "DBSIZE"), 2);
  t_close(other);

  /* A damaged entry: tier_corrupt, removed, compiled and stored again. */
  redisReply *r = t_redis_cmd(s, "SETRANGE %s 100 XYZ", key);
  assert_non_null(r);
  freeReplyObject(r);
  ccache *d = t_e2e_open(&ctx, &o, T_E2E_TAG);
  assert_int_equal(t_e2e_get(d, 1), 1);
  st = t_stats(d);
  assert_int_equal(st.tier_corrupt, 1);
  assert_int_equal(st.tier_writes, 1);
  assert_int_equal(st.tier_hits, 0);
  t_close(d);
  assert_int_equal(atomic_load(&t_e2e_compiles), 3);
  t_redis_stop(s);
}

/* Redis down: every miss compiles; each failed op counts once. */
static void redis_e2e_server_down_never_fails_a_fetch(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_redis_kill(s);
  ccache_redis_options o;
  t_opts(&o, s->addr);
  t_ctx ctx = {0};
  atomic_store(&t_e2e_compiles, 0);
  ccache *c = t_e2e_open(&ctx, &o, T_E2E_TAG);
  for (uint64_t k = 1; k <= 5; k++) assert_int_equal(t_e2e_get(c, k), (int)k);
  ccache_stats st = t_stats(c);
  assert_int_equal(st.program_compiles, 5);
  assert_int_equal(st.tier_misses, 5);
  /* Per miss: get, lock, the get after the lock step, put. */
  assert_int_equal(st.tier_errors, 20);
  assert_int_equal(st.tier_writes + st.tier_hits, 0);
  assert_int_equal(atomic_load(&t_e2e_compiles), 5);
  t_close(c);
  t_redis_stop(s);
}

static void redis_e2e_four_processes_compile_each_key_once(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  int go[2], out[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(out), 0);
  fflush(NULL);
  pid_t pid[5];
  for (int i = 0; i < 4; i++) {
    pid[i] = fork();
    assert_true(pid[i] >= 0);
    if (pid[i] == 0) {
      close(go[1]);
      close(out[0]);
      t_fleet_child(s->addr, go[0], out[1], i * (T_FLEET_KEYS / 8));
    }
  }
  close(go[0]);
  assert_int_equal(write(go[1], "GGGG", 4), 4); /* all four start together */
  close(go[1]);
  t_fleet_report rep[5];
  uint64_t compiles = 0, hits = 0, errors = 0;
  for (int i = 0; i < 4; i++) {
    assert_int_equal(t_fleet_recv(out[0], &rep[i]), 0);
    assert_true(rep[i].ok);
    compiles += rep[i].compiles;
    hits += rep[i].tier_hits;
    errors += rep[i].tier_errors;
    assert_int_equal(rep[i].tier_hits + rep[i].tier_misses, T_FLEET_KEYS);
    assert_int_equal(rep[i].compiles, rep[i].tier_misses);
  }
  for (int i = 0; i < 4; i++) {
    int st = 0;
    assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  print_message("4 processes, %d keys: %llu compiles, %llu tier hits\n", T_FLEET_KEYS,
                (unsigned long long)compiles, (unsigned long long)hits);
  assert_int_equal(compiles, T_FLEET_KEYS); /* exactly once per key, fleet-wide */
  assert_int_equal(hits, 4 * T_FLEET_KEYS - T_FLEET_KEYS);
  assert_int_equal(errors, 0);
  assert_int_equal(t_redis_int(s, "DBSIZE"), T_FLEET_KEYS); /* entries only: no lease left */

  /* A fifth process, afterwards: everything from Redis. */
  pid[4] = fork();
  assert_true(pid[4] >= 0);
  if (pid[4] == 0) t_fleet_child(s->addr, -1, out[1], 0);
  assert_int_equal(t_fleet_recv(out[0], &rep[4]), 0);
  int st = 0;
  assert_int_equal(waitpid(pid[4], &st, 0), pid[4]);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_true(rep[4].ok);
  assert_int_equal(rep[4].compiles, 0);
  assert_int_equal(rep[4].tier_hits, T_FLEET_KEYS);
  assert_int_equal(rep[4].tier_errors, 0);
  close(out[0]);
  close(out[1]);
  t_redis_stop(s);
}

/* A compile longer than the lease keeps it: the renewal thread renews it
 * every lease/3 through the tier's renew op.  The compile watches the
 * lease's TTL in Redis and returns after it has gone back up four times
 * (four renewals, 4 x lease/3 > lease), so without renewals it could not
 * finish (the bounded wait would fail it). */
#define RENEW_LEASE_MS 300
static t_redis_server *renew_srv;
static char renew_key[256];
static int renew_seen, renew_expired;

static int renewing_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                            uint64_t *cost_out) {
  (void)ud, (void)c;
  long long last = t_redis_int(renew_srv, "PTTL %s", renew_key);
  unsigned long long deadline = t_redis_now_ms() + T_WAIT_MS;
  while (renew_seen < 4 && t_redis_now_ms() < deadline) {
    long long now = t_redis_int(renew_srv, "PTTL %s", renew_key);
    if (now < 0) { /* expired (-2) or no TTL (-1): the lease was lost */
      renew_expired = 1;
      break;
    }
    if (now > last) renew_seen++;
    last = now;
    t_redis_poll_pause();
  }
  *native_out = t_native((int)pkey.lo);
  *cost_out = 1;
  return 0;
}

static void redis_e2e_lease_renewed_through_a_long_compile(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  renew_srv = s;
  renew_seen = renew_expired = 0;
  t_e2e_entry_key(renew_key, sizeof renew_key, T_E2E_TAG, 31);
  strcat(renew_key, ":lease");
  ccache_redis_options o;
  t_opts(&o, s->addr);
  o.lease_ms = RENEW_LEASE_MS;
  t_ctx ctx = {0};
  ccache *c = t_e2e_open(&ctx, &o, T_E2E_TAG);
  ccache_program *p = NULL;
  assert_int_equal(ccache_program_get_or_compile(c, PK(31), renewing_compile, NULL, &p), CCACHE_OK);
  ccache_program_release(c, p);
  assert_false(renew_expired);
  assert_int_equal(renew_seen, 4);
  ccache_stats st = t_stats(c);
  assert_int_equal(st.tier_errors, 0); /* no renewal failed */
  assert_int_equal(st.tier_writes, 1);
  assert_int_equal(t_redis_int(s, "EXISTS %s", renew_key), 0); /* released */
  t_close(c);
  t_redis_stop(s);
}

#define HOLDER_LEASE_MS    600
#define HOLDER_POLL_MAX_MS 50
#define HOLDER_KEY         77

static int holder_block_fd = -1, holder_note_fd = -1;

/* The holder's compile: announce, then block until killed. */
static int holder_compile(void *ud, ccache *c, ccache_key pkey, void **native_out,
                          uint64_t *cost_out) {
  (void)ud, (void)c, (void)pkey, (void)native_out, (void)cost_out;
  if (write(holder_note_fd, "H", 1) != 1) _exit(7);
  char x;
  while (read(holder_block_fd, &x, 1) != 0) {
  }
  _exit(8); /* never reached: killed first */
}

static void holder_child(const char *servers) {
  ccache_redis_options o;
  t_opts(&o, servers);
  o.lease_ms = HOLDER_LEASE_MS;
  t_ctx ctx = {0};
  ccache *c = t_e2e_open(&ctx, &o, T_E2E_TAG);
  ccache_program *p = NULL;
  ccache_program_get_or_compile(c, PK(HOLDER_KEY), holder_compile, NULL, &p);
  _exit(9);
}

static void waiter_child(const char *servers, int out_fd) {
  atomic_store(&t_e2e_compiles, 0);
  ccache_redis_options o;
  t_opts(&o, servers);
  o.lease_ms = HOLDER_LEASE_MS;
  o.poll_ms = 5;
  o.poll_max_ms = HOLDER_POLL_MAX_MS;
  o.wait_ms = 10000; /* a lease that never lapsed would end in a local compile */
  t_ctx ctx = {0};
  ccache *c = t_e2e_open(&ctx, &o, T_E2E_TAG);
  int id = t_e2e_get(c, HOLDER_KEY);
  t_fleet_send(out_fd, c, id == HOLDER_KEY || id == HOLDER_KEY + 100000);
  ccache_close(c);
  t_child_exit(0);
}

/* The lease holder dies mid-compile: its lease runs out (no renewals), one
 * waiter takes over and compiles, the others load its result; nobody waits
 * much past the lease plus one backoff step. */
static void redis_e2e_lease_holder_killed_mid_compile(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  int note[2], block[2], out[2];
  assert_int_equal(pipe(note), 0);
  assert_int_equal(pipe(block), 0);
  assert_int_equal(pipe(out), 0);
  fflush(NULL);
  pid_t holder = fork();
  assert_true(holder >= 0);
  if (holder == 0) {
    holder_note_fd = note[1];
    holder_block_fd = block[0];
    close(block[1]);
    holder_child(s->addr);
  }
  close(note[1]);
  close(block[0]);
  char h = 0;
  assert_int_equal(read(note[0], &h, 1), 1); /* compiling, lease held */
  assert_int_equal(h, 'H');
  char lkey[256];
  t_e2e_entry_key(lkey, sizeof lkey, T_E2E_TAG, HOLDER_KEY);
  strcat(lkey, ":lease");
  assert_int_equal(t_redis_int(s, "EXISTS %s", lkey), 1);
  pid_t w[3];
  for (int i = 0; i < 3; i++) {
    w[i] = fork();
    assert_true(w[i] >= 0);
    if (w[i] == 0) waiter_child(s->addr, out[1]);
  }
  kill(holder, SIGKILL);
  unsigned long long killed_at = t_redis_now_ms();
  int st = 0;
  assert_int_equal(waitpid(holder, &st, 0), holder);
  assert_true(WIFSIGNALED(st));
  uint64_t compiles = 0, hits = 0;
  for (int i = 0; i < 3; i++) {
    t_fleet_report rep;
    assert_int_equal(t_fleet_recv(out[0], &rep), 0);
    assert_true(rep.ok);
    compiles += rep.compiles;
    hits += rep.tier_hits;
    assert_int_equal(rep.tier_errors, 0);
    assert_int_equal(rep.lock_waits, 1);
    print_message("waiter: compiles %llu, tier hits %llu, waited %llu ms (lease %d + step %d)\n",
                  (unsigned long long)rep.compiles, (unsigned long long)rep.tier_hits,
                  (unsigned long long)rep.wait_ms_max, HOLDER_LEASE_MS, HOLDER_POLL_MAX_MS);
    /* The lease plus one backoff step, with room for two busy shared cores
     * (a waiter polling until wait_ms would take 120 s). */
    assert_true(rep.wait_ms_max <= HOLDER_LEASE_MS + HOLDER_POLL_MAX_MS + 400);
  }
  for (int i = 0; i < 3; i++) {
    assert_int_equal(waitpid(w[i], &st, 0), w[i]);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  print_message("all waiters done %llu ms after the kill\n", t_redis_now_ms() - killed_at);
  assert_int_equal(compiles, 1); /* at most one extra compile: exactly the takeover */
  assert_int_equal(hits, 2);
  assert_int_equal(t_redis_int(s, "EXISTS %s", lkey), 0);
  close(note[0]);
  close(block[1]);
  close(out[0]);
  close(out[1]);
  t_redis_stop(s);
}

static void redis_default_instance_from_environment(void **state) {
  (void)state;
  t_need_redis();
  t_redis_server *s = &t_servers[0];
  t_must_start(s, NULL);
  t_run_env_child(s->addr, 1, 5, CCACHE_OK); /* compiled, stored */
  assert_int_equal(t_redis_int(s, "DBSIZE"), 1);
  t_run_env_child(s->addr, 1, 100005, CCACHE_OK); /* another process: from Redis */
  t_run_env_child(NULL, 1, 5, CCACHE_OK);         /* unset: no tier */
  t_run_env_child(s->addr, 0, 5, CCACHE_OK);      /* no codec: ignored */
  t_run_env_child("not-a-server-list", 1, 0, CCACHE_EINVAL);
  assert_int_equal(t_redis_int(s, "DBSIZE"), 1);
  t_redis_stop(s);
}

int main(void) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  /* The environment test first: its forked children start a renewal thread
   * and exit with it alive, and that thread must get a fresh stack, not one
   * glibc cached from this process's joined threads (valgrind reports the
   * TLS block of such a stack as possibly lost). */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_default_instance_from_environment, t_stop_all),
      cmocka_unit_test_teardown(redis_e2e_hit_is_a_tier_hit_not_a_compile, t_stop_all),
      cmocka_unit_test_teardown(redis_e2e_server_down_never_fails_a_fetch, t_stop_all),
      cmocka_unit_test_teardown(redis_e2e_four_processes_compile_each_key_once, t_stop_all),
      cmocka_unit_test_teardown(redis_e2e_lease_renewed_through_a_long_compile, t_stop_all),
      cmocka_unit_test_teardown(redis_e2e_lease_holder_killed_mid_compile, t_stop_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
