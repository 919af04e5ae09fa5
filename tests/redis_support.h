/*
 * redis_support.h - start and stop a private redis-server for a test or a
 * benchmark: 127.0.0.1 on a free port plus a unix socket, in a scratch
 * directory, with no persistence (--save '' --appendonly no).  Every server
 * is the caller's own and dies with it (PR_SET_PDEATHSIG).  No cmocka here:
 * the benchmarks use it too.
 *
 * The server binary: $CCACHE_TEST_REDIS_SERVER if set, else redis-server on
 * PATH.  When there is none, tests skip (cmocka skip with a message) unless
 * $CCACHE_TEST_REQUIRE_REDIS=1, which makes them fail instead (CI).
 */
#ifndef CCACHE_TEST_REDIS_SUPPORT_H
#define CCACHE_TEST_REDIS_SUPPORT_H

#include <stddef.h>
#include <sys/types.h>

struct redisContext;
struct redisReply;

#define T_REDIS_MAX_ARGS 32

typedef struct t_redis_server {
  pid_t pid;                          /* 0 while not running */
  int port;                           /* TCP port on 127.0.0.1 */
  char dir[128];                      /* scratch directory */
  char sock[160];                     /* unix socket path inside dir */
  char addr[32];                      /* "127.0.0.1:<port>" */
  char unix_addr[170];                /* "unix:<sock>" */
  const char *args[T_REDIS_MAX_ARGS]; /* extra arguments (not copied: static strings) */
  int nargs;
  const char *admin_user, *admin_pass; /* AUTH for t_redis_cmd, if the server needs it */
  const char *sentinel_conf;           /* Sentinel mode: the config's text (kept by
                                          pointer); written to dir/sentinel.conf at
                                          each start, since Sentinel rewrites it */
  struct redisContext *admin;          /* t_redis_cmd's connection (unix socket) */
} t_redis_server;

/* The redis-server binary, or NULL (why: a message). */
const char *t_redis_binary(const char **why);
/* Whether a missing server must fail rather than skip ($CCACHE_TEST_REQUIRE_REDIS=1). */
int t_redis_required(void);
/* A port on 127.0.0.1 free right now (0 on failure). */
int t_redis_free_port(void);
/* Start a server with the extra arguments (NULL-terminated list, may be
 * NULL; kept by pointer).  Every field is reset except admin_user and
 * admin_pass, which the caller may set first (--requirepass X sets
 * admin_pass itself).  0, or -1 with a message on stderr. */
int t_redis_start(t_redis_server *s, const char *const *extra);
/* Start a Sentinel (redis-server dir/sentinel.conf --sentinel) whose
 * config is conf (kept by pointer), on a free port; otherwise as t_redis_start. */
int t_redis_start_sentinel(t_redis_server *s, const char *conf);
/* Start it again on the same port and directory (after t_redis_kill). */
int t_redis_restart(t_redis_server *s);
/* SIGKILL the server and reap it (the scratch directory stays). */
void t_redis_kill(t_redis_server *s);
/* SIGSTOP / SIGCONT the server process. */
void t_redis_pause(t_redis_server *s);
void t_redis_resume(t_redis_server *s);
/* Kill it if running, close the admin connection, remove the directory. */
void t_redis_stop(t_redis_server *s);
/* A command on the admin connection (made on first use, over the unix
 * socket).  The reply (free with freeReplyObject), or NULL on an I/O error. */
struct redisReply *t_redis_cmd(t_redis_server *s, const char *fmt, ...);
/* Close the admin connection (a fork child calls this before exiting, so
 * the parent's connection is neither used nor reported as leaked; closing
 * the child's copy of the socket leaves the parent's alone). */
void t_redis_forget_admin(t_redis_server *s);
/* t_redis_cmd for an integer reply: its value, or -1000000 on any other reply. */
long long t_redis_int(t_redis_server *s, const char *fmt, ...);
/* Milliseconds of CLOCK_MONOTONIC. */
unsigned long long t_redis_now_ms(void);
/* Short pause between polls of a condition (1 ms). */
void t_redis_poll_pause(void);

#endif
