/* redis_support.c - a private redis-server per test (see redis_support.h). */
#define _GNU_SOURCE /* prctl, mkdtemp under strict feature macros */
#include "redis_support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#define START_TIMEOUT_MS 15000ull /* generous: two shared cores */

unsigned long long t_redis_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000ull + (unsigned long long)ts.tv_nsec / 1000000ull;
}

void t_redis_poll_pause(void) {
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
}

static char binary_path[4096];

const char *t_redis_binary(const char **why) {
  const char *env = getenv("CCACHE_TEST_REDIS_SERVER");
  if (env && *env) {
    if (access(env, X_OK) == 0) return env;
    if (why) *why = "CCACHE_TEST_REDIS_SERVER is not an executable file";
    return NULL;
  }
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
  while (*path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    if (n > 0 && n + sizeof "/redis-server" < sizeof binary_path) {
      memcpy(binary_path, path, n);
      memcpy(binary_path + n, "/redis-server", sizeof "/redis-server");
      if (access(binary_path, X_OK) == 0) return binary_path;
    }
    path += n + (end ? 1 : 0);
  }
  if (why) *why = "redis-server not found on PATH (Debian: apt-get install redis-server)";
  return NULL;
}

int t_redis_required(void) {
  const char *e = getenv("CCACHE_TEST_REQUIRE_REDIS");
  return e && strcmp(e, "1") == 0;
}

int t_redis_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

static void close_admin(t_redis_server *s) {
  if (s->admin) redisFree(s->admin);
  s->admin = NULL;
}

void t_redis_forget_admin(t_redis_server *s) { close_admin(s); }

/* Fork + exec the server; then wait until it answers PING on its port and
 * INFO names its own pid (so we never talk to someone else's server). */
static int spawn(t_redis_server *s) {
  const char *why = NULL;
  const char *bin = t_redis_binary(&why);
  if (!bin) {
    fprintf(stderr, "redis fixture: %s\n", why);
    return -1;
  }
  char port[16], logfile[200];
  snprintf(port, sizeof port, "%d", s->port);
  snprintf(logfile, sizeof logfile, "%s/redis.log", s->dir);
  const char *argv[32 + T_REDIS_MAX_ARGS];
  int n = 0;
  argv[n++] = bin;
  char conf[200];
  if (s->sentinel_conf) {
    snprintf(conf, sizeof conf, "%s/sentinel.conf", s->dir);
    FILE *f = fopen(conf, "w");
    if (!f || fputs(s->sentinel_conf, f) < 0) {
      if (f) fclose(f);
      return -1;
    }
    if (fclose(f) != 0) return -1;
    argv[n++] = conf;
    argv[n++] = "--sentinel";
  }
  argv[n++] = "--port", argv[n++] = port;
  argv[n++] = "--bind", argv[n++] = "127.0.0.1";
  argv[n++] = "--unixsocket", argv[n++] = s->sock;
  argv[n++] = "--unixsocketperm", argv[n++] = "700";
  argv[n++] = "--dir", argv[n++] = s->dir;
  argv[n++] = "--save", argv[n++] = "";
  argv[n++] = "--appendonly", argv[n++] = "no";
  argv[n++] = "--daemonize", argv[n++] = "no";
  argv[n++] = "--logfile", argv[n++] = logfile;
  argv[n++] = "--databases", argv[n++] = "1";
  for (int i = 0; i < s->nargs; i++) argv[n++] = s->args[i];
  argv[n] = NULL;

  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    /* The server dies with the test, whatever happens to the test. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
    }
    signal(SIGPIPE, SIG_DFL);
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  s->pid = pid;
  unsigned long long deadline = t_redis_now_ms() + START_TIMEOUT_MS;
  char want[48];
  snprintf(want, sizeof want, "process_id:%d\r", (int)pid);
  while (t_redis_now_ms() < deadline) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      s->pid = 0;
      return 1; /* exited: maybe the port was taken meanwhile */
    }
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
    if (c && !c->err) {
      redisSetTimeout(c, tv);
      int ok = 0;
      redisReply *r;
      if (s->admin_pass)
        r = s->admin_user ? redisCommand(c, "AUTH %s %s", s->admin_user, s->admin_pass)
                          : redisCommand(c, "AUTH %s", s->admin_pass);
      else
        r = redisCommand(c, "PING");
      if (r) freeReplyObject(r);
      r = redisCommand(c, "INFO server");
      if (r && r->type == REDIS_REPLY_STRING && strstr(r->str, want)) ok = 1;
      if (r) freeReplyObject(r);
      redisFree(c);
      if (ok) return 0;
    } else if (c) {
      redisFree(c);
    }
    t_redis_poll_pause();
  }
  fprintf(stderr, "redis fixture: server on port %d not ready after %llu ms (log: %s)\n", s->port,
          START_TIMEOUT_MS, logfile);
  t_redis_kill(s);
  return -1;
}

int t_redis_start_sentinel(t_redis_server *s, const char *conf) {
  s->sentinel_conf = conf;
  return t_redis_start(s, NULL);
}

int t_redis_start(t_redis_server *s, const char *const *extra) {
  const char *user = s->admin_user, *pass = s->admin_pass; /* the caller's, if any */
  const char *conf = s->sentinel_conf;
  memset(s, 0, sizeof *s);
  s->admin_user = user;
  s->admin_pass = pass;
  s->sentinel_conf = conf;
  for (int i = 0; extra && extra[i]; i++) {
    if (i == T_REDIS_MAX_ARGS) {
      fprintf(stderr, "redis fixture: more than %d extra arguments\n", T_REDIS_MAX_ARGS);
      return -1;
    }
    s->args[s->nargs++] = extra[i];
  }
  for (int i = 0; i < s->nargs; i++) {
    if (strcmp(s->args[i], "--requirepass") == 0 && i + 1 < s->nargs)
      s->admin_pass = s->args[i + 1];
  }
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp || strlen(tmp) > 60) tmp = "/tmp";
  snprintf(s->dir, sizeof s->dir, "%s/ccache-redis.XXXXXX", tmp);
  if (!mkdtemp(s->dir)) {
    perror("redis fixture: mkdtemp");
    return -1;
  }
  snprintf(s->sock, sizeof s->sock, "%s/redis.sock", s->dir);
  snprintf(s->unix_addr, sizeof s->unix_addr, "unix:%s", s->sock);
  for (int attempt = 0; attempt < 8; attempt++) {
    s->port = t_redis_free_port();
    if (!s->port) continue;
    snprintf(s->addr, sizeof s->addr, "127.0.0.1:%d", s->port);
    int rc = spawn(s);
    if (rc == 0) return 0;
    if (rc < 0) break;
  }
  fprintf(stderr, "redis fixture: could not start redis-server\n");
  t_redis_stop(s);
  return -1;
}

int t_redis_restart(t_redis_server *s) {
  close_admin(s);
  if (s->pid) t_redis_kill(s);
  unlink(s->sock);
  return spawn(s) == 0 ? 0 : -1;
}

void t_redis_kill(t_redis_server *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGKILL);
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  s->pid = 0;
  close_admin(s);
}

void t_redis_pause(t_redis_server *s) {
  if (s->pid > 0) kill(s->pid, SIGSTOP);
}

void t_redis_resume(t_redis_server *s) {
  if (s->pid > 0) kill(s->pid, SIGCONT);
}

void t_redis_stop(t_redis_server *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGCONT); /* a stopped process still dies of SIGKILL; be tidy */
    t_redis_kill(s);
  }
  close_admin(s);
  s->sentinel_conf = NULL; /* the next t_redis_start of this slot is a plain server */
  if (!s->dir[0]) return;
  DIR *d = opendir(s->dir);
  if (d) {
    struct dirent *e;
    char path[400];
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      snprintf(path, sizeof path, "%s/%s", s->dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(s->dir);
  s->dir[0] = '\0';
}

static redisReply *vcmd_once(t_redis_server *s, const char *fmt, va_list ap) {
  if (!s->admin) {
    struct timeval tv = {5, 0};
    s->admin = redisConnectUnixWithTimeout(s->sock, tv);
    if (!s->admin || s->admin->err) {
      close_admin(s);
      return NULL;
    }
    redisSetTimeout(s->admin, tv);
    if (s->admin_pass) {
      redisReply *r = s->admin_user
                          ? redisCommand(s->admin, "AUTH %s %s", s->admin_user, s->admin_pass)
                          : redisCommand(s->admin, "AUTH %s", s->admin_pass);
      if (r) freeReplyObject(r);
    }
  }
  redisReply *r = redisvCommand(s->admin, fmt, ap);
  if (!r) close_admin(s);
  return r;
}

/* With SIGPIPE blocked (a server that closed the admin connection, as a
 * Sentinel does to clients of an instance it reconfigures, must not kill
 * the test; one raised is consumed), and once more on a new connection
 * if the old one had been closed. */
static redisReply *vcmd(t_redis_server *s, const char *fmt, va_list ap) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  va_list again;
  va_copy(again, ap);
  int had = s->admin != NULL;
  redisReply *r = vcmd_once(s, fmt, ap);
  if (!r && had) r = vcmd_once(s, fmt, again);
  va_end(again);
  sigset_t pending;
  sigpending(&pending);
  if (sigismember(&pending, SIGPIPE) == 1) {
    const struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return r;
}

redisReply *t_redis_cmd(t_redis_server *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = vcmd(s, fmt, ap);
  va_end(ap);
  return r;
}

long long t_redis_int(t_redis_server *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = vcmd(s, fmt, ap);
  va_end(ap);
  long long v = -1000000;
  if (r && r->type == REDIS_REPLY_INTEGER) v = r->integer;
  if (r) freeReplyObject(r);
  return v;
}
