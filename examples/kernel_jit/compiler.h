/* compiler.h: the system C compiler, found at run time.
 *
 * `cc` is looked up in PATH like a shell would.  Its identity (the first
 * line of `cc --version` and `cc -dumpmachine`) and the flags enter every
 * program key and the runtime tag, so a different compiler never reuses
 * another's shared objects. */
#ifndef KJ_COMPILER_H
#define KJ_COMPILER_H

#include <stddef.h>

/* What every kernel is compiled with: cc KJ_CC_FLAGS -o k.so k.c KJ_CC_LIBS. */
#define KJ_CC_FLAGS "-O2 -shared -fPIC"
#define KJ_CC_LIBS  "-lm"

typedef struct kj_compiler {
  char version[256]; /* first line of `cc --version` */
  char target[128];  /* `cc -dumpmachine` */
  char tmpdir[256];  /* private (0700) scratch directory, removed by kj_compiler_close */
  unsigned serial;   /* names the scratch files of successive compiles */
} kj_compiler;

/* Probe `cc` and create the scratch directory (under $TMPDIR or /tmp).
 * 0, or -1 with one line in err. */
int kj_compiler_open(kj_compiler *c, char *err, size_t errlen);
void kj_compiler_close(kj_compiler *c);

/* "<version>; <flags> <libs>; <target>": the part of the runtime tag that
 * names the compiler. */
void kj_compiler_tag(const kj_compiler *c, char *buf, size_t n);

/* Compile C source to a shared object and return its bytes (malloc'd,
 * *len bytes).  The scratch files are removed before returning.  0, or -1
 * with one line in err (the compiler's first diagnostic line if it failed). */
int kj_compile(kj_compiler *c, const char *src, void **bytes, size_t *len, char *err,
               size_t errlen);

#endif
