//! Tiers through the Codec trait: a program compiled by one cache is decoded
//! by the next from the directory tier (and from Redis when a redis-server
//! is installed), with no second compile.

mod common;

use ccache::{Cache, Codec, Config, DecodeError, DiskOptions, Key, RedisOptions, Status, Tier};
use common::{scratch_dir, start_redis};
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A compiled program: a name and some bytes of "machine code".
#[derive(Debug, PartialEq, Eq)]
struct Kernel {
    name: String,
    code: Vec<u8>,
}

#[derive(Default)]
struct Counts {
    encodes: AtomicUsize,
    decodes: AtomicUsize,
}

/// Length-prefixed name, then the code; decode checks every length.
struct KernelCodec(Arc<Counts>);

impl Codec<Kernel> for KernelCodec {
    fn encode(&self, _pkey: Key, k: &Kernel) -> Option<Vec<u8>> {
        self.0.encodes.fetch_add(1, Ordering::SeqCst);
        let mut v = (k.name.len() as u32).to_le_bytes().to_vec();
        v.extend_from_slice(k.name.as_bytes());
        v.extend_from_slice(&k.code);
        Some(v)
    }
    fn decode(&self, _pkey: Key, b: &[u8]) -> Option<(Kernel, u64)> {
        self.0.decodes.fetch_add(1, Ordering::SeqCst);
        let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let name = std::str::from_utf8(b.get(4..4usize.checked_add(n)?)?).ok()?.to_string();
        let code = b[4 + n..].to_vec();
        let cost = code.len() as u64;
        Some((Kernel { name, code }, cost))
    }
}


/// Unsigned entries accepted by name: these tests are about the codec, and
/// the Redis tier is one others can write (the safe-by-default rule).
fn config(tier: Tier) -> Config {
    Config {
        runtime_tag: Some("ccache-rs-test 1".into()),
        tier_min_compile: Duration::ZERO,
        tiers: vec![tier],
        ..Config::default()
    }
    .accept_unsigned_entries()
}

/// One process's worth: open a cache over `tier`, get the program, and
/// return it with the stats and the compiles that ran.
fn one_run(tier: Tier, counts: &Arc<Counts>) -> (Kernel, ccache::Stats, usize) {
    let cache: Cache<(), Kernel> = Cache::open_with_codec(config(tier), KernelCodec(counts.clone())).unwrap();
    let compiles = AtomicUsize::new(0);
    let p = cache
        .program_get_or_compile(Key::from(0x4b45524eu128), |_| {
            compiles.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ()>((Kernel { name: "gemm_128x576".into(), code: vec![0x90; 300] }, 300))
        })
        .unwrap();
    let k = Kernel { name: p.name.clone(), code: p.code.clone() };
    drop(p);
    (k, cache.stats(), compiles.load(Ordering::SeqCst))
}

fn round_trip(make_tier: impl Fn() -> Tier) {
    let counts = Arc::new(Counts::default());
    let (first, s1, c1) = one_run(make_tier(), &counts);
    assert_eq!((c1, s1.program_compiles, s1.tier_misses, s1.tier_writes, s1.tier_hits), (1, 1, 1, 1, 0));
    assert_eq!(counts.encodes.load(Ordering::SeqCst), 1);
    let (second, s2, c2) = one_run(make_tier(), &counts);
    assert_eq!((c2, s2.program_compiles, s2.tier_hits, s2.tier_errors, s2.tier_corrupt), (0, 0, 1, 0, 0));
    assert_eq!(counts.decodes.load(Ordering::SeqCst), 1);
    assert_eq!(first, second);
    assert_eq!(second.code.len(), 300);
}

#[test]
fn disk_tier_round_trip_through_the_codec() {
    let dir = scratch_dir("disk");
    round_trip(|| Tier::disk(&DiskOptions::new(dir.join("tier"))).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_refused_decode_compiles_instead() {
    struct Refuse(Arc<AtomicUsize>);
    impl Codec<Kernel> for Refuse {
        fn encode(&self, _: Key, k: &Kernel) -> Option<Vec<u8>> {
            Some(k.code.clone())
        }
        fn decode(&self, _: Key, _: &[u8]) -> Option<(Kernel, u64)> {
            self.0.fetch_add(1, Ordering::SeqCst);
            None
        }
    }
    let dir = scratch_dir("refuse");
    for run in 0..2 {
        let tier = Tier::disk(&DiskOptions::new(dir.join("tier"))).unwrap();
        let decodes = Arc::new(AtomicUsize::new(0));
        let cache: Cache<(), Kernel> = Cache::open_with_codec(config(tier), Refuse(decodes.clone())).unwrap();
        let p = cache.program_get_or_compile(Key::from(1u128), |_| Ok::<_, ()>((Kernel { name: "k".into(), code: vec![1] }, 1))).unwrap();
        assert_eq!(p.code, vec![1]);
        drop(p);
        let s = cache.stats();
        // The second run finds the entry, refuses it when the miss first asks
        // the tier and again after taking the tier's compile lock.
        let refused = decodes.load(Ordering::SeqCst) as u64;
        assert_eq!((s.program_compiles, s.tier_errors, refused), (1, refused, 2 * run));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `DecodeError::Failed` keeps the entry (it loads once the codec works);
/// `DecodeError::Corrupt` removes it at the first refusal.
#[test]
fn a_corrupt_decode_removes_the_entry_a_failed_one_keeps_it() {
    struct Answer(DecodeError, Arc<AtomicUsize>);
    impl Codec<Kernel> for Answer {
        fn encode(&self, _: Key, k: &Kernel) -> Option<Vec<u8>> {
            Some(k.code.clone())
        }
        fn decode(&self, _: Key, _: &[u8]) -> Option<(Kernel, u64)> {
            None
        }
        fn decode_checked(&self, _: Key, _: &[u8]) -> Result<(Kernel, u64), DecodeError> {
            self.1.fetch_add(1, Ordering::SeqCst);
            Err(self.0)
        }
    }
    let dir = scratch_dir("corrupt");
    let run = |answer: DecodeError| {
        let tier = Tier::disk(&DiskOptions::new(dir.join("tier"))).unwrap();
        let decodes = Arc::new(AtomicUsize::new(0));
        let cache: Cache<(), Kernel> = Cache::open_with_codec(config(tier), Answer(answer, decodes.clone())).unwrap();
        let p = cache.program_get_or_compile(Key::from(1u128), |_| Ok::<_, ()>((Kernel { name: "k".into(), code: vec![1] }, 1))).unwrap();
        drop(p);
        let s = cache.stats();
        (s.tier_errors, s.tier_corrupt, decodes.load(Ordering::SeqCst))
    };
    assert_eq!(run(DecodeError::Failed), (0, 0, 0)); // compiled and stored
    assert_eq!(run(DecodeError::Failed), (2, 0, 2)); // kept: refused twice, stored again
    assert_eq!(run(DecodeError::Corrupt), (0, 1, 1)); // removed at once; the miss stores anew
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_shared_directory_is_refused_with_the_path() {
    let dir = scratch_dir("perm");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Tier::disk(&DiskOptions::new(&dir)).err().expect("a world-writable directory is refused");
    assert_eq!(e.code(), Status::EPERM);
    let text = e.to_string();
    assert!(text.starts_with(ccache::strerror(Status::EPERM)), "{text}");
    assert!(text.contains(dir.to_str().unwrap()), "the detail names the path: {text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn redis_tier_round_trip_through_the_codec() {
    let redis = match start_redis() {
        Some(r) => r,
        None => return,
    };
    let servers = format!("unix:{}", redis.dir.join("redis.sock").display());
    let probe = Tier::redis(&RedisOptions::new(servers.clone()));
    if let Err(e) = &probe {
        if e.code() == Status::ENOTSUP {
            assert!(std::env::var("CCACHE_TEST_REQUIRE_REDIS").as_deref() != Ok("1"), "{e}");
            eprintln!("libccache built without hiredis: {e}");
            return;
        }
    }
    drop(probe);
    round_trip(|| {
        let mut o = RedisOptions::new(servers.clone());
        o.prefix = Some("ccache-rs-test".into());
        Tier::redis(&o).unwrap()
    });
}

#[test]
fn a_bad_redis_server_list_is_einval_with_detail() {
    match Tier::redis(&RedisOptions::new("no-port-here")) {
        Err(e) if e.code() == Status::ENOTSUP => {}
        Err(e) => {
            assert_eq!(e.code(), Status::EINVAL);
            assert!(e.detail().is_some(), "the detail says which option: {e}");
        }
        Ok(_) => panic!("a server list without a port was accepted"),
    }
}
