"""ccache.numba: processes racing on one cache compile each function once
(@njit, @cfunc, @vectorize and @guvectorize: each kernel and the gufunc
wrapper once in all), numba's lock is not held while waiting for another
process's compile, and a callee compiled while its caller is typed does not
wait for another process (it compiles it itself).  Each test runs real
processes (a fresh interpreter per "run"), with the package's .pth hook
installing ccache.numba from CLOSURE_CACHE_NUMBA_DIR, as in production.
One process after another: test_numba.py; the helpers: numba_support.py."""
import time

import pytest

import numba  # noqa: F401  (CMake adds this suite only where numba is installed)
from numba_support import STATS, TIMEOUT, finish, run, write


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
