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
Sentinel mode adds the watcher (redis_watch.c; fleet/tables.py sentinel_watch()): per
process one connection holding SUBSCRIBE +switch-master on one Sentinel
(spread over the Sentinels by process id), and every 60 s per primary name
(5 s while unsubscribed, and once per +switch-master naming it) an ask: a new
connection to a Sentinel (the list's first that answers) with SENTINEL
get-master-addr-by-name, and a new connection to the answer with ROLE.

The model's parts are in bench/fleet/ (its __init__.py lists them); this
file is the command line, and `import fleet_model` (with bench/ on the
path) still gives every name the parts define.
"""
import argparse
import os
import sys

# The parts, found beside this file whatever the working directory (and
# fleet_measure.py, which `validate` runs the fleet with).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Every name of the parts, as when they were all in this file (docs/fleet.md
# calls fleet_model.fleet_row and Settings; users may call others).
from fleet.params import *  # noqa: E402,F401,F403
from fleet.wave import *  # noqa: E402,F401,F403
from fleet.tables import *  # noqa: E402,F401,F403
from fleet.validation import *  # noqa: E402,F401,F403
from fleet.selftest import selftest  # noqa: E402
from fleet.tables import table_md  # noqa: E402
from fleet.validation import KERNELS, validate  # noqa: E402


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
    if args.cmd == "validate":
        return validate(args)
    if args.cmd == "selftest":
        return selftest()
    print(table_md())
    return 0


if __name__ == "__main__":
    sys.exit(main())
