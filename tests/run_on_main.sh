#!/bin/sh
# Build the signed-entry tests (test_trust, test_trust_redis) against a
# commit without ccache/trust.h (default: main) with TRUST_ON_MAIN, and run
# them: they must fail there (a forged entry loads, a moved entry loads,
# a squatter's lease stalls the reader).  Not part of CI; run from the
# repository's root:  sh tests/run_on_main.sh [COMMIT]
set -u
commit=${1:-main}
out=build/onmain
rm -rf "$out" && mkdir -p "$out"
git archive "$commit" | tar -x -C "$out"
cp tests/test_trust.c tests/test_trust_redis.c tests/trust_support.c tests/trust_support.h "$out/tests/"
cat >> "$out/tests/CMakeLists.txt" <<'CM'
ccache_add_test(trust TIMEOUT 120 SOURCES tier_support.c disk_support.c trust_support.c)
target_compile_definitions(test_trust PRIVATE TRUST_ON_MAIN=1)
ccache_add_test(trust_redis TIMEOUT 120 SOURCES tier_support.c trust_support.c redis_fixture.c)
target_compile_definitions(test_trust_redis PRIVATE TRUST_ON_MAIN=1)
target_include_directories(test_trust_redis PRIVATE ${HIREDIS_INCLUDE_DIR})
target_link_libraries(test_trust_redis PRIVATE ${HIREDIS_LIBRARY})
CM
cmake -S "$out" -B "$out/b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCCACHE_BUILD_EXAMPLES=OFF \
  -DCCACHE_BUILD_BENCH=OFF >/dev/null
cmake --build "$out/b" -j2 --target test_trust test_trust_redis >/dev/null
"$out/b/tests/test_trust"
"$out/b/tests/test_trust_redis"
