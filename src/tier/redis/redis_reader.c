/*
 * redis_reader.c - feeding hiredis's reply reader, and the one place the
 * Redis tier reaches inside it.
 *
 * A reply is read from the socket and fed to the connection's reader
 * (redisReaderFeed), which parses it into a redisReply.  For an entry of
 * DIRECT_MIN bytes or more, reading through a 16 KiB stack buffer copies
 * the value once more than needed and takes some 64 reads a MiB; with
 * hiredis 0.14 (checked at build time) the socket is read straight into the
 * end of the reader's buffer instead (feed_direct: read.h's public
 * buf/pos/len, sds.h's sdsMakeRoomFor/sdsIncrLen).  Other hiredis versions
 * take the plain path.
 *
 * Below DIRECT_MIN the stack buffer stays: a reader buffer made at twice
 * the value's size in one step and let go at the next command had glibc
 * grow and trim its heap at every fetch of a 64 KiB or 129 KiB entry
 * (bench_redis: 65 us became 340 us; 2 brk calls a fetch), where growing
 * it a read at a time does not.  From 256 KiB (buffers from 512 KiB) no
 * such churn was seen (260 KiB to 3 MiB measured).
 *
 * Left alone: handing the value over in the reader's buffer instead of
 * hiredis's copy into the reply (a reader function table of our own for
 * that one reply) saved ~10 % of a 1 MiB fetch in bench_redis (unpaced
 * loopback), for a second reach into hiredis.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <hiredis/sds.h>

#include "tier/redis/redis.h"

int ccache__rfeed(redisContext *c, char *buf, size_t cap, char *why, size_t why_len) {
  ssize_t n;
  do n = read(c->fd, buf, cap);
  while (n < 0 && errno == EINTR);
  if (n > 0) {
    if (redisReaderFeed(c->reader, buf, (size_t)n) == REDIS_OK) return 1;
    snprintf(why, why_len, "out of memory");
    return -1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  snprintf(why, why_len, "%s", n == 0 ? "server closed the connection" : strerror(errno));
  return -1;
}

void ccache__rreply_free(redisReply *r) {
  if (r) freeReplyObject(r);
}

#if HIREDIS_MAJOR == 0 && HIREDIS_MINOR >= 14
#define DIRECT_MIN      (2 * CCACHE__REDIS_PREFIX_READ)
#define DIRECT_READ_MAX ((size_t)1 << 30) /* sdsIncrLen takes an int */

/* One read of what the socket holds, up to the rest of a reply expected to
 * carry a value of expect bytes, straight into the end of c's reader
 * buffer; as ccache__rfeed otherwise. */
static int feed_direct(redisContext *c, uint64_t expect, char *why, size_t why_len) {
  redisReader *rd = c->reader;
  uint64_t held = rd->len - rd->pos, whole = expect + CCACHE__REDIS_REPLY_FRAMING;
  size_t want =
      whole > held + CCACHE__REDIS_SMALL_READ ? (size_t)(whole - held) : CCACHE__REDIS_SMALL_READ;
  if (want > DIRECT_READ_MAX) want = DIRECT_READ_MAX;
  sds b = rd->err ? NULL : sdsMakeRoomFor(rd->buf, want);
  if (!b) {
    snprintf(why, why_len, "%s", rd->err ? rd->errstr : "out of memory");
    return -1;
  }
  rd->buf = b;
  ssize_t n;
  do n = read(c->fd, b + sdslen(b), want);
  while (n < 0 && errno == EINTR);
  if (n > 0) {
    sdsIncrLen(b, (int)n);
    rd->len = sdslen(b);
    return 1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  snprintf(why, why_len, "%s", n == 0 ? "server closed the connection" : strerror(errno));
  return -1;
}

int ccache__rfeed_long(redisContext *c, uint64_t expect, char *buf, size_t cap, char *why,
                       size_t why_len) {
  return expect >= DIRECT_MIN ? feed_direct(c, expect, why, why_len)
                              : ccache__rfeed(c, buf, cap, why, why_len);
}

#else
int ccache__rfeed_long(redisContext *c, uint64_t expect, char *buf, size_t cap, char *why,
                       size_t why_len) {
  (void)expect;
  return ccache__rfeed(c, buf, cap, why, why_len);
}
#endif
