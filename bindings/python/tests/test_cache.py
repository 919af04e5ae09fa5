"""The Cache API: keys, closures, programs, bounds, stats, events, close."""
import gc
import weakref

import pytest

import ccache


class Obj:
    """A weak-referenceable stand-in for a compiled closure or program."""

    def __init__(self, name):
        self.name = name


def test_key_and_fingerprint_roundtrip():
    k = ccache.key("matmul", (128, 64), 1.5, None, True, b"\x01")
    assert ccache.Key(k.hex()) == k and ccache.Key(bytes(k)) == k
    assert len(bytes(k)) == 16 and not k.strong
    assert k != ccache.key("matmul", (128, 64), 1.5, None, True, b"\x02")
    assert hash(k) == hash(ccache.Key(bytes(k)))
    # Types are framed: the string "1" and the int 1 differ, a tuple and its items differ.
    assert ccache.key("1") != ccache.key(1)
    assert ccache.key((1, 2)) != ccache.key(1, 2)
    f = ccache.Fingerprint().str("op").shape(3, [2, 3])
    g = f.copy()
    assert f.u64(1).final() != g.u64(2).final()
    s = ccache.key("x", strong=True)
    assert s.strong and len(bytes(s)) == 32 and ccache.Key(bytes(s)) == s
    import pickle
    assert pickle.loads(pickle.dumps(k)) == k
    with pytest.raises(TypeError):
        ccache.key(object())


def test_get_or_compile_compiles_once_and_counts():
    with ccache.Cache() as c:
        k = ccache.key("a")
        calls = []
        assert c.get_or_compile(k, lambda: calls.append(1) or "A") == "A"
        assert c.get_or_compile(k, lambda: calls.append(1) or "B") == "A"
        assert c.fetch(k) == "A"
        s = c.stats()
        assert (len(calls), s.hits, s.misses, s.compiles, s.items, s.leases_out) == (1, 2, 1, 1, 1, 0)


def test_stats_has_every_field_of_the_library():
    """Stats mirrors ccache_stats from the library's own field list: the
    read side's fields (the last ones) are there, with their values."""
    with ccache.Cache() as c:
        s = c.stats()
        assert len(s) == 45
        assert s.read_side in (1, 2)  # CCACHE_READ_SIDE_MEMBARRIER, _FENCED
        assert s.reader_blocks >= 0 and s.heavy_barriers >= 0


def test_fetch_put_remove_clear_and_default():
    c = ccache.Cache()
    k1, k2 = ccache.key(1), ccache.key(2)
    assert c.fetch(k1) is None and c.fetch(k1, "d") == "d"
    c.put(k1, "one")
    c.put(k2, "two")
    assert (c.fetch(k1), c.fetch(k2)) == ("one", "two")
    assert c.remove(k1) is True and c.remove(k1) is False
    c.clear()
    s = c.stats()
    assert (s.items, s.removed, s.cleared, s.inserts) == (0, 1, 1, 2)
    c.close()
    with pytest.raises(ccache.ClosedError):
        c.fetch(k1)
    c.close()  # a second close does nothing


def test_bounds_as_keywords_and_set_limits():
    c = ccache.Cache(max_items=2)
    assert c.limits == {"max_items": 2, "ttl_ms": None, "max_cost_bytes": None}
    for i in range(3):
        c.put(ccache.key(i), i)
    s = c.stats()
    assert (s.items, s.evicted_capacity) == (2, 1)
    assert c.fetch(ccache.key(0)) is None  # FIFO: the oldest left
    c.set_limits(max_items=1)
    assert c.stats().items == 1
    c.set_limits(max_items=None, ttl_ms=60000)
    assert c.limits == {"max_items": None, "ttl_ms": 60000, "max_cost_bytes": None}
    with pytest.raises(ValueError):
        c.set_limits(max_items=0)
    with pytest.raises(ValueError):
        ccache.Cache(max_items=0)
    c.close()


def test_last_holder_drops_the_reference():
    c = ccache.Cache()
    k = ccache.key("obj")
    o = Obj("closure")
    ref = weakref.ref(o)
    c.put(k, o)
    del o
    gc.collect()
    got = c.fetch(k)
    assert got is ref()
    c.remove(k)
    assert ref() is got  # we still hold it
    del got
    gc.collect()
    assert ref() is None  # the cache dropped its reference when the entry left


def test_program_handles_and_closure_over_program():
    c = ccache.Cache()
    pk = ccache.key("program")
    native = Obj("native")
    ref = weakref.ref(native)
    p = c.program(pk, lambda: native, cost=100)
    del native
    assert p.native is ref()
    p2 = c.program_fetch(pk)
    assert p2.native is p.native
    p2.release()
    ck = ccache.key("site", pk)

    def compile_closure():
        return Obj("closure"), c.program(pk, lambda: pytest.fail("compiled twice"))

    cl = c.get_or_compile(ck, compile_closure)
    s = c.stats()
    assert (s.program_compiles, s.programs, s.cost_bytes, s.compiles) == (1, 1, 100, 1)
    p.release()
    with pytest.raises(ValueError):
        p.native
    c.remove(ck)
    del cl
    gc.collect()
    assert ref() is None
    assert c.stats().programs == 0
    c.close()


def test_close_refuses_while_a_handle_is_out():
    c = ccache.Cache()
    p = c.intern(ccache.key(1), "n")
    with pytest.raises(ccache.BusyError):
        c.close()
    p.release()
    c.close()


def test_event_hook_is_a_callable():
    events = []
    c = ccache.Cache(on_event=events.append, max_items=1)
    c.get_or_compile(ccache.key(1), lambda: 1)
    c.get_or_compile(ccache.key(2), lambda: 2)
    kinds = [e.kind for e in events]
    assert kinds.count("compile_start") == 2 and kinds.count("compile_end") == 2
    ev = [e for e in events if e.kind == "evict"]
    assert len(ev) == 1 and ev[0].cause == "capacity" and ev[0].key == ccache.key(1)
    c.close()


def test_strong_cache_takes_strong_keys_only():
    c = ccache.Cache(key_mode="strong")
    k = ccache.key("s", strong=True)
    assert c.get_or_compile(k, lambda: "S") == "S" and c.fetch(k) == "S"
    with pytest.raises(ValueError):
        c.fetch(ccache.key("s"))
    c.close()


def test_compile_asking_its_own_key_is_a_deadlock_error():
    c = ccache.Cache()
    k = ccache.key("self")
    with pytest.raises(ccache.DeadlockError):
        c.get_or_compile(k, lambda: c.get_or_compile(k, lambda: 1))
    assert c.stats().items == 0
    c.close()
