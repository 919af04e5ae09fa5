/*
 * redis.h - internals of the Redis tier, shared by its three source files
 * and the tests.  Not installed; hiredis types appear only as incomplete
 * struct pointers, so including this header does not need hiredis.
 *
 *   redis_servers.c  the server list: parsing, rendezvous hashing
 *   redis_io.c       one connection: close-on-exec sockets, connect + AUTH,
 *                    whole-command timeouts, the SIGPIPE guard
 *   redis_reader.c   feeding hiredis's reader (a long value read straight
 *                    into its buffer, hiredis 0.14)
 *   redis_sentinel.c Sentinel mode: asking the Sentinels for a primary
 *   redis_watch.c    Sentinel mode: the watcher thread (+switch-master,
 *                    periodic re-asks) and following a new address
 *   redis_conn.c     connections: per-server pools, reconnect backoff,
 *                    running a command on a server
 *   redis_idle.c     closing connections unused for idle_close_ms
 *   tier_redis.c     the tier backend: keys, get/put/remove (tier_redis.h)
 *   redis_lease.c    the compile lease (lock/renew/unlock, lease peek)
 *   tier_redis_open.c  the options, creation, health and close
 *
 * Locking: a server's server_mu guards its idle pool, backoff state and last error
 * and is never held across network I/O; renew_mu serialises the renewal connection (held
 * across its I/O, but only renew() takes it); err_mu guards last_error.
 * None is held while another is taken.
 */
#ifndef CCACHE_REDIS_H
#define CCACHE_REDIS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>

#include "base/sync.h"
#include "base/worker.h"
#include "tier/tier.h"

struct redisContext;
struct redisReply;

#define CCACHE__REDIS_MAX_SERVERS        64  /* entries in one server list */
#define CCACHE__REDIS_IDLE_MAX           8   /* idle connections kept per server */
#define CCACHE__REDIS_MAX_PREFIX         256 /* bytes of key prefix (and of namespace) */
/* Bytes of an entry the lookup's first round trip reads (with its STRLEN)
 * before the pool has read a longer one (ccache__rpool.prefix_read):
 * entries up to the prefix cost one round trip, longer ones two. */
#define CCACHE__REDIS_PREFIX_READ        ((uint64_t)128 << 10)
/* Sentinel mode: the watcher re-asks the Sentinels this often (ms) while
 * subscribed to +switch-master, whatever the subscription says, and at
 * most _UNSUB_MS apart while no Sentinel takes the subscription
 * (redis_watch.c). */
#define CCACHE__REDIS_REASK_MS           60000
#define CCACHE__REDIS_REASK_UNSUB_MS     5000
/* A lookup that misses on a key's first live server reads the servers after
 * it only if this process saw that server fail within this window (ms):
 * only then may an entry have been written past it (tier_redis.c). */
#define CCACHE__REDIS_FALLBACK_WINDOW_MS 600000u

/* One server of the list. */
typedef struct ccache__rserver {
  char *name;    /* canonical "host:port" or "unix:/path": its identity */
  char *host;    /* TCP host (brackets stripped), NULL for a unix socket */
  int port;      /* TCP port */
  char *path;    /* unix socket path, NULL for TCP */
  uint64_t seed; /* XXH3-64 of name: the rendezvous seed, independent of
                    the server's position in the list */
  bool sentinel; /* Sentinel mode: name is a primary's name, asked of the
                    pool's Sentinels; host/port/path stay NULL/0 */

  bool locks_made; /* server_mu and renew_mu were initialised */
  ccache__mutex server_mu;
  struct redisContext *idle[CCACHE__REDIS_IDLE_MAX]; /* under server_mu */
  int n_idle;                                        /* under server_mu */
  uint64_t idle_since[CCACHE__REDIS_IDLE_MAX];       /* under server_mu: when idle[i] was given
                                                        back (monotonic ms; rising with i) */
  uint64_t gen;           /* under server_mu: bumped when the server fails; pooled
                            connections of an older generation are dropped */
  uint64_t backoff_ms;    /* under server_mu: current reconnect backoff, 0 when healthy */
  uint64_t down_until_ms; /* under server_mu: no connect before this monotonic time */
  uint64_t down_seen_ms;  /* under server_mu: when this process last saw it fail (0: never) */
  bool answered;          /* under server_mu: a command was answered since the last failure
                             (or ever): the server is known up */
  char last_error[256];   /* under server_mu: this server's most recent failure */
  bool need_resolve; /* under server_mu (Sentinel): ask the Sentinels before the next connect */
  bool write_denied; /* under server_mu: the last write was answered READONLY, NOPERM or OOM
                             (health: CCACHE_TIER_DEGRADED) */
  char at_host[256]; /* under server_mu (Sentinel): the primary's address last answered */
  int at_port;       /* under server_mu (Sentinel): 0 until one was answered */

  /* For ccache_tier_health (relaxed atomics). */
  _Atomic uint64_t errors;          /* failed ops on this server (connect, I/O, error reply,
                                   refused in backoff) */
  _Atomic uint64_t leases_held;     /* gauge: compile leases this tier holds on it */
  _Atomic uint64_t leases_lost;     /* renewals that failed (the lease may lapse) */
  _Atomic uint64_t lock_waits;      /* lease attempts answered "held by another" */
  _Atomic uint64_t fallback_reads;  /* hits here on keys whose first server is another */
  _Atomic uint64_t fallback_writes; /* entries and leases written here for keys whose
                                       earlier servers were down */
  _Atomic uint64_t failovers;       /* new addresses followed (Sentinel) */
  _Atomic uint64_t leases_retaken;  /* leases found missing after a switch and taken again */

  ccache__mutex renew_mu;
  struct redisContext *renew_ctx; /* under renew_mu: the renewal connection */
  uint64_t renew_gen;             /* under renew_mu: the generation it belongs to */
  uint64_t renew_used_ms;         /* under renew_mu: when it last ran a command */
} ccache__rserver;

/* Counters for tests and diagnostics (monotonic, relaxed atomics). */
typedef struct ccache__rcounters {
  uint64_t connects;         /* connections established (AUTH included) */
  uint64_t connect_failures; /* connect or AUTH attempts that failed */
  uint64_t io_errors;        /* commands that failed on the connection (dropped,
                                timed out, reset): the connection is discarded */
  uint64_t reply_errors;     /* commands the server answered with an error */
  uint64_t refused_backoff;  /* operations refused at once: server in backoff */
  uint64_t sigpipes;         /* SIGPIPEs raised by our I/O and drained */
  uint64_t idle_closed;      /* idle connections found closed by the server (its
                                idle timeout) before a command: dropped, no failure */
  uint64_t watch_events;     /* Sentinel: +switch-master messages naming a primary of ours */
  uint64_t watch_asks;       /* Sentinel: asks the watcher ran (messages and re-asks) */
  uint64_t idle_expired;     /* connections we closed, unused for idle_close_ms */
} ccache__rcounters;

/* A server's health, as ccache__rpool_server_state reads it. */
typedef struct ccache__rserver_state {
  bool answered;            /* a command was answered since the last failure */
  bool write_denied;        /* writes answered READONLY / NOPERM / OOM, none accepted since */
  bool failing;             /* in backoff (backoff_ms > 0) */
  uint64_t backoff_ms;      /* the current backoff step, 0 when healthy */
  uint64_t backoff_left_ms; /* until the next connect may be tried */
  uint64_t errors;
  char last_error[256];
} ccache__rserver_state;

/* Test hook: called on the calling thread after a connection was taken
 * and before the command is sent (cmd: the command's name). */
typedef void (*ccache__rhook_fn)(void *arg, size_t server, const char *cmd);

typedef struct ccache__rwatch ccache__rwatch;

typedef struct ccache__rpool {
  ccache__rserver *servers;
  size_t n;
  char *user, *password;      /* AUTH [user] password, or NULL */
  ccache__rserver *sentinels; /* Sentinel mode: the Sentinels (NULL otherwise) */
  size_t n_sentinels;
  char *s_user, *s_password; /* the Sentinels' AUTH [user] password, or NULL */
  uint64_t connect_timeout_ms, command_timeout_ms;
  uint64_t reconnect_min_ms, reconnect_max_ms;
  pid_t pid; /* the creating process: a fork child never uses the connections */

  _Atomic uint64_t connects, connect_failures, io_errors, reply_errors, refused_backoff, sigpipes,
      idle_closed, watch_events, watch_asks, idle_expired;
  /* The bounded lookup's first-round prefix: 0 (CCACHE__REDIS_PREFIX_READ)
   * until the core verified an entry longer than that (ccache__rprefix_seen
   * from the tier's accepted op), then the longest such entry; it never
   * shrinks. */
  _Atomic uint64_t prefix_read;
  ccache__rwatch *watch; /* Sentinel mode: the watcher (redis_watch.c), NULL otherwise */
  uint64_t reask_ms;     /* the watcher's re-ask period while subscribed
                            (CCACHE__REDIS_REASK_MS; tests set it before the first command) */

  /* Closing unused connections (redis_idle.c). */
  uint64_t idle_close_ms; /* CCACHE_UNBOUNDED: never */
  bool reaper_made;       /* reap_mu and reaper were initialised */
  ccache__mutex reap_mu;
  ccache__worker reaper;    /* under reap_mu: the closing thread */
  bool reap_woken;          /* under reap_mu: a connection came back meanwhile */
  _Atomic bool reap_parked; /* the thread sleeps with no deadline (or never ran):
                                 a connection given back must wake it */

  ccache__mutex err_mu;
  char last_error[256]; /* under err_mu: the most recent failure, one line */

  ccache__rhook_fn hook;
  void *hook_arg;
} ccache__rpool;

/* ------------------------------------------------------- redis_servers.c */
/* Parse "host:port[,host:port...]" / "unix:/path" / "[v6addr]:port" into a
 * fresh array of servers (mutexes initialised).  On error returns
 * CCACHE_EINVAL (why: one line naming the bad item) or CCACHE_ENOMEM. */
int ccache__rservers_parse(const char *list, ccache__rserver **out, size_t *n, char *why,
                           size_t why_len);
/* Parse "sentinel:HOST:PORT[,HOST:PORT...]/NAME[,NAME...]": *sentinels
 * (items as in ccache__rservers_parse) and *out, one server per primary
 * name (sentinel = true, seeded by the name).  Status as above. */
int ccache__rservers_parse_sentinel(const char *spec, ccache__rserver **out, size_t *n,
                                    ccache__rserver **sentinels, size_t *n_sentinels, char *why,
                                    size_t why_len);
/* Frees the array, its strings and every connection still pooled. */
void ccache__rservers_free(ccache__rserver *s, size_t n);
/* Highest-random-weight choice: the index of the server whose
 * XXH3-64(key bytes, seed) is largest (ties: the smaller name). */
size_t ccache__rendezvous(const ccache__rserver *s, size_t n, ccache_key pkey);
/* pkey's whole rendezvous order: order[0..n-1] the server indices by
 * decreasing weight (order[0] is ccache__rendezvous()). */
void ccache__rendezvous_order(const ccache__rserver *s, size_t n, ccache_key pkey, uint8_t *order);

/* ------------------------------------------------------------ redis_io.c */
/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t ccache__rmono_ms(void);
/* SIGPIPE blocked in the calling thread for the I/O in between; _end
 * returns 1 if a SIGPIPE raised meanwhile was consumed. */
typedef struct ccache__rpipe_guard {
  sigset_t old;
  int was_pending;
} ccache__rpipe_guard;
void ccache__rguard_begin(ccache__rpipe_guard *g);
int ccache__rguard_end(ccache__rpipe_guard *g);
/* The outcome of one command on a connection. */
enum { CCACHE__RX_REPLY, CCACHE__RX_BROKEN, CCACHE__RX_NOMEM, CCACHE__RX_UNSENT, CCACHE__RX_OVER };
/* Send argv on c and read its reply, all by deadline_ms (monotonic):
 * CCACHE__RX_REPLY with *reply; CCACHE__RX_BROKEN (I/O error, EOF, protocol
 * error, timeout, or bytes after the reply that were not asked for: why
 * set, the connection is unusable); CCACHE__RX_UNSENT
 * (the first write failed with EPIPE or ECONNRESET: the connection is
 * unusable but the request never left, so it may be sent again);
 * CCACHE__RX_NOMEM. */
int ccache__rexec(struct redisContext *c, int argc, const char **argv, const size_t *argvlen,
                  uint64_t deadline_ms, struct redisReply **reply, char *why, size_t why_len);
/* As ccache__rexec, except that bytes after the reply stay in c's reader:
 * a subscription's first messages may follow its confirmation at once
 * (ccache__rexec refuses bytes nobody asked for: CCACHE__RX_BROKEN). */
int ccache__rexec_subscribe(struct redisContext *c, int argc, const char **argv,
                            const size_t *argvlen, uint64_t deadline_ms, struct redisReply **reply,
                            char *why, size_t why_len);
/* An entry of len bytes passed the core's checks: the bounded lookup's
 * first round asks for that many from now on (if over
 * CCACHE__REDIS_PREFIX_READ and more than before). */
void ccache__rprefix_seen(_Atomic uint64_t *prefix_read, uint64_t len);
/* The bounded lookup: STRLEN key and GETRANGE key 0 P (P = the smaller of
 * max and the prefix: CCACHE__REDIS_PREFIX_READ, or *prefix_read when that
 * is larger), pipelined; a value longer than P and not over max is then
 * read whole with GETRANGE key 0 max (a second round trip).
 * CCACHE__RX_OVER if STRLEN says more than max bytes (the server built at
 * most P + 1 of them) or the value grew over max in between; else as
 * ccache__rexec, the reply being the value (a nil reply for no key), or
 * STRLEN's error reply. */
int ccache__rexec_get_bounded(struct redisContext *c, const char *key, size_t klen, uint64_t max,
                              _Atomic uint64_t *prefix_read, uint64_t deadline_ms,
                              struct redisReply **reply, char *why, size_t why_len);
/* The command's name for the hook and error lines: argv[0], or for a
 * script that opens with a comment "-- NAME ...", that NAME. */
const char *ccache__rcmd_label(int argc, const char **argv, const size_t *argvlen, char *buf,
                               size_t len);
/* Whether an idle connection is shown closed (EOF, reset, or unexpected
 * bytes) by a zero-timeout poll: 1 closed, 0 usable. */
int ccache__rconn_closed(struct redisContext *c);
/* Connect to host:port (or path) within p's connect timeout and AUTH
 * [user] password (password NULL: none).  NULL on failure, why set. */
struct redisContext *ccache__rconnect(ccache__rpool *p, const char *host, int port,
                                      const char *path, const char *user, const char *password,
                                      char *why, size_t why_len);

/* ------------------------------------------------------ redis_sentinel.c */
/* Ask the Sentinels, in list order, for s's primary, each answer checked
 * with ROLE (a stale Sentinel's replica is passed over); if none answers
 * with a primary, the one in host/port on entry (the last resolved; port
 * 0: none) is kept while ROLE shows it a primary.  0 with host/port set,
 * or -1 with why set. */
int ccache__rsentinel_ask(ccache__rpool *p, ccache__rserver *s, char *host, size_t hlen, int *port,
                          char *why, size_t why_len);

/* --------------------------------------------------------- redis_watch.c */
/* Sentinel mode: the watcher's state (no thread yet); CCACHE_OK or
 * CCACHE_ENOMEM / CCACHE_ETHREAD. */
int ccache__rwatch_init(ccache__rpool *p);
/* Start the watcher thread unless it runs (no-op without a watcher; a
 * thread that cannot start leaves the re-asks after errors). */
void ccache__rwatch_start(ccache__rpool *p);
/* Stop and join it (in the creating process only), and free its state. */
void ccache__rwatch_destroy(ccache__rpool *p);
/* Sentinel: s's primary moved.  host NULL: ask the Sentinels before the
 * next connect (a -READONLY); else host:port is the new primary, already
 * checked (nothing happens if it is the one known).  Either way, once per
 * generation gen (host set: the current one), the generation moves on and
 * the pooled connections are dropped, with no backoff. */
void ccache__rserver_moved(ccache__rserver *s, uint64_t gen, const char *host, int port);

/* ---------------------------------------------------------- redis_idle.c */
/* Set up closing of unused connections (p->idle_close_ms set first):
 * CCACHE_OK or CCACHE_ENOMEM / CCACHE_ETHREAD.  The thread starts with the
 * first connection given back. */
int ccache__ridle_init(ccache__rpool *p);
/* A connection of p was just given back idle (or the renewal connection
 * used): wake the closing thread if it sleeps without a deadline. */
void ccache__ridle_note(ccache__rpool *p);
/* Stop and join the closing thread (in the creating process only). */
void ccache__ridle_stop(ccache__rpool *p);
/* Close every connection of p unused for idle_close_ms by now_ms: the
 * monotonic ms at which the next one would be, or UINT64_MAX for none. */
uint64_t ccache__ridle_sweep(ccache__rpool *p, uint64_t now_ms);

/* ---------------------------------------------------------- redis_conn.c */
/* Takes ownership of servers (freed by ccache__rpool_destroy, or by the
 * caller on error). */
int ccache__rpool_init(ccache__rpool *p, ccache__rserver *servers, size_t n, const char *user,
                       const char *password, uint64_t connect_timeout_ms,
                       uint64_t command_timeout_ms, uint64_t reconnect_min_ms,
                       uint64_t reconnect_max_ms);
void ccache__rpool_destroy(ccache__rpool *p);
/* Sentinel mode: hand the pool the Sentinels (owned from then on) and
 * their credentials (copied; NULL for none). */
int ccache__rpool_set_sentinels(ccache__rpool *p, ccache__rserver *sentinels, size_t n,
                                const char *user, const char *password);
/* Run one command (binary-safe argv) on server i.
 * renew = 0: on a pooled connection (taken, or made, for this call only, so
 * concurrent callers never queue behind one connection); renew = 1: on the
 * server's own renewal connection.
 * Returns CCACHE_OK with *reply (a non-error reply; the caller frees it with
 * ccache__rreply_free), CCACHE_EIO (no connection, the server in backoff, an
 * I/O error or timeout, or an error reply: recorded in last_error), or
 * CCACHE_ENOMEM / CCACHE_EFORKED. */
int ccache__rpool_command(ccache__rpool *p, size_t server, int renew, int argc, const char **argv,
                          const size_t *argvlen, struct redisReply **reply);
/* The bounded lookup of key on server i's pool (STRLEN + GETRANGE,
 * pipelined: ccache__rexec_get_bounded): as ccache__rpool_command, with
 * *reply the value (string, or nil), or CCACHE__TIER_OVERSIZE when the value is over max
 * bytes (not read past a prefix; the server is not failed). */
int ccache__rpool_get_bounded(ccache__rpool *p, size_t server, const char *key, size_t klen,
                              uint64_t max, struct redisReply **reply);
void ccache__rreply_free(struct redisReply *r);

/* Reads of a reply (redis_reader.c).  A reply over this is long: read
 * again at once while the socket has bytes (redis_io.c read_reply). */
#define CCACHE__REDIS_SMALL_READ    (16u * 1024u)
/* A bulk reply's bytes besides its value ("$<20 digits>\r\n", "\r\n"),
 * with room for a STRLEN reply still buffered before it. */
#define CCACHE__REDIS_REPLY_FRAMING 64u
/* One read of what c's socket holds (up to cap bytes, through buf), fed to
 * its reader: 1 bytes fed, 0 none yet (EAGAIN), -1 the connection failed
 * (why set). */
int ccache__rfeed(struct redisContext *c, char *buf, size_t cap, char *why, size_t why_len);
/* The same for a reply expected to carry a value of expect bytes: from
 * 256 KiB, with hiredis 0.14, read straight into the reader's buffer. */
int ccache__rfeed_long(struct redisContext *c, uint64_t expect, char *buf, size_t cap, char *why,
                       size_t why_len);
void ccache__rpool_counters(ccache__rpool *p, ccache__rcounters *out);
/* Copies the last error line into buf (NUL-terminated; "" if none). */
void ccache__rpool_last_error(ccache__rpool *p, char *buf, size_t len);
/* Records a failure of server's that the tier found in a reply (counted as
 * a reply error). */
void ccache__rpool_note_error(ccache__rpool *p, size_t server, const char *line);
/* A write (SET) on server was accepted: it is no longer write_denied. */
void ccache__rpool_note_write_ok(ccache__rpool *p, size_t server);
/* Whether server is inside its backoff window now (an op on it would be
 * refused at once). */
int ccache__rpool_refusing(ccache__rpool *p, size_t server);
/* Whether server is down: it failed and no command was answered since
 * (its backoff window may have passed: the next op tries it again). */
int ccache__rpool_down(ccache__rpool *p, size_t server);
/* Server's backoff, error count and last error line. */
void ccache__rpool_server_state(ccache__rpool *p, size_t server, ccache__rserver_state *out);

/* ---------------------------------------------------------- tier_redis.c */
typedef struct ccache__redis ccache__redis;
/* The backend alone: fills *ops (name "redis", the options' timings) and
 * *out (the state to pass to every op; ops->close frees it).  Status as
 * ccache_tier_redis(); why gets one line on CCACHE_EINVAL. */
int ccache__redis_new(const ccache_redis_options *o, ccache_tier_ops *ops, ccache__redis **out,
                      char *why, size_t why_len);
ccache__rpool *ccache__redis_pool(ccache__redis *r);
/* The Redis key of pkey's entry (lease = 0) or of its lease (lease = 1),
 * NUL-terminated into buf; returns its length, or 0 if buf is too small. */
size_t ccache__redis_key(const ccache__redis *r, ccache_key pkey, int lease, char *buf, size_t len);
/* The server index pkey maps to. */
size_t ccache__redis_server_of(const ccache__redis *r, ccache_key pkey);
/* A lock's token (32 hex digits, NUL-terminated), as stored under its key. */
const char *ccache__redis_lock_token(const void *lock);
void ccache__redis_set_hook(ccache__redis *r, ccache__rhook_fn fn, void *arg);

#endif
