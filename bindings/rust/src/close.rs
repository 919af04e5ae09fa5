//! Closing a [`Cache`]: `close`, `close_abandon`, and `Drop` (which leaks
//! the cache rather than free what a leaked lease still pins).

use crate::cache::{Cache, Inner};
use crate::ffi;
use crate::panic;
use crate::status::{check, Status};
use std::ptr;

impl<C, P, M> Cache<C, P, M> {
    /// Closes the cache now (what dropping it does), returning the status.
    /// `Err(EBUSY)` when a lease or program handle was leaked with
    /// `mem::forget`: the cache then stays open, leaked (see
    /// [`Cache::close_abandon`]).  A panic of a drop it runs resumes here.
    pub fn close(self) -> Result<(), Status> {
        self.close_with(0)
    }

    /// Closes the cache even though leases or program handles were leaked
    /// with `mem::forget` (`ccache_close_ex` with `CCACHE_CLOSE_ABANDON`):
    /// every remaining `C` and `P` is dropped.  Safe: a lease or handle
    /// borrows its cache, so once the cache is given up by value none can be
    /// used again; only a leaked one can still be out, and it is abandoned.
    pub fn close_abandon(self) -> Result<(), Status> {
        self.close_with(ffi::CCACHE_CLOSE_ABANDON)
    }

    fn close_with(self, flags: std::os::raw::c_uint) -> Result<(), Status> {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: owned, and nothing borrows it (by value); no call is running.
        let rc = unsafe { ffi::ccache_close_ex(me.raw.as_ptr(), flags) };
        if rc == ffi::CCACHE_OK {
            // SAFETY: read once; `me` is never dropped.  The callbacks' context
            // goes only now that the cache is gone.
            drop(unsafe { ptr::read(&me.inner) });
        } // else the cache stays open and its context with it (leaked)
        panic::resume_pending();
        check(rc)
    }
}

impl<C, P, M> Drop for Cache<C, P, M> {
    fn drop(&mut self) {
        // SAFETY: no lease or handle can be out (they borrow the cache), and no
        // call is running (`&mut self`), except leaks by mem::forget.
        let rc = unsafe { ffi::ccache_close(self.raw.as_ptr()) };
        if rc != ffi::CCACHE_OK {
            // A lease or handle was leaked with mem::forget: the cache stays
            // open and its callbacks' context must stay valid, so leak both.
            let inner = std::mem::replace(&mut self.inner, Box::new(Inner { clock: None, codec: None, on_event: None }));
            std::mem::forget(inner);
        }
        panic::resume_pending_in_drop();
    }
}
