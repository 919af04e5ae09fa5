#!/bin/sh
# Copies the C library's sources into a copy of this crate, so that its
# build.rs can build libccache there without the ccache tree (a copy of the
# crate elsewhere, and `cargo package`, whose .crate then carries them).
#
#   bindings/rust/vendor.sh [CRATE_DIR]     (default: this script's directory)
#
# Writes CRATE_DIR/vendor/ccache/{src,include,LICENSE}: every .c and .h under
# src/, src/sources.txt (the one list of sources and definitions that CMake,
# pip, cargo and mix read), the public headers.  In the tree, build.rs finds
# the sources two directories up and needs none of this; it prefers them to
# a vendor/ copy left there (CCACHE_SOURCE_DIR overrides both).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
crate=${1:-$here}
[ -f "$root/src/sources.txt" ] && [ -f "$root/include/ccache.h" ] ||
  { echo "vendor.sh: $root is not the ccache tree" >&2; exit 1; }
[ -f "$crate/Cargo.toml" ] || { echo "vendor.sh: $crate has no Cargo.toml" >&2; exit 1; }
dest="$crate/vendor/ccache"
rm -rf "$dest"
mkdir -p "$dest"
(cd "$root" && find src include -type f \( -name '*.c' -o -name '*.h' -o -name sources.txt \) -print) |
  while read -r f; do
    mkdir -p "$dest/$(dirname "$f")"
    cp "$root/$f" "$dest/$f"
  done
cp "$root/LICENSE" "$dest/LICENSE"
echo "vendor.sh: $(find "$dest" -type f | wc -l) files in $dest"
