"""`fleet_model.py validate`: runs a measured fleet (fleet_measure.py: local
redis-servers and kernel_jit processes), feeds the model the run's own
times and placement, and prints predicted vs measured as bench/run rows,
for the fleet and per server."""
import json
import math
import os
import random
import shutil
import sys
import time

from .params import Settings, Timing
from .tables import pct
from .wave import held_by_rule, predict_wave, run_holders, simulate_wave


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


def feed(reports, kernels):
    """The times the model is fed, from the run's own --json reports."""
    compiles = sum(r["compiles"] for r in reports)
    total = sum(r["compile_ms_total"] for r in reports)
    work = [(r["wall_ms"] - r["acquire_ms"]) / kernels for r in reports]
    return compiles, total / max(compiles, 1), sum(work) / len(work)


def validate(args):
    import fleet_measure as fm

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bench/
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
