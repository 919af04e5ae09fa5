/*
 * support.h - shared helpers for the cmocka tests: a fake clock, counting
 * destroy callbacks over real heap objects (so a double destroy is a double
 * free that ASan reports), keys, and a cache opener.
 *
 * cmocka is not thread-safe: worker threads record results in plain
 * variables and only the main thread asserts.
 */
#ifndef CCACHE_TEST_SUPPORT_H
#define CCACHE_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdatomic.h>

#include "ccache.h"

#ifndef CCACHE_TEST_SCALE
#define CCACHE_TEST_SCALE 1
#endif

#define T_LOG_MAX 4096

/* A destroy log entry: 'c' closure or 'p' program, and its id. */
typedef struct t_event {
  char kind;
  int id;
} t_event;

typedef struct t_ctx {
  _Atomic uint64_t now_ms; /* the fake clock */
  _Atomic uint64_t closures_destroyed;
  _Atomic uint64_t programs_destroyed;
  _Atomic uint64_t clock_calls;
  /* Ordered log, filled only by single-threaded tests. */
  int log_on;
  int nlog;
  t_event log[T_LOG_MAX];
} t_ctx;

/* A heap object standing for a closure or a native program. */
typedef struct t_obj {
  int id;
  char kind;
} t_obj;

t_obj *t_closure(int id);
t_obj *t_native(int id);
int t_id(const void *obj);

uint64_t t_clock(void *ctx);
void t_destroy_closure(void *obj, void *ctx);
void t_destroy_program(void *obj, void *ctx);

static inline ccache_key K(uint64_t n) {
  ccache_key k = {n * 0x9E3779B97F4A7C15ull + 1, n};
  return k;
}
static inline ccache_key PK(uint64_t n) {
  ccache_key k = {n, 0xABCDEF0000000000ull ^ n};
  return k;
}

/* Fills cfg with the fake clock, the counting destroys and no sweeper. */
void t_config(ccache_config *cfg, t_ctx *ctx);
/* Opens a cache with t_config and the given bounds; asserts success. */
ccache *t_open(t_ctx *ctx, uint64_t max_items, uint64_t ttl_ms, uint64_t max_cost);
/* Asserts the consistency checker passes at the fake clock's time. */
void t_check(ccache *c, t_ctx *ctx);
/* Closes a cache and asserts CCACHE_OK. */
void t_close(ccache *c);
ccache_stats t_stats(ccache *c);

/* intern a fresh native with id, cost; returns the handle. */
ccache_program *t_intern(ccache *c, uint64_t pkey, int id, uint64_t cost);
/* put a fresh closure id under K(key) running p. */
void t_put(ccache *c, uint64_t key, int id, ccache_program *p);
/* fetch K(key): returns the closure id on a hit (lease released), -1 on a miss. */
int t_fetch_id(ccache *c, uint64_t key);

/* Runs fn in a forked child with its stderr sent to a pipe; err receives
 * what the child wrote (NUL-terminated), *aborted whether it died of SIGABRT.
 * For what must abort: a misuse caught, an internal error. */
void t_run_child(void (*fn)(void), char *err, size_t errlen, int *aborted);

#endif
