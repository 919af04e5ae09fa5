//! Raw declarations of the parts of `ccache.h` the crate uses, written by
//! hand.  Every struct here is checked against the C compiler's layout
//! (sizes, alignments and the offset of every field) by the test
//! `ffi::layout::structs_match_c_layout` (`mod layout` at the end of this
//! file), from a probe that `build.rs` compiles against the header in use
//! (the installed one, or the bundled build's).
//!
//! Everything here is `unsafe` to use and follows `ccache.h`'s contract; the
//! safe API is the rest of the crate.  Only use this module for what the safe
//! API lacks (the benchmark uses it for the C baseline).
#![allow(non_camel_case_types, missing_docs)]

// One file per header the declarations mirror (ffi/common.rs for
// ccache/common.h, and cache, tier, fp, trust likewise; cache.rs also holds
// what ccache/cache.h includes from program.h, closure.h, flight.h and
// stats.h, tier.rs what ccache/tier.h includes from tier_disk.h and
// tier_redis.h), all re-exported here: every name stays `ccache::ffi::NAME`.
mod cache;
mod common;
mod fp;
mod tier;
mod trust;

pub use self::cache::*;
pub use self::common::*;
pub use self::fp::*;
pub use self::tier::*;
pub use self::trust::*;

#[cfg(test)]
mod layout {
    use super::*;
    use std::mem::MaybeUninit;

    include!(concat!(env!("OUT_DIR"), "/layout_c.rs"));

    macro_rules! size {
        ($t:ident) => {
            (stringify!($t).to_string(), std::mem::size_of::<$t>())
        };
    }
    macro_rules! align {
        ($t:ident) => {
            (concat!(stringify!($t), ".align").to_string(), std::mem::align_of::<$t>())
        };
    }
    macro_rules! off {
        ($t:ident, $f:ident, $name:literal) => {{
            let u = MaybeUninit::<$t>::uninit();
            let base = u.as_ptr();
            // SAFETY: only the address of the field is taken, nothing is read.
            let field = unsafe { std::ptr::addr_of!((*base).$f) };
            (concat!(stringify!($t), ".", $name).to_string(), field as usize - base as usize)
        }};
    }

    /// Every size, alignment and field offset of the structs in this module
    /// equals the C compiler's for the installed ccache.h.
    #[test]
    fn structs_match_c_layout() {
        let c = C_LAYOUT.unwrap_or_else(|why| panic!("no C layout to compare with: {why}"));
        let rust: &[(String, usize)] = include!(concat!(env!("OUT_DIR"), "/layout_rust.rs"));
        assert_eq!(c.len(), rust.len(), "the probe and the Rust table list different fields");
        let mut bad = Vec::new();
        for ((cn, cv), (rn, rv)) in c.iter().zip(rust.iter()) {
            assert_eq!(*cn, rn.as_str());
            if cv != rv {
                bad.push(format!("{cn}: C {cv}, Rust {rv}"));
            }
        }
        assert!(bad.is_empty(), "layout differs from C:\n{}", bad.join("\n"));
        assert!(c.len() > 100, "only {} rows checked", c.len());
    }
}
