/*
 * tier_redis_stub.c - the Redis tier's entry points in a build without
 * hiredis: the options have their documented defaults, and making the tier
 * reports CCACHE_ENOTSUP with a detail naming the package that enables it.
 * The real backend (tier_redis.c) replaces this file when hiredis is found.
 */
#include <string.h>

#include "tier.h"

void ccache_redis_options_init(ccache_redis_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
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
}

int ccache_tier_redis(const ccache_redis_options *o, ccache_tier **out) {
  if (!o || !out || o->size < sizeof *o) return CCACHE_EINVAL;
  ccache__detail("the Redis tier is not built in: install libhiredis-dev and rebuild ccache");
  return CCACHE_ENOTSUP;
}
