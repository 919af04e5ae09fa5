#!/usr/bin/env bash
# installed_library.sh PYTHON SOURCE_ROOT BUILD_ROOT OUT_DIR - the package
# built against an *installed* libccache (CCACHE_USE_INSTALLED=1), as
# bindings/python/README.md describes: the library of BUILD_ROOT installed
# to a scratch prefix with `cmake --install`, a fresh venv, the package
# pip-installed into it offline with PKG_CONFIG_PATH at that prefix; then
# the extension must link libccache.so.0 from the prefix (and compile none
# of the library's sources), and a get-or-compile hit and a directory tier
# hit must work through it.
set -euo pipefail
py="$1" root="$2" build="$3" out="$4"
prefix="$out/installed-prefix" venv="$out/installed-venv" pkg="$out/installed-pkg"
rm -rf "$prefix" "$venv" "$pkg"
mkdir -p "$out"
for c in Runtime Development; do
  cmake --install "$build" --prefix "$prefix" --component "$c" >/dev/null
done
test -e "$prefix/lib/libccache.so.0" && test -e "$prefix/lib/pkgconfig/ccache.pc"
"$py" -m venv --system-site-packages "$venv"
cp -r "$root/bindings/python" "$pkg"
rm -rf "$pkg/build" "$pkg"/*.egg-info "$pkg/ccache"/*.so
# CCACHE_SOURCE_DIR points nowhere: the build must not need the tree's sources.
CCACHE_USE_INSTALLED=1 CCACHE_SOURCE_DIR=/nonexistent PKG_CONFIG_PATH="$prefix/lib/pkgconfig" \
  "$venv/bin/pip" install --no-index --no-build-isolation --disable-pip-version-check -q "$pkg"
cd "$out"
"$venv/bin/python" - "$prefix" "$out/installed-tier" <<'PY'
import os, shutil, subprocess, sys
import ccache
prefix, tier = sys.argv[1], sys.argv[2]
ext = ccache._ccache.__file__
assert ext.startswith(sys.prefix), ext                  # the venv's package, not the tree's
dyn = subprocess.check_output(["readelf", "-d", ext], text=True)
assert "[libccache.so.0]" in dyn, dyn                   # linked, not compiled in
syms = subprocess.check_output(["nm", "-D", "--defined-only", ext], text=True).split()
assert "ccache_open" not in syms, "the extension defines the library's symbols itself"
maps = open("/proc/self/maps").read()
lib = os.path.realpath(os.path.join(prefix, "lib", "libccache.so.0"))
assert lib in maps, f"{lib} is not the libccache loaded"
calls = []
with ccache.Cache(max_items=16) as c:
    k = ccache.key("installed", 1)
    assert c.get_or_compile(k, lambda: calls.append(1) or "prog") == "prog"
    assert c.get_or_compile(k, lambda: calls.append(1) or "again") == "prog"
    s = c.stats()
    assert (len(calls), s.hits, s.misses, s.compiles) == (1, 1, 1, 1), s
shutil.rmtree(tier, ignore_errors=True)

class Codec:
    def encode(self, obj):
        return obj
    def decode(self, data):
        return data

for run in ("cold", "warm"):
    with ccache.Cache(tiers=[ccache.DirectoryTier(tier)], codec=Codec(),
                      tier_min_compile_us=0) as c:
        with c.program(ccache.key("installed-program"), lambda: b"native") as h:
            assert h.native == b"native"
        s = c.stats()
        want = (1, 0) if run == "cold" else (0, 1)
        assert (s.program_compiles, s.tier_hits) == want, (run, s)
print("ccache", ccache.__version__, "built against", lib, "- hit and tier hit: ok")
PY
