/* compiler.c: running `cc` (examples/common/ex_spawn.h), and the scratch directory. */
#include "compiler.h"

#include "ex_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The first line of what a command printed, or -1. */
static int first_line(kj_compiler *c, char *const argv[], char *out, size_t n) {
  char path[300];
  snprintf(path, sizeof path, "%s/probe.txt", c->tmpdir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  int status = ex_spawn_wait(argv, fd);
  close(fd);
  void *text = NULL;
  size_t len = 0;
  int rc = status == 0 ? ex_read_file(path, &text, &len) : -1;
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
  if (ex_write_file(cpath, src) != 0) {
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
  int status = ex_spawn_wait(argv, log);
  if (status != 0) {
    void *diag = NULL;
    size_t dlen = 0;
    if (status > 0 && ex_read_file(logpath, &diag, &dlen) == 0)
      snprintf(err, errlen, "cc exited with %d: %.*s", status, (int)strcspn(diag, "\n"),
               (char *)diag);
    else
      snprintf(err, errlen, "cannot run cc: %s", status < 0 ? strerror(errno) : "no output");
    free(diag);
    goto out;
  }
  if (ex_read_file(sopath, bytes, len) != 0) {
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
