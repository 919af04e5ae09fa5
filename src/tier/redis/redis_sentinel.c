/*
 * redis_sentinel.c - Sentinel mode: asking the Sentinels where a named
 * primary is (SENTINEL get-master-addr-by-name).  redis_conn.c asks before
 * a server's first connect and again after a failure or a -READONLY.
 */
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "tier/redis/redis.h"

/* Whether host:port says it is a primary (ROLE's first element "master"):
 * 1 yes, 0 no or no answer (why set).  A Sentinel's answer can be stale
 * (it has not seen a failover yet): its address is checked before use. */
static int role_is_master(ccache__rpool *p, const char *host, int port, char *why, size_t why_len) {
  char w[160];
  redisContext *c = ccache__rconnect(p, host, port, NULL, p->user, p->password, w, sizeof w);
  if (!c) {
    snprintf(why, why_len, "%.60s:%d: %.120s", host, port, w);
    return 0;
  }
  const char *argv[1] = {"ROLE"};
  const size_t lens[1] = {4};
  redisReply *r = NULL;
  int x =
      ccache__rexec(c, 1, argv, lens, ccache__rmono_ms() + p->command_timeout_ms, &r, w, sizeof w);
  redisFree(c);
  if (x != CCACHE__RX_REPLY) {
    snprintf(why, why_len, "%.60s:%d: ROLE: %.120s", host, port, w);
    return 0;
  }
  int master = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
               r->element[0]->type == REDIS_REPLY_STRING && r->element[0]->len == 6 &&
               memcmp(r->element[0]->str, "master", 6) == 0;
  if (!master)
    snprintf(why, why_len, "%.60s:%d is not a primary (ROLE: %.40s)", host, port,
             r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                     r->element[0]->type == REDIS_REPLY_STRING
                 ? r->element[0]->str
             : r->type == REDIS_REPLY_ERROR ? r->str
                                            : "unexpected reply");
  freeReplyObject(r);
  return master;
}

/* In list order; the first address answered that ROLE shows a primary
 * wins.  If none does and *port is set (the primary last resolved), that
 * one is kept while ROLE shows it still a primary. */
int ccache__rsentinel_ask(ccache__rpool *p, ccache__rserver *s, char *host, size_t hlen, int *port,
                          char *why, size_t why_len) {
  char last[256];
  int last_port = *port;
  snprintf(last, sizeof last, "%s", last_port ? host : "");
  snprintf(why, why_len, "no Sentinel");
  for (size_t i = 0; i < p->n_sentinels; i++) {
    ccache__rserver *t = &p->sentinels[i];
    char w[200];
    redisContext *c =
        ccache__rconnect(p, t->host, t->port, t->path, p->s_user, p->s_password, w, sizeof w);
    if (!c) {
      snprintf(why, why_len, "Sentinel %.60s: %.120s", t->name, w);
      continue;
    }
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", s->name};
    const size_t lens[3] = {8, 23, strlen(s->name)};
    redisReply *r = NULL;
    int x = ccache__rexec(c, 3, argv, lens, ccache__rmono_ms() + p->command_timeout_ms, &r, w,
                          sizeof w);
    redisFree(c);
    if (x != CCACHE__RX_REPLY) {
      snprintf(why, why_len, "Sentinel %.60s: %.120s", t->name,
               x == CCACHE__RX_NOMEM ? "out of memory" : w);
      continue;
    }
    /* Untrusted: an array of exactly two short strings, the port 1..65535. */
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[0]->type == REDIS_REPLY_STRING && r->element[0]->len > 0 &&
             r->element[0]->len < hlen && r->element[1]->type == REDIS_REPLY_STRING &&
             r->element[1]->len > 0 && r->element[1]->len <= 5;
    long v = 0;
    for (size_t j = 0; ok && j < r->element[1]->len; j++) {
      char d = r->element[1]->str[j];
      ok = d >= '0' && d <= '9';
      v = v * 10 + (d - '0');
    }
    if (ok && v >= 1 && v <= 65535) {
      memcpy(host, r->element[0]->str, r->element[0]->len);
      host[r->element[0]->len] = '\0';
      freeReplyObject(r);
      if (role_is_master(p, host, (int)v, w, sizeof w)) {
        *port = (int)v;
        return 0;
      }
      snprintf(why, why_len, "Sentinel %.60s: %.120s", t->name, w); /* stale: the next */
      continue;
    }
    snprintf(why, why_len, "Sentinel %.60s: %.120s", t->name,
             r->type == REDIS_REPLY_NIL     ? "no primary of that name"
             : r->type == REDIS_REPLY_ERROR ? r->str
                                            : "unexpected reply");
    freeReplyObject(r);
  }
  /* No Sentinel answered with a primary: the last one, if still one. */
  char w[200];
  if (last_port && role_is_master(p, last, last_port, w, sizeof w)) {
    snprintf(host, hlen, "%s", last);
    *port = last_port;
    return 0;
  }
  if (last_port) *port = last_port, snprintf(host, hlen, "%s", last);
  return -1;
}
