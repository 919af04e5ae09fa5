//! The installed library, through pkg-config (build.rs's "System" rule), and
//! the pkg-config calls the bundled build uses for its dependencies too.

use crate::feature;
use std::env;
use std::path::Path;
use std::process::Command;

pub fn pkg_config(pkg: &str, args: &[&str]) -> Result<String, String> {
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
pub fn emit_libs(libs: &str, static_ccache: bool) {
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

/// Links the installed library; returns the probe's C flags.
pub fn link_system() -> Vec<String> {
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
