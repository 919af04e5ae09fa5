/*
 * redis_sentinel_support.h - helpers shared by the Sentinel tests
 * (test_tier_redis_sentinel*.c) over the servers of redis_tier_support.h: a
 * primary, its replica and a Sentinel watching them, and the primary the
 * Sentinel names.  Each asserts on the test's main thread (cmocka) except
 * t_sentinel_primary_port, which a compile callback calls too.
 */
#ifndef CCACHE_TEST_REDIS_SENTINEL_SUPPORT_H
#define CCACHE_TEST_REDIS_SENTINEL_SUPPORT_H

/* The Sentinel's config text (t_redis_start_sentinel keeps it by pointer). */
extern char t_sentinel_conf[512];

/* Primary t_servers[0], its replica t_servers[1] (in sync), and a Sentinel
 * t_servers[2] watching it as "mym" (quorum 1, down after 500 ms) that has
 * found the replica.  Every wait is bounded. */
void t_sentinel_trio(void);

/* The port Sentinel names for mym now (0 if none). */
int t_sentinel_primary_port(void);

#endif
