//! What `ccache/tier.h` declares, with the headers it includes: the codec,
//! the tiers' health (tier.h), the directory and Redis tiers' options and
//! constructors (tier_disk.h, tier_redis.h) (part of [`crate::ffi`]: see
//! there).

use super::common::{ccache_key, ccache_tier};
use std::os::raw::{c_char, c_int, c_void};

/// `CCACHE_CODEC_SKIP`: what `encode` returns for a program never to be stored.
pub const CCACHE_CODEC_SKIP: c_int = 1;
/// `CCACHE_CODEC_CORRUPT`: what `decode` returns for bad bytes (the entry is removed).
pub const CCACHE_CODEC_CORRUPT: c_int = 2;

#[repr(C)]
pub struct ccache_codec {
    pub encode: Option<
        unsafe extern "C" fn(
            ctx: *mut c_void,
            pkey: ccache_key,
            native: *mut c_void,
            bytes: *mut *mut c_void,
            len: *mut usize,
        ) -> c_int,
    >,
    pub free_bytes: Option<unsafe extern "C" fn(ctx: *mut c_void, bytes: *mut c_void, len: usize)>,
    pub decode: Option<
        unsafe extern "C" fn(
            ctx: *mut c_void,
            pkey: ccache_key,
            bytes: *const c_void,
            len: usize,
            native_out: *mut *mut c_void,
            cost_out: *mut u64,
        ) -> c_int,
    >,
    pub ctx: *mut c_void,
}

pub const CCACHE_TIER_UP: u32 = 0;
pub const CCACHE_TIER_DOWN: u32 = 1;
pub const CCACHE_TIER_DISABLED: u32 = 2;
/// `CCACHE_TIER_DEGRADED` (issue 33: writes fail with READONLY/NOPERM/OOM).
pub const CCACHE_TIER_DEGRADED: u32 = 3;

#[repr(C)]
pub struct ccache_tier_health {
    pub size: u32,
    pub parts: u32,
    pub kind: *const c_char,
    pub where_: [c_char; 256],
    pub status: u32,
    pub backoff_ms: u64,
    pub backoff_left_ms: u64,
    pub errors: u64,
    pub last_error: [c_char; 256],
    pub leases_held: u64,
    pub leases_lost: u64,
    pub lock_waits: u64,
    pub fallback_reads: u64,
    pub fallback_writes: u64,
    pub failovers: u64,
    pub leases_retaken: u64,
}

#[repr(C)]
pub struct ccache_disk_options {
    pub size: u32,
    pub dir: *const c_char,
    pub max_bytes: u64,
    pub fsync: c_int,
    pub lock_poll_ms: u64,
    pub lock_poll_max_ms: u64,
    pub lock_wait_ms: u64,
    pub touch_interval_ms: u64,
    pub io_lock_ms: u64,
}

#[repr(C)]
pub struct ccache_redis_options {
    pub size: u32,
    pub servers: *const c_char,
    pub prefix: *const c_char,
    pub user: *const c_char,
    pub password: *const c_char,
    pub connect_timeout_ms: u64,
    pub command_timeout_ms: u64,
    pub entry_ttl_ms: u64,
    pub lease_ms: u64,
    pub poll_ms: u64,
    pub poll_max_ms: u64,
    pub wait_ms: u64,
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
    /// Sentinel mode's own user and password (the crate leaves them NULL).
    pub sentinel_user: *const c_char,
    pub sentinel_password: *const c_char,
    /// Unused connections are closed after this long (ms; default 30000).
    pub idle_close_ms: u64,
}

extern "C" {
    pub fn ccache_tier_free(t: *mut ccache_tier);
    pub fn ccache_disk_options_init(o: *mut ccache_disk_options);
    pub fn ccache_tier_disk(o: *const ccache_disk_options, out: *mut *mut ccache_tier) -> c_int;
    pub fn ccache_redis_options_init(o: *mut ccache_redis_options);
    pub fn ccache_tier_redis(o: *const ccache_redis_options, out: *mut *mut ccache_tier) -> c_int;
}
