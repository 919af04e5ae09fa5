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


# ---- one compile per machine/fleet: the flight every compile path uses ------


def _flight(pkey, compile_locked):
    """Run a compile under ccache's single-flight; returns (result, native).

    compile_locked() compiles with numba's lock held (taken here) and returns
    (result, payload bytes or None).  result is not None when this process
    compiled; otherwise native is the entry another process (or a tier)
    supplied, or None: (None, None) means "compile it yourself".

    Top level (numba's lock not held by this thread): the main cache, whose
    tiers wait for another process's compile with numba's lock released.
    Nested (a callee typed inside its caller's compile: numba holds its lock
    here, and numba's lock cannot be let go in the middle of the caller's
    typing): the nested cache, whose tiers never wait: a callee another
    process is compiling is compiled here too (numba's way) and stored."""
    from numba.core.compiler_lock import global_compiler_lock as lock

    done = {}

    def compile_fn():
        with lock:
            result, payload = compile_locked()
        done["result"] = result
        return payload

    cache = _state.nested() if lock.is_locked() else _state.get()
    try:
        h = cache.program(pkey, compile_fn)
    except ccache.DeadlockError:  # recursion through the same key: numba's way
        return None, None
    native = h.native
    h.release()
    return done.get("result"), native


# ---- @njit: Dispatcher.compile ----------------------------------------------


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

    def compile_locked():
        with self._compiling_counter:
            cres = self.overloads.get(tuple(args))
            if cres is None:
                cres = _compile_here(self, args, return_type, sig)
            return cres, cache._payload(cres)

    cres, native = _flight(pkey, compile_locked)
    if cres is not None:
        return cres.entry_point
    with lock:
        existing = self.overloads.get(tuple(args))
        if existing is not None:
            return existing.entry_point
        cres = cache._try_rebuild(self.targetctx, native) if native is not None else None
        if cres is None:
            with self._compiling_counter:
                return _compile_here(self, args, return_type, sig).entry_point
        self._cache_hits[sig] += 1
        if not cres.objectmode:
            self.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        self.add_overload(cres)
        return cres.entry_point


# ---- @cfunc: CFunc.compile ----------------------------------------------------


def _cfunc_compile(self):
    cache = self._cache
    from numba.core.compiler_lock import global_compiler_lock as lock
    if not isinstance(cache, FunctionCache) or not cache._enabled or _state is None:
        return _orig[("CFunc", "compile")](self)
    tctx = self._targetdescr.target_context
    with lock:
        tctx.refresh()
        pkey = cache.key(self._sig, tctx.codegen())

    def compile_locked():
        cres = self._compile_uncached()
        return cres, cache._payload(cres)

    cres, native = _flight(pkey, compile_locked)
    with lock:
        if cres is None and native is not None:
            cres = cache._try_rebuild(tctx, native)
            if cres is not None:
                self._cache_hits += 1
        if cres is None:
            cres = self._compile_uncached()
        self._library = cres.library
        self._wrapper_name = cres.fndesc.llvm_cfunc_wrapper_name
        self._wrapper_address = self._library.get_pointer_to_function(self._wrapper_name)


# ---- @vectorize / @guvectorize: the kernel (UFuncDispatcher._compile_core) ---

_kernel_keys = None  # cres.library -> the key its kernel was compiled or loaded under


def _ufunc_compile_core(self, sig, flags, locals):
    """UFuncDispatcher._compile_core (numba 0.56.4) with the load, compile
    and save as one flight, numba's lock taken only to compile or load."""
    global _kernel_keys
    cache = self.cache
    if not isinstance(cache, FunctionCache) or not cache._enabled or _state is None:
        return _orig[("UFuncDispatcher", "_compile_core")](self, sig, flags, locals)
    import weakref

    from numba.core import compiler, sigutils, targetconfig
    from numba.core.compiler_lock import global_compiler_lock as lock

    if _kernel_keys is None:
        _kernel_keys = weakref.WeakKeyDictionary()
    typingctx = self.targetdescr.typing_context
    targetctx = self.targetdescr.target_context
    with lock:
        targetctx.refresh()
        # The flags the ufunc builder made (numpy error model, no CPython
        # wrapper, the decorator's options): an @njit of the same function
        # has another key.
        pkey = cache.key(sig, targetctx.codegen(), kind="ufunc",
                         extra=(flags.summary(), repr(sorted((locals or {}).items()))))

    def compile_locked():
        with targetconfig.ConfigStack().enter(flags.copy()):
            args, return_type = sigutils.normalize_signature(sig)
            cres = compiler.compile_extra(typingctx, targetctx, self.py_func, args=args,
                                          return_type=return_type, flags=flags, locals=locals)
        return cres, cache._payload(cres)

    cres, native = _flight(pkey, compile_locked)
    with lock:
        if cres is None and native is not None:
            with targetconfig.ConfigStack().enter(flags.copy()):
                cres = cache._try_rebuild(targetctx, native)
        if cres is None:
            cres = compile_locked()[0]
        _kernel_keys[cres.library] = pkey
        if self.overloads.get(cres.signature) is None:
            self.overloads[cres.signature] = cres
    return cres


# ---- @guvectorize: the wrapper (GUFuncBuilder.build_ufunc) --------------------


def _guf_wrapper_build(self):
    """_GufuncWrapper.build: the wrapper library as a flight of its own
    (keyed by the kernel's key and the layout), numba's lock taken only to
    compile or load it."""
    from numba.core.compiler_lock import global_compiler_lock as lock
    from numba.np.ufunc import wrappers

    kkey = _kernel_keys.get(self.cres.library) if _kernel_keys is not None else None
    if (self.is_parfors or not isinstance(self.cache, GufWrapperCache) or _state is None
            or kkey is None):
        return _orig[("_GufuncWrapper", "build")](self)
    wrapper_name = "__gufunc__." + self.fndesc.mangled_name
    ctx = self.context
    with lock:
        ctx.refresh()
        wkey = self.cache.key(self.cres.signature, ctx.codegen(), kind="gufwrapper",
                              extra=(bytes(kkey), repr(self.sin), repr(self.sout),
                                     self.is_objectmode, type(self).__name__))

    def compile_locked():
        lib = ctx.codegen().create_library(str(self))
        lib.enable_object_caching()
        self._build_wrapper(lib, wrapper_name)
        return lib, self.cache._payload(lib)

    lib, native = _flight(wkey, compile_locked)
    with lock:
        if lib is None and native is not None:
            lib = self.cache._try_rebuild(ctx, native)
        if lib is None:
            lib = compile_locked()[0]
    return wrappers._wrapper_info(library=lib, env=self.env, name=wrapper_name)


def _gufunc_build_ufunc(self):
    """GUFuncBuilder.build_ufunc (numba 0.56.4) with the wrappers built
    (each a flight) before numba's lock is taken for the rest."""
    from numba.core.compiler_lock import global_compiler_lock as lock
    if lock.is_locked() or _state is None:
        return _orig[("GUFuncBuilder", "build_ufunc")](self)
    from numba.np.ufunc import _internal, wrappers

    if not self.nb_func:
        raise TypeError("No definition")
    infos = [wrappers.build_gufunc_wrapper(self.py_func, self._cres[sig], self.sin, self.sout,
                                           cache=self.cache, is_parfors=False)
             for sig in self._sigs]
    with lock:
        type_list, func_list, keepalive = [], [], []
        for sig, info in zip(self._sigs, infos):
            cres = self._cres[sig]
            type_list.append(_gufunc_dtypenums(cres.signature))
            func_list.append(int(info.library.get_pointer_to_function(info.name)))
            keepalive.append((cres.library, info.env))
        return _internal.fromfunc(
            self.py_func.__name__, self.py_func.__doc__, func_list, type_list,
            len(self.sin), len(self.sout), [None] * len(func_list), keepalive,
            self.identity, self.signature)


def _gufunc_dtypenums(signature):
    from numba.core import types
    from numba.np.numpy_support import as_dtype
    return [as_dtype(a.dtype if isinstance(a, types.Array) else a).num for a in signature.args]


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
    global _state
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
        old, _state = _state, None
    if old is not None:
        old.close()


def installed() -> ccache.Cache | None:
    """The Cache top-level numba compiles go through, or None.  (Nested
    compiles, made while numba holds its lock, go through a second Cache on
    the same tiers whose lock waits are 0; stats() counts both.)"""
    return _state.get() if _state else None


def stats() -> dict | None:
    """The counters of every compile ccache.numba made in this process: the
    fields of ccache.Stats summed over installed() and the cache of nested
    compiles (the *_max fields: their maximum).  None when not installed."""
    if _state is None:
        return None
    caches = [_state.get()] + ([_state._nested] if _state._nested is not None else [])
    all_stats = [c.stats() for c in caches]
    return {f: (max if f.endswith("_max") else sum)(getattr(st, f) for st in all_stats)
            for f in ccache.Stats.__match_args__}
