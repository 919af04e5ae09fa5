#!/usr/bin/env bash
# Valgrind memcheck over the plain test executables (-Werror build, like the
# test preset) in build/valgrind, with the stress and random tests scaled
# down by CCACHE_TEST_SCALE=20 and without the oneDNN example (its OpenMP
# runtime is very slow under memcheck) or the benchmarks.  Any memcheck
# error or definite/indirect/possible leak fails the run (--error-exitcode=1
# --leak-check=full).  .ci/valgrind.supp lists the two by-design leaks (forked
# children that exit with the default instance alive or abandon a cache
# created before the fork).  Two tests run at a time (one per core).
set -euo pipefail
cd "$(dirname "$0")/.."

cmake -S . -B build/valgrind -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCCACHE_WERROR=ON \
  -DCCACHE_BUILD_TESTS=ON -DCCACHE_BUILD_EXAMPLES=ON -DCCACHE_BUILD_ONEDNN_EXAMPLE=OFF \
  -DCCACHE_BUILD_BENCH=OFF -DCCACHE_TEST_SCALE=20 \
  -DCCACHE_BUILD_RUST=OFF -DCCACHE_BUILD_ELIXIR=OFF -DCCACHE_BUILD_HALIDE_EXAMPLE=OFF
cmake --build build/valgrind -j2

mkdir -p build/valgrind/memcheck
run_one() {
  exe="$1"
  name="$(basename "$exe")"
  log="build/valgrind/memcheck/$name.log"
  start=$(date +%s)
  if timeout 900 valgrind --error-exitcode=1 --leak-check=full --track-origins=yes --num-callers=40 \
       --suppressions=.ci/valgrind.supp \
       --quiet "$exe" >"$log" 2>&1; then
    echo "valgrind: $name OK ($(( $(date +%s) - start )) s)"
  else
    echo "valgrind: $name FAILED ($(( $(date +%s) - start )) s); log follows"
    tail -n 80 "$log"
    return 1
  fi
}
export -f run_one

# Every cmocka test executable, plus the dependency-free example.
ls build/valgrind/tests/test_* build/valgrind/examples/jit_path |
  xargs -P 2 -I{} bash -c 'run_one "$@"' _ {}
