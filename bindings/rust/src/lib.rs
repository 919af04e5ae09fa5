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

// Declared after `health`, and in this order, so that rustdoc lists Cache's
// impl blocks as it did when they were all in this file: health's, then
// open, the calls, close.
mod cache;
mod calls;
mod close;
mod compile;
mod config;
mod key;
mod lease;

pub use cache::Cache;
pub use config::{Config, Limits};
pub use event::{Cause, Event, EventHook, EventKind};
// Shown as the re-export it always was: Stats is defined in a private module
// of ffi (ffi/cache.rs), which rustdoc would otherwise inline here.
#[doc(no_inline)]
pub use ffi::Stats;
pub use fingerprint::{graph_key, graph_key_strong, Fingerprint, Node, Op, Ref, StrongFingerprint, TensorType};
pub use graph::GraphKeyBuilder;
pub use health::{TierHealth, TierStatus};
pub use key::Key;
pub use keys::{Fast, KeyMode, Strong, StrongKey};
pub use lease::{Lease, Program};
pub use status::{strerror, CompileError, Status};
pub use tier::{Codec, DecodeError, DiskOptions, RedisOptions, Tier};
pub use trust::Trust;

/// A cache of strong keys ([`StrongKey`]): `Cache<C, P, Strong>`.
pub type StrongCache<C, P> = Cache<C, P, Strong>;

/// The README's Rust examples, compiled and run as doc-tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The linked library's version, MAJOR*10000 + MINOR*100 + PATCH.
pub fn version() -> u32 {
    // SAFETY: no arguments, no state.
    unsafe { ffi::ccache_version() }
}
