#!/usr/bin/env python3
"""Layering check of src/, from the code, against the two tables of
docs/design.md.

1. Folders (the table between `folders:begin` and `folders:end`): every file
   of src/ is in one of the listed folders (none directly in src/), and its
   `#include "..."` lines name either a public header (ccache.h,
   ccache/*.h) or a file of src/ by its folder ("tier/tier.h"), in its own
   folder or in one the table lets it include.  No circle of includes
   between units, where a unit is a source with its header(s): x.h belongs
   to x.c of the same folder (table_inline.h to table.c), and a header with
   no source (or, as tier.h, the interface of a whole folder) is a unit of
   its own.

2. Floors (the table between `floors:begin` and `floors:end`): every unit
   calls only units on its own floor or below, and no units call each
   other in a circle.  The call graph is read with GNU cflow (preprocessed,
   so macros such as uthash's are expanded): for each file, every function
   it defines and the functions those call; a call to a `ccache_*` or
   `ccache__*` function defined in another unit is an edge between the two.
   Inline functions in a header count with the header's unit.

Exits 1 and prints every offence.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
CPP = "cpp -I{0}/include -I{0}/src -DCCACHE_TESTING -D_POSIX_C_SOURCE=200809L".format(ROOT)
# Headers whose unit is not x.c: table_inline.h is the inline half of
# table.c; tier.h is the interface of all of tier/ (tier.c, tier_open.c,
# tier_renew.c, tier_format.c), so a unit of its own.
HEADER_UNIT = {"core/table_inline.h": "core/table.c", "tier/tier.h": "tier/tier.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def table(marker):
    text = open(os.path.join(ROOT, "docs", "design.md")).read()
    m = re.search(r"<!-- %s:begin -->(.*?)<!-- %s:end -->" % (marker, marker), text, re.S)
    if not m:
        sys.exit("layers: no %s table in docs/design.md" % marker)
    rows = []
    for line in m.group(1).splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and not set(cells[0]) <= set("-") and cells[0] not in ("floor", "folder"):
            rows.append(cells)
    return rows


def folder_rule():
    """{folder: set of folders it may include (itself too)}."""
    rows = table("folders")
    names = {cells[0] for cells in rows}
    rule = {}
    for cells in rows:
        may = {f.strip("` ") for f in re.split(r"[,\s]+", cells[1])} & names
        rule[cells[0]] = may | {cells[0]}
    return rule


def floors():
    out = {}
    for cells in table("floors"):
        if not cells[0].isdigit():
            continue
        for f in re.findall(r"[\w/]+\.[ch]\b", cells[1]):
            out[f] = int(cells[0])
    return out


def src_files():
    return sorted(os.path.relpath(os.path.join(d, f), SRC)
                  for d, _, fs in os.walk(SRC) for f in fs if f.endswith((".c", ".h")))


def unit_of(f, files):
    if f in HEADER_UNIT:
        return HEADER_UNIT[f]
    if f.endswith(".h") and f[:-2] + ".c" in files:
        return f[:-2] + ".c"
    return f


def cycles(nodes, edges):
    """Circles in a directed graph (depth-first search for back edges)."""
    state, stack, found = {}, [], []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                found.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in nodes:
        if n not in state:
            visit(n)
    return found


def check_includes(files, units, rule, errors):
    edges = {}
    n_inc = 0
    for f in files:
        folder = os.path.dirname(f)
        if not folder:
            errors.append("%s: directly in src/ (every file belongs to a folder)" % f)
            continue
        if folder not in rule:
            errors.append("%s: folder %s is not in docs/design.md's folders table" % (f, folder))
            continue
        text = open(os.path.join(SRC, f)).read()
        for inc in INCLUDE.findall(text):
            n_inc += 1
            if inc == "ccache.h" or inc.startswith("ccache/"):
                continue  # the public headers: every folder may include them
            if inc not in files:
                errors.append('%s: #include "%s" names no file of src/ by its folder' % (f, inc))
                continue
            to = os.path.dirname(inc)
            if to not in rule[folder]:
                errors.append('%s: #include "%s": %s/ may not include %s/ (may: %s)'
                              % (f, inc, folder, to, ", ".join(sorted(rule[folder]))))
            a, b = units[f], units[inc]
            if a != b:
                edges.setdefault(a, set()).add(b)
    for c in cycles(sorted(set(units.values())), edges):
        errors.append("circle of includes: " + " -> ".join(c))
    return n_inc, sum(len(v) for v in edges.values())


def cflow(path):
    """{function defined in path: set of names it calls}."""
    args = ["cflow", "-d", "2", "--omit-arguments", "--cpp=" + CPP, path]
    if path.endswith(".h"):
        args[1:1] = ["-A", "-A"]  # a header's inline functions are all roots
    res = subprocess.run(args, capture_output=True, text=True, check=True)
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


def check_calls(files, units, floor, errors):
    graph = {}
    for f in files:
        if f.endswith(".h") and "inline" not in open(os.path.join(SRC, f)).read():
            continue
        defs = cflow(os.path.join(SRC, f))
        if defs:
            g = graph.setdefault(units[f], {})
            for fn, callees in defs.items():
                g.setdefault(fn, set()).update(callees)
    missing = sorted(u for u in graph if u not in floor)
    if missing:
        errors.append("units with no floor in docs/design.md: " + " ".join(missing))
        return 0, 0
    owner = {}
    for u, defs in graph.items():
        for name in defs:
            if name.startswith("ccache"):
                owner[name] = u
    edges = {}
    for u, defs in graph.items():
        for fn, callees in defs.items():
            for callee in callees:
                v = owner.get(callee)
                if v is None or v == u:
                    continue
                edges.setdefault(u, set()).add(v)
                if floor[v] > floor[u]:
                    errors.append("call up a floor: %s (floor %d): %s() calls %s() of %s (floor %d)"
                                  % (u, floor[u], fn, callee, v, floor[v]))
    for c in cycles(sorted(graph), edges):
        errors.append("circle of calls: " + " -> ".join(c))
    return len(graph), sum(len(v) for v in edges.values())


def main():
    files = src_files()
    units = {f: unit_of(f, set(files)) for f in files}
    rule = folder_rule()
    errors = []
    n_inc, n_inc_edges = check_includes(files, units, rule, errors)
    n_units, n_call_edges = check_calls(files, units, floors(), errors)
    for e in errors:
        print("layers:", e)
    if errors:
        return 1
    print("layers: %d files in %d folders, %d includes (%d unit-to-unit), folder rule kept, "
          "no circle of includes; %d units, %d unit-to-unit call edges, no call up a floor, "
          "no circle of calls" % (len(files), len(rule), n_inc, n_inc_edges, n_units, n_call_edges))
    return 0


if __name__ == "__main__":
    sys.exit(main())
