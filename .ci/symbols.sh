#!/usr/bin/env bash
# Exported-symbol check (issue 8): the dynamic symbols libccache.so defines
# must be exactly the functions the public headers (ccache.h and the
# ccache/*.h it includes) declare with CCACHE_API: none missing, nothing
# extra (no uthash/xxHash code, no internal helpers).
# Usage: .ci/symbols.sh [path/to/libccache.so]
#   (default: build the shared library into a fresh temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."
header=include/ccache.h
headers=(include/ccache.h include/ccache/*.h)
fail() { printf 'symbols.sh: FAIL: %s\n' "$*" >&2; exit 1; }

if [[ $# -ge 1 ]]; then
  lib=$1
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/ccache-symbols.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  cmake -S . -B "$work" -DCMAKE_BUILD_TYPE=Release -DCCACHE_BUILD_TESTS=OFF \
    -DCCACHE_BUILD_EXAMPLES=OFF -DCCACHE_BUILD_BENCH=OFF >"$work/log" 2>&1 ||
    { cat "$work/log"; fail "configure"; }
  cmake --build "$work" --target ccache_shared -j2 >>"$work/log" 2>&1 ||
    { cat "$work/log"; fail "build"; }
  lib=$work/libccache.so
fi
[[ -f $lib ]] || fail "no shared library at $lib"

# What the headers declare: preprocess the umbrella as the library build does (so
# CCACHE_API expands to visibility("default"), comments and macros are gone),
# one declaration per line, and take the identifier before the first '('.
want=$(${CC:-cc} -E -P -DCCACHE_BUILDING -Iinclude -x c "$header" |
  tr '\n' ' ' | tr ';' '\n' |
  grep -F '__attribute__((visibility("default")))' |
  sed -e 's/.*__attribute__((visibility("default")))//' -e 's/(.*//' |
  awk '{ name = $NF; sub(/^\**/, "", name); print name }' | sort)
[[ -n $want ]] || fail "no CCACHE_API declarations found in $header"
# Cross-check the preprocessor's view against the source text.
# (every header, so one the umbrella forgot to include is caught).
n_text=$(cat "${headers[@]}" | grep -c '^CCACHE_API ')
n_want=$(wc -l <<<"$want")
[[ $n_text == "$n_want" ]] || fail "$n_text lines of ${headers[*]} start with CCACHE_API but $n_want declarations parsed from $header"

# What the library exports: defined dynamic symbols (nm -D --defined-only).
have=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u)

missing=$(comm -23 <(echo "$want") <(echo "$have"))
extra=$(comm -13 <(echo "$want") <(echo "$have"))
leaks=$(grep -Ei '^(XXH|_XXH|xxh|uthash|HASH_|ut[a-z]*_)' <<<"$have" || true)

echo "libccache: $(basename "$(readlink -f "$lib")"), $(wc -l <<<"$have") exported symbols; $header and ccache/*.h: $n_want CCACHE_API functions"
list() { local line; while IFS= read -r line; do printf '  %s: %s\n' "$1" "$line"; done; }
[[ -z $leaks ]] || list "from uthash/xxHash" <<<"$leaks"
[[ -z $missing ]] || list "declared but not exported" <<<"$missing"
[[ -z $extra ]] || list "exported but not declared with CCACHE_API" <<<"$extra"
[[ -z $leaks && -z $missing && -z $extra ]] || fail "exported symbols differ from the header's CCACHE_API declarations"
echo "symbols: ok (exactly the documented calls)"
