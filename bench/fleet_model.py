#!/usr/bin/env python3
"""fleet_model.py - how many Redis servers, connections and which settings a
fleet of F processes needs: a model of what ccache's Redis tier sends,
checked against a measured fleet on this machine (issue 24).

  fleet_model.py validate [--quick] [--kernels N] [--kernel-jit PATH] [--redis-server PATH]
                          [--json FILE] [--machines N] [--unsigned]
      16 kernel_jit processes as 4 machines of 4 (a --cache-dir each, above
      Redis; --machines 0: none), signed with one key made for the run
      (closure-cache-keys generate, --signing-key; --unsigned:
      --trust-unsigned) x 3 local redis-server instances, 120 kernels
      each, once with every server up and once with one killed mid-run;
      each server measured with INFO (commandstats, total_net_input_bytes/
      total_net_output_bytes, connected_clients), the model fed from the
      same run: each program's compile time and home server, each kernel's
      work, the CPUs the work shares, the load time, sleep lateness and a
      command's round trip, and for connections the processes that went to
      Redis for each kernel and when (their --verbose lines: each get's last
      Redis event); then, after the kill, 4 new
      processes (a new machine) walk every kernel again (the loss's cost);
      prints bench/run rows (predicted vs measured, for the fleet and per
      server, each figure within 10 %).
      --quick: 8 processes as 2 machines, 20 kernels.
      Exit 0 (a figure off by more than 10 % is MISSED in the table, not an
      error), 1 on a failed run, 77 if redis-server, kernel_jit or (signed)
      closure-cache-keys is missing.
  fleet_model.py table
      the fleet tables of docs/fleet.md (1,000 processes x 10 servers, 100,000 x
      64; each as single processes and as machines of 16), markdown.
  fleet_model.py selftest
      the model on fixed inputs against counts worked out by hand (exit 1
      if one differs).

What the model counts comes from the tier's code (src/tier/tier_stack.c,
src/tier/redis/tier_redis.c, redis_conn.c, src/tier/tier_renew.c):
  lookup    STRLEN <k> and GETRANGE <k> 0 131072, pipelined (one round
            trip; an entry over 128 KiB and within the bound: a second
            GETRANGE <k> 0 <max bytes>, after which the process asks for
            that entry's length at once: one round trip from then on, as
            modelled; each process's first such hit is not) on the key's first live server only
            (a miss reads on past it only after this process saw that server
            fail: not modelled, tier_redis.c get_from, redis_io.c
            ccache__rexec_get_bounded);
  machine   with a directory tier above Redis, a machine's processes take
            its compile lock before looking in Redis (tier.c
            look_and_lock): per program, one process of each machine of P
            reads, leases and polls on Redis, the others load from disk;
  signed    (the fleet setup with keys) the lease value is the 32-byte token
            and a 120-byte signed token; each SET NX answered busy is
            followed by a lease peek, GETRANGE <k>:lease 0 192 (tier.c
            signer_holds); entries carry an 80-byte signature block;
  lease     SET <k>:lease <token> NX PX lease_ms on the first live server;
  waiting   while the lease is held: sleep poll_ms doubling to poll_max_ms,
            then a poll: the same lookup on the key's first live server only
            (tier_stack.c poll_load, tier_redis.c op_get_poll: the holder publishes
            nowhere else), then SET NX again (tier_stack.c lock_one); at the first
            busy answer of a wait, PTTL <k>:lease once (tier_lease.c: a cache
            without keys, when wait_ms > lease_ms + 2000, as kernel_jit
            --trust-unsigned is);
  taken     after SET NX succeeds, one more lookup (the holder before may
            have published), then the compile;
  publish   SET <k> <entry> on the first live server; then
  release   EVAL <release script> 1 <k>:lease <token> (inside: GETRANGE
            0 31, DEL);
  renewal   every lease_ms/3 while the compile runs: EVAL <renew script> 1
            <k>:lease <token> <px> <value> <0|1> (inside: GETRANGE 0 31, PEXPIRE;
            after a switch of primary, a SET NX if the lease is missing there)
            on the server's renewal connection, one per (process, server) from
            its first renewal on (tier_renew.c, redis_lease.c);
  connect   nothing is sent (no AUTH without a password, no HELLO, no PING);
            a process keeps one pooled connection per server per concurrent
            caller (up to 8 idle, redis_conn.c), made on first use, and
            closes it (and the renewal connection) once unused for
            idle_close_ms (default 20 s, redis_idle.c).
Commands run inside EVAL count in INFO commandstats under their own names.
Sentinel mode adds the watcher (redis_watch.c; sentinel_watch() below): per
process one connection holding SUBSCRIBE +switch-master on one Sentinel
(spread over the Sentinels by process id), and every 60 s per primary name
(5 s while unsubscribed, and once per +switch-master naming it) an ask: a new
connection to a Sentinel (the list's first that answers) with SENTINEL
get-master-addr-by-name, and a new connection to the answer with ROLE.
"""
import argparse
import heapq
import json
import math
import os
import random
import shutil
import sys
import time

# ------------------------------------------------------------ wire format
KEY_LEN = len("ccache:v1:") + 16 + 1 + 32  # <prefix>:v1:<tag hash>:<program key>
LEASE_KEY_LEN = KEY_LEN + len(":lease")
TOKEN_LEN = 32
RENEW_SCRIPT_LEN = 238  # redis_lease.c RENEW_SCRIPT
RENEW_VALUE_SCRIPT_LEN = 251  # redis_lease.c RENEW_VALUE_SCRIPT (a signed lease's renewal)
RELEASE_SCRIPT_LEN = 104  # redis_lease.c RELEASE_SCRIPT
SIGNED_LEASE = 120  # tier_trust.h CCACHE__LEASE_TOKEN: the signed part of a lease value
ENTRY_SIG = 80  # tier_trust.h CCACHE__TIER_SIG: a signed entry's signature block
PEEK_END = 192  # redis_lease.c: the lease peek's GETRANGE end
PREFIX_READ = 128 << 10  # redis.h CCACHE__REDIS_PREFIX_READ: the lookup's first GETRANGE end
OK_REPLY = len("+OK\r\n")
NIL_REPLY = len("$-1\r\n")  # RESP2 (hiredis 0.14)
INT_REPLY = len(":1\r\n")


def req(*lens):
    """Bytes of a RESP request whose arguments have these lengths."""
    return len("*%d\r\n" % len(lens)) + sum(len("$%d\r\n" % n) + n + 2 for n in lens)


def bulk(n):
    return len("$%d\r\n" % n) + n + 2


def prefix(e=0):
    """The first GETRANGE's end in a process that has read e-byte entries:
    the tier raises it to the longest entry over PREFIX_READ it read
    (redis_io.c prefix_seen)."""
    return max(PREFIX_READ, e)


def lookup_req(e=0):
    return req(6, KEY_LEN) + req(8, KEY_LEN, 1, len(str(prefix(e))))


def lookup_reply(e):
    """Reply bytes of a lookup of an e-byte entry (0: none) in the steady
    state: STRLEN's integer and the GETRANGE of at most prefix(e) + 1 bytes,
    the whole entry.  (A process's first hit over PREFIX_READ reads the
    first PREFIX_READ + 1 bytes, then the entry again: once per process.)"""
    return len(":%d\r\n" % e) + bulk(min(e, prefix(e) + 1))


def op_bytes(lease_ms, signed=False):
    """(request, reply) bytes of each operation; entry-sized ones take E
    (the entry as stored: with its signature block when signed)."""
    px = len(str(lease_ms))
    val = TOKEN_LEN + (SIGNED_LEASE if signed else 0)
    return {
        "peek": (req(8, LEASE_KEY_LEN, 1, len(str(PEEK_END))), bulk(val)),
        "get_miss": (lookup_req(), lookup_reply(0)),
        "get_hit": (lookup_req, lookup_reply),
        "setnx_ok": (req(3, LEASE_KEY_LEN, val, 2, 2, px), OK_REPLY),
        "setnx_busy": (req(3, LEASE_KEY_LEN, val, 2, 2, px), NIL_REPLY),
        "store": (lambda e: req(3, KEY_LEN, e), lambda e: OK_REPLY),
        "release": (req(4, RELEASE_SCRIPT_LEN, 1, LEASE_KEY_LEN, TOKEN_LEN), INT_REPLY),
        # EVAL <script> 1 <k>:lease <token> <px> <value> <flag>: the value
        # re-taken after a switch; a signed lease's renewal sets a fresh
        # value (RENEW_VALUE_SCRIPT: GETRANGE, SET inside, not PEXPIRE)
        "renew": (req(4, RENEW_VALUE_SCRIPT_LEN if signed else RENEW_SCRIPT_LEN, 1,
                      LEASE_KEY_LEN, TOKEN_LEN, px, val, 1), INT_REPLY),
        "pttl": (req(4, LEASE_KEY_LEN), len(":%d\r\n" % lease_ms)),
    }


# ------------------------------------------------------------ settings
class Settings:
    """The tier's options that the model depends on (ccache_redis_options
    defaults, include/ccache/tier.h)."""

    def __init__(self, lease_ms=10000, poll_ms=5, poll_max_ms=200, wait_ms=120000, idle_max=8,
                 idle_close_ms=20000, signed=False):
        self.lease_ms, self.poll_ms, self.poll_max_ms = lease_ms, poll_ms, poll_max_ms
        self.wait_ms, self.idle_max = wait_ms, idle_max
        self.idle_close_ms = idle_close_ms  # a connection unused this long is closed
        self.signed = signed  # signed lease values and entries, a peek per busy SET NX

    def polls(self, wait):
        """Polls (lookups after a sleep) of a waiter whose wait lasts `wait`
        ms: the delays poll_ms, 2 poll_ms, ... capped at poll_max_ms, until
        their sum reaches wait (the lookup that finds the entry is the last)."""
        n, t, d = 0, 0.0, self.poll_ms
        while t < wait and t < self.wait_ms:
            t += d
            n += 1
            d = min(2 * d, self.poll_max_ms)
        return max(n, 1)

    def renewals(self, hold):
        """Renewals of a lease held `hold` ms (one each lease_ms/3 after it
        was taken, the last before the release)."""
        period = self.lease_ms // 3
        return int(max(hold - 1e-9, 0) // period) if period else 0


# ------------------------------------------------------------ the wave
class Timing:
    """Times of the validation's processes, ms (fed from the same run)."""

    def __init__(self, compile_ms, compile_cv=0.3, load_ms=1.0, work_ms=3.0, rtt_ms=0.2,
                 start_spread_ms=20.0, wake_ms=0.0, cores=None):
        self.compile_ms, self.compile_cv, self.wake_ms = compile_ms, compile_cv, wake_ms
        # cores None: every process's work between two kernels (running and
        # checking the kernel) lasts work_ms.  A number: that work needs
        # work_ms of CPU and the processes working at once share `cores`
        # CPUs (processor sharing), so 15 waiters that find an entry
        # together are slower to reach the next kernel than the one that
        # compiled it (and went on alone while they slept).
        self.cores = cores
        # With cores: each kernel's own CPU ms of work (None: work_ms each).
        self.work_by_kernel = None
        self.load_ms, self.work_ms, self.rtt_ms = load_ms, work_ms, rtt_ms
        self.start_spread_ms = start_spread_ms
        # A sleep's lateness, drawn from these (the run's measured quantiles;
        # None: wake_ms each time).
        self.wake_quantiles = None
        # How the working processes share the cores (simulate_wave rates()).
        self.sched = "ps"


class Disk:
    """The directory tier's compile-lock options (ccache_disk_options
    defaults, src/tier/disk/tier_disk.c): a waiter on the lock sleeps
    lock_poll_ms doubling to lock_poll_max_ms and then looks on disk."""
    poll_ms, poll_max_ms = 10, 100


def simulate_wave(procs, kernels, live, timing, settings, rng, hold_at=None, live_after=None,
                  costs=None, machines=None):
    """One run of a fleet of `procs` single-threaded processes that each
    obtain kernels 0..kernels-1 in order, all starting together (a deploy
    wave), each program compiled by whoever first takes its lease.  live:
    live servers; with hold_at, every process stops after hold_at kernels
    until all have, and kernels from hold_at on see live_after servers.
    costs: each kernel's compile time, ms (the validation feeds the ones
    measured in the same run); None: drawn from a lognormal of
    timing.compile_ms, timing.compile_cv.
    machines: None (no directory tier), or M: process p is on machine
    p % M, whose directory tier sits above Redis (tier_stack.c
    look_and_lock): the machine's first process to miss a kernel takes the
    directory lock and alone goes to Redis; the others sleep on that lock
    (Disk's schedule) and load the entry from disk once the holder put it
    there (its Redis hit filled above, or its compile stored).
    Returns per-kernel counts (lists indexed by kernel):
      miss   lookups that missed (each one STRLEN + GETRANGE on the key's server)
      poll_miss  those of them that were a waiter's poll
      hit    lookups that hit (one GET, on the key's server)
      setnx_ok, setnx_busy, compiles, releases, renewals;
      peek   signed lease peeks (a GETRANGE of the lease after a busy SET NX)
      waits  obtains that waited (on the directory lock or the lease)
      uses   per kernel, {process: time of its last command on the key's server}
    and hold_ms: the time the fleet is at its hold point (the last process
    in; without hold_at, the last process done)."""
    c = {k: [0] * kernels for k in ("miss", "poll_miss", "hit", "setnx_ok", "setnx_busy",
                                     "compiles", "releases", "renewals", "waits", "polls",
                                     "peek", "disk_hits", "disk_waits")}
    c["uses"] = [dict() for _ in range(kernels)]
    if costs is None:
        sigma = math.sqrt(math.log(1 + timing.compile_cv ** 2))
        mu = math.log(timing.compile_ms) - sigma ** 2 / 2
        cost = [rng.lognormvariate(mu, sigma) for _ in range(kernels)]
    else:
        cost = list(costs)
    pub = [math.inf] * kernels  # when each entry is readable
    free_at = [0.0] * kernels  # when its lease is free (inf while held)
    dpub = [[math.inf] * kernels for _ in range(machines or 0)]  # on each machine's disk
    dheld = [[False] * kernels for _ in range(machines or 0)]  # its directory lock taken
    gone = {}  # (process, kernel) -> leases found gone at a peek (tier_stack.c lock_one)
    waited = set()  # (process, kernel) that waited
    r = timing.rtt_ms
    q = []  # (time, seq, process, kernel, state, delay)
    seq = 0
    end = [0.0]

    def late():
        """How late a sleep wakes: drawn from the run's measured lateness."""
        lq = timing.wake_quantiles
        return rng.choice(lq) if lq else timing.wake_ms

    def push(t, p, k, state, delay=0):
        nonlocal seq
        heapq.heappush(q, (t, seq, p, k, state, delay))
        seq += 1

    def use(p, k, t):
        c["uses"][k][p] = t

    def wait(p, k, disk=False):
        if (p, k) not in waited:
            waited.add((p, k))
            c["waits"][k] += 1
            c["disk_waits"][k] += disk

    waiting_at_hold = []
    working = {}  # process -> [CPU ms of work left, kernel]
    clock = [0.0]  # when working's figures were last brought up to date
    version = [0]  # of the one pending "done" event (older ones are stale)
    c["work_ms"] = 0.0  # the simulated time every process spent working, summed
    c["hold_ms"] = None

    def rates():
        """Each working process's share of the CPUs.  "ps": processor
        sharing (all equal).  "lcfs": the latest to start working runs
        first (preemptive last-come-first-served: the scheduler's wakeup
        preference, a task just woken from a sleep runs ahead of those
        that have been running), one CPU each while cores last."""
        if timing.sched == "ps":
            rt = min(1.0, timing.cores / len(working)) if working else 1.0
            return {p: rt for p in working}
        out, left = {}, timing.cores
        for p in sorted(working, key=lambda x: -working[x][2]):
            out[p] = min(1.0, max(left, 0.0))
            left -= 1.0
        return out

    def advance(t):
        dt = t - clock[0]
        if dt > 0 and working:
            rt = rates()
            for p, w in working.items():
                w[0] -= dt * rt[p]
            c["work_ms"] += dt * len(working)
        clock[0] = max(clock[0], t)

    def work(t, p, k):
        """p works on kernel k from t, then goes on to the next."""
        if timing.cores is None:
            c["work_ms"] += timing.work_ms
            next_kernel(t + timing.work_ms, p, k)
        else:
            push(t, p, k, "work")

    def done(t, p, k):
        """p has kernel k at t (a Redis hit or its compile): on its
        machine's disk from then on (fill above, or the store)."""
        if machines:
            dpub[p % machines][k] = min(dpub[p % machines][k], t)
        work(t, p, k)

    def reschedule(t):
        version[0] += 1
        if working:
            rt = rates()
            p, w = min(((p, w) for p, w in working.items() if rt[p] > 0),
                       key=lambda x: x[1][0] / rt[x[0]])
            push(t + max(w[0], 0.0) / rt[p], p, w[1], "done", version[0])
    for p in range(procs):
        push(rng.uniform(0, timing.start_spread_ms), p, 0, "arrive")

    def nlive(k):
        return live_after if hold_at is not None and k >= hold_at else live

    def next_kernel(t, p, k):
        if k + 1 >= kernels:
            end[0] = max(end[0], t)
            return
        if hold_at is not None and k + 1 == hold_at:
            waiting_at_hold.append(p)
            if len(waiting_at_hold) == procs:  # the last one in releases everyone
                c["hold_ms"] = t
                for pp in waiting_at_hold:
                    push(t + rng.uniform(0, 1.0), pp, hold_at, "arrive")
            return
        push(t, p, k + 1, "arrive")

    while q:
        t, _, p, k, state, delay = heapq.heappop(q)
        if timing.cores is not None:
            advance(t)
            if state == "done":
                if delay == version[0]:
                    del working[p]
                    reschedule(t)
                    next_kernel(t, p, k)
                continue
            if state == "work":
                working[p] = [timing.work_ms if timing.work_by_kernel is None
                               else timing.work_by_kernel[k], k, t]
                reschedule(t)
                continue
        if state in ("arrive", "dpoll") and machines:
            m = p % machines
            if dpub[m][k] <= t:  # on the machine's disk: loaded from there
                c["disk_hits"][k] += 1
                work(t + timing.load_ms, p, k)
                continue
            if dheld[m][k]:  # another process of the machine holds the lock
                wait(p, k, disk=True)
                d = delay or Disk.poll_ms
                push(t + d + late(), p, k, "dpoll", min(2 * d, Disk.poll_max_ms))
                continue
            dheld[m][k] = True  # the machine's holder: on to Redis
            state = "lookup"
        elif state == "arrive":
            state = "lookup"
        s = nlive(k)
        if state in ("lookup", "poll", "recheck", "gone"):
            use(p, k, t)
            if pub[k] <= t:
                c["hit"][k] += 1
                if state == "recheck":  # took the lease after its holder published
                    c["releases"][k] += 1
                    free_at[k] = t + 2 * r
                done(t + r + timing.load_ms, p, k)
                continue
            c["miss"][k] += 1
            if state in ("poll", "gone"):
                c["poll_miss"][k] += 1
            t += r  # a miss reads the key's first live server alone
            if state == "recheck":  # ours to compile
                c["compiles"][k] += 1
                took = t
                t += cost[k]
                pub[k] = t + r
                c["renewals"][k] += settings.renewals(pub[k] - took)
                c["releases"][k] += 1
                free_at[k] = pub[k] + r
                use(p, k, free_at[k])
                if machines:  # the store puts it on disk first (tier_store.c)
                    dpub[p % machines][k] = t
                done(free_at[k], p, k)
                continue
            # a peek found the lease gone: ask again at once (no sleep)
            push(t, p, k, "lock", delay if state == "gone" else (delay or settings.poll_ms))
        elif state == "lock":
            use(p, k, t)
            if free_at[k] <= t:
                c["setnx_ok"][k] += 1
                free_at[k] = math.inf
                push(t + r, p, k, "recheck")
                continue
            c["setnx_busy"][k] += 1
            wait(p, k)
            t += r
            if settings.signed:  # a signer peeks at the lease (tier_stack.c lease_holder)
                c["peek"][k] += 1
                use(p, k, t)
                g = gone.get((p, k), 0)
                if free_at[k] <= t and g < 3:  # let go since: look once more, then ask again
                    gone[(p, k)] = g + 1
                    push(t + r, p, k, "gone", delay)
                    continue
                t += r
            c["polls"][k] += 1
            push(t + delay + late(), p, k, "poll", min(2 * delay, settings.poll_max_ms))
    c["cost"] = cost
    if c["hold_ms"] is None:
        c["hold_ms"] = end[0]
    return c


def per_server(counts, homes, sizes, live_sets, settings):
    """Commands and bytes per server from per-kernel counts.  homes[k]: the
    server holding kernel k's entry and lease; sizes[k]: its entry bytes;
    live_sets[k]: the live servers (a miss reads only the key's own)."""
    ob = op_bytes(settings.lease_ms, settings.signed)
    out = {}

    def srv(s):
        return out.setdefault(s, {"getrange": 0.0, "set": 0.0, "eval": 0.0, "del": 0.0,
                                  "strlen": 0.0, "pexpire": 0.0, "pttl": 0.0, "net_in": 0.0,
                                  "net_out": 0.0})

    # a keyless waiter's one PTTL per wait (tier_lease.c; with keys, none)
    pttl_per_wait = (1 if settings.wait_ms > settings.lease_ms + 2000 and not settings.signed
                     else 0)

    for k, h in enumerate(homes):
        e = sizes[k] + (ENTRY_SIG if settings.signed else 0)
        for s in live_sets[k]:
            srv(s)
        x = srv(h)
        n = counts["miss"][k]  # a miss, a lookup's or a poll's, reads the home alone
        x["getrange"] += n  # each lookup STRLEN and GETRANGE
        x["strlen"] += n
        x["net_in"] += n * ob["get_miss"][0]
        x["net_out"] += n * ob["get_miss"][1]
        hits, ok, busy = counts["hit"][k], counts["setnx_ok"][k], counts["setnx_busy"][k]
        rel, ren, st = counts["releases"][k], counts["renewals"][k], counts["compiles"][k]
        # the scripts' own GETRANGE; a hit reads once (over PREFIX_READ
        # too, past each process's first: lookup_reply)
        x["getrange"] += hits + rel + ren
        x["strlen"] += hits
        x["set"] += ok + busy + st
        x["eval"] += rel + ren
        x["del"] += rel
        x[("set" if settings.signed else "pexpire")] += ren  # inside the renew script
        # a waiter on the directory lock never reaches Redis: only the lease's waits
        pt = (counts["waits"][k] - counts["disk_waits"][k] if "disk_waits" in counts
              else counts.get("waits", [0] * len(homes))[k]) * pttl_per_wait
        x["pttl"] += pt
        x["net_in"] += pt * ob["pttl"][0]
        x["net_out"] += pt * ob["pttl"][1]
        if settings.signed:  # a signer peeks at the lease after each busy SET NX
            pk = counts["peek"][k] if "peek" in counts else busy
            x["getrange"] += pk
            x["net_in"] += pk * ob["peek"][0]
            x["net_out"] += pk * ob["peek"][1]
        x["net_in"] += (hits * ob["get_hit"][0](e) + ok * ob["setnx_ok"][0] +
                        busy * ob["setnx_busy"][0] + st * ob["store"][0](e) +
                        rel * ob["release"][0] + ren * ob["renew"][0])
        x["net_out"] += (hits * ob["get_hit"][1](e) + ok * ob["setnx_ok"][1] +
                         busy * ob["setnx_busy"][1] + st * ob["store"][1](e) +
                         rel * ob["release"][1] + ren * ob["renew"][1])
    return out


def held_connections(c, homes, settings, hold_at=None):
    """Per server, the connections open at the hold point of a simulated
    run c: a process connects to a server when it first sends it a command
    (redis_conn.c) and closes the connection once unused for idle_close_ms
    (redis_idle.c), so those of the processes whose last command there (on
    a kernel before the hold) came within idle_close_ms of the hold."""
    since = c["hold_ms"] - settings.idle_close_ms
    last = {}
    for k, uses in enumerate(c["uses"][:hold_at] if hold_at is not None else c["uses"]):
        d = last.setdefault(homes[k], {})
        for p, t in uses.items():
            d[p] = max(d.get(p, t), t)
    return {s: sum(1 for t in d.values() if t >= since) for s, d in last.items()}


def run_holders(run, machines, work_ms=0.0):
    """Per kernel before the hold, which processes went to Redis for it and
    when each last heard from it (s), as the run measured: from each get's
    own Redis events where kernel_jit reported them (redis_s: its --verbose
    "(redis at T)"), exact; else, by the stamps, each machine's first
    process to reach the kernel (the first done with the one before; kernel
    0: the first done with it), its last command when it was done with the
    kernel less work_ms, the run's mean work per kernel after its fetch
    (running and checking it).  None without the stamps or machines."""
    done = run.get("done_s")
    if not done or not machines:
        return None
    upto = run["kill_at"] or run["kernels"]
    seen = run.get("redis_s")
    if seen and all(len(r) >= upto for r in seen):
        return [[(p, seen[p][k]) for p in range(run["procs"]) if seen[p][k] is not None]
                for k in range(upto)]
    out = []
    for k in range(upto):
        per = []
        for m in range(machines):
            ps = [p for p in range(run["procs"]) if p % machines == m]
            h = min(ps, key=lambda p: done[p][max(k - 1, 0)] if k else done[p][0])
            per.append((h, done[h][k] - work_ms / 1000.0))
        out.append(per)
    return out


def held_by_rule(holders, homes, hold_s, settings):
    """Per server, the connections the tier's rule leaves open at the hold
    (held_connections) for these holders: each machine's holder of a kernel
    sent the kernel's server its commands, the last when done with it."""
    since = hold_s - settings.idle_close_ms / 1000.0
    last = {}
    for k, per in enumerate(holders):
        d = last.setdefault(homes[k], {})
        for p, t in per:
            d[p] = max(d.get(p, t), t)
    return {s: sum(1 for t in d.values() if t >= since) for s, d in last.items()}


def predict_wave(procs, kernels, homes, sizes, live_sets, timing, settings, hold_at=None,
                 reps=40, seed=1, costs=None, machines=None):
    """The mean over `reps` simulated runs: per-server figures (with
    "conns", the connections open at the hold point), and fleet totals
    (compiles, waits, polls)."""
    rng = random.Random(seed)
    live = len(live_sets[0])
    live_after = len(live_sets[-1])
    acc, tot = {}, {}
    for _ in range(reps):
        c = simulate_wave(procs, kernels, live, timing, settings, rng, hold_at, live_after,
                          costs, machines)
        held = held_connections(c, homes, settings, hold_at)
        for s, fig in per_server(c, homes, sizes, live_sets, settings).items():
            a = acc.setdefault(s, {})
            fig = dict(fig, conns=held.get(s, 0))
            for f, v in fig.items():
                a[f] = a.get(f, 0.0) + v / reps
        for f in ("compiles", "waits", "polls", "miss", "hit", "releases", "renewals",
                  "disk_hits", "disk_waits"):
            tot[f] = tot.get(f, 0.0) + sum(c[f]) / reps
    return acc, tot


def connections(procs, servers_touched, threads=1, renew_servers=0, idle_max=8):
    """Connections a server holds open: each process keeps one pooled
    connection per concurrent caller (min(threads, idle_max) idle at most),
    plus one renewal connection if it renewed a lease on that server."""
    return procs * (min(threads, idle_max) + renew_servers) if servers_touched else 0


def sentinel_watch(procs, names, sentinels, reask_s=60.0):
    """Sentinel mode's watchers (redis_watch.c), steady state with every
    subscription up: connections each Sentinel holds (the subscriptions,
    spread evenly), asks per second on the first Sentinel (SENTINEL
    get-master-addr-by-name, each on a new connection), and ROLE commands
    (each on a new connection) per second per primary."""
    asks = procs * names / reask_s
    return {"sub_conns_per_sentinel": procs / sentinels, "asks_per_s_first_sentinel": asks,
            "role_per_s_per_primary": procs / reask_s}


def connections_idle(machines, per_machine, threads, s, fetches_per_s, idle_close_ms, renew,
                     idle_max=8):
    """Connections one of s servers holds with idle_close_ms: each machine's
    Redis fetches (fetches_per_s, spread evenly over the servers) keep a
    connection open for idle_close_ms after use, so a machine holds about
    as many as it made fetches to that server within idle_close_ms (an
    upper bound: a process reuses its own), at most one per caller
    (per_machine x min(threads, idle_max)); plus, with renew, a renewal
    connection per such fetch (at most one per process)."""
    window = fetches_per_s * idle_close_ms / 1000.0 / s
    pooled = min(per_machine * min(threads, idle_max), window)
    ren = min(per_machine, window) if renew else 0
    return machines * (pooled + ren)


# ------------------------------------------------------------ fleet tables
# Capacity assumed per Redis server (one single-threaded redis-server on its
# own core; see docs/fleet.md): measure your own with redis-benchmark.
CMD_LIMIT = 100_000  # simple commands per second
# What counts against it: INFO commandstats' calls, a script's own calls
# included (a lookup is 2: STRLEN, GETRANGE).
CMDS = ("getrange", "set", "eval", "del", "strlen", "pexpire", "pttl")
NET_LIMIT = 1.25e9  # bytes per second out (10 Gbit/s)
MAXCLIENTS = 10_000  # Redis's default maxclients


def program_counts(f, compile_ms, settings):
    """Per-kernel counts (simulate_wave's form) of one program that all f
    processes need at once, each waiter waiting the whole compile (an upper
    bound: in a wave walked in order, waiters arrive a little later)."""
    n = settings.polls(compile_ms) if f > 1 else 0
    w = f - 1
    # a waiter's n lookups: its first and n - 1 polls that miss (all on
    # the home); its n-th poll hits
    return {"miss": [2 + w * n], "poll_miss": [w * max(n - 1, 0)], "hit": [w],
            "setnx_ok": [1], "setnx_busy": [w * n],
            "compiles": [1], "releases": [1], "renewals": [settings.renewals(compile_ms)],
            "waits": [w], "polls": [w * n]}


def spread(counts, s, entry, settings):
    """One server's share of the per-kernel counts when the programs'
    entries are spread evenly over s servers (rendezvous hashing): every
    command goes to the program's own server."""
    one = per_server(counts, ["home"], [entry], [["home"] + ["x%d" % i for i in range(s - 1)]],
                     settings)
    home, other = one["home"], one.get("x0", {k: 0.0 for k in one["home"]})
    return {k: home[k] / s + other[k] * (s - 1) / s for k in home}


def fleet_row(f, s, settings, compile_ms=2000.0, wave_programs=100, lookups_per_s=1.0,
              new_frac=0.001, threads=1, entries=(15_000, 1_048_576), per_machine=1,
              conn_threads=8):
    """Per-server load of a fleet of f processes as f/per_machine machines
    (a directory tier above Redis on each; per_machine 1: no such tier):
    steady state and a deploy wave.
    steady: each machine makes lookups_per_s Redis lookups per second (its
      processes run the same workload, so a program one of them loads from
      Redis the others load from disk), new_frac of them for a program no
      one has yet (compiled once, nobody waiting);
    wave: every process needs the same wave_programs new programs at once,
      walked in order by each thread (kernel_jit's pattern), compile_ms
      each; one process per machine and program goes to Redis.
    connections: with conn_threads threads per process, each connection
      closed idle_close_ms after its last use (connections_idle), in the
      wave (each machine fetching conn_threads programs per compile_ms) and
      in steady state.
    Returns a dict of figures per server (commands/s, bytes out/s per entry
    size, connections) and the fleet size at which each limit is reached."""
    out = {"f": f, "s": s, "threads": threads, "per_machine": per_machine}
    m = max(1, f // per_machine)  # what Redis sees: one client per machine and program
    out["machines"] = m
    lam = m * lookups_per_s
    hit = {"miss": [0], "hit": [1], "setnx_ok": [0], "setnx_busy": [0], "compiles": [0],
           "releases": [0], "renewals": [0]}
    new = program_counts(1, compile_ms, settings)
    for e in entries:
        h, n = spread(hit, s, e, settings), spread(new, s, e, settings)
        per = {k: lam * (1 - new_frac) * h[k] + lam * new_frac * n[k] for k in h}
        out["steady_out_%d" % e] = per["net_out"]
        out["steady_cmds"] = sum(per[c] for c in CMDS)
        out["steady_get"] = per["getrange"]
        w = spread(program_counts(m, compile_ms, settings), s, e, settings)
        dur = compile_ms / 1000.0  # one program per thread at a time, each lasting a compile
        rate = threads / dur
        out["wave_out_%d" % e] = w["net_out"] * rate
        out["wave_cmds"] = sum(w[c] for c in CMDS) * rate
        out["wave_get"] = w["getrange"] * rate
    out["polls_per_wait"] = settings.polls(compile_ms)
    out["wave_seconds"] = wave_programs * compile_ms / 1000.0 / threads
    ren = settings.renewals(compile_ms) > 0
    out["conns_wave"] = connections_idle(m, per_machine, conn_threads, s,
                                         conn_threads / (compile_ms / 1000.0),
                                         settings.idle_close_ms, ren, settings.idle_max)
    out["conns_steady"] = connections_idle(m, per_machine, conn_threads, s, lookups_per_s,
                                           settings.idle_close_ms, False, settings.idle_max)
    out["conns"] = max(out["conns_wave"], out["conns_steady"])
    # Where each limit is reached (every figure grows linearly with f, except
    # the wave's, ~f*polls: also linear).
    out["f_limit_steady_cmds"] = CMD_LIMIT / (out["steady_cmds"] / f)
    out["f_limit_wave_cmds"] = CMD_LIMIT / (out["wave_cmds"] / f)
    out["f_limit_conns"] = MAXCLIENTS / (out["conns"] / f)
    for e in entries:
        out["f_limit_out_%d" % e] = NET_LIMIT / (max(out["steady_out_%d" % e],
                                                     out["wave_out_%d" % e]) / f)
    return out


def si(v):
    for unit, d in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= d:
            return "%.3g %s" % (v / d, unit)
    return "%.3g" % v


def bound_check(procs=16, kernels=40, reps=5):
    """The tables' wave (every waiter waits a whole compile) against the
    simulated wave, in missing lookups: the bound's excess, per compile time."""
    st = Settings()
    out = []
    for c in (100.0, 2000.0):
        t = Timing(c, load_ms=1.0, work_ms=3.0, rtt_ms=0.2)
        rng = random.Random(1)
        sim = sum(sum(simulate_wave(procs, kernels, 3, t, st, rng)["miss"])
                  for _ in range(reps)) / reps
        bound = program_counts(procs, c, st)["miss"][0] * kernels
        out.append((c, sim, bound))
    return out


GOAL_WAVE_CMDS = 50_000  # a rollout's commands/s per server: half a core
GOAL_STEADY_CMDS = 10_000  # steady state's commands/s per server
ROWS = ((1000, 10, 1), (1000, 10, 16), (100_000, 64, 1), (100_000, 64, 16))


def limits(r, f, entry=1_048_576):
    """Processes (at r's machine size and servers) at which each goal is
    reached: every figure grows linearly with the machines."""
    return (GOAL_WAVE_CMDS / (r["wave_cmds"] / f), GOAL_STEADY_CMDS / (r["steady_cmds"] / f),
            NET_LIMIT / (max(r["steady_out_%d" % entry], r["wave_out_%d" % entry]) / f),
            MAXCLIENTS / (r["conns"] / f))


def table_md():
    """The tables of docs/fleet.md."""
    lines = ["The tables' wave lets every waiter wait a whole compile, an upper bound: "
             "missing lookups of 16 processes x 40 programs, simulated (5 runs) / bound: " +
             "; ".join("%.0f ms compiles %s / %s (+%.1f %%)" % (c, "{:,.0f}".format(sim),
                                                            "{:,}".format(b), pct(b, sim))
                       for c, sim, b in bound_check()) + ".\n"]
    n = "{:,}".format
    for title, st in (("defaults (lease_ms 10000, poll_ms 5, poll_max_ms 200, idle_close_ms "
                       "20000), signed", Settings(signed=True)),
                      ("tuned for a large fleet (poll_ms 500, poll_max_ms 2000, idle_close_ms "
                       "10000), signed",
                       Settings(poll_ms=500, poll_max_ms=2000, idle_close_ms=10000,
                                signed=True))):
        lines.append("Settings: %s; compile 2 s; steady state 1 Redis lookup per machine per "
                     "second, 0.1 %% of them new programs; wave: every process needs the same "
                     "100 new programs, one thread each (connections: 8 threads per process, "
                     "each fetching a program per compile).\n" % title)
        lines.append("| fleet | per server: steady commands/s | wave commands/s (of which "
                     "GETRANGE) | polls per wait | steady bytes out/s, 15 KB / 1 MiB entries | "
                     "wave bytes out/s, 15 KB / 1 MiB | connections, wave / steady (8 threads) | "
                     "processes at which a server reaches: %s commands/s (wave) / %s (steady) / "
                     "%sB/s out (1 MiB entries) / %s connections |"
                     % (si(GOAL_WAVE_CMDS), si(GOAL_STEADY_CMDS), si(NET_LIMIT), n(MAXCLIENTS)))
        lines.append("|---|---|---|---|---|---|---|---|")
        for f, sv, pm in ROWS:
            r = fleet_row(f, sv, st, per_machine=pm)
            who = ("%s processes" % n(f) if pm == 1 else
                   "%s processes as %s machines x %d" % (n(f), n(r["machines"]), pm))
            lines.append("| %s, %d servers | %s | %s (%s) | %d | %sB / %sB | %sB / %sB "
                         "| %s / %s | %s |"
                         % (who, sv, si(r["steady_cmds"]), si(r["wave_cmds"]),
                            si(r["wave_get"]), r["polls_per_wait"], si(r["steady_out_15000"]),
                            si(r["steady_out_1048576"]), si(r["wave_out_15000"]),
                            si(r["wave_out_1048576"]), n(round(r["conns_wave"])),
                            n(round(r["conns_steady"])),
                            " / ".join(n(int(x)) for x in limits(r, f))))
        lines.append("")
    lines.append("Machines of 1 process have no directory tier (each process goes to Redis); "
                 "machines of 16 share one directory tier, whose compile lock one process "
                 "takes before looking in Redis. Connections count what idle_close_ms leaves "
                 "open: a machine holds about one connection per Redis fetch it made to that "
                 "server within idle_close_ms (at most one per thread).")
    return "\n".join(lines)


# ------------------------------------------------------------ validation
RERUN = 4  # processes started after the kill run, to count what the loss cost
# Kernels each process walks: 120 puts ~40 programs on each of 3 servers, so
# the smallest per-server count (EVAL: one release per program there, plus
# the few waiters that took a lease just freed) is ~40 and one command more
# or less is 2.5 %, not the 7-10 % of 40 kernels (~13 per server).  About
# 15 s per run (120 compiles of ~110 ms, one after another: the fleet waits
# on each) on this machine.
KERNELS = 120
def find(path_opts):
    for p in path_opts:
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def pct(pred, meas):
    if meas == 0:
        return 0.0 if pred == 0 else math.inf
    return 100.0 * (pred - meas) / meas


def feed(reports, kernels):
    """The times the model is fed, from the run's own --json reports."""
    compiles = sum(r["compiles"] for r in reports)
    total = sum(r["compile_ms_total"] for r in reports)
    work = [(r["wall_ms"] - r["acquire_ms"]) / kernels for r in reports]
    return compiles, total / max(compiles, 1), sum(work) / len(work)


def validate(args):
    import fleet_measure as fm

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    kj = find([args.kernel_jit, os.path.join(root, "build/bench/examples/kernel_jit/kernel_jit"),
               os.path.join(root, "build/release/examples/kernel_jit/kernel_jit")])
    rs = find([args.redis_server, shutil.which("redis-server") or ""])
    if not kj or not rs:
        print("fleet_model: %s not found" % ("kernel_jit" if not kj else "redis-server"),
              file=sys.stderr)
        return 77
    if not args.unsigned and not fm.keys_tool_of(kj):
        print("fleet_model: closure-cache-keys not found beside kernel_jit's build (for "
              "--signing-key; or --unsigned)", file=sys.stderr)
        return 77
    procs, n_srv, kernels, machines = (8, 3, 20, 2) if args.quick else (16, 3, KERNELS, 4)
    kernels = args.kernels or kernels
    machines = None if args.machines == 0 else (args.machines or machines)
    signed = not args.unsigned
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    out = {"started": started, "runs": []}
    rows, details, warm, warm_work = [], [], None, None
    for kill in (None, kernels // 2):
        run = fm.run_fleet(kj, rs, procs, n_srv, kernels, kill_at=kill, sizes=True,
                           warm_probe=kill is None, rerun=RERUN if kill else 0,
                           machines=machines, signed=signed)
        warm = run["warm_load_ms"] = run["warm_load_ms"] or warm  # measured in the first run
        if run["warm"]:
            warm_work = run["warm_work_by_kernel"]
        run["warm_work_by_kernel"] = warm_work
        out["runs"].append(run)
        r, d = compare(run, args)
        rows += r
        details += d
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    print("### fleet_model: the fleet model against a measured fleet\n")
    print("`bench/fleet_model.py validate%s` at %s: %d kernel_jit processes%s x %d local "
          "redis-server, %d kernels each, %s, all started together; the model fed the run's "
          "own compile, load and per-kernel times and sleep lateness.  Predicted vs measured, "
          "summed over the servers (per server below); within 10 %% is met.\n"
          % (" --quick" if args.quick else "", started, procs,
             " as %d machines (a directory tier each, above Redis)" % machines if machines
             else "", n_srv, kernels,
             "signed (one signing key, --signing-key)" if signed else "unsigned"))
    print("| figure | measured (median) | baseline (median) | ratio: median [min, max] (reps) "
          "| target | status | notes |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(r)
    print()
    # Indented (a code block): bench/run's summary takes every line starting "| ".
    print("Per server, predicted / measured (commands from INFO commandstats, bytes from "
          "total_net_input_bytes / total_net_output_bytes, the INFO connection's own traffic "
          "taken out):\n")
    print("    run | server | entries | GETRANGE | SET | EVAL | DEL | STRLEN | bytes in | bytes out "
          "| connections | within 10 % each")
    for d in details:
        print("    " + d.strip("| "))
    print()
    return 0


def calibrate_cores(procs, kernels, live_sets, timing, settings, hold_at, costs, target,
                    machines=None):
    """The CPUs the fleet's work shared (processor sharing), such that a
    process's simulated work per kernel is `target` ms (measured in the same
    run: wall less acquire time, per kernel), each kernel's work needing
    timing.work_ms of CPU (measured by one process alone after the run)."""
    lo, hi = math.log(0.05), math.log(64.0)
    for _ in range(14):
        mid = (lo + hi) / 2
        timing.cores = math.exp(mid)
        rng = random.Random(7)
        got = 0.0
        for _ in range(3):
            c = simulate_wave(procs, kernels, len(live_sets[0]), timing, settings, rng, hold_at,
                              len(live_sets[-1]), costs, machines)
            got += c["work_ms"] / (3 * procs * kernels)
        if got > target:
            lo = mid  # too slow: more CPUs
        else:
            hi = mid
    return math.exp((lo + hi) / 2)


def placement(run):
    """Per kernel of the run, in its index order: the server its entry and
    lease are on (found by its program key among the servers' key names, so
    the rendezvous order over this run's server addresses is the one the
    tier used), its entry bytes, the servers a lookup that misses reads, and
    its compile time (measured: kernel_jit's compiled[] of whoever compiled
    it)."""
    servers, kill = run["servers"], run["kill_at"]
    alive = [s for s in servers if s != run["killed"]]
    by_kernel = {}
    for r in run["reports"]:
        for c in r["compiled"]:
            by_kernel[c["kernel"]] = c
    homes, sizes, live_sets, costs = [], [], [], []
    for k in range(run["kernels"]):
        c = by_kernel.get(k)
        if c is None:
            raise RuntimeError("kernel %d: compiled by no process" % k)
        after = kill is not None and k >= kill
        where = [(s, run["per_server"][s]["entries_end" if after else "entries_hold"])
                 for s in (alive if after else servers)]
        home = [(s, e[c["key"]]) for s, e in where if c["key"] in e]
        if len(home) != 1:
            raise RuntimeError("kernel %d (%s): on %d servers" % (k, c["key"], len(home)))
        homes.append(home[0][0])
        sizes.append(home[0][1])
        live_sets.append(alive if after else servers)
        costs.append(c["ms"])
    return homes, sizes, live_sets, costs


def compare(run, args):
    """Rows predicted vs measured for one run."""
    reports = run["reports"]
    procs, kernels, kill = run["procs"], run["kernels"], run["kill_at"]
    compiles, c_mean, work = feed(reports, kernels)
    load_ms = run.get("warm_load_ms") or 1.0
    timing = Timing(c_mean, load_ms=load_ms, work_ms=work, wake_ms=run["wake_late_ms"],
                    rtt_ms=run.get("rtt_ms") or 0.2)
    timing.wake_quantiles = run.get("wake_late_quantiles") or None
    st = Settings(signed=bool(run.get("signed")))
    machines = run.get("machines")
    servers = run["servers"]
    homes, sizes, live_sets, costs = placement(run)
    by_kernel = run.get("warm_work_by_kernel")
    alone = sum(by_kernel) / len(by_kernel) if by_kernel else None
    if alone and alone < work:  # the work shared the CPUs: find how many
        timing.work_ms = alone
        timing.work_by_kernel = by_kernel
        timing.cores = calibrate_cores(procs, kernels, live_sets, timing, st, kill, costs, work,
                                       machines)
    pred, tot = predict_wave(procs, kernels, homes, sizes, live_sets, timing, st, hold_at=kill,
                             costs=costs, machines=machines)
    meas = {}
    for s in servers:
        m = meas.setdefault(s, {"getrange": 0, "set": 0, "eval": 0, "del": 0, "strlen": 0,
                                "pexpire": 0, "pttl": 0, "net_in": 0, "net_out": 0})
        for ph in ("phase1", "phase2"):
            d = run["per_server"][s].get(ph)
            if not d:
                continue
            for cmd, n in d["commands"].items():
                m[cmd] = m.get(cmd, 0) + n
            m["net_in"] += d["net_in"]
            m["net_out"] += d["net_out"]
    label = ("all %d servers up" % len(servers) if kill is None else
             "one of %d servers SIGKILLed after %d kernels" % (len(servers), kill))
    if machines:
        label = "%d machines of %d, %s" % (machines, procs // machines, label)
    rows = []

    def row(fig, p, m, target="within 10 %", exact=False, note=""):
        e = pct(p, m)
        ok = (round(p) == m) if exact else abs(e) <= 10.0
        rows.append("| fleet model, %s: %s | %s measured | %s predicted | %+.1f %% | %s | %s | %s |"
                    % (label, fig, fmt(m), fmt(p), e, target, "met" if ok else "MISSED", note))

    row("compiles (fleet)", float(kernels), sum(r["compiles"] for r in reports),
        target="exactly", exact=True, note="one per kernel: %d kernels" % kernels)
    row("obtains that waited, on the directory lock or a lease (kernel_jit lock_waits)",
        tot["waits"],
        sum(r["lock_waits"] for r in reports), note="%d lookups in all" % (procs * kernels))
    for cmd in ("getrange", "set", "eval", "del", "strlen"):
        p = sum(pred[s].get(cmd, 0) for s in servers)
        m = sum(meas[s].get(cmd, 0) for s in servers)
        worst = max(abs(pct(pred[s].get(cmd, 0), meas[s].get(cmd, 0))) for s in meas
                    if meas[s].get(cmd, 0))
        row("%s commands (INFO commandstats)" % cmd.upper(), p, m,
            note="worst server %.1f %%" % worst)
    for f, name in (("net_in", "bytes in (total_net_input_bytes)"),
                    ("net_out", "bytes out (total_net_output_bytes)")):
        p = sum(pred[s][f] for s in servers)
        m = sum(meas[s][f] for s in servers)
        worst = max(abs(pct(pred[s][f], meas[s][f])) for s in meas if meas[s][f])
        row(name, p, m, note="worst server %.1f %%" % worst)
    conn_sim = sum(pred[s]["conns"] for s in servers)
    conn_lcfs = None
    holders = run_holders(run, machines, work)
    if holders is not None:
        # Which process of a machine reaches a kernel first is decided by a
        # few ms of CPU scheduling the simulation does not have (its CPUs
        # shared equally keep each machine's first process first): the
        # connection rule is applied to the processes the run saw go to
        # Redis (run_holders), and
        # the simulation's figure, and the other bound (the latest to start
        # working runs first: each process of a machine first in turn), are
        # reported beside it.
        by_rule = held_by_rule(holders, homes, run["hold_s"], st)
        for s in servers:
            pred[s]["conns"] = float(by_rule.get(s, 0))
        timing.sched = "lcfs"
        lc, _ = predict_wave(procs, kernels, homes, sizes, live_sets, timing, st, hold_at=kill,
                             reps=10, costs=costs, machines=machines)
        timing.sched = "ps"
        conn_lcfs = sum(lc[s]["conns"] for s in servers)
    conn_p = sum(pred[s]["conns"] for s in servers)
    conn_m = sum(run["held"][s]["connected_clients"] for s in servers)
    if run.get("rerun"):
        lost = run["per_server"][run["killed"]]["keys_hold"]
        rr = run["rerun"]
        row("the server's loss: %d new processes started together after the run, compiles "
            "(its entries lost)" % len(rr), lost, sum(r["compiles"] for r in rr),
            target="exactly", exact=True,
            note="%d entries were on the killed server: each compiled once more, on its fallback"
            % lost)
        row("the server's loss: those processes' tier hits", len(rr) * kernels - lost,
            sum(r["tier_hits"] for r in rr), target="exactly", exact=True,
            note="every other kernel loaded; entries on the survivors after: %d"
            % sum(run["per_server"][s].get("keys_after_rerun", 0) for s in servers))
    details = []
    worst, missed = (0.0, ""), []
    for s in servers:
        cells = []
        figs = [(f, pred.get(s, {}).get(f, 0.0), meas[s].get(f, 0)) for f in PER_SERVER]
        figs.append(("conns", pred[s]["conns"], run["held"][s]["connected_clients"]))
        for f, p, m in figs:
            e = pct(p, m)
            cells.append("%s / %s (%+.1f %%)" % (fmt(p), fmt(m), e))
            if abs(e) > abs(worst[0]):
                worst = (e, "%s on %s" % (f.upper(), s))
            if abs(e) > 10.0:
                missed.append("%s on %s %+.1f %%" % (f.upper(), s, e))
        ent = run["per_server"][s]["keys_hold"]
        if kill is not None and s != run["killed"]:
            ent = "%d + %d" % (ent, run["per_server"][s]["keys_end"] - ent)
        details.append("| %s | %s%s | %s | %s | %s |"
                       % (label, s, " (killed)" if s == run["killed"] else "", ent,
                          " | ".join(cells), "MISSED" if any(
                              abs(pct(p, m)) > 10.0 for _, p, m in figs) else "met"))
    rows.append("| fleet model, %s: per server, every command type, bytes in/out and "
                "connections | worst %+.1f %% (%s) | | %d figures | within 10 %% each | %s | %s |"
                % (label, worst[0], worst[1], len(figs) * len(servers),
                   "MISSED" if missed else "met",
                   "; ".join(missed) if missed else "each server's figures in the block below"))
    row("connections held (connected_clients, at the hold point)", conn_p, conn_m,
        note="a process's pooled connection to each server it sent a command within "
        "idle_close_ms of the hold (no renewal: compiles < lease_ms/3)%s"
        % ("; the rule applied to the processes that went to Redis for each kernel, when "
           "they last heard from it (their --verbose lines); simulated, which process is "
           "first decided by the model: "
           "%.1f with the CPUs shared equally (a machine's first stays first), %.1f with the "
           "latest to start working run first" % (conn_sim, conn_lcfs)
           if conn_lcfs is not None else ""))
    rows.append("| fleet model, %s: inputs | compile %.1f ms mean (%d compiles), hit load %.2f ms, "
                "other work %.2f ms per kernel (%s), a sleep wakes %.2f ms late, "
                "a command's round trip %.2f ms (one after a reply; after a sleep %.2f ms) | "
                "| polls per wait %.2f "
                "predicted | report | report | %.1f s run; %d waits predicted |"
                % (label, c_mean, compiles, load_ms, work,
                   "%.2f ms of it alone: %.2f CPUs shared" % (timing.work_ms, timing.cores)
                   if timing.cores else "no sharing", timing.wake_ms, timing.rtt_ms,
                   run.get("rtt_cold_ms") or 0.0,
                   tot["polls"] / max(tot["waits"], 1), run["seconds"], tot["waits"]))
    return rows, details


# The per-server figures checked (INFO commandstats names; bytes).
PER_SERVER = ("getrange", "set", "eval", "del", "strlen", "net_in", "net_out")


def fmt(v):
    if float(v).is_integer() or abs(v) >= 100:
        return "%.0f" % v
    return "%.1f" % v


# ------------------------------------------------------------ self-check
def selftest():
    """Counts worked out by hand from the code paths (see the module doc)."""
    fails = []
    st = Settings()

    def check(what, got, want):
        if got != want:
            fails.append("%s: got %r, want %r" % (what, got, want))

    # The default schedule: sleeps 5, 10, 20, 40, 80, 160, 200, 200 ms ...
    check("polls(1 ms)", st.polls(1), 1)
    check("polls(35 ms)", st.polls(35), 3)
    check("polls(36 ms)", st.polls(36), 4)
    check("polls(1000 ms)", st.polls(1000), 10)  # 5+10+20+40+80+160+200+200+200+200
    check("renewals(9999 ms, lease 10 s)", st.renewals(9999), 2)
    check("renewals(3334 ms)", st.renewals(3334), 1)
    # *2 $6 STRLEN $59 <key>: 4+12+66; *4 $8 GETRANGE $59 <key> $1 0 $6 131072: 4+14+66+7+12
    check("request bytes of a lookup of a 59-byte key", lookup_req(), 82 + 103)
    # a 1 MiB entry, steady state: STRLEN's ":1048576\r\n", then the entry
    # whole from GETRANGE <k> 0 1048576 (7 digits of end)
    check("reply bytes of a 1 MiB hit", lookup_reply(1 << 20), 10 + 10 + (1 << 20) + 2)
    check("request bytes of a 1 MiB hit", lookup_req(1 << 20), 82 + 104)
    # :0 and an empty bulk for no key; a hit of 1000 bytes: :1000 and the entry
    check("reply bytes of a missing lookup", lookup_reply(0), 4 + 6)
    check("reply bytes of a 1000-byte hit", lookup_reply(1000), 7 + 1009)
    check("reply bytes of a 15424-byte entry", bulk(15424), 15434)
    # Two processes, one kernel, one server, compile 50 ms, no jitter: one
    # compiles (lookup miss, SET NX, lookup miss, SET, EVAL release), the
    # other waits: lookup miss, SET NX busy, polls at 5, 15, 35 ms miss (3
    # lookups, 3 SET NX busy), at 75 ms hits: 1 lookup.  Each lookup is
    # STRLEN and GETRANGE.
    t = Timing(50.0, compile_cv=1e-9, load_ms=0.0, work_ms=0.0, rtt_ms=0.0, start_spread_ms=0.0)
    c = simulate_wave(2, 1, 1, t, st, random.Random(1))
    check("two processes: compiles", sum(c["compiles"]), 1)
    check("two processes: misses", sum(c["miss"]), 2 + 1 + 3)
    check("two processes: polls that missed", sum(c["poll_miss"]), 3)
    check("two processes: SET NX busy", sum(c["setnx_busy"]), 4)
    check("two processes: hits", sum(c["hit"]), 1)
    fig = per_server(c, ["s"], [1000], [["s"]], st)["s"]
    # + the release script's GETRANGE
    check("two processes: GETRANGE commands", fig["getrange"], 6 + 1 + 1)
    check("two processes: STRLEN commands", fig["strlen"], 6 + 1)
    check("two processes: EVAL commands", fig["eval"], 1)  # the release
    check("two processes: SET commands", fig["set"], 1 + 4 + 1)
    # The same on three live servers, the key on "a": a miss reads "a"
    # alone (no server seen failing), so "b" and "c" see nothing.
    three = per_server(c, ["a"], [1000], [["a", "b", "c"]], st)
    check("three servers: GETRANGE on the key's server", three["a"]["getrange"], 6 + 1 + 1)
    check("three servers: GETRANGE on another", three["b"]["getrange"], 0)
    check("three servers: STRLEN on another", three["c"]["strlen"], 0)
    check("three servers: SET on another", three["b"]["set"], 0)
    check("three servers: bytes out on another", three["c"]["net_out"], 0)
    # Signed: each of the 4 busy SET NX is followed by a lease peek
    # (*4 $8 GETRANGE $65 <lease key> $1 0 $3 192: 4+14+72+7+9; reply $152
    # and 152 bytes: 6+152+2); the lease value is 32 + 120 bytes.
    sgn = Settings(signed=True)
    sc = simulate_wave(2, 1, 1, t, sgn, random.Random(1))
    check("signed: lease peeks", sum(sc["peek"]), 4)
    sg = per_server(sc, ["s"], [1000], [["s"]], sgn)["s"]
    check("signed: no PTTL (only a cache without keys asks)", sg["pttl"], 0)
    check("signed: GETRANGE commands", sg["getrange"], 6 + 1 + 1 + 4)
    check("signed: a lease peek's bytes", op_bytes(10000, True)["peek"], (106, 160))
    check("signed: SET NX request bytes", op_bytes(10000, True)["setnx_ok"][0],
          op_bytes(10000)["setnx_ok"][0] + 120 + 1)
    # Machines: the same wave of 8 processes as 2 machines of 4 (a
    # directory tier each, above Redis).  Each machine's first process
    # takes its directory lock and alone goes to Redis, so Redis sees the
    # two-process wave above; the 6 others wait on the lock, load from disk.
    mc = simulate_wave(8, 1, 1, t, st, random.Random(1), machines=2)
    for f, want in (("compiles", 1), ("miss", 6), ("poll_miss", 3), ("setnx_busy", 4),
                    ("hit", 1), ("disk_hits", 6), ("disk_waits", 6), ("waits", 7)):
        check("2 machines of 4: %s" % f, sum(mc[f]), want)
    check("2 machines of 4: processes that sent Redis a command", len(mc["uses"][0]), 2)
    check("2 machines of 4: connections held", held_connections(mc, ["s"], st), {"s": 2})
    # tests/test_tier_redis_fleet.c redis_machine_coalesces_on_the_directory_lock:
    # 4 processes, one directory, 20 keys: per key the holder's lookup
    # before and after its lease, one SET NX, one SET, one release.
    one = simulate_wave(4, 20, 1, t, st, random.Random(1), machines=1)
    of = per_server(one, ["s"] * 20, [1000] * 20, [["s"]] * 20, st)["s"]
    check("one machine of 4, 20 keys: STRLEN GETRANGE SET EVAL",
          [of["strlen"], of["getrange"], of["set"], of["eval"]], [40, 60, 40, 20])
    # idle_close_ms: a process whose last command on a server came more
    # than idle_close_ms before the hold holds no connection to it.
    idle = {"uses": [{0: 0.0, 1: 15000.0}, {2: 500.0}], "hold_ms": 21000.0}
    check("idle-closed connections at the hold", held_connections(idle, ["a", "b"], st),
          {"a": 1, "b": 0})
    # The run's holders: the machine's first process done with the kernel
    # before (kernel 0: with kernel 0), its last command a kernel's work
    # (100 ms) before it was done; on servers "a" (kernel 0), "b" (kernel 1).
    hr = {"done_s": [[1.0, 2.0], [0.5, 2.5]], "kill_at": None, "kernels": 2, "procs": 2}
    check("the run's holders, one machine of 2", run_holders(hr, 1, 100.0),
          [[(1, 0.4)], [(1, 2.4)]])
    check("their connections at a hold at 20.35 s",
          held_by_rule(run_holders(hr, 1, 100.0), ["a", "b"], 20.35, st), {"a": 1, "b": 1})
    check("their connections at a hold at 20.5 s",
          held_by_rule(run_holders(hr, 1, 100.0), ["a", "b"], 20.5, st), {"a": 0, "b": 1})
    # With each get's own Redis time (kernel_jit --verbose): exactly the
    # processes that went to Redis, both of them at kernel 1.
    hr["redis_s"] = [[None, 1.9], [0.45, 2.3]]
    check("the run's Redis users, measured", run_holders(hr, 1, 100.0),
          [[(1, 0.45)], [(0, 1.9), (1, 2.3)]])
    check("their connections at a hold at 21.0 s",
          held_by_rule(run_holders(hr, 1, 100.0), ["a", "b"], 21.0, st), {"a": 0, "b": 2})
    # The fleet table's wave: 1,000 processes, a 2 s compile, default polls:
    # 15 polls per wait (5+10+...+160 = 315 ms, then 200 ms each to 2115).
    check("wave polls per wait, 2 s compile", st.polls(2000), 15)
    check("wave misses of one program, 1,000 processes",
          program_counts(1000, 2000.0, st)["miss"][0], 2 + 999 * 15)
    # per server of 10: every lookup of the program (2 + 999 x 15 misses,
    # 999 hits, the release's GETRANGE) on its home, 1/10 of the homes
    wave = spread(program_counts(1000, 2000.0, st), 10, 1000, st)
    check("wave lookups of one program per server, 1,000 x 10", round(wave["getrange"], 6),
          round((2 + 999 * 15 + 999 + 1) / 10, 6))
    # Machines: 1,000 processes as 125 machines of 8 put on Redis what 125
    # single processes would (one per machine reads, leases and polls).
    check("1,000 processes as 125 x 8: wave commands",
          fleet_row(1000, 10, st, per_machine=8)["wave_cmds"], fleet_row(125, 10, st)["wave_cmds"])
    # Connections: 100 machines, 1 fetch/s each over 10 servers, 30 s idle:
    # 3 fetches per machine per server in the window, 3 connections each.
    check("connections, idle-closed", connections_idle(100, 16, 8, 10, 1.0, 30000, False), 300)
    # Sentinel mode, 1,000 processes, 10 primaries, 3 Sentinels: 333.3
    # subscriptions each; 1,000 x 10 / 60 s asks on the first; 1,000 / 60 s
    # ROLE per primary.
    sw = sentinel_watch(1000, 10, 3)
    check("watch: subscriptions per Sentinel", round(sw["sub_conns_per_sentinel"], 3), 333.333)
    check("watch: asks per second", round(sw["asks_per_s_first_sentinel"], 3), 166.667)
    check("watch: ROLE per second per primary", round(sw["role_per_s_per_primary"], 3), 16.667)
    # A renewal's request: *8, EVAL, the 238-byte script, 1, the 65-byte
    # lease key, token, "10000", the token again, the flag.
    check("renewal request bytes", op_bytes(10000)["renew"][0],
          4 + 10 + 246 + 7 + 72 + 39 + 11 + 39 + 7)
    for f in fails:
        print("selftest: " + f, file=sys.stderr)
    print("selftest: %s" % ("FAILED" if fails else "ok"))
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate")
    v.add_argument("--quick", action="store_true")
    v.add_argument("--kernel-jit")
    v.add_argument("--redis-server")
    v.add_argument("--json")
    v.add_argument("--kernels", type=int, help="kernels per process (default %d)" % KERNELS)
    v.add_argument("--machines", type=int,
                   help="machines the processes make (a directory tier each; default 4, "
                   "--quick 2; 0: none, each process on Redis alone)")
    v.add_argument("--unsigned", action="store_true",
                   help="--trust-unsigned instead of one signing key")
    sub.add_parser("table")
    sub.add_parser("selftest")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if args.cmd == "validate":
        return validate(args)
    if args.cmd == "selftest":
        return selftest()
    print(table_md())
    return 0


if __name__ == "__main__":
    sys.exit(main())
