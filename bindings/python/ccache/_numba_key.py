"""The key of a numba compile: what the compiled code depends on, without
file paths or modification times (see ccache.numba).

Covered: the code object (bytecode, constants, names, argument layout, flags,
nested code objects), closure cell values, default arguments, the values of
the globals the code names (jitted functions and plain functions by their
own key, recursively; modules by name, plus the attributes the code names
on them), the signature, the target (triple, CPU name, features), the
dispatcher's options and locals, and the kind of cache (function, cfunc,
ufunc, gufunc wrapper).  The numba/llvmlite/LLVM/NumPy/Python versions are
the runtime tag, outside the key.

Not covered: values reached through attribute chains deeper than one level
(``mod.sub.f``), the state of objects whose repr does not show it, numba's
@overload/@intrinsic implementations outside the versions in the tag, and
environment variables numba reads (NUMBA_OPT and friends) other than those
listed in _CONFIG.
"""
from __future__ import annotations

import enum
import types

from . import Fingerprint, Key

_CONFIG = ("OPT", "BOUNDSCHECK", "FASTMATH", "DEBUGINFO_DEFAULT", "CPU_NAME", "CPU_FEATURES",
           "THREADING_LAYER", "LOOP_VECTORIZE", "SLP_VECTORIZE")


def _is_dispatcher(v) -> bool:
    try:
        from numba.core.dispatcher import Dispatcher
        from numba.core.ccallback import CFunc
    except ImportError:  # pragma: no cover
        return False
    return isinstance(v, (Dispatcher, CFunc))


def _value(fp: Fingerprint, v, seen: set) -> None:
    if v is None or isinstance(v, (bool, int, float, str, bytes)):
        fp.update(v)
        return
    if isinstance(v, (tuple, list)):
        fp.str("\x01seq").u64(len(v))
        for x in v:
            _value(fp, x, seen)
        return
    if isinstance(v, types.CodeType):
        _code(fp, v, seen)
        return
    if _is_dispatcher(v):
        fp.str("\x01jit").str(type(v).__name__)
        opts = getattr(v, "targetoptions", None) or {}
        fp.str(repr(sorted((k, repr(x)) for k, x in opts.items() if k != "cache")))
        _function(fp, getattr(v, "py_func", None) or v._pyfunc, seen)
        return
    pf = getattr(v, "py_func", None)
    if isinstance(pf, types.FunctionType) and not isinstance(v, types.FunctionType):
        # Other numba callables (DUFunc, ...): by the function they compile.
        fp.str("\x01jitlike").str(type(v).__name__)
        _function(fp, pf, seen)
        return
    if isinstance(v, types.FunctionType):
        fp.str("\x01func")
        _function(fp, v, seen)
        return
    if isinstance(v, types.ModuleType):
        fp.str("\x01module").str(v.__name__)
        return
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if np is not None:
        if isinstance(v, np.ndarray):
            fp.str("\x01ndarray").str(v.dtype.str).update(tuple(v.shape))
            fp.bytes(np.ascontiguousarray(v).tobytes() if v.dtype != object else repr(v).encode())
            return
        if isinstance(v, np.generic):
            fp.str("\x01npscalar").str(v.dtype.str).bytes(v.tobytes())
            return
        if isinstance(v, np.dtype):
            fp.str("\x01dtype").str(v.str)
            return
    if isinstance(v, complex):
        fp.str("\x01complex").f64(v.real).f64(v.imag)
        return
    if isinstance(v, enum.Enum):
        fp.str("\x01enum").str(type(v).__module__ + "." + type(v).__qualname__)
        _value(fp, v.value, seen)
        return
    if isinstance(v, type):
        fp.str("\x01type").str(f"{v.__module__}.{v.__qualname__}")
        return
    if isinstance(v, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        fp.str("\x01builtin").str(f"{getattr(v, '__module__', '')}.{v.__qualname__}")
        return
    # Anything else by type and repr (numba types print what they are); a
    # repr with an address never matches again: a miss, never a stale hit.
    fp.str("\x01obj").str(f"{type(v).__module__}.{type(v).__qualname__}").str(repr(v))


def _code(fp: Fingerprint, co: types.CodeType, seen: set) -> None:
    fp.str("\x01code").bytes(co.co_code)
    fp.update(co.co_names, co.co_varnames, co.co_freevars, co.co_cellvars, co.co_argcount,
              co.co_posonlyargcount, co.co_kwonlyargcount, co.co_flags)
    fp.u64(len(co.co_consts))
    for c in co.co_consts:
        _value(fp, c, seen)


def _names(co: types.CodeType, out: set) -> set:
    out.update(co.co_names)
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            _names(c, out)
    return out


def _function(fp: Fingerprint, fn, seen: set) -> None:
    if fn is None:
        fp.str("\x01nofunc")
        return
    if id(fn) in seen:  # recursion: named, not followed again
        fp.str("\x01again").str(f"{fn.__module__}.{fn.__qualname__}")
        return
    seen.add(id(fn))
    co = fn.__code__
    fp.str(getattr(fn, "__module__", None) or "").str(fn.__qualname__)
    _code(fp, co, seen)
    cells = fn.__closure__ or ()
    fp.str("\x01closure").u64(len(cells))
    for cell in cells:
        try:
            _value(fp, cell.cell_contents, seen)
        except ValueError:  # an empty cell
            fp.str("\x01emptycell")
    _value(fp, fn.__defaults__, seen)
    _value(fp, sorted((fn.__kwdefaults__ or {}).items()), seen)
    g = fn.__globals__
    names = sorted(_names(co, set()))
    fp.str("\x01globals")
    for name in names:
        if name not in g:
            continue
        v = g[name]
        fp.str(name)
        _value(fp, v, seen)
        if isinstance(v, types.ModuleType):
            # One level of attributes: mod.f, mod.CONSTANT, as the code names them.
            for attr in names:
                if attr in getattr(v, "__dict__", {}):
                    fp.str("." + attr)
                    _value(fp, v.__dict__[attr], seen)


def compile_key(kind: str, py_func, sig, codegen, options=None, locals_=None, extra=None) -> Key:
    """The strong key of compiling *py_func* for *sig* with *codegen*'s target;
    *extra*: more the compile depends on (a ufunc's flags, a gufunc's layout)."""
    import numba

    fp = Fingerprint(strong=True)
    fp.str("ccache.numba key 1").str(kind)
    fp.str(str(sig))
    fp.update(tuple(str(x) for x in codegen.magic_tuple()))
    fp.str(repr(sorted((k, repr(v)) for k, v in (options or {}).items() if k != "cache")))
    fp.str(repr(sorted((k, repr(v)) for k, v in (locals_ or {}).items())))
    fp.update(tuple(repr(getattr(numba.config, c, None)) for c in _CONFIG))
    _function(fp, py_func, set())
    if extra is not None:
        fp.str("\x01extra")
        _value(fp, extra, set())
    return fp.final()


def runtime_tag() -> str:
    import sys

    import llvmlite
    import llvmlite.binding as llvm
    import numba
    import numpy

    v = ".".join(str(x) for x in llvm.llvm_version_info)
    return (f"numba {numba.__version__}; llvmlite {llvmlite.__version__}; LLVM {v}; "
            f"numpy {numpy.__version__}; python {sys.version.split()[0]}{getattr(sys, 'abiflags', '')}")
