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
  - ``Dispatcher.compile`` (``@njit``) is replaced: the key is computed under
    numba's global compiler lock, then the lock is released and
    ``Cache.program(key, compile)`` runs: the tiers are asked, and only the
    one owner of the key on this machine (the directory tier's compile lock)
    or fleet (Redis) compiles, taking numba's lock inside its compile.  A
    process waiting for another's compile holds no numba lock.  A callee
    compiled while its caller is being typed is compiled with the lock held
    (numba takes it first); if another thread of this process is already
    compiling that callee, it is compiled here as numba would, without ccache,
    so that the two never wait on each other.
  - ``CFunc.compile`` (``@cfunc``) is replaced the same way.  ufunc
    compiles (``@vectorize``, ``@guvectorize``) load and save through the
    tiers (a warm process compiles nothing) but have no cross-process
    single-flight.

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
  CLOSURE_CACHE_NUMBA_ALLOW_UNTESTED=1 install on an untested numba version
(Their old names, CCACHE_NUMBA_*, are still read; the new name wins.)
install() sets them, so that subprocesses numba or multiprocessing start
are covered too.
"""
from __future__ import annotations

import os
import threading
import warnings

import ccache

from . import _numba_key

TESTED_NUMBA = ("0.56.4",)

_state = None  # the installed _State, or None
_state_lock = threading.Lock()
_inflight: dict = {}  # key -> thread id compiling it through ccache here
_inflight_lock = threading.Lock()
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
        self.cache = self._open()

    def _open(self):
        o = self.options
        tiers = []
        if o.get("directory"):
            tiers.append(ccache.DirectoryTier(o["directory"], max_bytes=o.get("max_bytes"),
                                              lock_wait_ms=o.get("lock_wait_ms")))
        if o.get("redis"):
            tiers.append(ccache.RedisTier(o["redis"], prefix=o.get("redis_prefix") or "ccache-numba"))
        return ccache.Cache(tiers=tiers, codec=_BytesCodec(), key_mode="strong",
                            runtime_tag=_numba_key.runtime_tag(), tier_min_compile_us=0,
                            signing_key_file=o.get("signing_key_file"),
                            trusted_key_files=list(o.get("trusted_key_files") or ()),
                            trust_unsigned=bool(o.get("trust_unsigned")))

    def get(self):
        # A fork()ed child cannot use the parent's cache: it opens its own.
        if os.getpid() != self.pid:
            with _state_lock:
                if os.getpid() != self.pid:
                    self.pid = os.getpid()
                    self.cache = self._open()
        return self.cache

    @property
    def where(self) -> str:
        o = self.options
        return o.get("directory") or ("redis:" + o["redis"])


def _check_version(allow_untested: bool) -> None:
    import numba

    if numba.__version__ not in TESTED_NUMBA and not allow_untested:
        raise RuntimeError(
            f"ccache.numba: numba {numba.__version__} is not a tested version (tested: "
            f"{', '.join(TESTED_NUMBA)}); this module replaces numba internals "
            "(Dispatcher.compile, enable_caching) that change between versions.  Pass "
            "allow_untested=True (or CLOSURE_CACHE_NUMBA_ALLOW_UNTESTED=1) to try anyway.")


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

    def key(self, sig, codegen):
        owner = self._owner
        options = getattr(owner, "targetoptions", None)
        locals_ = getattr(owner, "locals", None)
        return _numba_key.compile_key(self._kind, self._py_func, sig, codegen, options, locals_)

    # numba's save/load: tier lookups and stores without cross-process flight
    def load_overload(self, sig, target_context):
        target_context.refresh()
        if not self._enabled or _state is None:
            return None
        cache = _state.get()
        try:
            h = cache.program(self.key(sig, target_context.codegen()), lambda: None)
        except ccache.DeadlockError:
            return None
        native = h.native
        h.release()
        if native is None:
            return None
        try:
            return self._rebuild(target_context, native)
        except Exception as e:  # noqa: BLE001 - a bad entry is a miss, never a failure
            warnings.warn(f"ccache.numba: could not load {self._name} ({e!r}); compiling",
                          RuntimeWarning)
            return None

    def save_overload(self, sig, data):
        if not self._enabled or _state is None:
            return
        payload = self._payload(data)
        if payload is None:
            return
        cache = _state.get()
        try:
            cache.program(self.key(sig, data.codegen), lambda: payload).release()
        except ccache.DeadlockError:
            pass


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


# ---- @njit: Dispatcher.compile with cross-process single-flight -----------


def _compile_here(self, args, return_type, sig):
    """numba's own compile path (under its lock), without ccache."""
    from numba.core import errors
    from numba.core import event as ev

    self._cache_misses[sig] += 1
    ev_details = dict(dispatcher=self, args=args, return_type=return_type)
    with ev.trigger_event("numba:compile", data=ev_details):
        try:
            cres = self._compiler.compile(args, return_type)
        except errors.ForceLiteralArg as e:
            def folded(args, kws):
                return self._compiler.fold_argument_types(args, kws)[1]
            raise e.bind_fold_arguments(folded)
        self.add_overload(cres)
    return cres


def _dispatcher_compile(self, sig):
    cache = self._cache
    if not isinstance(cache, FunctionCache) or not cache._enabled or _state is None:
        return _orig[("Dispatcher", "compile")](self, sig)
    disp = self._get_dispatcher_for_current_target()
    if disp is not self:
        return disp.compile(sig)
    from numba.core import sigutils
    from numba.core.compiler_lock import global_compiler_lock as lock

    args, return_type = sigutils.normalize_signature(sig)
    with lock:
        if not self._can_compile:
            raise RuntimeError("compilation disabled")
        existing = self.overloads.get(tuple(args))
        if existing is not None:
            return existing.entry_point
        self.targetctx.refresh()
        pkey = cache.key(sig, self.targetctx.codegen())
    me = threading.get_ident()
    nested = lock.is_locked()  # a callee typed inside its caller's compile
    with _inflight_lock:
        other = _inflight.get(pkey)
        if nested and other is not None and other != me:
            other = "bypass"
        elif other is None:
            _inflight[pkey] = me
    if other == "bypass":
        with lock:
            existing = self.overloads.get(tuple(args))
            if existing is not None:
                return existing.entry_point
            with self._compiling_counter:
                return _compile_here(self, args, return_type, sig).entry_point
    done = {}

    def compile_fn():
        with lock:
            with self._compiling_counter:
                cres = self.overloads.get(tuple(args))
                if cres is None:
                    cres = _compile_here(self, args, return_type, sig)
                done["cres"] = cres
                return cache._payload(cres)

    try:
        try:
            h = _state.get().program(pkey, compile_fn)
        except ccache.DeadlockError:  # recursion through the same key: numba's way
            with lock:
                existing = self.overloads.get(tuple(args))
                if existing is not None:
                    return existing.entry_point
                return _compile_here(self, args, return_type, sig).entry_point
    finally:
        with _inflight_lock:
            if _inflight.get(pkey) == me:
                del _inflight[pkey]
    native = h.native
    h.release()
    if "cres" in done:
        return done["cres"].entry_point
    with lock:
        existing = self.overloads.get(tuple(args))
        if existing is not None:
            return existing.entry_point
        cres = None
        if native is not None:
            try:
                cres = cache._rebuild(self.targetctx, native)
            except Exception as e:  # noqa: BLE001 - a bad entry is a miss
                warnings.warn(f"ccache.numba: could not load {cache._name} ({e!r}); compiling",
                              RuntimeWarning)
        if cres is None:
            with self._compiling_counter:
                return _compile_here(self, args, return_type, sig).entry_point
        self._cache_hits[sig] += 1
        if not cres.objectmode:
            self.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        self.add_overload(cres)
        return cres.entry_point


# ---- @cfunc: CFunc.compile with the same single-flight ----------------------


def _cfunc_compile(self):
    cache = self._cache
    from numba.core.compiler_lock import global_compiler_lock as lock
    if (not isinstance(cache, FunctionCache) or not cache._enabled or _state is None
            or lock.is_locked()):
        return _orig[("CFunc", "compile")](self)
    tctx = self._targetdescr.target_context
    with lock:
        tctx.refresh()
        pkey = cache.key(self._sig, tctx.codegen())
    done = {}

    def compile_fn():
        with lock:
            cres = self._compile_uncached()
            done["cres"] = cres
            return cache._payload(cres)

    try:
        h = _state.get().program(pkey, compile_fn)
    except ccache.DeadlockError:
        return _orig[("CFunc", "compile")](self)
    native = h.native
    h.release()
    with lock:
        cres = done.get("cres")
        if cres is None and native is not None:
            try:
                cres = cache._rebuild(tctx, native)
                self._cache_hits += 1
            except Exception as e:  # noqa: BLE001 - a bad entry is a miss
                warnings.warn(f"ccache.numba: could not load {cache._name} ({e!r}); compiling",
                              RuntimeWarning)
        if cres is None:
            cres = self._compile_uncached()
        self._library = cres.library
        self._wrapper_name = cres.fndesc.llvm_cfunc_wrapper_name
        self._wrapper_address = self._library.get_pointer_to_function(self._wrapper_name)


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
    _patch(wrappers, "GufWrapperCache", GufWrapperCache, ("wrappers", "GufWrapperCache"))


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
    global _state
    if not directory and not redis:
        raise ValueError("ccache.numba.install: give a directory, redis servers, or both")
    _check_version(allow_untested)
    options = dict(directory=os.path.abspath(directory) if directory else None, redis=redis,
                   redis_prefix=redis_prefix, max_bytes=max_bytes, lock_wait_ms=lock_wait_ms,
                   signing_key_file=signing_key_file,
                   trusted_key_files=tuple(trusted_key_files), trust_unsigned=trust_unsigned)
    new = _State(options)
    with _state_lock:
        old, _state = _state, new
        _patch_numba()
    if old is not None:
        old.cache.close(abandon=True)
    if export:
        env = {
            "CLOSURE_CACHE_NUMBA_DIR": options["directory"], "CLOSURE_CACHE_NUMBA_REDIS": redis,
            "CLOSURE_CACHE_NUMBA_REDIS_PREFIX": redis_prefix,
            "CLOSURE_CACHE_NUMBA_MAX_BYTES": None if max_bytes is None else str(max_bytes),
            "CLOSURE_CACHE_NUMBA_SIGNING_KEY_FILE": signing_key_file,
            "CLOSURE_CACHE_NUMBA_TRUSTED_KEY_FILES": ":".join(trusted_key_files) or None,
            "CLOSURE_CACHE_NUMBA_TRUST_UNSIGNED": "1" if trust_unsigned else None,
            "CLOSURE_CACHE_NUMBA_ALLOW_UNTESTED": "1" if allow_untested else None,
        }
        for k, v in env.items():
            os.environ.pop("CCACHE_NUMBA_" + k[len("CLOSURE_CACHE_NUMBA_"):], None)  # old name
            if v:
                os.environ[k] = v
            else:
                os.environ.pop(k, None)
    return new.cache


def _env(name: str) -> str | None:
    """CLOSURE_CACHE_NUMBA_<name>, or the name it had before,
    CCACHE_NUMBA_<name> (still read; the new name wins)."""
    return (os.environ.get("CLOSURE_CACHE_NUMBA_" + name)
            or os.environ.get("CCACHE_NUMBA_" + name) or None)


def install_from_env() -> ccache.Cache | None:
    """install() from the CLOSURE_CACHE_NUMBA_* variables (or their old
    CCACHE_NUMBA_* names); None when neither CLOSURE_CACHE_NUMBA_DIR nor
    CLOSURE_CACHE_NUMBA_REDIS is set."""
    if not _env("DIR") and not _env("REDIS"):
        return None
    mb = _env("MAX_BYTES")
    files = [f for f in (_env("TRUSTED_KEY_FILES") or "").split(":") if f]
    return install(_env("DIR"), _env("REDIS"),
                   redis_prefix=_env("REDIS_PREFIX"),
                   max_bytes=int(mb) if mb else None,
                   signing_key_file=_env("SIGNING_KEY_FILE"),
                   trusted_key_files=files,
                   trust_unsigned=_env("TRUST_UNSIGNED") == "1",
                   allow_untested=_env("ALLOW_UNTESTED") == "1", export=False)


def uninstall() -> None:
    """Give numba its own caching back (dispatchers made since keep ours)."""
    global _state
    from numba.core import ccallback, dispatcher
    from numba.np.ufunc import ufuncbuilder, wrappers

    owners = {"Dispatcher": dispatcher.Dispatcher, "CFunc": ccallback.CFunc,
              "UFuncDispatcher": ufuncbuilder.UFuncDispatcher, "wrappers": wrappers}
    with _state_lock:
        for (owner, name), v in _orig.items():
            setattr(owners[owner], name, v)
        _orig.clear()
        old, _state = _state, None
    if old is not None:
        old.cache.close(abandon=True)


def installed() -> ccache.Cache | None:
    """The Cache numba compiles go through, or None."""
    return _state.get() if _state else None
