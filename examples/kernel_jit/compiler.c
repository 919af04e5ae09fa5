/* compiler.c: running `cc` with posix_spawnp, and the scratch directory. */
#include "compiler.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Run argv with stdout (and stderr) sent to out_fd; its exit status, or -1
 * with errno if it could not be started or waited for. */
static int run(char *const argv[], int out_fd) {
  posix_spawn_file_actions_t fa;
  pid_t pid;
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa, out_fd, STDERR_FILENO);
  if (rc == 0) rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Read a whole file into a malloc'd buffer (NUL-terminated too). */
static int slurp(const char *path, void **bytes, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  char *buf = NULL;
  if (fstat(fd, &st) == 0 && (buf = malloc((size_t)st.st_size + 1)) != NULL) {
    size_t got = 0;
    while (got < (size_t)st.st_size) {
      ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
    }
    if (got == (size_t)st.st_size) {
      buf[got] = '\0';
      *bytes = buf;
      *len = got;
      close(fd);
      return 0;
    }
  }
  free(buf);
  close(fd);
  return -1;
}

static int spit(const char *path, const char *text) {
  FILE *f = fopen(path, "we");
  if (!f) return -1;
  int bad = fputs(text, f) < 0;
  return fclose(f) != 0 || bad ? -1 : 0;
}

/* The first line of what a command printed, or -1. */
static int first_line(kj_compiler *c, char *const argv[], char *out, size_t n) {
  char path[300];
  snprintf(path, sizeof path, "%s/probe.txt", c->tmpdir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  int status = run(argv, fd);
  close(fd);
  void *text = NULL;
  size_t len = 0;
  int rc = status == 0 ? slurp(path, &text, &len) : -1;
  unlink(path);
  if (rc != 0) return -1;
  snprintf(out, n, "%.*s", (int)strcspn(text, "\n"), (char *)text);
  free(text);
  return out[0] ? 0 : -1;
}

int kj_compiler_open(kj_compiler *c, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  const char *tmp = getenv("TMPDIR");
  snprintf(c->tmpdir, sizeof c->tmpdir, "%s/kernel_jit.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(c->tmpdir)) { /* mkdtemp creates it 0700 */
    snprintf(err, errlen, "cannot create a scratch directory %s: %s", c->tmpdir, strerror(errno));
    return -1;
  }
  char *version[] = {"cc", "--version", NULL};
  char *machine[] = {"cc", "-dumpmachine", NULL};
  if (first_line(c, version, c->version, sizeof c->version) != 0 ||
      first_line(c, machine, c->target, sizeof c->target) != 0) {
    snprintf(err, errlen, "cannot run the system C compiler `cc` (is build-essential installed?)");
    kj_compiler_close(c);
    return -1;
  }
  return 0;
}

void kj_compiler_close(kj_compiler *c) {
  if (c->tmpdir[0]) rmdir(c->tmpdir);
  c->tmpdir[0] = '\0';
}

void kj_compiler_tag(const kj_compiler *c, char *buf, size_t n) {
  snprintf(buf, n, "%s; %s %s; %s", c->version, KJ_CC_FLAGS, KJ_CC_LIBS, c->target);
}

/* Split words (modified in place) at spaces onto argv; argv has room for
 * the few words of KJ_CC_FLAGS and KJ_CC_LIBS. */
static void add_words(char **argv, int *argc, char *words) {
  char *save = NULL;
  for (char *w = strtok_r(words, " ", &save); w && *argc < 20; w = strtok_r(NULL, " ", &save))
    argv[(*argc)++] = w;
}

int kj_compile(kj_compiler *c, const char *src, void **bytes, size_t *len, char *err,
               size_t errlen) {
  char cpath[300], sopath[300], logpath[300];
  unsigned id = c->serial++;
  snprintf(cpath, sizeof cpath, "%s/k%u.c", c->tmpdir, id);
  snprintf(sopath, sizeof sopath, "%s/k%u.so", c->tmpdir, id);
  snprintf(logpath, sizeof logpath, "%s/k%u.log", c->tmpdir, id);
  int rc = -1, log = -1;
  if (spit(cpath, src) != 0) {
    snprintf(err, errlen, "cannot write %s: %s", cpath, strerror(errno));
    goto out;
  }
  log = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log < 0) {
    snprintf(err, errlen, "cannot create %s: %s", logpath, strerror(errno));
    goto out;
  }
  /* argv from the very strings the runtime tag names. */
  char flags[] = KJ_CC_FLAGS, libs[] = KJ_CC_LIBS;
  char *argv[24] = {"cc"};
  int argc = 1;
  add_words(argv, &argc, flags);
  argv[argc++] = "-o";
  argv[argc++] = sopath;
  argv[argc++] = cpath;
  add_words(argv, &argc, libs);
  argv[argc] = NULL;
  int status = run(argv, log);
  if (status != 0) {
    void *diag = NULL;
    size_t dlen = 0;
    if (status > 0 && slurp(logpath, &diag, &dlen) == 0)
      snprintf(err, errlen, "cc exited with %d: %.*s", status, (int)strcspn(diag, "\n"),
               (char *)diag);
    else
      snprintf(err, errlen, "cannot run cc: %s", status < 0 ? strerror(errno) : "no output");
    free(diag);
    goto out;
  }
  if (slurp(sopath, bytes, len) != 0) {
    snprintf(err, errlen, "cannot read %s: %s", sopath, strerror(errno));
    goto out;
  }
  rc = 0;
out:
  if (log >= 0) close(log);
  unlink(cpath);
  unlink(sopath);
  unlink(logpath);
  return rc;
}
