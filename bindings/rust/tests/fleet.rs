//! What a fleet needs (issue 39, item 1): signed entries and the named
//! opt-out, strong keys, the event hook, tier health, close with abandon.

mod common;

use ccache::{
    Cache, Cause, Codec, Config, DiskOptions, EventKind, Key, RedisOptions, Status, StrongCache, StrongFingerprint, StrongKey,
    Tier, TierStatus, Trust,
};
use common::{scratch_dir, start_redis};
use std::os::unix::fs::PermissionsExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A program is its text; the codec checks nothing but UTF-8.
struct Text;
impl Codec<String> for Text {
    fn encode(&self, _: Key, p: &String) -> Option<Vec<u8>> {
        Some(p.as_bytes().to_vec())
    }
    fn decode(&self, _: Key, b: &[u8]) -> Option<(String, u64)> {
        Some((String::from_utf8(b.to_vec()).ok()?, b.len() as u64))
    }
}

fn redis_tier(servers: &str) -> Option<Tier> {
    let mut o = RedisOptions::new(servers);
    o.prefix = Some("ccache-rs-fleet".into());
    match Tier::redis(&o) {
        Err(e) if e.code() == Status::ENOTSUP => {
            assert!(std::env::var("CCACHE_TEST_REQUIRE_REDIS").as_deref() != Ok("1"), "{e}");
            eprintln!("libccache built without hiredis: skipped");
            None
        }
        t => Some(t.unwrap()),
    }
}

fn fleet_config(tier: Tier) -> Config {
    Config { runtime_tag: Some("rlx 1".into()), tier_min_compile: Duration::ZERO, tiers: vec![tier], ..Config::default() }
}

/// One process's program miss on the shared tier: the program it ended up
/// with, and its counters.
fn get(config: Config, compiled: &str) -> (String, ccache::Stats) {
    let cache: Cache<(), String> = Cache::open_with_codec(config, Text).unwrap();
    let p = cache.program_get_or_compile(Key::from(0xf1ee7u128), |_| Ok::<_, ()>((compiled.to_string(), 8))).unwrap();
    let text = p.clone();
    drop(p);
    (text, cache.stats())
}

fn keys(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (secret, public) = (dir.join("fleet.secret"), dir.join("fleet.pub"));
    Trust::generate("fleet-2026", &secret, &public).unwrap();
    (secret, public)
}

/// A Redis writer without keys plants a program; a cache that trusts the
/// fleet's key refuses it (never decoded) and compiles its own; a writer
/// with the signing key replaces it with a signed one, which the next
/// reader loads.
#[test]
fn a_forged_redis_entry_is_rejected_when_keys_are_set() {
    if !Trust::available() {
        eprintln!("libccache built without libsodium: skipped");
        return;
    }
    let redis = match start_redis() {
        Some(r) => r,
        None => return,
    };
    let servers = redis.servers();
    let tier = match redis_tier(&servers) {
        Some(t) => t,
        None => return,
    };
    let dir = scratch_dir("fleet-keys");
    let (secret, public) = keys(&dir);

    let evil = "EVIL program planted by a Redis writer";
    let (p, s) = get(fleet_config(tier).accept_unsigned_entries(), evil);
    assert_eq!((p.as_str(), s.tier_writes), (evil, 1));

    let mut reader = Trust::new().unwrap();
    reader.trusted_key_file(&public).unwrap();
    let (p, s) = get(Config { trust: Some(reader), ..fleet_config(redis_tier(&servers).unwrap()) }, "good");
    assert_eq!(p, "good", "the planted program was run");
    assert_eq!(
        (s.tier_rejected, s.tier_hits, s.program_compiles, s.tier_unpublished, s.tier_writes),
        (1, 0, 1, 1, 0)
    );

    let mut writer = Trust::new().unwrap();
    writer.signing_key_file(&secret).unwrap();
    let (p, s) = get(Config { trust: Some(writer), ..fleet_config(redis_tier(&servers).unwrap()) }, "good");
    assert_eq!(p, "good");
    assert_eq!((s.tier_rejected, s.tier_hits, s.program_compiles, s.tier_writes), (2, 0, 1, 1));

    let mut reader = Trust::new().unwrap();
    reader.trusted_key_file(&public).unwrap();
    let (p, s) = get(Config { trust: Some(reader), ..fleet_config(redis_tier(&servers).unwrap()) }, "never compiled");
    assert_eq!(p, "good");
    assert_eq!((s.tier_rejected, s.tier_hits, s.program_compiles), (0, 1, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A secret key file others can read is refused, naming the file.
#[test]
fn a_shared_secret_key_file_is_refused_with_its_path() {
    if !Trust::available() {
        assert_eq!(Trust::new().and_then(|mut t| t.trusted_key("x:AAAA").map(|_| ())).unwrap_err().code(), Status::ENOTSUP);
        return;
    }
    let dir = scratch_dir("fleet-perm");
    let (secret, _) = keys(&dir);
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Trust::new().unwrap().signing_key_file(&secret).map(|_| ()).unwrap_err();
    assert_eq!(e.code(), Status::EPERM);
    assert!(e.to_string().contains(secret.to_str().unwrap()), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Strong keys compare all 256 bits: two keys with the same table half and
/// different check halves are two entries.
#[test]
fn strong_keys_that_share_a_table_half_are_two_entries() {
    let cache: StrongCache<u32, u32> = Cache::open(Config::default()).unwrap();
    let a = StrongKey::from_bytes([1; 32]);
    let mut b = a;
    b.check.hi ^= 1;
    assert_eq!(a.key, b.key);
    for (k, v) in [(a, 10u32), (b, 20), (a, 99)] {
        let lease = cache
            .get_or_compile(k, |c| {
                let p = c.program_intern(k, v, 1)?;
                Ok::<_, Status>((v, p))
            })
            .unwrap();
        assert_eq!(*lease.closure(), if k == a { 10 } else { 20 });
    }
    let s = cache.stats();
    assert_eq!((s.compiles, s.hits, s.items), (2, 1, 2));
    assert!(cache.fetch(b).unwrap().is_some());
    assert!(cache.remove(b).unwrap());
    assert!(cache.fetch(b).unwrap().is_none());
    if Trust::available() {
        let k1 = StrongFingerprint::new().str("matmul").shape(1, &[4, 4]).finish().unwrap();
        let k2 = StrongFingerprint::new().str("matmul").shape(1, &[4, 4]).finish().unwrap();
        assert_eq!(k1, k2);
        assert_eq!(StrongKey::from_bytes(k1.to_bytes()), k1);
    }
}

/// The hook sees the compile and the eviction; a panicking hook's panic
/// comes out of the call that raised the event, and the cache goes on.
#[test]
fn the_event_hook_sees_compiles_and_evictions_and_its_panic_is_resumed() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let panic_on_compile = Arc::new(AtomicUsize::new(0));
    let (s2, p2) = (seen.clone(), panic_on_compile.clone());
    let cache: Cache<u32, u32> = Cache::open(Config {
        on_event: Some(Arc::new(move |e: &ccache::Event<'_>| {
            s2.lock().unwrap().push((e.kind, e.program_level, e.key, e.cause));
            if e.kind == EventKind::CompileEnd && p2.load(Ordering::SeqCst) == 1 {
                panic!("hook panic");
            }
        })),
        ..Config::default()
    })
    .unwrap();
    let k = Key::from(5u128);
    fn compile(c: &Cache<u32, u32>) -> Result<(u32, ccache::Program<'_, u32, u32>), Status> {
        let p = c.program_intern(Key::from(6u128), 1, 1)?;
        Ok((1, p))
    }
    drop(cache.get_or_compile(k, compile).unwrap());
    assert!(cache.remove(k).unwrap());
    let kinds: Vec<_> = seen.lock().unwrap().iter().map(|e| (e.0, e.1, e.3)).collect();
    assert_eq!(
        kinds,
        vec![(EventKind::CompileStart, false, None), (EventKind::CompileEnd, false, None), (EventKind::Evict, false, Some(Cause::Removed))]
    );
    assert!(seen.lock().unwrap().iter().all(|e| e.2 == k));

    panic_on_compile.store(1, Ordering::SeqCst);
    let r = catch_unwind(AssertUnwindSafe(|| cache.get_or_compile(k, compile).map(|_| ())));
    assert_eq!(*r.unwrap_err().downcast::<&str>().unwrap(), "hook panic");
    panic_on_compile.store(0, Ordering::SeqCst);
    // The entry was made (the hook ran after the compile) and its lease released.
    let s = cache.stats();
    assert_eq!((s.compiles, s.items, s.leases_out), (2, 1, 0));
    assert_eq!(*cache.get_or_compile(k, compile).unwrap().closure(), 1);
}

/// One part for the directory tier, up, at its directory; a Redis server
/// that is not there is down after a program miss asked it.
#[test]
fn tier_health_reports_each_part() {
    let dir = scratch_dir("fleet-health");
    let tier = Tier::disk(&DiskOptions::new(dir.join("tier"))).unwrap();
    let cache: Cache<(), String> = Cache::open_with_codec(fleet_config(tier), Text).unwrap();
    let h = cache.health().unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!((h[0].kind.as_str(), h[0].status, h[0].parts, h[0].errors), ("disk", TierStatus::Up, 1, 0));
    assert!(h[0].location.contains("fleet-health"), "{:?}", h[0].location);
    assert_eq!(cache.tier_health(1, 0).unwrap(), None);
    drop(cache);

    let gone = dir.join("no-redis.sock");
    if let Some(tier) = redis_tier(&format!("unix:{}", gone.display())) {
        let cache: Cache<(), String> = Cache::open_with_codec(fleet_config(tier).accept_unsigned_entries(), Text).unwrap();
        drop(cache.program_get_or_compile(Key::from(1u128), |_| Ok::<_, ()>(("p".to_string(), 1))).unwrap());
        let h = cache.health().unwrap();
        assert_eq!((h.len(), h[0].kind.as_str(), h[0].status), (1, "redis", TierStatus::Down));
        assert!(h[0].errors >= 1 && !h[0].last_error.is_empty(), "{:?}", h[0]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

struct Counted(Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn leaked_lease_cache(drops: &Arc<AtomicUsize>) -> Cache<Counted, Counted> {
    let cache: Cache<Counted, Counted> = Cache::open(Config::default()).unwrap();
    let lease = cache
        .get_or_compile(Key::from(1u128), |c| {
            let p = c.program_intern(Key::from(2u128), Counted(drops.clone()), 1)?;
            Ok::<_, Status>((Counted(drops.clone()), p))
        })
        .unwrap();
    std::mem::forget(lease);
    cache
}

/// A lease leaked with mem::forget keeps `close` busy (the cache is leaked,
/// nothing dropped); `close_abandon` closes anyway and drops both.
#[test]
fn close_abandon_closes_past_a_leaked_lease() {
    let drops = Arc::new(AtomicUsize::new(0));
    let cache = leaked_lease_cache(&drops);
    assert_eq!(cache.close().unwrap_err().code(), Status::EBUSY);
    assert_eq!(drops.load(Ordering::SeqCst), 0);

    let drops = Arc::new(AtomicUsize::new(0));
    let cache = leaked_lease_cache(&drops);
    assert_eq!(cache.stats().leases_out, 1);
    cache.close_abandon().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 2, "the closure and the program were dropped");
}

/// A shared tier without keys and without the opt-out is refused at open,
/// and the error carries the library's detail (what to do), not only
/// "invalid argument".  The tier is never contacted, so no server is needed.
#[test]
fn a_shared_tier_without_keys_is_refused_with_the_reason() {
    let tier = match redis_tier("127.0.0.1:1") {
        Some(t) => t,
        None => return,
    };
    let e = match Cache::<(), String>::open_with_codec(fleet_config(tier), Text) {
        Ok(_) => panic!("a Redis tier without keys opened"),
        Err(e) => e,
    };
    assert_eq!(e.code(), Status::EINVAL);
    let detail = e.detail().expect("the refusal says why");
    assert!(detail.contains("trusted keys") && detail.contains("CCACHE_TRUST_UNSIGNED"), "{detail}");
    assert!(e.to_string().contains(detail), "{e}");
}
