/*
 * redis_tier_support.c - helpers shared by the Redis tier tests (see
 * redis_tier_support.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis_tier_support.h"
#include "tier/redis/tier_redis.h" /* ccache__redis_accepted */

void t_need_redis(void) {
  const char *why = NULL;
  if (t_redis_binary(&why)) return;
  if (t_redis_required()) fail_msg("redis-server required (CCACHE_TEST_REQUIRE_REDIS=1): %s", why);
  print_message("SKIPPED: %s\n", why);
  skip();
}

/* The servers of the running test (t_redis_stop is idempotent): the teardown
 * stops any that a failed assertion left behind. */
t_redis_server t_servers[3];

void t_must_start(t_redis_server *s, const char *const *extra) {
  assert_int_equal(t_redis_start(s, extra), 0);
}

/* A fork child's exit: nothing inherited from the test process stays
 * allocated (valgrind checks each child as it exits). */
void t_child_exit(int code) {
  for (size_t i = 0; i < sizeof t_servers / sizeof t_servers[0]; i++)
    t_redis_forget_admin(&t_servers[i]);
  _exit(code);
}

int t_stop_all(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof t_servers / sizeof t_servers[0]; i++) {
    t_redis_stop(&t_servers[i]);
    t_servers[i].admin_user = t_servers[i].admin_pass = NULL; /* a failed test's */
  }
  return 0;
}

void t_opts(ccache_redis_options *o, const char *servers) {
  ccache_redis_options_init(o);
  o->servers = servers;
  o->reconnect_min_ms = 1;
  o->reconnect_max_ms = 20;
}

void t_be_open(t_be *b, const ccache_redis_options *o, const char *ns) {
  char why[256];
  int rc = ccache__redis_new(o, &b->ops, &b->r, why, sizeof why);
  if (rc != CCACHE_OK) fail_msg("ccache__redis_new: %d (%s)", rc, why);
  assert_int_equal(b->ops.attach(b->r, ns), CCACHE_OK);
}

void t_be_open_simple(t_be *b, const char *servers) {
  ccache_redis_options o;
  t_opts(&o, servers);
  t_be_open(b, &o, T_NS);
}

void t_be_close(t_be *b) { b->ops.close(b->r); }

ccache__rcounters t_counters(t_be *b) {
  ccache__rcounters c;
  ccache__rpool_counters(ccache__redis_pool(b->r), &c);
  return c;
}

const char *t_last_error(t_be *b) {
  static char buf[256];
  ccache__rpool_last_error(ccache__redis_pool(b->r), buf, sizeof buf);
  return buf;
}

/* Deterministic payload bytes for key n. */
unsigned char *t_payload(uint64_t n, size_t len) {
  unsigned char *p = malloc(len ? len : 1);
  assert_non_null(p);
  uint64_t x = n * 0x9E3779B97F4A7C15ull + 7;
  for (size_t i = 0; i < len; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = (unsigned char)x;
  }
  return p;
}

int t_put_n(t_be *b, uint64_t n, size_t len) {
  unsigned char *p = t_payload(n, len);
  int rc = b->ops.put(b->r, PK(n), p, len);
  free(p);
  return rc;
}

/* get PK(n) and compare with t_payload(n, len): OK, MISS, or the error. */
int t_get_check(t_be *b, uint64_t n, size_t len) {
  void *blob = NULL;
  size_t got = 0;
  int rc = b->ops.get(b->r, PK(n), &blob, &got);
  if (rc != CCACHE_OK) return rc;
  unsigned char *want = t_payload(n, len);
  int same = got == len && memcmp(blob, want, len) == 0;
  free(want);
  /* What the core does with a blob it verified (a fallback hit is copied
   * to the key's first live server then). */
  if (same) ccache__redis_accepted(b->r, PK(n), blob, got, 1);
  b->ops.free_blob(b->r, blob, got);
  assert_true(same);
  return CCACHE_OK;
}

/* Retry get until it is no longer a tier error (a condition wait, bounded
 * in time and count). */
int t_get_until_reachable(t_be *b, uint64_t n, size_t len) {
  unsigned long long deadline = t_redis_now_ms() + T_WAIT_MS;
  int rc = CCACHE_EIO;
  for (int i = 0; i < 100000; i++) {
    rc = t_get_check(b, n, len);
    if (rc != CCACHE_EIO || t_redis_now_ms() > deadline) break;
    t_redis_poll_pause();
  }
  return rc;
}

void t_entry_key(char *buf, size_t len, const char *prefix, const char *ns, uint64_t n) {
  ccache_key k = PK(n);
  snprintf(buf, len, "%s:%s%s%016llx%016llx", prefix, ns ? ns : "", ns ? ":" : "",
           (unsigned long long)k.hi, (unsigned long long)k.lo);
}

char *t_reply_str(t_redis_server *s, const char *fmt, const char *arg) {
  redisReply *r = t_redis_cmd(s, fmt, arg);
  char *out = NULL;
  if (r && r->type == REDIS_REPLY_STRING) out = strndup(r->str, r->len);
  if (r) freeReplyObject(r);
  return out;
}

long long t_cmd_calls(t_redis_server *s, const char *name) {
  char *info = t_reply_str(s, "INFO %s", "commandstats");
  assert_non_null(info);
  char tag[64];
  snprintf(tag, sizeof tag, "cmdstat_%s:calls=", name);
  const char *p = strstr(info, tag);
  long long n = p ? strtoll(p + strlen(tag), NULL, 10) : 0;
  free(info);
  return n;
}

void *t_async_get_main(void *arg) {
  t_async_get *g = arg;
  int rc = t_get_check(g->b, g->n, g->len);
  pthread_mutex_lock(&g->mu);
  g->rc = rc;
  g->done = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

void t_async_start(t_async_get *g, pthread_t *t, t_be *b, uint64_t n, size_t len) {
  memset(g, 0, sizeof *g);
  g->b = b, g->n = n, g->len = len;
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  assert_int_equal(pthread_create(t, NULL, t_async_get_main, g), 0);
}

/* Wait (up to ms) for it to finish: 1 if it did. */
int t_async_wait(t_async_get *g, unsigned long long ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)(ms / 1000);
  until.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&g->mu);
  while (!g->done && pthread_cond_timedwait(&g->cv, &g->mu, &until) == 0) {
  }
  int done = g->done;
  pthread_mutex_unlock(&g->mu);
  return done;
}

_Atomic uint64_t t_e2e_compiles;                         /* compile callbacks run in this process */
_Atomic uint32_t t_e2e_key_compiles[T_E2E_KEYS_COUNTED]; /* per key n < 64 */

/* The codec: a native program is a t_obj; its bytes are t_payload(pkey.lo). */
static int e2e_encode(void *ctx, ccache_key pkey, void *native, void **bytes, size_t *len) {
  (void)ctx, (void)native;
  *bytes = t_payload(pkey.lo, T_E2E_PAYLOAD);
  *len = T_E2E_PAYLOAD;
  return 0;
}
static void e2e_free_bytes(void *ctx, void *bytes, size_t len) {
  (void)ctx, (void)len;
  free(bytes);
}
static int e2e_decode(void *ctx, ccache_key pkey, const void *bytes, size_t len, void **native_out,
                      uint64_t *cost_out) {
  (void)ctx;
  unsigned char *want = t_payload(pkey.lo, T_E2E_PAYLOAD);
  int same = len == T_E2E_PAYLOAD && memcmp(bytes, want, len) == 0;
  free(want);
  if (!same) return -1;
  *native_out = t_native((int)pkey.lo + 100000); /* loaded, not compiled */
  *cost_out = len;
  return 0;
}
const ccache_codec t_e2e_codec = {e2e_encode, e2e_free_bytes, e2e_decode, NULL};

/* A compile that does some real work (no sleeping). */
int t_e2e_compile(void *ud, ccache *c, ccache_key pkey, void **native_out, uint64_t *cost_out) {
  (void)ud, (void)c;
  atomic_fetch_add(&t_e2e_compiles, 1);
  if (pkey.lo < T_E2E_KEYS_COUNTED) atomic_fetch_add(&t_e2e_key_compiles[pkey.lo], 1);
  unsigned char *p = t_payload(pkey.lo, 1 << 16);
  uint64_t h = 0;
  for (int round = 0; round < 8; round++)
    for (size_t i = 0; i < (1 << 16); i++) h = h * 31 + p[i];
  free(p);
  *native_out = t_native((int)pkey.lo + (int)(h & 1) * 0); /* id = key */
  *cost_out = 1;
  return 0;
}

void t_e2e_config(ccache_config *cfg, t_ctx *ctx, ccache_tier **t, const char *tag) {
  t_config(cfg, ctx);
  cfg->codec = &t_e2e_codec;
  cfg->runtime_tag = tag;
  cfg->tier_min_compile_us = 0;
  cfg->tiers = t;
  cfg->n_tiers = 1;
  /* Unsigned by name: these tests are about the tier, not about trust
   * (test_trust_redis and test_trust_edges test the refusal and keys). */
  cfg->trust_flags = CCACHE_TRUST_UNSIGNED;
}

/* A cache over one Redis tier (options o) with t_e2e_config. */
ccache *t_e2e_open(t_ctx *ctx, const ccache_redis_options *o, const char *tag) {
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_redis(o, &t), CCACHE_OK);
  ccache_config cfg;
  t_e2e_config(&cfg, ctx, &t, tag);
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  return c;
}

/* get-or-compile PK(n): the native's id (n: compiled, n+100000: loaded). */
int t_e2e_get(ccache *c, uint64_t n) {
  ccache_program *p = NULL;
  int rc = ccache_program_get_or_compile(c, PK(n), t_e2e_compile, NULL, &p);
  if (rc != CCACHE_OK) return -1;
  int id = t_id(ccache_program_native(p));
  ccache_program_release(c, p);
  return id;
}

void t_e2e_entry_key(char *buf, size_t len, const char *tag, uint64_t n) {
  char ns[CCACHE__TIER_NS_MAX];
  ccache__tier_ns(ccache__tier_tag_hash(tag), ns);
  for (char *q = ns; *q; q++)
    if (*q == '/') *q = ':';
  t_entry_key(buf, len, "ccache", ns, n);
}

void t_fleet_send(int fd, ccache *c, int ok) {
  t_fleet_report rep;
  memset(&rep, 0, sizeof rep);
  ccache_stats st;
  st.size = sizeof st;
  ccache_stats_get(c, &st);
  rep.ok = ok;
  rep.compiles = atomic_load(&t_e2e_compiles);
  rep.tier_hits = st.tier_hits;
  rep.tier_misses = st.tier_misses;
  rep.tier_errors = st.tier_errors;
  rep.lock_waits = st.tier_lock_waits;
  rep.wait_ms_max = st.tier_wait_ms_max;
  for (int i = 0; i < T_E2E_KEYS_COUNTED; i++) rep.per_key[i] = atomic_load(&t_e2e_key_compiles[i]);
  if (write(fd, &rep, sizeof rep) != (ssize_t)sizeof rep) _exit(3);
}

int t_fleet_recv(int fd, t_fleet_report *rep) {
  size_t got = 0;
  while (got < sizeof *rep) {
    ssize_t n = read(fd, (char *)rep + got, sizeof *rep - got);
    if (n <= 0) return -1;
    got += (size_t)n;
  }
  return 0;
}

/* Child: wait for the start signal, then get every key, starting at
 * offset `first` (so the processes collide on different keys).  With
 * ready_fd >= 0 it runs in two halves: keys 1..T_FLEET_KEYS/2, then a byte
 * on ready_fd and a second start byte from go_fd, then the rest. */
void t_fleet_child2(const char *servers, int go_fd, int ready_fd, int out_fd, int first) {
  atomic_store(&t_e2e_compiles, 0);
  for (int i = 0; i < T_E2E_KEYS_COUNTED; i++) atomic_store(&t_e2e_key_compiles[i], 0);
  ccache_redis_options o;
  t_opts(&o, servers);
  o.poll_ms = 1;
  o.poll_max_ms = 20;
  t_ctx ctx = {0};
  ccache_tier *t = NULL;
  if (ccache_tier_redis(&o, &t) != CCACHE_OK) _exit(4);
  ccache_config cfg;
  t_e2e_config(&cfg, &ctx, &t, T_E2E_TAG);
  ccache *c = NULL;
  if (ccache_open(&cfg, &c) != CCACHE_OK) _exit(5);
  char go;
  if (go_fd >= 0 && read(go_fd, &go, 1) != 1) _exit(6);
  int ok = 1;
  int parts = ready_fd >= 0 ? 2 : 1, per = T_FLEET_KEYS / parts;
  for (int part = 0; part < parts; part++) {
    if (part == 1 && (write(ready_fd, "R", 1) != 1 || read(go_fd, &go, 1) != 1)) _exit(7);
    for (int i = 0; i < per; i++) {
      uint64_t k = (uint64_t)(part * per + (first + i) % per) + 1;
      int id = t_e2e_get(c, k);
      ok = ok && (id == (int)k || id == (int)k + 100000);
    }
  }
  t_fleet_send(out_fd, c, ok);
  ccache_close(c);
  t_child_exit(0);
}

void t_fleet_child(const char *servers, int go_fd, int out_fd, int first) {
  t_fleet_child2(servers, go_fd, -1, out_fd, first);
}

/* CLOSURE_CACHE_REDIS adds a Redis tier to the default instance (which
 * exists once per process: each scenario runs in a child). */
static int env_child(const char *value, int use_codec, int expect_id, int expect_rc) {
  if (value)
    setenv("CLOSURE_CACHE_REDIS", value, 1);
  else
    unsetenv("CLOSURE_CACHE_REDIS");
  setenv("CLOSURE_CACHE_TRUST", "unsigned", 1); /* unsigned by name */
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.sweeper_thread = 0;
  cfg.destroy_program = t_destroy_program;
  t_ctx ctx = {0};
  cfg.ctx = &ctx;
  cfg.codec = use_codec ? &t_e2e_codec : NULL;
  cfg.runtime_tag = T_E2E_TAG;
  cfg.tier_min_compile_us = 0;
  if (ccache_default_init(&cfg) != CCACHE_OK) return 20;
  ccache *c = NULL;
  int rc = ccache_default(&c);
  if (rc != expect_rc) return 21;
  if (rc != CCACHE_OK) return strstr(ccache_error_detail(), "CLOSURE_CACHE_REDIS") ? 0 : 22;
  if (t_e2e_get(c, 5) != expect_id) return 23;
  return 0;
}

void t_run_env_child(const char *value, int use_codec, int expect_id, int expect_rc) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) t_child_exit(env_child(value, use_codec, expect_id, expect_rc));
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* The backoff step of server i (0 when healthy). */
uint64_t t_backoff_of(t_be *b, size_t i) {
  ccache__rserver *s = &ccache__redis_pool(b->r)->servers[i];
  ccache__lock(&s->server_mu);
  uint64_t v = s->backoff_ms;
  ccache__unlock(&s->server_mu);
  return v;
}

/* Wait (bounded) until server i may be connected again. */
void t_wait_backoff_over(t_be *b, size_t i) {
  ccache__rserver *s = &ccache__redis_pool(b->r)->servers[i];
  unsigned long long deadline = t_redis_now_ms() + T_WAIT_MS;
  for (;;) {
    ccache__lock(&s->server_mu);
    uint64_t until = s->down_until_ms;
    ccache__unlock(&s->server_mu);
    if (t_redis_now_ms() > until || t_redis_now_ms() > deadline) break;
    t_redis_poll_pause();
  }
}
