"""ccache.numba: numba's cache=True compiles on ccache.  Each test runs
real processes (a fresh interpreter per "run"), with the package's .pth
hook installing ccache.numba from CLOSURE_CACHE_NUMBA_DIR, as in production."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import numba  # noqa: E402  (CMake adds this suite only where numba is installed)

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


def test_cold_then_warm_process(tmp_path):
    write(tmp_path, "k.py", """
        from numba import njit
        @njit(cache=True)
        def add1(x):
            return x + 1
        @njit(cache=True)
        def twice(x):
            return add1(x) * 2
        """)
    code = STATS + """
import json, k, ccache.numba
r = k.twice(20)
s = ccache.numba.stats()  # add1 is compiled nested (while twice is typed): both caches
print(json.dumps({"r": r, "stats": stats(k.twice, k.add1), "compiles": s["program_compiles"],
                  "tier_hits": s["tier_hits"], "path": k.twice.stats.cache_path}))
"""
    cold = run(tmp_path, code, tmp_path / "c")
    assert cold["r"] == 42 and cold["stats"] == {"twice": [0, 1], "add1": [0, 1]}
    assert cold["compiles"] == 2 and cold["path"] == str(tmp_path / "c")
    warm = run(tmp_path, code, tmp_path / "c")
    # twice's code has add1 linked in: add1 itself is neither loaded nor compiled.
    assert warm["r"] == 42 and warm["stats"] == {"twice": [1, 0], "add1": [0, 0]}
    assert (warm["compiles"], warm["tier_hits"]) == (0, 1)
    # Nothing of numba's own cache was written next to the module.
    assert not (tmp_path / "mods" / "__pycache__").exists()


def test_callee_edited_in_another_module_gives_the_right_answer(tmp_path):
    write(tmp_path, "callee.py", """
        from numba import njit
        @njit(cache=True)
        def g(x):
            return x + 1
        """)
    write(tmp_path, "caller.py", """
        from numba import njit
        from callee import g
        @njit(cache=True)
        def f(x):
            return g(x) * 10
        """)
    code = STATS + """
import json, caller
print(json.dumps({"r": caller.f(1), "stats": stats(caller.f)}))
"""
    assert run(tmp_path, code, tmp_path / "c") == {"r": 20, "stats": {"f": [0, 1]}}
    assert run(tmp_path, code, tmp_path / "c") == {"r": 20, "stats": {"f": [1, 0]}}
    write(tmp_path, "callee.py", """
        from numba import njit
        @njit(cache=True)
        def g(x):
            return x + 2
        """)
    # numba's own cache answers 20 here (numba#1833): f's file did not change.
    assert run(tmp_path, code, tmp_path / "c") == {"r": 30, "stats": {"f": [0, 1]}}


def test_global_value_and_closure_are_in_the_key(tmp_path):
    write(tmp_path, "m.py", """
        import os
        from numba import njit
        SCALE = int(os.environ["SCALE"])
        @njit(cache=True)
        def inner(x):
            return x + 1
        def make():
            k = inner
            @njit(cache=True)
            def closure(x):
                return k(x) * SCALE
            return closure
        @njit(cache=True)
        def scaled(x):
            return x * SCALE
        """)
    code = STATS + """
import json, m
c = m.make()
print(json.dumps({"r": [m.scaled(2), c(2)], "stats": stats(m.scaled, c)}))
"""
    env2, env3 = {"SCALE": "2"}, {"SCALE": "3"}
    assert run(tmp_path, code, tmp_path / "c", env2) == {
        "r": [4, 6], "stats": {"scaled": [0, 1], "closure": [0, 1]}}
    # A closure over a jitted function is a hit in the next process (numba#6264).
    assert run(tmp_path, code, tmp_path / "c", env2) == {
        "r": [4, 6], "stats": {"scaled": [1, 0], "closure": [1, 0]}}
    # Another value of the global: compiled again, right answer.
    assert run(tmp_path, code, tmp_path / "c", env3) == {
        "r": [6, 9], "stats": {"scaled": [0, 1], "closure": [0, 1]}}


def test_function_without_a_source_file_is_cached(tmp_path):
    code = STATS + """
import json
from numba import njit
ns = {"njit": njit}
exec("@njit(cache=True)\\ndef h(x):\\n    return x * 3\\n", ns)
print(json.dumps({"r": ns["h"](5), "stats": stats(ns["h"])}))
"""
    assert run(tmp_path, code, tmp_path / "c") == {"r": 15, "stats": {"h": [0, 1]}}
    assert run(tmp_path, code, tmp_path / "c") == {"r": 15, "stats": {"h": [1, 0]}}


def test_cfunc_vectorize_guvectorize(tmp_path):
    write(tmp_path, "u.py", """
        import numpy as np
        from numba import cfunc, vectorize, guvectorize, float64
        @cfunc("float64(float64)", cache=True)
        def cf(x):
            return x * 2.0
        @vectorize(["float64(float64)"], cache=True)
        def vf(x):
            return x + 0.5
        @guvectorize(["void(float64[:], float64[:])"], "(n)->(n)", cache=True)
        def gf(a, out):
            for i in range(a.shape[0]):
                out[i] = a[i] * 3.0
        """)
    code = """
import json, numpy as np, u, ccache.numba
a = np.arange(3.0)
s = ccache.numba.installed().stats()
print(json.dumps({"r": [u.cf.ctypes(2.0), list(u.vf(a)), list(u.gf(a))],
                  "cf_hits": u.cf.cache_hits, "compiles": s.program_compiles,
                  "tier_hits": s.tier_hits, "tier_writes": s.tier_writes}))
"""
    # Four entries: cf, vf's kernel, gf's kernel and gf's wrapper library.
    cold = run(tmp_path, code, tmp_path / "c")
    assert cold["r"] == [4.0, [0.5, 1.5, 2.5], [0.0, 3.0, 6.0]] and cold["cf_hits"] == 0
    assert (cold["tier_hits"], cold["tier_writes"]) == (0, 4)
    warm = run(tmp_path, code, tmp_path / "c")
    assert warm["r"] == cold["r"] and warm["cf_hits"] == 1
    assert (warm["compiles"], warm["tier_hits"], warm["tier_writes"]) == (0, 4, 0)


RACE_MOD = """
    from numba import njit
    @njit(cache=True)
    def a(x):
        return x + 1
    @njit(cache=True)
    def b(x):
        return a(x) * 2
    @njit(cache=True)
    def c(x):
        return b(x) - a(x)
    """


def test_processes_racing_on_an_empty_cache_compile_each_function_once(tmp_path):
    write(tmp_path, "race.py", RACE_MOD)
    code = STATS + """
import json, race
r = race.c(1)
print(json.dumps({"r": r, "stats": stats(race.a, race.b, race.c)}))
"""
    procs = [run(tmp_path, code, tmp_path / "c", wait=False) for _ in range(4)]
    outs = [finish(p) for p in procs]
    assert all(o["r"] == 2 for o in outs)
    misses = {f: sum(o["stats"][f][1] for o in outs) for f in "abc"}
    hits = {f: sum(o["stats"][f][0] for o in outs) for f in "abc"}
    assert misses == {"a": 1, "b": 1, "c": 1}, outs
    # The three others load c, which has a and b linked in.
    assert hits == {"a": 0, "b": 0, "c": 3}, outs


def test_numba_lock_is_not_held_while_waiting_for_another_process(tmp_path):
    write(tmp_path, "slow.py", """
        from numba import njit
        @njit(cache=True)
        def slow(x):
            return x + 7
        @njit(cache=True)
        def other(x):
            return x - 7
        @njit
        def warm(x):
            return x
        """)
    flags = {"FLAGS": str(tmp_path)}
    # The first process's compile of slow() (inside numba's lock and the
    # directory tier's compile lock) lasts until the second process has
    # compiled other(): a numba event listener waits for the file "release".
    first = run(tmp_path, """
import json, os, time, slow
from numba.core import event as ev
flags = os.environ["FLAGS"]
class Hold(ev.Listener):
    def on_start(self, event):
        open(os.path.join(flags, "compiling"), "w").close()
        deadline = time.monotonic() + 240
        while not os.path.exists(os.path.join(flags, "release")) and time.monotonic() < deadline:
            time.sleep(0.02)
    def on_end(self, event):
        pass
ev.register("numba:compile", Hold())
print(json.dumps({"r": slow.slow(1), "stats": [sum(slow.slow.stats.cache_hits.values()),
                                               sum(slow.slow.stats.cache_misses.values())]}))
""", tmp_path / "c", flags, wait=False)
    deadline = time.monotonic() + TIMEOUT
    while not (tmp_path / "compiling").exists():
        if time.monotonic() > deadline or first.poll() is not None:
            pytest.fail("the first process never started compiling")
        time.sleep(0.05)
    # The second process: a thread asks for slow() and waits for the first
    # process's compile; meanwhile the main thread compiles other(), which
    # needs numba's lock.  Were the lock held while waiting, other() could
    # only compile after the waiter gave up (lock_wait_ms, 60 s) and compiled
    # slow() itself: a miss below.
    second = run(tmp_path, """
import json, os, threading, time, slow, ccache.numba
flags = os.environ["FLAGS"]
slow.warm(1)  # numba's first compile of the process (its set-up) is done here
done = {}
def waiter():
    done["slow"] = slow.slow(1)
t = threading.Thread(target=waiter)
t.start()
deadline = time.monotonic() + 120
while ccache.numba.installed().stats().program_misses < 1 and time.monotonic() < deadline:
    time.sleep(0.01)  # the waiter's lookup has begun; next it waits on the compile lock
time.sleep(1)
t0 = time.monotonic()
r = slow.other(10)
took = time.monotonic() - t0
open(os.path.join(flags, "release"), "w").close()
t.join()
print(json.dumps({"other": r, "other_s": took, "slow": done["slow"],
                  "stats": [sum(slow.slow.stats.cache_hits.values()),
                            sum(slow.slow.stats.cache_misses.values())]}))
""", tmp_path / "c", flags, wait=False)
    s = finish(second)
    f = finish(first)
    assert f == {"r": 8, "stats": [0, 1]}
    assert s["other"] == 3 and s["slow"] == 8
    assert s["stats"] == [1, 0]  # slow() was loaded, not compiled, in the second process
    assert s["other_s"] < 50


def test_untested_numba_version_is_refused(monkeypatch):
    import ccache.numba
    monkeypatch.setattr(numba, "__version__", "0.99.0")
    with pytest.raises(RuntimeError, match="not a tested version"):
        ccache.numba.install("/nonexistent-never-used")


def test_pth_hook_does_nothing_without_the_variable(tmp_path):
    code = """
import json, numba
from numba.core import dispatcher
print(json.dumps({"mod": dispatcher.Dispatcher.enable_caching.__module__,
                  "ccache_imported": "ccache" in __import__("sys").modules}))
"""
    assert run(tmp_path, code) == {"mod": "numba.core.dispatcher", "ccache_imported": False}
    assert run(tmp_path, code, tmp_path / "c") == {"mod": "ccache.numba", "ccache_imported": True}


def test_variables_and_their_deprecated_aliases(tmp_path):
    """CLOSURE_CACHE_NUMBA_* are read, CCACHE_NUMBA_* too when the new name is
    unset (the new one wins); install() exports the new names only."""
    code = """
import json, os, numba, ccache.numba
from numba.core import dispatcher
c = ccache.numba.installed()
print(json.dumps({"mod": dispatcher.Dispatcher.enable_caching.__module__,
                  "where": ccache.numba._state.where if c else None,
                  "wait": ccache.numba._state.options["lock_wait_ms"] if c else None,
                  "env": sorted(k for k in os.environ if "NUMBA_" in k and "CACHE" in k)}))
"""
    new = run(tmp_path, code, env_extra={"CLOSURE_CACHE_NUMBA_DIR": str(tmp_path / "new"),
                                         "CLOSURE_CACHE_NUMBA_LOCK_WAIT_MS": "1234"})
    assert new == {"mod": "ccache.numba", "where": str(tmp_path / "new"), "wait": 1234,
                   "env": ["CLOSURE_CACHE_NUMBA_DIR", "CLOSURE_CACHE_NUMBA_LOCK_WAIT_MS"]}
    old = run(tmp_path, code, env_extra={"CCACHE_NUMBA_DIR": str(tmp_path / "old"),
                                         "CCACHE_NUMBA_LOCK_WAIT_MS": "99"})
    assert old == {"mod": "ccache.numba", "where": str(tmp_path / "old"), "wait": 99,
                   "env": ["CCACHE_NUMBA_DIR", "CCACHE_NUMBA_LOCK_WAIT_MS"]}
    both = run(tmp_path, code, env_extra={"CCACHE_NUMBA_DIR": str(tmp_path / "old"),
                                          "CLOSURE_CACHE_NUMBA_DIR": str(tmp_path / "new")})
    assert both["where"] == str(tmp_path / "new")
    # install() exports the new names (for subprocesses) and drops the old ones.
    exported = run(tmp_path, """
import json, os, ccache.numba
ccache.numba.install(os.environ["WHERE"], lock_wait_ms=500)
print(json.dumps(sorted((k, v) for k, v in os.environ.items() if "CACHE_NUMBA_" in k)))
""", env_extra={"WHERE": str(tmp_path / "x"), "CCACHE_NUMBA_REDIS_PREFIX": "stale"})
    assert exported == [["CLOSURE_CACHE_NUMBA_DIR", str(tmp_path / "x")],
                        ["CLOSURE_CACHE_NUMBA_LOCK_WAIT_MS", "500"]]


def test_cfunc_racing_processes_compile_once(tmp_path):
    write(tmp_path, "cf.py", """
        from numba import cfunc
        @cfunc("int64(int64)", cache=True)
        def triple(x):
            return 3 * x
        """)
    code = """
import json, cf
print(json.dumps({"r": cf.triple.ctypes(5), "hits": cf.triple.cache_hits}))
"""
    procs = [run(tmp_path, code, tmp_path / "c", wait=False) for _ in range(3)]
    outs = [finish(p) for p in procs]
    assert [o["r"] for o in outs] == [15, 15, 15]
    assert sorted(o["hits"] for o in outs) == [0, 1, 1]  # one process compiled


UFUNC_MOD = """
    from numba import vectorize, guvectorize
    @vectorize(["float64(float64)"], cache=True)
    def vf(x):
        return x + 0.5
    @guvectorize(["void(float64[:], float64[:])"], "(n)->(n)", cache=True)
    def gf(a, out):
        for i in range(a.shape[0]):
            out[i] = a[i] * 3.0
    """

# Counts numba's compiles of a ufunc kernel (compile_extra) and of a gufunc
# wrapper (_build_wrapper) in this process, each made slow (1 s) so that
# racing processes overlap; a file barrier starts the imports together.
COUNT_AND_BARRIER = """
import json, os, time
from numba.core import compiler
from numba.np.ufunc import wrappers
counts = {"kernel": 0, "wrapper": 0}
_ce, _bw = compiler.compile_extra, wrappers._GufuncWrapper._build_wrapper
def compile_extra(*a, **k):
    counts["kernel"] += 1
    time.sleep(1)
    return _ce(*a, **k)
def build_wrapper(self, *a, **k):
    counts["wrapper"] += 1
    time.sleep(1)
    return _bw(self, *a, **k)
compiler.compile_extra = compile_extra
wrappers._GufuncWrapper._build_wrapper = build_wrapper
flags, n = os.environ["FLAGS"], int(os.environ["N"])
open(os.path.join(flags, "ready-%d" % os.getpid()), "w").close()
deadline = time.monotonic() + 240
while (sum(f.startswith("ready-") for f in os.listdir(flags)) < n
       and time.monotonic() < deadline):
    time.sleep(0.01)
"""


def test_vectorize_guvectorize_racing_processes_compile_once(tmp_path):
    write(tmp_path, "u.py", UFUNC_MOD)
    (tmp_path / "flags").mkdir()
    env = {"FLAGS": str(tmp_path / "flags"), "N": "3"}
    code = COUNT_AND_BARRIER + """
import numpy as np, u
a = np.arange(3.0)
print(json.dumps({"r": [list(u.vf(a)), list(u.gf(a))], "counts": counts}))
"""
    procs = [run(tmp_path, code, tmp_path / "c", env, wait=False) for _ in range(3)]
    outs = [finish(p) for p in procs]
    assert all(o["r"] == [[0.5, 1.5, 2.5], [0.0, 3.0, 6.0]] for o in outs), outs
    # One compile per machine: vf's kernel and gf's kernel once, gf's wrapper once.
    total = {k: sum(o["counts"][k] for o in outs) for k in ("kernel", "wrapper")}
    assert total == {"kernel": 2, "wrapper": 1}, outs
    # A warm process compiles nothing.
    (tmp_path / "flags" / "warm").mkdir()
    warm = run(tmp_path, code, tmp_path / "c", {"FLAGS": str(tmp_path / "flags" / "warm"),
                                               "N": "1"})
    assert warm["counts"] == {"kernel": 0, "wrapper": 0}


def test_nested_callee_does_not_wait_for_another_process(tmp_path):
    write(tmp_path, "nest.py", """
        from numba import njit
        @njit(cache=True)
        def g(x):
            return x + 7
        @njit(cache=True)
        def f(x):
            return g(x) * 2
        @njit
        def warm(x):
            return x
        """)
    flags = {"FLAGS": str(tmp_path)}
    # The first process compiles g() at top level and holds it (numba's
    # lock and the directory tier's compile lock for g) for up to 90 s,
    # until the file "release" appears.
    first = run(tmp_path, """
import json, os, time, nest
from numba.core import event as ev
flags = os.environ["FLAGS"]
class Hold(ev.Listener):
    def on_start(self, event):
        open(os.path.join(flags, "compiling"), "w").close()
        deadline = time.monotonic() + 90
        while not os.path.exists(os.path.join(flags, "release")) and time.monotonic() < deadline:
            time.sleep(0.02)
    def on_end(self, event):
        pass
ev.register("numba:compile", Hold())
print(json.dumps({"r": nest.g(1), "g": [sum(nest.g.stats.cache_hits.values()),
                                        sum(nest.g.stats.cache_misses.values())]}))
""", tmp_path / "c", flags, wait=False)
    deadline = time.monotonic() + TIMEOUT
    while not (tmp_path / "compiling").exists():
        if time.monotonic() > deadline or first.poll() is not None:
            pytest.fail("the first process never started compiling")
        time.sleep(0.05)
    # The second process compiles f(), whose typing compiles g() (nested,
    # numba's lock held).  It must not wait for the first process's g():
    # it compiles g() itself.  (Its tier waits up to 200 s, so a wait would
    # last until the first process lets go.)
    second = run(tmp_path, """
import json, os, time, ccache.numba, nest
ccache.numba.install(os.environ["CLOSURE_CACHE_NUMBA_DIR"], lock_wait_ms=200000)
nest.warm(1)  # numba's first compile of the process (its set-up) is done here
t0 = time.monotonic()
r = nest.f(1)
took = time.monotonic() - t0
open(os.path.join(os.environ["FLAGS"], "release"), "w").close()
st = lambda fn: [sum(fn.stats.cache_hits.values()), sum(fn.stats.cache_misses.values())]
print(json.dumps({"r": r, "took": took, "f": st(nest.f), "g": st(nest.g)}))
""", tmp_path / "c", flags, wait=False)
    s = finish(second)
    f = finish(first)
    assert f == {"r": 8, "g": [0, 1]}
    assert (s["r"], s["f"], s["g"]) == (16, [0, 1], [0, 1]), s
    assert s["took"] < 60, s


def test_environment_mistakes_name_the_variable(tmp_path, monkeypatch):
    # install_from_env's errors speak of the variables a user set, not of
    # install()'s keyword arguments.
    import ccache.numba as cn
    for k in ("DIR", "REDIS", "MAX_BYTES", "TRUSTED_KEY_FILES", "SIGNING_KEY_FILE",
              "TRUST_UNSIGNED"):
        monkeypatch.delenv("CLOSURE_CACHE_NUMBA_" + k, raising=False)
        monkeypatch.delenv("CCACHE_NUMBA_" + k, raising=False)
    monkeypatch.setenv("CLOSURE_CACHE_NUMBA_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("CLOSURE_CACHE_NUMBA_MAX_BYTES", "10MB")
    with pytest.raises(ValueError, match=r"CLOSURE_CACHE_NUMBA_MAX_BYTES='10MB': not a whole"):
        cn.install_from_env()
    monkeypatch.delenv("CLOSURE_CACHE_NUMBA_MAX_BYTES")
    monkeypatch.delenv("CLOSURE_CACHE_NUMBA_DIR")
    monkeypatch.setenv("CLOSURE_CACHE_NUMBA_REDIS", "unix:" + str(tmp_path / "none.sock"))
    with pytest.raises(ValueError) as e:
        cn.install_from_env()
    assert "CLOSURE_CACHE_NUMBA_TRUSTED_KEY_FILES" in str(e.value)
    assert "CLOSURE_CACHE_NUMBA_TRUST_UNSIGNED=1" in str(e.value)
    assert "trust_unsigned=True" not in str(e.value)
    assert cn.installed() is None
