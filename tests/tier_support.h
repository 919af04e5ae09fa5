/*
 * tier_support.h - helpers shared by the tier tests: a codec over the
 * support.h heap objects whose payload can be checked byte for byte (so a
 * load of bad bytes is detected, not just counted), a counting compile
 * callback, and a few file-system helpers.
 */
#ifndef CCACHE_TEST_TIER_SUPPORT_H
#define CCACHE_TEST_TIER_SUPPORT_H

#include <stdbool.h>

#include "support.h"

/* Codec state.  A program with id n serialises to `payload` bytes:
 * "PRG1", u32 n, then filler bytes that depend on n and their position. */
typedef struct t_codec {
  _Atomic int encodes, decodes, frees;
  _Atomic int encoded;   /* encode() calls that returned 0 */
  _Atomic int bad_loads; /* decode() saw bytes that are not an encoding */
  int encode_rc;         /* non-zero: encode() returns it */
  int decode_rc;         /* non-zero: decode() returns it */
  size_t payload;        /* bytes per program (>= 8) */
} t_codec;

ccache_codec t_codec_make(t_codec *tc, size_t payload);
/* The encoding of program id, as encode() makes it (caller frees). */
unsigned char *t_encoding(int id, size_t payload);

/* Compile callback: a fresh native whose id is pkey.lo; counts calls. */
typedef struct t_compiler {
  _Atomic int calls;
  int fail;                                                        /* non-zero: return it */
  void (*during)(struct t_compiler *, ccache *c, ccache_key pkey); /* runs inside */
  void *arg;
} t_compiler;
int t_compile(void *ud, ccache *c, ccache_key pkey, void **native_out, uint64_t *cost_out);

/* A framed entry for key as the core writes it, under runtime tag `tag`,
 * holding the encoding of program id (caller frees). */
unsigned char *t_entry(ccache_key key, const char *tag, int id, size_t payload, size_t *len);

/* get_or_compile pkey; asserts `want` and returns the native id (-1 if none). */
int t_goc(ccache *c, ccache_key pkey, t_compiler *comp, int want);

/* Threads of this process named `name` (/proc/self/task/<tid>/comm). */
int t_threads_named(const char *name);
/* Wait (up to 30 s) until no thread has that name: a thread just joined may
 * stay listed for the few microseconds its exit takes in the kernel. */
int t_threads_named_gone(const char *name);
/* A fresh empty directory under TMPDIR (or /tmp); caller frees the path. */
char *t_tempdir(const char *tag);
/* rm -rf. */
void t_rmrf(const char *path);

#endif
