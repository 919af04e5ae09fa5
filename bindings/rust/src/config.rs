//! The options a cache opens with ([`Config`]), the bounds it can change
//! later ([`Limits`]), and their conversion to the C library's units
//! (`CCACHE_UNBOUNDED` for "no bound", whole milliseconds).

use crate::event::EventHook;
use crate::ffi;
use crate::tier::Tier;
use crate::trust::Trust;
use std::sync::Arc;
use std::time::Duration;
#[allow(unused_imports)] // only named by intra-doc links (rustc 1.63 counts them unused)
use crate::{Cache, Event};

/// Options for [`Cache::open`].  `None` is "no bound".
pub struct Config {
    /// Most closure entries kept (oldest inserts leave first); `Some(0)` is `EINVAL`.
    pub max_items: Option<u64>,
    /// Time to live from insert (a hit never refreshes it), whole
    /// milliseconds rounded up; `Some(Duration::ZERO)` is `EINVAL`.
    pub ttl: Option<Duration>,
    /// Cap on the summed cost of the programs the entries refer to, bytes.
    pub max_cost_bytes: Option<u64>,
    /// Whether a sweeper thread removes expired entries (default `true`).
    pub sweeper_thread: bool,
    /// Monotonic milliseconds (default: CLOCK_MONOTONIC); called from any
    /// thread, the sweeper's included.  Tests inject a fake clock here.
    pub clock: Option<Arc<dyn Fn() -> u64 + Send + Sync>>,
    /// The runtime's identity (version, target, flags): tier entries written
    /// under another tag are never loaded.
    pub runtime_tag: Option<String>,
    /// Programs compiled faster than this are not written to the tiers
    /// (default 1 ms).
    pub tier_min_compile: Duration,
    /// Tiers, the one asked first at index 0 (at most 8).  A codec is
    /// required: [`Cache::open`] with tiers is `EINVAL` (the library refuses
    /// tiers without a codec); use [`Cache::open_with_codec`].
    pub tiers: Vec<Tier>,
    /// Largest tier entry read or written, bytes of the whole framed entry
    /// (default 64 MiB; `0` is `EINVAL`, `u64::MAX` the format's own limit).
    /// An entry over it is a miss counted in `tier_oversize`, refused before
    /// it is read whole.
    pub tier_max_entry_bytes: u64,
    /// Signing and trusted keys (copied at open, then dropped): every entry
    /// read from a tier must be signed by a trusted key (see [`Trust`]).
    /// `None` (default): tiers are trusted by declaration.  A cache with a
    /// trust object and a library without libsodium is `ENOTSUP` at open.
    pub trust: Option<Trust>,
    /// `CCACHE_TRUST_UNSIGNED`: accept unsigned entries from tiers that
    /// others can write (a Redis tier).  The library's safe-by-default rule
    /// refuses (`EINVAL` at open) a cache whose tiers include a shared one
    /// when it has neither trusted keys nor this opt-out; set it with
    /// [`Config::accept_unsigned_entries`].  Default `false`.
    pub trust_unsigned: bool,
    /// The event hook (see [`Event`]), or `None` (default: nothing is spent
    /// on events).  A panic in it is caught before it reaches C and resumed
    /// by the call that raised the event (discarded on the sweeper thread).
    pub on_event: Option<EventHook>,
}

impl Config {
    /// Opts out of signatures, by name: tiers others can write (Redis) are
    /// read without trusted keys, unsigned entries accepted
    /// (`CCACHE_TRUST_UNSIGNED`; see [`Config::trust_unsigned`]).  Anyone who
    /// can write to such a tier can then plant a program this cache runs.
    pub fn accept_unsigned_entries(mut self) -> Config {
        self.trust_unsigned = true;
        self
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_items: None,
            ttl: None,
            max_cost_bytes: None,
            sweeper_thread: true,
            clock: None,
            runtime_tag: None,
            tier_min_compile: Duration::from_millis(1),
            tiers: Vec::new(),
            tier_max_entry_bytes: ffi::CCACHE_TIER_MAX_ENTRY_DEFAULT,
            trust: None,
            trust_unsigned: false,
            on_event: None,
        }
    }
}

/// The three bounds, for [`Cache::set_limits`] and [`Cache::limits`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Most closure entries, or `None`.
    pub max_items: Option<u64>,
    /// Time to live, whole milliseconds (rounded up), or `None`.
    pub ttl: Option<Duration>,
    /// Cost cap in bytes, or `None`.
    pub max_cost_bytes: Option<u64>,
}

pub(crate) fn bound(v: Option<u64>) -> u64 {
    // u64::MAX is the C library's "unbounded": the largest real bound is one less.
    v.map(|n| n.min(u64::MAX - 1)).unwrap_or(ffi::CCACHE_UNBOUNDED)
}

pub(crate) fn ms_ceil(d: Duration) -> u64 {
    let ms = d.as_nanos().saturating_add(999_999) / 1_000_000;
    ms.min((u64::MAX - 1) as u128) as u64
}

pub(crate) fn ttl_ms(d: Option<Duration>) -> u64 {
    d.map(ms_ceil).unwrap_or(ffi::CCACHE_UNBOUNDED)
}

pub(crate) fn unbound(v: u64) -> Option<u64> {
    if v == ffi::CCACHE_UNBOUNDED {
        None
    } else {
        Some(v)
    }
}
