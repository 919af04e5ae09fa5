"""One process of the example: run SmolLM2-135M's kernels once on a decode
step's shapes, check each against NumPy, and report numba's compile counts.

    python3 run.py            # the cache as the environment sets it up:
                              #   CLOSURE_CACHE_NUMBA_DIR / CLOSURE_CACHE_NUMBA_REDIS: ccache
                              #   (the package's .pth hook installs it),
                              #   else numba's own cache (NUMBA_CACHE_DIR)
    python3 run.py --json     # one JSON line (race.py reads it)
"""
import json
import sys
import time

t_start = time.perf_counter()
import numpy as np  # noqa: E402

import kernels  # noqa: E402
from smollm2_config import HIDDEN, INTERMEDIATE, N_HEADS  # noqa: E402

TOKENS = 8


def main():
    rng = np.random.default_rng(0)
    f32 = np.float32
    x = rng.standard_normal((TOKENS, HIDDEN)).astype(f32)
    w = rng.standard_normal(HIDDEN).astype(f32)
    scores = rng.standard_normal((N_HEADS * TOKENS, TOKENS)).astype(f32)
    q = rng.standard_normal((TOKENS, N_HEADS, HIDDEN // N_HEADS)).astype(f32)
    g = rng.standard_normal((TOKENS, INTERMEDIATE)).astype(f32)
    u = rng.standard_normal((TOKENS, INTERMEDIATE)).astype(f32)
    a = rng.standard_normal((TOKENS, HIDDEN)).astype(f32)
    b = rng.standard_normal((HIDDEN, 64)).astype(f32)

    errs = {}
    errs["rmsnorm"] = np.abs(kernels.rmsnorm(x, w) - kernels.reference("rmsnorm", x, w)).max()
    errs["softmax"] = np.abs(kernels.softmax(scores) - kernels.reference("softmax", scores)).max()
    errs["rope"] = np.abs(kernels.rope(q, 5) - kernels.reference("rope", q, 5)).max()
    errs["silu_gate"] = np.abs(kernels.silu_gate(g, u) - kernels.reference("silu_gate", g, u)).max()
    out = np.zeros((TOKENS, 64), f32)
    for j0 in range(0, 64, 32):
        kernels.matmul_tile(a, b, out, 0, j0, 32)
    errs["matmul_tile"] = np.abs(out - a @ b).max() / np.abs(a @ b).max()
    wall = time.perf_counter() - t_start

    fns = [kernels.rmsnorm, kernels.softmax, kernels.rope, kernels.silu_gate,
           kernels.matmul_tile, kernels.silu]
    rows = {f.__name__: (sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values()))
            for f in fns}
    cache = "ccache" if "ccache.numba" in sys.modules else "numba"
    res = {"cache": cache, "compiles": sum(m for _, m in rows.values()),
           "loads": sum(h for h, _ in rows.values()), "wall_s": round(wall, 3),
           "max_err": {k: float(v) for k, v in errs.items()}, "per_function": rows,
           "ok": all(v < 1e-4 for v in errs.values())}
    if "--json" in sys.argv:
        print(json.dumps(res))
        return
    print(f"cache: {cache} ({kernels.rmsnorm.stats.cache_path})")
    print(f"{'function':<12} {'compiled':>8} {'loaded':>7}")
    for name, (h, m) in rows.items():
        print(f"{name:<12} {m:>8} {h:>7}")
    print("max |error| vs NumPy: " + ", ".join(f"{k} {v:.1e}" for k, v in errs.items()))
    print(f"compiles: {res['compiles']}, loads: {res['loads']}, "
          f"process wall time to the last answer: {wall:.2f} s")
    if not res["ok"]:
        sys.exit("WRONG ANSWER")


if __name__ == "__main__":
    main()
