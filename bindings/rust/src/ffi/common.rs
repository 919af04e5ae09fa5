//! What `ccache/common.h` declares: the status codes, the keys (and the
//! key modes), the opaque handles and the lease, the version and the error
//! text (part of [`crate::ffi`]: see there).

use std::os::raw::{c_char, c_int, c_uint, c_void};

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

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ccache_strong_key {
    pub key: ccache_key,
    pub check: ccache_key,
}

/// `CCACHE_KEYS_FAST`.
pub const CCACHE_KEYS_FAST: u32 = 0;
/// `CCACHE_KEYS_STRONG`.
pub const CCACHE_KEYS_STRONG: u32 = 1;

extern "C" {
    pub fn ccache_version() -> c_uint;
    pub fn ccache_strerror(status: c_int) -> *const c_char;
    pub fn ccache_error_detail() -> *const c_char;
}
