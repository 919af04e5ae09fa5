#!/usr/bin/env bash
# make_venv.sh PYTHON SOURCE_ROOT BUILD_DIR - the ctest fixture of the
# Python tests: a fresh `PYTHON -m venv --system-site-packages` in
# BUILD_DIR/venv and the package installed into it offline, exactly as the
# README says (pip install --no-index --no-build-isolation), from a copy of
# bindings/python in BUILD_DIR/pkg so that parallel builds never write into
# the source tree (CCACHE_SOURCE_DIR tells setup.py where src/ is).
set -euo pipefail
py="$1" root="$2" out="$3"
rm -rf "$out/venv" "$out/pkg"
mkdir -p "$out"
"$py" -m venv --system-site-packages "$out/venv"
cp -r "$root/bindings/python" "$out/pkg"
rm -rf "$out/pkg/build" "$out/pkg"/*.egg-info "$out/pkg/ccache"/*.so
CCACHE_SOURCE_DIR="$root" "$out/venv/bin/pip" install --no-index --no-build-isolation \
  --disable-pip-version-check -q "$out/pkg"
cd "$out"
"$out/venv/bin/python" -c 'import ccache, sys; print("ccache", ccache.__version__, "from", ccache.__file__)'
