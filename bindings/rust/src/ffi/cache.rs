//! What `ccache/cache.h` declares, with the headers it includes: the
//! configuration and its callbacks (cache.h), the events and the statistics
//! (stats.h), and the calls on a cache (cache.h, program.h, closure.h,
//! flight.h) (part of [`crate::ffi`]: see there).

use super::common::{ccache, ccache_key, ccache_lease, ccache_program, ccache_strong_key, ccache_tier};
use super::tier::{ccache_codec, ccache_tier_health};
use super::trust::ccache_trust;
use std::os::raw::{c_char, c_int, c_uint, c_void};

/// `CCACHE_UNBOUNDED`: "no bound".
pub const CCACHE_UNBOUNDED: u64 = u64::MAX;
/// `CCACHE_TIER_MAX_ENTRY_DEFAULT`: the default bound on a tier entry, bytes (64 MiB).
pub const CCACHE_TIER_MAX_ENTRY_DEFAULT: u64 = 64 << 20;
/// `CCACHE_MAX_TIERS`.
pub const CCACHE_MAX_TIERS: u32 = 8;

pub type ccache_destroy_fn = Option<unsafe extern "C" fn(obj: *mut c_void, ctx: *mut c_void)>;
pub type ccache_clock_fn = Option<unsafe extern "C" fn(ctx: *mut c_void) -> u64>;
pub type ccache_alloc_fn = Option<unsafe extern "C" fn(alloc_ctx: *mut c_void, size: usize) -> *mut c_void>;
pub type ccache_free_fn = Option<unsafe extern "C" fn(alloc_ctx: *mut c_void, ptr: *mut c_void)>;
pub type ccache_compile_fn = Option<
    unsafe extern "C" fn(
        ud: *mut c_void,
        c: *mut ccache,
        key: ccache_key,
        closure_out: *mut *mut c_void,
        program_out: *mut *mut ccache_program,
    ) -> c_int,
>;
pub type ccache_program_compile_fn = Option<
    unsafe extern "C" fn(
        ud: *mut c_void,
        c: *mut ccache,
        pkey: ccache_key,
        native_out: *mut *mut c_void,
        cost_out: *mut u64,
    ) -> c_int,
>;

#[repr(C)]
pub struct ccache_config {
    pub size: u32,
    pub magic: u32,
    pub sweeper_thread: c_int,
    pub max_items: u64,
    pub ttl_ms: u64,
    pub max_cost_bytes: u64,
    pub destroy_closure: ccache_destroy_fn,
    pub destroy_program: ccache_destroy_fn,
    pub ctx: *mut c_void,
    pub clock_ms: ccache_clock_fn,
    pub alloc: ccache_alloc_fn,
    pub free: ccache_free_fn,
    pub alloc_ctx: *mut c_void,
    pub codec: *const ccache_codec,
    pub runtime_tag: *const c_char,
    pub tier_min_compile_us: u64,
    pub tiers: *const *mut ccache_tier,
    pub n_tiers: u32,
    /// `ccache_key_mode`: `CCACHE_KEYS_FAST` or `CCACHE_KEYS_STRONG`.
    pub key_mode: u32,
    /// The event hook.
    pub on_event: ccache_event_fn,
    pub event_ctx: *mut c_void,
    /// Largest tier entry read or written, bytes of the framed entry.
    pub tier_max_entry_bytes: u64,
    /// Signing and trusted keys (copied at open), or NULL.
    pub trust: *const ccache_trust,
    /// `CCACHE_TRUST_*` flags.
    pub trust_flags: u32,
}

/// `CCACHE_TRUST_UNSIGNED`: accept unsigned entries from tiers others can write.
pub const CCACHE_TRUST_UNSIGNED: u32 = 0x1;
/// `CCACHE_CLOSE_ABANDON`.
pub const CCACHE_CLOSE_ABANDON: c_uint = 1;

#[repr(C)]
pub struct ccache_event {
    pub size: u32,
    pub kind: c_int,
    pub level: c_int,
    pub key: ccache_key,
    pub status: c_int,
    pub err: c_int,
    pub cause: c_int,
    pub tier: u32,
    pub tier_name: *const c_char,
    pub op: *const c_char,
    pub reason: *const c_char,
    pub duration_ns: u64,
}

pub type ccache_event_fn = Option<unsafe extern "C" fn(ctx: *mut c_void, ev: *const ccache_event)>;

/// Declares `ccache_stats` and the crate's `Stats` from one field list.
macro_rules! stats_struct {
    ($($(#[$doc:meta])* $f:ident),* $(,)?) => {
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        pub struct ccache_stats {
            pub size: u32,
            $(pub $f: u64,)*
        }

        /// A statistics snapshot (see `ccache_stats` in ccache.h for each
        /// field's exact meaning).  Counters are monotonic since the cache
        /// opened and wrap modulo 2^64; gauges are current values.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Stats {
            $($(#[$doc])* pub $f: u64,)*
        }

        impl From<&ccache_stats> for Stats {
            #[inline]
            fn from(s: &ccache_stats) -> Stats {
                Stats { $($f: s.$f,)* }
            }
        }
    };
}

stats_struct! {
    /// Closure lookups that returned a lease.
    hits,
    /// Closure lookups that did not.
    misses,
    /// Puts and compiles that stored an entry, replacements included.
    inserts,
    /// Inserts that replaced an entry under the same key.
    replaced,
    /// Entries evicted by `max_items`.
    evicted_capacity,
    /// Entries removed because they expired.
    evicted_ttl,
    /// Entries evicted by `max_cost_bytes`.
    evicted_cost,
    /// Entries removed by `remove`.
    removed,
    /// Entries removed by `clear`.
    cleared,
    /// Gauge: closure entries in the table.
    items,
    /// Gauge: programs alive.
    programs,
    /// Programs that left the cache for good (their `P` was dropped).
    programs_destroyed,
    /// Closures that left the cache for good (their `C` was dropped).
    closures_destroyed,
    /// Gauge: leases not yet released.
    leases_out,
    /// Gauge: charged cost, bytes.
    cost_bytes,
    /// Program lookups that found the program.
    program_hits,
    /// Program lookups that did not.
    program_misses,
    /// Closure compiles that ran (failed and panicked ones included).
    compiles,
    /// Program compiles that ran (failed and panicked ones included).
    program_compiles,
    /// Closure compiles that failed (program level: `program_compile_failures`).
    compile_failures,
    /// Closure-level single-flight joins (program level: `program_waits`).
    waits,
    /// Nanoseconds in closure compiles, without nested compiles and waits.
    compile_ns,
    /// Sweeper waits that ended at their deadline.
    sweeper_wakeups,
    /// Program misses served by a tier.
    tier_hits,
    /// Program misses that asked the tiers and got nothing usable.
    tier_misses,
    /// Successful tier puts.
    tier_writes,
    /// Failed tier ops and codec calls.
    tier_errors,
    /// Tier entries that failed verification.
    tier_corrupt,
    /// Bytes of entries read from tiers.
    tier_bytes_read,
    /// Bytes of entries written to tiers.
    tier_bytes_written,
    /// Program misses that waited for a tier's compile lock.
    tier_lock_waits,
    /// Longest such wait, milliseconds.
    tier_wait_ms_max,
    /// Compile leases whose renewal failed (each also in `tier_errors`).
    tier_leases_lost,
    /// Directory-tier writes and removes whose size accounting was deferred
    /// (the size file's lock was held past `io_lock_ms`).
    tier_lock_timeouts,
    /// Gauge: program handles not yet released.
    handles_out,
    /// Program-level single-flight joins.
    program_waits,
    /// Program compiles that failed.
    program_compile_failures,
    /// Nanoseconds in program compiles (without nested compiles, waits and tier I/O).
    program_compile_ns,
    /// Misses on a key among the last 64 evicted by a bound: a bound that thrashes.
    misses_evicted,
    /// Tier entries over `tier_max_entry_bytes` (each lookup that found one,
    /// each program not written for it).
    tier_oversize,
    /// Intact tier entries refused by the trust object (never decoded or copied).
    tier_rejected,
    /// Programs a reader (trusted keys only) compiled and did not publish.
    tier_unpublished,
    /// How hits order against writers: 1 membarrier (no fence per hit), 2 fenced.
    read_side,
    /// Times a writer stopped this cache's hits (to change or reclaim the table).
    reader_blocks,
    /// Of those, the ones that issued membarrier(2).
    heavy_barriers,
}

extern "C" {
    pub fn ccache_config_init(cfg: *mut ccache_config);
    pub fn ccache_close_ex(c: *mut ccache, flags: c_uint) -> c_int;

    pub fn ccache_program_intern_strong(
        c: *mut ccache,
        pkey: *const ccache_strong_key,
        native: *mut c_void,
        cost_bytes: u64,
        out: *mut *mut ccache_program,
    ) -> c_int;
    pub fn ccache_program_fetch_strong(c: *mut ccache, pkey: *const ccache_strong_key, out: *mut *mut ccache_program) -> c_int;
    pub fn ccache_put_strong(c: *mut ccache, key: *const ccache_strong_key, closure: *mut c_void, p: *mut ccache_program) -> c_int;
    pub fn ccache_fetch_strong(c: *mut ccache, key: *const ccache_strong_key, out: *mut ccache_lease) -> c_int;
    pub fn ccache_remove_strong(c: *mut ccache, key: *const ccache_strong_key) -> c_int;
    pub fn ccache_get_or_compile_strong(
        c: *mut ccache,
        key: *const ccache_strong_key,
        compile: ccache_compile_fn,
        ud: *mut c_void,
        out: *mut ccache_lease,
    ) -> c_int;
    pub fn ccache_program_get_or_compile_strong(
        c: *mut ccache,
        pkey: *const ccache_strong_key,
        compile: ccache_program_compile_fn,
        ud: *mut c_void,
        out: *mut *mut ccache_program,
    ) -> c_int;

    pub fn ccache_tier_health_get(c: *mut ccache, tier: u32, part: u32, out: *mut ccache_tier_health) -> c_int;

    pub fn ccache_open(cfg: *const ccache_config, out: *mut *mut ccache) -> c_int;
    pub fn ccache_close(c: *mut ccache) -> c_int;
    pub fn ccache_set_limits(c: *mut ccache, max_items: u64, ttl_ms: u64, max_cost_bytes: u64) -> c_int;
    pub fn ccache_get_limits(
        c: *mut ccache,
        max_items: *mut u64,
        ttl_ms: *mut u64,
        max_cost_bytes: *mut u64,
    ) -> c_int;

    pub fn ccache_program_intern(
        c: *mut ccache,
        pkey: ccache_key,
        native: *mut c_void,
        cost_bytes: u64,
        out: *mut *mut ccache_program,
    ) -> c_int;
    pub fn ccache_program_fetch(c: *mut ccache, pkey: ccache_key, out: *mut *mut ccache_program) -> c_int;
    pub fn ccache_program_native(p: *const ccache_program) -> *mut c_void;
    pub fn ccache_program_release(c: *mut ccache, p: *mut ccache_program);

    pub fn ccache_put(c: *mut ccache, key: ccache_key, closure: *mut c_void, p: *mut ccache_program) -> c_int;
    pub fn ccache_fetch(c: *mut ccache, key: ccache_key, out: *mut ccache_lease) -> c_int;
    pub fn ccache_lease_release(c: *mut ccache, lease: *mut ccache_lease);
    pub fn ccache_remove(c: *mut ccache, key: ccache_key) -> c_int;
    pub fn ccache_clear(c: *mut ccache) -> c_int;
    pub fn ccache_sweep(c: *mut ccache) -> i64;

    pub fn ccache_get_or_compile(
        c: *mut ccache,
        key: ccache_key,
        compile: ccache_compile_fn,
        ud: *mut c_void,
        out: *mut ccache_lease,
    ) -> c_int;
    pub fn ccache_program_get_or_compile(
        c: *mut ccache,
        pkey: ccache_key,
        compile: ccache_program_compile_fn,
        ud: *mut c_void,
        out: *mut *mut ccache_program,
    ) -> c_int;

    pub fn ccache_stats_get(c: *mut ccache, out: *mut ccache_stats) -> c_int;
}
