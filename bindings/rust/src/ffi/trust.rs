//! What `ccache/trust.h` declares: the trust object (signing and trusted
//! keys) and its calls (part of [`crate::ffi`]: see there).

use std::os::raw::{c_char, c_int};

#[repr(C)]
pub struct ccache_trust {
    _opaque: [u8; 0],
}

extern "C" {
    pub fn ccache_trust_available() -> c_int;
    pub fn ccache_trust_new(out: *mut *mut ccache_trust) -> c_int;
    pub fn ccache_trust_free(t: *mut ccache_trust);
    pub fn ccache_trust_set_signing_key_file(t: *mut ccache_trust, path: *const c_char) -> c_int;
    pub fn ccache_trust_add_key(t: *mut ccache_trust, text: *const c_char) -> c_int;
    pub fn ccache_trust_add_key_file(t: *mut ccache_trust, path: *const c_char) -> c_int;
    pub fn ccache_trust_generate(name: *const c_char, secret_path: *const c_char, public_path: *const c_char) -> c_int;
}
