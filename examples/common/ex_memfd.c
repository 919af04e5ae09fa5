/* ex_memfd.c: memfd_create + dlopen("/proc/self/fd/N"). */
#include "ex_memfd.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int write_all(int fd, const void *bytes, size_t len) {
  const char *p = bytes;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

static int memfd_with(const void *bytes, size_t len, const char *name) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (write_all(fd, bytes, len) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/* Whether [off, off + n) lies inside len bytes (no overflow). */
static int inside(uint64_t off, uint64_t n, size_t len) { return off <= len && n <= len - off; }

/* A whole shared object for this host, as far as its headers say: a 64-bit
 * ELF of this machine's byte order and architecture, ET_DYN, whose
 * program headers, loadable segments and section headers all lie inside
 * the bytes.  A truncated or damaged object fails here, before dlopen
 * (which would fail too, but in a way that says nothing of the bytes). */
static const char *not_whole_so(const void *bytes, size_t len) {
  Elf64_Ehdr eh;
  if (len < sizeof eh) return "shorter than an ELF header";
  memcpy(&eh, bytes, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return "no ELF magic";
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return "not a 64-bit ELF";
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return "not little-endian";
#else
  if (eh.e_ident[EI_DATA] != ELFDATA2MSB) return "not big-endian";
#endif
#if defined(__x86_64__)
  if (eh.e_machine != EM_X86_64) return "not an x86-64 object";
#elif defined(__aarch64__)
  if (eh.e_machine != EM_AARCH64) return "not an AArch64 object";
#endif
  if (eh.e_type != ET_DYN) return "not a shared object";
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
      !inside(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), len))
    return "program headers outside the bytes";
  if (eh.e_shnum && (eh.e_shentsize != sizeof(Elf64_Shdr) ||
                     !inside(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), len)))
    return "section headers outside the bytes (truncated?)";
  for (uint16_t i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, (const char *)bytes + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD && !inside(ph.p_offset, ph.p_filesz, len))
      return "a loadable segment outside the bytes (truncated?)";
  }
  return NULL;
}

int ex_so_load(ex_so *so, const void *bytes, size_t len, const char *name, char *err,
               size_t errlen) {
  const char *bad = not_whole_so(bytes, len);
  if (bad) {
    snprintf(err, errlen, "not a whole shared object: %s", bad);
    return EX_SO_BAD;
  }
  int fd = memfd_with(bytes, len, name);
  if (fd < 0) {
    snprintf(err, errlen, "memfd_create/write: %s", strerror(errno));
    return -1;
  }
  char path[40];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char *why = dlerror();
    snprintf(err, errlen, "dlopen %s: %s", path, why ? why : "failed");
    close(fd);
    return -1;
  }
  so->dl = dl;
  so->fd = fd;
  so->len = len;
  return 0;
}

void ex_so_unload(ex_so *so) {
  if (!so->dl) return;
  dlclose(so->dl); /* first: the path /proc/self/fd/N must not name another object meanwhile */
  close(so->fd);
  so->dl = NULL;
  so->fd = -1;
}

int ex_so_bytes(const ex_so *so, void **bytes, size_t *len) {
  char *buf = malloc(so->len ? so->len : 1);
  if (!buf) return -1;
  size_t got = 0;
  while (got < so->len) {
    ssize_t r = pread(so->fd, buf + got, so->len - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      free(buf);
      if (r == 0) errno = EIO;
      return -1;
    }
    got += (size_t)r;
  }
  *bytes = buf;
  *len = so->len;
  return 0;
}

void *ex_so_sym(const ex_so *so, const char *name, char *err, size_t errlen) {
  dlerror();
  void *p = dlsym(so->dl, name);
  if (!p) snprintf(err, errlen, "the shared object lacks %s", name);
  return p;
}
