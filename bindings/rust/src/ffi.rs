//! Raw declarations of the parts of `ccache.h` the crate uses, written by
//! hand.  Every struct here is checked against the C compiler's layout
//! (sizes, alignments and the offset of every field) by the test
//! `ffi::layout::structs_match_c_layout` (`mod layout` at the end of this
//! file), from a probe that `build.rs` compiles against the header in use
//! (the installed one, or the bundled build's).
//!
//! Everything here is `unsafe` to use and follows `ccache.h`'s contract; the
//! safe API is the rest of the crate.  Only use this module for what the safe
//! API lacks (the benchmark uses it for the C baseline).
#![allow(non_camel_case_types, missing_docs)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

/// `CCACHE_UNBOUNDED`: "no bound".
pub const CCACHE_UNBOUNDED: u64 = u64::MAX;
/// `CCACHE_CODEC_SKIP`: what `encode` returns for a program never to be stored.
pub const CCACHE_CODEC_SKIP: c_int = 1;
/// `CCACHE_CODEC_CORRUPT`: what `decode` returns for bad bytes (the entry is removed).
pub const CCACHE_CODEC_CORRUPT: c_int = 2;
/// `CCACHE_TIER_MAX_ENTRY_DEFAULT`: the default bound on a tier entry, bytes (64 MiB).
pub const CCACHE_TIER_MAX_ENTRY_DEFAULT: u64 = 64 << 20;
/// `CCACHE_MAX_TIERS`.
pub const CCACHE_MAX_TIERS: u32 = 8;

pub const CCACHE_OK: c_int = 0;
pub const CCACHE_MISS: c_int = 1;
pub const CCACHE_EINVAL: c_int = -1;
pub const CCACHE_ENOMEM: c_int = -2;
pub const CCACHE_EBUSY: c_int = -3;
pub const CCACHE_ECOMPILE: c_int = -4;
pub const CCACHE_EDEADLK: c_int = -5;
pub const CCACHE_EFORKED: c_int = -6;
pub const CCACHE_ETHREAD: c_int = -7;
pub const CCACHE_ENOTSUP: c_int = -8;
pub const CCACHE_EPERM: c_int = -9;
pub const CCACHE_EIO: c_int = -10;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ccache_key {
    pub lo: u64,
    pub hi: u64,
}

#[repr(C)]
pub struct ccache {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct ccache_program {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct ccache_tier {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct ccache_lease {
    pub closure: *mut c_void,
    pub native: *mut c_void,
    pub internal_: [*mut c_void; 2],
}

impl ccache_lease {
    /// The zero lease ("no lease").
    #[inline]
    pub const fn zeroed() -> Self {
        ccache_lease {
            closure: std::ptr::null_mut(),
            native: std::ptr::null_mut(),
            internal_: [std::ptr::null_mut(); 2],
        }
    }
}

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

/// `CCACHE_KEYS_FAST`.
pub const CCACHE_KEYS_FAST: u32 = 0;
/// `CCACHE_KEYS_STRONG`.
pub const CCACHE_KEYS_STRONG: u32 = 1;
/// `CCACHE_TRUST_UNSIGNED`: accept unsigned entries from tiers others can write.
pub const CCACHE_TRUST_UNSIGNED: u32 = 0x1;
/// `CCACHE_CLOSE_ABANDON`.
pub const CCACHE_CLOSE_ABANDON: c_uint = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ccache_strong_key {
    pub key: ccache_key,
    pub check: ccache_key,
}

#[repr(C)]
pub struct ccache_trust {
    _opaque: [u8; 0],
}

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

#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub struct ccache_fp {
    pub opaque_: [u8; 1024],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ccache_fp_ref {
    pub node: u32,
    pub slot: u32,
}

#[repr(C)]
pub struct ccache_fp_tensor {
    pub dtype: i32,
    pub rank: u32,
    pub dims: *const i64,
}

#[repr(C)]
pub struct ccache_fp_node {
    pub op_name: *const c_char,
    pub op_id: u64,
    pub attrs: *const c_void,
    pub attrs_len: usize,
    pub outputs: *const ccache_fp_tensor,
    pub n_outputs: u32,
    pub n_operands: u32,
    pub operands: *const ccache_fp_ref,
    pub constant: *const c_void,
    pub constant_len: usize,
    pub param_index: i64,
}

extern "C" {
    pub fn ccache_version() -> c_uint;
    pub fn ccache_strerror(status: c_int) -> *const c_char;
    pub fn ccache_error_detail() -> *const c_char;

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

    pub fn ccache_trust_available() -> c_int;
    pub fn ccache_trust_new(out: *mut *mut ccache_trust) -> c_int;
    pub fn ccache_trust_free(t: *mut ccache_trust);
    pub fn ccache_trust_set_signing_key_file(t: *mut ccache_trust, path: *const c_char) -> c_int;
    pub fn ccache_trust_add_key(t: *mut ccache_trust, text: *const c_char) -> c_int;
    pub fn ccache_trust_add_key_file(t: *mut ccache_trust, path: *const c_char) -> c_int;
    pub fn ccache_trust_generate(name: *const c_char, secret_path: *const c_char, public_path: *const c_char) -> c_int;

    pub fn ccache_fp_key(fp: *mut ccache_fp, key: ccache_key) -> c_int;
    pub fn ccache_fp_init_strong(fp: *mut ccache_fp) -> c_int;
    pub fn ccache_fp_final_strong(fp: *const ccache_fp, out: *mut ccache_strong_key) -> c_int;
    pub fn ccache_fp_graph_strong(
        nodes: *const ccache_fp_node,
        n_nodes: usize,
        outputs: *const ccache_fp_ref,
        n_outputs: usize,
        device: *const c_char,
        scratch: *mut ccache_strong_key,
        out: *mut ccache_strong_key,
    ) -> c_int;
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

    pub fn ccache_tier_free(t: *mut ccache_tier);
    pub fn ccache_disk_options_init(o: *mut ccache_disk_options);
    pub fn ccache_tier_disk(o: *const ccache_disk_options, out: *mut *mut ccache_tier) -> c_int;
    pub fn ccache_redis_options_init(o: *mut ccache_redis_options);
    pub fn ccache_tier_redis(o: *const ccache_redis_options, out: *mut *mut ccache_tier) -> c_int;

    pub fn ccache_stats_get(c: *mut ccache, out: *mut ccache_stats) -> c_int;

    pub fn ccache_fp_init(fp: *mut ccache_fp);
    pub fn ccache_fp_u64(fp: *mut ccache_fp, v: u64) -> c_int;
    pub fn ccache_fp_i64(fp: *mut ccache_fp, v: i64) -> c_int;
    pub fn ccache_fp_f64(fp: *mut ccache_fp, v: f64) -> c_int;
    pub fn ccache_fp_bytes(fp: *mut ccache_fp, data: *const c_void, len: usize) -> c_int;
    pub fn ccache_fp_str(fp: *mut ccache_fp, s: *const c_char, len: usize) -> c_int;
    pub fn ccache_fp_shape(fp: *mut ccache_fp, dtype: i32, rank: u32, dims: *const i64) -> c_int;
    pub fn ccache_fp_final(fp: *const ccache_fp, out: *mut ccache_key) -> c_int;
    pub fn ccache_fp_graph(
        nodes: *const ccache_fp_node,
        n_nodes: usize,
        outputs: *const ccache_fp_ref,
        n_outputs: usize,
        device: *const c_char,
        scratch: *mut ccache_key,
        out: *mut ccache_key,
    ) -> c_int;
}

#[cfg(test)]
mod layout {
    use super::*;
    use std::mem::MaybeUninit;

    include!(concat!(env!("OUT_DIR"), "/layout_c.rs"));

    macro_rules! size {
        ($t:ident) => {
            (stringify!($t).to_string(), std::mem::size_of::<$t>())
        };
    }
    macro_rules! align {
        ($t:ident) => {
            (concat!(stringify!($t), ".align").to_string(), std::mem::align_of::<$t>())
        };
    }
    macro_rules! off {
        ($t:ident, $f:ident, $name:literal) => {{
            let u = MaybeUninit::<$t>::uninit();
            let base = u.as_ptr();
            // SAFETY: only the address of the field is taken, nothing is read.
            let field = unsafe { std::ptr::addr_of!((*base).$f) };
            (concat!(stringify!($t), ".", $name).to_string(), field as usize - base as usize)
        }};
    }

    /// Every size, alignment and field offset of the structs in this module
    /// equals the C compiler's for the installed ccache.h.
    #[test]
    fn structs_match_c_layout() {
        let c = C_LAYOUT.unwrap_or_else(|why| panic!("no C layout to compare with: {why}"));
        let rust: &[(String, usize)] = include!(concat!(env!("OUT_DIR"), "/layout_rust.rs"));
        assert_eq!(c.len(), rust.len(), "the probe and the Rust table list different fields");
        let mut bad = Vec::new();
        for ((cn, cv), (rn, rv)) in c.iter().zip(rust.iter()) {
            assert_eq!(*cn, rn.as_str());
            if cv != rv {
                bad.push(format!("{cn}: C {cv}, Rust {rv}"));
            }
        }
        assert!(bad.is_empty(), "layout differs from C:\n{}", bad.join("\n"));
        assert!(c.len() > 100, "only {} rows checked", c.len());
    }
}
