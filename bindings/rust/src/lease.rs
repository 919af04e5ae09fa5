//! The guards a cache hands out: a [`Lease`] (a hit: a closure and its
//! program, pinned) and a [`Program`] handle (an interned program).  Both
//! borrow their cache and release on `Drop`, on any thread.

use crate::cache::{Cache, Slot};
use crate::ffi;
use crate::keys::Fast;
use crate::panic;
use std::ptr::NonNull;

/// A hit: pins a closure and its program until dropped (the drop releases
/// it, on any thread, even after the entry was evicted or removed).
pub struct Lease<'c, C, P, M = Fast> {
    pub(crate) cache: &'c Cache<C, P, M>,
    pub(crate) raw: ffi::ccache_lease,
}

// SAFETY: a lease gives `&C` and `&P` and may be released on any thread.
unsafe impl<C: Send + Sync, P: Send + Sync, M> Send for Lease<'_, C, P, M> {}
unsafe impl<C: Send + Sync, P: Send + Sync, M> Sync for Lease<'_, C, P, M> {}

impl<'c, C, P, M> Lease<'c, C, P, M> {
    /// The closure.
    #[inline]
    pub fn closure(&self) -> &C {
        // SAFETY: the lease pins the closure, a Slot<C> made by this crate.
        unsafe { Slot::get(self.raw.closure) }
    }
    /// The program the closure runs.
    #[inline]
    pub fn program(&self) -> &P {
        // SAFETY: the lease pins the program, a Slot<P> made by this crate.
        unsafe { Slot::get(self.raw.native) }
    }
    /// The cache the lease came from.
    #[inline]
    pub fn cache(&self) -> &'c Cache<C, P, M> {
        self.cache
    }
}

impl<C, P, M> Drop for Lease<'_, C, P, M> {
    fn drop(&mut self) {
        // SAFETY: a filled lease of this cache, released once.
        unsafe { ffi::ccache_lease_release(self.cache.raw.as_ptr(), &mut self.raw) };
        panic::resume_pending_in_drop();
    }
}

/// A program handle: keeps the program interned until dropped.  Derefs to `P`.
pub struct Program<'c, C, P, M = Fast> {
    pub(crate) cache: &'c Cache<C, P, M>,
    pub(crate) raw: NonNull<ffi::ccache_program>,
}

// SAFETY: a handle gives `&P` and may be released on any thread.
unsafe impl<C: Send + Sync, P: Send + Sync, M> Send for Program<'_, C, P, M> {}
unsafe impl<C: Send + Sync, P: Send + Sync, M> Sync for Program<'_, C, P, M> {}

impl<'c, C, P, M> Program<'c, C, P, M> {
    #[inline]
    pub(crate) fn into_raw(self) -> *mut ffi::ccache_program {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }
    /// The cache the handle came from.
    #[inline]
    pub fn cache(&self) -> &'c Cache<C, P, M> {
        self.cache
    }
}

impl<C, P, M> std::ops::Deref for Program<'_, C, P, M> {
    type Target = P;
    #[inline]
    fn deref(&self) -> &P {
        // SAFETY: the handle pins the program, a Slot<P> made by this crate.
        unsafe { Slot::get(ffi::ccache_program_native(self.raw.as_ptr())) }
    }
}

impl<C, P, M> Drop for Program<'_, C, P, M> {
    fn drop(&mut self) {
        // SAFETY: a live handle of this cache, released once.
        unsafe { ffi::ccache_program_release(self.cache.raw.as_ptr(), self.raw.as_ptr()) };
        panic::resume_pending_in_drop();
    }
}

impl<C: std::fmt::Debug, P: std::fmt::Debug, M> std::fmt::Debug for Lease<'_, C, P, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("closure", self.closure()).field("program", self.program()).finish()
    }
}

impl<C, P: std::fmt::Debug, M> std::fmt::Debug for Program<'_, C, P, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Program").field(&**self).finish()
    }
}
