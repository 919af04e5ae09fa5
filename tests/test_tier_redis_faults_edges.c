/*
 * test_tier_redis_faults_edges.c - the Redis tier's faults at its edges
 * with other processes (issue 20, items 4, 5 and 10): no socket of the tier
 * reaches an exec'd child, a removal deletes only the value it read (an
 * entry another process published in between survives, and loads), and
 * each server of a tier is a part of its health report.  Each test starts
 * its own redis-server processes (redis_support.c); without one they skip,
 * or fail when CCACHE_TEST_REQUIRE_REDIS=1.  A real server failing is
 * test_tier_redis_faults.c, a fake one test_tier_redis_faults_fake.c.
 *
 * SIGPIPE stays at its default action for the whole run (set in main).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis_tier_support.h"

/* ------------------------------------------------------ sockets across exec */
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

/* --------------------------------------------------------- the remove race */
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

/* ------------------------------------------------------------------- health */
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

int main(void) {
  signal(SIGPIPE, SIG_DFL); /* whatever ctest's parent set */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(redis_sockets_close_on_exec, t_stop_all),
      cmocka_unit_test_teardown(redis_remove_if_only_the_value_read, t_stop_all),
      cmocka_unit_test_teardown(redis_e2e_entry_published_between_read_and_remove_survives,
                                t_stop_all),
      cmocka_unit_test_teardown(redis_tier_health_reports_each_server, t_stop_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
