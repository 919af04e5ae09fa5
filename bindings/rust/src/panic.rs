//! Panics across the FFI boundary.
//!
//! Unwinding out of an `extern "C"` function is undefined behaviour (Rust
//! 1.63 aborts or worse), so every callback the crate gives to C runs its
//! Rust code under `catch_unwind` and returns a failure to C instead.  The
//! payload is kept and resumed with `resume_unwind` by the safe call that
//! made the C call, after that C call has returned, so the cache's own state
//! is consistent (no lock held, no half-made entry) and stays usable.
//!
//! Compile callbacks keep their payload in their own call context.  The other
//! callbacks (drops of closures and programs, the clock, the codec) put it in
//! a thread-local slot, resumed by the next safe call returning on that
//! thread.  Drops the sweeper thread runs have no Rust caller to resume on:
//! their panics are caught and dropped there (see the README).

use std::any::Any;
use std::cell::RefCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

type Payload = Box<dyn Any + Send + 'static>;

thread_local! {
    static PENDING: RefCell<Option<Payload>> = RefCell::new(None);
}

/// Payloads kept in any thread's slot, process-wide: the hit path reads only
/// this (one load) instead of its thread-local slot.  A thread sees its own
/// increments in program order, so Relaxed is enough; another thread's count
/// only sends it to look at its own (empty) slot.
static STASHED: AtomicUsize = AtomicUsize::new(0);

/// Keeps a payload for the next `resume_pending()` on this thread (the first
/// one wins; later ones are dropped).
pub(crate) fn stash(p: Payload) {
    let rest = PENDING
        .try_with(|slot| {
            let mut slot = slot.borrow_mut();
            if slot.is_none() {
                *slot = Some(p);
                STASHED.fetch_add(1, Ordering::Relaxed);
                None
            } else {
                Some(p)
            }
        })
        .unwrap_or(None);
    // A second payload (or one during thread teardown) is dropped here; a
    // payload whose own drop panics is leaked rather than unwound into C.
    if let Some(p) = rest {
        std::mem::forget(p);
    }
}

/// Runs `f`, stashing a panic; returns `None` if it panicked.
pub(crate) fn guard<R>(f: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(p) => {
            stash(p);
            None
        }
    }
}

/// Resumes a panic a callback stashed on this thread during the C call that
/// just returned.  Called by every safe wrapper after its C call, once the
/// guards it owns are constructed (so they are dropped by the unwinding).
#[inline]
pub(crate) fn resume_pending() {
    if STASHED.load(Ordering::Relaxed) != 0 {
        resume_slow();
    }
}

#[cold]
#[inline(never)]
fn resume_slow() {
    if let Some(p) = take() {
        resume_unwind(p);
    }
}

/// For `Drop` impls: resume unless this thread is already unwinding (a
/// second panic would abort), in which case the payload is discarded.
#[inline]
pub(crate) fn resume_pending_in_drop() {
    if STASHED.load(Ordering::Relaxed) != 0 {
        resume_in_drop_slow();
    }
}

#[cold]
#[inline(never)]
fn resume_in_drop_slow() {
    if let Some(p) = take() {
        if std::thread::panicking() {
            std::mem::forget(p);
        } else {
            resume_unwind(p);
        }
    }
}

fn take() -> Option<Payload> {
    let p = PENDING.try_with(|slot| slot.borrow_mut().take()).unwrap_or(None);
    if p.is_some() {
        STASHED.fetch_sub(1, Ordering::Relaxed);
    }
    p
}
