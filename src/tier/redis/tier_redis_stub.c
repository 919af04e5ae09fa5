/*
 * tier_redis_stub.c - the Redis tier's entry points in a build without
 * hiredis: making the tier reports CCACHE_ENOTSUP with a detail naming the
 * package that enables it (the options and their defaults are the same in
 * both builds: tier_redis_options.c).  The real backend (tier_redis.c and
 * its redis_*.c) replaces this file when hiredis is found.
 */
#include "base/detail.h"
#include "tier/tier.h"

int ccache_tier_redis(const ccache_redis_options *o, ccache_tier **out) {
  if (!o || !out || o->size < sizeof *o) return CCACHE_EINVAL;
  ccache__detail("the Redis tier is not built in: install libhiredis-dev and rebuild ccache");
  return CCACHE_ENOTSUP;
}
