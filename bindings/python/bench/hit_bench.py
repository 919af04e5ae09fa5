"""The Python hit against functools.lru_cache, same keys, same run.

Per lookup, over 361 entries (a decode step's call sites, as bench_hit):
  - Cache.get_or_compile(key, compile) that hits,
  - Cache.fetch(key) (fetch + lease release inside),
  - an lru_cache(maxsize=None)-wrapped function called with the same Key.
Each loop's time minus an empty loop over the same keys, median of --reps
repetitions; the ratio's [min, max] is over the repetitions.  Target: each
ccache hit <= 1.5x the lru_cache hit.  Prints a markdown table (the format
of bench/RESULTS.md), or one JSON object with --json.

usage: python3 hit_bench.py [--quick] [--reps N] [--json]
"""
import argparse
import functools
import json
import statistics
import sys
import time

import ccache

ENTRIES = 361


def per_call_ns(fn, keys, rounds):
    t0 = time.perf_counter_ns()
    for _ in range(rounds):
        fn(keys)
    return (time.perf_counter_ns() - t0) / (rounds * len(keys))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    reps = a.reps or (3 if a.quick else 9)
    rounds = 50 if a.quick else 1000

    keys = [ccache.key("site", i) for i in range(ENTRIES)]
    values = {k: object() for k in keys}
    cache = ccache.Cache()
    for k in keys:
        cache.get_or_compile(k, lambda k=k: values[k])

    @functools.lru_cache(maxsize=None)
    def lru(k):
        return values[k]

    for k in keys:
        lru(k)

    def compile_fn():
        raise AssertionError("a hit never compiles")

    def loop_empty(ks):
        for k in ks:
            pass

    def loop_lru(ks, f=lru):
        for k in ks:
            f(k)

    def loop_goc(ks, g=cache.get_or_compile, c=compile_fn):
        for k in ks:
            g(k, c)

    def loop_fetch(ks, f=cache.fetch):
        for k in ks:
            f(k)

    # Same objects back from each path.
    assert all(cache.get_or_compile(k, compile_fn) is lru(k) is cache.fetch(k) for k in keys)
    res = {"empty": [], "lru": [], "goc": [], "fetch": []}
    loops = {"empty": loop_empty, "lru": loop_lru, "goc": loop_goc, "fetch": loop_fetch}
    for _ in range(reps):
        for name, fn in loops.items():  # interleaved: load drifts hit all alike
            res[name].append(per_call_ns(fn, keys, rounds))
    s = cache.stats()
    assert s.compiles == ENTRIES and s.leases_out == 0, s
    cache.close()

    def net(name):
        return [x - e for x, e in zip(res[name], res["empty"])]

    rows = []
    for name, label in (("goc", "`Cache.get_or_compile` hit"), ("fetch", "`Cache.fetch` hit (fetch + release)")):
        ratios = [x / y for x, y in zip(net(name), net("lru"))]
        med = statistics.median(ratios)
        rows.append({
            "figure": f"Python: {label} vs `functools.lru_cache` hit, same Key, {ENTRIES} entries",
            "measured_ns": statistics.median(net(name)),
            "baseline_ns": statistics.median(net("lru")),
            "ratio": med, "min": min(ratios), "max": max(ratios), "reps": reps,
            "status": "met" if med <= 1.5 else "MISSED",
        })
    if a.json:
        print(json.dumps({"rows": rows, "empty_loop_ns": statistics.median(res["empty"]),
                          "python": sys.version.split()[0]}))
        return
    print("### python_hit: the Python package's hit against functools.lru_cache\n")
    print("| figure | measured (median) | baseline (median) | ratio: median [min, max] (reps) | target | status | notes |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['figure']} | {r['measured_ns']:.1f} ns | {r['baseline_ns']:.1f} ns | "
              f"{r['ratio']:.2f}× [{r['min']:.2f}, {r['max']:.2f}] ({r['reps']}) | ≤ 1.5× | "
              f"{r['status']} | per call minus an empty loop over the same keys "
              f"({statistics.median(res['empty']):.1f} ns); Python {sys.version.split()[0]} |")
    print()


if __name__ == "__main__":
    main()
