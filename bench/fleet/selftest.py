"""`fleet_model.py selftest` (ctest fleet_model_selftest): the model on
fixed inputs against counts worked out by hand from the tier's code paths
(fleet_model.py's doc says which)."""
import random
import sys

from .params import Settings, Timing, bulk, lookup_reply, lookup_req, op_bytes
from .tables import connections_idle, fleet_row, program_counts, sentinel_watch, spread
from .wave import held_by_rule, held_connections, per_server, run_holders, simulate_wave


def selftest():
    """Counts worked out by hand from the code paths (see fleet_model.py's doc)."""
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
