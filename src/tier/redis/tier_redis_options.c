/*
 * tier_redis_options.c - the Redis tier's option defaults, shared by the
 * real backend (tier_redis.c) and the build without hiredis
 * (tier_redis_stub.c), so both report the same defaults.
 */
#include <string.h>

#include "tier/tier.h"

void ccache_redis_options_init(ccache_redis_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
  o->servers = NULL;
  o->prefix = "ccache";
  o->connect_timeout_ms = 200;
  o->command_timeout_ms = 1000;
  o->entry_ttl_ms = CCACHE_UNBOUNDED;
  o->lease_ms = 10000;
  o->poll_ms = 5;
  o->poll_max_ms = 200;
  o->wait_ms = 120000;
  o->reconnect_min_ms = 100;
  o->reconnect_max_ms = 5000;
  o->idle_close_ms = 20000;
}
