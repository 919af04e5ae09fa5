/*
 * disk_walk.c - the directory tier's way down to an entry's folder: one
 * component at a time from the checked top directory, each level opened
 * with O_NOFOLLOW | O_DIRECTORY (a symbolic link is never followed, at any
 * depth) and checked as the top is (owned by the effective user, not
 * writable by group or others), before anything below it is opened.
 *
 * Why each level: the top directory's check alone let a level below it be
 * a link to anywhere (a world-writable /tmp folder, another user's files)
 * or a folder others can write, and whoever can write where the tier reads
 * can hand this process a program to run.  Entries themselves are opened
 * relative to the folder's descriptor, with O_NOFOLLOW, by disk_entry.c.
 */
#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tier/disk/disk.h"

/* A level that may be used: a directory of ours that only we can write. */
static bool level_private(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  return S_ISDIR(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* Open component name (no '/') under parent as described above; with
 * create, a missing one is made 0700 first. */
static int open_level(int parent, const char *name, bool create, int *fd) {
  const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int f = openat(parent, name, flags);
  if (f < 0 && errno == ENOENT && create) {
    if (FAULT("mkdir") == 0) mkdirat(parent, name, 0700); /* (raced: the open tells) */
    f = openat(parent, name, flags);
  }
  if (f < 0) {
    if (errno == ENOENT) return CCACHE_MISS;
    /* A link (ELOOP) or something that is not a directory (ENOTDIR). */
    return errno == ELOOP || errno == ENOTDIR ? CCACHE_EPERM : CCACHE_EIO;
  }
  if (!level_private(f)) {
    close(f);
    errno = EPERM;
    return CCACHE_EPERM;
  }
  *fd = f;
  return CCACHE_OK;
}

int ccache__disk_walk(const disk *d, const char *rel, bool create, int *out) {
  char comp[REL_MAX];
  int cur = d->dirfd, rc = CCACHE_OK;
  const char *p = rel;
  while (rc == CCACHE_OK && *p) {
    size_t n = strcspn(p, "/");
    if (n == 0 || n >= sizeof comp) {
      rc = CCACHE_EINVAL;
      break;
    }
    memcpy(comp, p, n);
    comp[n] = '\0';
    p += n + (p[n] == '/');
    int next = -1;
    rc = open_level(cur, comp, create, &next);
    if (cur != d->dirfd) close(cur);
    cur = rc == CCACHE_OK ? next : -1;
  }
  if (rc != CCACHE_OK) return rc;
  if (cur == d->dirfd) return CCACHE_EINVAL; /* an empty path: not a level below */
  *out = cur;
  return CCACHE_OK;
}
