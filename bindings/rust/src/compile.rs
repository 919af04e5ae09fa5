//! What the get-or-compile calls hand to C: the compile trampolines (a Rust
//! closure run under `catch_unwind`, its result boxed for C), the context
//! they read, and how a failed compile becomes a [`CompileError`] (or a
//! resumed panic) once the C call has returned.

use crate::cache::{Cache, Slot};
use crate::ffi;
use crate::keys::KeyMode;
use crate::lease::Program;
use crate::panic;
use crate::status::{CompileError, Status};
use std::ffi::c_void;
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr;

/// Reads a lease C just wrote, one word at a time.  C stores it as four
/// 8-byte words; a copy by 16-byte loads (what a plain move compiles to)
/// cannot be forwarded from those stores and stalls the hit path by more
/// than the rest of the wrapper costs.  Volatile keeps the loads separate.
///
/// # Safety
/// `p` points to a lease C has filled.
#[inline(always)]
pub(crate) unsafe fn read_lease(p: *const ffi::ccache_lease) -> ffi::ccache_lease {
    ffi::ccache_lease {
        closure: ptr::read_volatile(ptr::addr_of!((*p).closure)),
        native: ptr::read_volatile(ptr::addr_of!((*p).native)),
        internal_: [
            ptr::read_volatile(ptr::addr_of!((*p).internal_[0])),
            ptr::read_volatile(ptr::addr_of!((*p).internal_[1])),
        ],
    }
}

#[cold]
#[inline(never)]
pub(crate) fn compile_failed<E, T>(rc: c_int, failure: Option<Failure<E>>) -> Result<T, CompileError<E>> {
    match failure {
        Some(Failure::Panic(p)) => resume_unwind(p),
        Some(Failure::Foreign) => {
            panic::resume_pending();
            Err(CompileError::Cache(Status::from_code(Status::EINVAL)))
        }
        Some(Failure::Error(e)) if rc == ffi::CCACHE_ECOMPILE => {
            panic::resume_pending();
            Err(CompileError::Compile(e))
        }
        _ => {
            panic::resume_pending();
            // rc is never OK here (a program miss with OK and no handle is EINVAL).
            Err(CompileError::Cache(Status::from_code(if rc == ffi::CCACHE_OK { Status::EINVAL } else { rc })))
        }
    }
}

/// What a compile trampoline records when it returns non-zero.
pub(crate) enum Failure<E> {
    /// The compile's own error.
    Error(E),
    /// The compile panicked.
    Panic(Box<dyn std::any::Any + Send + 'static>),
    /// The compile returned a program handle of another cache.
    Foreign,
}

pub(crate) struct CompileCx<'a, C, P, M, F, E> {
    pub(crate) cache: &'a Cache<C, P, M>,
    pub(crate) f: Option<F>,
    /// Written by the trampoline when it takes `f` (so initialised exactly
    /// when `f` is None), read once by get_or_compile.
    pub(crate) failure: std::mem::MaybeUninit<Option<Failure<E>>>,
    pub(crate) _p: PhantomData<P>,
}

pub(crate) unsafe extern "C" fn compile_trampoline<C, P, M: KeyMode, F, E>(
    ud: *mut c_void,
    _c: *mut ffi::ccache,
    _key: ffi::ccache_key,
    closure_out: *mut *mut c_void,
    program_out: *mut *mut ffi::ccache_program,
) -> c_int
where
    F: FnOnce(&Cache<C, P, M>) -> Result<(C, Program<'_, C, P, M>), E>,
{
    let cx = &mut *(ud as *mut CompileCx<C, P, M, F, E>);
    let f = match cx.f.take() {
        Some(f) => f,
        None => return -1,
    };
    cx.failure.write(None);
    let cache = cx.cache;
    match catch_unwind(AssertUnwindSafe(|| f(cache))) {
        Ok(Ok((closure, program))) => {
            if !cache.is(program.cache) {
                // A handle of another cache: drop both here, where the right
                // cache is known, and fail the compile.
                let r = catch_unwind(AssertUnwindSafe(move || {
                    drop(closure);
                    drop(program);
                }));
                cx.failure.write(Some(match r {
                    Err(p) => Failure::Panic(p),
                    Ok(()) => Failure::Foreign,
                }));
                return -1;
            }
            *closure_out = Slot::into_raw(closure);
            *program_out = program.into_raw();
            0
        }
        Ok(Err(e)) => {
            cx.failure.write(Some(Failure::Error(e)));
            -1
        }
        Err(p) => {
            cx.failure.write(Some(Failure::Panic(p)));
            -1
        }
    }
}

pub(crate) struct ProgramCx<'a, C, P, M, F, E> {
    pub(crate) cache: &'a Cache<C, P, M>,
    pub(crate) f: Option<F>,
    pub(crate) failure: Option<Failure<E>>,
}

pub(crate) unsafe extern "C" fn program_trampoline<C, P, M, F, E>(
    ud: *mut c_void,
    _c: *mut ffi::ccache,
    _pkey: ffi::ccache_key,
    native_out: *mut *mut c_void,
    cost_out: *mut u64,
) -> c_int
where
    F: FnOnce(&Cache<C, P, M>) -> Result<(P, u64), E>,
{
    let cx = &mut *(ud as *mut ProgramCx<C, P, M, F, E>);
    let f = match cx.f.take() {
        Some(f) => f,
        None => return -1,
    };
    let cache = cx.cache;
    match catch_unwind(AssertUnwindSafe(|| f(cache))) {
        Ok(Ok((program, cost))) => {
            *native_out = Slot::into_raw(program);
            *cost_out = cost;
            0
        }
        Ok(Err(e)) => {
            cx.failure = Some(Failure::Error(e));
            -1
        }
        Err(p) => {
            cx.failure = Some(Failure::Panic(p));
            -1
        }
    }
}
