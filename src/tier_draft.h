/*
 * tier_draft.h - TEMPORARY: the tier API shapes from the lead's draft
 * (/work/notes/tier-api.h), so the Redis backend builds and is tested through
 * its ops before the tier branch lands them in include/ccache.h.  Removed at
 * the merge of `tier`.
 */
#ifndef CCACHE_TIER_DRAFT_H
#define CCACHE_TIER_DRAFT_H

#include "ccache.h"

enum { CCACHE_ENOTSUP = -8, CCACHE_EPERM = -9, CCACHE_EIO = -10 };

typedef struct ccache_tier_ops {
  uint32_t size;
  const char *name;
  int (*attach)(void *state, const char *ns);
  int (*get)(void *state, ccache_key pkey, void **blob, size_t *len);
  void (*free_blob)(void *state, void *blob, size_t len);
  int (*put)(void *state, ccache_key pkey, const void *blob, size_t len);
  int (*remove)(void *state, ccache_key pkey);
  int (*lock)(void *state, ccache_key pkey, void **lock);
  int (*renew)(void *state, void *lock);
  void (*unlock)(void *state, void *lock);
  void (*close)(void *state);
  uint64_t lease_ms;
  uint64_t poll_ms;
  uint64_t poll_max_ms;
  uint64_t wait_ms;
} ccache_tier_ops;

typedef struct ccache_redis_options {
  uint32_t size;
  const char *servers;
  const char *prefix;
  const char *user;
  const char *password;
  uint64_t connect_timeout_ms;
  uint64_t command_timeout_ms;
  uint64_t entry_ttl_ms;
  uint64_t lease_ms;
  uint64_t poll_ms, poll_max_ms;
  uint64_t wait_ms;
  uint64_t reconnect_min_ms, reconnect_max_ms;
} ccache_redis_options;

CCACHE_API void ccache_redis_options_init(ccache_redis_options *o);

#endif
