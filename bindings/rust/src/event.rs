//! The event hook ([`crate::Config::on_event`]): compiles, tier traffic and
//! evictions, as they happen (ccache.h, `ccache_event`).

use crate::ffi;
use crate::panic;
use crate::cache::Inner;
use crate::Key;
use std::ffi::{c_void, CStr};
use std::os::raw::c_char;
use std::time::Duration;

/// What an [`Event`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A compile callback is about to run.
    CompileStart,
    /// It has returned (`status`, `duration`).
    CompileEnd,
    /// A tier had a usable entry.
    TierHit,
    /// A tier had no entry.
    TierMiss,
    /// An entry was written to a tier (`reason` "fill" or "store").
    TierWrite,
    /// A tier op or codec call failed (`op`, `status`, `err`, `reason`).
    TierError,
    /// An entry failed verification and was removed.
    TierCorrupt,
    /// An intact entry not used (a foreign runtime tag, refused by the codec
    /// or by the trust object).
    TierRejected,
    /// A closure entry left the table (`cause`).
    Evict,
    /// A kind this version of the crate does not know.
    Other(i32),
}

/// Why a closure entry left the table ([`EventKind::Evict`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// `max_items`.
    Capacity,
    /// Expired.
    Ttl,
    /// `max_cost_bytes`.
    Cost,
    /// `Cache::remove`.
    Removed,
    /// `Cache::clear`.
    Cleared,
    /// A later insert under the same key.
    Replaced,
    /// The cache closed.
    Closed,
    /// A cause this version of the crate does not know.
    Other(i32),
}

/// One event, valid during the hook's call (copy what you keep).  Fields
/// that do not apply are 0 / `None`.
#[derive(Clone, Copy, Debug)]
pub struct Event<'a> {
    /// What happened.
    pub kind: EventKind,
    /// `true`: about the program table (tier events, program compiles);
    /// `false`: the closure table.
    pub program_level: bool,
    /// The closure key or program key (for a strong cache, its first half).
    pub key: Key,
    /// `CompileEnd`: the status the callers get (0 = OK); `TierError`: the op's.
    pub status: i32,
    /// `TierError`: errno right after the op failed (0: none).
    pub err: i32,
    /// `Evict`: why.
    pub cause: Option<Cause>,
    /// Tier events: the tier's index in `Config::tiers`.
    pub tier: u32,
    /// Tier events: the backend's name ("disk", "redis").
    pub tier_name: Option<&'a str>,
    /// Tier events: the op ("get", "put", ...).
    pub op: Option<&'a str>,
    /// A short text, or `None`.
    pub reason: Option<&'a str>,
    /// `CompileEnd`: wall time of the callback, nested compiles included.
    pub duration: Duration,
}

unsafe fn text<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        None
    } else {
        CStr::from_ptr(p).to_str().ok()
    }
}

impl<'a> Event<'a> {
    /// # Safety
    /// `e` is the library's event, alive for `'a`.
    unsafe fn from_raw(e: &'a ffi::ccache_event) -> Event<'a> {
        let kind = match e.kind {
            1 => EventKind::CompileStart,
            2 => EventKind::CompileEnd,
            3 => EventKind::TierHit,
            4 => EventKind::TierMiss,
            5 => EventKind::TierWrite,
            6 => EventKind::TierError,
            7 => EventKind::TierCorrupt,
            8 => EventKind::TierRejected,
            9 => EventKind::Evict,
            k => EventKind::Other(k),
        };
        let cause = match e.cause {
            0 => None,
            1 => Some(Cause::Capacity),
            2 => Some(Cause::Ttl),
            3 => Some(Cause::Cost),
            4 => Some(Cause::Removed),
            5 => Some(Cause::Cleared),
            6 => Some(Cause::Replaced),
            7 => Some(Cause::Closed),
            c => Some(Cause::Other(c)),
        };
        Event {
            kind,
            program_level: e.level == 2,
            key: e.key.into(),
            status: e.status,
            err: e.err,
            cause,
            tier: e.tier,
            tier_name: text(e.tier_name),
            op: text(e.op),
            reason: text(e.reason),
            duration: Duration::from_nanos(e.duration_ns),
        }
    }
}

/// The hook's type: called on the thread the event happens on (the sweeper's
/// for expiry), possibly on several at once, with no lock held.
pub type EventHook = std::sync::Arc<dyn Fn(&Event<'_>) + Send + Sync + 'static>;

pub(crate) unsafe extern "C" fn event_trampoline<P>(ctx: *mut c_void, ev: *const ffi::ccache_event) {
    let inner = &*(ctx as *const Inner<P>);
    if let (Some(f), Some(e)) = (&inner.on_event, ev.as_ref()) {
        let e = Event::from_raw(e);
        // A panic is resumed by the call that raised the event (see panic.rs).
        panic::guard(|| f(&e));
    }
}
