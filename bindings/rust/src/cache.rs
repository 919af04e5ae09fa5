//! The [`Cache`] type: how closures and programs are boxed for C, the
//! callbacks' context, and opening (the [`Config`] turned into a
//! `ccache_config`).  The calls on an open cache are in `calls.rs`, their
//! compile trampolines in `compile.rs`, closing and dropping in `close.rs`.

use crate::config::{bound, ttl_ms};
use crate::event::{self, EventHook};
use crate::ffi;
use crate::keys::{Fast, KeyMode};
use crate::panic;
use crate::status::Status;
use crate::tier::{self, Codec};
use crate::trust::Trust;
use crate::Config;
use std::ffi::{c_void, CString};
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::ptr::{self, NonNull};
use std::sync::Arc;
#[allow(unused_imports)] // only named by intra-doc links (rustc 1.63 counts them unused)
use crate::{keys, Key, Strong, StrongCache, StrongKey};

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
    pub(crate) clock: Option<Arc<dyn Fn() -> u64 + Send + Sync>>,
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
    pub(crate) raw: NonNull<ffi::ccache>,
    pub(crate) inner: Box<Inner<P>>,
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

impl<C, P, M> std::fmt::Debug for Cache<C, P, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache").field("raw", &self.raw).finish_non_exhaustive()
    }
}
