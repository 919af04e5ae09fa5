#include "support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"

static t_obj *obj_new(int id, char kind) {
  t_obj *o = malloc(sizeof *o);
  assert_non_null(o);
  o->id = id;
  o->kind = kind;
  return o;
}

t_obj *t_closure(int id) { return obj_new(id, 'c'); }
t_obj *t_native(int id) { return obj_new(id, 'p'); }
int t_id(const void *obj) { return obj ? ((const t_obj *)obj)->id : -1; }

uint64_t t_clock(void *ctx) {
  t_ctx *t = ctx;
  atomic_fetch_add(&t->clock_calls, 1);
  return atomic_load(&t->now_ms);
}

static void log_event(t_ctx *t, char kind, const void *obj) {
  if (t->log_on && t->nlog < T_LOG_MAX) {
    t->log[t->nlog].kind = kind;
    t->log[t->nlog].id = t_id(obj);
    t->nlog++;
  }
}

void t_destroy_closure(void *obj, void *ctx) {
  t_ctx *t = ctx;
  if (obj) {
    log_event(t, 'c', obj);
    free(obj);
  }
  atomic_fetch_add(&t->closures_destroyed, 1);
}

void t_destroy_program(void *obj, void *ctx) {
  t_ctx *t = ctx;
  if (obj) {
    log_event(t, 'p', obj);
    free(obj);
  }
  atomic_fetch_add(&t->programs_destroyed, 1);
}

void t_config(ccache_config *cfg, t_ctx *ctx) {
  ccache_config_init(cfg);
  cfg->sweeper_thread = 0;
  cfg->clock_ms = t_clock;
  cfg->destroy_closure = t_destroy_closure;
  cfg->destroy_program = t_destroy_program;
  cfg->ctx = ctx;
}

ccache *t_open(t_ctx *ctx, uint64_t max_items, uint64_t ttl_ms, uint64_t max_cost) {
  ccache_config cfg;
  t_config(&cfg, ctx);
  cfg.max_items = max_items;
  cfg.ttl_ms = ttl_ms;
  cfg.max_cost_bytes = max_cost;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  assert_non_null(c);
  return c;
}

void t_check(ccache *c, t_ctx *ctx) {
  assert_int_equal(ccache__check(c, ctx ? atomic_load(&ctx->now_ms) : UINT64_MAX), 0);
}

void t_close(ccache *c) { assert_int_equal(ccache_close(c), CCACHE_OK); }

ccache_stats t_stats(ccache *c) {
  ccache_stats s;
  memset(&s, 0xA5, sizeof s);
  s.size = sizeof s;
  ccache_stats_get(c, &s);
  return s;
}

ccache_program *t_intern(ccache *c, uint64_t pkey, int id, uint64_t cost) {
  ccache_program *p = NULL;
  assert_int_equal(ccache_program_intern(c, PK(pkey), t_native(id), cost, &p), CCACHE_OK);
  assert_non_null(p);
  return p;
}

void t_put(ccache *c, uint64_t key, int id, ccache_program *p) {
  assert_int_equal(ccache_put(c, K(key), t_closure(id), p), CCACHE_OK);
}

int t_fetch_id(ccache *c, uint64_t key) {
  ccache_lease l;
  int rc = ccache_fetch(c, K(key), &l);
  if (rc == CCACHE_MISS) {
    assert_null(l.closure);
    return -1;
  }
  assert_int_equal(rc, CCACHE_OK);
  int id = t_id(l.closure);
  assert_non_null(l.native);
  ccache_lease_release(c, &l);
  assert_null(l.closure);
  return id;
}

void t_run_child(void (*fn)(void), char *err, size_t errlen, int *aborted) {
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fd[1], 2);
    close(fd[0]);
    fn();
    _exit(0);
  }
  close(fd[1]);
  size_t n = 0;
  ssize_t r;
  while (n + 1 < errlen && (r = read(fd[0], err + n, errlen - 1 - n)) > 0) n += (size_t)r;
  err[n] = '\0';
  close(fd[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  *aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}
