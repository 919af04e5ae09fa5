/* harness.h: running kernel_jit processes (and a private redis-server) from
 * the process-level tests and the benchmark.
 *
 * Nothing here sleeps to wait: children are started together behind a
 * barrier pipe, readiness is read from a server's own output, and a child
 * that must pause mid-run (--hold-after) waits for EOF on its stdin. */
#ifndef KJ_HARNESS_H
#define KJ_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct kj_child {
  pid_t pid;
  int out_fd, err_fd, in_fd; /* our ends of its stdout, stderr, stdin pipes (-1: closed) */
  char *out, *err;           /* everything read so far (NUL-terminated) */
  size_t out_len, err_len;
  int status; /* exit code; 128 + signal if killed; -1 while running */
} kj_child;

/* Start argv (argv[0] a path) with piped stdin, stdout and stderr; it is
 * killed if this process dies first (PR_SET_PDEATHSIG).  If barrier is not
 * NULL (a pipe), the child waits for EOF on barrier[0] before exec: close
 * barrier[1] to release every child at once.  0 or -1. */
int kj_child_start(kj_child *c, char *const argv[], const int *barrier);

/* Read the child's stdout and stderr until needle appears in its stdout
 * (stream 1) or stderr (stream 2): 0; or -1 if both reach EOF first. */
int kj_child_wait_output(kj_child *c, int stream, const char *needle);

/* Close the child's stdin (releases --hold-after). */
void kj_child_close_stdin(kj_child *c);

/* Read everything, reap: the exit code (128 + signal when killed). */
int kj_child_finish(kj_child *c);
/* Read everything from n children at once (none blocks on a full pipe). */
void kj_children_finish(kj_child *c, size_t n);
void kj_child_free(kj_child *c);

/* n copies of argv started together on one barrier, run to the end. */
int kj_run_together(kj_child *c, size_t n, char *const argv[]);
/* One process, to the end: its exit code. */
int kj_run(kj_child *c, char *const argv[]);

/* Fields of kernel_jit's flat JSON object.  0, or -1 if absent or null. */
int kj_json_u64(const char *json, const char *name, uint64_t *v);
int kj_json_num(const char *json, const char *name, double *v);
int kj_json_str(const char *json, const char *name, char *buf, size_t n);

/* A scratch directory (0700) under $TMPDIR or /tmp, removed with all its
 * contents by kj_scratch_remove. */
int kj_scratch(char *path, size_t n, const char *what);
void kj_scratch_remove(const char *path);

/* A private redis-server on 127.0.0.1 at a free port, no persistence,
 * its working directory a scratch directory. */
typedef struct kj_redis {
  kj_child proc;
  int port;
  char dir[256];
  char addr[64]; /* "127.0.0.1:PORT" */
} kj_redis;

/* Start it and return once it prints that it accepts connections.  0, or
 * -1 with a message on stderr. */
int kj_redis_start(kj_redis *r, const char *server_path);
/* SIGKILL (mid-run failure) or SIGTERM (orderly stop); both reap it.  The
 * scratch directory goes with kj_redis_free. */
void kj_redis_kill(kj_redis *r);
void kj_redis_stop(kj_redis *r);
void kj_redis_free(kj_redis *r);

/* A TCP port on 127.0.0.1 that nothing listened on a moment ago. */
int kj_free_port(void);

#endif
