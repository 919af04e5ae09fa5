"""numba's compile cache on ccache.

    import ccache.numba
    ccache.numba.install("/var/cache/myapp/numba")        # before the first compile

Afterwards every ``@njit(cache=True)``, ``@vectorize(cache=True)``,
``@guvectorize(cache=True)`` and ``@cfunc(cache=True)`` of the process goes
through ccache: compiled code is kept in a private directory tier (and/or a
Redis tier for a fleet) under a key of what the code depends on (see
ccache._numba_key), never a file path or a modification time.

How (numba 0.56 has no plug-in point for either):
  - ``enable_caching`` of numba's Dispatcher, CFunc and ufunc builders makes a
    cache of this module instead of numba's FunctionCache, and the gufunc
    wrapper cache is this module's too;
  - ``Dispatcher.compile`` (``@njit``), ``CFunc.compile`` (``@cfunc``),
    ``UFuncDispatcher._compile_core`` (a ``@vectorize``/``@guvectorize``
    kernel), the gufunc wrapper's ``build`` and ``GUFuncBuilder.build_ufunc``
    are replaced: the key is computed under numba's global compiler lock,
    then the lock is released and ``Cache.program(key, compile)`` runs
    (_flight): the tiers are asked, and only the one owner of the key on
    this machine (the directory tier's compile lock) or fleet (Redis)
    compiles, taking numba's lock inside its compile.  A process waiting
    for another's compile holds no numba lock.
  - A callee compiled while its caller is being typed (nested: numba holds
    its lock, and cannot let it go in the middle of the caller's typing)
    goes through a second cache on the same tiers whose lock waits are 0:
    it loads the callee if a tier has it, takes the compile lock if it is
    free, and otherwise compiles the callee itself (numba's way) and stores
    it; it never waits for another thread or process.

``Dispatcher.stats.cache_hits`` / ``cache_misses`` keep numba's meaning: a
miss is a compile in this process, a hit a program loaded from ccache.

Environment (read by install_from_env(), which the ``ccache-numba.pth``
import hook runs in every process where CLOSURE_CACHE_NUMBA_DIR or
CLOSURE_CACHE_NUMBA_REDIS is set; unset, the hook does nothing):
  CLOSURE_CACHE_NUMBA_DIR              the directory tier
  CLOSURE_CACHE_NUMBA_REDIS            Redis servers ("host:port,..." or "unix:/path")
  CLOSURE_CACHE_NUMBA_REDIS_PREFIX     key prefix (default "ccache-numba")
  CLOSURE_CACHE_NUMBA_SIGNING_KEY_FILE a secret key file (this process signs)
  CLOSURE_CACHE_NUMBA_TRUSTED_KEY_FILES  public key files, ':'-separated
  CLOSURE_CACHE_NUMBA_TRUST_UNSIGNED=1 accept unsigned entries from Redis
  CLOSURE_CACHE_NUMBA_MAX_BYTES        the directory tier's size cap
  CLOSURE_CACHE_NUMBA_LOCK_WAIT_MS     the directory tier's wait for another
                                       process's compile (ms)
  CLOSURE_CACHE_NUMBA_ALLOW_UNTESTED=1 install on an untested numba version
install() sets them, so that subprocesses numba or multiprocessing start
are covered too.  The library's run-time variables are CLOSURE_CACHE_*;
the older names CCACHE_NUMBA_* (same suffixes) are still read, as
deprecated aliases, when the CLOSURE_CACHE_NUMBA_* one is not set.

The code: this module (install(), the environment, stats()),
_numba_cache.py (the installed state and the cache objects numba's
compilers see), _numba_compile.py (the compile paths install() replaces,
and the flight they share) and _numba_key.py (the key).  The names the
first two define are names of this module too.
"""
from __future__ import annotations

import os

import ccache

from . import _numba_cache as _nc
from . import _numba_compile as _ncomp
from ._numba_cache import (  # noqa: F401  (names of this module)
    FunctionCache,
    GufWrapperCache,
    _BytesCodec,
    _cachable,
    _CCacheBase,
    _orig,
    _State,
    _state_lock,
    _Unpickler,
    _unpickler_class,
)
from ._numba_compile import (  # noqa: F401  (names of this module)
    _cfunc_compile,
    _compile_here,
    _dispatcher_compile,
    _flight,
    _guf_wrapper_build,
    _gufunc_build_ufunc,
    _gufunc_dtypenums,
    _ufunc_compile_core,
)

# The public classes keep this module as their home (their repr, pickle).
FunctionCache.__module__ = GufWrapperCache.__module__ = __name__

TESTED_NUMBA = ("0.56.4",)

# The variables these modules rebind (the installed _State, the kernel
# keys, the unpickler class) live in the module that rebinds them; read
# through here, ccache.numba._state and the others are the current value.
_LIVE = {"_state": _nc, "_UNPICKLER": _nc, "_kernel_keys": _ncomp}


def __getattr__(name):
    owner = _LIVE.get(name)
    if owner is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(owner, name)


def _check_version(allow_untested: bool) -> None:
    import numba

    if numba.__version__ not in TESTED_NUMBA and not allow_untested:
        raise RuntimeError(
            f"ccache.numba: numba {numba.__version__} is not a tested version (tested: "
            f"{', '.join(TESTED_NUMBA)}); this module replaces numba internals "
            "(Dispatcher.compile, enable_caching) that change between versions.  Pass "
            "allow_untested=True (or CLOSURE_CACHE_NUMBA_ALLOW_UNTESTED=1) to try anyway.")


# ---- install ---------------------------------------------------------------


def _patch(owner, name, value, key):
    if key not in _orig:
        _orig[key] = getattr(owner, name)
    setattr(owner, name, value)


def _patch_numba() -> None:
    from numba.core import ccallback, dispatcher
    from numba.np.ufunc import ufuncbuilder, wrappers

    def disp_enable(self):
        self._cache = FunctionCache(self.py_func, owner=self)

    def cfunc_enable(self):
        self._cache = FunctionCache(self._pyfunc, owner=self._compiler)

    def ufunc_enable(self):
        self.cache = FunctionCache(self.py_func, owner=self)

    _patch(dispatcher.Dispatcher, "enable_caching", disp_enable, ("Dispatcher", "enable_caching"))
    _patch(dispatcher.Dispatcher, "compile", _dispatcher_compile, ("Dispatcher", "compile"))
    _patch(ccallback.CFunc, "enable_caching", cfunc_enable, ("CFunc", "enable_caching"))
    _patch(ccallback.CFunc, "compile", _cfunc_compile, ("CFunc", "compile"))
    _patch(ufuncbuilder.UFuncDispatcher, "enable_caching", ufunc_enable,
           ("UFuncDispatcher", "enable_caching"))
    _patch(ufuncbuilder.UFuncDispatcher, "_compile_core", _ufunc_compile_core,
           ("UFuncDispatcher", "_compile_core"))
    _patch(wrappers, "GufWrapperCache", GufWrapperCache, ("wrappers", "GufWrapperCache"))
    _patch(wrappers._GufuncWrapper, "build", _guf_wrapper_build, ("_GufuncWrapper", "build"))
    _patch(ufuncbuilder.GUFuncBuilder, "build_ufunc", _gufunc_build_ufunc,
           ("GUFuncBuilder", "build_ufunc"))


def install(directory: str | None = None, redis: str | None = None, *,
            redis_prefix: str | None = None, max_bytes: int | None = None,
            lock_wait_ms: int | None = None, signing_key_file: str | None = None,
            trusted_key_files=(), trust_unsigned: bool = False,
            allow_untested: bool = False, export: bool = True) -> ccache.Cache:
    """Put every cache=True compile of numba in this process on ccache.

    directory: a private directory tier (created 0700); redis: servers for
    a fleet's tier (needs trusted_key_files, or trust_unsigned=True).  At
    least one of them.  export: also set the CLOSURE_CACHE_NUMBA_* variables so
    subprocesses install the same (through the .pth hook).  Returns the Cache.
    Raises RuntimeError on an untested numba version.  Call it again to
    change the options; uninstall() restores numba."""
    if not directory and not redis:
        raise ValueError("ccache.numba.install: give a directory, redis servers, or both")
    _check_version(allow_untested)
    options = dict(directory=os.path.abspath(directory) if directory else None, redis=redis,
                   redis_prefix=redis_prefix, max_bytes=max_bytes, lock_wait_ms=lock_wait_ms,
                   signing_key_file=signing_key_file,
                   trusted_key_files=tuple(trusted_key_files), trust_unsigned=trust_unsigned)
    new = _State(options)
    with _state_lock:
        old, _nc._state = _nc._state, new
        _patch_numba()
    if old is not None:
        old.close()
    if export:
        env = {
            "DIR": options["directory"], "REDIS": redis, "REDIS_PREFIX": redis_prefix,
            "MAX_BYTES": None if max_bytes is None else str(max_bytes),
            "LOCK_WAIT_MS": None if lock_wait_ms is None else str(lock_wait_ms),
            "SIGNING_KEY_FILE": signing_key_file,
            "TRUSTED_KEY_FILES": ":".join(trusted_key_files) or None,
            "TRUST_UNSIGNED": "1" if trust_unsigned else None,
            "ALLOW_UNTESTED": "1" if allow_untested else None,
        }
        for k, v in env.items():
            os.environ.pop(_OLD_PREFIX + k, None)
            if v:
                os.environ[_PREFIX + k] = v
            else:
                os.environ.pop(_PREFIX + k, None)
    return new.cache


_PREFIX = "CLOSURE_CACHE_NUMBA_"
_OLD_PREFIX = "CCACHE_NUMBA_"  # deprecated aliases, read when the new name is unset


def _env(name: str) -> str | None:
    """CLOSURE_CACHE_NUMBA_<name>, else its deprecated alias CCACHE_NUMBA_<name>."""
    e = os.environ
    v = e.get(_PREFIX + name)
    return v if v is not None else e.get(_OLD_PREFIX + name)


def _env_int(name: str) -> int | None:
    """An integer variable, or None when unset; a ValueError naming it."""
    v = _env(name)
    if not v:
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"{_PREFIX}{name}={v!r}: not a whole number "
                         "(bytes, or milliseconds for LOCK_WAIT_MS)") from None


# install()'s argument names as the variables that set them, for its errors.
_AS_VARIABLES = (("trusted_keys / trusted_key_files", _PREFIX + "TRUSTED_KEY_FILES"),
                 ("signing_key_file", _PREFIX + "SIGNING_KEY_FILE"),
                 ("pass trust_unsigned=True", "set " + _PREFIX + "TRUST_UNSIGNED=1"),
                 ("allow_untested=True", _PREFIX + "ALLOW_UNTESTED=1"))


def install_from_env() -> ccache.Cache | None:
    """install() from the CLOSURE_CACHE_NUMBA_* variables (or their
    deprecated CCACHE_NUMBA_* aliases); None when neither
    CLOSURE_CACHE_NUMBA_DIR nor CLOSURE_CACHE_NUMBA_REDIS is set.  Its
    errors name the variables, not install()'s arguments."""
    if not _env("DIR") and not _env("REDIS"):
        return None
    files = [f for f in (_env("TRUSTED_KEY_FILES") or "").split(":") if f]
    try:
        return install(_env("DIR") or None, _env("REDIS") or None,
                       redis_prefix=_env("REDIS_PREFIX") or None,
                       max_bytes=_env_int("MAX_BYTES"),
                       lock_wait_ms=_env_int("LOCK_WAIT_MS"),
                       signing_key_file=_env("SIGNING_KEY_FILE") or None,
                       trusted_key_files=files,
                       trust_unsigned=_env("TRUST_UNSIGNED") == "1",
                       allow_untested=_env("ALLOW_UNTESTED") == "1", export=False)
    except (ValueError, RuntimeError) as e:
        msg = str(e)
        for arg, var in _AS_VARIABLES:
            msg = msg.replace(arg, var)
        raise type(e)(f"ccache.numba from the {_PREFIX}* variables: {msg}") from e


def uninstall() -> None:
    """Give numba its own caching back (dispatchers made since keep ours)."""
    from numba.core import ccallback, dispatcher
    from numba.np.ufunc import ufuncbuilder, wrappers

    owners = {"Dispatcher": dispatcher.Dispatcher, "CFunc": ccallback.CFunc,
              "UFuncDispatcher": ufuncbuilder.UFuncDispatcher, "wrappers": wrappers,
              "_GufuncWrapper": wrappers._GufuncWrapper,
              "GUFuncBuilder": ufuncbuilder.GUFuncBuilder}
    with _state_lock:
        for (owner, name), v in _orig.items():
            setattr(owners[owner], name, v)
        _orig.clear()
        old, _nc._state = _nc._state, None
    if old is not None:
        old.close()


def installed() -> ccache.Cache | None:
    """The Cache top-level numba compiles go through, or None.  (Nested
    compiles, made while numba holds its lock, go through a second Cache on
    the same tiers whose lock waits are 0; stats() counts both.)"""
    return _nc._state.get() if _nc._state else None


def stats() -> dict | None:
    """The counters of every compile ccache.numba made in this process: the
    fields of ccache.Stats summed over installed() and the cache of nested
    compiles (the *_max fields: their maximum).  None when not installed."""
    if _nc._state is None:
        return None
    caches = [_nc._state.get()] + ([_nc._state._nested] if _nc._state._nested is not None else [])
    all_stats = [c.stats() for c in caches]
    return {f: (max if f.endswith("_max") else sum)(getattr(st, f) for st in all_stats)
            for f in ccache.Stats.__match_args__}
