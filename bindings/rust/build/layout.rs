//! The layout check (build.rs's "The layout check"): the structs and fields
//! compared, the C probe that measures them, and the two tables written to
//! `OUT_DIR` for `mod layout` in src/ffi.rs.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;

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

/// Writes `$OUT_DIR/layout_c.rs` (the probe's figures, or why there are
/// none) and `$OUT_DIR/layout_rust.rs` (Rust's side of the same table).
pub fn write(out_dir: &Path, probe_cflags: &[String]) {
let generated = match probe_layout(out_dir, probe_cflags) {
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
