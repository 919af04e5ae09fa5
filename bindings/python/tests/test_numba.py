"""ccache.numba: numba's cache=True compiles on ccache, one process after
another: cold then warm, what the key covers (a callee in another module,
globals and closures, code without a source file), cfunc / vectorize /
guvectorize loaded warm, an untested numba refused, the .pth hook and the
CLOSURE_CACHE_NUMBA_* variables (and their deprecated aliases).  Each test
runs real processes (a fresh interpreter per "run"), with the package's .pth
hook installing ccache.numba from CLOSURE_CACHE_NUMBA_DIR, as in production.
Processes racing on one cache: test_numba_race.py; the helpers:
numba_support.py."""
import pytest

import numba  # noqa: E402  (CMake adds this suite only where numba is installed)
from numba_support import STATS, run, write


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
