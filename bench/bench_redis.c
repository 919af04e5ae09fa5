/*
 * bench_redis.c - issue 15: how much does a fetch from the Redis tier cost
 * next to the network round trip it cannot avoid?
 *
 * Subject: a program fetched from Redis through the cache, as a miss in
 * another process would: ccache_program_get_or_compile() on a program not in
 * memory, whose entry is in Redis: GET over a pooled hiredis connection,
 * the copy out of hiredis' reply, the full check of the entry (header and
 * XXH3-128), then the codec's decode, which here does nothing (the load is
 * excluded: a real runtime's load is its own cost), and the handle's
 * release, which destroys the program so the next fetch misses again.
 *
 * Baseline, measured in the same run with the same bytes: one loopback TCP
 * round trip (TCP_NODELAY, blocking sockets) between this thread and a
 * server thread that answers a 32-byte request with as many bytes as the
 * GET reply carries (the framed entry).  The ratio is subject / baseline per
 * repetition; the target is <= 5x.
 *
 * Client, echo thread and redis-server all run pinned to one CPU, so the
 * two round trips are measured the same way (see main()).
 *
 * Loopback congestion control.  A congestion control that paces (BBR: this
 * VM's default) sends at its estimate of each connection's bandwidth, and
 * on loopback that estimate is set by chance in the connection's first
 * transfers: the same 1 MiB fetch took 320-390 us with redis-server's socket
 * estimated at 150-520 Gbit/s and 720-770 us at 48-62 Gbit/s (6 runs, ss -ti),
 * with the same client CPU time per fetch (~170 us, /proc schedstat); only
 * redis-server's time and the idle time grew.  The baseline's connection
 * draws its own estimate, so the ratio measured chance.  With a congestion
 * control that does not pace (cubic, the kernel's default, or reno) the
 * fetch took 300-370 us in 10 of 10 runs.  So the rows with the target are
 * measured in a network namespace of this process's own (unshare, root),
 * whose loopback uses cubic or reno, and where the host's loopback paces,
 * the same three sizes on it come first as rows without a target.  Where no
 * namespace can be made, the rows are measured on the host's loopback and
 * the note says which congestion control it used.
 *
 * The redis-server is this benchmark's own (tests/redis_support.c: 127.0.0.1,
 * a free port, a scratch directory, no persistence).  Without redis-server
 * the benchmark exits 77 (ctest: skipped), unless
 * CCACHE_TEST_REQUIRE_REDIS=1, which makes that an error.
 */
#define _GNU_SOURCE 1 /* unshare, setns */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench_util.h"
#include "redis_support.h"

#define REQ_LEN 32 /* about a GET command for our keys */

/* ------------------------------------------------------- the codec */
static size_t payload_len; /* the size being measured */
static uint64_t decodes, compiles;

static int enc(void *ctx, ccache_key pkey, void *native, void **bytes, size_t *len) {
  (void)ctx, (void)pkey, (void)native;
  unsigned char *b = malloc(payload_len ? payload_len : 1);
  if (!b) return -1;
  for (size_t i = 0; i < payload_len; i++) b[i] = (unsigned char)(i * 131u + 7u);
  *bytes = b;
  *len = payload_len;
  return 0;
}
static void enc_free(void *ctx, void *bytes, size_t len) {
  (void)ctx, (void)len;
  free(bytes);
}
/* The load is excluded: hand back a token, copy nothing. */
static int dec(void *ctx, ccache_key pkey, const void *bytes, size_t len, void **native_out,
               uint64_t *cost_out) {
  (void)ctx, (void)pkey, (void)bytes;
  decodes++;
  *native_out = (void *)(uintptr_t)0x1000u;
  *cost_out = len;
  return 0;
}
static const ccache_codec codec = {enc, enc_free, dec, NULL};

static int compile(void *ud, ccache *c, ccache_key pkey, void **native_out, uint64_t *cost_out) {
  (void)ud, (void)c, (void)pkey;
  compiles++;
  *native_out = (void *)(uintptr_t)0x2000u;
  *cost_out = 1;
  return 0;
}

/* ------------------------------------------ the loopback round trip */
typedef struct echo {
  int listen_fd, port;
  size_t reply_len;
  pthread_t thread;
} echo;

static int full_read(int fd, void *buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(fd, (char *)buf + got, len - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    got += (size_t)n;
  }
  return 0;
}

static int full_write(int fd, const void *buf, size_t len) {
  size_t put = 0;
  while (put < len) {
    ssize_t n = write(fd, (const char *)buf + put, len - put);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    put += (size_t)n;
  }
  return 0;
}

static void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Serves one connection: a REQ_LEN request -> reply_len bytes, until EOF. */
static void *echo_main(void *arg) {
  echo *e = arg;
  int fd = accept(e->listen_fd, NULL, NULL);
  if (fd < 0) return NULL;
  nodelay(fd);
  char *reply = malloc(e->reply_len);
  char req[REQ_LEN];
  if (reply) {
    memset(reply, 'r', e->reply_len);
    while (full_read(fd, req, sizeof req) == 0 && full_write(fd, reply, e->reply_len) == 0) {
    }
  }
  free(reply);
  close(fd);
  return NULL;
}

static int echo_start(echo *e, size_t reply_len) {
  e->reply_len = reply_len;
  e->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (e->listen_fd < 0 || bind(e->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(e->listen_fd, 1) != 0 || getsockname(e->listen_fd, (struct sockaddr *)&a, &alen))
    return -1;
  e->port = ntohs(a.sin_port);
  if (pthread_create(&e->thread, NULL, echo_main, e) != 0) return -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) return -1;
  nodelay(fd);
  return fd;
}

static void echo_stop(echo *e, int fd) {
  close(fd);
  pthread_join(e->thread, NULL);
  close(e->listen_fd);
}

/* ------------------------------------ the loopback's congestion control */
#define CC_PATH "/proc/sys/net/ipv4/tcp_congestion_control" /* this netns's */

static void read_cc(char *cc, size_t cap) {
  snprintf(cc, cap, "?");
  FILE *f = fopen(CC_PATH, "r");
  if (!f) return;
  if (fgets(cc, (int)cap, f)) cc[strcspn(cc, "\n")] = 0;
  fclose(f);
}

static int paces(const char *cc) { return strncmp(cc, "bbr", 3) == 0; }

static int write_cc(const char *cc) {
  FILE *f = fopen(CC_PATH, "w");
  if (!f) return 0;
  int ok = fputs(cc, f) >= 0;
  return fclose(f) == 0 && ok; /* a refused name fails at the flush */
}

static int lo_up(void) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  int ok = fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
  if (ok) {
    ifr.ifr_flags |= IFF_UP;
    ok = ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
  }
  if (fd >= 0) close(fd);
  return ok;
}

/* Moves this process (and the redis-server it starts later) into a network
 * namespace of its own whose loopback does not pace; 1 on success, else 0,
 * still on the host's network, with why. */
static int own_unpaced_loopback(char *why, size_t cap) {
  int host = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (host < 0 || unshare(CLONE_NEWNET) != 0) {
    snprintf(why, cap, "no network namespace of its own (%s)", strerror(errno));
    if (host >= 0) close(host);
    return 0;
  }
  int ok = lo_up() && (write_cc("cubic") || write_cc("reno"));
  if (!ok) {
    snprintf(why, cap, "its network namespace took neither cubic nor reno");
    if (setns(host, CLONE_NEWNET) != 0) BENCH_CHECK(0, "setns back: %s", strerror(errno));
  }
  close(host);
  return ok;
}

/* --------------------------------------------------------------- run */
static void one_size(bench_report *rep, const bench_opts *o, const char *servers, size_t len,
                     const char *label, const char *host_cc) {
  payload_len = len;
  ccache_redis_options ro;
  ccache_redis_options_init(&ro);
  ro.servers = servers;
  ccache_tier *tier = NULL;
  BENCH_OK(ccache_tier_redis(&ro, &tier));
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.sweeper_thread = 0;
  cfg.codec = &codec;
  cfg.runtime_tag = "bench_redis";
  cfg.tier_min_compile_us = 0;
  cfg.tiers = &tier;
  cfg.n_tiers = 1;
  cfg.trust_flags = CCACHE_TRUST_UNSIGNED; /* unsigned by name: the tier's own cost */
  ccache *c = NULL;
  BENCH_OK(ccache_open(&cfg, &c));
  ccache_key key = bench_key(15, len);
  ccache_program *p = NULL;
  BENCH_OK(ccache_program_get_or_compile(c, key, compile, NULL, &p)); /* stored */
  ccache_program_release(c, p);
  ccache_stats st = {.size = sizeof st};
  ccache_stats_get(c, &st);
  BENCH_CHECK(st.tier_writes == 1 && compiles == 1, "the entry was not stored (writes %llu)",
              (unsigned long long)st.tier_writes);
  size_t entry_len = (size_t)st.tier_bytes_written;

  echo e;
  int fd = echo_start(&e, entry_len);
  BENCH_CHECK(fd >= 0, "loopback echo: %s", strerror(errno));
  char req[REQ_LEN];
  memset(req, 'q', sizeof req);
  char *buf = malloc(entry_len);
  BENCH_CHECK(buf != NULL, "out of memory");

  int reps = o->quick ? 3 : 15;
  int ops = len >= (1u << 20) ? (o->quick ? 10 : 100) : (o->quick ? 50 : 1000);
  double *ratio = calloc((size_t)reps, sizeof *ratio), *fetch_us = calloc((size_t)reps, 8),
         *rtt_us = calloc((size_t)reps, 8);
  BENCH_CHECK(ratio && fetch_us && rtt_us, "out of memory");
  uint64_t decodes0 = decodes;
  /* Warm both paths (connections, buffers). */
  for (int i = 0; i < 10; i++) {
    BENCH_OK(ccache_program_get_or_compile(c, key, compile, NULL, &p));
    ccache_program_release(c, p);
    BENCH_CHECK(full_write(fd, req, sizeof req) == 0 && full_read(fd, buf, entry_len) == 0,
                "loopback round trip failed");
  }
  for (int r = 0; r < reps; r++) {
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < ops; i++) {
      BENCH_OK(ccache_program_get_or_compile(c, key, compile, NULL, &p));
      ccache_program_release(c, p);
    }
    uint64_t t1 = bench_now_ns();
    for (int i = 0; i < ops; i++)
      BENCH_CHECK(full_write(fd, req, sizeof req) == 0 && full_read(fd, buf, entry_len) == 0,
                  "loopback round trip failed");
    uint64_t t2 = bench_now_ns();
    fetch_us[r] = (double)(t1 - t0) / 1e3 / ops;
    rtt_us[r] = (double)(t2 - t1) / 1e3 / ops;
    ratio[r] = fetch_us[r] / rtt_us[r];
  }
  ccache_stats_get(c, &st);
  uint64_t want = (uint64_t)reps * (uint64_t)ops + 10;
  BENCH_CHECK(
      decodes - decodes0 == want && compiles == 1 && st.tier_hits == want && st.tier_errors == 0,
      "%llu decodes, %llu compiles, %llu tier hits, %llu tier errors (want %llu hits)",
      (unsigned long long)(decodes - decodes0), (unsigned long long)compiles,
      (unsigned long long)st.tier_hits, (unsigned long long)st.tier_errors,
      (unsigned long long)want);
  char fig[96], cc[32];
  read_cc(cc, sizeof cc);
  if (host_cc) /* the host's paced loopback: reported, no target */
    snprintf(fig, sizeof fig, "host loopback (%s, paced): Redis tier fetch, %s payload", host_cc,
             label);
  else
    snprintf(fig, sizeof fig, "Redis tier fetch (GET + check, no load), %s payload", label);
  bench_row *row =
      bench_add(rep, fig, bench_stats(fetch_us, reps).med, "us", bench_stats(rtt_us, reps).med,
                "loopback TCP round trip", bench_stats(ratio, reps), "fetch / round trip",
                host_cc ? BENCH_REPORT : BENCH_RATIO_LE, 5.0);
  snprintf(row->note, sizeof row->note, "%zu-byte entry; %d x %d fetches; loopback: %s", entry_len,
           reps, ops, cc);
  free(ratio);
  free(fetch_us);
  free(rtt_us);
  free(buf);
  echo_stop(&e, fd);
  BENCH_OK(ccache_close(c));
  compiles = 0;
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_parse(argc, argv, &o, "Redis tier fetch vs a loopback round trip", false);
  signal(SIGPIPE, SIG_DFL);
  const char *why = NULL;
  if (!t_redis_binary(&why)) {
    fprintf(stderr, "bench_redis: %s\n", why);
    if (t_redis_required()) return 2;
    return 77; /* skipped */
  }
  /* Everything on one CPU: this thread, the echo thread (created later) and
   * redis-server (forked from here) inherit it.  Both round trips are then a
   * switch between two tasks on one CPU; across two CPUs, either could pay
   * for waking an idle virtual CPU (tens of microseconds here), and not
   * always the same one. */
  bench_pin(0);
  bench_report rep;
  bench_report_init(&rep, "bench_redis",
                    "fetch from the Redis tier vs a loopback round trip of the same bytes");
  static const size_t sizes[] = {1024, 64 * 1024, 1024 * 1024};
  static const char *const labels[] = {"1 KiB", "64 KiB", "1 MiB"};
  char host_cc[32], ns_why[96] = "";
  read_cc(host_cc, sizeof host_cc);
  t_redis_server s;
  memset(&s, 0, sizeof s);
  if (paces(host_cc)) { /* the host's loopback first, then a namespace of our own */
    BENCH_CHECK(t_redis_start(&s, NULL) == 0, "could not start redis-server");
    for (int i = 0; i < 3; i++) one_size(&rep, &o, s.addr, sizes[i], labels[i], host_cc);
    t_redis_stop(&s);
    memset(&s, 0, sizeof s);
    char cc[32];
    if (own_unpaced_loopback(ns_why, sizeof ns_why)) {
      read_cc(cc, sizeof cc);
      bench_note(&rep,
                 "rows with a target: in a network namespace of the benchmark's own, whose "
                 "loopback uses %s; the host's uses %s, which paces each connection at an "
                 "estimate set by chance (bench_redis.c's opening comment)",
                 cc, host_cc);
    } else {
      bench_note(&rep, "the rows with a target are on the host's paced loopback too: %s", ns_why);
    }
  }
  BENCH_CHECK(t_redis_start(&s, NULL) == 0, "could not start redis-server");
  for (int i = 0; i < 3; i++) one_size(&rep, &o, s.addr, sizes[i], labels[i], NULL);
  char version[32] = "?";
  struct redisReply *info = t_redis_cmd(&s, "INFO server");
  const char *v =
      info && info->type == REDIS_REPLY_STRING ? strstr(info->str, "redis_version:") : NULL;
  if (v) sscanf(v, "redis_version:%31[^\r\n]", version);
  if (info) freeReplyObject(info);
  bench_note(&rep,
             "redis-server %s on 127.0.0.1 (its own process, no persistence), hiredis %d.%d.%d, "
             "one client thread; both paths carry the same bytes",
             version, HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
  t_redis_stop(&s);
  return bench_report_print(&rep, &o);
}
