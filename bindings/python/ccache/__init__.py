"""ccache: a compile-closure cache for ML runtimes (the C library's Python binding).

    import ccache
    with ccache.Cache(max_items=1024) as cache:
        key = ccache.Fingerprint().str("matmul").shape(1, (128, 64)).final()
        fn = cache.get_or_compile(key, lambda: build_kernel())

Everything is in the C extension ``ccache._ccache``; this module adds
:class:`Fingerprint.update` (Python values), :func:`key` and closes every
open cache at interpreter exit.  See README.md.
"""
from __future__ import annotations

import atexit
import struct
import weakref

from . import _ccache
from ._ccache import (  # noqa: F401  (re-exported)
    BusyError,
    ClosedError,
    CompileError,
    CorruptEntry,
    DeadlockError,
    DirectoryTier,
    Error,
    Event,
    ForkedError,
    Key,
    Program,
    RedisTier,
    Stats,
    generate_keys,
    strerror,
    trust_available,
)

__all__ = [
    "BusyError", "Cache", "ClosedError", "CompileError", "CorruptEntry", "DeadlockError",
    "DirectoryTier", "Error", "Event", "Fingerprint", "ForkedError", "Key", "Program",
    "RedisTier", "Stats", "generate_keys", "key", "strerror", "trust_available",
]

__version__ = "0.2.0"

_open_caches: "weakref.WeakSet[Cache]" = weakref.WeakSet()


class Cache(_ccache.Cache):
    """A compile cache: closures under keys, programs under program keys,
    persistent tiers behind the program table.

    Keyword arguments: ``max_items``, ``ttl_ms``, ``max_cost_bytes`` (None:
    unbounded), ``tiers`` (DirectoryTier / RedisTier, fastest first) with a
    ``codec`` (``encode(obj) -> bytes``, ``decode(bytes) -> obj``; decode
    raises :class:`CorruptEntry` for bytes that are no program),
    ``runtime_tag``, ``key_mode`` ('fast' or 'strong'), ``on_event``
    (a callable taking an :class:`Event`), ``signing_key_file``,
    ``trusted_keys`` (``NAME:BASE64`` texts), ``trusted_key_files``,
    ``trust_unsigned`` (accept unsigned entries from a shared tier),
    ``tier_min_compile_us``, ``tier_max_entry_bytes``, ``sweeper_thread``.
    """

    __slots__ = ()

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        _open_caches.add(self)


@atexit.register
def _close_all() -> None:
    # Library threads (the sweeper) must not call into an interpreter that
    # is shutting down: close every cache still open while it runs.
    for c in list(_open_caches):
        try:
            c.close(abandon=True)
        except Exception:
            pass


_F64 = struct.Struct("<d")


class Fingerprint(_ccache.Fingerprint):
    """The key builder: ``Fingerprint()`` (XXH3-128) or
    ``Fingerprint(strong=True)`` (BLAKE2b-256, for a strong cache).  Every
    append returns the builder; ``final()`` gives the :class:`Key`."""

    def update(self, *values) -> "Fingerprint":
        """Append Python values, each framed by its type: None, bool, int
        (any size), float, str, bytes-like, Key, and tuples/lists of them
        (their length first).  Anything else is a TypeError."""
        for v in values:
            self._one(v)
        return self

    def _one(self, v) -> None:
        if v is None:
            self.str("\x00none")
        elif v is True or v is False:
            self.str("\x00bool").u64(int(v))
        elif isinstance(v, int):
            if -(1 << 63) <= v < (1 << 63):
                self.str("\x00int").i64(v)
            else:
                n = (v.bit_length() + 8) // 8
                self.str("\x00bigint").bytes(v.to_bytes(n, "little", signed=True))
        elif isinstance(v, float):
            self.str("\x00float").f64(v)
        elif isinstance(v, str):
            self.str(v)
        elif isinstance(v, (bytes, bytearray, memoryview)):
            self.bytes(v)
        elif isinstance(v, Key):
            self.key(v)
        elif isinstance(v, (tuple, list)):
            self.str("\x00seq").u64(len(v))
            for x in v:
                self._one(x)
        else:
            raise TypeError(f"Fingerprint.update: cannot key a {type(v).__name__}")


def key(*values, strong: bool = False) -> Key:
    """The key of some Python values (see :meth:`Fingerprint.update`)."""
    return Fingerprint(strong=strong).update(*values).final()
