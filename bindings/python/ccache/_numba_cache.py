"""ccache.numba's caches: what install() set up, and the cache objects
numba's compilers see.

  - _state: the installed _State (install() and uninstall() rebind it):
    the options and the ccache.Cache objects over the tiers, the top-level
    one and the one of nested compiles (opened on first use) whose lock
    waits are 0; a fork()ed child opens its own.  _orig: the numba methods
    install() replaced.
  - _CCacheBase, FunctionCache, GufWrapperCache: numba's _Cache interface
    (load_overload, save_overload, ...) over them; what enable_caching
    makes once install() replaced it.  Their entries are the pickled
    reduced compile results.

The public entry points are in ccache.numba (numba.py), which re-exports
every name of this module; the replaced compile paths are in
_numba_compile.py.
"""
from __future__ import annotations

import os
import threading
import warnings

import ccache

from . import _numba_key

_state = None  # the installed _State, or None
_state_lock = threading.Lock()
_orig = {}  # what install() replaced: (owner, name) -> original


class _BytesCodec:
    """The programs are the pickled reduced compile results (bytes); None
    marks "nothing to store" (not cachable, or a load-only lookup)."""

    def encode(self, obj):
        return obj if isinstance(obj, bytes) else None

    def decode(self, data):
        return data


class _State:
    def __init__(self, options: dict):
        self.options = options
        self.pid = os.getpid()
        self.cache = self._open(wait=True)
        self._nested = None

    def _open(self, wait: bool):
        # wait=False: the cache of nested compiles (numba's lock held): its
        # tiers never wait for another process's compile lock (0 ms): a busy
        # lock means "compile here" (numba's way) and store the result.
        o = self.options
        tiers = []
        if o.get("directory"):
            tiers.append(ccache.DirectoryTier(
                o["directory"], max_bytes=o.get("max_bytes"),
                lock_wait_ms=o.get("lock_wait_ms") if wait else 0))
        if o.get("redis"):
            tiers.append(ccache.RedisTier(o["redis"], prefix=o.get("redis_prefix") or "ccache-numba",
                                          wait_ms=None if wait else 0))
        return ccache.Cache(tiers=tiers, codec=_BytesCodec(), key_mode="strong",
                            runtime_tag=_numba_key.runtime_tag(), tier_min_compile_us=0,
                            signing_key_file=o.get("signing_key_file"),
                            trusted_key_files=list(o.get("trusted_key_files") or ()),
                            trust_unsigned=bool(o.get("trust_unsigned")))

    def _check_fork(self):
        # A fork()ed child cannot use the parent's caches: it opens its own.
        if os.getpid() != self.pid:
            with _state_lock:
                if os.getpid() != self.pid:
                    self.pid = os.getpid()
                    self.cache = self._open(wait=True)
                    self._nested = None

    def get(self):
        self._check_fork()
        return self.cache

    def nested(self):
        """The cache of compiles made with numba's lock held (opened on first use)."""
        self._check_fork()
        if self._nested is None:
            with _state_lock:
                if self._nested is None:
                    self._nested = self._open(wait=False)
        return self._nested

    def close(self):
        self.cache.close(abandon=True)
        if self._nested is not None:
            self._nested.close(abandon=True)

    @property
    def where(self) -> str:
        o = self.options
        return o.get("directory") or ("redis:" + o["redis"])



# ---- the cache objects numba's compilers see ------------------------------


class _CCacheBase:
    """numba's _Cache interface (cache_path, load_overload, save_overload,
    enable, disable, flush) over the installed ccache."""

    _kind = "function"

    def __init__(self, py_func, owner=None):
        self._py_func = py_func
        self._owner = owner
        self._name = repr(py_func)
        self._enabled = True

    def __repr__(self):
        return f"<ccache.numba {type(self).__name__} py_func={self._name}>"

    @property
    def cache_path(self):
        return _state.where if _state else None

    def enable(self):
        self._enabled = True

    def disable(self):
        self._enabled = False

    def flush(self):
        pass  # entries are addressed by content: nothing to invalidate

    def key(self, sig, codegen, kind=None, extra=None):
        owner = self._owner
        options = getattr(owner, "targetoptions", None)
        locals_ = getattr(owner, "locals", None)
        return _numba_key.compile_key(kind or self._kind, self._py_func, sig, codegen, options,
                                      locals_, extra)

    # numba's load/save, for the paths that still call them (a compile this
    # module does not route through _flight): numba holds its lock there, so
    # they use the nested cache, which never waits for another process.
    def load_overload(self, sig, target_context):
        target_context.refresh()
        if not self._enabled or _state is None:
            return None
        try:
            h = _state.nested().program(self.key(sig, target_context.codegen()), lambda: None)
        except ccache.DeadlockError:
            return None
        native = h.native
        h.release()
        if native is None:
            return None
        return self._try_rebuild(target_context, native)

    def save_overload(self, sig, data):
        if not self._enabled or _state is None:
            return
        payload = self._payload(data)
        if payload is None:
            return
        try:
            _state.nested().program(self.key(sig, data.codegen), lambda: payload).release()
        except ccache.DeadlockError:
            pass

    def _try_rebuild(self, target_context, native):
        try:
            return self._rebuild(target_context, native)
        except Exception as e:  # noqa: BLE001 - a bad entry is a miss, never a failure
            warnings.warn(f"ccache.numba: could not load {self._name} ({e!r}); compiling",
                          RuntimeWarning)
            return None


class FunctionCache(_CCacheBase):
    """Replaces numba.core.caching.FunctionCache: CompileResult objects."""

    _kind = "function"

    def _payload(self, cres):
        from numba.core.serialize import dumps
        if not _cachable(cres, self._py_func):
            return None
        return dumps(cres._reduce())

    def _rebuild(self, target_context, data):
        from numba.core import compiler
        payload = _Unpickler(data, self._py_func.__globals__).load()
        return compiler.CompileResult._rebuild(target_context, *payload)


def _unpickler_class():
    import io
    import pickle

    class Unpickler(pickle.Unpickler):
        """numba's environment is rebuilt from the module named in the entry;
        a function without one (exec'd code: numba#4908) gets the live
        function's globals instead."""

        def __init__(self, data, globals_):
            super().__init__(io.BytesIO(data))
            self._globals = globals_

        def find_class(self, module, name):
            if module == "numba.core.environment" and name == "_rebuild_env":
                return self._rebuild_env
            return super().find_class(module, name)

        def _rebuild_env(self, modname, consts, env_name):
            from numba.core import environment as e
            if modname:
                try:
                    return e._rebuild_env(modname, consts, env_name)
                except ImportError:
                    pass
            env = e.lookup_environment(env_name)
            if env is None:
                env = e.Environment(self._globals)
                env.consts[:] = consts
                env.env_name = env_name
                e.Environment._memo[env_name] = env
            return env

    return Unpickler


def _Unpickler(data, globals_):
    global _UNPICKLER
    if _UNPICKLER is None:
        _UNPICKLER = _unpickler_class()
    return _UNPICKLER(data, globals_)


_UNPICKLER = None


class GufWrapperCache(_CCacheBase):
    """Replaces numba.np.ufunc.wrappers.GufWrapperCache: CodeLibrary objects."""

    _kind = "guf"

    def _payload(self, codelib):
        from numba.core.serialize import dumps
        if codelib.has_dynamic_globals:
            return None
        return dumps(codelib.serialize_using_object_code())

    def _rebuild(self, target_context, data):
        import pickle
        return target_context.codegen().unserialize_library(pickle.loads(data))


def _cachable(cres, py_func) -> bool:
    from numba.core.errors import NumbaWarning

    why = None
    if any(not x.can_cache for x in cres.lifted):
        why = "as it uses lifted code"
    elif cres.library.has_dynamic_globals:
        why = "as it uses dynamic globals (such as ctypes pointers and large global arrays)"
    if why:
        msg = f'Cannot cache compiled function "{cres.fndesc.qualname.split(".")[-1]}" {why}'
        co = py_func.__code__
        warnings.warn_explicit(msg, NumbaWarning, co.co_filename, co.co_firstlineno)
        return False
    return True
