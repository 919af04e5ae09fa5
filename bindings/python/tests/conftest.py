"""Fixtures: a private redis-server on a unix socket (skipped when there is
none, an error under CCACHE_TEST_REQUIRE_REDIS=1) and a pickle codec."""
import os
import pickle
import shutil
import subprocess
import time

import pytest

import ccache


class PickleCodec:
    """encode(obj) -> bytes; decode(bytes) -> obj; corrupt bytes raise CorruptEntry."""

    def encode(self, obj):
        return pickle.dumps(obj)

    def decode(self, data):
        try:
            return pickle.loads(data)
        except pickle.UnpicklingError as e:
            raise ccache.CorruptEntry(str(e)) from e


@pytest.fixture
def codec():
    return PickleCodec()


@pytest.fixture
def redis_server(tmp_path):
    exe = shutil.which("redis-server")
    if not exe:
        if os.environ.get("CCACHE_TEST_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server not found and CCACHE_TEST_REQUIRE_REDIS=1")
        pytest.skip("redis-server not found (apt-get install redis-server)")
    sock = str(tmp_path / "redis.sock")
    proc = subprocess.Popen(
        [exe, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not os.path.exists(sock):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail("redis-server did not start")
        time.sleep(0.02)
    yield "unix:" + sock
    proc.terminate()
    proc.wait(timeout=20)
