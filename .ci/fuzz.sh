#!/usr/bin/env bash
# Fuzzing: builds the libFuzzer targets with clang-14
# (-fsanitize=fuzzer,address,undefined; runtime from libclang-rt-14-dev) in
# build/fuzz and runs each for FUZZ_SECONDS (default 60) on a scratch copy of
# its committed seed corpus (fuzz/corpus/<target>), the two targets in
# parallel (one per core).  Any crash, sanitizer report or model mismatch
# fails the script; the reproducer is left in build/fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${FUZZ_SECONDS:-60}"
cmake -S . -B build/fuzz -DCMAKE_C_COMPILER=clang-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCCACHE_BUILD_FUZZ=ON -DCCACHE_WERROR=ON -DCCACHE_BUILD_TESTS=OFF \
  -DCCACHE_BUILD_EXAMPLES=OFF -DCCACHE_BUILD_ONEDNN_EXAMPLE=OFF -DCCACHE_BUILD_BENCH=OFF
cmake --build build/fuzz -j2

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
mkdir -p build/fuzz/artifacts
pids=()
for t in fuzz_cache fuzz_fp_graph; do
  work="build/fuzz/corpus-$t"
  rm -rf "$work"
  cp -r "fuzz/corpus/$t" "$work"
  ./build/fuzz/fuzz/$t -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build/fuzz/artifacts/$t-" "$work" >"build/fuzz/$t.log" 2>&1 &
  pids+=($!)
done
rc=0
for i in 0 1; do
  t=$([ $i = 0 ] && echo fuzz_cache || echo fuzz_fp_graph)
  if wait "${pids[$i]}"; then
    echo "$t: OK: $(grep -E '^stat::number_of_executed_units' "build/fuzz/$t.log" | awk '{print $2}') runs in ${secs} s"
  else
    echo "$t: FAILED; log follows"
    tail -n 60 "build/fuzz/$t.log"
    rc=1
  fi
done
exit $rc
