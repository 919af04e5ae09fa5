"""Helpers of the ccache.numba tests (test_numba.py, test_numba_race.py):
run code in a fresh interpreter with ccache.numba installed from
CLOSURE_CACHE_NUMBA_DIR by the package's .pth hook, as in production, and
write the modules it imports."""
import json
import os
import subprocess
import sys
import textwrap

TIMEOUT = 300  # seconds per process: numba compiles are slow on a loaded machine


def run(tmp_path, code, cache_dir=None, env_extra=None, wait=True):
    """Run *code* in a new interpreter in tmp_path/mods; returns its JSON line."""
    mods = tmp_path / "mods"
    mods.mkdir(exist_ok=True)
    env = dict(os.environ)
    for k in ("CLOSURE_CACHE_NUMBA_DIR", "CLOSURE_CACHE_NUMBA_REDIS", "CCACHE_NUMBA_DIR",
              "CCACHE_NUMBA_REDIS", "NUMBA_CACHE_DIR"):
        env.pop(k, None)
    env["PYTHONPATH"] = str(mods)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if cache_dir:
        env["CLOSURE_CACHE_NUMBA_DIR"] = str(cache_dir)
    env.update(env_extra or {})
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=mods, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return p
    return finish(p)


def finish(p):
    out, err = p.communicate(timeout=TIMEOUT)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def write(tmp_path, name, text):
    mods = tmp_path / "mods"
    mods.mkdir(exist_ok=True)
    (mods / name).write_text(textwrap.dedent(text))


STATS = """
def stats(*fns):
    return {f.__name__: [sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values())]
            for f in fns}
"""
