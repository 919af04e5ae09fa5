"""fork() and multiprocessing: a cache from before fork() refuses clearly in
the child, a new one works; pools with fork and with spawn share a directory
tier and compile once."""
import multiprocessing as mp
import os
import pickle

import pytest

import ccache


class Codec:
    def encode(self, obj):
        return pickle.dumps(obj)

    def decode(self, data):
        return pickle.loads(data)


def test_forked_child_gets_a_clear_error_and_can_open_a_new_cache():
    c = ccache.Cache()
    c.put(ccache.key(1), "parent")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        code = 1
        try:
            try:
                c.fetch(ccache.key(1))
            except ccache.ForkedError as e:
                if "before fork()" in str(e):
                    with ccache.Cache() as d:
                        code = 0 if d.get_or_compile(ccache.key(1), lambda: "child") == "child" else 3
            os.write(w, b"%d" % code)
        finally:
            os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    assert os.read(r, 16) == b"0" and status == 0
    assert c.fetch(ccache.key(1)) == "parent"
    c.close()


def _worker(args):
    path, n = args
    with ccache.Cache(tiers=[ccache.DirectoryTier(path)], codec=Codec(),
                      tier_min_compile_us=0) as c:
        import time

        def compile_fn():
            time.sleep(0.3)  # long enough that the others arrive while it runs
            return ("compiled by", os.getpid())

        p = c.program(ccache.key("shared", n), compile_fn)
        out = (p.native, c.stats().program_compiles)
        p.release()
        return out


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_pool_compiles_once(tmp_path, method):
    ctx = mp.get_context(method)
    with ctx.Pool(3) as pool:
        out = pool.map(_worker, [(str(tmp_path), 7)] * 3, chunksize=1)
    natives = {o[0] for o in out}
    assert len(natives) == 1  # every process got the one compiled program
    assert sum(o[1] for o in out) == 1  # compiled in one process only
