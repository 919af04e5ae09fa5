"""Directory and Redis tiers with a Python codec; corrupt versus failed
here; trust and the safe default."""
import os
import pickle

import pytest

import ccache


def _open(path, codec, **kw):
    return ccache.Cache(tiers=[ccache.DirectoryTier(str(path))], codec=codec,
                        tier_min_compile_us=0, **kw)


def test_directory_tier_serves_a_second_cache(tmp_path, codec):
    with _open(tmp_path, codec, runtime_tag="t1") as a:
        assert a.program(ccache.key("p"), lambda: {"code": 1}).native == {"code": 1}
        assert a.stats().tier_writes == 1
    with _open(tmp_path, codec, runtime_tag="t1") as b:
        p = b.program(ccache.key("p"), lambda: pytest.fail("compiled again"))
        assert p.native == {"code": 1}
        p.release()
        s = b.stats()
        assert (s.tier_hits, s.program_compiles) == (1, 0)
    with _open(tmp_path, codec, runtime_tag="other") as c:  # another runtime tag: a miss
        c.program(ccache.key("p"), lambda: 2).release()
        assert c.stats().program_compiles == 1


def _entry_files(path):
    return [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs
            if not f.startswith(".") and "lock" not in f and "size" not in f]


class FailingCodec:
    def __init__(self, exc):
        self.exc = exc

    def encode(self, obj):
        return pickle.dumps(obj)

    def decode(self, data):
        raise self.exc


def test_corrupt_versus_failed_here(tmp_path, codec):
    with _open(tmp_path, codec) as a:
        a.program(ccache.key("p"), lambda: "x").release()
    n_files = len(_entry_files(tmp_path))
    # A local failure: counted in tier_errors, the entry is kept (the owner
    # reads it twice: before and after taking the compile lock).
    with _open(tmp_path, FailingCodec(MemoryError("no room here"))) as b:
        b.program(ccache.key("p"), lambda: "y").release()
        s = b.stats()
        assert (s.tier_errors, s.tier_corrupt, s.program_compiles) == (2, 0, 1)
        assert isinstance(b.last_codec_error, MemoryError)
    assert len(_entry_files(tmp_path)) == n_files
    # "Corrupt": counted in tier_corrupt, the entry is removed.
    with _open(tmp_path, FailingCodec(ccache.CorruptEntry("not a program"))) as c:
        c.program(ccache.key("p"), lambda: "z").release()
        s = c.stats()
        assert (s.tier_corrupt, s.program_compiles) == (1, 1)


def test_codec_encode_none_skips_the_tier(tmp_path):
    class Skip:
        def encode(self, obj):
            return None

        def decode(self, data):
            raise AssertionError

    with _open(tmp_path, Skip()) as a:
        a.program(ccache.key("p"), lambda: "x").release()
        s = a.stats()
        assert (s.tier_writes, s.tier_errors) == (0, 0)


def test_tiers_need_a_codec_and_belong_to_one_cache(tmp_path, codec):
    t = ccache.DirectoryTier(str(tmp_path))
    with pytest.raises(ValueError):
        ccache.Cache(tiers=[t])
    c = ccache.Cache(tiers=[t], codec=codec)
    with pytest.raises(ValueError):
        ccache.Cache(tiers=[t], codec=codec)
    c.close()


def test_redis_tier_is_refused_without_keys_safe_by_default(redis_server, codec):
    with pytest.raises(ValueError, match="trust_unsigned"):
        ccache.Cache(tiers=[ccache.RedisTier(redis_server)], codec=codec)


def test_redis_tier_with_trust_unsigned(redis_server, codec):
    # Generous timeouts: a loaded CI machine may not schedule the server
    # within the defaults (200 ms connect, 1 s command), and a timed-out
    # write or read is a tier error that compiles again by design.
    def cache():
        tier = ccache.RedisTier(redis_server, prefix="t", connect_timeout_ms=10000,
                                command_timeout_ms=10000)
        return ccache.Cache(tiers=[tier], codec=codec, trust_unsigned=True,
                            tier_min_compile_us=0)
    with cache() as a:
        a.program(ccache.key("r"), lambda: [1, 2, 3]).release()
        sa = a.stats()
        assert (sa.tier_writes, sa.tier_errors) == (1, 0)
    with cache() as b:
        p = b.program(ccache.key("r"),
                      lambda: pytest.fail("compiled again: %r" % (b.stats(),)))
        assert p.native == [1, 2, 3]
        p.release()
        assert b.stats().tier_hits == 1


@pytest.mark.skipif(not ccache.trust_available(), reason="built without libsodium")
def test_signed_entries_trusted_and_rejected(tmp_path, codec, redis_server):
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    ccache.generate_keys("writer", str(keys / "w.sec"), str(keys / "w.pub"))
    ccache.generate_keys("other", str(keys / "o.sec"), str(keys / "o.pub"))

    def cache(**kw):
        return ccache.Cache(tiers=[ccache.RedisTier(redis_server, prefix="s")], codec=codec,
                            tier_min_compile_us=0, **kw)
    with cache(signing_key_file=str(keys / "w.sec")) as w:
        w.program(ccache.key("k"), lambda: "signed").release()
    with cache(trusted_key_files=[str(keys / "w.pub")]) as r:
        p = r.program(ccache.key("k"), lambda: pytest.fail("compiled again"))
        assert p.native == "signed"
        p.release()
    with cache(trusted_keys=[(keys / "o.pub").read_text()]) as r2:
        r2.program(ccache.key("k"), lambda: "mine").release()
        s = r2.stats()
        assert s.tier_rejected >= 1 and s.program_compiles == 1 and s.tier_hits == 0
