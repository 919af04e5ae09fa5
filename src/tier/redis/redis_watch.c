/*
 * redis_watch.c - Sentinel mode: following a switch of primary without
 * waiting for an error on the old one.
 *
 * A planned failover (SENTINEL FAILOVER, the way operators upgrade a
 * primary) leaves the old primary up, and still a master for seconds, until
 * the Sentinels reconfigure it; a tier that only re-asks after an error or a
 * -READONLY keeps renewing leases and publishing entries there meanwhile.
 * So a Sentinel-managed tier runs one watcher thread that:
 *
 *   - subscribes to +switch-master on one Sentinel (the Sentinels' list
 *     tried from a place chosen by the process id, so a fleet's
 *     subscriptions spread over the Sentinels; their credentials) and, when
 *     a message names one of its primaries, asks the Sentinels again for
 *     that primary at once;
 *   - re-asks the Sentinels for every primary, whatever the subscription
 *     says, every reask_ms (CCACHE__REDIS_REASK_MS, 60 s) while subscribed
 *     -- the backstop for a switch the subscribed Sentinel did not announce
 *     (its config edited by hand) -- and every CCACHE__REDIS_REASK_UNSUB_MS
 *     (5 s, or reask_ms if smaller) while no Sentinel takes the
 *     subscription; and at once after a subscription is made again
 *     (messages may have been missed meanwhile);

 * so a switch is followed as soon as the subscribed Sentinel announces it,
 * and otherwise within 60 s (5 s unsubscribed) plus one ask, while any
 * Sentinel answers.  The periods keep a fleet's load on the Sentinels small
 * (each ask is a connection to a Sentinel and one to the primary, for ROLE).  An ask is ccache__rsentinel_ask (each answer checked
 * with ROLE).  An address that changed is followed as a -READONLY is: the
 * server's generation moves on (its pooled and renewal connections are
 * dropped, none failed, no backoff) and the next connect goes to the new
 * primary; its failovers count goes up by one.  Leases held across the
 * switch are renewed there, and re-taken if missing (redis_lease.c).
 *
 * Lifecycle, as the library's other workers (base/worker.h): started by the
 * first connect to a Sentinel-managed server (never in a fork child: the
 * pool refuses every command there before connecting), stopped and joined
 * at close through an eventfd that wakes its poll().  In a fork child the
 * thread does not exist: close leaves the watcher alone there.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "base/worker.h"
#include "tier/redis/redis.h"

/* A +switch-master message is ~100 bytes: more buffered and not a reply
 * drops the subscription (the Sentinel's output is bounded too). */
#define WATCH_BUF_MAX 4096

struct ccache__rwatch {
  ccache__mutex watch_mu; /* LEAF: guards w (docs/design.md lock tree) */
  ccache__worker w;
  int efd;          /* written once at stop: wakes the poll() */
  pid_t pid;        /* the process whose thread this is */
  ccache__rpool *p; /* the pool watched (outlives the thread) */
};

/* ------------------------------------------------------ following */
void ccache__rserver_moved(ccache__rserver *s, uint64_t gen, const char *host, int port) {
  redisContext *drop[CCACHE__REDIS_IDLE_MAX];
  int ndrop = 0;
  ccache__lock(&s->server_mu);
  if (host) { /* the new address, already checked: no need to ask again */
    if (port == s->at_port && strcmp(host, s->at_host) == 0) {
      ccache__unlock(&s->server_mu);
      return;
    }
    snprintf(s->at_host, sizeof s->at_host, "%s", host);
    s->at_port = port;
    s->need_resolve = false;
    gen = s->gen;
    atomic_fetch_add_explicit(&s->failovers, 1, memory_order_relaxed);
  }
  if (s->gen == gen) {
    s->gen++;
    if (!host) s->need_resolve = true;
    ndrop = s->n_idle;
    memcpy(drop, s->idle, (size_t)ndrop * sizeof drop[0]);
    s->n_idle = 0;
  }
  ccache__unlock(&s->server_mu);
  for (int i = 0; i < ndrop; i++) redisFree(drop[i]);
}

/* Ask the Sentinels where s's primary is now; follow a new address.  A
 * server never resolved is left to its first connect. */
static void ask_one(ccache__rpool *p, ccache__rserver *s) {
  char host[256], why[200];
  ccache__lock(&s->server_mu);
  int port = s->at_port;
  snprintf(host, sizeof host, "%s", s->at_host);
  ccache__unlock(&s->server_mu);
  if (!port) return;
  atomic_fetch_add_explicit(&p->watch_asks, 1, memory_order_relaxed);
  if (ccache__rsentinel_ask(p, s, host, sizeof host, &port, why, sizeof why) == 0)
    ccache__rserver_moved(s, 0, host, port);
}

static void ask_all(ccache__rpool *p) {
  for (size_t i = 0; i < p->n; i++) ask_one(p, &p->servers[i]);
}

/* ------------------------------------------------------ subscription */
/* A connection to the first Sentinel (from the process's place in the list)
 * that takes SUBSCRIBE +switch-master, or NULL. */
static redisContext *subscribe(ccache__rpool *p) {
  const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
  const size_t lens[2] = {9, 14};
  size_t first = (size_t)getpid() % p->n_sentinels;
  for (size_t k = 0; k < p->n_sentinels; k++) {
    ccache__rserver *t = &p->sentinels[(first + k) % p->n_sentinels];
    char why[200];
    redisContext *c =
        ccache__rconnect(p, t->host, t->port, t->path, p->s_user, p->s_password, why, sizeof why);
    if (!c) continue;
    redisReply *r = NULL;
    int x = ccache__rexec_subscribe(c, 2, argv, lens, ccache__rmono_ms() + p->command_timeout_ms,
                                    &r, why, sizeof why);
    int ok = x == CCACHE__RX_REPLY && r->type == REDIS_REPLY_ARRAY; /* ["subscribe", ch, 1] */
    if (r) freeReplyObject(r);
    if (ok) return c;
    redisFree(c); /* e.g. an ACL user without +subscribe: the re-asks remain */
  }
  return NULL;
}

/* The primary a message names ("<name> <old ip> <old port> <new ip> <new
 * port>"): its index, or p->n. */
static size_t named(ccache__rpool *p, const redisReply *m) {
  if (m->type != REDIS_REPLY_ARRAY || m->elements != 3) return p->n;
  const redisReply *kind = m->element[0], *body = m->element[2];
  if (kind->type != REDIS_REPLY_STRING || kind->len != 7 || memcmp(kind->str, "message", 7) != 0 ||
      body->type != REDIS_REPLY_STRING)
    return p->n;
  const char *sp = memchr(body->str, ' ', body->len);
  size_t nlen = sp ? (size_t)(sp - body->str) : 0;
  for (size_t i = 0; i < p->n; i++)
    if (strlen(p->servers[i].name) == nlen && memcmp(p->servers[i].name, body->str, nlen) == 0)
      return i;
  return p->n;
}

/* Read what the Sentinel sent: 0, or -1 if the subscription is lost. */
static int read_messages(ccache__rpool *p, redisContext *c) {
  if (redisBufferRead(c) != REDIS_OK) return -1;
  for (;;) {
    void *r = NULL;
    if (redisGetReplyFromReader(c, &r) != REDIS_OK) return -1;
    if (!r) return c->reader->len - c->reader->pos > WATCH_BUF_MAX ? -1 : 0;
    size_t i = named(p, r);
    freeReplyObject(r);
    if (i < p->n) {
      atomic_fetch_add_explicit(&p->watch_events, 1, memory_order_relaxed);
      ask_one(p, &p->servers[i]);
    }
  }
}

/* Sleep until the stop, a message, or deadline_ms: 1 if c is readable. */
static int wait_event(int efd, redisContext *c, uint64_t deadline_ms) {
  struct pollfd pf[2] = {{.fd = efd, .events = POLLIN}, {.fd = c ? c->fd : -1, .events = POLLIN}};
  uint64_t now = ccache__rmono_ms();
  uint64_t left = deadline_ms > now ? deadline_ms - now : 0;
  int n = poll(pf, 2, left > INT32_MAX ? INT32_MAX : (int)left);
  return n > 0 && pf[1].revents != 0;
}

/* The re-ask period, subscribed or not. */
static uint64_t period(const ccache__rpool *p, const redisContext *sub) {
  return sub || p->reask_ms < CCACHE__REDIS_REASK_UNSUB_MS ? p->reask_ms
                                                           : CCACHE__REDIS_REASK_UNSUB_MS;
}

static void *watch_main(void *arg) {
  ccache__rwatch *w = arg; /* not p->watch: close clears that before the join */
  ccache__rpool *p = w->p;
  redisContext *sub = NULL;
  int subscribed_once = 0;
  uint64_t next_ask = UINT64_MAX; /* set after the first subscribe: a connect just asked */
  ccache__lock(&w->watch_mu);
  while (!w->w.stop) {
    ccache__unlock(&w->watch_mu);
    ccache__rpipe_guard g;
    ccache__rguard_begin(&g);
    if (!sub && (sub = subscribe(p)) != NULL && subscribed_once++)
      next_ask = 0; /* messages may have been missed while unsubscribed */
    uint64_t now = ccache__rmono_ms();
    if (next_ask == UINT64_MAX || (!sub && next_ask > now + period(p, sub)))
      next_ask = now + period(p, sub); /* the first, or the subscription was lost */
    if (now >= next_ask) {
      ask_all(p);
      next_ask = ccache__rmono_ms() + period(p, sub);
    }
    if (wait_event(w->efd, sub, next_ask) && read_messages(p, sub) != 0) {
      redisFree(sub);
      sub = NULL;
    }
    if (ccache__rguard_end(&g)) atomic_fetch_add_explicit(&p->sigpipes, 1, memory_order_relaxed);
    ccache__lock(&w->watch_mu);
  }
  ccache__unlock(&w->watch_mu);
  if (sub) redisFree(sub);
  return NULL;
}

/* ------------------------------------------------------ lifetime */
int ccache__rwatch_init(ccache__rpool *p) {
  ccache__rwatch *w = calloc(1, sizeof *w);
  if (!w) return CCACHE_ENOMEM;
  w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->efd < 0) {
    free(w);
    return CCACHE_ENOMEM;
  }
  int rc = ccache__worker_init_with_mutex(&w->w, &w->watch_mu);
  if (rc != CCACHE_OK) {
    close(w->efd);
    free(w);
    return rc;
  }
  w->pid = getpid();
  w->p = p;
  p->watch = w;
  if (!p->reask_ms) p->reask_ms = CCACHE__REDIS_REASK_MS;
  return CCACHE_OK;
}

void ccache__rwatch_start(ccache__rpool *p) {
  ccache__rwatch *w = p->watch;
  if (!w) return;
  ccache__lock(&w->watch_mu);
  /* No thread: the re-asks after errors remain (as before the watcher). */
  if (!w->w.started) (void)ccache__worker_start_locked(&w->w, watch_main, w, "ccache-sentinel");
  ccache__unlock(&w->watch_mu);
}

void ccache__rwatch_destroy(ccache__rpool *p) {
  ccache__rwatch *w = p->watch;
  if (!w) return;
  p->watch = NULL;
  /* A fork child has no such thread, and its copy of mu may be held by
   * it: leave it all (the child is about to exit or exec). */
  if (getpid() != w->pid) return;
  ccache__lock(&w->watch_mu);
  ccache__worker_stop_locked(&w->w);
  ccache__unlock(&w->watch_mu);
  uint64_t one = 1;
  ssize_t n = write(w->efd, &one, sizeof one);
  (void)n; /* the counter cannot overflow from one write */
  ccache__worker_join(&w->w);
  ccache__worker_destroy_with_mutex(&w->w);
  close(w->efd);
  free(w);
}
