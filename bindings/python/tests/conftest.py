"""Fixtures: a private redis-server on a unix socket (skipped when there is
none, an error under CCACHE_TEST_REQUIRE_REDIS=1) and a pickle codec."""
import os
import pickle
import shutil
import socket
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


def _answers_ping(sock):
    """True once the server at unix socket `sock` replies +PONG (1 s bound)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect(sock)
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


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
    # The socket file appears at bind(), before listen(): a connect in that
    # window is refused, and a tier that saw a refusal backs off (tier errors
    # in the test). Ready means the server answered PING.
    deadline = time.monotonic() + 20
    while not _answers_ping(sock):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail("redis-server did not start")
        time.sleep(0.02)
    yield "unix:" + sock
    proc.terminate()
    proc.wait(timeout=20)
