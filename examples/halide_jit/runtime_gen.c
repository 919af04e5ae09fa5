/* runtime_gen.c: at build time, write the Halide runtime object that every
 * halide_jit binary links once (pipelines are compiled with no_runtime and
 * call into it).  usage: halide_jit_runtime_gen OUT.o */
#include <stdio.h>

#include "halide_build.h"

int main(int argc, char **argv) {
  char target[256], err[512] = "the host target does not fit";
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.o\n", argv[0]);
    return 2;
  }
  if (hj_halide_runtime_target(target, sizeof target) != 0 ||
      hj_halide_emit_runtime(target, argv[1], err, sizeof err) != 0) {
    fprintf(stderr, "halide_jit_runtime_gen: %s\n", err);
    return 1;
  }
  return 0;
}
