"""The model's parameters: what each Redis command the tier sends and its
reply cost in bytes (the tier's wire format, from its code), the tier's
options (Settings), the times of a measured run the model is fed (Timing)
and the directory tier's lock polls (Disk)."""


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
    defaults, include/ccache/tier_redis.h)."""

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
