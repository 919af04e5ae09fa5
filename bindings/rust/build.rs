//! Finds libccache with `pkg-config` and checks the C layout of the structs
//! the crate passes.
//!
//! Environment:
//! - `PKG_CONFIG` (default `pkg-config`): the pkg-config program; `PKG_CONFIG_PATH`
//!   as pkg-config reads it (e.g. `<prefix>/lib/pkgconfig` for a private install).
//! - `CCACHE_STATIC=1` (or the cargo feature `static`): link `libccache.a` and the
//!   private dependencies `pkg-config --static` lists (xxHash, hiredis, pthread).
//! - `CC` (default `cc`): the C compiler for the layout probe.
//!
//! The layout probe compiles a small C program against the ccache.h that
//! pkg-config names and records `sizeof`/`offsetof` of every struct field the
//! crate declares in `src/ffi.rs`; `tests/layout.rs` compares them with Rust's
//! view.  The probe's result goes to `$OUT_DIR/layout_c.rs`; the build never
//! fails because of it (the test does, saying why).

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every struct the crate hands to or reads from C, with every field, in
/// header order.  tests/layout.rs checks each one against src/ffi.rs.
const LAYOUT: &[(&str, &[&str])] = &[
    ("ccache_key", &["lo", "hi"]),
    ("ccache_lease", &["closure", "native", "internal_"]),
    (
        "ccache_config",
        &[
            "size",
            "magic",
            "sweeper_thread",
            "max_items",
            "ttl_ms",
            "max_cost_bytes",
            "destroy_closure",
            "destroy_program",
            "ctx",
            "clock_ms",
            "alloc",
            "free",
            "alloc_ctx",
            "codec",
            "runtime_tag",
            "tier_min_compile_us",
            "tiers",
            "n_tiers",
            "key_mode",
            "on_event",
            "event_ctx",
            "tier_max_entry_bytes",
            "trust",
            "trust_flags",
        ],
    ),
    (
        "ccache_stats",
        &[
            "size",
            "hits",
            "misses",
            "inserts",
            "replaced",
            "evicted_capacity",
            "evicted_ttl",
            "evicted_cost",
            "removed",
            "cleared",
            "items",
            "programs",
            "programs_destroyed",
            "closures_destroyed",
            "leases_out",
            "cost_bytes",
            "program_hits",
            "program_misses",
            "compiles",
            "program_compiles",
            "compile_failures",
            "waits",
            "compile_ns",
            "sweeper_wakeups",
            "tier_hits",
            "tier_misses",
            "tier_writes",
            "tier_errors",
            "tier_corrupt",
            "tier_bytes_read",
            "tier_bytes_written",
            "tier_lock_waits",
            "tier_wait_ms_max",
            "tier_leases_lost",
            "tier_lock_timeouts",
            "handles_out",
            "program_waits",
            "program_compile_failures",
            "program_compile_ns",
            "misses_evicted",
            "tier_oversize",
            "tier_rejected",
            "tier_unpublished",
        ],
    ),
    ("ccache_codec", &["encode", "free_bytes", "decode", "ctx"]),
    (
        "ccache_disk_options",
        &[
            "size",
            "dir",
            "max_bytes",
            "fsync",
            "lock_poll_ms",
            "lock_poll_max_ms",
            "lock_wait_ms",
            "touch_interval_ms",
            "io_lock_ms",
        ],
    ),
    (
        "ccache_redis_options",
        &[
            "size",
            "servers",
            "prefix",
            "user",
            "password",
            "connect_timeout_ms",
            "command_timeout_ms",
            "entry_ttl_ms",
            "lease_ms",
            "poll_ms",
            "poll_max_ms",
            "wait_ms",
            "reconnect_min_ms",
            "reconnect_max_ms",
            "sentinel_user",
            "sentinel_password",
        ],
    ),
    ("ccache_fp", &["opaque_"]),
    ("ccache_fp_ref", &["node", "slot"]),
    ("ccache_fp_tensor", &["dtype", "rank", "dims"]),
    (
        "ccache_fp_node",
        &[
            "op_name",
            "op_id",
            "attrs",
            "attrs_len",
            "outputs",
            "n_outputs",
            "n_operands",
            "operands",
            "constant",
            "constant_len",
            "param_index",
        ],
    ),
];

fn pkg_config(args: &[&str]) -> Result<String, String> {
    let prog = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(&prog)
        .args(args)
        .arg("ccache")
        .output()
        .map_err(|e| format!("cannot run {prog}: {e} (Debian: apt-get install pkg-config)"))?;
    if !out.status.success() {
        return Err(format!(
            "`{prog} {} ccache` failed: {}\nInstall libccache (cmake --install), and point \
             PKG_CONFIG_PATH at <prefix>/lib/pkgconfig if the prefix is not a system one.",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    for v in ["PKG_CONFIG", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "CCACHE_STATIC", "CC"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let want_static = env::var_os("CARGO_FEATURE_STATIC").is_some()
        || env::var("CCACHE_STATIC").map(|v| v == "1").unwrap_or(false);

    let libs_args: &[&str] = if want_static { &["--libs", "--static"] } else { &["--libs"] };
    let libs = pkg_config(libs_args).unwrap_or_else(|e| panic!("{e}"));
    let cflags = pkg_config(&["--cflags"]).unwrap_or_else(|e| panic!("{e}"));
    let libdir = pkg_config(&["--variable=libdir"]).unwrap_or_default();
    let includedir = pkg_config(&["--variable=includedir"]).unwrap_or_default();

    for tok in libs.split_whitespace() {
        if let Some(dir) = tok.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(name) = tok.strip_prefix("-l") {
            if name == "ccache" && want_static {
                println!("cargo:rustc-link-lib=static=ccache");
            } else {
                println!("cargo:rustc-link-lib={name}");
            }
        } else if tok == "-pthread" {
            println!("cargo:rustc-link-lib=pthread");
        }
    }
    if !libdir.is_empty() {
        let lib = Path::new(&libdir).join(if want_static { "libccache.a" } else { "libccache.so" });
        // Relink when the library is rebuilt (a static one is copied into every binary).
        println!("cargo:rerun-if-changed={}", lib.display());
        // This package's own tests and examples find a libccache.so outside the
        // loader's paths; dependents set their own rpath or LD_LIBRARY_PATH.
        if !want_static && !matches!(libdir.as_str(), "/usr/lib" | "/lib" | "/usr/local/lib") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
        }
    }
    if !includedir.is_empty() {
        println!("cargo:rerun-if-changed={}", Path::new(&includedir).join("ccache.h").display());
        println!("cargo:include={includedir}");
    }

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let generated = match probe_layout(&out_dir, &cflags) {
        Ok(rows) => format!("/// (name, value) rows from the C probe.\npub const C_LAYOUT: Result<&[(&str, usize)], &str> = Ok(&[\n{rows}]);\n"),
        Err(why) => format!(
            "/// The C probe failed.\npub const C_LAYOUT: Result<&[(&str, usize)], &str> = Err({why:?});\n"
        ),
    };
    fs::write(out_dir.join("layout_c.rs"), generated).expect("write layout_c.rs");

    // Rust's side of the same table: the test module in src/ffi.rs defines
    // size!/align!/off! and includes this list.
    let mut rust = String::from("&[\n");
    for (ty, fields) in LAYOUT {
        let _ = writeln!(rust, "    size!({ty}),\n    align!({ty}),");
        for f in *fields {
            let _ = writeln!(rust, "    off!({ty}, {f}),");
        }
    }
    rust.push_str("]\n");
    fs::write(out_dir.join("layout_rust.rs"), rust).expect("write layout_rust.rs");
}

/// Compiles and runs the probe; returns the body of the generated table.
fn probe_layout(out_dir: &Path, cflags: &str) -> Result<String, String> {
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <ccache.h>\n#define S(t) printf(\"%s %zu\\n\", #t, sizeof(t)); printf(\"%s.align %zu\\n\", #t, _Alignof(t));\n#define F(t, f) printf(\"%s.%s %zu\\n\", #t, #f, offsetof(t, f));\nint main(void) {\n",
    );
    for (ty, fields) in LAYOUT {
        let _ = writeln!(c, "  S({ty})");
        for f in *fields {
            let _ = writeln!(c, "  F({ty}, {f})");
        }
    }
    c.push_str("  return 0;\n}\n");
    let src = out_dir.join("layout_probe.c");
    let exe = out_dir.join("layout_probe");
    fs::write(&src, c).map_err(|e| e.to_string())?;
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .arg("-std=c11")
        .args(cflags.split_whitespace())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .map_err(|e| format!("cannot run the C compiler {cc}: {e}"))?;
    if !status.success() {
        return Err(format!("{cc} failed on {}", src.display()));
    }
    let out = Command::new(&exe).output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err("the layout probe failed".to_string());
    }
    let mut rows = String::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let (name, value) = line.split_once(' ').ok_or("bad probe output")?;
        let _ = writeln!(rows, "    ({name:?}, {value}),");
    }
    Ok(rows)
}
