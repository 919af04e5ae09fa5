//! The calls on an open [`Cache`]: get-or-compile (closures and programs),
//! interning, fetching, putting and removing by key, clearing, sweeping,
//! the bounds and the statistics.  One `impl` block, as before the split, so
//! the methods keep their order in the documentation.

use crate::cache::{Cache, Slot};
use crate::compile::{compile_failed, compile_trampoline, program_trampoline, read_lease, CompileCx, ProgramCx};
use crate::config::{bound, ttl_ms, unbound, Limits};
use crate::ffi::{self, Stats};
use crate::keys::KeyMode;
use crate::lease::{Lease, Program};
use crate::panic;
use crate::status::{check, CompileError, Status};
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::time::Duration;

impl<C, P, M: KeyMode> Cache<C, P, M> {
    /// The raw cache, for [`ffi`] calls the safe API lacks.  Valid while `self` is.
    #[inline]
    pub fn as_raw(&self) -> *mut ffi::ccache {
        self.raw.as_ptr()
    }

    #[inline]
    pub(crate) fn is(&self, other: &Cache<C, P, M>) -> bool {
        ptr::eq(self, other)
    }

    /// Fetches the closure under `key`, or compiles it once, whatever the
    /// number of threads that miss at the same time (the others wait and get
    /// the same entry).
    ///
    /// `compile` runs on this thread with no lock held, only on a miss, and
    /// returns the closure and a program handle of this cache (usually from
    /// [`Cache::program_get_or_compile`] or [`Cache::program_intern`]); both
    /// become the cache's.  It may call into the cache (other keys).
    ///
    /// Errors: `Compile(e)`, the compile's own error (nothing cached);
    /// `Cache(ECOMPILE)` on a thread that waited for another's failed compile;
    /// `Cache(EINVAL)` when the program handle is another cache's;
    /// `Cache(EDEADLK)` when the compile asks for its own key; `Cache(ENOMEM)`.
    /// A panic in `compile` resumes here once the cache has recorded the
    /// failed compile.
    #[inline]
    pub fn get_or_compile<E, F>(&self, key: M::Key, compile: F) -> Result<Lease<'_, C, P, M>, CompileError<E>>
    where
        F: FnOnce(&Cache<C, P, M>) -> Result<(C, Program<'_, C, P, M>), E>,
    {
        let mut cx = CompileCx::<C, P, M, F, E> {
            cache: self,
            f: Some(compile),
            failure: std::mem::MaybeUninit::uninit(),
            _p: PhantomData,
        };
        // Written by every return of the call (filled on OK, zeroed otherwise),
        // and read only on OK.
        let mut raw = std::mem::MaybeUninit::<ffi::ccache_lease>::uninit();
        // SAFETY: cx outlives the call; the trampoline matches its type.
        let rc = unsafe {
            M::get_or_compile(
                self.raw.as_ptr(),
                &key,
                Some(compile_trampoline::<C, P, M, F, E>),
                &mut cx as *mut CompileCx<C, P, M, F, E> as *mut c_void,
                raw.as_mut_ptr(),
            )
        };
        if rc == ffi::CCACHE_OK {
            // The hit path.  The trampoline records a failure only when it
            // returns non-zero, which is never CCACHE_OK: only the compile,
            // if unused, needs dropping.  Callbacks (destroys of evicted
            // entries, the event hook) run on this thread only when the
            // compile did, which took `f`: testing that byte, just written,
            // is cheaper on a hit than the global count of stashed panics
            // (and `failure`, written only by the trampoline, costs a hit no
            // store).
            if std::mem::needs_drop::<F>() || cx.f.is_none() {
                // SAFETY: filled by the call on CCACHE_OK.  Made first, so that
                // a panicking drop of the unused compile, or a resumed panic,
                // still releases it.
                let lease = Lease { cache: self, raw: unsafe { read_lease(raw.as_ptr()) } };
                drop(cx.f.take());
                std::mem::forget(cx);
                panic::resume_pending();
                return Ok(lease);
            }
            // Nothing can unwind from here on: the lease is made in place.
            std::mem::forget(cx);
            // SAFETY: filled by the call on CCACHE_OK.
            return Ok(Lease { cache: self, raw: unsafe { read_lease(raw.as_ptr()) } });
        }
        // SAFETY: the trampoline wrote `failure` if it took `f`.
        let failure = if cx.f.is_none() { unsafe { cx.failure.as_ptr().read() } } else { None };
        compile_failed(rc, failure)
    }

    /// Looks up the program under `pkey`, or makes it once whatever the
    /// number of threads that miss (asking the tiers first when the cache has
    /// a codec).  `compile` returns the program and its cost in bytes (what
    /// it holds, charged against `max_cost_bytes` while an entry refers to it).
    /// Errors as [`Cache::get_or_compile`].
    #[inline]
    pub fn program_get_or_compile<E, F>(&self, pkey: M::Key, compile: F) -> Result<Program<'_, C, P, M>, CompileError<E>>
    where
        F: FnOnce(&Cache<C, P, M>) -> Result<(P, u64), E>,
    {
        let mut cx = ProgramCx::<C, P, M, F, E> { cache: self, f: Some(compile), failure: None };
        let mut out = ptr::null_mut();
        // SAFETY: cx outlives the call; the trampoline matches its type.
        let rc = unsafe {
            M::program_get_or_compile(
                self.raw.as_ptr(),
                &pkey,
                Some(program_trampoline::<C, P, M, F, E>),
                &mut cx as *mut ProgramCx<C, P, M, F, E> as *mut c_void,
                &mut out,
            )
        };
        let program = NonNull::new(out).map(|raw| Program { cache: self, raw });
        match (rc, program) {
            (ffi::CCACHE_OK, Some(p)) => {
                drop(cx.f.take());
                std::mem::forget(cx);
                panic::resume_pending();
                Ok(p)
            }
            (_, p) => {
                drop(p);
                compile_failed(rc, cx.failure.take())
            }
        }
    }

    /// Interns `program` under `pkey` with its cost in bytes and returns a
    /// handle.  If `pkey` is already interned, the existing program is
    /// returned and `program` is dropped.  Errors: `ENOMEM` (`program` dropped).
    pub fn program_intern(&self, pkey: M::Key, program: P, cost_bytes: u64) -> Result<Program<'_, C, P, M>, Status> {
        let mut out = ptr::null_mut();
        // SAFETY: the native is a live Slot<P>, owned by the cache from here on.
        let rc = unsafe { M::program_intern(self.raw.as_ptr(), &pkey, Slot::into_raw(program), cost_bytes, &mut out) };
        let program = NonNull::new(out).map(|raw| Program { cache: self, raw });
        panic::resume_pending();
        check(rc)?;
        program.ok_or_else(|| Status::from_code(Status::EINVAL))
    }

    /// Looks up a program by key (never compiles, never asks a tier).
    pub fn program_fetch(&self, pkey: M::Key) -> Result<Option<Program<'_, C, P, M>>, Status> {
        let mut out = ptr::null_mut();
        // SAFETY: plain call with valid pointers.
        let rc = unsafe { M::program_fetch(self.raw.as_ptr(), &pkey, &mut out) };
        let program = NonNull::new(out).map(|raw| Program { cache: self, raw });
        panic::resume_pending();
        match rc {
            ffi::CCACHE_OK => Ok(program),
            ffi::CCACHE_MISS => Ok(None),
            _ => Err(Status::from_code(rc)),
        }
    }

    /// Stores `closure` under `key`, running `program` (the entry takes its
    /// own reference; the handle stays yours).  A present entry is replaced
    /// (leases on it stay valid).  Evictions this causes drop their `C`/`P`
    /// here.  Errors: `EINVAL` (a handle of another cache), `ENOMEM`; the
    /// closure is dropped on error.
    pub fn put(&self, key: M::Key, closure: C, program: &Program<'_, C, P, M>) -> Result<(), Status> {
        if !self.is(program.cache) {
            drop(closure);
            return Err(Status::from_code(Status::EINVAL));
        }
        // SAFETY: the closure is a fresh Slot<C>, owned by the cache from here on.
        let rc = unsafe { M::put(self.raw.as_ptr(), &key, Slot::into_raw(closure), program.raw.as_ptr()) };
        panic::resume_pending();
        check(rc)
    }

    /// Looks up a closure: `Some(lease)` on a hit (never an expired entry).
    pub fn fetch(&self, key: M::Key) -> Result<Option<Lease<'_, C, P, M>>, Status> {
        let mut lease = Lease { cache: self, raw: ffi::ccache_lease::zeroed() };
        // SAFETY: plain call with a valid lease to fill.
        let rc = unsafe { M::fetch(self.raw.as_ptr(), &key, &mut lease.raw) };
        panic::resume_pending();
        match rc {
            ffi::CCACHE_OK => Ok(Some(lease)),
            _ => {
                std::mem::forget(lease); // zeroed by the call
                if rc == ffi::CCACHE_MISS {
                    Ok(None)
                } else {
                    Err(Status::from_code(rc))
                }
            }
        }
    }

    /// Removes the entry under `key`: `true` if there was one.  Leases on it
    /// stay valid.
    pub fn remove(&self, key: M::Key) -> Result<bool, Status> {
        // SAFETY: plain call.
        let rc = unsafe { M::remove(self.raw.as_ptr(), &key) };
        panic::resume_pending();
        match rc {
            ffi::CCACHE_OK => Ok(true),
            ffi::CCACHE_MISS => Ok(false),
            _ => Err(Status::from_code(rc)),
        }
    }

    /// Removes every closure entry.
    pub fn clear(&self) -> Result<(), Status> {
        // SAFETY: plain call.
        let rc = unsafe { ffi::ccache_clear(self.raw.as_ptr()) };
        panic::resume_pending();
        check(rc)
    }

    /// Removes the expired entries now; returns how many.
    pub fn sweep(&self) -> Result<u64, Status> {
        // SAFETY: plain call.
        let n = unsafe { ffi::ccache_sweep(self.raw.as_ptr()) };
        panic::resume_pending();
        if n < 0 {
            Err(Status::from_code(n as i32))
        } else {
            Ok(n as u64)
        }
    }

    /// Changes the bounds (a bound of `Some(0)` is `EINVAL`, nothing changed).
    /// Shrinking evicts the oldest entries on this thread; a new TTL applies
    /// at once to entries already present.
    pub fn set_limits(&self, limits: Limits) -> Result<(), Status> {
        // SAFETY: plain call.
        let rc = unsafe {
            ffi::ccache_set_limits(
                self.raw.as_ptr(),
                bound(limits.max_items),
                ttl_ms(limits.ttl),
                bound(limits.max_cost_bytes),
            )
        };
        panic::resume_pending();
        check(rc)
    }

    /// The current bounds.
    pub fn limits(&self) -> Result<Limits, Status> {
        let (mut items, mut ttl, mut cost) = (0, 0, 0);
        // SAFETY: plain call with valid out-pointers.
        check(unsafe { ffi::ccache_get_limits(self.raw.as_ptr(), &mut items, &mut ttl, &mut cost) })?;
        Ok(Limits { max_items: unbound(items), ttl: unbound(ttl).map(Duration::from_millis), max_cost_bytes: unbound(cost) })
    }

    /// A statistics snapshot.
    pub fn stats(&self) -> Stats {
        let mut s = ffi::ccache_stats { size: std::mem::size_of::<ffi::ccache_stats>() as u32, ..Default::default() };
        // SAFETY: s.size is this struct's size.  The status can only be
        // EFORKED here (a valid cache and size): the snapshot is then zeroes.
        let _ = unsafe { ffi::ccache_stats_get(self.raw.as_ptr(), &mut s) };
        Stats::from(&s)
    }
}
