/*
 * redis_tier_support.h - helpers shared by the Redis tier tests
 * (test_tier_redis_*.c) over the private servers of redis_support.h: the
 * servers of the running test and its teardown, the backend opened through
 * its ops table, payloads checked byte for byte, a get on another thread, a
 * cache over one Redis tier with a checking codec, the fleet of child
 * processes, and the default instance from CLOSURE_CACHE_REDIS.
 *
 * Every helper that asserts runs on the test's main thread (cmocka);
 * t_fleet_child2 and the CLOSURE_CACHE_REDIS child report by exit status.
 */
#ifndef CCACHE_TEST_REDIS_TIER_SUPPORT_H
#define CCACHE_TEST_REDIS_TIER_SUPPORT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tier/redis/redis.h"
#include "redis_support.h"
#include "support.h"

#define T_NS      "v1/0123456789abcdef"
#define T_WAIT_MS 10000ull /* generous bound for condition waits */

/* Keys spread over several servers (enough for every server to get some). */
#define T_SPREAD_KEYS 300

/* Skips the test without a redis-server, or fails it when one is required. */
void t_need_redis(void);

/* The servers of the running test (t_redis_stop is idempotent): the
 * teardown t_stop_all stops any that a failed assertion left behind. */
extern t_redis_server t_servers[3];
/* t_redis_start, asserting success. */
void t_must_start(t_redis_server *s, const char *const *extra);
/* A fork child's exit: nothing inherited from the test process stays
 * allocated (valgrind checks each child as it exits). */
void t_child_exit(int code);
/* cmocka teardown: stops every server in t_servers. */
int t_stop_all(void **state);

/* The backend as the tier core holds it: its ops table and its state. */
typedef struct t_be {
  ccache_tier_ops ops;
  ccache__redis *r;
} t_be;

/* Options for servers with fast reconnects (1..20 ms). */
void t_opts(ccache_redis_options *o, const char *servers);
/* Open the backend with o and attach namespace ns; asserts success. */
void t_be_open(t_be *b, const ccache_redis_options *o, const char *ns);
/* t_be_open with t_opts(servers) and T_NS. */
void t_be_open_simple(t_be *b, const char *servers);
void t_be_close(t_be *b);
/* The pool's counters, and its last error (a static buffer). */
ccache__rcounters t_counters(t_be *b);
const char *t_last_error(t_be *b);

/* Deterministic payload bytes for key n (caller frees). */
unsigned char *t_payload(uint64_t n, size_t len);
/* put PK(n) holding t_payload(n, len): the backend's status. */
int t_put_n(t_be *b, uint64_t n, size_t len);
/* get PK(n) and compare with t_payload(n, len): OK, MISS, or the error. */
int t_get_check(t_be *b, uint64_t n, size_t len);
/* Retry get until it is no longer a tier error (bounded in time and count). */
int t_get_until_reachable(t_be *b, uint64_t n, size_t len);
/* The Redis key of PK(n) under prefix and namespace ns (NULL: none). */
void t_entry_key(char *buf, size_t len, const char *prefix, const char *ns, uint64_t n);
/* A string reply of an admin command (caller frees; NULL otherwise). */
char *t_reply_str(t_redis_server *s, const char *fmt, const char *arg);
/* How many times the server has run command name (lower case: "getrange")
 * since it started or since CONFIG RESETSTAT, from INFO commandstats. */
long long t_cmd_calls(t_redis_server *s, const char *name);

/* t_get_check on another thread. */
typedef struct t_async_get {
  t_be *b;
  uint64_t n;
  size_t len;
  int rc;
  int done;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} t_async_get;
/* The thread's body (a t_async_get *): get, then signal done. */
void *t_async_get_main(void *arg);
void t_async_start(t_async_get *g, pthread_t *t, t_be *b, uint64_t n, size_t len);
/* Wait (up to ms) for it to finish: 1 if it did. */
int t_async_wait(t_async_get *g, unsigned long long ms);

/* Through a cache: one Redis tier, a codec whose bytes are
 * t_payload(pkey.lo, T_E2E_PAYLOAD), and the runtime tag T_E2E_TAG. */
#define T_E2E_PAYLOAD      3000
#define T_E2E_TAG          "test-runtime 1.0"
#define T_E2E_KEYS_COUNTED 64
extern _Atomic uint64_t t_e2e_compiles; /* compile callbacks run in this process */
extern _Atomic uint32_t t_e2e_key_compiles[T_E2E_KEYS_COUNTED]; /* per key n < 64 */
extern const ccache_codec t_e2e_codec;
/* A compile that does some real work (no sleeping): native id = pkey.lo. */
int t_e2e_compile(void *ud, ccache *c, ccache_key pkey, void **native_out, uint64_t *cost_out);
/* t_config plus the one tier *t, the codec and runtime tag `tag`, every
 * compile stored (tier_min_compile_us 0); *t stays the caller's until open. */
void t_e2e_config(ccache_config *cfg, t_ctx *ctx, ccache_tier **t, const char *tag);
/* A cache over one Redis tier (options o), the codec and tag; asserts. */
ccache *t_e2e_open(t_ctx *ctx, const ccache_redis_options *o, const char *tag);
/* get-or-compile PK(n): the native's id (n: compiled, n+100000: loaded). */
int t_e2e_get(ccache *c, uint64_t n);
/* The Redis key the core writes PK(n) under for runtime tag `tag`. */
void t_e2e_entry_key(char *buf, size_t len, const char *tag, uint64_t n);

/* One child of the fleet tests: its counts, through a pipe. */
typedef struct t_fleet_report {
  int ok;
  uint64_t compiles, tier_hits, tier_misses, tier_errors, lock_waits, wait_ms_max;
  uint32_t per_key[T_E2E_KEYS_COUNTED]; /* compiles of key n in this process */
} t_fleet_report;
#define T_FLEET_KEYS 24
void t_fleet_send(int fd, ccache *c, int ok);
/* Read one report: 0, or -1 on a short read. */
int t_fleet_recv(int fd, t_fleet_report *rep);
/* Child: wait for the start byte on go_fd, then get every key 1..T_FLEET_KEYS
 * from offset `first` (so the processes collide on different keys) and
 * report on out_fd.  With ready_fd >= 0 it runs in two halves, writing a
 * byte on ready_fd and reading a second start byte in between. */
void t_fleet_child2(const char *servers, int go_fd, int ready_fd, int out_fd, int first);
void t_fleet_child(const char *servers, int go_fd, int out_fd, int first);

/* In a forked child: CLOSURE_CACHE_REDIS=value (NULL: unset), the default
 * instance with or without the codec, then ccache_default must return
 * expect_rc and a get of key 5 the native id expect_id; asserts its exit. */
void t_run_env_child(const char *value, int use_codec, int expect_id, int expect_rc);

/* The backoff step of server i (0 when healthy). */
uint64_t t_backoff_of(t_be *b, size_t i);
/* Wait (bounded) until server i may be connected again. */
void t_wait_backoff_over(t_be *b, size_t i);

#endif
