//! Key modes: a cache takes fast keys ([`Key`], XXH3-128) or strong keys
//! ([`StrongKey`], BLAKE2b-256), fixed when it opens.  The mode is a type
//! parameter of [`crate::Cache`] (`Cache<C, P>` is `Cache<C, P, Fast>`;
//! [`crate::StrongCache`] is `Cache<C, P, Strong>`), so a fast key given to a
//! strong cache, or a strong key to a fast one, does not compile:
//!
//! ```compile_fail
//! use ccache::{Cache, Config, Fingerprint, Strong};
//! let cache: Cache<u32, u32, Strong> = Cache::open(Config::default()).unwrap();
//! let fast = Fingerprint::new().str("matmul").finish().unwrap();
//! let _ = cache.program_fetch(fast); // a fast Key where a StrongKey is needed
//! ```
//!
//! ```compile_fail
//! use ccache::{Cache, Config, StrongFingerprint};
//! let cache: Cache<u32, u32> = Cache::open(Config::default()).unwrap();
//! let strong = StrongFingerprint::new().str("matmul").finish().unwrap();
//! let _ = cache.program_fetch(strong); // a StrongKey where a fast Key is needed
//! ```
//!
//! while the matching pairs compile (and run: a strong cache needs no
//! libsodium, only the strong builder does):
//!
//! ```
//! use ccache::{Cache, Config, Fingerprint, Strong, StrongCache, StrongKey};
//! let strong: StrongCache<u32, u32> = Cache::open(Config::default()).unwrap();
//! let fast: Cache<u32, u32> = Cache::open(Config::default()).unwrap();
//! assert!(strong.program_fetch(StrongKey::from_bytes([7; 32])).unwrap().is_none());
//! assert!(fast.program_fetch(Fingerprint::new().str("matmul").finish().unwrap()).unwrap().is_none());
//! ```

use crate::ffi;
use crate::Key;
use std::os::raw::{c_int, c_void};

/// A 256-bit key for a strong cache ([`crate::StrongCache`]): `key` is the
/// table key, `check` is stored beside it and compared on every match.
/// Make it with [`crate::StrongFingerprint`] or [`crate::graph_key_strong`]
/// (or any collision-resistant 256-bit digest, with [`StrongKey::from_bytes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StrongKey {
    /// Digest bits 0..127.
    pub key: Key,
    /// Digest bits 128..255.
    pub check: Key,
}

impl StrongKey {
    /// From a 32-byte digest, little-endian as `ccache_strong_key` maps it
    /// (bytes 0..7 are `key.lo`, 8..15 `key.hi`, 16..23 `check.lo`, 24..31 `check.hi`).
    pub fn from_bytes(b: [u8; 32]) -> StrongKey {
        let w = |i: usize| u64::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]]);
        StrongKey { key: Key { lo: w(0), hi: w(8) }, check: Key { lo: w(16), hi: w(24) } }
    }
    /// The 32 bytes, as [`StrongKey::from_bytes`] reads them.
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        for (i, w) in [self.key.lo, self.key.hi, self.check.lo, self.check.hi].iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        b
    }
}

impl From<StrongKey> for ffi::ccache_strong_key {
    #[inline]
    fn from(k: StrongKey) -> Self {
        ffi::ccache_strong_key { key: k.key.into(), check: k.check.into() }
    }
}

impl From<ffi::ccache_strong_key> for StrongKey {
    #[inline]
    fn from(k: ffi::ccache_strong_key) -> Self {
        StrongKey { key: k.key.into(), check: k.check.into() }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Fast keys: [`Key`], 128 bits of XXH3 (the default mode).  Not
/// collision-resistant: for graphs from trusted parties only.
#[derive(Debug)]
pub enum Fast {}
/// Strong keys: [`StrongKey`], 256 bits of BLAKE2b (graphs from anyone).
#[derive(Debug)]
pub enum Strong {}

/// A cache's key mode, [`Fast`] or [`Strong`] (sealed: no other).  Its
/// methods are the C calls of that mode, for the crate's own use.
pub trait KeyMode: sealed::Sealed + Send + Sync + 'static {
    /// The keys of this mode.
    type Key: Copy + Eq + std::hash::Hash + std::fmt::Debug;
    #[doc(hidden)]
    const MODE: u32;
    #[doc(hidden)]
    unsafe fn get_or_compile(c: *mut ffi::ccache, k: &Self::Key, f: ffi::ccache_compile_fn, ud: *mut c_void, out: *mut ffi::ccache_lease) -> c_int;
    #[doc(hidden)]
    unsafe fn program_get_or_compile(
        c: *mut ffi::ccache,
        k: &Self::Key,
        f: ffi::ccache_program_compile_fn,
        ud: *mut c_void,
        out: *mut *mut ffi::ccache_program,
    ) -> c_int;
    #[doc(hidden)]
    unsafe fn program_intern(c: *mut ffi::ccache, k: &Self::Key, native: *mut c_void, cost: u64, out: *mut *mut ffi::ccache_program) -> c_int;
    #[doc(hidden)]
    unsafe fn program_fetch(c: *mut ffi::ccache, k: &Self::Key, out: *mut *mut ffi::ccache_program) -> c_int;
    #[doc(hidden)]
    unsafe fn put(c: *mut ffi::ccache, k: &Self::Key, closure: *mut c_void, p: *mut ffi::ccache_program) -> c_int;
    #[doc(hidden)]
    unsafe fn fetch(c: *mut ffi::ccache, k: &Self::Key, out: *mut ffi::ccache_lease) -> c_int;
    #[doc(hidden)]
    unsafe fn remove(c: *mut ffi::ccache, k: &Self::Key) -> c_int;
}

impl sealed::Sealed for Fast {}
impl sealed::Sealed for Strong {}

impl KeyMode for Fast {
    type Key = Key;
    const MODE: u32 = ffi::CCACHE_KEYS_FAST;
    #[inline(always)]
    unsafe fn get_or_compile(c: *mut ffi::ccache, k: &Key, f: ffi::ccache_compile_fn, ud: *mut c_void, out: *mut ffi::ccache_lease) -> c_int {
        ffi::ccache_get_or_compile(c, (*k).into(), f, ud, out)
    }
    #[inline(always)]
    unsafe fn program_get_or_compile(
        c: *mut ffi::ccache,
        k: &Key,
        f: ffi::ccache_program_compile_fn,
        ud: *mut c_void,
        out: *mut *mut ffi::ccache_program,
    ) -> c_int {
        ffi::ccache_program_get_or_compile(c, (*k).into(), f, ud, out)
    }
    #[inline(always)]
    unsafe fn program_intern(c: *mut ffi::ccache, k: &Key, native: *mut c_void, cost: u64, out: *mut *mut ffi::ccache_program) -> c_int {
        ffi::ccache_program_intern(c, (*k).into(), native, cost, out)
    }
    #[inline(always)]
    unsafe fn program_fetch(c: *mut ffi::ccache, k: &Key, out: *mut *mut ffi::ccache_program) -> c_int {
        ffi::ccache_program_fetch(c, (*k).into(), out)
    }
    #[inline(always)]
    unsafe fn put(c: *mut ffi::ccache, k: &Key, closure: *mut c_void, p: *mut ffi::ccache_program) -> c_int {
        ffi::ccache_put(c, (*k).into(), closure, p)
    }
    #[inline(always)]
    unsafe fn fetch(c: *mut ffi::ccache, k: &Key, out: *mut ffi::ccache_lease) -> c_int {
        ffi::ccache_fetch(c, (*k).into(), out)
    }
    #[inline(always)]
    unsafe fn remove(c: *mut ffi::ccache, k: &Key) -> c_int {
        ffi::ccache_remove(c, (*k).into())
    }
}

impl KeyMode for Strong {
    type Key = StrongKey;
    const MODE: u32 = ffi::CCACHE_KEYS_STRONG;
    #[inline(always)]
    unsafe fn get_or_compile(c: *mut ffi::ccache, k: &StrongKey, f: ffi::ccache_compile_fn, ud: *mut c_void, out: *mut ffi::ccache_lease) -> c_int {
        let k: ffi::ccache_strong_key = (*k).into();
        ffi::ccache_get_or_compile_strong(c, &k, f, ud, out)
    }
    #[inline(always)]
    unsafe fn program_get_or_compile(
        c: *mut ffi::ccache,
        k: &StrongKey,
        f: ffi::ccache_program_compile_fn,
        ud: *mut c_void,
        out: *mut *mut ffi::ccache_program,
    ) -> c_int {
        let k: ffi::ccache_strong_key = (*k).into();
        ffi::ccache_program_get_or_compile_strong(c, &k, f, ud, out)
    }
    #[inline(always)]
    unsafe fn program_intern(c: *mut ffi::ccache, k: &StrongKey, native: *mut c_void, cost: u64, out: *mut *mut ffi::ccache_program) -> c_int {
        let k: ffi::ccache_strong_key = (*k).into();
        ffi::ccache_program_intern_strong(c, &k, native, cost, out)
    }
    #[inline(always)]
    unsafe fn program_fetch(c: *mut ffi::ccache, k: &StrongKey, out: *mut *mut ffi::ccache_program) -> c_int {
        let k: ffi::ccache_strong_key = (*k).into();
        ffi::ccache_program_fetch_strong(c, &k, out)
    }
    #[inline(always)]
    unsafe fn put(c: *mut ffi::ccache, k: &StrongKey, closure: *mut c_void, p: *mut ffi::ccache_program) -> c_int {
        let k: ffi::ccache_strong_key = (*k).into();
        ffi::ccache_put_strong(c, &k, closure, p)
    }
    #[inline(always)]
    unsafe fn fetch(c: *mut ffi::ccache, k: &StrongKey, out: *mut ffi::ccache_lease) -> c_int {
        let k: ffi::ccache_strong_key = (*k).into();
        ffi::ccache_fetch_strong(c, &k, out)
    }
    #[inline(always)]
    unsafe fn remove(c: *mut ffi::ccache, k: &StrongKey) -> c_int {
        let k: ffi::ccache_strong_key = (*k).into();
        ffi::ccache_remove_strong(c, &k)
    }
}
