//! Persistent tiers (a directory, Redis) and the codec that serialises
//! programs for them.  Tiers sit behind the program table only: a program
//! miss ([`crate::Cache::program_get_or_compile`]) asks them before
//! compiling, and writes what it compiles to them.

use crate::ffi;
use crate::panic;
use crate::status::Status;
use crate::cache::{Inner, Slot};
use crate::config::ms_ceil;
use crate::Key;
use std::ffi::{c_void, CString};
use std::os::raw::c_int;
use std::path::PathBuf;
use std::ptr::{self, NonNull};
use std::time::Duration;

/// Serialises programs for the tiers.  Called on the thread that owns a
/// program miss, possibly from several threads at once for different keys.
///
/// Whatever comes back from a tier has passed the library's checksum, key,
/// length and runtime-tag checks before `decode` sees it, but a tier is
/// trusted input only as far as whoever can write to it is: `decode` must
/// reject bytes it cannot parse (return `None`) rather than panic or trust
/// lengths inside them.
pub trait Codec<P>: Send + Sync + 'static {
    /// The bytes of `program`, or `None` for a program never to be stored.
    fn encode(&self, pkey: Key, program: &P) -> Option<Vec<u8>>;
    /// A program and its cost in bytes from verified bytes, or `None`
    /// (counted in `tier_errors`, the entry kept; the program is compiled
    /// instead).  Implement [`Codec::decode_checked`] too to tell bad bytes
    /// from a failure of this process.
    fn decode(&self, pkey: Key, bytes: &[u8]) -> Option<(P, u64)>;
    /// What the library calls: by default `decode`, with `None` as
    /// [`DecodeError::Failed`].  Return [`DecodeError::Corrupt`] for bytes no
    /// process could load (counted in `tier_corrupt`, the entry removed) and
    /// [`DecodeError::Failed`] for a failure of this process (no memory, a
    /// host that cannot load a good program: `tier_errors`, the entry kept
    /// for the others).  A panic counts as `Failed`.
    fn decode_checked(&self, pkey: Key, bytes: &[u8]) -> Result<(P, u64), DecodeError> {
        self.decode(pkey, bytes).ok_or(DecodeError::Failed)
    }
}

/// Why [`Codec::decode_checked`] returned no program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// These bytes are bad (`CCACHE_CODEC_CORRUPT`): the entry is removed.
    Corrupt,
    /// This process failed to load them: the entry stays.
    Failed,
}

pub(crate) unsafe extern "C" fn encode_trampoline<P: 'static>(
    ctx: *mut c_void,
    pkey: ffi::ccache_key,
    native: *mut c_void,
    bytes: *mut *mut c_void,
    len: *mut usize,
) -> c_int {
    let inner = &*(ctx as *const Inner<P>);
    let codec = match &inner.codec {
        Some(c) => c,
        None => return -1,
    };
    let program: &P = Slot::get(native);
    match panic::guard(|| codec.encode(pkey.into(), program)) {
        Some(Some(v)) => {
            let b = v.into_boxed_slice();
            *len = b.len();
            *bytes = Box::into_raw(b) as *mut u8 as *mut c_void;
            0
        }
        Some(None) => ffi::CCACHE_CODEC_SKIP,
        None => -1,
    }
}

pub(crate) unsafe extern "C" fn free_bytes_trampoline(_ctx: *mut c_void, bytes: *mut c_void, len: usize) {
    drop(Box::from_raw(ptr::slice_from_raw_parts_mut(bytes as *mut u8, len)));
}

pub(crate) unsafe extern "C" fn decode_trampoline<P: 'static>(
    ctx: *mut c_void,
    pkey: ffi::ccache_key,
    bytes: *const c_void,
    len: usize,
    native_out: *mut *mut c_void,
    cost_out: *mut u64,
) -> c_int {
    let inner = &*(ctx as *const Inner<P>);
    let codec = match &inner.codec {
        Some(c) => c,
        None => return -1,
    };
    let data: &[u8] = if len == 0 { &[] } else { std::slice::from_raw_parts(bytes as *const u8, len) };
    match panic::guard(|| codec.decode_checked(pkey.into(), data)) {
        Some(Ok((program, cost))) => {
            *native_out = Slot::into_raw(program);
            *cost_out = cost;
            0
        }
        Some(Err(DecodeError::Corrupt)) => ffi::CCACHE_CODEC_CORRUPT,
        _ => -1,
    }
}

/// A tier not yet given to a cache.  [`crate::Config::tiers`] hands it to
/// [`crate::Cache::open`], which owns and closes it from then on; a tier
/// dropped unused is freed.
pub struct Tier {
    pub(crate) raw: NonNull<ffi::ccache_tier>,
}

// SAFETY: an unused tier is plain owned memory; it is used only by the cache
// that takes it.
unsafe impl Send for Tier {}

impl Drop for Tier {
    fn drop(&mut self) {
        // SAFETY: a tier no cache owns (open forgets the ones it takes).
        unsafe { ffi::ccache_tier_free(self.raw.as_ptr()) };
    }
}

/// Options of the directory tier (defaults from `ccache_disk_options_init()`).
#[derive(Clone, Debug)]
pub struct DiskOptions {
    /// The directory; created 0700 if absent; refused (`EPERM`) unless private to this user.
    pub dir: PathBuf,
    /// Size cap in bytes, or `None`.
    pub max_bytes: Option<u64>,
    /// fsync each entry before publishing it.
    pub fsync: bool,
    /// First wait between lock attempts.
    pub lock_poll: Duration,
    /// Backoff cap between lock attempts.
    pub lock_poll_max: Duration,
    /// Total wait for another process's compile before compiling here.
    pub lock_wait: Duration,
    /// A hit refreshes an entry's age at most once per interval.
    pub touch_interval: Duration,
}

impl DiskOptions {
    /// The library's defaults for `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> DiskOptions {
        // SAFETY: init fills the struct.
        let o = unsafe {
            let mut o = std::mem::MaybeUninit::<ffi::ccache_disk_options>::zeroed();
            ffi::ccache_disk_options_init(o.as_mut_ptr());
            o.assume_init()
        };
        DiskOptions {
            dir: dir.into(),
            max_bytes: if o.max_bytes == ffi::CCACHE_UNBOUNDED { None } else { Some(o.max_bytes) },
            fsync: o.fsync != 0,
            lock_poll: Duration::from_millis(o.lock_poll_ms),
            lock_poll_max: Duration::from_millis(o.lock_poll_max_ms),
            lock_wait: Duration::from_millis(o.lock_wait_ms),
            touch_interval: Duration::from_millis(o.touch_interval_ms),
        }
    }
}

/// Options of the Redis tier (defaults from `ccache_redis_options_init()`).
/// Traffic is plain text (hiredis has no TLS): use loopback, a unix socket
/// or a private network.
#[derive(Clone, Debug)]
pub struct RedisOptions {
    /// "host:port[,host:port...]" or "unix:/path".
    pub servers: String,
    /// Key prefix (`None`: "ccache").
    pub prefix: Option<String>,
    /// ACL user (needs a password).
    pub user: Option<String>,
    /// Password.
    pub password: Option<String>,
    /// Bound on one connect.
    pub connect_timeout: Duration,
    /// Bound on one whole command: sending it and reading all of its reply
    /// (not each read or write), whole milliseconds rounded up.
    pub command_timeout: Duration,
    /// Expiry set on stored entries, or `None`.
    pub entry_ttl: Option<Duration>,
    /// Compile lease.
    pub lease: Duration,
    /// Waiter backoff start.
    pub poll: Duration,
    /// Waiter backoff cap.
    pub poll_max: Duration,
    /// Total wait for another process's compile.
    pub wait: Duration,
    /// Reconnect backoff start.
    pub reconnect_min: Duration,
    /// Reconnect backoff cap.
    pub reconnect_max: Duration,
}

impl RedisOptions {
    /// The library's defaults for `servers`.
    pub fn new(servers: impl Into<String>) -> RedisOptions {
        // SAFETY: init fills the struct.
        let o = unsafe {
            let mut o = std::mem::MaybeUninit::<ffi::ccache_redis_options>::zeroed();
            ffi::ccache_redis_options_init(o.as_mut_ptr());
            o.assume_init()
        };
        let ms = Duration::from_millis;
        RedisOptions {
            servers: servers.into(),
            prefix: None,
            user: None,
            password: None,
            connect_timeout: ms(o.connect_timeout_ms),
            command_timeout: ms(o.command_timeout_ms),
            entry_ttl: if o.entry_ttl_ms == ffi::CCACHE_UNBOUNDED { None } else { Some(ms(o.entry_ttl_ms)) },
            lease: ms(o.lease_ms),
            poll: ms(o.poll_ms),
            poll_max: ms(o.poll_max_ms),
            wait: ms(o.wait_ms),
            reconnect_min: ms(o.reconnect_min_ms),
            reconnect_max: ms(o.reconnect_max_ms),
        }
    }
}

fn cstring(s: &str) -> Result<CString, Status> {
    CString::new(s).map_err(|_| Status::from_code(Status::EINVAL))
}

impl Tier {
    /// A directory tier.  Errors (`Display` names the path and reason):
    /// `EPERM` (not private to this user), `EIO`, `ENOTSUP`, `EINVAL`, `ENOMEM`.
    pub fn disk(o: &DiskOptions) -> Result<Tier, Status> {
        use std::os::unix::ffi::OsStrExt;
        let dir = CString::new(o.dir.as_os_str().as_bytes()).map_err(|_| Status::from_code(Status::EINVAL))?;
        // SAFETY: init fills the struct; dir outlives the call (copied by it).
        let rc_out = unsafe {
            let mut c = std::mem::MaybeUninit::<ffi::ccache_disk_options>::zeroed();
            ffi::ccache_disk_options_init(c.as_mut_ptr());
            let mut c = c.assume_init();
            c.dir = dir.as_ptr();
            c.max_bytes = o.max_bytes.map_or(ffi::CCACHE_UNBOUNDED, |b| b.min(u64::MAX - 1));
            c.fsync = o.fsync as c_int;
            c.lock_poll_ms = ms_ceil(o.lock_poll);
            c.lock_poll_max_ms = ms_ceil(o.lock_poll_max);
            c.lock_wait_ms = ms_ceil(o.lock_wait);
            c.touch_interval_ms = ms_ceil(o.touch_interval);
            let mut out = ptr::null_mut();
            (ffi::ccache_tier_disk(&c, &mut out), out)
        };
        // The disk tier records a detail for these three only.
        Self::made(rc_out, |rc| matches!(rc, ffi::CCACHE_EPERM | ffi::CCACHE_EIO | ffi::CCACHE_ENOTSUP))
    }

    /// A Redis tier (no connection is made here).  Errors (`Display` says
    /// which option): `EINVAL`, `ENOTSUP` (library built without hiredis), `ENOMEM`.
    pub fn redis(o: &RedisOptions) -> Result<Tier, Status> {
        let servers = cstring(&o.servers)?;
        let prefix = o.prefix.as_deref().map(cstring).transpose()?;
        let user = o.user.as_deref().map(cstring).transpose()?;
        let password = o.password.as_deref().map(cstring).transpose()?;
        let p = |s: &Option<CString>| s.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        // SAFETY: init fills the struct; the strings outlive the call (copied by it).
        let rc_out = unsafe {
            let mut c = std::mem::MaybeUninit::<ffi::ccache_redis_options>::zeroed();
            ffi::ccache_redis_options_init(c.as_mut_ptr());
            let mut c = c.assume_init();
            c.servers = servers.as_ptr();
            c.prefix = p(&prefix);
            c.user = p(&user);
            c.password = p(&password);
            c.connect_timeout_ms = ms_ceil(o.connect_timeout);
            c.command_timeout_ms = ms_ceil(o.command_timeout);
            c.entry_ttl_ms = o.entry_ttl.map_or(ffi::CCACHE_UNBOUNDED, ms_ceil);
            c.lease_ms = ms_ceil(o.lease);
            c.poll_ms = ms_ceil(o.poll);
            c.poll_max_ms = ms_ceil(o.poll_max);
            c.wait_ms = ms_ceil(o.wait);
            c.reconnect_min_ms = ms_ceil(o.reconnect_min);
            c.reconnect_max_ms = ms_ceil(o.reconnect_max);
            let mut out = ptr::null_mut();
            (ffi::ccache_tier_redis(&c, &mut out), out)
        };
        // The Redis tier records a detail for a refused option and for ENOTSUP.
        Self::made(rc_out, |rc| matches!(rc, ffi::CCACHE_EINVAL | ffi::CCACHE_ENOTSUP))
    }

    /// A detail is read only for the codes whose call records one: another
    /// code would show a stale line from an earlier call.
    fn made((rc, out): (c_int, *mut ffi::ccache_tier), detailed: fn(c_int) -> bool) -> Result<Tier, Status> {
        if rc != ffi::CCACHE_OK {
            return Err(if detailed(rc) { Status::with_detail(rc) } else { Status::from_code(rc) });
        }
        NonNull::new(out).map(|raw| Tier { raw }).ok_or_else(|| Status::from_code(Status::EINVAL))
    }
}
