"""A callee edited in another module, then the next process.

In a scratch copy of this example, activations.silu starts with a sign
error; one process runs (and caches) the kernels; silu is fixed in
activations.py only (kernels.py, which holds silu_gate, is untouched); the
next process runs.  With numba's own cache the next process loads
silu_gate, compiled with the old silu, from its cache (kernels.py did not
change: numba#1833) and is still wrong; with ccache.numba silu's code is in
silu_gate's key, so it compiles again and is right.

usage: python3 callee_demo.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BUGGY = "return x / (1.0 + math.exp(x))"
FIXED = "return x / (1.0 + math.exp(-x))"


def run(d, env):
    p = subprocess.run([sys.executable, "run.py", "--json"], cwd=d, env=env, capture_output=True,
                       text=True, timeout=900)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return out


def main():
    for mode in ("numba", "ccache"):
        with tempfile.TemporaryDirectory(prefix="callee-demo-") as tmp:
            d = os.path.join(tmp, "example")
            shutil.copytree(HERE, d, ignore=shutil.ignore_patterns("__pycache__"))
            act = os.path.join(d, "activations.py")
            src = open(act).read()
            assert FIXED in src
            open(act, "w").write(src.replace(FIXED, BUGGY))
            env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
            for k in ("CLOSURE_CACHE_NUMBA_DIR", "CCACHE_NUMBA_DIR", "NUMBA_CACHE_DIR"):
                env.pop(k, None)
            if mode == "numba":
                env["NUMBA_CACHE_DIR"] = os.path.join(tmp, "cache")
            else:
                env["CLOSURE_CACHE_NUMBA_DIR"] = os.path.join(tmp, "cache")
            before = run(d, env)
            open(act, "w").write(src)  # the fix, in activations.py only
            after = run(d, env)
            for when, r in (("silu with the sign error", before), ("silu fixed, next process", after)):
                sg = r["per_function"]["silu_gate"]
                print(f"{mode:<7} {when:<26} silu_gate max|error| {r['max_err']['silu_gate']:.1e} "
                      f"({'right' if r['max_err']['silu_gate'] < 1e-4 else 'WRONG'}); "
                      f"silu_gate compiled {sg[1]}, loaded {sg[0]}")


if __name__ == "__main__":
    main()
