"""Run Debian's installed numba cache tests with ccache.numba installed in
every process they start, and compare the outcome of each test with
expected.txt (any change fails: a newly passing test too, so that the list
stays true).

Before each test, ccache.numba is installed on a fresh directory (the tests
expect an empty cache at their start, as numba's own tests get one in a
fresh temporary directory); install() exports CLOSURE_CACHE_NUMBA_DIR, so the
subprocesses and multiprocessing workers the test starts install the same
cache through the package's .pth hook.

Helpers of numba's tests count numba's own files: check_pycache (the
index and data files in __pycache__), check_later_mtimes (their
modification times) and, for the ufunc tests, check_cache_saved /
check_cache_loaded (numba's file-cache debug lines).  ccache.numba writes none of them, so by default they
are replaced by no-ops here, and the behavioural assertions of the same tests
(results, hit and miss counts, warnings, subprocesses, pools) decide; with
--file-checks they stay (README.md lists what fails then, and why).

usage: python3 run_numba_tests.py [--write] [--file-checks] [--verbose] [MODULE ...]
  default modules: numba.tests.test_caching numba.tests.test_parfors_caching
                   numba.tests.test_threadsafety numba.tests.npyufunc.test_caching
  --write    rewrite the expected list from this run instead of comparing
"""
import os
import shutil
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "expected.txt")
if "--file-checks" in sys.argv:
    EXPECTED = os.path.join(HERE, "expected-file-checks.txt")
MODULES = ["numba.tests.test_caching", "numba.tests.test_parfors_caching",
           "numba.tests.test_threadsafety", "numba.tests.npyufunc.test_caching"]


class Result(unittest.TextTestResult):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.outcomes = {}
        self.base = tempfile.mkdtemp(prefix="ccache-numba-suite-")
        self.n = 0

    def startTest(self, test):
        import ccache.numba
        self.n += 1
        ccache.numba.install(os.path.join(self.base, str(self.n)))
        super().startTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes[test.id()] = "pass"

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes[test.id()] = "fail"

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes[test.id()] = "error"

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes[test.id()] = "skip"

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.outcomes[test.id()] = "xfail"

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.outcomes[test.id()] = "xpass"


def read_expected():
    out = {}
    with open(EXPECTED, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                test, outcome = line.split()[:2]
                out[test] = outcome
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    write = "--write" in sys.argv
    modules = args or MODULES
    import numba  # noqa: F401  (the .pth hook is not needed in this process)
    import ccache.numba  # noqa: F401

    if "--file-checks" not in sys.argv:
        from numba.tests import test_caching

        def no_file_count(self, n):
            pass  # numba's own index/data files: ccache.numba writes none

        def no_mtimes(self, mtimes_old):
            pass

        test_caching.BaseCacheTest.check_pycache = no_file_count
        test_caching.TestCacheWithCpuSetting.check_later_mtimes = no_mtimes
        # The ufunc cache tests count numba's "[cache] data saved/loaded"
        # debug lines (NUMBA_DEBUG_CACHE, printed by numba's file cache).
        from numba.tests.npyufunc import test_caching as ufunc_caching

        def no_log_count(self, cachelog, count):
            pass

        ufunc_caching.UfuncCacheTest.check_cache_saved = no_log_count
        ufunc_caching.UfuncCacheTest.check_cache_loaded = no_log_count
    suite = unittest.defaultTestLoader.loadTestsFromNames(modules)
    t0 = time.monotonic()
    runner = unittest.TextTestRunner(resultclass=Result, verbosity=2 if "--verbose" in sys.argv else 1,
                                     stream=sys.stderr)
    result = runner.run(suite)
    took = time.monotonic() - t0
    shutil.rmtree(result.base, ignore_errors=True)  # every test's cache directory (~4 MB a run)
    got = result.outcomes
    counts = {}
    for v in got.values():
        counts[v] = counts.get(v, 0) + 1
    print(f"numba tests with ccache.numba: {len(got)} tests in {took:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if write:
        old = read_expected() if os.path.exists(EXPECTED) else {}
        with open(EXPECTED, "w", encoding="utf-8") as f:
            f.write("# numba tests with ccache.numba installed: test id, outcome.  Reasons for\n"
                    "# every outcome other than pass: README.md in this directory.\n")
            for t in sorted(got):
                f.write(f"{t} {got[t]}\n")
        changed = sorted(t for t in got if old.get(t) != got[t])
        print(f"wrote {EXPECTED}; changed: {changed}")
        return 0
    want = {t: o for t, o in read_expected().items() if t.rsplit(".", 2)[0] in modules
            or any(t.startswith(m + ".") for m in modules)}
    diff = [(t, want.get(t), got.get(t)) for t in sorted(set(want) | set(got))
            if want.get(t) != got.get(t)]
    for t, w, g in diff:
        print(f"CHANGED: {t}: expected {w}, got {g}")
    if diff:
        print(f"{len(diff)} outcomes differ from {EXPECTED}")
        return 1
    print(f"every outcome as in {EXPECTED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
