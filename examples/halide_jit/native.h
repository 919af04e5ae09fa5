/* native.h: a compiled pipeline loaded from a shared object's bytes, and
 * the codec that moves it through ccache's tiers.
 *
 * The bytes are loaded by the examples' memfd loader (examples/common/
 * ex_memfd.h).  The object's entry point is named after its program key,
 * hj_<32 hex digits>, so a load that returned some other object (see
 * ex_memfd.h) finds no such symbol and fails instead of running the wrong
 * pipeline.  The object has no Halide runtime of its own (target feature
 * no_runtime): its calls to halide_do_par_for, halide_malloc, halide_error
 * ... resolve to the one runtime linked into the executable, so unloading a
 * pipeline never unloads a thread pool or code a pool thread may be in. */
#ifndef HJ_NATIVE_H
#define HJ_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#include <HalideRuntime.h>
#include <ccache.h>

#include "ex_memfd.h"

typedef struct hj_native {
  ex_so so;
  void *fn;                                    /* int fn(halide_buffer_t *..., ...) */
  const struct halide_filter_metadata_t *meta; /* Halide's description of fn's arguments */
} hj_native;

/* "hj_<key.hi><key.lo>" in hex: the entry point's name (buf >= 40 bytes). */
void hj_entry_name(ccache_key key, char *buf, size_t n);

/* Load a pipeline compiled for key.  NULL with one line in err; then *bad
 * (if bad is not NULL) says whether the bytes are bad (not a whole shared
 * object, or lacking the key's entry points) rather than this host failing
 * to load them (no memory, memfd, write, dlopen). */
hj_native *hj_load(const void *bytes, size_t len, ccache_key key, int *bad, char *err,
                   size_t errlen);
void hj_unload(hj_native *n);

/* Live counters of the codec (atomic). */
typedef struct hj_codec_state {
  _Atomic uint64_t loads;   /* objects loaded (tier hits and fresh compiles) */
  _Atomic uint64_t unloads; /* objects unloaded */
} hj_codec_state;

/* The codec for ccache_config::codec (ctx is st): encode reads the bytes
 * back from the memfd; decode is hj_load. */
ccache_codec hj_codec(hj_codec_state *st);

/* Why the last decode on this thread failed (one line). */
const char *hj_codec_error(void);

#endif
