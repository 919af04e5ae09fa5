"""fleet_measure.py - run a measured fleet on this machine: S local
redis-server instances (127.0.0.1, free ports, a scratch directory, stopped
after) and F kernel_jit processes started together, each walking the same K
kernels through the Redis tier.  Measured on each server with INFO:
commandstats, total_net_input_bytes / total_net_output_bytes and
connected_clients; on each process with its --json report.

Used by fleet_model.py validate (fleet/validation.py); Python 3 standard
library only.  The INFO requests go over one socket per server held for the
whole run, so the measurement's own bytes (its requests and replies,
counted here) and its own connection are taken out of the server's figures
exactly.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time


class Info:
    """One connection to a server for INFO (and KEYS/STRLEN), counting its
    own bytes so they can be taken out of the server's totals."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        self.sent = 0  # request bytes so far (the server counts them as input)
        self.received = 0  # reply bytes so far (the server counts them as output)
        self.own = {}  # our own commands so far, by commandstats name (INFO excepted)

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("redis: connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        self.received += len(line) + 2
        return line

    def _reply(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+", b":"):
            return int(rest) if t == b":" else rest.decode()
        if t == b"-":
            raise RuntimeError("redis: %s" % rest.decode())
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            self.received += n + 2
            return data
        if t == b"*":
            return [self._reply() for _ in range(int(rest))]
        raise RuntimeError("redis: unexpected reply %r" % line[:80])

    def command(self, *args):
        """One command; its reply.  Returns (reply, sent before, received before)."""
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        self.sent += len(out)
        name = (args[0] if isinstance(args[0], str) else args[0].decode()).lower()
        self.own[name] = self.own.get(name, 0) + 1
        before = self.received
        return self._reply(), before

    def info(self):
        """INFO everything, parsed: {field: value}, cmdstat_* as dicts; with
        our own byte counts as the server saw them when it answered: the
        requests it had read (this one included) and the replies it had
        written (this one not)."""
        body, before = self.command("INFO", "everything")
        fields = {}
        for line in body.decode().split("\r\n"):
            if not line or line.startswith("#") or ":" not in line:
                continue
            k, v = line.split(":", 1)
            if k.startswith("cmdstat_"):
                fields[k[8:]] = {a: b for a, b in (p.split("=", 1) for p in v.split(","))}
            else:
                fields[k] = v
        return fields, self.sent, before, dict(self.own)

    def sizes(self):
        """{key: entry bytes} of every ccache entry (not leases)."""
        keys, _ = self.command("KEYS", "ccache:*")
        out = {}
        for k in keys:
            if not k.endswith(b":lease"):
                out[k] = self.command("STRLEN", k)[0]
        return out

    def close(self):
        self.sock.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """A private redis-server: no persistence, its own directory."""

    def __init__(self, redis_server, scratch):
        for _ in range(5):
            self.port = free_port()
            self.dir = os.path.join(scratch, "redis-%d" % self.port)
            os.makedirs(self.dir, exist_ok=True)
            self.proc = subprocess.Popen(
                [redis_server, "--port", str(self.port), "--bind", "127.0.0.1",
                 "--dir", self.dir, "--save", "", "--appendonly", "no",
                 "--daemonize", "no", "--logfile", ""],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for line in self.proc.stdout:
                if "Ready to accept connections" in line:
                    self.addr = "127.0.0.1:%d" % self.port
                    self.conn = Info(self.port)
                    self.snaps = []
                    return
            self.proc.wait()
        raise RuntimeError("redis-server did not start")

    def snap(self, label):
        f, req, rep, own = self.conn.info()
        self.snaps.append((label, f, req, rep, own))
        return f

    def kill(self):
        self.conn.close()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.conn.close()
            self.proc.terminate()
            self.proc.wait()


def delta(server, a, b):
    """The workload's figures on server between snapshots a and b (labels):
    commands by name, net bytes in/out with the INFO traffic taken out."""
    labels = [s[0] for s in server.snaps]
    ia, ib = labels.index(a), labels.index(b)
    fa, fb = server.snaps[ia][1], server.snaps[ib][1]
    # our own KEYS / STRLEN / DBSIZE between the two (the entries' sizes)
    oa, ob = server.snaps[ia][4], server.snaps[ib][4]
    cmds = {}
    for name, st in fb.items():
        if isinstance(st, dict) and name != "info":
            before = fa.get(name, {"calls": "0"})
            n = int(st["calls"]) - int(before["calls"]) - (ob.get(name, 0) - oa.get(name, 0))
            if n:
                cmds[name] = n
    # Our own traffic between the two INFOs, as the server counted it.
    req = server.snaps[ib][2] - server.snaps[ia][2]
    rep = server.snaps[ib][3] - server.snaps[ia][3]
    net_in = int(fb["total_net_input_bytes"]) - int(fa["total_net_input_bytes"]) - req
    net_out = int(fb["total_net_output_bytes"]) - int(fa["total_net_output_bytes"]) - rep
    return {"commands": cmds, "net_in": net_in, "net_out": net_out,
            "connections_made": int(fb["total_connections_received"]) -
            int(fa["total_connections_received"])}


def program_key(name):
    """The program key (32 hex digits) of an entry's key name,
    <prefix>:<namespace>:<program key> (tier_redis.c)."""
    return name.decode().rsplit(":", 1)[1]


def keys_on(server):
    return int(server.snaps[-1][1].get("db0", "keys=0").split(",")[0].split("=")[1])


class WakeProbe(threading.Thread):
    """How late a 5 ms sleep wakes up on this machine while the fleet runs
    (the tier's waiters sleep between polls): the mean lateness, ms."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.late = []

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            time.sleep(0.005)
            self.late.append((time.monotonic() - t0 - 0.005) * 1e3)

    def mean(self):
        self.stop.set()
        self.join()
        return sum(self.late) / len(self.late) if self.late else 0.0

    def quantiles(self, n=200):
        """n evenly spaced quantiles of the lateness, ms (the model draws a
        wake's lateness from them)."""
        v = sorted(self.late)
        return [v[min(len(v) - 1, int((i + 0.5) * len(v) / n))] for i in range(n)] if v else []


class PingProbe(threading.Thread):
    """The round trip of a command on this machine while the fleet runs:
    PING to a redis-server of its own (not one of the fleet's, so their
    counts stay the fleet's), in bursts of BURST every 2 ms.  The first of a
    burst follows a sleep (client and server both wake: "cold"); the others
    follow a reply at once ("hot"), like the tier's commands within one
    operation: a lookup's GET on each server, then SET NX; the holder's SET
    of the entry, then its release.  Means, ms."""

    BURST = 4

    def __init__(self, port):
        super().__init__(daemon=True)
        self.conn = Info(port)
        self.stop = threading.Event()
        self.cold, self.hot = [], []

    def run(self):
        while not self.stop.is_set():
            for i in range(self.BURST):
                t0 = time.monotonic()
                self.conn.command("PING")
                (self.hot if i else self.cold).append((time.monotonic() - t0) * 1e3)
            time.sleep(0.002)

    def means(self):
        """(cold, hot) mean round trips, ms."""
        self.stop.set()
        self.join()
        self.conn.close()

        def m(v):
            return sum(v) / len(v) if v else 0.0

        return m(self.cold), m(self.hot)


class Stamps(threading.Thread):
    """A fleet process's stderr: when each --verbose "kernel" line came (s
    after t0: the process is done with that kernel), when that kernel's get
    last heard from Redis (the line's "(redis at T)", T on the same
    CLOCK_MONOTONIC as time.monotonic(); None: it did not go to Redis), the
    hold line (held is set), anything else kept for an error message."""

    def __init__(self, proc, t0):
        super().__init__(daemon=True)
        self.proc, self.t0 = proc, t0
        self.stamps, self.redis, self.other = [], [], []
        self.held = threading.Event()
        self.held_ok = False
        self.start()

    def run(self):
        for line in self.proc.stderr:
            if line.startswith("kernel "):
                self.stamps.append(time.monotonic() - self.t0)
                at = line.rfind("(redis at ")
                self.redis.append(float(line[at + 10:].rstrip().rstrip(")")) - self.t0
                                  if at >= 0 else None)
            elif "holding after" in line:
                self.held_ok = True
                self.held.set()
            else:
                self.other.append(line)
        self.held.set()  # EOF: no hold line


def warm_walk(argv, env, kernels):
    """One process alone that loads every kernel (each a hit): its --json
    report, and each kernel's own work (running and checking it, which
    grows with the kernel's shape), ms: the time between its --verbose
    lines, less the mean load.  (None, None) if it failed."""
    p = subprocess.Popen(argv + ["--verbose"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    stamps = []
    for line in p.stderr:  # one line per kernel, written as it is done
        if line.startswith("kernel "):
            stamps.append(time.monotonic())
    out = p.stdout.read()
    p.wait()
    if p.returncode != 0 or len(stamps) != kernels:
        return None, None
    rep = json.loads(out)
    load = rep["acquire_ms"] / kernels
    gaps = [(b - a) * 1e3 - load for a, b in zip(stamps, stamps[1:])]
    # The first kernel's line follows the process's start: take the
    # smallest of the next (kernels 0-4 are the same shape).
    work = [min(gaps[:4])] + gaps
    return rep, [max(w, 0.01) for w in work]


def signing_key(keys_tool, scratch):
    """A new signing key in scratch (closure-cache-keys generate): the
    secret file's path.  The signer trusts its own key (kernel_jit
    --signing-key), so every process of the fleet signs and verifies with
    it."""
    secret = os.path.join(scratch, "fleet.key")
    public = os.path.join(scratch, "fleet.pub")
    subprocess.run([keys_tool, "generate", "fleet", secret, public], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return secret


def keys_tool_of(kernel_jit):
    """closure-cache-keys of kernel_jit's build (<build>/examples/kernel_jit/
    kernel_jit -> <build>/closure-cache-keys), or None."""
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(kernel_jit))))
    p = os.path.join(build, "closure-cache-keys")
    return p if os.access(p, os.X_OK) else shutil.which("closure-cache-keys")


def run_fleet(kernel_jit, redis_server, procs, n_servers, kernels, kill_at=None, kill_index=1,
              sizes=True, warm_probe=False, rerun=0, machines=None, signed=True, keys_tool=None):
    """Run the fleet once.  kill_at: None, or the kernel count after which
    every process holds (--hold-after) while server kill_index is SIGKILLed.
    Without kill_at every process holds after its last kernel, so the
    servers' connected_clients is read while every connection is open.
    rerun: after a kill, that many new processes started together walk
    every kernel again (what the lost server's entries cost), as one new
    machine (a directory of their own) when machines is set.
    machines: None (each process has the Redis tier alone), or M: process
    i gets --cache-dir <scratch>/m<i % M>, a directory tier above Redis
    shared by the M machines' processes (the documented fleet setup).
    signed: every process signs with one key made for the run
    (closure-cache-keys generate; --signing-key), the documented setup;
    False: --trust-unsigned.
    Returns a dict of the measurements (see fleet/validation.py)."""
    scratch = tempfile.mkdtemp(prefix="ccache-fleet.")
    servers = []
    extras = []  # the probe's server
    children = []
    try:
        for _ in range(n_servers):
            servers.append(Server(redis_server, scratch))
        for s in servers:
            s.snap("start")
        pinged = Server(redis_server, scratch)  # the round-trip probe's own server
        extras.append(pinged)
        hold = kill_at if kill_at else kernels
        if signed:
            tool = keys_tool or keys_tool_of(kernel_jit)
            if not tool:
                raise RuntimeError("closure-cache-keys not found (for --signing-key)")
            trust = ["--signing-key", signing_key(tool, scratch)]
        else:
            trust = ["--trust-unsigned"]
        # Without --hold-after: the rerun's and the warm probe's processes.
        base = [kernel_jit, "--json", "--kernels", str(kernels),
                "--redis", ",".join(s.addr for s in servers)] + trust

        def machine_dir(name):
            """A machine's directory tier: [] without machines."""
            if not machines:
                return []
            return ["--cache-dir", os.path.join(scratch, name)]

        argv = base + ["--hold-after", str(hold)]
        env = dict(os.environ, TMPDIR=scratch)
        t0 = time.monotonic()
        probe = WakeProbe()
        probe.start()
        ping = PingProbe(pinged.port)
        ping.start()
        readers = []
        for i in range(procs):
            mine = argv + ["--verbose"] + machine_dir("m%d" % (i % machines if machines else 0))
            children.append(subprocess.Popen(mine, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True, env=env))
            readers.append(Stamps(children[-1], t0))
        for r in readers:  # every process at its hold point
            if not r.held.wait(600) or not r.held_ok:
                raise RuntimeError("kernel_jit did not hold: %r" % "".join(r.other[-3:]))
        t_hold = time.monotonic()
        held = {}
        for s in servers:
            f = s.snap("hold")
            held[s.addr] = {"connected_clients": int(f["connected_clients"]) - 1,  # less ours
                            "keys": keys_on(s), "sizes": s.conn.sizes() if sizes else {}}
        if kill_at:
            servers[kill_index].kill()
        for c in children:
            c.stdin.close()
        reports = []
        for c, r in zip(children, readers):
            out = c.stdout.read()  # small: one line
            c.wait()
            r.join()
            if c.returncode != 0:
                raise RuntimeError("kernel_jit exited %d: %s" % (c.returncode, "".join(r.other)))
            reports.append(json.loads(out))
        t_end = time.monotonic()
        wake_ms = probe.mean()
        wake_q = probe.quantiles()
        rtt_cold_ms, rtt_ms = ping.means()
        pinged.stop()
        live = [s for i, s in enumerate(servers) if not (kill_at and i == kill_index)]
        end_sizes = {}
        for s in live:
            s.snap("end")
            end_sizes[s.addr] = s.conn.sizes() if sizes else {}
        rerun_reports = []
        if kill_at and rerun:
            rargv = base + machine_dir("rerun")  # a new machine: nothing on its disk
            late = [subprocess.Popen(rargv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env) for _ in range(rerun)]
            for c in late:
                out, err = c.communicate()
                if c.returncode != 0:
                    raise RuntimeError("kernel_jit (rerun) exited %d: %s" % (c.returncode, err))
                rerun_reports.append(json.loads(out))
        warm = None
        warm_work = None
        if warm_probe:  # one more process, every kernel a hit: the load time alone
            # (a directory of its own: every kernel comes from Redis)
            warm, warm_work = warm_walk(base + machine_dir("warm"), env, kernels)
        result = {"procs": procs, "machines": machines, "signed": signed, "servers": [s.addr for s in servers], "kernels": kernels,
                  "kill_at": kill_at, "killed": servers[kill_index].addr if kill_at else None,
                  "seconds_to_hold": t_hold - t0, "seconds": t_end - t0,
                  "reports": reports, "held": {a: {k: v for k, v in h.items() if k != "sizes"}
                                               for a, h in held.items()},
                  "per_server": {}, "warm": warm, "rerun": rerun_reports, "wake_late_ms": wake_ms,
                  "wake_late_quantiles": wake_q, "rtt_ms": rtt_ms,
                  "rtt_cold_ms": rtt_cold_ms,
                  # per process, when it was done with each kernel, s from
                  # the start (its --verbose lines), and when the hold began
                  "done_s": [r.stamps for r in readers], "hold_s": t_hold - t0,
                  # and when its get of each kernel last heard from Redis
                  # (None: that get did not go to Redis)
                  "redis_s": [r.redis for r in readers],
                  "warm_load_ms": warm["acquire_ms"] / kernels if warm else None,
                  "warm_work_by_kernel": warm_work}
        for i, s in enumerate(servers):
            r = {"phase1": delta(s, "start", "hold")}
            if s in live:
                r["phase2"] = delta(s, "hold", "end")
                r["keys_end"] = keys_on(s)
                if rerun_reports:
                    r["keys_after_rerun"] = int(s.conn.command("DBSIZE")[0])
                if sizes:
                    end = end_sizes[s.addr]
                    r["sizes"] = sorted(end.values())
                    r["sizes_new"] = sorted(v for k, v in end.items()
                                            if k not in held[s.addr]["sizes"])
            r["keys_hold"] = held[s.addr]["keys"]
            r["sizes_hold"] = sorted(held[s.addr]["sizes"].values())
            # {program key (32 hex digits): entry bytes}, at the hold point
            # and at the end: which server is each program's home.
            r["entries_hold"] = {program_key(k): v for k, v in held[s.addr]["sizes"].items()}
            if s in live and sizes:
                r["entries_end"] = {program_key(k): v for k, v in end_sizes[s.addr].items()}
            result["per_server"][s.addr] = r
        return result
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait()
        for s in servers + extras:
            s.stop()
        shutil.rmtree(scratch, ignore_errors=True)
