"""N processes racing on an empty cache: numba's own cache against ccache's.

Each mode starts N copies of run.py at once on a fresh cache and reports
the compiles they did together (a function compiled in k processes counts
k) and the wall time until the last one answered:
  numba         numba's cache (NUMBA_CACHE_DIR, one directory for all)
  ccache        ccache.numba, one directory tier for all (CLOSURE_CACHE_NUMBA_DIR)
  ccache-fleet  ccache.numba, each process its own directory and one shared
                Redis (a private redis-server on a unix socket; entries
                unsigned, trust_unsigned: a test set-up)
Then one more process on the warm cache of each mode.

usage: python3 race.py [-n N] [--modes numba,ccache,ccache-fleet] [--bench] [--quick]
  --bench  print bench/RESULTS.md rows instead of the table
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FUNCTIONS = 6  # rmsnorm, softmax, rope, silu_gate, matmul_tile, silu


def answers_ping(sock):
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect(sock)
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start_redis(tmp):
    exe = shutil.which("redis-server")
    if not exe:
        return None, None
    sock = os.path.join(tmp, "redis.sock")
    p = subprocess.Popen([exe, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
                          "--save", "", "--appendonly", "no", "--dir", tmp],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not answers_ping(sock):  # the file exists from bind(), before listen()
        if time.monotonic() > deadline or p.poll() is not None:
            p.kill()
            return None, None
        time.sleep(0.02)
    return p, "unix:" + sock


def env_for(mode, tmp, i, redis):
    env = dict(os.environ)
    for k in ("CLOSURE_CACHE_NUMBA_DIR", "CLOSURE_CACHE_NUMBA_REDIS", "CCACHE_NUMBA_DIR",
              "CCACHE_NUMBA_REDIS", "NUMBA_CACHE_DIR"):
        env.pop(k, None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if mode == "numba":
        env["NUMBA_CACHE_DIR"] = os.path.join(tmp, "numba")
    elif mode == "ccache":
        env["CLOSURE_CACHE_NUMBA_DIR"] = os.path.join(tmp, "ccache")
    else:
        env["CLOSURE_CACHE_NUMBA_DIR"] = os.path.join(tmp, f"own-{i}")
        env["CLOSURE_CACHE_NUMBA_REDIS"] = redis
        env["CLOSURE_CACHE_NUMBA_TRUST_UNSIGNED"] = "1"
    return env


def launch(mode, tmp, n, redis, first=0):
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "run.py"), "--json"], cwd=HERE,
                              env=env_for(mode, tmp, first + i, redis), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(n)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        if p.returncode != 0:
            sys.exit(f"race.py: a {mode} process failed:\n{err}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.perf_counter() - t0
    if not all(o["ok"] for o in outs):
        sys.exit(f"race.py: a {mode} process gave a wrong answer: {outs}")
    if mode != "numba" and not all(o["cache"] == "ccache" for o in outs):
        sys.exit("race.py: ccache.numba was not installed in the children (is the package "
                 "installed in this interpreter's environment?)")
    return {"compiles": sum(o["compiles"] for o in outs), "wall_s": wall,
            "loads": sum(o["loads"] for o in outs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--modes", default="numba,ccache,ccache-fleet")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    n = 3 if a.quick else a.n
    results = {}
    with tempfile.TemporaryDirectory(prefix="numba-race-") as tmp:
        redis_proc, redis = start_redis(tmp)
        try:
            for mode in a.modes.split(","):
                if mode == "ccache-fleet" and not redis:
                    print("race.py: ccache-fleet skipped: redis-server not found", file=sys.stderr)
                    continue
                race = launch(mode, tmp, n, redis)
                warm = launch(mode, tmp, 1, redis, first=n if mode == "ccache-fleet" else 0)
                results[mode] = (race, warm)
        finally:
            if redis_proc:
                redis_proc.terminate()
                redis_proc.wait(timeout=20)
    if a.bench:
        base = results.get("numba")
        print("### numba_race: N processes racing on an empty cache (examples/numba_cache)\n")
        print("| figure | measured (median) | baseline (median) | ratio: median [min, max] (reps) "
              "| target | status | notes |")
        print("|---|---|---|---|---|---|---|")
        for mode, (race, warm) in results.items():
            if mode == "numba":
                continue
            ratio = f"{race['wall_s'] / base[0]['wall_s']:.2f}× wall" if base else ""
            status = "met" if race["compiles"] == FUNCTIONS else "MISSED"
            print(f"| numba: {n} processes racing on an empty cache, SmolLM2-135M's {FUNCTIONS} "
                  f"kernels, {mode} vs numba's own cache | {race['compiles']} compiles, "
                  f"{race['wall_s']:.1f} s | {base[0]['compiles'] if base else '?'} compiles, "
                  f"{base[0]['wall_s'] if base else 0:.1f} s | {ratio} (1) | {FUNCTIONS} compiles "
                  f"| {status} | a warm process after: {warm['compiles']} compiles, "
                  f"{warm['wall_s']:.1f} s (examples/numba_cache/race.py) |")
        print()
        return
    print(f"{n} processes racing on an empty cache, then 1 on the warm cache "
          f"({FUNCTIONS} functions each):")
    print(f"{'cache':<14} {'compiles':>9} {'wall':>8} | {'warm: compiles':>15} {'wall':>7}")
    for mode, (race, warm) in results.items():
        print(f"{mode:<14} {race['compiles']:>9} {race['wall_s']:>7.1f}s | "
              f"{warm['compiles']:>15} {warm['wall_s']:>6.1f}s")


if __name__ == "__main__":
    main()
