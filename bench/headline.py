#!/usr/bin/env python3
"""Prints the README's headline benchmark table from bench/RESULTS.md.

The README carries no figure of its own: its table is this script's output,
pasted, so it always says what the latest `bench/run` measured (the date,
the CPU and every other row are in RESULTS.md).  Rows are picked by the start
of their figure name; a row RESULTS.md lacks is printed as "not in this run".
"""
import os
import re
import sys

ROWS = [
    ("P2 scaling, 2 threads / 1, one hot closure", "hits, 2 threads / 1, one hot closure"),
    ("P2 scaling, 2 threads / 1, 361-site walk", "hits, 2 threads / 1, one decode step's 361 call sites"),
    ("peer: thread-local uthash (RLX), 2 threads / 1, one hot closure", "thread-local tables (RLX) / ccache, hits/s, 2 threads, one hot closure"),
    ("peer: thread-local uthash (RLX), 2 threads / 1, 361-site walk", "thread-local tables (RLX) / ccache, hits/s, 2 threads, 361 sites"),
    ("callgrind: instructions per ccache_fetch + ccache_lease_release (inclusive, per call), 361 entries", "instructions per fetch + release (callgrind), 361 entries"),
    ("P1 hit latency, 100k entries", "hit latency vs bare uthash HASH_FIND, 100k entries"),
    ("P3 all call sites (361", "oneDNN's own cache hit / ccache key + fetch + release"),
    ("P4 put that evicts, max_items 1M vs 1k", "put that evicts, max_items 1M / 1k"),
    ("put that evicts (1k), another thread reading", "put that evicts while another thread reads: membarrier / fenced"),
    ("sweep of 10 expired of 1k, another thread reading", "a sweep while another thread reads: membarrier / fenced"),
    ("P6 bytes per closure entry, 1M entries", "bytes per closure entry, 1M entries"),
    ("slowest of 1000 misses, 101000-entry directory", "directory tier at its cap: slowest miss / uncapped"),
    ("Redis tier fetch (GET + check, no load)", "Redis tier fetch / loopback TCP round trip of the same bytes"),
    ("kernel_jit disk tier fetch + load of a kernel vs its compile", "kernel_jit: compile / directory-tier fetch + load"),
    ("kernel_jit Redis tier (no disk tier) fetch + load", "kernel_jit: compile / Redis-tier fetch + load"),
    ("callgrind: instructions per Rust hit", "Rust hit / C hit, instructions"),
    ("elixir: fetch + use of a native program in one NIF call", "Elixir: fetch + run in one NIF call / the call alone"),
    ("Python: `Cache.get_or_compile` hit", "Python: get_or_compile hit / functools.lru_cache hit"),
    ("Python: `Cache.fetch` hit", "Python: fetch + release / functools.lru_cache hit"),
]


def summary_rows(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## ") and rows:
                break
            if line.startswith("| ") and not line.startswith("| figure") and not line.startswith("|---"):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) >= 6:
                    rows.append(cells)
    return rows


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "RESULTS.md")
    rows = summary_rows(path)
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("- machine:"):
                cpu = line.split(":", 1)[1].split(";")[0].strip()
                print(f"Measured on {cpu}, by the run bench/RESULTS.md describes (its date and commit).\n")
                break
    print("| figure | measured | ratio: median [min, max] (reps) | target | status |")
    print("|---|---|---|---|---|")
    missing = []
    for prefix, label in ROWS:
        hits = [r for r in rows if r[0].lower().startswith(prefix.lower())]
        if not hits:
            missing.append(label)
            continue
        for r in hits:
            extra = ""
            rest = r[0][len(prefix):].strip(" ,:()")
            if len(hits) > 1 and rest:
                extra = " (" + rest + ")"
            ratio = r[3]
            if prefix.startswith("peer: thread-local"):
                # The figure is the peer's hits/s over ccache's, in its notes.
                m = re.search(r"2 threads: ([0-9.]+)× ccache's hits/s", r[6] if len(r) > 6 else "")
                ratio = (m.group(1) + "× ccache's hits/s") if m else ratio
            print(f"| {label}{extra} | {r[1]} | {ratio} | {r[4]} | {r[5]} |")
    if missing:
        print("\nNot measured by that run (its benchmark is newer): " + "; ".join(missing) + ".")


if __name__ == "__main__":
    main()
