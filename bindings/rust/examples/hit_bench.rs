//! What the safe API adds to a hit: `Cache::get_or_compile` that hits, its
//! lease guard dropped, against the C hit on the same cache,
//! `ccache_get_or_compile` that hits + `ccache_lease_release`, over the same
//! 361 keys (one decode step's call sites) in the same run.
//!
//! Prints a markdown table in bench/run's format (ns per hit, median ratio
//! [min, max] over the repetitions).  `--callgrind N` instead runs N hits
//! through each of `rs_hit_loop`, `c_hit_loop` and `empty_loop` (the key walk
//! alone) once, for `valgrind --tool=callgrind` (bench/run reads the
//! inclusive counts).  `--quick`: a short run (CI checks it still works).

use ccache::{ffi, Cache, Config, Fingerprint, Key, Status};
use std::os::raw::{c_int, c_void};
use std::time::Instant;

const ENTRIES: usize = 361;

/// An optimisation barrier (std::hint::black_box is stable only from 1.66).
fn black_box<T: Copy>(x: T) -> T {
    // SAFETY: reads a valid, initialised local.
    unsafe { std::ptr::read_volatile(&x) }
}

type Bench = Cache<u64, u64>;

fn never(_: &Bench) -> Result<(u64, ccache::Program<'_, u64, u64>), Status> {
    panic!("the benchmark only hits")
}

unsafe extern "C" fn c_never(
    _ud: *mut c_void,
    _c: *mut ffi::ccache,
    _k: ffi::ccache_key,
    _closure: *mut *mut c_void,
    _program: *mut *mut ffi::ccache_program,
) -> c_int {
    -1
}

/// The walk over the keys, with nothing looked up (subtracted in callgrind).
#[no_mangle]
#[inline(never)]
pub fn empty_loop(keys: &[Key], n: usize) -> u64 {
    let mut sum = 0u64;
    for i in 0..n {
        let k = black_box(keys[i % keys.len()]);
        sum = sum.wrapping_add(k.lo);
    }
    sum
}

/// The Rust hit: get_or_compile that hits, guard dropped.
#[no_mangle]
#[inline(never)]
pub fn rs_hit_loop(cache: &Bench, keys: &[Key], n: usize) -> u64 {
    let mut sum = 0u64;
    for i in 0..n {
        let k = black_box(keys[i % keys.len()]);
        let lease = cache.get_or_compile(k, never).unwrap();
        sum = sum.wrapping_add(k.lo ^ *lease.closure());
    }
    sum
}

/// The C hit: ccache_get_or_compile that hits + ccache_lease_release.
#[no_mangle]
#[inline(never)]
pub fn c_hit_loop(cache: &Bench, keys: &[Key], n: usize) -> u64 {
    let raw = cache.as_raw();
    let mut sum = 0u64;
    let mut lease = ffi::ccache_lease::zeroed();
    for i in 0..n {
        let k = black_box(keys[i % keys.len()]);
        // SAFETY: the cache is open; the lease is released before reuse.
        unsafe {
            if ffi::ccache_get_or_compile(raw, k.into(), Some(c_never), std::ptr::null_mut(), &mut lease) != 0 {
                panic!("the benchmark only hits");
            }
            // The closure is the crate's box of a u64 (its first field).
            sum = sum.wrapping_add(k.lo ^ *(lease.closure as *const u64));
            ffi::ccache_lease_release(raw, &mut lease);
        }
    }
    sum
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let callgrind: Option<usize> = args.iter().position(|a| a == "--callgrind").map(|i| {
        args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            eprintln!("hit_bench: --callgrind wants a count");
            std::process::exit(2)
        })
    });

    let cache: Bench = Cache::open(Config::default()).expect("open");
    let keys: Vec<Key> = (0..ENTRIES as u64)
        .map(|i| Fingerprint::new().str("call site").u64(i).finish().unwrap())
        .collect();
    for (i, &k) in keys.iter().enumerate() {
        let i = i as u64;
        drop(
            cache
                .get_or_compile(k, |c| {
                    let p = c.program_intern(k, i, 1024)?;
                    Ok::<_, Status>((i ^ k.lo, p))
                })
                .expect("fill"),
        );
    }
    // Every key must hit and give the same sum both ways.
    let check = |n| (rs_hit_loop(&cache, &keys, n), c_hit_loop(&cache, &keys, n));
    let (a, b) = check(ENTRIES);
    assert_eq!(a, b, "the two hit paths disagree");

    if let Some(n) = callgrind {
        let s = (empty_loop(&keys, n), rs_hit_loop(&cache, &keys, n), c_hit_loop(&cache, &keys, n));
        println!("hit_bench: callgrind run of {n} hits each ({:x})", s.0 ^ s.1 ^ s.2);
        return;
    }

    let (reps, n) = if quick { (3, 20_000) } else { (15, 400_000) };
    check(n / 4); // warm-up
    let (mut rs, mut cs, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..reps {
        let time = |f: &dyn Fn() -> u64| {
            let t = Instant::now();
            black_box(f());
            t.elapsed().as_nanos() as f64 / n as f64
        };
        let rust_first = r % 2 == 0;
        let (tr, tc) = if rust_first {
            let tr = time(&|| rs_hit_loop(&cache, &keys, n));
            (tr, time(&|| c_hit_loop(&cache, &keys, n)))
        } else {
            let tc = time(&|| c_hit_loop(&cache, &keys, n));
            (time(&|| rs_hit_loop(&cache, &keys, n)), tc)
        };
        rs.push(tr);
        cs.push(tc);
        ratio.push(tr / tc);
    }
    let s = cache.stats();
    assert_eq!(s.compiles, ENTRIES as u64);
    assert_eq!(s.leases_out, 0);
    let (lo, hi) = ratio.iter().fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
    let (mr, mc, mx) = (median(&mut rs), median(&mut cs), median(&mut ratio));
    println!("### rust_hit: the Rust binding's hit vs the C hit, same cache, {ENTRIES} entries\n");
    println!("| figure | measured (median) | baseline (median) | ratio: median [min, max] (reps) | target | status | notes |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| Rust hit (`Cache::get_or_compile` hit, guard dropped) vs C hit (`ccache_get_or_compile` hit + `ccache_lease_release`), {ENTRIES} entries, ns per hit | {mr:.1} ns | {mc:.1} ns | {mx:.2}× [{lo:.2}, {hi:.2}] ({reps}) | report | report | {n} hits per rep, alternating order; bindings/rust/examples/hit_bench.rs{} |",
        if quick { "; --quick" } else { "" }
    );
}
