/* halide_build.h: everything halide_jit asks of libHalide, behind a C
 * interface.  halide_build.cpp is the one translation unit that includes
 * Halide.h (it takes a minute or two to compile); the rest of the example
 * is C.
 *
 * Every call takes one process-wide mutex: Halide 14 does not document
 * compiling from several threads at once as safe, so halide_jit never does
 * (ccache's single-flight already keeps one compile per pipeline; the mutex
 * keeps two different pipelines from compiling at the same time).  Halide's
 * errors (it is built with exceptions) become a status and one line in err;
 * nothing here aborts. */
#ifndef HJ_HALIDE_BUILD_H
#define HJ_HALIDE_BUILD_H

#include <stddef.h>

#include "spec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The target pipelines are compiled for: this machine's (Halide's
 * get_host_target(), with its CPU features) plus no_runtime, e.g.
 * "x86-64-linux-avx-avx2-f16c-fma-sse41-no_runtime".  0, or -1 if it does
 * not fit in n bytes. */
int hj_halide_pipeline_target(char *buf, size_t n);

/* The target of the one shared runtime: the host's OS, architecture and
 * bits with no CPU feature, so the runtime object built with the example
 * runs on any machine of that architecture. */
int hj_halide_runtime_target(char *buf, size_t n);

/* LLVM's version libHalide was built against (e.g. 140). */
int hj_halide_llvm_version(void);

/* Build s's pipeline as a runtime would at a call site (fresh Funcs and
 * ImageParams, the schedule applied) and compile it for target (a Halide
 * target string) to an object file at obj_path whose entry point is
 * fn_name (also fn_name_argv and fn_name_metadata).  *ms (may be NULL)
 * receives the milliseconds spent building and compiling, the wait for
 * the mutex excluded.  0, or -1 with one line in err. */
int hj_halide_compile(const hj_spec *s, const char *target, const char *fn_name,
                      const char *obj_path, double *ms, char *err, size_t errlen);

/* The lowered statement (compile_to_module's functions, as text) of a
 * fresh build of s.  With normalize, the "$N" suffix Halide gives a name
 * already used in this process is dropped and the "tN" temporaries are
 * numbered in order of appearance, so that two builds of one pipeline give
 * the same text;
 * without, the text is Halide's own.  *text is malloc'd.  0, or -1 with
 * one line in err.  (For the tests: the program key is made from the
 * builder's parameters, see keys.h.) */
int hj_halide_lowered(const hj_spec *s, const char *target, int normalize, char **text, char *err,
                      size_t errlen);

/* Halide's own path at a call site: build s's pipeline afresh and
 * compile_jit it for the host target (Halide reuses a JIT compile only for
 * the same Pipeline object, so every call compiles).  The pipeline is
 * freed again.  0, or -1 with one line in err. */
int hj_halide_jit(const hj_spec *s, char *err, size_t errlen);

/* compile_standalone_runtime(obj_path, target).  0, or -1. */
int hj_halide_emit_runtime(const char *target, const char *obj_path, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
