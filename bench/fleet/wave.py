"""The prediction: a simulated deploy wave (simulate_wave: who looks,
leases, polls and compiles, kernel by kernel), its counts turned into
commands and bytes per server (per_server), the connections open at a
point (held_connections; held_by_rule for the processes a run saw go to
Redis, run_holders), and the mean over simulated runs (predict_wave)."""
import heapq
import math
import random

from .params import ENTRY_SIG, Disk, op_bytes


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
