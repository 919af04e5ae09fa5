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
 * on its connection (EOF, reset, timeout) marks the server failed: its
 * generation moves on (pooled connections of the old generation are closed),
 * and no new connection is tried before now + backoff, where backoff starts
 * at reconnect_min_ms and doubles on each further failure up to
 * reconnect_max_ms.  Meanwhile every operation on that server fails at once
 * with CCACHE_EIO (the tier treats it as a miss and the program compiles).
 * Only a command the server answers resets the backoff: a connect alone does
 * not, since a stopped server whose listen backlog is open still accepts
 * connections (the kernel completes the handshake) and would otherwise be
 * retried every reconnect_min_ms at a cost of command_timeout_ms each.  An
 * error *reply* (OOM under maxmemory, NOPERM, ...) is an answer: the
 * connection goes back to the pool, with no backoff.
 *
 * One connection's I/O (dial, AUTH, a command under one deadline, the
 * SIGPIPE guard) is redis_io.c; asking the Sentinels is redis_sentinel.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tier/redis/redis.h"

/* -------------------------------------------------------------- errors */
/* Record a failure line for the pool and for server s (NULL: the pool
 * only), newlines flattened. */
static void set_line(ccache__rpool *p, ccache__rserver *s, const char *line_in) {
  char line[sizeof p->last_error];
  snprintf(line, sizeof line, "%s", line_in);
  for (char *q = line; *q; q++)
    if (*q == '\n' || *q == '\r') *q = ' ';
  ccache__lock(&p->err_mu);
  memcpy(p->last_error, line, sizeof line);
  ccache__unlock(&p->err_mu);
  if (s) {
    ccache__lock(&s->server_mu);
    memcpy(s->last_error, line, sizeof line);
    ccache__unlock(&s->server_mu);
  }
}

static void set_error(ccache__rpool *p, ccache__rserver *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_error(ccache__rpool *p, ccache__rserver *s, const char *fmt, ...) {
  char line[sizeof p->last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  set_line(p, s, line);
}

void ccache__rpool_note_error(ccache__rpool *p, size_t server, const char *line) {
  ccache__rserver *s = &p->servers[server];
  atomic_fetch_add_explicit(&p->reply_errors, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
  set_line(p, s, line);
}

void ccache__rpool_last_error(ccache__rpool *p, char *buf, size_t len) {
  if (!len) return;
  ccache__lock(&p->err_mu);
  snprintf(buf, len, "%s", p->last_error);
  ccache__unlock(&p->err_mu);
}

#define COUNT(p, field)   atomic_fetch_add_explicit(&(p)->field, 1, memory_order_relaxed)
/* A failure on server s: the pool's counter and the server's error count. */
#define FAIL(p, s, field) (COUNT(p, field), COUNT(s, errors))

void ccache__rpool_counters(ccache__rpool *p, ccache__rcounters *out) {
  out->connects = atomic_load(&p->connects);
  out->connect_failures = atomic_load(&p->connect_failures);
  out->io_errors = atomic_load(&p->io_errors);
  out->reply_errors = atomic_load(&p->reply_errors);
  out->refused_backoff = atomic_load(&p->refused_backoff);
  out->sigpipes = atomic_load(&p->sigpipes);
  out->idle_closed = atomic_load(&p->idle_closed);
  out->watch_events = atomic_load(&p->watch_events);
  out->watch_asks = atomic_load(&p->watch_asks);
  out->idle_expired = atomic_load(&p->idle_expired);
}

/* ------------------------------------------------------ server state */
/* The server failed while at generation gen: start (or lengthen) its
 * backoff and drop its pooled connections, once per generation. */
static void server_failed(ccache__rpool *p, ccache__rserver *s, uint64_t gen) {
  redisContext *drop[CCACHE__REDIS_IDLE_MAX];
  int ndrop = 0;
  ccache__lock(&s->server_mu);
  if (s->gen == gen) {
    s->gen++;
    s->need_resolve = true; /* Sentinel: the primary may have moved */
    s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : p->reconnect_min_ms;
    if (s->backoff_ms > p->reconnect_max_ms) s->backoff_ms = p->reconnect_max_ms;
    s->down_seen_ms = ccache__rmono_ms();
    s->down_until_ms = s->down_seen_ms + s->backoff_ms;
    ndrop = s->n_idle;
    memcpy(drop, s->idle, (size_t)ndrop * sizeof drop[0]);
    s->n_idle = 0;
  }
  ccache__unlock(&s->server_mu);
  for (int i = 0; i < ndrop; i++) redisFree(drop[i]);
}

/* The server answered a command on a connection of generation gen. */
static void server_ok(ccache__rserver *s, uint64_t gen) {
  ccache__lock(&s->server_mu);
  if (s->gen == gen) {
    s->backoff_ms = 0;
    s->down_until_ms = 0;
    s->answered = true;
  }
  ccache__unlock(&s->server_mu);
}

/* Connect and AUTH.  NULL on failure (recorded). */
static redisContext *connect_server(ccache__rpool *p, ccache__rserver *s) {
  char why[200], host[256];
  int port = s->port;
  const char *h = s->host;
  if (s->sentinel) {
    ccache__rwatch_start(p); /* lazily: the first connect needs a primary */
    ccache__lock(&s->server_mu);
    int ask = s->need_resolve || s->at_port == 0;
    snprintf(host, sizeof host, "%s", s->at_host);
    port = s->at_port;
    ccache__unlock(&s->server_mu);
    if (ask) {
      if (ccache__rsentinel_ask(p, s, host, sizeof host, &port, why, sizeof why) != 0) {
        set_error(p, s, "redis %s: %s", s->name, why);
        return NULL;
      }
      ccache__lock(&s->server_mu);
      if (s->at_port != 0 && (s->at_port != port || strcmp(s->at_host, host) != 0))
        atomic_fetch_add_explicit(&s->failovers, 1, memory_order_relaxed);
      snprintf(s->at_host, sizeof s->at_host, "%s", host);
      s->at_port = port;
      s->need_resolve = false;
      ccache__unlock(&s->server_mu);
    }
    h = host;
  }
  redisContext *c = ccache__rconnect(p, h, port, s->path, p->user, p->password, why, sizeof why);
  if (!c) {
    if (s->sentinel)
      set_error(p, s, "redis %.60s (%.60s:%d): connect: %.120s", s->name, h, port, why);
    else
      set_error(p, s, "redis %s: connect: %s", s->name, why);
  }
  return c;
}

/* A new connection for s, unless s is in backoff. */
static int open_conn(ccache__rpool *p, ccache__rserver *s, uint64_t gen, redisContext **out) {
  ccache__lock(&s->server_mu);
  int refuse = s->down_until_ms && ccache__rmono_ms() < s->down_until_ms;
  ccache__unlock(&s->server_mu);
  if (refuse) {
    FAIL(p, s, refused_backoff);
    return CCACHE_EIO;
  }
  redisContext *c = connect_server(p, s);
  if (!c) {
    FAIL(p, s, connect_failures);
    server_failed(p, s, gen);
    return CCACHE_EIO;
  }
  COUNT(p, connects);
  *out = c;
  return CCACHE_OK;
}

static uint64_t server_gen(ccache__rserver *s) {
  ccache__lock(&s->server_mu);
  uint64_t g = s->gen;
  ccache__unlock(&s->server_mu);
  return g;
}

/* An idle connection the server closed meanwhile (its `timeout`, a proxy's
 * or NAT's idle limit) says nothing about the server: dropped, counted
 * apart, and never a failure.  1 if c was closed (and is freed). */
static int drop_if_closed(ccache__rpool *p, redisContext *c) {
  if (!ccache__rconn_closed(c)) return 0;
  redisFree(c);
  COUNT(p, idle_closed);
  return 1;
}

/* A pooled connection (idle and still open, or new).  *gen: the generation
 * it belongs to; *reused: it was idle (it may yet turn out closed). */
static int take_conn(ccache__rpool *p, ccache__rserver *s, redisContext **out, uint64_t *gen,
                     int *reused) {
  for (;;) {
    redisContext *c = NULL;
    ccache__lock(&s->server_mu);
    if (s->n_idle) c = s->idle[--s->n_idle];
    *gen = s->gen;
    ccache__unlock(&s->server_mu);
    if (!c) break;
    if (drop_if_closed(p, c)) continue;
    *out = c;
    *reused = 1;
    return CCACHE_OK;
  }
  *reused = 0;
  return open_conn(p, s, *gen, out);
}

/* broken: 0 fine, 1 the connection failed, 2 the server was demoted
 * (-READONLY, Sentinel mode). */
static void give_conn(ccache__rpool *p, ccache__rserver *s, redisContext *c, uint64_t gen,
                      int broken) {
  if (broken) {
    redisFree(c);
    if (broken == 2)
      ccache__rserver_moved(s, gen, NULL, 0);
    else if (broken == 1)
      server_failed(p, s, gen);
    return;
  }
  ccache__lock(&s->server_mu);
  if (gen == s->gen && s->n_idle < CCACHE__REDIS_IDLE_MAX) {
    s->idle_since[s->n_idle] = ccache__rmono_ms();
    s->idle[s->n_idle++] = c;
    c = NULL;
  }
  ccache__unlock(&s->server_mu);
  if (c) redisFree(c);
  ccache__ridle_note(p); /* closed once unused for idle_close_ms (redis_idle.c) */
}

/* ------------------------------------------------------------- commands */
#define UNSENT 1001 /* run: c was closed and the request never left */

/* bound: 0, or the bounded lookup (argv: "GET" key) of at most bound bytes:
 * CCACHE__TIER_OVERSIZE if over it. */
static int run(ccache__rpool *p, size_t server, redisContext *c, uint64_t gen, int reused,
               uint64_t bound, int argc, const char **argv, const size_t *argvlen,
               redisReply **reply, int *broken) {
  ccache__rserver *s = &p->servers[server];
  char lbuf[16];
  const char *name = ccache__rcmd_label(argc, argv, argvlen, lbuf, sizeof lbuf);
  if (p->hook) p->hook(p->hook_arg, server, name);
  redisReply *r = NULL;
  char why[160];
  uint64_t deadline = ccache__rmono_ms() + p->command_timeout_ms;
  int x = bound ? ccache__rexec_get_bounded(c, argv[1], argvlen[1], bound, &p->prefix_read,
                                            deadline, &r, why, sizeof why)
                : ccache__rexec(c, argc, argv, argvlen, deadline, &r, why, sizeof why);
  if (x == CCACHE__RX_UNSENT && reused) return UNSENT;
  if (x == CCACHE__RX_OVER) { /* every reply was read: the connection is reusable */
    server_ok(s, gen);
    return CCACHE__TIER_OVERSIZE;
  }
  if (x != CCACHE__RX_REPLY) {
    FAIL(p, s, io_errors);
    set_error(p, s, "redis %s: %s: %s", s->name, name,
              x == CCACHE__RX_NOMEM ? "out of memory" : why);
    *broken = 1; /* a half-sent command or half-read reply: the stream is lost */
    return CCACHE_EIO;
  }
  server_ok(s, gen); /* it answered */
  if (r->type == REDIS_REPLY_ERROR) {
    FAIL(p, s, reply_errors);
    set_error(p, s, "redis %s: %s: %.*s", s->name, name, (int)r->len, r->str);
    if (s->sentinel && r->len >= 8 && memcmp(r->str, "READONLY", 8) == 0) *broken = 2;
    if ((r->len >= 8 && memcmp(r->str, "READONLY", 8) == 0) ||
        (r->len >= 6 && memcmp(r->str, "NOPERM", 6) == 0) ||
        (r->len >= 3 && memcmp(r->str, "OOM", 3) == 0)) {
      ccache__lock(&s->server_mu);
      s->write_denied = true; /* up, but writing nowhere: health says DEGRADED */
      ccache__unlock(&s->server_mu);
    }
    freeReplyObject(r);
    return CCACHE_EIO;
  }
  *reply = r;
  return CCACHE_OK;
}

/* run on *c; if *c was reused and the request never left (the server had
 * closed it: the first write failed with EPIPE/ECONNRESET), once more on a
 * fresh connection, which replaces *c (NULL if none could be made: that
 * failure is recorded).  Only an unsent request is sent again: one that may
 * have reached the server is never repeated here. */
static int run_fresh(ccache__rpool *p, size_t server, redisContext **c, uint64_t gen, int reused,
                     uint64_t bound, int argc, const char **argv, const size_t *argvlen,
                     redisReply **reply, int *broken) {
  int rc = run(p, server, *c, gen, reused, bound, argc, argv, argvlen, reply, broken);
  if (rc != UNSENT) return rc;
  redisFree(*c);
  *c = NULL;
  COUNT(p, idle_closed);
  rc = open_conn(p, &p->servers[server], gen, c);
  if (rc != CCACHE_OK) return rc;
  return run(p, server, *c, gen, 0, bound, argc, argv, argvlen, reply, broken);
}

/* The command on s's renewal connection (renew_mu held): made on first use,
 * and again after a failure, a generation change, or an idle close. */
static int renew_command(ccache__rpool *p, size_t server, int argc, const char **argv,
                         const size_t *argvlen, redisReply **reply) {
  ccache__rserver *s = &p->servers[server];
  uint64_t gen = server_gen(s);
  if (s->renew_ctx && s->renew_gen != gen) {
    redisFree(s->renew_ctx);
    s->renew_ctx = NULL;
  }
  /* Idle for lease_ms/3 between renewals: the server's idle timeout may
   * have closed it. */
  if (s->renew_ctx && drop_if_closed(p, s->renew_ctx)) s->renew_ctx = NULL;
  int reused = s->renew_ctx != NULL, broken = 0;
  if (!s->renew_ctx) {
    int rc = open_conn(p, s, gen, &s->renew_ctx);
    if (rc != CCACHE_OK) return rc;
  }
  s->renew_gen = gen;
  int rc = run_fresh(p, server, &s->renew_ctx, gen, reused, 0, argc, argv, argvlen, reply, &broken);
  s->renew_used_ms = ccache__rmono_ms();
  if (broken && s->renew_ctx) {
    redisFree(s->renew_ctx);
    s->renew_ctx = NULL;
    if (broken == 2)
      ccache__rserver_moved(s, gen, NULL, 0);
    else if (broken == 1)
      server_failed(p, s, gen);
  }
  return rc;
}

static int command(ccache__rpool *p, size_t server, int renew, uint64_t bound, int argc,
                   const char **argv, const size_t *argvlen, redisReply **reply) {
  if (getpid() != p->pid) return CCACHE_EFORKED;
  ccache__rserver *s = &p->servers[server];
  int rc;
  ccache__rpipe_guard g;
  ccache__rguard_begin(&g);
  if (renew) {
    ccache__lock(&s->renew_mu);
    rc = renew_command(p, server, argc, argv, argvlen, reply);
    ccache__unlock(&s->renew_mu);
  } else {
    redisContext *c = NULL;
    uint64_t gen = 0;
    int reused = 0, broken = 0;
    rc = take_conn(p, s, &c, &gen, &reused);
    if (rc == CCACHE_OK) {
      rc = run_fresh(p, server, &c, gen, reused, bound, argc, argv, argvlen, reply, &broken);
      if (c) give_conn(p, s, c, gen, broken);
    }
  }
  if (ccache__rguard_end(&g)) COUNT(p, sigpipes);
  if (renew) ccache__ridle_note(p);
  return rc;
}

int ccache__rpool_command(ccache__rpool *p, size_t server, int renew, int argc, const char **argv,
                          const size_t *argvlen, redisReply **reply) {
  return command(p, server, renew, 0, argc, argv, argvlen, reply);
}

int ccache__rpool_get_bounded(ccache__rpool *p, size_t server, const char *key, size_t klen,
                              uint64_t max, redisReply **reply) {
  /* "GET": the lookup's name for the hook and error lines. */
  const char *argv[2] = {"GET", key};
  const size_t lens[2] = {3, klen};
  return command(p, server, 0, max ? max : 1, 2, argv, lens, reply);
}

void ccache__rpool_note_write_ok(ccache__rpool *p, size_t server) {
  ccache__rserver *s = &p->servers[server];
  ccache__lock(&s->server_mu);
  s->write_denied = false;
  ccache__unlock(&s->server_mu);
}

int ccache__rpool_refusing(ccache__rpool *p, size_t server) {
  ccache__rserver *s = &p->servers[server];
  ccache__lock(&s->server_mu);
  int refuse = s->down_until_ms && ccache__rmono_ms() < s->down_until_ms;
  ccache__unlock(&s->server_mu);
  return refuse;
}

int ccache__rpool_down(ccache__rpool *p, size_t server) {
  ccache__rserver *s = &p->servers[server];
  ccache__lock(&s->server_mu);
  int down = s->backoff_ms != 0;
  ccache__unlock(&s->server_mu);
  return down;
}

void ccache__rpool_server_state(ccache__rpool *p, size_t server, ccache__rserver_state *out) {
  ccache__rserver *s = &p->servers[server];
  ccache__lock(&s->server_mu);
  uint64_t now = ccache__rmono_ms();
  out->answered = s->answered;
  out->backoff_ms = s->backoff_ms;
  out->backoff_left_ms = s->down_until_ms > now ? s->down_until_ms - now : 0;
  out->failing = s->backoff_ms != 0;
  out->write_denied = s->write_denied;
  snprintf(out->last_error, sizeof out->last_error, "%s", s->last_error);
  ccache__unlock(&s->server_mu);
  out->errors = atomic_load(&s->errors);
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

int ccache__rpool_set_sentinels(ccache__rpool *p, ccache__rserver *sentinels, size_t n,
                                const char *user, const char *password) {
  p->sentinels = sentinels;
  p->n_sentinels = n;
  if (user && !(p->s_user = strdup(user))) return CCACHE_ENOMEM;
  if (password && !(p->s_password = strdup(password))) return CCACHE_ENOMEM;
  return n ? ccache__rwatch_init(p) : CCACHE_OK;
}

void ccache__rpool_destroy(ccache__rpool *p) {
  /* Closing sockets writes nothing, so no SIGPIPE guard is needed; in a fork
   * child the fds are the child's copies and closing them leaves the
   * parent's connections alone.  The watcher first: it reads the servers. */
  ccache__rwatch_destroy(p);
  ccache__ridle_stop(p);
  ccache__rservers_free(p->servers, p->n);
  p->servers = NULL;
  ccache__rservers_free(p->sentinels, p->n_sentinels);
  p->sentinels = NULL;
  if (p->s_password) {
    memset(p->s_password, 0, strlen(p->s_password));
    free(p->s_password);
  }
  free(p->s_user);
  if (p->password) {
    memset(p->password, 0, strlen(p->password));
    free(p->password);
  }
  free(p->user);
  ccache__mutex_destroy(&p->err_mu);
}
