#!/usr/bin/env bash
# Fuzzing: builds the libFuzzer targets with clang-14
# (-fsanitize=fuzzer,address,undefined; runtime from libclang-rt-14-dev) in
# build/fuzz and runs each for FUZZ_SECONDS (default 60) on a scratch copy of
# its committed seed corpus (fuzz/corpus/<target>): fuzz_cache on one core,
# fuzz_fp_graph then fuzz_entry (FUZZ_SECONDS/2 each) on the other.  Any
# crash, sanitizer report or model mismatch fails the script; the
# reproducer is left in build/fuzz/artifacts/.
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
# Two cores: fuzz_cache runs the whole time on one; fuzz_fp_graph and
# fuzz_entry share the other, half the time each, so the stage takes as
# long as it did with two targets.
half=$(( secs / 2 > 0 ? secs / 2 : 1 ))
run() { # target seconds
  local t=$1 s=$2 work="build/fuzz/corpus-$1"
  rm -rf "$work"
  cp -r "fuzz/corpus/$t" "$work"
  ./build/fuzz/fuzz/$t -max_total_time="$s" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build/fuzz/artifacts/$t-" "$work" >"build/fuzz/$t.log" 2>&1
}
report() { # target seconds status
  if [ "$3" = 0 ]; then
    echo "$1: OK: $(grep -E '^stat::number_of_executed_units' "build/fuzz/$1.log" | awk '{print $2}') runs in $2 s"
  else
    echo "$1: FAILED; log follows"
    tail -n 60 "build/fuzz/$1.log"
  fi
}
run fuzz_cache "$secs" &
p1=$!
( run fuzz_fp_graph "$half" && a=0 || a=1; run fuzz_entry "$half" && b=0 || b=1; exit $(( a * 2 + b )) ) &
p2=$!
rc=0
if wait $p1; then report fuzz_cache "$secs" 0; else report fuzz_cache "$secs" 1; rc=1; fi
wait $p2 && s2=0 || s2=$?
report fuzz_fp_graph "$half" $(( s2 / 2 ))
report fuzz_entry "$half" $(( s2 % 2 ))
[ "$s2" = 0 ] || rc=1
exit $rc
