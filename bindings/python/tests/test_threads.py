"""Single-flight across threads: the GIL is released while waiting, one
compile runs with the GIL held, its exception reaches every caller."""
import threading
import time

import pytest

import ccache

N = 6
WAIT = 60  # seconds: generous, the machine may be loaded


def _wait_for(pred, what):
    deadline = time.monotonic() + WAIT
    while not pred():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.001)  # Python code: needs the GIL the waiters gave up


def _race(c, key, compile_fn):
    results, errors = [None] * N, [None] * N
    start = threading.Barrier(N)

    def run(i):
        start.wait(WAIT)
        try:
            results[i] = c.get_or_compile(key, compile_fn)
        except BaseException as e:  # noqa: BLE001 - the test looks at every one
            errors[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(N)]
    for t in threads:
        t.start()
    return threads, results, errors


def test_waiters_release_the_gil_and_share_one_compile():
    c = ccache.Cache()
    gate = threading.Event()
    compiles = []

    def compile_fn():
        compiles.append(threading.get_ident())
        # Only returns once the main thread, running Python, saw every other
        # thread waiting: impossible if a waiter held the GIL.
        assert gate.wait(WAIT)
        return object()

    threads, results, errors = _race(c, ccache.key("k"), compile_fn)
    _wait_for(lambda: c.stats().waits == N - 1, "N-1 waiters")
    gate.set()
    for t in threads:
        t.join(WAIT)
    assert errors == [None] * N
    assert len(compiles) == 1 and all(r is results[0] for r in results)
    s = c.stats()
    assert (s.compiles, s.waits, s.items, s.leases_out) == (1, N - 1, 1, 0)
    c.close()


def test_exception_reaches_caller_and_every_waiter_nothing_cached():
    c = ccache.Cache()
    gate = threading.Event()

    def failing():
        assert gate.wait(WAIT)
        raise KeyError("no kernel for bf16")

    threads, results, errors = _race(c, ccache.key("bad"), failing)
    _wait_for(lambda: c.stats().waits == N - 1, "N-1 waiters")
    gate.set()
    for t in threads:
        t.join(WAIT)
    assert results == [None] * N
    assert all(type(e) is KeyError and e.args == ("no kernel for bf16",) for e in errors)
    s = c.stats()
    assert (s.compiles, s.compile_failures, s.items) == (1, 1, 0)
    # Not cached: the next call compiles again.
    assert c.get_or_compile(ccache.key("bad"), lambda: "ok") == "ok"
    assert c.stats().compiles == 2
    c.close()


class NeedsKeyword(Exception):
    def __init__(self, *, why):
        super().__init__(f"failed: {why}")


def test_exception_type_that_cannot_be_rebuilt_gives_compile_error_with_message():
    c = ccache.Cache()
    gate = threading.Event()

    def failing():
        assert gate.wait(WAIT)
        raise NeedsKeyword(why="llvm crashed")

    threads, results, errors = _race(c, ccache.key("kw"), failing)
    _wait_for(lambda: c.stats().waits == N - 1, "N-1 waiters")
    gate.set()
    for t in threads:
        t.join(WAIT)
    owners = [e for e in errors if type(e) is NeedsKeyword]
    waiters = [e for e in errors if type(e) is ccache.CompileError]
    assert (len(owners), len(waiters)) == (1, N - 1)
    assert all("failed: llvm crashed" in str(e) for e in waiters)
    assert all(e.__cause__ is owners[0] for e in waiters)
    c.close()


def test_program_level_single_flight_across_threads():
    c = ccache.Cache()
    gate = threading.Event()
    compiles = []
    handles = [None] * N

    def compile_fn():
        compiles.append(1)
        assert gate.wait(WAIT)
        return "native"

    def run(i):
        handles[i] = c.program(ccache.key("p"), compile_fn)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(N)]
    for t in threads:
        t.start()
    _wait_for(lambda: c.stats().program_waits == N - 1, "N-1 program waiters")
    gate.set()
    for t in threads:
        t.join(WAIT)
    assert len(compiles) == 1 and all(h.native == "native" for h in handles)
    for h in handles:
        h.release()
    c.close()


def test_close_while_another_thread_waits_is_refused():
    c = ccache.Cache()
    gate = threading.Event()
    t = threading.Thread(target=lambda: c.get_or_compile(ccache.key(1), lambda: gate.wait(WAIT)))
    t.start()
    _wait_for(lambda: c.stats().compiles == 1, "the compile to start")
    with pytest.raises(ccache.BusyError):
        c.close()
    gate.set()
    t.join(WAIT)
    c.close()
