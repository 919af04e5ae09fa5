/* ex_spawn.h: running a tool (the system `cc`) and reading what it wrote.
 * Shared by kernel_jit and halide_jit. */
#ifndef EX_SPAWN_H
#define EX_SPAWN_H

#include <stddef.h>

/* Run argv (argv[0] looked up in PATH) with its stdout and stderr sent to
 * out_fd, and wait for it: its exit status (128 + signal if killed), or -1
 * with errno if it could not be started or waited for. */
int ex_spawn_wait(char *const argv[], int out_fd);

/* A whole file in a malloc'd buffer (NUL-terminated too; *len excludes the
 * NUL).  0, or -1 (errno set). */
int ex_read_file(const char *path, void **bytes, size_t *len);

/* Write text to path (created 0600 or truncated).  0, or -1. */
int ex_write_file(const char *path, const char *text);

#endif
