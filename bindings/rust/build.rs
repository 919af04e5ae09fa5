//! Builds libccache from its sources (or links an installed one) and checks
//! the C layout of the structs the crate passes.
//!
//! This file chooses; the work is in `build/`: `system.rs` (pkg-config, the
//! installed library), `bundled.rs` (the C sources, the compiler, `ar`),
//! `layout.rs` (the probe and the tables it writes).
//!
//! # Which library
//!
//! The first rule that applies wins:
//! 1. `CCACHE_LINK=system`: the library `pkg-config` finds (`ccache.pc`);
//!    `CCACHE_LINK=bundled`: built here from its sources.
//! 2. The cargo feature `bundled`: built here.
//! 3. Otherwise (`auto`): the installed library when `pkg-config --exists
//!    ccache` succeeds, else built here.
//!
//! **Bundled.**  The sources and the definitions come from `src/sources.txt`
//! (the one list CMake, pip and mix read too), found in `$CCACHE_SOURCE_DIR`,
//! else two directories up (this crate inside the ccache tree), else in
//! `vendor/ccache` (what `vendor.sh` copies in, for a copy of the crate
//! outside the tree and for `cargo package`).  Each source is compiled by
//! the system C compiler (`CC`, default `cc`; `CFLAGS` appended), driven
//! directly: no crates.io crate.  The objects are archived with `AR`
//! (default `ar`) into `libccache.a` in `OUT_DIR`, linked statically, so a
//! binary that depends on this crate needs no `LD_LIBRARY_PATH`.
//! Dependencies, through `pkg-config`: `libxxhash` (always), `hiredis`
//! (feature `redis`), `libsodium` (feature `trust`: signed entries and strong
//! keys); uthash's headers from `/usr/include` (Debian's uthash-dev has no
//! pkg-config file; `UTHASH_INCLUDE_DIR` to use another directory).  Without
//! `redis` the Redis tier answers `ENOTSUP`; without `trust` every key call
//! and strong key does.
//!
//! **System.**  `PKG_CONFIG` (default `pkg-config`) with `PKG_CONFIG_PATH`
//! as pkg-config reads it.  `CCACHE_STATIC=1` (or the feature `static`) links
//! `libccache.a` and what `pkg-config --static` lists; otherwise
//! `libccache.so`, with an rpath to pkg-config's `libdir` for this package's
//! own tests and examples when that is not a system directory (a dependent
//! sets its own, or links statically).  The features `redis` and `trust` do
//! not change an installed library: it has what it was built with.
//!
//! # The layout check
//!
//! A small C program compiled against the `ccache.h` in use records
//! `sizeof`/`_Alignof` and every field's `offsetof` of each struct in
//! `LAYOUT` (in build/layout.rs); the test
//! `ffi::layout::structs_match_c_layout` (the `mod layout` at the end of
//! `src/ffi.rs`) compares them with Rust's view.
//! The probe's result goes to `$OUT_DIR/layout_c.rs`; the build never fails
//! because of it (the test does, saying why).

#[path = "build/bundled.rs"]
mod bundled;
#[path = "build/layout.rs"]
mod layout;
#[path = "build/system.rs"]
mod system;

use std::env;
use std::path::PathBuf;
use system::pkg_config;

fn feature(name: &str) -> bool {
    env::var_os(format!("CARGO_FEATURE_{}", name.to_uppercase())).is_some()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Link {
    System,
    Bundled,
}

/// The rules in the module documentation, in order.
fn choose() -> Link {
    match env::var("CCACHE_LINK").as_deref() {
        Ok("system") => return Link::System,
        Ok("bundled") => return Link::Bundled,
        Ok("auto") | Ok("") | Err(_) => {}
        Ok(other) => panic!("CCACHE_LINK={other}: expected system, bundled or auto"),
    }
    if feature("bundled") {
        return Link::Bundled;
    }
    if pkg_config("ccache", &["--exists"]).is_ok() {
        Link::System
    } else {
        Link::Bundled
    }
}

fn main() {
    for v in [
        "CCACHE_LINK",
        "CCACHE_SOURCE_DIR",
        "UTHASH_INCLUDE_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "CCACHE_STATIC",
        "CC",
        "AR",
        "CFLAGS",
    ] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build");
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let link = choose();
    println!("cargo:link={}", if link == Link::System { "system" } else { "bundled" });
    let probe_cflags = match link {
        Link::System => system::link_system(),
        Link::Bundled => {
            let root = bundled::sources_root();
            bundled::build(&root, &out_dir);
            vec![format!("-I{}", root.join("include").display())]
        }
    };
    layout::write(&out_dir, &probe_cflags);
}
