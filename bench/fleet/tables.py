"""The fleet tables of docs/fleet.md (`fleet_model.py table`): per-server
load of large fleets by arithmetic on the wave's counts (each waiter
waiting a whole compile, an upper bound checked against the simulation),
connections with idle_close_ms, Sentinel mode's watchers, and the fleet
sizes at which a server reaches each goal."""
import math
import random

from .params import Settings, Timing
from .wave import per_server, simulate_wave


def pct(pred, meas):
    """How far pred is from meas, in % of meas."""
    if meas == 0:
        return 0.0 if pred == 0 else math.inf
    return 100.0 * (pred - meas) / meas


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
