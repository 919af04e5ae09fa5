//! The 128-bit [`Key`] of a fast cache, and its conversions to and from
//! `u128` and the C struct (the key modes and the 256-bit key are in
//! [`crate::keys`]).

use crate::ffi;
#[allow(unused_imports)] // only named by intra-doc links (rustc 1.63 counts them unused)
use crate::{graph_key, Fingerprint};

/// A 128-bit key: a closure key (a call site) or a program key (what the
/// program is).  Derive keys from structure with [`Fingerprint`] or
/// [`graph_key`]; never from addresses, `Debug` text or `DefaultHasher`
/// (see the README).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// Low 64 bits.
    pub lo: u64,
    /// High 64 bits.
    pub hi: u64,
}

impl From<u128> for Key {
    #[inline]
    fn from(v: u128) -> Key {
        Key { lo: v as u64, hi: (v >> 64) as u64 }
    }
}

impl From<Key> for u128 {
    #[inline]
    fn from(k: Key) -> u128 {
        (k.hi as u128) << 64 | k.lo as u128
    }
}

impl From<Key> for ffi::ccache_key {
    #[inline]
    fn from(k: Key) -> ffi::ccache_key {
        ffi::ccache_key { lo: k.lo, hi: k.hi }
    }
}

impl From<ffi::ccache_key> for Key {
    #[inline]
    fn from(k: ffi::ccache_key) -> Key {
        Key { lo: k.lo, hi: k.hi }
    }
}
