//! Safe Rust bindings to ccache, the compile-closure cache for ML runtimes
//! (not the ccache compiler cache).
//!
//! A [`Cache<C, P>`] maps 128-bit keys to closures `C` (one per call site)
//! and program keys to reference-counted programs `P` (the compiled code,
//! shared by many closures).  A hit is a [`Lease`] that pins its closure and
//! program until it is dropped; a miss compiles once, however many threads
//! miss at the same moment.
//!
//! ```
//! use ccache::{Cache, Config, Key};
//! use std::sync::Arc;
//!
//! struct Program { scale: f32 }                 // immutable once compiled
//! let cache: Cache<Arc<str>, Program> = Cache::open(Config::default())?;
//! let site = Key::from(0x5eed_u128);
//! let lease = cache.get_or_compile(site, |cache| {
//!     let program = cache.program_intern(Key::from(7u128), Program { scale: 2.0 }, 64)?;
//!     Ok::<_, ccache::Status>((Arc::from("call site 1"), program))
//! })?;
//! assert_eq!(lease.program().scale * 21.0, 42.0);
//! assert_eq!(&**lease.closure(), "call site 1");
//! drop(lease);                                   // the lease goes back here
//! assert_eq!(cache.stats().compiles, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Threads
//!
//! `Cache<C, P>` is `Send + Sync` exactly when `C` and `P` are `Send + Sync`:
//! a closure and its program are handed to every thread that holds a lease,
//! at the same time (so they are shared: `Sync`), and each is dropped on
//! whichever thread lets go of it last, the sweeper thread included (so
//! `Send`).  Opening a cache needs `C: Send + 'static` and `P: Send + 'static`
//! even for one thread, because the sweeper thread may drop them.  A cache of
//! `Rc` is refused:
//!
//! ```compile_fail
//! use std::rc::Rc;
//! let cache = ccache::Cache::<Rc<u32>, u32>::open(ccache::Config::default());
//! ```
//!
//! while the same with `Arc` compiles:
//!
//! ```
//! use std::sync::Arc;
//! let cache = ccache::Cache::<Arc<u32>, u32>::open(ccache::Config::default()).unwrap();
//! fn shared<T: Send + Sync>(_: &T) {}
//! shared(&cache);
//! ```
//!
//! A cache of `Cell` (`Send`, not `Sync`) opens but cannot be shared:
//!
//! ```compile_fail
//! use std::cell::Cell;
//! let cache = ccache::Cache::<Cell<u32>, u32>::open(ccache::Config::default()).unwrap();
//! fn shared<T: Send + Sync>(_: &T) {}
//! shared(&cache);
//! ```
//!
//! A lease borrows its cache, so it cannot outlive it:
//!
//! ```compile_fail
//! use ccache::{Cache, Config, Key};
//! let lease = {
//!     let cache = Cache::<u32, u32>::open(Config::default()).unwrap();
//!     let p = cache.program_intern(Key::from(1u128), 1, 0).unwrap();
//!     cache.put(Key::from(2u128), 2, &p).unwrap();
//!     drop(p);
//!     cache.fetch(Key::from(2u128)).unwrap().unwrap()
//! };
//! assert_eq!(*lease.closure(), 2);
//! ```
//!
//! (the same with the lease used inside the block compiles:)
//!
//! ```
//! use ccache::{Cache, Config, Key};
//! let value = {
//!     let cache = Cache::<u32, u32>::open(Config::default()).unwrap();
//!     let p = cache.program_intern(Key::from(1u128), 1, 0).unwrap();
//!     cache.put(Key::from(2u128), 2, &p).unwrap();
//!     drop(p);
//!     let lease = cache.fetch(Key::from(2u128)).unwrap().unwrap();
//!     *lease.closure()
//! };
//! assert_eq!(value, 2);
//! ```
//!
//! # Panics
//!
//! A panic in a compile callback, a drop of `C` or `P`, the clock or a codec
//! is caught before it reaches C and resumed (`resume_unwind`) by the call
//! that ran it, after the C call has returned: the cache is consistent and
//! stays usable, a panicking compile caches nothing (it counts as a failed
//! compile, and single-flight waiters get `ECOMPILE`).  Drops run by the
//! sweeper thread have no caller to resume on: a panic there is caught and
//! discarded.
#![deny(missing_docs)]

mod event;
pub mod ffi;
mod fingerprint;
mod graph;
mod health;
pub mod keys;
mod panic;
mod status;
mod tier;
mod trust;

pub use event::{Cause, Event, EventHook, EventKind};
pub use ffi::Stats;
pub use fingerprint::{graph_key, graph_key_strong, Fingerprint, Node, Op, Ref, StrongFingerprint, TensorType};
pub use graph::GraphKeyBuilder;
pub use health::{TierHealth, TierStatus};
pub use keys::{Fast, KeyMode, Strong, StrongKey};
pub use status::{strerror, CompileError, Status};
pub use tier::{Codec, DecodeError, DiskOptions, RedisOptions, Tier};
pub use trust::Trust;

/// A cache of strong keys ([`StrongKey`]): `Cache<C, P, Strong>`.
pub type StrongCache<C, P> = Cache<C, P, Strong>;

use status::check;
use std::ffi::{c_void, CString};
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::time::Duration;

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

/// Options for [`Cache::open`].  `None` is "no bound".
pub struct Config {
    /// Most closure entries kept (oldest inserts leave first); `Some(0)` is `EINVAL`.
    pub max_items: Option<u64>,
    /// Time to live from insert (a hit never refreshes it), whole
    /// milliseconds rounded up; `Some(Duration::ZERO)` is `EINVAL`.
    pub ttl: Option<Duration>,
    /// Cap on the summed cost of the programs the entries refer to, bytes.
    pub max_cost_bytes: Option<u64>,
    /// Whether a sweeper thread removes expired entries (default `true`).
    pub sweeper_thread: bool,
    /// Monotonic milliseconds (default: CLOCK_MONOTONIC); called from any
    /// thread, the sweeper's included.  Tests inject a fake clock here.
    pub clock: Option<Arc<dyn Fn() -> u64 + Send + Sync>>,
    /// The runtime's identity (version, target, flags): tier entries written
    /// under another tag are never loaded.
    pub runtime_tag: Option<String>,
    /// Programs compiled faster than this are not written to the tiers
    /// (default 1 ms).
    pub tier_min_compile: Duration,
    /// Tiers, the one asked first at index 0 (at most 8).  A codec is
    /// required: [`Cache::open`] with tiers is `EINVAL` (the library refuses
    /// tiers without a codec); use [`Cache::open_with_codec`].
    pub tiers: Vec<Tier>,
    /// Largest tier entry read or written, bytes of the whole framed entry
    /// (default 64 MiB; `0` is `EINVAL`, `u64::MAX` the format's own limit).
    /// An entry over it is a miss counted in `tier_oversize`, refused before
    /// it is read whole.
    pub tier_max_entry_bytes: u64,
    /// Signing and trusted keys (copied at open, then dropped): every entry
    /// read from a tier must be signed by a trusted key (see [`Trust`]).
    /// `None` (default): tiers are trusted by declaration.  A cache with a
    /// trust object and a library without libsodium is `ENOTSUP` at open.
    pub trust: Option<Trust>,
    /// `CCACHE_TRUST_UNSIGNED`: accept unsigned entries from tiers that
    /// others can write (a Redis tier).  The library's safe-by-default rule
    /// refuses (`EINVAL` at open) a cache whose tiers include a shared one
    /// when it has neither trusted keys nor this opt-out; set it with
    /// [`Config::accept_unsigned_entries`].  Default `false`.
    pub trust_unsigned: bool,
    /// The event hook (see [`Event`]), or `None` (default: nothing is spent
    /// on events).  A panic in it is caught before it reaches C and resumed
    /// by the call that raised the event (discarded on the sweeper thread).
    pub on_event: Option<EventHook>,
}

impl Config {
    /// Opts out of signatures, by name: tiers others can write (Redis) are
    /// read without trusted keys, unsigned entries accepted
    /// (`CCACHE_TRUST_UNSIGNED`; see [`Config::trust_unsigned`]).  Anyone who
    /// can write to such a tier can then plant a program this cache runs.
    pub fn accept_unsigned_entries(mut self) -> Config {
        self.trust_unsigned = true;
        self
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_items: None,
            ttl: None,
            max_cost_bytes: None,
            sweeper_thread: true,
            clock: None,
            runtime_tag: None,
            tier_min_compile: Duration::from_millis(1),
            tiers: Vec::new(),
            tier_max_entry_bytes: ffi::CCACHE_TIER_MAX_ENTRY_DEFAULT,
            trust: None,
            trust_unsigned: false,
            on_event: None,
        }
    }
}

/// The three bounds, for [`Cache::set_limits`] and [`Cache::limits`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Most closure entries, or `None`.
    pub max_items: Option<u64>,
    /// Time to live, whole milliseconds (rounded up), or `None`.
    pub ttl: Option<Duration>,
    /// Cost cap in bytes, or `None`.
    pub max_cost_bytes: Option<u64>,
}

fn bound(v: Option<u64>) -> u64 {
    // u64::MAX is the C library's "unbounded": the largest real bound is one less.
    v.map(|n| n.min(u64::MAX - 1)).unwrap_or(ffi::CCACHE_UNBOUNDED)
}

pub(crate) fn ms_ceil(d: Duration) -> u64 {
    let ms = d.as_nanos().saturating_add(999_999) / 1_000_000;
    ms.min((u64::MAX - 1) as u128) as u64
}

fn ttl_ms(d: Option<Duration>) -> u64 {
    d.map(ms_ceil).unwrap_or(ffi::CCACHE_UNBOUNDED)
}

fn unbound(v: u64) -> Option<u64> {
    if v == ffi::CCACHE_UNBOUNDED {
        None
    } else {
        Some(v)
    }
}

/// How the crate boxes closures and programs: the byte keeps every box a
/// distinct allocation (a zero-sized `C` or `P` would otherwise give one
/// address to all, which the C library takes for the same object).
#[repr(C)]
pub(crate) struct Slot<T> {
    pub(crate) value: T,
    _distinct: u8,
}

impl<T> Slot<T> {
    #[inline]
    pub(crate) fn into_raw(value: T) -> *mut c_void {
        Box::into_raw(Box::new(Slot { value, _distinct: 0 })) as *mut c_void
    }
    /// # Safety
    /// `p` came from `Slot::<T>::into_raw` and is still live.
    #[inline]
    pub(crate) unsafe fn get<'a>(p: *mut c_void) -> &'a T {
        &(*(p as *const Slot<T>)).value
    }
}

unsafe extern "C" fn destroy_slot<T>(obj: *mut c_void, _ctx: *mut c_void) {
    panic::guard(|| drop(Box::from_raw(obj as *mut Slot<T>)));
}

/// What the C callbacks' `ctx` points to.  Boxed: its address is stable.
pub(crate) struct Inner<P> {
    clock: Option<Arc<dyn Fn() -> u64 + Send + Sync>>,
    pub(crate) codec: Option<Box<dyn Codec<P>>>,
    pub(crate) on_event: Option<EventHook>,
}

unsafe extern "C" fn clock_trampoline<P>(ctx: *mut c_void) -> u64 {
    let inner = &*(ctx as *const Inner<P>);
    match &inner.clock {
        Some(f) => panic::guard(|| f()).unwrap_or(0),
        None => 0,
    }
}

/// A cache of closures `C` and programs `P`.  See the crate documentation
/// for the threading rules.  Dropping it closes it (every remaining `C` and
/// `P` is dropped, the sweeper thread is joined).
///
/// `M` is the key mode, [`Fast`] (the default: [`Key`]) or [`Strong`]
/// ([`StrongKey`]; [`StrongCache`]): every call takes `M::Key`, so keys of the
/// other mode do not compile (see [`keys`]).
pub struct Cache<C, P, M = Fast> {
    raw: NonNull<ffi::ccache>,
    inner: Box<Inner<P>>,
    _owns: PhantomData<(Box<C>, Box<P>, M)>,
}

// SAFETY: the C cache is thread-safe; what crosses threads is C and P, shared
// through leases (Sync) and dropped on any thread (Send).
unsafe impl<C: Send + Sync, P: Send + Sync, M> Send for Cache<C, P, M> {}
unsafe impl<C: Send + Sync, P: Send + Sync, M> Sync for Cache<C, P, M> {}

impl<C: Send + 'static, P: Send + 'static, M: KeyMode> Cache<C, P, M> {
    /// Opens a cache.  Errors: `EINVAL` (a bound of 0, more than 8 tiers,
    /// tiers without a codec, a runtime tag with a NUL byte, a trust object
    /// with no key, a shared tier with neither trusted keys nor
    /// [`Config::accept_unsigned_entries`]), `ENOTSUP` (a trust object
    /// without libsodium), `ENOMEM`, `ETHREAD`.  On error the tiers are freed.
    pub fn open(config: Config) -> Result<Self, Status> {
        Self::open_inner(config, None)
    }

    /// Opens a cache whose program misses ask `config.tiers` through `codec`
    /// before compiling, and write what they compile to them.
    pub fn open_with_codec(config: Config, codec: impl Codec<P>) -> Result<Self, Status> {
        Self::open_inner(config, Some(Box::new(codec)))
    }

    fn open_inner(config: Config, codec: Option<Box<dyn Codec<P>>>) -> Result<Self, Status> {
        let Config {
            max_items,
            ttl,
            max_cost_bytes,
            sweeper_thread,
            clock,
            runtime_tag,
            tier_min_compile,
            tiers,
            tier_max_entry_bytes,
            trust,
            trust_unsigned,
            on_event,
        } = config;
        let tag = match runtime_tag.map(CString::new).transpose() {
            Ok(t) => t,
            Err(_) => return Err(Status::from_code(Status::EINVAL)),
        };
        let has_clock = clock.is_some();
        let has_codec = codec.is_some();
        let has_hook = on_event.is_some();
        let inner = Box::new(Inner { clock, codec, on_event });
        let ctx = &*inner as *const Inner<P> as *mut c_void;
        let codec_c = ffi::ccache_codec {
            encode: Some(tier::encode_trampoline::<P>),
            free_bytes: Some(tier::free_bytes_trampoline),
            decode: Some(tier::decode_trampoline::<P>),
            ctx,
        };
        let raw_tiers: Vec<*mut ffi::ccache_tier> = tiers.iter().map(|t| t.raw.as_ptr()).collect();
        // SAFETY: ccache_config_init fills every field; the pointers stored
        // (ctx and the trampolines) live as long as the cache.
        let mut cfg: ffi::ccache_config = unsafe {
            let mut cfg = std::mem::MaybeUninit::<ffi::ccache_config>::zeroed();
            ffi::ccache_config_init(cfg.as_mut_ptr());
            cfg.assume_init()
        };
        cfg.sweeper_thread = sweeper_thread as c_int;
        cfg.max_items = bound(max_items);
        cfg.ttl_ms = ttl_ms(ttl);
        cfg.max_cost_bytes = bound(max_cost_bytes);
        cfg.destroy_closure = Some(destroy_slot::<C>);
        cfg.destroy_program = Some(destroy_slot::<P>);
        cfg.ctx = ctx;
        if has_clock {
            cfg.clock_ms = Some(clock_trampoline::<P>);
        }
        if has_codec {
            cfg.codec = &codec_c;
        }
        cfg.runtime_tag = tag.as_ref().map_or(ptr::null(), |t| t.as_ptr());
        cfg.tier_min_compile_us = (tier_min_compile.as_micros()).min(u64::MAX as u128) as u64;
        cfg.tiers = if raw_tiers.is_empty() { ptr::null() } else { raw_tiers.as_ptr() };
        cfg.n_tiers = raw_tiers.len().min(u32::MAX as usize) as u32;
        cfg.tier_max_entry_bytes = tier_max_entry_bytes;
        cfg.key_mode = M::MODE;
        cfg.trust = trust.as_ref().map_or(ptr::null(), Trust::as_ptr);
        cfg.trust_flags = if trust_unsigned { ffi::CCACHE_TRUST_UNSIGNED } else { 0 };
        if has_hook {
            cfg.on_event = Some(event::event_trampoline::<P>);
            cfg.event_ctx = ctx;
        }
        let mut raw = ptr::null_mut();
        // SAFETY: cfg is initialised; codec_c, tag and raw_tiers are copied by the call.
        let rc = unsafe { ffi::ccache_open(&cfg, &mut raw) };
        // Read this thread's detail line before anything else can call into
        // the library: a refused open (a shared tier without keys, say) says
        // what to do there, and the caller must see it.
        let opened = if rc == ffi::CCACHE_OK { Ok(()) } else { Err(Status::with_detail(rc)) };
        drop(trust); // copied by the open
        panic::resume_pending();
        opened?; // on error the tiers are still ours: `tiers` drops and frees them
        for t in tiers {
            std::mem::forget(t); // the cache owns and closes them now
        }
        Ok(Cache { raw: NonNull::new(raw).expect("ccache_open returned OK and NULL"), inner, _owns: PhantomData })
    }
}

impl<C, P, M: KeyMode> Cache<C, P, M> {
    /// The raw cache, for [`ffi`] calls the safe API lacks.  Valid while `self` is.
    #[inline]
    pub fn as_raw(&self) -> *mut ffi::ccache {
        self.raw.as_ptr()
    }

    #[inline]
    fn is(&self, other: &Cache<C, P, M>) -> bool {
        ptr::eq(self, other)
    }

    /// Fetches the closure under `key`, or compiles it once, whatever the
    /// number of threads that miss at the same time (the others wait and get
    /// the same entry).
    ///
    /// `compile` runs on this thread with no lock held, only on a miss, and
    /// returns the closure and a program handle of this cache (usually from
    /// [`Cache::program_get_or_compile`] or [`Cache::program_intern`]); both
    /// become the cache's.  It may call into the cache (other keys).
    ///
    /// Errors: `Compile(e)`, the compile's own error (nothing cached);
    /// `Cache(ECOMPILE)` on a thread that waited for another's failed compile;
    /// `Cache(EINVAL)` when the program handle is another cache's;
    /// `Cache(EDEADLK)` when the compile asks for its own key; `Cache(ENOMEM)`.
    /// A panic in `compile` resumes here once the cache has recorded the
    /// failed compile.
    #[inline]
    pub fn get_or_compile<E, F>(&self, key: M::Key, compile: F) -> Result<Lease<'_, C, P, M>, CompileError<E>>
    where
        F: FnOnce(&Cache<C, P, M>) -> Result<(C, Program<'_, C, P, M>), E>,
    {
        let mut cx = CompileCx::<C, P, M, F, E> {
            cache: self,
            f: Some(compile),
            failure: std::mem::MaybeUninit::uninit(),
            _p: PhantomData,
        };
        // Written by every return of the call (filled on OK, zeroed otherwise),
        // and read only on OK.
        let mut raw = std::mem::MaybeUninit::<ffi::ccache_lease>::uninit();
        // SAFETY: cx outlives the call; the trampoline matches its type.
        let rc = unsafe {
            M::get_or_compile(
                self.raw.as_ptr(),
                &key,
                Some(compile_trampoline::<C, P, M, F, E>),
                &mut cx as *mut CompileCx<C, P, M, F, E> as *mut c_void,
                raw.as_mut_ptr(),
            )
        };
        if rc == ffi::CCACHE_OK {
            // The hit path.  The trampoline records a failure only when it
            // returns non-zero, which is never CCACHE_OK: only the compile,
            // if unused, needs dropping.  Callbacks (destroys of evicted
            // entries, the event hook) run on this thread only when the
            // compile did, which took `f`: testing that byte, just written,
            // is cheaper on a hit than the global count of stashed panics
            // (and `failure`, written only by the trampoline, costs a hit no
            // store).
            if std::mem::needs_drop::<F>() || cx.f.is_none() {
                // SAFETY: filled by the call on CCACHE_OK.  Made first, so that
                // a panicking drop of the unused compile, or a resumed panic,
                // still releases it.
                let lease = Lease { cache: self, raw: unsafe { read_lease(raw.as_ptr()) } };
                drop(cx.f.take());
                std::mem::forget(cx);
                panic::resume_pending();
                return Ok(lease);
            }
            // Nothing can unwind from here on: the lease is made in place.
            std::mem::forget(cx);
            // SAFETY: filled by the call on CCACHE_OK.
            return Ok(Lease { cache: self, raw: unsafe { read_lease(raw.as_ptr()) } });
        }
        // SAFETY: the trampoline wrote `failure` if it took `f`.
        let failure = if cx.f.is_none() { unsafe { cx.failure.as_ptr().read() } } else { None };
        compile_failed(rc, failure)
    }

    /// Looks up the program under `pkey`, or makes it once whatever the
    /// number of threads that miss (asking the tiers first when the cache has
    /// a codec).  `compile` returns the program and its cost in bytes (what
    /// it holds, charged against `max_cost_bytes` while an entry refers to it).
    /// Errors as [`Cache::get_or_compile`].
    #[inline]
    pub fn program_get_or_compile<E, F>(&self, pkey: M::Key, compile: F) -> Result<Program<'_, C, P, M>, CompileError<E>>
    where
        F: FnOnce(&Cache<C, P, M>) -> Result<(P, u64), E>,
    {
        let mut cx = ProgramCx::<C, P, M, F, E> { cache: self, f: Some(compile), failure: None };
        let mut out = ptr::null_mut();
        // SAFETY: cx outlives the call; the trampoline matches its type.
        let rc = unsafe {
            M::program_get_or_compile(
                self.raw.as_ptr(),
                &pkey,
                Some(program_trampoline::<C, P, M, F, E>),
                &mut cx as *mut ProgramCx<C, P, M, F, E> as *mut c_void,
                &mut out,
            )
        };
        let program = NonNull::new(out).map(|raw| Program { cache: self, raw });
        match (rc, program) {
            (ffi::CCACHE_OK, Some(p)) => {
                drop(cx.f.take());
                std::mem::forget(cx);
                panic::resume_pending();
                Ok(p)
            }
            (_, p) => {
                drop(p);
                compile_failed(rc, cx.failure.take())
            }
        }
    }

    /// Interns `program` under `pkey` with its cost in bytes and returns a
    /// handle.  If `pkey` is already interned, the existing program is
    /// returned and `program` is dropped.  Errors: `ENOMEM` (`program` dropped).
    pub fn program_intern(&self, pkey: M::Key, program: P, cost_bytes: u64) -> Result<Program<'_, C, P, M>, Status> {
        let mut out = ptr::null_mut();
        // SAFETY: the native is a live Slot<P>, owned by the cache from here on.
        let rc = unsafe { M::program_intern(self.raw.as_ptr(), &pkey, Slot::into_raw(program), cost_bytes, &mut out) };
        let program = NonNull::new(out).map(|raw| Program { cache: self, raw });
        panic::resume_pending();
        check(rc)?;
        program.ok_or_else(|| Status::from_code(Status::EINVAL))
    }

    /// Looks up a program by key (never compiles, never asks a tier).
    pub fn program_fetch(&self, pkey: M::Key) -> Result<Option<Program<'_, C, P, M>>, Status> {
        let mut out = ptr::null_mut();
        // SAFETY: plain call with valid pointers.
        let rc = unsafe { M::program_fetch(self.raw.as_ptr(), &pkey, &mut out) };
        let program = NonNull::new(out).map(|raw| Program { cache: self, raw });
        panic::resume_pending();
        match rc {
            ffi::CCACHE_OK => Ok(program),
            ffi::CCACHE_MISS => Ok(None),
            _ => Err(Status::from_code(rc)),
        }
    }

    /// Stores `closure` under `key`, running `program` (the entry takes its
    /// own reference; the handle stays yours).  A present entry is replaced
    /// (leases on it stay valid).  Evictions this causes drop their `C`/`P`
    /// here.  Errors: `EINVAL` (a handle of another cache), `ENOMEM`; the
    /// closure is dropped on error.
    pub fn put(&self, key: M::Key, closure: C, program: &Program<'_, C, P, M>) -> Result<(), Status> {
        if !self.is(program.cache) {
            drop(closure);
            return Err(Status::from_code(Status::EINVAL));
        }
        // SAFETY: the closure is a fresh Slot<C>, owned by the cache from here on.
        let rc = unsafe { M::put(self.raw.as_ptr(), &key, Slot::into_raw(closure), program.raw.as_ptr()) };
        panic::resume_pending();
        check(rc)
    }

    /// Looks up a closure: `Some(lease)` on a hit (never an expired entry).
    pub fn fetch(&self, key: M::Key) -> Result<Option<Lease<'_, C, P, M>>, Status> {
        let mut lease = Lease { cache: self, raw: ffi::ccache_lease::zeroed() };
        // SAFETY: plain call with a valid lease to fill.
        let rc = unsafe { M::fetch(self.raw.as_ptr(), &key, &mut lease.raw) };
        panic::resume_pending();
        match rc {
            ffi::CCACHE_OK => Ok(Some(lease)),
            _ => {
                std::mem::forget(lease); // zeroed by the call
                if rc == ffi::CCACHE_MISS {
                    Ok(None)
                } else {
                    Err(Status::from_code(rc))
                }
            }
        }
    }

    /// Removes the entry under `key`: `true` if there was one.  Leases on it
    /// stay valid.
    pub fn remove(&self, key: M::Key) -> Result<bool, Status> {
        // SAFETY: plain call.
        let rc = unsafe { M::remove(self.raw.as_ptr(), &key) };
        panic::resume_pending();
        match rc {
            ffi::CCACHE_OK => Ok(true),
            ffi::CCACHE_MISS => Ok(false),
            _ => Err(Status::from_code(rc)),
        }
    }

    /// Removes every closure entry.
    pub fn clear(&self) -> Result<(), Status> {
        // SAFETY: plain call.
        let rc = unsafe { ffi::ccache_clear(self.raw.as_ptr()) };
        panic::resume_pending();
        check(rc)
    }

    /// Removes the expired entries now; returns how many.
    pub fn sweep(&self) -> Result<u64, Status> {
        // SAFETY: plain call.
        let n = unsafe { ffi::ccache_sweep(self.raw.as_ptr()) };
        panic::resume_pending();
        if n < 0 {
            Err(Status::from_code(n as i32))
        } else {
            Ok(n as u64)
        }
    }

    /// Changes the bounds (a bound of `Some(0)` is `EINVAL`, nothing changed).
    /// Shrinking evicts the oldest entries on this thread; a new TTL applies
    /// at once to entries already present.
    pub fn set_limits(&self, limits: Limits) -> Result<(), Status> {
        // SAFETY: plain call.
        let rc = unsafe {
            ffi::ccache_set_limits(
                self.raw.as_ptr(),
                bound(limits.max_items),
                ttl_ms(limits.ttl),
                bound(limits.max_cost_bytes),
            )
        };
        panic::resume_pending();
        check(rc)
    }

    /// The current bounds.
    pub fn limits(&self) -> Result<Limits, Status> {
        let (mut items, mut ttl, mut cost) = (0, 0, 0);
        // SAFETY: plain call with valid out-pointers.
        check(unsafe { ffi::ccache_get_limits(self.raw.as_ptr(), &mut items, &mut ttl, &mut cost) })?;
        Ok(Limits { max_items: unbound(items), ttl: unbound(ttl).map(Duration::from_millis), max_cost_bytes: unbound(cost) })
    }

    /// A statistics snapshot.
    pub fn stats(&self) -> Stats {
        let mut s = ffi::ccache_stats { size: std::mem::size_of::<ffi::ccache_stats>() as u32, ..Default::default() };
        // SAFETY: s.size is this struct's size.  The status can only be
        // EFORKED here (a valid cache and size): the snapshot is then zeroes.
        let _ = unsafe { ffi::ccache_stats_get(self.raw.as_ptr(), &mut s) };
        Stats::from(&s)
    }
}

impl<C, P, M> Cache<C, P, M> {
    /// Closes the cache now (what dropping it does), returning the status.
    /// `Err(EBUSY)` when a lease or program handle was leaked with
    /// `mem::forget`: the cache then stays open, leaked (see
    /// [`Cache::close_abandon`]).  A panic of a drop it runs resumes here.
    pub fn close(self) -> Result<(), Status> {
        self.close_with(0)
    }

    /// Closes the cache even though leases or program handles were leaked
    /// with `mem::forget` (`ccache_close_ex` with `CCACHE_CLOSE_ABANDON`):
    /// every remaining `C` and `P` is dropped.  Safe: a lease or handle
    /// borrows its cache, so once the cache is given up by value none can be
    /// used again; only a leaked one can still be out, and it is abandoned.
    pub fn close_abandon(self) -> Result<(), Status> {
        self.close_with(ffi::CCACHE_CLOSE_ABANDON)
    }

    fn close_with(self, flags: std::os::raw::c_uint) -> Result<(), Status> {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: owned, and nothing borrows it (by value); no call is running.
        let rc = unsafe { ffi::ccache_close_ex(me.raw.as_ptr(), flags) };
        if rc == ffi::CCACHE_OK {
            // SAFETY: read once; `me` is never dropped.  The callbacks' context
            // goes only now that the cache is gone.
            drop(unsafe { ptr::read(&me.inner) });
        } // else the cache stays open and its context with it (leaked)
        panic::resume_pending();
        check(rc)
    }
}

impl<C, P, M> Drop for Cache<C, P, M> {
    fn drop(&mut self) {
        // SAFETY: no lease or handle can be out (they borrow the cache), and no
        // call is running (`&mut self`), except leaks by mem::forget.
        let rc = unsafe { ffi::ccache_close(self.raw.as_ptr()) };
        if rc != ffi::CCACHE_OK {
            // A lease or handle was leaked with mem::forget: the cache stays
            // open and its callbacks' context must stay valid, so leak both.
            let inner = std::mem::replace(&mut self.inner, Box::new(Inner { clock: None, codec: None, on_event: None }));
            std::mem::forget(inner);
        }
        panic::resume_pending_in_drop();
    }
}

/// Reads a lease C just wrote, one word at a time.  C stores it as four
/// 8-byte words; a copy by 16-byte loads (what a plain move compiles to)
/// cannot be forwarded from those stores and stalls the hit path by more
/// than the rest of the wrapper costs.  Volatile keeps the loads separate.
///
/// # Safety
/// `p` points to a lease C has filled.
#[inline(always)]
unsafe fn read_lease(p: *const ffi::ccache_lease) -> ffi::ccache_lease {
    ffi::ccache_lease {
        closure: ptr::read_volatile(ptr::addr_of!((*p).closure)),
        native: ptr::read_volatile(ptr::addr_of!((*p).native)),
        internal_: [
            ptr::read_volatile(ptr::addr_of!((*p).internal_[0])),
            ptr::read_volatile(ptr::addr_of!((*p).internal_[1])),
        ],
    }
}

#[cold]
#[inline(never)]
fn compile_failed<E, T>(rc: c_int, failure: Option<Failure<E>>) -> Result<T, CompileError<E>> {
    match failure {
        Some(Failure::Panic(p)) => resume_unwind(p),
        Some(Failure::Foreign) => {
            panic::resume_pending();
            Err(CompileError::Cache(Status::from_code(Status::EINVAL)))
        }
        Some(Failure::Error(e)) if rc == ffi::CCACHE_ECOMPILE => {
            panic::resume_pending();
            Err(CompileError::Compile(e))
        }
        _ => {
            panic::resume_pending();
            // rc is never OK here (a program miss with OK and no handle is EINVAL).
            Err(CompileError::Cache(Status::from_code(if rc == ffi::CCACHE_OK { Status::EINVAL } else { rc })))
        }
    }
}

/// What a compile trampoline records when it returns non-zero.
enum Failure<E> {
    /// The compile's own error.
    Error(E),
    /// The compile panicked.
    Panic(Box<dyn std::any::Any + Send + 'static>),
    /// The compile returned a program handle of another cache.
    Foreign,
}

struct CompileCx<'a, C, P, M, F, E> {
    cache: &'a Cache<C, P, M>,
    f: Option<F>,
    /// Written by the trampoline when it takes `f` (so initialised exactly
    /// when `f` is None), read once by get_or_compile.
    failure: std::mem::MaybeUninit<Option<Failure<E>>>,
    _p: PhantomData<P>,
}

unsafe extern "C" fn compile_trampoline<C, P, M: KeyMode, F, E>(
    ud: *mut c_void,
    _c: *mut ffi::ccache,
    _key: ffi::ccache_key,
    closure_out: *mut *mut c_void,
    program_out: *mut *mut ffi::ccache_program,
) -> c_int
where
    F: FnOnce(&Cache<C, P, M>) -> Result<(C, Program<'_, C, P, M>), E>,
{
    let cx = &mut *(ud as *mut CompileCx<C, P, M, F, E>);
    let f = match cx.f.take() {
        Some(f) => f,
        None => return -1,
    };
    cx.failure.write(None);
    let cache = cx.cache;
    match catch_unwind(AssertUnwindSafe(|| f(cache))) {
        Ok(Ok((closure, program))) => {
            if !cache.is(program.cache) {
                // A handle of another cache: drop both here, where the right
                // cache is known, and fail the compile.
                let r = catch_unwind(AssertUnwindSafe(move || {
                    drop(closure);
                    drop(program);
                }));
                cx.failure.write(Some(match r {
                    Err(p) => Failure::Panic(p),
                    Ok(()) => Failure::Foreign,
                }));
                return -1;
            }
            *closure_out = Slot::into_raw(closure);
            *program_out = program.into_raw();
            0
        }
        Ok(Err(e)) => {
            cx.failure.write(Some(Failure::Error(e)));
            -1
        }
        Err(p) => {
            cx.failure.write(Some(Failure::Panic(p)));
            -1
        }
    }
}

struct ProgramCx<'a, C, P, M, F, E> {
    cache: &'a Cache<C, P, M>,
    f: Option<F>,
    failure: Option<Failure<E>>,
}

unsafe extern "C" fn program_trampoline<C, P, M, F, E>(
    ud: *mut c_void,
    _c: *mut ffi::ccache,
    _pkey: ffi::ccache_key,
    native_out: *mut *mut c_void,
    cost_out: *mut u64,
) -> c_int
where
    F: FnOnce(&Cache<C, P, M>) -> Result<(P, u64), E>,
{
    let cx = &mut *(ud as *mut ProgramCx<C, P, M, F, E>);
    let f = match cx.f.take() {
        Some(f) => f,
        None => return -1,
    };
    let cache = cx.cache;
    match catch_unwind(AssertUnwindSafe(|| f(cache))) {
        Ok(Ok((program, cost))) => {
            *native_out = Slot::into_raw(program);
            *cost_out = cost;
            0
        }
        Ok(Err(e)) => {
            cx.failure = Some(Failure::Error(e));
            -1
        }
        Err(p) => {
            cx.failure = Some(Failure::Panic(p));
            -1
        }
    }
}

/// A hit: pins a closure and its program until dropped (the drop releases
/// it, on any thread, even after the entry was evicted or removed).
pub struct Lease<'c, C, P, M = Fast> {
    cache: &'c Cache<C, P, M>,
    raw: ffi::ccache_lease,
}

// SAFETY: a lease gives `&C` and `&P` and may be released on any thread.
unsafe impl<C: Send + Sync, P: Send + Sync, M> Send for Lease<'_, C, P, M> {}
unsafe impl<C: Send + Sync, P: Send + Sync, M> Sync for Lease<'_, C, P, M> {}

impl<'c, C, P, M> Lease<'c, C, P, M> {
    /// The closure.
    #[inline]
    pub fn closure(&self) -> &C {
        // SAFETY: the lease pins the closure, a Slot<C> made by this crate.
        unsafe { Slot::get(self.raw.closure) }
    }
    /// The program the closure runs.
    #[inline]
    pub fn program(&self) -> &P {
        // SAFETY: the lease pins the program, a Slot<P> made by this crate.
        unsafe { Slot::get(self.raw.native) }
    }
    /// The cache the lease came from.
    #[inline]
    pub fn cache(&self) -> &'c Cache<C, P, M> {
        self.cache
    }
}

impl<C, P, M> Drop for Lease<'_, C, P, M> {
    fn drop(&mut self) {
        // SAFETY: a filled lease of this cache, released once.
        unsafe { ffi::ccache_lease_release(self.cache.raw.as_ptr(), &mut self.raw) };
        panic::resume_pending_in_drop();
    }
}

/// A program handle: keeps the program interned until dropped.  Derefs to `P`.
pub struct Program<'c, C, P, M = Fast> {
    cache: &'c Cache<C, P, M>,
    raw: NonNull<ffi::ccache_program>,
}

// SAFETY: a handle gives `&P` and may be released on any thread.
unsafe impl<C: Send + Sync, P: Send + Sync, M> Send for Program<'_, C, P, M> {}
unsafe impl<C: Send + Sync, P: Send + Sync, M> Sync for Program<'_, C, P, M> {}

impl<'c, C, P, M> Program<'c, C, P, M> {
    #[inline]
    fn into_raw(self) -> *mut ffi::ccache_program {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }
    /// The cache the handle came from.
    #[inline]
    pub fn cache(&self) -> &'c Cache<C, P, M> {
        self.cache
    }
}

impl<C, P, M> std::ops::Deref for Program<'_, C, P, M> {
    type Target = P;
    #[inline]
    fn deref(&self) -> &P {
        // SAFETY: the handle pins the program, a Slot<P> made by this crate.
        unsafe { Slot::get(ffi::ccache_program_native(self.raw.as_ptr())) }
    }
}

impl<C, P, M> Drop for Program<'_, C, P, M> {
    fn drop(&mut self) {
        // SAFETY: a live handle of this cache, released once.
        unsafe { ffi::ccache_program_release(self.cache.raw.as_ptr(), self.raw.as_ptr()) };
        panic::resume_pending_in_drop();
    }
}

/// The README's Rust examples, compiled and run as doc-tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The linked library's version, MAJOR*10000 + MINOR*100 + PATCH.
pub fn version() -> u32 {
    // SAFETY: no arguments, no state.
    unsafe { ffi::ccache_version() }
}

impl<C, P, M> std::fmt::Debug for Cache<C, P, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache").field("raw", &self.raw).finish_non_exhaustive()
    }
}

impl<C: std::fmt::Debug, P: std::fmt::Debug, M> std::fmt::Debug for Lease<'_, C, P, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("closure", self.closure()).field("program", self.program()).finish()
    }
}

impl<C, P: std::fmt::Debug, M> std::fmt::Debug for Program<'_, C, P, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Program").field(&**self).finish()
    }
}
