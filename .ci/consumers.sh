#!/usr/bin/env bash
# Packaging check (issue 8): install ccache to a scratch prefix, then build
# and run two consumers against the *installed* package only:
#   - tests/consumers/find_package_c: C, find_package(ccache CONFIG), linked
#     once to ccache::ccache (shared) and once to ccache::ccache_static;
#   - tests/consumers/pkgconfig_cxx: C++11 and C++17, `pkg-config ccache`,
#     linked shared and (with --static) to libccache.a.
# Each consumer does one ccache_get_or_compile() round trip.
# Usage: .ci/consumers.sh [work-dir]   (default: a fresh temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD

if [[ $# -ge 1 ]]; then
  work=$1
  rm -rf "$work"
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/ccache-consumers.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
prefix=$work/prefix
step() { printf -- '--- %s\n' "$*"; }
fail() { printf 'consumers.sh: FAIL: %s\n' "$*" >&2; exit 1; }

step "build and install the library (tests and examples off) to $prefix"
cmake -S "$src" -B "$work/lib" -DCMAKE_BUILD_TYPE=Release \
  -DCCACHE_BUILD_TESTS=OFF -DCCACHE_BUILD_EXAMPLES=OFF -DCCACHE_BUILD_BENCH=OFF \
  -DCMAKE_INSTALL_PREFIX=/nonexistent >"$work/lib.log" 2>&1 || { cat "$work/lib.log"; fail "configure"; }
cmake --build "$work/lib" -j2 >>"$work/lib.log" 2>&1 || { cat "$work/lib.log"; fail "build"; }
# --prefix at install time: the package must not depend on the configure-time prefix.
cmake --install "$work/lib" --prefix "$prefix" >>"$work/lib.log" 2>&1 || { cat "$work/lib.log"; fail "install"; }

step "installed files"
libdir=$prefix/lib
for f in include/ccache.h include/ccache/common.h include/ccache/cache.h include/ccache/program.h \
         include/ccache/closure.h include/ccache/flight.h include/ccache/stats.h \
         include/ccache/tier.h include/ccache/tier_ops.h include/ccache/tier_disk.h \
         include/ccache/tier_redis.h include/ccache/fp.h include/ccache/trust.h \
         lib/libccache.a lib/libccache.so lib/libccache.so.0 \
         lib/cmake/ccache/ccacheConfig.cmake lib/cmake/ccache/ccacheConfigVersion.cmake \
         lib/cmake/ccache/ccacheTargets.cmake lib/pkgconfig/ccache.pc; do
  [[ -e $prefix/$f ]] || fail "missing $f"
done
(cd "$prefix" && find . -type f -o -type l | sort | sed 's/^\.\//  /')
real=$(readlink -f "$libdir/libccache.so")
[[ $(basename "$real") =~ ^libccache\.so\.0\.[0-9]+\.[0-9]+$ ]] || fail "libccache.so -> $real"
soname=$(readelf -d "$libdir/libccache.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == libccache.so.0 ]] || fail "SONAME is '$soname', want libccache.so.0"
echo "  SONAME $soname -> $(basename "$real")"
grep -q "$src\|$work/lib" "$prefix/lib/cmake/ccache/"*.cmake "$prefix/lib/pkgconfig/ccache.pc" &&
  fail "the installed package refers to the source or build tree"

# needed <binary> <yes|no>: whether it has a DT_NEEDED entry for libccache.so.0
needed() {
  if readelf -d "$1" | grep -q 'NEEDED.*\[libccache\.so\.0\]'; then
    [[ $2 == yes ]] || fail "$1 links libccache.so.0 but should be static"
  else
    [[ $2 == no ]] || fail "$1 does not link libccache.so.0"
  fi
}

step "each installed header compiles alone (C11, C++11, C++17; -Wall -Wextra -Wpedantic -Werror)"
CC=${CC:-cc}
CXX=${CXX:-c++}
n_hdr=0
while IFS= read -r h; do
  printf '#include <%s>\n#include <%s>\n' "$h" "$h" >"$work/alone.c"
  cp "$work/alone.c" "$work/alone.cpp"
  "$CC" -std=c11 -Wall -Wextra -Wpedantic -Werror -I"$prefix/include" -fsyntax-only "$work/alone.c" ||
    fail "$h alone as C11"
  for std in 11 17; do
    "$CXX" -std=c++$std -Wall -Wextra -Wpedantic -Werror -I"$prefix/include" -fsyntax-only \
      "$work/alone.cpp" || fail "$h alone as C++$std"
  done
  n_hdr=$((n_hdr + 1))
done < <(cd "$prefix/include" && find . -name '*.h' | sed 's/^\.\///' | sort)
[[ $n_hdr == 13 ]] ||
  fail "$n_hdr installed headers, want 13 (ccache.h and ccache/{common,cache,program,closure,flight,stats,tier,tier_ops,tier_disk,tier_redis,fp,trust}.h)"
echo "  $n_hdr headers: ok"

step "the key tool is installed and makes a key pair (closure-cache-keys generate)"
"$prefix/bin/closure-cache-keys" generate ci-key "$work/ci.sec" "$work/ci.pub" >/dev/null ||
  fail "closure-cache-keys generate"
[[ $(stat -c %a "$work/ci.sec") == 600 ]] || fail "the secret key file is not mode 600"
grep -q '^ci-key:' "$work/ci.pub" || fail "the public key file is not NAME:BASE64"
echo "  $prefix/bin/closure-cache-keys: ok"

step "C consumer via find_package(ccache CONFIG) (a decoy Findccache.cmake is on CMAKE_MODULE_PATH)"
cmake -S "$src/tests/consumers/find_package_c" -B "$work/find_package_c" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$work/fp.log" 2>&1 ||
  { cat "$work/fp.log"; fail "configure find_package consumer"; }
grep 'ccache .* from' "$work/fp.log" | sed 's/^/  /'
cmake --build "$work/find_package_c" >>"$work/fp.log" 2>&1 ||
  { cat "$work/fp.log"; fail "build find_package consumer"; }
needed "$work/find_package_c/consumer_shared" yes
needed "$work/find_package_c/consumer_static" no
"$work/find_package_c/consumer_shared" | sed 's/^/  shared: /'
"$work/find_package_c/consumer_static" | sed 's/^/  static: /'

step "C++ consumer via pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
pc_version=$(pkg-config --modversion ccache)
echo "  pkg-config ccache: $pc_version; cflags: $(pkg-config --cflags ccache); libs: $(pkg-config --libs ccache); static: $(pkg-config --static --libs ccache)"
hdr_version=$(sed -n 's/^#define CCACHE_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' "$prefix/include/ccache/common.h" | paste -sd.)
[[ $pc_version == "$hdr_version" ]] || fail "ccache.pc Version $pc_version != header $hdr_version"
pkg-config --atleast-version=0.1 ccache || fail "pkg-config --atleast-version=0.1"
pc_libdir=$(pkg-config --variable=libdir ccache)
# shellcheck disable=SC2046  # word splitting of pkg-config output is intended
for std in 11 17; do
  out=$work/pkgconfig_cxx$std
  "$CXX" -std=c++$std -Wall -Wextra -Wpedantic -Werror \
    $(pkg-config --cflags ccache) "$src/tests/consumers/pkgconfig_cxx/main.cpp" -o "$out" \
    $(pkg-config --libs ccache) -Wl,-rpath,"$pc_libdir" || fail "C++$std shared build"
  needed "$out" yes
  "$out" | sed "s/^/  c++$std shared: /"
  # Static: -lccache becomes -l:libccache.a; Libs.private must bring the rest.
  read -ra static_libs <<<"$(pkg-config --static --libs ccache)"
  static_libs=("${static_libs[@]/#-lccache/-l:libccache.a}")
  "$CXX" -std=c++$std -Wall -Wextra -Wpedantic -Werror \
    $(pkg-config --cflags ccache) "$src/tests/consumers/pkgconfig_cxx/main.cpp" -o "$out-static" \
    "${static_libs[@]}" || fail "C++$std static build"
  needed "$out-static" no
  "$out-static" | sed "s/^/  c++$std static: /"
done

step "consumers: ok"
