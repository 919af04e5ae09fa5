//! Signed tier entries (ccache/trust.h): a signing key makes a cache a
//! *writer* (it signs every entry it stores), trusted public keys make it
//! check every entry it reads from any tier before the codec sees a byte:
//! an entry unsigned, or signed by a key not trusted, is *rejected*
//! (`Stats::tier_rejected`), never decoded, and the program compiles.  A
//! cache with trusted keys only is a *reader*: it never publishes what it
//! compiles (`Stats::tier_unpublished`).
//!
//! Key files are one line, `NAME:BASE64`; make a pair with
//! [`Trust::generate`] (or the installed `closure-cache-keys generate`).  A
//! secret key file must be private to its owner (mode 0600 or 0400).

use crate::ffi;
use crate::status::{check, Status};
use std::ffi::CString;
use std::path::Path;
use std::ptr::{self, NonNull};

/// A signing key and trusted public keys, for [`crate::Config::trust`].
/// The cache copies it at open; it is freed (its secret key wiped) when
/// dropped.
pub struct Trust {
    raw: NonNull<ffi::ccache_trust>,
}

// SAFETY: plain owned memory; every change takes `&mut self`, the cache only
// reads it (during open).
unsafe impl Send for Trust {}
unsafe impl Sync for Trust {}

impl Drop for Trust {
    fn drop(&mut self) {
        // SAFETY: ours, freed once.
        unsafe { ffi::ccache_trust_free(self.raw.as_ptr()) };
    }
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust").finish_non_exhaustive()
    }
}

fn path_c(p: &Path) -> Result<CString, Status> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes()).map_err(|_| Status::from_code(Status::EINVAL))
}

/// The key calls record a detail for these codes (the path, the mode, which key).
fn detailed(rc: i32) -> Result<(), Status> {
    match rc {
        ffi::CCACHE_OK => Ok(()),
        ffi::CCACHE_EINVAL | ffi::CCACHE_EPERM | ffi::CCACHE_EIO => Err(Status::with_detail(rc)),
        _ => Err(Status::from_code(rc)),
    }
}

impl Trust {
    /// Whether this build of the library can sign and verify (it has libsodium:
    /// the crate's `trust` feature for a bundled build).  Without it every
    /// key call is `ENOTSUP`, and so is opening a cache with a `Trust`: never
    /// "accept everything".
    pub fn available() -> bool {
        // SAFETY: no arguments.
        unsafe { ffi::ccache_trust_available() != 0 }
    }

    /// An empty trust object (neither signing nor trusted keys: opening a
    /// cache with it is `EINVAL`).
    pub fn new() -> Result<Trust, Status> {
        let mut out = ptr::null_mut();
        // SAFETY: a valid out-pointer.
        check(unsafe { ffi::ccache_trust_new(&mut out) })?;
        NonNull::new(out).map(|raw| Trust { raw }).ok_or_else(|| Status::from_code(Status::ENOMEM))
    }

    /// Sets the signing key from a secret key file (its public half is
    /// trusted too): caches opened with this object are writers.  Errors
    /// (`Display` names the file and why): `EINVAL` (not a secret key, or a
    /// signing key already set), `EPERM` (readable or writable by group or
    /// others, or not a regular file), `EIO`, `ENOTSUP`.
    pub fn signing_key_file(&mut self, path: impl AsRef<Path>) -> Result<&mut Self, Status> {
        let p = path_c(path.as_ref())?;
        // SAFETY: a live object and a NUL-terminated path (not kept).
        detailed(unsafe { ffi::ccache_trust_set_signing_key_file(self.raw.as_ptr(), p.as_ptr()) })?;
        Ok(self)
    }

    /// Trusts the public key in a file (`NAME:BASE64` of 32 bytes).  Errors:
    /// `EINVAL` (not a public key, or 16 keys already), `EIO`, `ENOTSUP`.
    pub fn trusted_key_file(&mut self, path: impl AsRef<Path>) -> Result<&mut Self, Status> {
        let p = path_c(path.as_ref())?;
        // SAFETY: as above.
        detailed(unsafe { ffi::ccache_trust_add_key_file(self.raw.as_ptr(), p.as_ptr()) })?;
        Ok(self)
    }

    /// Trusts a public key given as text (`NAME:BASE64`, a trailing newline
    /// allowed).  Errors as [`Trust::trusted_key_file`], without `EIO`.
    pub fn trusted_key(&mut self, text: &str) -> Result<&mut Self, Status> {
        let t = CString::new(text).map_err(|_| Status::from_code(Status::EINVAL))?;
        // SAFETY: as above.
        detailed(unsafe { ffi::ccache_trust_add_key(self.raw.as_ptr(), t.as_ptr()) })?;
        Ok(self)
    }

    /// Makes a key pair: `secret` (mode 0600) and `public` (0644), never over
    /// an existing file.  `name`: 1..64 bytes of `[A-Za-z0-9._-]`.  Errors:
    /// `EINVAL` (a bad name), `EIO` (a file exists or cannot be written: the
    /// detail names it; nothing is left behind), `ENOTSUP`.
    pub fn generate(name: &str, secret: impl AsRef<Path>, public: impl AsRef<Path>) -> Result<(), Status> {
        let n = CString::new(name).map_err(|_| Status::from_code(Status::EINVAL))?;
        let (s, p) = (path_c(secret.as_ref())?, path_c(public.as_ref())?);
        // SAFETY: NUL-terminated strings, not kept.
        detailed(unsafe { ffi::ccache_trust_generate(n.as_ptr(), s.as_ptr(), p.as_ptr()) })
    }

    pub(crate) fn as_ptr(&self) -> *const ffi::ccache_trust {
        self.raw.as_ptr()
    }
}
