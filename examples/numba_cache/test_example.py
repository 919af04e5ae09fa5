"""The example's test (ctest python_example): a cold and a warm process on
ccache (every kernel right against NumPy, 6 compiles then 0), and 3
processes racing on an empty ccache directory compiling each function once."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cache_dir, n=1):
    env = dict(os.environ, CLOSURE_CACHE_NUMBA_DIR=str(cache_dir), PYTHONDONTWRITEBYTECODE="1")
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "run.py"), "--json"], cwd=HERE,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(n)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


def test_cold_then_warm(tmp_path):
    (cold,) = run(tmp_path / "c")
    assert cold["ok"] and cold["cache"] == "ccache"
    assert (cold["compiles"], cold["loads"]) == (6, 0)
    (warm,) = run(tmp_path / "c")
    assert warm["ok"] and (warm["compiles"], warm["loads"]) == (0, 5)


def test_three_processes_racing_compile_each_function_once(tmp_path):
    outs = run(tmp_path / "race", n=3)
    assert all(o["ok"] for o in outs)
    assert sum(o["compiles"] for o in outs) == 6
    assert sum(o["loads"] for o in outs) == 10
