//! Builds libccache from its sources (or links an installed one) and checks
//! the C layout of the structs the crate passes.
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
//! `LAYOUT` below; the test `ffi::layout::structs_match_c_layout` (the
//! `mod layout` at the end of `src/ffi.rs`) compares them with Rust's view.
//! The probe's result goes to `$OUT_DIR/layout_c.rs`; the build never fails
//! because of it (the test does, saying why).

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// Every struct the crate hands to or reads from C, with every field, in
/// header order.  `mod layout` in src/ffi.rs checks each one against Rust's declarations.
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
    ("ccache_strong_key", &["key", "check"]),
    (
        "ccache_event",
        &["size", "kind", "level", "key", "status", "err", "cause", "tier", "tier_name", "op", "reason", "duration_ns"],
    ),
    (
        "ccache_tier_health",
        &[
            "size",
            "parts",
            "kind",
            "where",
            "status",
            "backoff_ms",
            "backoff_left_ms",
            "errors",
            "last_error",
            "leases_held",
            "leases_lost",
            "lock_waits",
            "fallback_reads",
            "fallback_writes",
            "failovers",
            "leases_retaken",
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
            "read_side",
            "reader_blocks",
            "heavy_barriers",
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
            "idle_close_ms",
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

fn pkg_config(pkg: &str, args: &[&str]) -> Result<String, String> {
    let prog = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(&prog)
        .args(args)
        .arg(pkg)
        .output()
        .map_err(|e| format!("cannot run {prog}: {e} (Debian: apt-get install pkg-config)"))?;
    if !out.status.success() {
        return Err(format!(
            "`{prog} {} {pkg}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Passes `-L`/`-l`/`-pthread` of a pkg-config `--libs` line to rustc.
fn emit_libs(libs: &str, static_ccache: bool) {
    for tok in libs.split_whitespace() {
        if let Some(dir) = tok.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(name) = tok.strip_prefix("-l") {
            if name == "ccache" && static_ccache {
                println!("cargo:rustc-link-lib=static=ccache");
            } else {
                println!("cargo:rustc-link-lib={name}");
            }
        } else if tok == "-pthread" {
            println!("cargo:rustc-link-lib=pthread");
        }
    }
}

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
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let link = choose();
    println!("cargo:link={}", if link == Link::System { "system" } else { "bundled" });
    let probe_cflags = match link {
        Link::System => link_system(),
        Link::Bundled => {
            let root = bundled::sources_root();
            bundled::build(&root, &out_dir);
            vec![format!("-I{}", root.join("include").display())]
        }
    };

    let generated = match probe_layout(&out_dir, &probe_cflags) {
        Ok(rows) => format!("/// (name, value) rows from the C probe.\npub const C_LAYOUT: Result<&[(&str, usize)], &str> = Ok(&[\n{rows}]);\n"),
        Err(why) => format!(
            "/// The C probe failed.\npub const C_LAYOUT: Result<&[(&str, usize)], &str> = Err({why:?});\n"
        ),
    };
    fs::write(out_dir.join("layout_c.rs"), generated).expect("write layout_c.rs");

    // Rust's side of the same table: `mod layout` in src/ffi.rs defines
    // size!/align!/off! and includes this list.
    let mut rust = String::from("&[\n");
    for (ty, fields) in LAYOUT {
        let _ = writeln!(rust, "    size!({ty}),\n    align!({ty}),");
        for f in *fields {
            // A C field named as a Rust keyword is declared with a trailing `_`.
            let ident = if *f == "where" { "where_" } else { *f };
            let _ = writeln!(rust, "    off!({ty}, {ident}, \"{f}\"),");
        }
    }
    rust.push_str("]\n");
    fs::write(out_dir.join("layout_rust.rs"), rust).expect("write layout_rust.rs");
}

/// Links the installed library; returns the probe's C flags.
fn link_system() -> Vec<String> {
    let want_static = feature("static") || env::var("CCACHE_STATIC").map(|v| v == "1").unwrap_or(false);
    let hint = "\nInstall libccache (cmake --install), and point PKG_CONFIG_PATH at \
                <prefix>/lib/pkgconfig if the prefix is not a system one; or build it \
                from its sources: CCACHE_LINK=bundled (or the feature `bundled`).";
    let libs_args: &[&str] = if want_static { &["--libs", "--static"] } else { &["--libs"] };
    let libs = pkg_config("ccache", libs_args).unwrap_or_else(|e| panic!("{e}{hint}"));
    let cflags = pkg_config("ccache", &["--cflags"]).unwrap_or_else(|e| panic!("{e}{hint}"));
    let libdir = pkg_config("ccache", &["--variable=libdir"]).unwrap_or_default();
    let includedir = pkg_config("ccache", &["--variable=includedir"]).unwrap_or_default();
    emit_libs(&libs, want_static);
    if !libdir.is_empty() {
        let lib = Path::new(&libdir).join(if want_static { "libccache.a" } else { "libccache.so" });
        // Relink when the library is rebuilt (a static one is copied into every binary).
        println!("cargo:rerun-if-changed={}", lib.display());
        if !want_static && !matches!(libdir.as_str(), "/usr/lib" | "/lib" | "/usr/local/lib") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
        }
    }
    if !includedir.is_empty() {
        println!("cargo:rerun-if-changed={}", Path::new(&includedir).join("ccache.h").display());
        println!("cargo:include={includedir}");
    }
    cflags.split_whitespace().map(str::to_string).collect()
}

/// The bundled build: sources.txt, the C compiler, ar.
mod bundled {
    use super::*;

    /// The directory holding `src/sources.txt` and `include/ccache.h`.
    pub fn sources_root() -> PathBuf {
        let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
        let mut tried = Vec::new();
        let mut candidates = Vec::new();
        if let Some(d) = env::var_os("CCACHE_SOURCE_DIR") {
            candidates.push(PathBuf::from(d));
        }
        candidates.push(manifest.join("../.."));
        candidates.push(manifest.join("vendor/ccache"));
        for c in candidates {
            if c.join("src/sources.txt").is_file() && c.join("include/ccache.h").is_file() {
                return c.canonicalize().unwrap_or(c);
            }
            tried.push(c.display().to_string());
        }
        panic!(
            "ccache: no installed libccache was used and no sources were found to build it \
             (looked for src/sources.txt and include/ccache.h in: {}).  In a copy of the crate \
             made outside the ccache tree, run `bindings/rust/vendor.sh <crate dir>` from the \
             tree first, or set CCACHE_SOURCE_DIR to a ccache checkout; or install the library \
             and let pkg-config find it (CCACHE_LINK=system).",
            tried.join(", ")
        );
    }

    /// A dependency through pkg-config: its C flags (for the compile) after
    /// emitting its libraries (for the link).
    fn dep(pc: &str, why: &str, debian: &str) -> Vec<String> {
        let libs = pkg_config(pc, &["--libs"])
            .unwrap_or_else(|e| panic!("ccache (bundled): {why} needs {pc}: {e}\nDebian: apt-get install {debian}"));
        emit_libs(&libs, false);
        pkg_config(pc, &["--cflags"]).unwrap_or_default().split_whitespace().map(str::to_string).collect()
    }

    fn uthash_dir() -> PathBuf {
        let dirs: Vec<PathBuf> = match env::var_os("UTHASH_INCLUDE_DIR") {
            Some(d) => vec![PathBuf::from(d)],
            None => vec![PathBuf::from("/usr/include"), PathBuf::from("/usr/local/include")],
        };
        for d in &dirs {
            if d.join("uthash.h").is_file() {
                return d.clone();
            }
        }
        panic!("ccache (bundled): uthash.h not found in {dirs:?} (Debian: apt-get install uthash-dev; or set UTHASH_INCLUDE_DIR)");
    }

    struct List {
        sources: Vec<String>,
        defines: Vec<String>,
    }

    /// Reads sources.txt as its header says: `src|define ITEM [when]`.
    fn read_list(root: &Path, redis: bool, sodium: bool) -> List {
        let path = root.join("src/sources.txt");
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut list = List { sources: Vec::new(), defines: Vec::new() };
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("");
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.is_empty() {
                continue;
            }
            let when = f.get(2).copied().unwrap_or("");
            let keep = match when {
                "" => true,
                "redis" => redis,
                "!redis" => !redis,
                "sodium" => sodium,
                _ => panic!("{}:{}: unknown condition '{when}'", path.display(), n + 1),
            };
            if f.len() < 2 || f.len() > 3 {
                panic!("{}:{}: bad entry '{line}'", path.display(), n + 1);
            }
            match (f[0], keep) {
                (_, false) => {}
                ("src", true) => list.sources.push(f[1].to_string()),
                ("define", true) => list.defines.push(f[1].to_string()),
                _ => panic!("{}:{}: unknown entry '{line}'", path.display(), n + 1),
            }
        }
        println!("cargo:rerun-if-changed={}", path.display());
        list
    }

    fn newest(dir: &Path, newest_so_far: &mut SystemTime) {
        println!("cargo:rerun-if-changed={}", dir.display());
        if let Ok(rd) = fs::read_dir(dir) {
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    newest(&p, newest_so_far);
                } else if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                    if t > *newest_so_far {
                        *newest_so_far = t;
                    }
                }
            }
        }
    }

    pub fn build(root: &Path, out_dir: &Path) {
        let redis = feature("redis");
        let sodium = feature("trust");
        let list = read_list(root, redis, sodium);
        let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
        let ar = env::var("AR").unwrap_or_else(|_| "ar".to_string());

        let mut flags: Vec<String> =
            ["-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-pthread", "-Wall", "-Wextra"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        if env::var("DEBUG").map(|v| v == "true").unwrap_or(false) {
            flags.push("-g".into());
        }
        flags.extend(list.defines.iter().map(|d| format!("-D{d}")));
        flags.push(format!("-I{}", root.join("include").display()));
        flags.push(format!("-I{}", root.join("src").display()));
        flags.push(format!("-I{}", uthash_dir().display()));
        // Link order: libccache.a first, then what it needs.
        println!("cargo:rustc-link-search=native={}", out_dir.display());
        println!("cargo:rustc-link-lib=static=ccache");
        flags.extend(dep("libxxhash", "the library", "libxxhash-dev"));
        if redis {
            flags.extend(dep("hiredis", "the feature `redis` (the Redis tier)", "libhiredis-dev"));
        }
        if sodium {
            flags.extend(dep("libsodium", "the feature `trust` (signed entries, strong keys)", "libsodium-dev"));
        }
        println!("cargo:rustc-link-lib=pthread");
        if let Ok(extra) = env::var("CFLAGS") {
            flags.extend(extra.split_whitespace().map(str::to_string));
        }
        println!("cargo:include={}", root.join("include").display());
        println!("cargo:root={}", root.display());

        // An object is rebuilt when its source or any header is newer (or the flags changed).
        let mut headers = SystemTime::UNIX_EPOCH;
        newest(&root.join("include"), &mut headers);
        newest(&root.join("src"), &mut headers);
        let obj_dir = out_dir.join("ccache-obj");
        fs::create_dir_all(&obj_dir).expect("create the object directory");
        let flags_file = obj_dir.join("flags");
        let flag_line = format!("{cc} {}", flags.join(" "));
        let same_flags = fs::read_to_string(&flags_file).map(|s| s == flag_line).unwrap_or(false);

        let jobs: usize = env::var("NUM_JOBS").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1);
        let work: Vec<(PathBuf, PathBuf)> = list
            .sources
            .iter()
            .map(|s| (root.join(s), obj_dir.join(format!("{}.o", s.replace('/', "_")))))
            .collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let errors = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..jobs.min(work.len()) {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let (src, obj) = match work.get(i) {
                        Some(w) => w,
                        None => break,
                    };
                    let mtime = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
                    if same_flags {
                        if let (Some(o), Some(s)) = (mtime(obj), mtime(src)) {
                            if o >= s && o >= headers {
                                continue;
                            }
                        }
                    }
                    let out = Command::new(&cc).args(&flags).arg("-c").arg(src).arg("-o").arg(obj).output();
                    match out {
                        Ok(o) if o.status.success() => {}
                        Ok(o) => errors.lock().unwrap().push(format!(
                            "{cc} failed on {}:\n{}",
                            src.display(),
                            String::from_utf8_lossy(&o.stderr)
                        )),
                        Err(e) => errors.lock().unwrap().push(format!("cannot run the C compiler {cc}: {e}")),
                    }
                });
            }
        });
        let errors = errors.into_inner().unwrap();
        if !errors.is_empty() {
            let _ = fs::remove_file(&flags_file);
            panic!("ccache (bundled): {}", errors.join("\n"));
        }
        fs::write(&flags_file, flag_line).expect("write the flags file");

        let lib = out_dir.join("libccache.a");
        let _ = fs::remove_file(&lib); // ar adds to an existing archive
        let status = Command::new(&ar)
            .arg("crs")
            .arg(&lib)
            .args(work.iter().map(|(_, o)| o))
            .status()
            .unwrap_or_else(|e| panic!("cannot run {ar}: {e} (Debian: apt-get install binutils)"));
        assert!(status.success(), "{ar} crs {} failed", lib.display());
    }
}

/// Compiles and runs the probe; returns the body of the generated table.
fn probe_layout(out_dir: &Path, cflags: &[String]) -> Result<String, String> {
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
        .args(cflags)
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
