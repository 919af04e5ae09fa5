#!/usr/bin/env python3
"""Layering check: src/ files call only files on their own floor or below,
and no two files call each other in a circle.

The floors are read from the table between the `floors:begin` and
`floors:end` markers in docs/design.md (one row per floor: number, files).
The call graph is read from the code with GNU cflow (preprocessed, so macros
such as uthash's are expanded): for each source file, every function it
defines and the functions those call; a call to a `ccache_*`/`ccache__*`
function defined in another file is an edge between the two files.  Inline
functions in headers belong to no file and are ignored.  Exits 1 and prints
every offending call when the rule is broken.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CPP = "cpp -I{0}/include -I{0}/src -DCCACHE_TESTING -D_POSIX_C_SOURCE=200809L".format(ROOT)


def floors():
    text = open(os.path.join(ROOT, "docs", "design.md")).read()
    m = re.search(r"<!-- floors:begin -->(.*?)<!-- floors:end -->", text, re.S)
    if not m:
        sys.exit("layers: no floors table in docs/design.md")
    out = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        for f in re.findall(r"[\w/]+\.c", cells[1]):
            out[f] = int(cells[0])
    return out


def cflow(path):
    """{function defined in path: set of names it calls}."""
    res = subprocess.run(
        ["cflow", "-d", "2", "--omit-arguments", "--cpp=" + CPP, path],
        capture_output=True, text=True, check=True)
    defs, cur = {}, None
    for line in res.stdout.splitlines():
        m = re.match(r"^(\s*)(\w+)\(\)(?: <.* at ([^:>]+):\d+>)?", line)
        if not m:
            continue
        indent, name, where = m.groups()
        if not indent:
            cur = name if where and os.path.samefile(where, path) else None
            if cur:
                defs.setdefault(cur, set())
        elif cur:
            defs[cur].add(name)
    return defs


def main():
    floor = floors()
    src = os.path.join(ROOT, "src")
    files = sorted(os.path.relpath(os.path.join(d, f), src)
                   for d, _, fs in os.walk(src) for f in fs if f.endswith(".c"))
    missing = [f for f in files if f not in floor]
    if missing:
        print("layers: files with no floor in docs/design.md:", " ".join(missing))
        return 1
    graph = {f: cflow(os.path.join(src, f)) for f in files}
    owner = {}
    for f, defs in graph.items():
        for name in defs:
            if name.startswith("ccache"):
                owner[name] = f
    edges, bad = {}, []
    for f, defs in graph.items():
        for fn, callees in defs.items():
            for callee in callees:
                g = owner.get(callee)
                if g is None or g == f:
                    continue
                edges.setdefault(f, set()).add(g)
                if floor[g] > floor[f]:
                    bad.append("%s (floor %d): %s() calls %s() of %s (floor %d)"
                               % (f, floor[f], fn, callee, g, floor[g]))
    # Circles between files (depth-first search for a back edge).
    state, stack, cycles = {}, [], []

    def visit(f):
        state[f] = 1
        stack.append(f)
        for g in sorted(edges.get(f, ())):
            if state.get(g) == 1:
                cycles.append(stack[stack.index(g):] + [g])
            elif g not in state:
                visit(g)
        stack.pop()
        state[f] = 2

    for f in files:
        if f not in state:
            visit(f)
    for b in bad:
        print("layers: call up a floor:", b)
    for c in cycles:
        print("layers: circle of files:", " -> ".join(c))
    n_edges = sum(len(v) for v in edges.values())
    if bad or cycles:
        return 1
    print("layers: %d files, %d file-to-file call edges, no call up a floor, no circle"
          % (len(files), n_edges))
    return 0


if __name__ == "__main__":
    sys.exit(main())
