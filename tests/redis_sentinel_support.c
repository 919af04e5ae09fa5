/*
 * redis_sentinel_support.c - helpers shared by the Sentinel tests (see
 * redis_sentinel_support.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis_sentinel_support.h"
#include "redis_tier_support.h"

char t_sentinel_conf[512];

void t_sentinel_trio(void) {
  t_redis_server *s = t_servers;
  /* No 5 s wait for more replicas before the first (diskless) sync. */
  const char *const prim[] = {"--repl-diskless-sync-delay", "0", NULL};
  t_must_start(&s[0], prim);
  char port[16];
  snprintf(port, sizeof port, "%d", s[0].port);
  static char port_arg[16];
  memcpy(port_arg, port, sizeof port);
  const char *const repl[] = {"--replicaof", "127.0.0.1", port_arg, NULL};
  t_must_start(&s[1], repl);
  snprintf(t_sentinel_conf, sizeof t_sentinel_conf,
           "bind 127.0.0.1\n"
           "sentinel monitor mym 127.0.0.1 %d 1\n"
           "sentinel down-after-milliseconds mym 500\n"
           "sentinel failover-timeout mym 5000\n",
           s[0].port);
  assert_int_equal(t_redis_start_sentinel(&s[2], t_sentinel_conf), 0);
  unsigned long long deadline = t_redis_now_ms() + T_WAIT_MS;
  int linked = 0, found = 0;
  while (t_redis_now_ms() < deadline && !(linked && found)) {
    redisReply *r = t_redis_cmd(&s[1], "INFO replication");
    linked = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up");
    if (r) freeReplyObject(r);
    r = t_redis_cmd(&s[2], "SENTINEL replicas mym");
    found = r && r->type == REDIS_REPLY_ARRAY && r->elements == 1;
    if (r) freeReplyObject(r);
    if (!(linked && found)) t_redis_poll_pause();
  }
  assert_true(linked);
  assert_true(found);
}

/* The port Sentinel names for mym now (0 if none). */
int t_sentinel_primary_port(void) {
  redisReply *r = t_redis_cmd(&t_servers[2], "SENTINEL get-master-addr-by-name mym");
  int port = 0;
  if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) port = atoi(r->element[1]->str);
  if (r) freeReplyObject(r);
  return port;
}
