//! The closure and program tables through the safe API: single-flight,
//! leases across threads, the sweeper, panics and errors.

use ccache::{Cache, CompileError, Config, Key, Limits, Status};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

/// Records its drop: how many, and on which thread.
struct Tracked {
    value: u64,
    drops: Arc<Mutex<Vec<ThreadId>>>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops.lock().unwrap().push(thread::current().id());
    }
}

fn tracked(value: u64, drops: &Arc<Mutex<Vec<ThreadId>>>) -> Tracked {
    Tracked { value, drops: drops.clone() }
}

fn drops() -> Arc<Mutex<Vec<ThreadId>>> {
    Arc::new(Mutex::new(Vec::new()))
}

/// Polls `cond` every millisecond for at most 10 s (a bound, not the assertion).
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out after 10 s waiting for {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn key_from_u128_round_trips() {
    let v: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
    let k = Key::from(v);
    assert_eq!(k.lo, 0xfedc_ba98_7654_3210);
    assert_eq!(k.hi, 0x0123_4567_89ab_cdef);
    assert_eq!(u128::from(k), v);
}

#[test]
fn put_fetch_remove_and_stats() {
    let d = drops();
    let cache: Cache<Tracked, Tracked> = Cache::open(Config::default()).unwrap();
    let p = cache.program_intern(Key::from(100u128), tracked(7, &d), 10).unwrap();
    assert_eq!(p.value, 7);
    cache.put(Key::from(1u128), tracked(1, &d), &p).unwrap();
    cache.put(Key::from(2u128), tracked(2, &d), &p).unwrap();
    drop(p);
    {
        let lease = cache.fetch(Key::from(2u128)).unwrap().expect("hit");
        assert_eq!(lease.closure().value, 2);
        assert_eq!(lease.program().value, 7);
        assert_eq!(cache.stats().leases_out, 1);
    }
    assert!(cache.fetch(Key::from(3u128)).unwrap().is_none());
    assert!(cache.remove(Key::from(1u128)).unwrap());
    assert!(!cache.remove(Key::from(1u128)).unwrap());
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.inserts, s.removed, s.items), (1, 1, 2, 1, 1));
    assert_eq!((s.leases_out, s.closures_destroyed, s.programs_destroyed), (0, 1, 0));
    assert_eq!(s.cost_bytes, 10);
    assert_eq!(d.lock().unwrap().len(), 1);
    drop(cache);
    // close drops the other closure and the program: three drops in all.
    assert_eq!(d.lock().unwrap().len(), 3);
}

#[test]
fn max_items_evicts_oldest_first() {
    let d = drops();
    let cfg = Config { max_items: Some(3), ..Config::default() };
    let cache: Cache<Tracked, u32> = Cache::open(cfg).unwrap();
    let p = cache.program_intern(Key::from(9u128), 0, 0).unwrap();
    for i in 0..5u64 {
        cache.put(Key::from(i as u128), tracked(i, &d), &p).unwrap();
    }
    drop(p);
    let s = cache.stats();
    assert_eq!((s.items, s.evicted_capacity, s.closures_destroyed), (3, 2, 2));
    assert!(cache.fetch(Key::from(0u128)).unwrap().is_none());
    assert!(cache.fetch(Key::from(1u128)).unwrap().is_none());
    assert_eq!(cache.fetch(Key::from(2u128)).unwrap().unwrap().closure().value, 2);
}

#[test]
fn limits_round_trip_and_zero_is_einval() {
    let cache: Cache<u32, u32> = Cache::open(Config::default()).unwrap();
    assert_eq!(cache.limits().unwrap(), Limits::default());
    let l = Limits { max_items: Some(5), ttl: Some(Duration::from_micros(1500)), max_cost_bytes: Some(1 << 20) };
    cache.set_limits(l).unwrap();
    // TTLs are whole milliseconds, rounded up.
    assert_eq!(cache.limits().unwrap(), Limits { ttl: Some(Duration::from_millis(2)), ..l });
    let e = cache.set_limits(Limits { max_items: Some(0), ..Limits::default() }).unwrap_err();
    assert_eq!(e.code(), Status::EINVAL);
    assert_eq!(e.to_string(), "invalid argument");
    assert_eq!(cache.limits().unwrap().max_items, Some(5), "nothing changed");
    assert!(Cache::<u32, u32>::open(Config { ttl: Some(Duration::ZERO), ..Config::default() }).is_err());
}

/// Zero-sized closures and programs still get one allocation each: the C
/// library tells objects apart by address.
#[test]
fn zero_sized_values_are_distinct_objects() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct Zst;
    impl Drop for Zst {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    let cache: Cache<Zst, Zst> = Cache::open(Config::default()).unwrap();
    let p1 = cache.program_intern(Key::from(1u128), Zst, 0).unwrap();
    let p2 = cache.program_intern(Key::from(2u128), Zst, 0).unwrap();
    // Interning under a present key drops the new value; replacing an entry
    // drops the old closure.  Neither happens for "the very same pointer".
    let p1_again = cache.program_intern(Key::from(1u128), Zst, 0).unwrap();
    assert_eq!(DROPS.load(Ordering::SeqCst), 1);
    cache.put(Key::from(10u128), Zst, &p1).unwrap();
    cache.put(Key::from(10u128), Zst, &p1).unwrap();
    assert_eq!(DROPS.load(Ordering::SeqCst), 2);
    for k in 11..14u128 {
        cache.put(Key::from(k), Zst, if k % 2 == 0 { &p1 } else { &p2 }).unwrap();
    }
    drop((p1, p2, p1_again));
    assert_eq!(cache.stats().programs, 2);
    drop(cache);
    // 3 programs (one a duplicate) and 5 closures (one replaced).
    assert_eq!(DROPS.load(Ordering::SeqCst), 8);
}

/// Eight threads miss one key at the same moment: one compile, seven waits.
#[test]
fn eight_threads_missing_one_key_compile_once() {
    const THREADS: usize = 8;
    let cache: Cache<u64, u64> = Cache::open(Config::default()).unwrap();
    let compiles = AtomicUsize::new(0);
    let barrier = Barrier::new(THREADS);
    let key = Key::from(0xabcu128);
    let values: Vec<(u64, u64, usize)> = thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let lease = cache
                        .get_or_compile(key, |c| {
                            compiles.fetch_add(1, Ordering::SeqCst);
                            // Hold the compile until the seven others are waiting
                            // for it, so that each of them could compile too.
                            wait_until("7 single-flight waiters", || c.stats().waits == THREADS as u64 - 1);
                            let p = c.program_intern(Key::from(1u128), 42, 0)?;
                            Ok::<_, Status>((7, p))
                        })
                        .unwrap();
                    (*lease.closure(), *lease.program(), lease.closure() as *const u64 as usize)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(compiles.load(Ordering::SeqCst), 1);
    let first = values[0];
    assert!(values.iter().all(|v| *v == first), "every thread got the same closure: {values:?}");
    assert_eq!((first.0, first.1), (7, 42));
    let s = cache.stats();
    // The 7 waiters count a miss each and a wait (ccache_stats: hits are
    // lookups that found the entry in the table).
    assert_eq!((s.compiles, s.waits, s.misses, s.hits, s.inserts), (1, 7, 8, 0, 1));
    assert_eq!(s.leases_out, 0);
}

#[test]
fn lease_dropped_on_another_thread() {
    let d = drops();
    let cache: Cache<Tracked, Tracked> = Cache::open(Config::default()).unwrap();
    let lease = cache
        .get_or_compile(Key::from(5u128), |c| {
            let p = c.program_intern(Key::from(6u128), tracked(60, &d), 0)?;
            Ok::<_, Status>((tracked(50, &d), p))
        })
        .unwrap();
    // The entry leaves the table; the lease still pins closure and program.
    assert!(cache.remove(Key::from(5u128)).unwrap());
    assert_eq!(lease.closure().value, 50);
    assert!(d.lock().unwrap().is_empty());
    let releaser = thread::scope(|s| {
        s.spawn(move || {
            assert_eq!(lease.program().value, 60);
            drop(lease);
            thread::current().id()
        })
        .join()
        .unwrap()
    });
    assert_ne!(releaser, thread::current().id());
    // The last reference went on the other thread: both drops ran there.
    assert_eq!(*d.lock().unwrap(), vec![releaser, releaser]);
    let s = cache.stats();
    assert_eq!((s.leases_out, s.closures_destroyed, s.programs_destroyed, s.items), (0, 1, 1, 0));
}

#[test]
fn ttl_expiry_on_the_sweeper_thread() {
    let d = drops();
    let cfg = Config { ttl: Some(Duration::from_millis(20)), ..Config::default() };
    let cache: Cache<Tracked, u32> = Cache::open(cfg).unwrap();
    let p = cache.program_intern(Key::from(1u128), 0, 0).unwrap();
    cache.put(Key::from(2u128), tracked(2, &d), &p).unwrap();
    drop(p);
    // No call of ours removes it: only the sweeper.  The destroy counts are
    // booked after the drops return, and the program's after the closure's,
    // so wait for the last of them.
    wait_until("the sweeper to expire the entry", || cache.stats().programs_destroyed == 1);
    let who = d.lock().unwrap().clone();
    assert_eq!(who.len(), 1);
    assert_ne!(who[0], thread::current().id(), "the drop ran on the sweeper thread");
    let s = cache.stats();
    assert_eq!((s.evicted_ttl, s.items, s.closures_destroyed, s.programs_destroyed), (1, 0, 1, 1));
    // (sweeper_wakeups is not checked: on a loaded machine the wake-up for the
    // insert may come after the deadline, and sweep without a timed wait.)
}

#[test]
fn injected_clock_decides_expiry() {
    let now = Arc::new(AtomicUsize::new(1000));
    let clock = now.clone();
    let cfg = Config {
        ttl: Some(Duration::from_millis(100)),
        sweeper_thread: false,
        clock: Some(Arc::new(move || clock.load(Ordering::SeqCst) as u64)),
        ..Config::default()
    };
    let cache: Cache<u32, u32> = Cache::open(cfg).unwrap();
    let p = cache.program_intern(Key::from(1u128), 0, 0).unwrap();
    cache.put(Key::from(2u128), 2, &p).unwrap();
    drop(p);
    now.store(1099, Ordering::SeqCst);
    assert!(cache.fetch(Key::from(2u128)).unwrap().is_some());
    now.store(1100, Ordering::SeqCst);
    assert!(cache.fetch(Key::from(2u128)).unwrap().is_none());
    assert_eq!(cache.stats().evicted_ttl, 1);
}

#[test]
fn panicking_compile_is_resumed_and_the_cache_stays_usable() {
    let cache: Cache<u32, u32> = Cache::open(Config::default()).unwrap();
    let key = Key::from(77u128);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _ = cache.get_or_compile(key, |_| -> Result<(u32, ccache::Program<'_, u32, u32>), Status> {
            panic!("compile blew up")
        });
    }));
    let payload = r.expect_err("the panic reaches the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"compile blew up"));
    let s = cache.stats();
    assert_eq!((s.compiles, s.compile_failures, s.items, s.leases_out), (1, 1, 0, 0));

    // A panic in a nested program compile unwinds through both boundaries.
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _ = cache.get_or_compile(key, |c| {
            let p = c.program_get_or_compile(Key::from(1u128), |_| -> Result<(u32, u64), ()> { panic!("nested") });
            let p = p.map_err(|_| Status::from_code(Status::ECOMPILE))?;
            Ok::<_, Status>((1, p))
        });
    }));
    assert_eq!(r.unwrap_err().downcast_ref::<&str>(), Some(&"nested"));
    let s = cache.stats();
    assert_eq!((s.compile_failures, s.program_compile_failures), (2, 1));

    // The same key compiles and hits afterwards.
    let lease = cache
        .get_or_compile(key, |c| {
            let p = c.program_get_or_compile(Key::from(1u128), |_| Ok::<_, ()>((5, 0))).unwrap();
            Ok::<_, Status>((4, p))
        })
        .unwrap();
    assert_eq!((*lease.closure(), *lease.program()), (4, 5));
    drop(lease);
    assert!(cache.fetch(key).unwrap().is_some());
    let s = cache.stats();
    assert_eq!((s.compiles, s.program_compiles, s.items, s.leases_out), (3, 2, 1, 0));
}

#[test]
fn panicking_drop_is_resumed_by_the_call_that_ran_it() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("drop blew up");
        }
    }
    let cache: Cache<Bomb, u32> = Cache::open(Config::default()).unwrap();
    let p = cache.program_intern(Key::from(1u128), 0, 0).unwrap();
    cache.put(Key::from(2u128), Bomb, &p).unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| cache.remove(Key::from(2u128))));
    assert_eq!(r.unwrap_err().downcast_ref::<&str>(), Some(&"drop blew up"));
    let s = cache.stats();
    assert_eq!((s.removed, s.closures_destroyed, s.items), (1, 1, 0));
    drop(p);
    assert_eq!(cache.stats().programs_destroyed, 1, "still usable");
}

#[test]
fn the_compile_error_is_returned_as_such() {
    #[derive(Debug, PartialEq)]
    struct MyError(&'static str);
    let cache: Cache<u32, u32> = Cache::open(Config::default()).unwrap();
    let e = cache.get_or_compile(Key::from(1u128), |_| Err(MyError("unsupported op"))).unwrap_err();
    assert_eq!(e, CompileError::Compile(MyError("unsupported op")));
    let e = cache.program_get_or_compile(Key::from(2u128), |_| Err(MyError("no backend"))).unwrap_err();
    assert_eq!(e, CompileError::Compile(MyError("no backend")));
    let s = cache.stats();
    assert_eq!((s.compile_failures, s.program_compile_failures), (1, 1));
}

#[test]
fn a_compile_asking_for_its_own_key_is_edeadlk() {
    let cache: Cache<u32, u32> = Cache::open(Config::default()).unwrap();
    let key = Key::from(3u128);
    let e = cache
        .get_or_compile(key, |c| {
            let inner = c.get_or_compile(key, |_| Err::<(u32, ccache::Program<'_, u32, u32>), ()>(()));
            match inner {
                Err(CompileError::Cache(s)) => Err(s),
                _ => panic!("expected a cache error"),
            }
        })
        .unwrap_err();
    match e {
        CompileError::Compile(s) => assert_eq!(s.code(), Status::EDEADLK),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_program_of_another_cache_is_refused() {
    let a: Cache<u32, u32> = Cache::open(Config::default()).unwrap();
    // A compile can only return a handle borrowed for any lifetime: one of a
    // 'static cache (a handle of a shorter-lived one does not compile).
    let b: &'static Cache<u32, u32> = Box::leak(Box::new(Cache::open(Config::default()).unwrap()));
    let pb = b.program_intern(Key::from(1u128), 1, 0).unwrap();
    assert_eq!(a.put(Key::from(2u128), 2, &pb).unwrap_err().code(), Status::EINVAL);
    let e = a
        .get_or_compile(Key::from(3u128), |_| {
            let p = b.program_intern(Key::from(1u128), 1, 0).unwrap();
            Ok::<_, ()>((3, p))
        })
        .unwrap_err();
    assert_eq!(e, CompileError::Cache(Status::from_code(Status::EINVAL)));
    drop(pb);
    assert_eq!(b.stats().leases_out + a.stats().items, 0);
    assert_eq!(b.stats().programs, 0, "both handles of b were released");
}

#[test]
fn status_display_is_strerror() {
    assert_eq!(Status::from_code(Status::EBUSY).to_string(), ccache::strerror(Status::EBUSY));
    assert_eq!(ccache::strerror(Status::ENOMEM), "out of memory; the cache is unchanged");
    assert_eq!(ccache::version(), 200);
}

/// A compile that fails while three threads wait for it: the owner gets its
/// own error, each waiter ECOMPILE, and nothing is cached.
#[test]
fn waiters_of_a_failed_compile_get_ecompile() {
    const THREADS: usize = 4;
    let cache: Cache<u64, u64> = Cache::open(Config::default()).unwrap();
    let barrier = Barrier::new(THREADS);
    let key = Key::from(0xfa11u128);
    let results: Vec<Result<u64, CompileError<&'static str>>> = thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    cache
                        .get_or_compile(key, |c| {
                            wait_until("3 single-flight waiters", || c.stats().waits == THREADS as u64 - 1);
                            Err("no kernel for this shape")
                        })
                        .map(|lease| *lease.closure())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let own = results.iter().filter(|r| matches!(r, Err(CompileError::Compile("no kernel for this shape")))).count();
    let waited = results
        .iter()
        .filter(|r| matches!(r, Err(CompileError::Cache(s)) if s.code() == Status::ECOMPILE))
        .count();
    assert_eq!((own, waited), (1, THREADS - 1), "{results:?}");
    let s = cache.stats();
    assert_eq!((s.compiles, s.compile_failures, s.waits, s.items), (1, 1, 3, 0));
}

/// On a hit the compile is not called but dropped: if that drop panics, the
/// panic reaches the caller and the lease is still released.
#[test]
fn a_panicking_drop_of_an_unused_compile_releases_the_lease() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("capture blew up");
        }
    }
    let cache: Cache<u32, u32> = Cache::open(Config::default()).unwrap();
    let key = Key::from(8u128);
    let p = cache.program_intern(Key::from(9u128), 9, 0).unwrap();
    cache.put(key, 8, &p).unwrap();
    drop(p);
    let bomb = Bomb;
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _lease = cache.get_or_compile(key, move |_| {
            let _keep = &bomb;
            Err::<(u32, ccache::Program<'_, u32, u32>), ()>(())
        });
    }));
    assert_eq!(r.unwrap_err().downcast_ref::<&str>(), Some(&"capture blew up"));
    let s = cache.stats();
    assert_eq!((s.hits, s.compiles, s.leases_out), (1, 0, 0));
}
