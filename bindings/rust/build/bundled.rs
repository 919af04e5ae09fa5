//! The bundled build (build.rs's "Bundled" rule): sources.txt, the C
//! compiler, ar.

use crate::feature;
use crate::system::{emit_libs, pkg_config};
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

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
