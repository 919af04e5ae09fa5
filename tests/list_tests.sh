#!/usr/bin/env bash
# The test catalogue as names, for comparing before and after a change:
#   ctest <name> [labels]             every ctest entry of a configured build
#   cmocka <file> <test function>     every cmocka case registered in a main()
# Usage: tests/list_tests.sh [build dir]  (default build/test; configure it
# first, e.g. cmake --preset test).  The output is sorted.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/test}"
{
  ctest --test-dir "$build" --show-only=json-v1 | python3 -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    labels = []
    for p in t.get("properties", []):
        if p["name"] == "LABELS":
            labels = p["value"]
    print("ctest", t["name"], ",".join(sorted(labels)))
'
  # A registration is cmocka_unit_test*(name...; the name may follow on the
  # next line when clang-format wraps the call.
  for f in tests/*.c examples/*/tests/*.c; do
    tr '\n' ' ' <"$f" | grep -oE 'cmocka_unit_test[a-z_]*\( *[A-Za-z_][A-Za-z0-9_]*' |
      sed -E 's/.*\( *//' | sed "s|^|cmocka $f |" || true
  done
} | sed 's/ *$//' | LC_ALL=C sort
