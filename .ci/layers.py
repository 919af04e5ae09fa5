#!/usr/bin/env python3
"""Layering check of src/, from the code, against the tables of
docs/design.md.

1. Folders (the table between `folders:begin` and `folders:end`): every file
   of src/ is in one of the listed folders (none directly in src/), and its
   `#include "..."` lines name either a public header (ccache.h,
   ccache/*.h) or a file of src/ by its folder ("tier/tier.h"), in its own
   folder or in one the table lets it include.  No circle of includes
   between units, where a unit is a source with its header: x.h belongs to
   x.c of the same folder, and a header with no source (or, as tier.h, the
   interface of a whole folder) is a unit of its own.

2. Floors (one table per folder, between `floors:<folder>:begin` and
   `floors:<folder>:end`): every unit of the folder is on one floor of its
   folder's table, and no table names a file that is gone.  A unit calls
   units of its own folder on its own floor or below, and units of other
   folders only in the folders it may include (the folder table); no units
   call each other in a circle, across folders or within one.

   The calls are read with GNU cflow from every file of src/, preprocessed
   (so macros such as uthash's are expanded), with `-AA`: every function
   the file defines, static ones included, is a root of the graph.  The
   depth is limited to 2 (a root and its direct callees) and loses nothing:
   every function is its own root, so a callee's calls are read where it is
   a root; deeper levels would repeat them.  Each file is read twice, once
   with every option of the build on (CCACHE_TESTING, CCACHE_CHECKED,
   CCACHE_HAVE_SODIUM, CCACHE_DEBUG=1, __SANITIZE_THREAD__) and once with
   all off, so both sides of each #ifdef/#else of those options are read.
   A call to a `ccache_*` or `ccache__*` function defined in another unit
   is an edge between the two (names of other shapes are static, so they
   never leave their unit).  Inline functions in a header count with the
   header's unit.  A call to a public `ccache_*` function goes through the
   public API, which every folder may include: it may cross to any folder,
   and counts for the circles like every other edge.

Exits 1 and prints every offence.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
CPP = "cpp -I{0}/include -I{0}/src -D_POSIX_C_SOURCE=200809L".format(ROOT)
# The two configurations every file is read in (see the docstring).
CONFIGS = ("-DCCACHE_TESTING -DCCACHE_CHECKED -DCCACHE_HAVE_SODIUM=1 -DCCACHE_DEBUG=1 "
           "-D__SANITIZE_THREAD__=1", "-DCCACHE_DEBUG=0")
# A header whose unit is not x.c: tier.h is the interface of all of tier/
# (tier_stack.c, tier_open.c, tier_renew.c, tier_format.c, tier_health.c), so a
# unit of its own.
HEADER_UNIT = {"tier/tier.h": "tier/tier.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def table(marker):
    text = open(os.path.join(ROOT, "docs", "design.md")).read()
    m = re.search(r"<!-- %s:begin -->(.*?)<!-- %s:end -->" % (re.escape(marker), re.escape(marker)),
                  text, re.S)
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


def floors(folders):
    """{unit: (folder, floor)} from the floor table of each folder."""
    out = {}
    for folder in sorted(folders):
        for cells in table("floors:" + folder):
            if not cells[0].isdigit():
                continue
            for f in re.findall(r"[\w/]+\.[ch]\b", cells[1]):
                out[f] = (folder, int(cells[0]))
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
    """{function defined in path: set of names it calls}, over CONFIGS."""
    defs = {}
    for config in CONFIGS:
        args = ["cflow", "-AA", "-d", "2", "--omit-arguments", "--cpp=%s %s" % (CPP, config), path]
        res = subprocess.run(args, capture_output=True, text=True, check=True)
        cur = None
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


def check_edge(u, fn, callee, v, floor, rule, errors):
    """A call from unit u to unit v: down its folder's floors, or into a
    folder u's folder may include."""
    (fu, nu), (fv, nv) = floor[u], floor[v]
    if fv == fu and nv > nu:
        errors.append("call up a floor: %s (%s floor %d): %s() calls %s() of %s (floor %d)"
                      % (u, fu, nu, fn, callee, v, nv))
    elif fv != fu and fv not in rule[fu] and callee.startswith("ccache__"):
        errors.append("call across the folder rule: %s: %s() calls %s() of %s (%s/ may use: %s)"
                      % (u, fn, callee, v, fu, ", ".join(sorted(rule[fu]))))


def check_calls(files, units, floor, rule, errors):
    graph = {}
    for f in files:
        defs = cflow(os.path.join(SRC, f))
        g = graph.setdefault(units[f], {})
        for fn, callees in defs.items():
            g.setdefault(fn, set()).update(callees)
    missing = sorted(u for u in graph if u not in floor)
    for u in missing:
        errors.append("%s: on no floor of docs/design.md's floors:%s table"
                      % (u, os.path.dirname(u)))
    for u in sorted(floor):
        if u not in graph:
            errors.append("%s: in a floors table of docs/design.md, but no unit of src/" % u)
        elif floor[u][0] != os.path.dirname(u):
            errors.append("%s: in the floors:%s table, not its own folder's" % (u, floor[u][0]))
    if missing:
        return 0, 0
    owner = {}  # a name may have two owners: tier_redis_stub.c stands in for the Redis tier
    for u, defs in graph.items():
        for name in defs:
            if name.startswith("ccache"):
                owner.setdefault(name, set()).add(u)
    edges = {}
    for u, defs in sorted(graph.items()):
        for fn, callees in sorted(defs.items()):
            for callee in sorted(callees):
                for v in sorted(owner.get(callee, set()) - {u}):
                    edges.setdefault(u, set()).add(v)
                    check_edge(u, fn, callee, v, floor, rule, errors)
    for c in cycles(sorted(graph), edges):
        errors.append("circle of calls: " + " -> ".join(c))
    return len(graph), sum(len(v) for v in edges.values())


def main():
    files = src_files()
    units = {f: unit_of(f, set(files)) for f in files}
    rule = folder_rule()
    errors = []
    n_inc, n_inc_edges = check_includes(files, units, rule, errors)
    n_units, n_call_edges = check_calls(files, units, floors(rule), rule, errors)
    for e in errors:
        print("layers:", e)
    if errors:
        return 1
    print("layers: %d files in %d folders, %d includes (%d unit-to-unit), folder rule kept, "
          "no circle of includes; %d units, %d unit-to-unit call edges (cflow -AA, every "
          "function), no call up a floor or across the folder rule, no circle of calls" % (len(files), len(rule), n_inc, n_inc_edges, n_units, n_call_edges))
    return 0


if __name__ == "__main__":
    sys.exit(main())
