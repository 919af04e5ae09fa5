//! Tier health ([`crate::Cache::tier_health`], [`crate::Cache::health`]):
//! what each part of each tier (one per server of a Redis tier) is doing, with
//! no I/O (cheap to poll).

use crate::ffi;
use crate::keys::KeyMode;
use crate::status::Status;
use crate::Cache;
use std::ffi::CStr;
use std::os::raw::c_char;
use std::time::Duration;

/// The state of one part of a tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierStatus {
    /// In use, and its most recent op succeeded (or none failed).
    Up,
    /// Its most recent op failed (a server: in backoff).
    Down,
    /// Not used: its attach failed, or the cache has no codec.
    Disabled,
    /// Reads work, writes fail (a read-only replica, a denied or out-of-memory server).
    Degraded,
    /// A status this version of the crate does not know.
    Other(u32),
}

/// One part of a tier (`ccache_tier_health`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TierHealth {
    /// Index of the tier in `Config::tiers`.
    pub tier: u32,
    /// This part's number, `0..parts`.
    pub part: u32,
    /// Parts of this tier (servers of a Redis tier; 1 otherwise).
    pub parts: u32,
    /// The backend's name ("disk", "redis", "custom").
    pub kind: String,
    /// "host:port", "unix:/path", a Sentinel primary, a directory, or "".
    pub location: String,
    /// Up, down, disabled or degraded.
    pub status: TierStatus,
    /// A server's current reconnect backoff step (zero: healthy).
    pub backoff: Duration,
    /// Time until it may be connected again.
    pub backoff_left: Duration,
    /// Failed ops on this part.
    pub errors: u64,
    /// Its most recent failure, one line ("" if none).
    pub last_error: String,
    /// Gauge: compile locks this cache holds on it now.
    pub leases_held: u64,
    /// Leases whose renewal failed.
    pub leases_lost: u64,
    /// Lock attempts answered "busy".
    pub lock_waits: u64,
    /// Hits here for keys whose first server is another.
    pub fallback_reads: u64,
    /// Writes here because the keys' earlier servers were down.
    pub fallback_writes: u64,
    /// New primary addresses followed (Sentinel).
    pub failovers: u64,
    /// Leases held across a switch of primary, missing on the new one and
    /// taken there again (Sentinel).
    pub leases_retaken: u64,
}

fn array_text(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl<C, P, M: KeyMode> Cache<C, P, M> {
    /// The health of part `part` of tier `tier`: `Ok(None)` past the last
    /// tier or part.  Errors: `EFORKED`.
    pub fn tier_health(&self, tier: u32, part: u32) -> Result<Option<TierHealth>, Status> {
        // SAFETY: all-zero is a valid ccache_tier_health (integers, arrays, a NULL pointer).
        let mut h: ffi::ccache_tier_health = unsafe { std::mem::zeroed() };
        h.size = std::mem::size_of::<ffi::ccache_tier_health>() as u32;
        // SAFETY: h.size is this struct's size.
        let rc = unsafe { ffi::ccache_tier_health_get(self.as_raw(), tier, part, &mut h) };
        match rc {
            ffi::CCACHE_OK => {}
            ffi::CCACHE_MISS => return Ok(None),
            _ => return Err(Status::from_code(rc)),
        }
        let kind = if h.kind.is_null() {
            String::new()
        } else {
            // SAFETY: a static string of the library's.
            unsafe { CStr::from_ptr(h.kind) }.to_string_lossy().into_owned()
        };
        Ok(Some(TierHealth {
            tier,
            part,
            parts: h.parts,
            kind,
            location: array_text(&h.where_),
            status: match h.status {
                ffi::CCACHE_TIER_UP => TierStatus::Up,
                ffi::CCACHE_TIER_DOWN => TierStatus::Down,
                ffi::CCACHE_TIER_DISABLED => TierStatus::Disabled,
                ffi::CCACHE_TIER_DEGRADED => TierStatus::Degraded,
                s => TierStatus::Other(s),
            },
            backoff: Duration::from_millis(h.backoff_ms),
            backoff_left: Duration::from_millis(h.backoff_left_ms),
            errors: h.errors,
            last_error: array_text(&h.last_error),
            leases_held: h.leases_held,
            leases_lost: h.leases_lost,
            lock_waits: h.lock_waits,
            fallback_reads: h.fallback_reads,
            fallback_writes: h.fallback_writes,
            failovers: h.failovers,
            leases_retaken: h.leases_retaken,
        }))
    }

    /// Every part of every tier, in order.
    pub fn health(&self) -> Result<Vec<TierHealth>, Status> {
        let mut all = Vec::new();
        for tier in 0..ffi::CCACHE_MAX_TIERS {
            let first = match self.tier_health(tier, 0)? {
                Some(h) => h,
                None => break,
            };
            let parts = first.parts;
            all.push(first);
            for part in 1..parts {
                if let Some(h) = self.tier_health(tier, part)? {
                    all.push(h);
                }
            }
        }
        Ok(all)
    }
}
