//! Status codes and errors.

use crate::ffi;
use std::ffi::CStr;
use std::fmt;

/// A ccache status that is an error (never `CCACHE_OK`).
///
/// `Display` is `ccache_strerror()`'s text, followed by `ccache_error_detail()`'s
/// line for the calls that record one (opening a tier): e.g.
/// `refused: a file or directory is not private to this user: <the path and why>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    code: i32,
    detail: Option<String>,
}

impl Status {
    /// `CCACHE_EINVAL`: invalid argument.
    pub const EINVAL: i32 = ffi::CCACHE_EINVAL;
    /// `CCACHE_ENOMEM`: out of memory.
    pub const ENOMEM: i32 = ffi::CCACHE_ENOMEM;
    /// `CCACHE_EBUSY`: leases, handles or compiles outstanding, or a call from a callback.
    pub const EBUSY: i32 = ffi::CCACHE_EBUSY;
    /// `CCACHE_ECOMPILE`: a compile failed (another thread's, for a single-flight waiter).
    pub const ECOMPILE: i32 = ffi::CCACHE_ECOMPILE;
    /// `CCACHE_EDEADLK`: a compile asked for its own key.
    pub const EDEADLK: i32 = ffi::CCACHE_EDEADLK;
    /// `CCACHE_EFORKED`: the cache was created before `fork()`.
    pub const EFORKED: i32 = ffi::CCACHE_EFORKED;
    /// `CCACHE_ETHREAD`: the sweeper thread could not be started.
    pub const ETHREAD: i32 = ffi::CCACHE_ETHREAD;
    /// `CCACHE_ENOTSUP`: not supported by this build (e.g. Redis without hiredis).
    pub const ENOTSUP: i32 = ffi::CCACHE_ENOTSUP;
    /// `CCACHE_EPERM`: a tier's directory or a key file is not private to this user.
    pub const EPERM: i32 = ffi::CCACHE_EPERM;
    /// `CCACHE_EIO`: a tier could not be opened or used.
    pub const EIO: i32 = ffi::CCACHE_EIO;

    /// A status from a code, without detail.
    #[inline]
    pub fn from_code(code: i32) -> Status {
        Status { code, detail: None }
    }

    /// A status from a code, with this thread's `ccache_error_detail()` line
    /// (only for calls that record one, right after them).
    pub(crate) fn with_detail(code: i32) -> Status {
        // SAFETY: ccache_error_detail() never returns NULL; the text is valid
        // until the next ccache call on this thread, and is copied here.
        let d = unsafe { CStr::from_ptr(ffi::ccache_error_detail()) }.to_string_lossy().into_owned();
        Status { code, detail: if d.is_empty() { None } else { Some(d) } }
    }

    /// The C status code (negative; see the constants).
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The detail line, if the failed call recorded one.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// `ccache_strerror()` of the code.
    pub fn message(&self) -> &'static str {
        strerror(self.code)
    }
}

/// `ccache_strerror(code)`: a static text for any code.
pub fn strerror(code: i32) -> &'static str {
    // SAFETY: ccache_strerror() returns a static NUL-terminated string, never NULL.
    unsafe { CStr::from_ptr(ffi::ccache_strerror(code)) }.to_str().unwrap_or("unknown ccache status")
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())?;
        if let Some(d) = &self.detail {
            write!(f, ": {d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Status {}

/// What `get_or_compile` and `program_get_or_compile` fail with: the compile
/// callback's own error (on the thread that ran it), or a cache status
/// (including `ECOMPILE` for a single-flight waiter whose owner's compile
/// failed: the error value itself stays with the owner).
#[derive(Debug, PartialEq, Eq)]
pub enum CompileError<E> {
    /// The error the compile callback returned.
    Compile(E),
    /// A cache error.
    Cache(Status),
}

impl<E> From<Status> for CompileError<E> {
    fn from(s: Status) -> Self {
        CompileError::Cache(s)
    }
}

impl<E: fmt::Display> fmt::Display for CompileError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Compile(e) => write!(f, "compile failed: {e}"),
            CompileError::Cache(s) => s.fmt(f),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for CompileError<E> {}

/// `Ok(())` for `CCACHE_OK`, the status otherwise.
#[inline]
pub(crate) fn check(code: i32) -> Result<(), Status> {
    if code == ffi::CCACHE_OK {
        Ok(())
    } else {
        Err(Status::from_code(code))
    }
}
