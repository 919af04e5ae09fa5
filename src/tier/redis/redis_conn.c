/*
 * redis_conn.c - connections of the Redis tier (hiredis 0.14, blocking).
 *
 * Pools.  Each server keeps up to CCACHE__REDIS_IDLE_MAX idle connections.
 * A command takes one (or connects a new one when none is idle), runs, and
 * gives it back, so threads missing at the same time each have their own
 * connection and never queue behind one another.  The lease renewal has a
 * connection of its own per server (renew = 1), so it never waits for a
 * pooled command either.
 *
 * Failures and backoff.  A failed connect or AUTH, or a command that fails
 * on its connection (EOF, reset, timeout: hiredis then marks the context
 * unusable) marks the server failed: its generation moves on (pooled
 * connections of the old generation are closed), and no new connection is
 * tried before now + backoff, where backoff starts at reconnect_min_ms and
 * doubles on each further failure up to reconnect_max_ms.  Meanwhile every
 * operation on that server fails at once with CCACHE_EIO (the tier treats it
 * as a miss and the program compiles).  The first successful connect resets
 * the backoff.  An error *reply* (OOM under maxmemory, NOAUTH, ...) leaves
 * the connection usable: it goes back to the pool, with no backoff.
 *
 * Timeouts: redisConnectWithTimeout / redisConnectUnixWithTimeout bound the
 * connect by connect_timeout_ms; redisSetTimeout (SO_RCVTIMEO/SO_SNDTIMEO)
 * bounds each read and write of a command by command_timeout_ms.
 *
 * SIGPIPE.  hiredis writes with write(2), so a write to a connection the
 * server has reset raises SIGPIPE, which by default kills the process.  The
 * library never changes the disposition; instead every call that does socket
 * I/O runs with SIGPIPE blocked in the calling thread (pthread_sigmask).  A
 * SIGPIPE raised meanwhile stays pending on the thread; if none was pending
 * before, it is consumed with a zero-timeout sigtimedwait() before the old
 * mask comes back, so it is never delivered.  (A SIGPIPE that was already
 * pending when the call began is left alone.)
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tier/redis/redis.h"

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static struct timeval tv_of(uint64_t ms) {
  struct timeval tv;
  tv.tv_sec = (time_t)(ms / 1000u);
  tv.tv_usec = (suseconds_t)((ms % 1000u) * 1000u);
  return tv;
}

/* ------------------------------------------------------------ SIGPIPE */
typedef struct pipe_guard {
  sigset_t old;
  int was_pending;
} pipe_guard;

static void guard_begin(pipe_guard *g) {
  sigset_t pipe_set, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old);
  sigemptyset(&pending);
  sigpending(&pending);
  g->was_pending = sigismember(&pending, SIGPIPE) == 1;
}

/* Returns 1 if a SIGPIPE raised inside the guard was consumed. */
static int guard_end(pipe_guard *g) {
  int drained = 0;
  if (!g->was_pending) {
    sigset_t pipe_set, pending;
    sigemptyset(&pending);
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      sigemptyset(&pipe_set);
      sigaddset(&pipe_set, SIGPIPE);
      const struct timespec zero = {0, 0};
      int sig;
      do sig = sigtimedwait(&pipe_set, NULL, &zero);
      while (sig < 0 && errno == EINTR);
      drained = sig == SIGPIPE;
    }
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
  return drained;
}

/* -------------------------------------------------------------- errors */
static void set_error(ccache__rpool *p, const char *fmt, ...) {
  char line[sizeof p->last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  for (char *q = line; *q; q++)
    if (*q == '\n' || *q == '\r') *q = ' ';
  ccache__lock(&p->err_mu);
  memcpy(p->last_error, line, sizeof line);
  ccache__unlock(&p->err_mu);
}

void ccache__rpool_last_error(ccache__rpool *p, char *buf, size_t len) {
  if (!len) return;
  ccache__lock(&p->err_mu);
  snprintf(buf, len, "%s", p->last_error);
  ccache__unlock(&p->err_mu);
}

#define COUNT(p, field) atomic_fetch_add_explicit(&(p)->field, 1, memory_order_relaxed)

void ccache__rpool_counters(ccache__rpool *p, ccache__rcounters *out) {
  out->connects = atomic_load(&p->connects);
  out->connect_failures = atomic_load(&p->connect_failures);
  out->io_errors = atomic_load(&p->io_errors);
  out->reply_errors = atomic_load(&p->reply_errors);
  out->refused_backoff = atomic_load(&p->refused_backoff);
  out->sigpipes = atomic_load(&p->sigpipes);
}

/* ------------------------------------------------------ server state */
/* The server failed while at generation gen: start (or lengthen) its
 * backoff and drop its pooled connections, once per generation. */
static void server_failed(ccache__rpool *p, ccache__rserver *s, uint64_t gen) {
  redisContext *drop[CCACHE__REDIS_IDLE_MAX];
  int ndrop = 0;
  ccache__lock(&s->mu);
  if (s->gen == gen) {
    s->gen++;
    s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : p->reconnect_min_ms;
    if (s->backoff_ms > p->reconnect_max_ms) s->backoff_ms = p->reconnect_max_ms;
    s->down_until_ms = mono_ms() + s->backoff_ms;
    ndrop = s->n_idle;
    memcpy(drop, s->idle, (size_t)ndrop * sizeof drop[0]);
    s->n_idle = 0;
  }
  ccache__unlock(&s->mu);
  for (int i = 0; i < ndrop; i++) redisFree(drop[i]);
}

static void server_ok(ccache__rserver *s, uint64_t gen) {
  ccache__lock(&s->mu);
  if (s->gen == gen) {
    s->backoff_ms = 0;
    s->down_until_ms = 0;
  }
  ccache__unlock(&s->mu);
}

/* Connect, set the command timeout, AUTH.  NULL on failure (recorded). */
static redisContext *connect_server(ccache__rpool *p, ccache__rserver *s) {
  struct timeval ct = tv_of(p->connect_timeout_ms);
  redisContext *c = s->path ? redisConnectUnixWithTimeout(s->path, ct)
                            : redisConnectWithTimeout(s->host, s->port, ct);
  if (!c) {
    set_error(p, "redis %s: connect: out of memory", s->name);
    return NULL;
  }
  if (c->err) {
    set_error(p, "redis %s: connect: %s", s->name, c->errstr);
    redisFree(c);
    return NULL;
  }
  if (redisSetTimeout(c, tv_of(p->command_timeout_ms)) != REDIS_OK) {
    set_error(p, "redis %s: setting the command timeout: %s", s->name, c->errstr);
    redisFree(c);
    return NULL;
  }
  if (p->password) {
    const char *argv[3];
    size_t lens[3];
    int argc = 0;
    argv[argc] = "AUTH", lens[argc++] = 4;
    if (p->user) argv[argc] = p->user, lens[argc++] = strlen(p->user);
    argv[argc] = p->password, lens[argc++] = strlen(p->password);
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      set_error(p, "redis %s: AUTH: %s", s->name, r ? r->str : c->errstr);
      if (r) freeReplyObject(r);
      redisFree(c);
      return NULL;
    }
    freeReplyObject(r);
  }
  return c;
}

/* A new connection for s, unless s is in backoff. */
static int open_conn(ccache__rpool *p, ccache__rserver *s, uint64_t gen, redisContext **out) {
  ccache__lock(&s->mu);
  int refuse = s->down_until_ms && mono_ms() < s->down_until_ms;
  ccache__unlock(&s->mu);
  if (refuse) {
    COUNT(p, refused_backoff);
    return CCACHE_EIO;
  }
  redisContext *c = connect_server(p, s);
  if (!c) {
    COUNT(p, connect_failures);
    server_failed(p, s, gen);
    return CCACHE_EIO;
  }
  COUNT(p, connects);
  server_ok(s, gen);
  *out = c;
  return CCACHE_OK;
}

static uint64_t server_gen(ccache__rserver *s) {
  ccache__lock(&s->mu);
  uint64_t g = s->gen;
  ccache__unlock(&s->mu);
  return g;
}

/* A pooled connection (idle, or new).  *gen: the generation it belongs to. */
static int take_conn(ccache__rpool *p, ccache__rserver *s, redisContext **out, uint64_t *gen) {
  redisContext *c = NULL;
  ccache__lock(&s->mu);
  if (s->n_idle) c = s->idle[--s->n_idle];
  *gen = s->gen;
  ccache__unlock(&s->mu);
  if (c) {
    *out = c;
    return CCACHE_OK;
  }
  return open_conn(p, s, *gen, out);
}

static void give_conn(ccache__rpool *p, ccache__rserver *s, redisContext *c, uint64_t gen,
                      int broken) {
  if (broken) {
    redisFree(c);
    server_failed(p, s, gen);
    return;
  }
  ccache__lock(&s->mu);
  if (gen == s->gen && s->n_idle < CCACHE__REDIS_IDLE_MAX) {
    s->idle[s->n_idle++] = c;
    c = NULL;
  }
  ccache__unlock(&s->mu);
  if (c) redisFree(c);
}

/* ------------------------------------------------------------- commands */
static int run(ccache__rpool *p, size_t server, redisContext *c, int argc, const char **argv,
               const size_t *argvlen, redisReply **reply, int *broken) {
  ccache__rserver *s = &p->servers[server];
  if (p->hook) p->hook(p->hook_arg, server, argv[0]);
  redisReply *r = redisCommandArgv(c, argc, argv, argvlen);
  if (!r || c->err) {
    COUNT(p, io_errors);
    set_error(p, "redis %s: %s: %s", s->name, argv[0], c->err ? c->errstr : "out of memory");
    if (r) freeReplyObject(r);
    *broken = 1;
    return CCACHE_EIO;
  }
  if (r->type == REDIS_REPLY_ERROR) {
    COUNT(p, reply_errors);
    set_error(p, "redis %s: %s: %.*s", s->name, argv[0], (int)r->len, r->str);
    freeReplyObject(r);
    return CCACHE_EIO;
  }
  *reply = r;
  return CCACHE_OK;
}

int ccache__rpool_command(ccache__rpool *p, size_t server, int renew, int argc, const char **argv,
                          const size_t *argvlen, redisReply **reply) {
  if (getpid() != p->pid) return CCACHE_EFORKED;
  ccache__rserver *s = &p->servers[server];
  int broken = 0, rc;
  pipe_guard g;
  guard_begin(&g);
  if (renew) {
    ccache__lock(&s->renew_mu);
    /* The renewal connection follows the server's generation like the pool. */
    uint64_t gen = server_gen(s);
    if (s->renew_ctx && s->renew_gen != gen) {
      redisFree(s->renew_ctx);
      s->renew_ctx = NULL;
    }
    rc = CCACHE_OK;
    if (!s->renew_ctx) {
      rc = open_conn(p, s, gen, &s->renew_ctx);
      s->renew_gen = gen;
    }
    if (rc == CCACHE_OK) {
      rc = run(p, server, s->renew_ctx, argc, argv, argvlen, reply, &broken);
      if (broken) {
        redisFree(s->renew_ctx);
        s->renew_ctx = NULL;
        server_failed(p, s, s->renew_gen);
      }
    }
    ccache__unlock(&s->renew_mu);
  } else {
    redisContext *c = NULL;
    uint64_t gen = 0;
    rc = take_conn(p, s, &c, &gen);
    if (rc == CCACHE_OK) {
      rc = run(p, server, c, argc, argv, argvlen, reply, &broken);
      give_conn(p, s, c, gen, broken);
    }
  }
  if (guard_end(&g)) COUNT(p, sigpipes);
  return rc;
}

void ccache__rreply_free(redisReply *r) {
  if (r) freeReplyObject(r);
}

/* ------------------------------------------------------------ lifetime */
int ccache__rpool_init(ccache__rpool *p, ccache__rserver *servers, size_t n, const char *user,
                       const char *password, uint64_t connect_timeout_ms,
                       uint64_t command_timeout_ms, uint64_t reconnect_min_ms,
                       uint64_t reconnect_max_ms) {
  memset(p, 0, sizeof *p);
  if (user && !(p->user = strdup(user))) return CCACHE_ENOMEM;
  if (password && !(p->password = strdup(password))) {
    free(p->user);
    return CCACHE_ENOMEM;
  }
  p->servers = servers;
  p->n = n;
  p->connect_timeout_ms = connect_timeout_ms;
  p->command_timeout_ms = command_timeout_ms;
  p->reconnect_min_ms = reconnect_min_ms;
  p->reconnect_max_ms = reconnect_max_ms;
  p->pid = getpid();
  int rc = ccache__mutex_init(&p->err_mu);
  if (rc != CCACHE_OK) {
    free(p->user);
    free(p->password);
  }
  return rc;
}

void ccache__rservers_free(ccache__rserver *s, size_t n) {
  if (!s) return;
  for (size_t i = 0; i < n; i++) {
    for (int j = 0; j < s[i].n_idle; j++) redisFree(s[i].idle[j]);
    if (s[i].renew_ctx) redisFree(s[i].renew_ctx);
    free(s[i].name);
    free(s[i].host);
    free(s[i].path);
    if (s[i].locks_made) {
      ccache__mutex_destroy(&s[i].mu);
      ccache__mutex_destroy(&s[i].renew_mu);
    }
  }
  free(s);
}

void ccache__rpool_destroy(ccache__rpool *p) {
  /* Closing sockets writes nothing, so no SIGPIPE guard is needed; in a fork
   * child the fds are the child's copies and closing them leaves the
   * parent's connections alone. */
  ccache__rservers_free(p->servers, p->n);
  p->servers = NULL;
  if (p->password) {
    memset(p->password, 0, strlen(p->password));
    free(p->password);
  }
  free(p->user);
  ccache__mutex_destroy(&p->err_mu);
}
