/* harness.c: child processes over pipes, flat-JSON fields, scratch
 * directories and a private redis-server. */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------- children */

/* In the child, between fork and exec: only async-signal-safe calls. */
static void child_exec(char *const argv[], const int in[2], const int out[2], const int err[2],
                       const int *barrier) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  /* SIGPIPE at its default action (kill) and unblocked, whatever ctest or
   * the shell gave us: a child that writes to a dead socket without
   * guarding against it dies of it, and the tests see that. */
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigaction(SIGPIPE, &dfl, NULL);
  sigprocmask(SIG_UNBLOCK, &pipe_set, NULL);
  if (barrier) {
    char b;
    close(barrier[1]);
    while (read(barrier[0], &b, 1) < 0 && errno == EINTR) {
    }
  }
  if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0) _exit(127);
  execv(argv[0], argv);
  _exit(127);
}

int kj_child_start(kj_child *c, char *const argv[], const int *barrier) {
  memset(c, 0, sizeof *c);
  c->status = -1;
  c->out = calloc(1, 1);
  c->err = calloc(1, 1);
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (!c->out || !c->err || pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
    goto fail;
  fflush(NULL);
  c->pid = fork();
  if (c->pid < 0) goto fail;
  if (c->pid == 0) child_exec(argv, in, out, err, barrier);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  c->in_fd = in[1];
  c->out_fd = out[0];
  c->err_fd = err[0];
  return 0;
fail:
  for (int i = 0; i < 2; i++) {
    if (in[i] >= 0) close(in[i]);
    if (out[i] >= 0) close(out[i]);
    if (err[i] >= 0) close(err[i]);
  }
  kj_child_free(c);
  return -1;
}

static void append(char **buf, size_t *len, const char *data, size_t n) {
  char *p = realloc(*buf, *len + n + 1);
  if (!p) abort(); /* a test harness out of memory has nothing better to do */
  memcpy(p + *len, data, n);
  *len += n;
  p[*len] = '\0';
  *buf = p;
}

/* Drain whatever is readable on fd into the buffer; close it at EOF. */
static void drain(int *fd, char **buf, size_t *len) {
  char chunk[4096];
  ssize_t r = read(*fd, chunk, sizeof chunk);
  if (r > 0) {
    append(buf, len, chunk, (size_t)r);
  } else if (r == 0 || errno != EINTR) {
    close(*fd);
    *fd = -1;
  }
}

/* One poll over every open output pipe of n children; -1 when none is open. */
static int pump(kj_child *c, size_t n) {
  struct pollfd pfd[64];
  char **buf[64];
  size_t *len[64];
  int *fdp[64];
  nfds_t k = 0;
  for (size_t i = 0; i < n && k + 2 <= 64; i++) {
    if (c[i].out_fd >= 0) {
      pfd[k] = (struct pollfd){c[i].out_fd, POLLIN, 0};
      buf[k] = &c[i].out, len[k] = &c[i].out_len, fdp[k] = &c[i].out_fd;
      k++;
    }
    if (c[i].err_fd >= 0) {
      pfd[k] = (struct pollfd){c[i].err_fd, POLLIN, 0};
      buf[k] = &c[i].err, len[k] = &c[i].err_len, fdp[k] = &c[i].err_fd;
      k++;
    }
  }
  if (k == 0) return -1;
  if (poll(pfd, k, -1) < 0) return errno == EINTR ? 0 : -1;
  for (nfds_t i = 0; i < k; i++)
    if (pfd[i].revents) drain(fdp[i], buf[i], len[i]);
  return 0;
}

int kj_child_wait_output(kj_child *c, int stream, const char *needle) {
  for (;;) {
    if (strstr(stream == 1 ? c->out : c->err, needle)) return 0;
    if (pump(c, 1) != 0) return -1;
  }
}

void kj_child_close_stdin(kj_child *c) {
  if (c->in_fd >= 0) close(c->in_fd);
  c->in_fd = -1;
}

static void reap(kj_child *c) {
  int st;
  while (waitpid(c->pid, &st, 0) < 0)
    if (errno != EINTR) return;
  c->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void kj_children_finish(kj_child *c, size_t n) {
  for (size_t i = 0; i < n; i++) kj_child_close_stdin(&c[i]);
  while (pump(c, n) == 0) {
  }
  for (size_t i = 0; i < n; i++) reap(&c[i]);
}

int kj_child_finish(kj_child *c) {
  kj_children_finish(c, 1);
  return c->status;
}

void kj_child_free(kj_child *c) {
  kj_child_close_stdin(c);
  if (c->out_fd >= 0) close(c->out_fd);
  if (c->err_fd >= 0) close(c->err_fd);
  c->out_fd = c->err_fd = -1;
  free(c->out);
  free(c->err);
  c->out = c->err = NULL;
}

int kj_run_together(kj_child *c, size_t n, char *const argv[]) {
  int barrier[2];
  if (pipe2(barrier, O_CLOEXEC) != 0) return -1;
  size_t started = 0;
  while (started < n && kj_child_start(&c[started], argv, barrier) == 0) started++;
  close(barrier[0]);
  close(barrier[1]); /* every child's read() returns 0 now: they exec together */
  kj_children_finish(c, started);
  return started == n ? 0 : -1;
}

int kj_run(kj_child *c, char *const argv[]) {
  if (kj_child_start(c, argv, NULL) != 0) return -1;
  return kj_child_finish(c);
}

/* -------------------------------------------------------------------- JSON */

/* The text right after "name": in a flat object, or NULL. */
static const char *field(const char *json, const char *name) {
  char pat[96];
  snprintf(pat, sizeof pat, "\"%s\": ", name);
  const char *p = json ? strstr(json, pat) : NULL;
  return p ? p + strlen(pat) : NULL;
}

int kj_json_u64(const char *json, const char *name, uint64_t *v) {
  const char *p = field(json, name);
  if (!p || *p < '0' || *p > '9') return -1;
  *v = strtoull(p, NULL, 10);
  return 0;
}

int kj_json_num(const char *json, const char *name, double *v) {
  const char *p = field(json, name);
  if (!p || strncmp(p, "null", 4) == 0) return -1;
  char *end;
  *v = strtod(p, &end);
  return end == p ? -1 : 0;
}

int kj_json_str(const char *json, const char *name, char *buf, size_t n) {
  const char *p = field(json, name);
  if (!p || *p != '"') return -1;
  size_t len = strcspn(p + 1, "\"");
  if (p[1 + len] != '"' || len >= n) return -1;
  memcpy(buf, p + 1, len);
  buf[len] = '\0';
  return 0;
}

/* --------------------------------------------------------- scratch dirs */

int kj_scratch(char *path, size_t n, const char *what) {
  const char *tmp = getenv("TMPDIR");
  snprintf(path, n, "%s/kj-%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", what);
  return mkdtemp(path) ? 0 : -1;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

void kj_scratch_remove(const char *path) {
  if (path && path[0]) nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ------------------------------------------------------------- redis */

int kj_free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int port = -1;
  if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(s, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (s >= 0) close(s);
  return port;
}

/* One attempt on a port picked just before: another process may take it
 * in between, in which case redis-server exits and we try another. */
static int redis_try(kj_redis *r, const char *server_path) {
  char port[16];
  r->port = kj_free_port();
  if (r->port < 0) return -1;
  snprintf(port, sizeof port, "%d", r->port);
  snprintf(r->addr, sizeof r->addr, "127.0.0.1:%d", r->port);
  char *argv[] = {(char *)server_path,
                  "--port",
                  port,
                  "--bind",
                  "127.0.0.1",
                  "--dir",
                  r->dir,
                  "--save",
                  "",
                  "--appendonly",
                  "no",
                  "--daemonize",
                  "no",
                  "--logfile",
                  "",
                  NULL};
  if (kj_child_start(&r->proc, argv, NULL) != 0) return -1;
  if (kj_child_wait_output(&r->proc, 1, "Ready to accept connections") == 0) return 0;
  kj_child_finish(&r->proc);
  fprintf(stderr, "redis-server on port %d did not start:\n%s%s", r->port, r->proc.out,
          r->proc.err);
  kj_child_free(&r->proc);
  return -1;
}

int kj_redis_start(kj_redis *r, const char *server_path) {
  memset(r, 0, sizeof *r);
  r->proc.pid = -1;
  if (kj_scratch(r->dir, sizeof r->dir, "redis") != 0) return -1;
  for (int attempt = 0; attempt < 5; attempt++)
    if (redis_try(r, server_path) == 0) return 0;
  kj_scratch_remove(r->dir);
  r->dir[0] = '\0';
  return -1;
}

static void redis_signal(kj_redis *r, int sig) {
  if (r->proc.pid <= 0 || r->proc.status >= 0) return;
  kill(r->proc.pid, sig);
  kj_child_finish(&r->proc);
}

void kj_redis_kill(kj_redis *r) { redis_signal(r, SIGKILL); }
void kj_redis_stop(kj_redis *r) { redis_signal(r, SIGTERM); }

void kj_redis_free(kj_redis *r) {
  kj_redis_kill(r);
  if (r->proc.out || r->proc.err) kj_child_free(&r->proc);
  kj_scratch_remove(r->dir);
  r->dir[0] = '\0';
}
