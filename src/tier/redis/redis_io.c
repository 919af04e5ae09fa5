/*
 * redis_io.c - one connection of the Redis tier: the socket, AUTH, one
 * command under one deadline, and the SIGPIPE guard (redis_conn.c pools
 * these connections).
 *
 * Sockets.  Each connection's socket is made here, SOCK_CLOEXEC from the
 * start (so an exec in another thread never inherits it: there is no window
 * between socket() and an fcntl()) and SOCK_NONBLOCK, connected with a
 * poll() bounded by connect_timeout_ms, then handed to redisConnectFd().
 * The context's REDIS_BLOCK flag is cleared (as hiredis' own non-blocking
 * connects do), and commands are driven here: redisAppendCommandArgv, then
 * redisBufferWrite, and reads fed to the hiredis reader, each after a poll() bounded by what
 * is left of one deadline, now + command_timeout_ms (a long entry's reply
 * is read again at once while bytes are there, polling only when the
 * socket is empty, and straight into the reader's buffer: read_reply,
 * redis_reader.c).  So the timeout bounds
 * a whole command, however its bytes trickle in (SO_RCVTIMEO, the hiredis
 * blocking timeout, bounds each read alone: a server sending a byte just
 * inside it could hold a command forever).
 *
 * SIGPIPE.  hiredis writes with write(2), so a write to a connection the
 * server has reset raises SIGPIPE, which by default kills the process.  The
 * library never changes the disposition; instead every call that does socket
 * I/O runs with SIGPIPE blocked in the calling thread (pthread_sigmask).  A
 * SIGPIPE raised meanwhile stays pending on the thread; if none was pending
 * before, it is consumed with a zero-timeout sigtimedwait() before the old
 * mask comes back, so it is never delivered.  (A SIGPIPE that was already
 * pending when the call began is left alone.)
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tier/redis/redis.h"

uint64_t ccache__rmono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ------------------------------------------------------------ SIGPIPE */
void ccache__rguard_begin(ccache__rpipe_guard *g) {
  sigset_t pipe_set, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old);
  sigemptyset(&pending);
  sigpending(&pending);
  g->was_pending = sigismember(&pending, SIGPIPE) == 1;
}

/* Returns 1 if a SIGPIPE raised inside the guard was consumed. */
int ccache__rguard_end(ccache__rpipe_guard *g) {
  int drained = 0;
  if (!g->was_pending) {
    sigset_t pipe_set, pending;
    sigemptyset(&pending);
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      sigemptyset(&pipe_set);
      sigaddset(&pipe_set, SIGPIPE);
      const struct timespec zero = {0, 0};
      int sig;
      do sig = sigtimedwait(&pipe_set, NULL, &zero);
      while (sig < 0 && errno == EINTR);
      drained = sig == SIGPIPE;
    }
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
  return drained;
}
/* --------------------------------------------------------- socket I/O */
/* Wait until fd is ready for ev or the deadline (monotonic ms) passes:
 * 1 ready, 0 timed out, -1 poll failed (errno). */
static int wait_fd(int fd, short ev, uint64_t deadline_ms) {
  for (;;) {
    uint64_t now = ccache__rmono_ms();
    if (now >= deadline_ms) return 0;
    uint64_t left = deadline_ms - now;
    struct pollfd pf = {.fd = fd, .events = ev, .revents = 0};
    int n = poll(&pf, 1, left > INT32_MAX ? INT32_MAX : (int)left);
    if (n > 0) return 1; /* readable, writable, or an error/hangup the I/O will report */
    if (n < 0 && errno != EINTR) return -1;
  }
}

/* Connect a new non-blocking, close-on-exec socket to addr by the
 * deadline: the descriptor, or -1 with why set. */
static int dial_one(const struct sockaddr *addr, socklen_t alen, uint64_t deadline_ms, char *why,
                    size_t why_len) {
  int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(why, why_len, "socket: %s", strerror(errno));
    return -1;
  }
  int rc;
  do rc = connect(fd, addr, alen);
  while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno == EINPROGRESS) {
    int w = wait_fd(fd, POLLOUT, deadline_ms);
    int err = 0;
    socklen_t elen = sizeof err;
    if (w == 0) {
      err = ETIMEDOUT;
    } else if (w < 0) {
      err = errno;
    } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) {
      err = errno;
    }
    rc = err ? -1 : 0;
    errno = err;
  }
  if (rc != 0) {
    /* A unix socket whose backlog is full answers EAGAIN at once. */
    snprintf(why, why_len, "%s", errno == ETIMEDOUT ? "Connection timed out" : strerror(errno));
    close(fd);
    return -1;
  }
  if (addr->sa_family != AF_UNIX) { /* as hiredis does: no Nagle delay on a request */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

/* A connected socket to host:port, or to the unix socket path, by the
 * deadline, or -1 with why set. */
static int dial_addr(const char *host, int port_no, const char *path, uint64_t deadline_ms,
                     char *why, size_t why_len) {
  if (path) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path); /* length checked at parse */
    return dial_one((const struct sockaddr *)&a, sizeof a, deadline_ms, why, why_len);
  }
  char port[8];
  snprintf(port, sizeof port, "%d", port_no);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int gai = getaddrinfo(host, port, &hints, &res);
  if (gai != 0) {
    snprintf(why, why_len, "resolving %s: %s", host, gai_strerror(gai));
    return -1;
  }
  int fd = -1;
  for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
    fd = dial_one(ai->ai_addr, ai->ai_addrlen, deadline_ms, why, why_len);
  freeaddrinfo(res);
  return fd;
}

/* The longest reply of any other command (a status, an integer, a lease
 * value, an address, ROLE's array): more is a server not speaking to us. */
#define REPLY_MAX (64u * 1024u)

static int wait_failed(int w, char *why, size_t why_len) {
  snprintf(why, why_len, "%s", w == 0 ? "timed out (command_timeout_ms)" : strerror(errno));
  return CCACHE__RX_BROKEN;
}

/* Write what is appended to c by deadline_ms: CCACHE__RX_REPLY when all is
 * sent, else as ccache__rexec. */
static int send_all(redisContext *c, uint64_t deadline_ms, char *why, size_t why_len) {
  for (int done = 0, first = 1;; first = 0) {
    if (redisBufferWrite(c, &done) != REDIS_OK) {
      /* The first write refused with EPIPE / ECONNRESET: the peer had
       * closed (or reset) the connection, and not one byte of the request
       * left: it cannot have reached the server. */
      int e = errno;
      snprintf(why, why_len, "%s", c->errstr[0] ? c->errstr : "connection error");
      return first && (e == EPIPE || e == ECONNRESET) ? CCACHE__RX_UNSENT : CCACHE__RX_BROKEN;
    }
    if (done) return CCACHE__RX_REPLY;
    int w = wait_fd(c->fd, POLLOUT, deadline_ms);
    if (w <= 0) return wait_failed(w, why, why_len);
  }
}

/* Whether c holds more unparsed bytes than a reply whose value is at most
 * value_max bytes can take (why set): the server sends what was not asked
 * for, and the connection is dropped before it costs more memory. */
static bool too_long(redisContext *c, uint64_t value_max, char *why, size_t why_len) {
  if (c->reader->len - c->reader->pos <= value_max + CCACHE__REDIS_REPLY_FRAMING) return false;
  snprintf(why, why_len, "a reply longer than the %llu bytes asked for",
           (unsigned long long)value_max);
  return true;
}

/* Read one reply, of a value of at most value_max bytes (more buffered:
 * CCACHE__RX_BROKEN, why says so), by deadline_ms.  A short reply is
 * waited for before each read: it is not there yet when the command has
 * just left.  A long one (expect: its value's length when over
 * CCACHE__REDIS_SMALL_READ, else 0) is read again at once while the socket
 * has bytes, polling only when it is empty: a poll before each 16 KiB read
 * is 64 wake-ups for a 1 MiB entry, which cost the fetch as much as its
 * copies (bench_redis: ~1.0 ms against ~0.5 ms); from 256 KiB it is read
 * straight into the reader's buffer where hiredis allows (redis_reader.c). */
static int read_reply(redisContext *c, uint64_t deadline_ms, uint64_t value_max, uint64_t expect,
                      redisReply **reply, char *why, size_t why_len) {
  char buf[CCACHE__REDIS_SMALL_READ]; /* what hiredis's redisBufferRead puts on the stack too */
  bool long_reply = expect > CCACHE__REDIS_SMALL_READ;
  for (;;) {
    /* Bytes may keep coming: the deadline and the size asked for bound the
     * loop even when no poll is needed (a hostile server's endless reply). */
    if (too_long(c, value_max, why, why_len)) return CCACHE__RX_BROKEN;
    if (ccache__rmono_ms() >= deadline_ms) return wait_failed(0, why, why_len);
    void *r = NULL;
    if (redisGetReplyFromReader(c, &r) != REDIS_OK) {
      snprintf(why, why_len, "%s", c->errstr[0] ? c->errstr : "protocol error");
      return CCACHE__RX_BROKEN;
    }
    if (r) {
      *reply = r;
      return CCACHE__RX_REPLY;
    }
    int f = 0;
    if (long_reply) f = ccache__rfeed_long(c, expect, buf, sizeof buf, why, why_len);
    if (f == 0) {
      int w = wait_fd(c->fd, POLLIN, deadline_ms);
      if (w <= 0) return wait_failed(w, why, why_len);
      f = long_reply ? ccache__rfeed_long(c, expect, buf, sizeof buf, why, why_len)
                     : ccache__rfeed(c, buf, sizeof buf, why, why_len);
    }
    if (f < 0) return CCACHE__RX_BROKEN;
  }
}

/* The last reply asked for is read: bytes the reader still holds were not
 * asked for (a server not speaking to us, or a hostile one), and would be
 * taken for the next command's reply.  CCACHE__RX_REPLY, or
 * CCACHE__RX_BROKEN with *reply freed and why set. */
static int nothing_after(redisContext *c, int x, redisReply **reply, char *why, size_t why_len) {
  if (x != CCACHE__RX_REPLY || c->reader->len == c->reader->pos) return x;
  ccache__rreply_free(*reply);
  *reply = NULL;
  snprintf(why, why_len, "%zu bytes after the reply that were not asked for",
           c->reader->len - c->reader->pos);
  return CCACHE__RX_BROKEN;
}

/* Read the last reply of what was sent: as read_reply, and nothing_after. */
static int read_last(redisContext *c, uint64_t deadline_ms, uint64_t value_max, uint64_t expect,
                     redisReply **reply, char *why, size_t why_len) {
  int x = read_reply(c, deadline_ms, value_max, expect, reply, why, why_len);
  return nothing_after(c, x, reply, why, why_len);
}

int ccache__rexec(redisContext *c, int argc, const char **argv, const size_t *argvlen,
                  uint64_t deadline_ms, redisReply **reply, char *why, size_t why_len) {
  if (redisAppendCommandArgv(c, argc, argv, argvlen) != REDIS_OK) return CCACHE__RX_NOMEM;
  int x = send_all(c, deadline_ms, why, why_len);
  return x != CCACHE__RX_REPLY ? x : read_last(c, deadline_ms, REPLY_MAX, 0, reply, why, why_len);
}

int ccache__rexec_subscribe(redisContext *c, int argc, const char **argv, const size_t *argvlen,
                            uint64_t deadline_ms, redisReply **reply, char *why, size_t why_len) {
  if (redisAppendCommandArgv(c, argc, argv, argvlen) != REDIS_OK) return CCACHE__RX_NOMEM;
  int x = send_all(c, deadline_ms, why, why_len);
  return x != CCACHE__RX_REPLY ? x : read_reply(c, deadline_ms, REPLY_MAX, 0, reply, why, why_len);
}

/* Append GETRANGE key 0 end. */
static int append_range(redisContext *c, const char *key, size_t klen, uint64_t end) {
  char e[24];
  const char *argv[4] = {"GETRANGE", key, "0", e};
  size_t lens[4] = {8, klen, 1, (size_t)snprintf(e, sizeof e, "%llu", (unsigned long long)end)};
  return redisAppendCommandArgv(c, 4, argv, lens) == REDIS_OK ? 0 : -1;
}

/* Read STRLEN's reply, then GETRANGE's of at most head bytes: the pair's
 * outcome; *first and *second are set (the caller frees them) on
 * CCACHE__RX_REPLY. */
static int read_pair(redisContext *c, uint64_t deadline_ms, uint64_t head, redisReply **first,
                     redisReply **second, char *why, size_t why_len) {
  /* GETRANGE 0 head answers head + 1 bytes at most. */
  int x = read_reply(c, deadline_ms, head + 1, 0, first, why, why_len);
  if (x != CCACHE__RX_REPLY) return x;
  long long n = (*first)->type == REDIS_REPLY_INTEGER ? (*first)->integer : 0;
  uint64_t expect = n <= 0 ? 0 : (uint64_t)n < head ? (uint64_t)n : head;
  x = read_last(c, deadline_ms, head + 1, expect, second, why, why_len);
  if (x != CCACHE__RX_REPLY) freeReplyObject(*first);
  return x;
}

/* The first round's prefix: CCACHE__REDIS_PREFIX_READ, or the longest
 * entry the core has verified from this pool (ccache__rprefix_seen), so a
 * long entry takes one round trip after the first (the first round's
 * 128 KiB, read and thrown away, and a round trip were a fifth of a 1 MiB
 * fetch).  Only a verified entry raises it: a value planted or foreign
 * never makes the server build more than 128 KiB of an entry over the
 * bound.  An entry over the bound costs the server at most the prefix,
 * which a legitimate entry of that size costs on every lookup anyway. */
static uint64_t prefix_for(_Atomic uint64_t *prefix_read, uint64_t max) {
  uint64_t seen = atomic_load_explicit(prefix_read, memory_order_relaxed);
  uint64_t prefix = seen > CCACHE__REDIS_PREFIX_READ ? seen : CCACHE__REDIS_PREFIX_READ;
  return max < prefix ? max : prefix;
}

void ccache__rprefix_seen(_Atomic uint64_t *prefix_read, uint64_t len) {
  if (len <= CCACHE__REDIS_PREFIX_READ) return;
  uint64_t seen = atomic_load_explicit(prefix_read, memory_order_relaxed);
  while (seen < len && !atomic_compare_exchange_weak_explicit(
                           prefix_read, &seen, len, memory_order_relaxed, memory_order_relaxed)) {
  }
}

int ccache__rexec_get_bounded(redisContext *c, const char *key, size_t klen, uint64_t max,
                              _Atomic uint64_t *prefix_read, uint64_t deadline_ms,
                              redisReply **reply, char *why, size_t why_len) {
  /* Round one: STRLEN and the first bytes (prefix_for), pipelined.  Most
   * entries fit, and an entry over max costs the server no more than that
   * prefix. */
  uint64_t head = prefix_for(prefix_read, max);
  const char *argv[2] = {"STRLEN", key};
  size_t lens[2] = {6, klen};
  if (redisAppendCommandArgv(c, 2, argv, lens) != REDIS_OK || append_range(c, key, klen, head))
    return CCACHE__RX_NOMEM;
  int x = send_all(c, deadline_ms, why, why_len);
  redisReply *n = NULL, *g = NULL;
  if (x == CCACHE__RX_REPLY) x = read_pair(c, deadline_ms, head, &n, &g, why, why_len);
  if (x != CCACHE__RX_REPLY) return x;
  if (n->type == REDIS_REPLY_ERROR || g->type != REDIS_REPLY_STRING) {
    ccache__rreply_free(n->type == REDIS_REPLY_ERROR ? g : n); /* e.g. WRONGTYPE: the answer */
    *reply = n->type == REDIS_REPLY_ERROR ? n : g;
    return CCACHE__RX_REPLY;
  }
  unsigned long long len = n->type == REDIS_REPLY_INTEGER && n->integer > 0 ? n->integer : 0;
  freeReplyObject(n);
  if (len > max) {
    ccache__rreply_free(g);
    return CCACHE__RX_OVER;
  }
  if (g->len <= head) {            /* the whole value (GETRANGE stops at its end) */
    if (g->len == 0 && len == 0) { /* no such key: a nil (its 1-byte string freed first:
                                      freeReplyObject frees no nil's str) */
      free(g->str);
      g->str = NULL;
      g->type = REDIS_REPLY_NIL;
    }
    if (g->len > max) {
      ccache__rreply_free(g);
      return CCACHE__RX_OVER;
    }
    *reply = g;
    return CCACHE__RX_REPLY;
  }
  /* Round two, for a value longer than the prefix: all of it, at most
   * max + 1 bytes (it may have grown since). */
  ccache__rreply_free(g);
  if (append_range(c, key, klen, max)) return CCACHE__RX_NOMEM;
  x = send_all(c, deadline_ms, why, why_len);
  if (x == CCACHE__RX_UNSENT) x = CCACHE__RX_BROKEN; /* the first round was sent */
  if (x == CCACHE__RX_REPLY) x = read_last(c, deadline_ms, max + 1, len, &g, why, why_len);
  if (x != CCACHE__RX_REPLY) return x;
  if (g->type == REDIS_REPLY_STRING && g->len > max) {
    ccache__rreply_free(g);
    return CCACHE__RX_OVER;
  }
  *reply = g;
  return CCACHE__RX_REPLY;
}

/* The command's name for the hook and error lines: argv[0], or for a
 * script that opens with a comment "-- NAME ..." (tier_redis.c's lookup,
 * "-- GET"), that NAME: what the script does, not "EVAL". */
const char *ccache__rcmd_label(int argc, const char **argv, const size_t *argvlen, char *buf,
                               size_t len) {
  if (argc < 2 || strcmp(argv[0], "EVAL") != 0 || argvlen[1] < 4 || memcmp(argv[1], "-- ", 3))
    return argv[0];
  size_t n = 0;
  while (n + 1 < len && 3 + n < argvlen[1] && argv[1][3 + n] > ' ') {
    buf[n] = argv[1][3 + n];
    n++;
  }
  buf[n] = '\0';
  return n ? buf : argv[0];
}

int ccache__rconn_closed(redisContext *c) {
  struct pollfd pf = {.fd = c->fd, .events = POLLIN, .revents = 0};
  int n;
  do n = poll(&pf, 1, 0);
  while (n < 0 && errno == EINTR);
  /* Between commands an idle connection has nothing to read: readable
   * means EOF (the server's idle timeout, a proxy's) or bytes nobody asked
   * for; POLLHUP / POLLERR, a reset.  Either way it cannot be used. */
  return n != 0;
}

/* Connect to host:port (or path) and AUTH [user] password (password
 * NULL: none).  NULL on failure, why set. */
redisContext *ccache__rconnect(ccache__rpool *p, const char *host, int port, const char *path,
                               const char *user, const char *password, char *why, size_t why_len) {
  int fd = dial_addr(host, port, path, ccache__rmono_ms() + p->connect_timeout_ms, why, why_len);
  if (fd < 0) return NULL;
  redisContext *c = redisConnectFd(fd);
  if (!c) {
    close(fd);
    snprintf(why, why_len, "out of memory");
    return NULL;
  }
  c->flags &= ~REDIS_BLOCK; /* we poll: EAGAIN means "wait", not an error */
  if (password) {
    const char *argv[3];
    size_t lens[3];
    int argc = 0;
    argv[argc] = "AUTH", lens[argc++] = 4;
    if (user) argv[argc] = user, lens[argc++] = strlen(user);
    argv[argc] = password, lens[argc++] = strlen(password);
    redisReply *r = NULL;
    char w[160];
    int x = ccache__rexec(c, argc, argv, lens, ccache__rmono_ms() + p->command_timeout_ms, &r, w,
                          sizeof w);
    if (x != CCACHE__RX_REPLY || r->type == REDIS_REPLY_ERROR) {
      snprintf(why, why_len, "AUTH: %s",
               x == CCACHE__RX_REPLY   ? r->str
               : x == CCACHE__RX_NOMEM ? "out of memory"
                                       : w);
      if (r) freeReplyObject(r);
      redisFree(c);
      return NULL;
    }
    freeReplyObject(r);
  }
  return c;
}
