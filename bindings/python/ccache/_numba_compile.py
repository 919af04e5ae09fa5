"""ccache.numba's compile paths: the numba methods install() replaces
(Dispatcher.compile, CFunc.compile, UFuncDispatcher._compile_core, the
gufunc wrapper's build and GUFuncBuilder.build_ufunc), and _flight, the
single flight on ccache they all go through: the key is computed under
numba's lock, which is released while ccache asks the tiers and waits for
another process's compile, and taken again only to compile or load.

The public entry points are in ccache.numba (numba.py), which re-exports
every name of this module; the state and cache objects are in
_numba_cache.py.
"""
from __future__ import annotations

import ccache

from . import _numba_cache as _nc
from ._numba_cache import FunctionCache, GufWrapperCache, _orig


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

    cache = _nc._state.nested() if lock.is_locked() else _nc._state.get()
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
    if not isinstance(cache, FunctionCache) or not cache._enabled or _nc._state is None:
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
    if not isinstance(cache, FunctionCache) or not cache._enabled or _nc._state is None:
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
    if not isinstance(cache, FunctionCache) or not cache._enabled or _nc._state is None:
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
    if (self.is_parfors or not isinstance(self.cache, GufWrapperCache) or _nc._state is None
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
    if lock.is_locked() or _nc._state is None:
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
