//! Unit tests of the pool: coverage of every policy, panics, dead workers, drop, nesting,
//! concurrency, each under [`watchdog`], which turns a hung test into a failed one.

use super::*;
use proptest::prelude::*;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Runs `body` under the workspace's test watchdog ([`::watchdog::guard`]): a test that has
/// not finished in time (a lost wake-up or a barrier that never completes) fails with a
/// message instead of hanging the test run.
pub(crate) fn watchdog<T: Send + 'static>(body: impl FnOnce() -> T + Send + 'static) -> T {
    ::watchdog::guard("the test (the pool is probably hung)", body)
}

/// Thread counts of the coverage tests (8 oversubscribes a 2-core machine).
const THREAD_COUNTS: [usize; 4] = [1, 2, 3, 8];

/// One shared pool per thread count, so property cases do not respawn threads.
fn pool_with(n_threads: usize) -> &'static ThreadPool {
    static POOLS: OnceLock<Vec<ThreadPool>> = OnceLock::new();
    let pools = POOLS.get_or_init(|| THREAD_COUNTS.iter().map(|t| ThreadPool::new(*t)).collect());
    &pools[THREAD_COUNTS.iter().position(|t| *t == n_threads).unwrap()]
}

/// How often `parallel_for` handed out each index of `0..n_items`.
fn visit_counts(
    pool: &ThreadPool,
    n_threads: usize,
    n_items: usize,
    policy: SchedulePolicy,
) -> Vec<usize> {
    let counts: Vec<AtomicUsize> = (0..n_items).map(|_| AtomicUsize::new(0)).collect();
    pool.parallel_for_with_threads(n_threads, n_items, policy, |rows: Range<usize>| {
        for i in rows {
            counts[i].fetch_add(1, Ordering::Relaxed);
        }
    })
    .unwrap();
    counts.into_iter().map(AtomicUsize::into_inner).collect()
}

/// The ranges one `parallel_for` handed out, sorted by start.
fn handed_out(
    pool: &ThreadPool,
    n_threads: usize,
    n_items: usize,
    policy: SchedulePolicy,
) -> Vec<Range<usize>> {
    let ranges = Mutex::new(Vec::new());
    pool.parallel_for_with_threads(n_threads, n_items, policy, |rows: Range<usize>| {
        ranges.lock().unwrap().push(rows);
    })
    .unwrap();
    let mut ranges = ranges.into_inner().unwrap();
    ranges.sort_by_key(|r| r.start);
    ranges
}

/// Checks that sorted `ranges` are non-empty, disjoint and cover `0..n_items` exactly.
fn check_tiling(ranges: &[Range<usize>], n_items: usize) -> Result<(), String> {
    let mut next = 0;
    for r in ranges {
        if r.is_empty() || r.start != next {
            return Err(format!(
                "range {r:?} where {next} was expected (empty, overlapping or leaving a gap)"
            ));
        }
        next = r.end;
    }
    if next != n_items {
        return Err(format!("the ranges end at {next}, not {n_items}"));
    }
    Ok(())
}

fn assert_each_once(counts: &[usize], what: &str) {
    if let Some(i) = counts.iter().position(|c| *c != 1) {
        panic!("{what}: index {i} visited {} times", counts[i]);
    }
}

#[test]
fn policy_names_round_trip() {
    for p in SchedulePolicy::ALL {
        assert_eq!(p.name().parse::<SchedulePolicy>(), Ok(p));
        assert_eq!(p.id().to_string().parse::<SchedulePolicy>(), Ok(p));
        assert_eq!(p.to_string(), p.name());
        assert_eq!(SchedulePolicy::from_id(p.id()), Some(p));
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, format!("\"{}\"", p.name()));
        assert_eq!(serde_json::from_str::<SchedulePolicy>(&json).unwrap(), p);
    }
    assert_eq!(
        " Guided ".parse::<SchedulePolicy>(),
        Ok(SchedulePolicy::Guided)
    );
    assert_eq!(SchedulePolicy::from_id(7), None);
    let err = "fastest".parse::<SchedulePolicy>().unwrap_err();
    assert!(err.to_string().contains("\"fastest\""), "{err}");
}

#[test]
fn every_policy_visits_every_index_once_at_the_listed_sizes() {
    watchdog(|| {
        for n_threads in THREAD_COUNTS {
            let pool = pool_with(n_threads);
            for policy in SchedulePolicy::ALL {
                for n_items in [0, 1, 15, 16, 17, 4096, 4099] {
                    // Twice, so `adaptive` also runs with the history of the first call.
                    for round in 0..2 {
                        let counts = visit_counts(pool, n_threads, n_items, policy);
                        assert_each_once(
                            &counts,
                            &format!("{policy} T={n_threads} n={n_items} #{round}"),
                        );
                    }
                }
            }
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The soundness guarantee of `parallel_for` (which `matmul-kernel`'s unsafe writes
    /// rely on): for all 7 policies, any size and any thread count, the ranges of one
    /// dispatch are non-empty, disjoint and cover `0..n_items` exactly once.
    #[test]
    fn any_policy_threads_and_size_hand_out_disjoint_ranges_covering_every_index(
        policy_id in 0u8..7,
        pool_idx in 0usize..THREAD_COUNTS.len(),
        n_items in 0usize..5000,
        n_threads in 1usize..=8,
        rounds in 1usize..3,
    ) {
        let policy = SchedulePolicy::from_id(policy_id).unwrap();
        let pool = pool_with(THREAD_COUNTS[pool_idx]);
        // Every thread count of the pool, lowered calls included.
        let n_threads = n_threads.min(pool.n_threads());
        let verdict = watchdog(move || {
            // A second round gives `adaptive` the history of the first.
            (0..rounds).try_for_each(|_| {
                check_tiling(&handed_out(pool, n_threads, n_items, policy), n_items)
            })
        });
        prop_assert!(verdict.is_ok(), "{} T={} n={}: {:?}", policy, n_threads, n_items, verdict);
    }
}

#[test]
fn broadcast_runs_once_per_worker() {
    watchdog(|| {
        for n_threads in THREAD_COUNTS {
            let pool = pool_with(n_threads);
            let seen: Vec<AtomicUsize> = (0..n_threads).map(|_| AtomicUsize::new(0)).collect();
            pool.broadcast(|worker_idx| {
                seen[worker_idx].fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
            assert!(seen.iter().all(|n| n.load(Ordering::Relaxed) == 1));
        }
    });
}

#[test]
fn broadcast_runs_worker_zero_on_the_caller_and_the_rest_elsewhere() {
    watchdog(|| {
        let pool = ThreadPool::new(3);
        let caller = std::thread::current().id();
        let ids = Mutex::new(vec![None; 3]);
        pool.broadcast(|worker_idx| {
            ids.lock().unwrap()[worker_idx] = Some(std::thread::current().id());
        })
        .unwrap();
        let ids: Vec<_> = ids
            .into_inner()
            .unwrap()
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert_eq!(ids[0], caller);
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 3);
    });
}

#[test]
fn a_single_thread_pool_runs_everything_on_the_caller() {
    let pool = ThreadPool::new(1);
    let caller = std::thread::current().id();
    pool.parallel_for(100, SchedulePolicy::Fixed16, |_| {
        assert_eq!(std::thread::current().id(), caller);
    })
    .unwrap();
    pool.broadcast(|worker_idx| assert_eq!(worker_idx, 0))
        .unwrap();
}

#[test]
fn lowered_thread_counts_leave_surplus_workers_out() {
    watchdog(|| {
        let pool = ThreadPool::new(4);
        for n_threads in 1..=4 {
            let names = Mutex::new(HashSet::new());
            pool.parallel_for_with_threads(n_threads, 64 * 4, SchedulePolicy::Static, |_| {
                let name = std::thread::current().name().map(str::to_string);
                names.lock().unwrap().insert(name);
            })
            .unwrap();
            let names = names.into_inner().unwrap();
            assert_eq!(names.len(), n_threads, "T={n_threads}: {names:?}");
            for worker_idx in n_threads..4 {
                assert!(!names.contains(&Some(format!("threadpool-{worker_idx}"))));
            }
        }
        // Above the pool size the count is clamped, not an error.
        assert_each_once(
            &visit_counts(&pool, 99, 1000, SchedulePolicy::Guided),
            "clamped",
        );
    });
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    crate::protocol::panic_message(payload)
}

#[test]
fn a_panic_in_a_worker_reaches_the_caller_and_the_pool_survives() {
    watchdog(|| {
        let pool = ThreadPool::new(3);
        for panicking_worker in 0..3 {
            let finished = AtomicUsize::new(0);
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.broadcast(|worker_idx| {
                    if worker_idx == panicking_worker {
                        panic!("share {worker_idx} failed");
                    }
                    finished.fetch_add(1, Ordering::Relaxed);
                })
            }));
            let payload = result.expect_err("the panic must reach the caller");
            assert_eq!(
                panic_message(&*payload),
                format!("share {panicking_worker} failed")
            );
            // Every other share still ran to the barrier.
            assert_eq!(finished.load(Ordering::Relaxed), 2);
            // The pool keeps working, with every worker: a panic in the closure is not a
            // dead worker.
            for policy in SchedulePolicy::ALL {
                assert_each_once(&visit_counts(&pool, 3, 999, policy), "after a panic");
            }
        }
    });
}

#[test]
fn when_every_share_panics_one_panic_is_resumed() {
    watchdog(|| {
        let pool = ThreadPool::new(4);
        for _ in 0..10 {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.parallel_for(64, SchedulePolicy::Static, |rows| {
                    panic!("rows {}", rows.start)
                })
            }));
            let message = panic_message(&*result.unwrap_err());
            assert!(["rows 0", "rows 16", "rows 32", "rows 48"].contains(&message.as_str()));
        }
        assert_each_once(
            &visit_counts(&pool, 4, 64, SchedulePolicy::WorkStealing),
            "after",
        );
    });
}

/// A panic payload whose drop panics while it is armed.
struct Bomb {
    armed: bool,
}

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.armed {
            panic!("a payload's drop panicked");
        }
    }
}

#[test]
fn a_panic_payload_whose_drop_panics_neither_hangs_the_call_nor_breaks_the_pool() {
    watchdog(|| {
        let pool = ThreadPool::new(4);
        // Every share panics with a bomb: the first is resumed, each later one is dropped
        // where it was caught, on a worker or on the caller, and its drop panics there.
        for _ in 0..20 {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.broadcast(|_| std::panic::panic_any(Bomb { armed: true }))
            }));
            let mut payload = result.expect_err("one bomb is resumed");
            payload.downcast_mut::<Bomb>().expect("a bomb").armed = false;
        }
        // The calls from this thread still reach every worker, not only the caller.
        let caller = std::thread::current().id();
        let others = AtomicUsize::new(0);
        pool.broadcast(|_| {
            if std::thread::current().id() != caller {
                others.fetch_add(1, Ordering::Relaxed);
            }
        })
        .unwrap();
        assert_eq!(others.into_inner(), 3);
        // A call from another thread resumes no stale payload.
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_each_once(&visit_counts(&pool, 4, 64, SchedulePolicy::Static), "after")
            });
        });
    });
}

/// Asserts that `result` is the error for worker `worker_idx`'s injected death.
fn assert_worker_died(result: Result<(), ThreadPoolError>, worker_idx: usize) {
    match result {
        Err(ThreadPoolError::WorkerDied {
            worker_idx: dead,
            message,
        }) => {
            assert_eq!(dead, worker_idx);
            assert_eq!(
                message,
                format!("injected fault at the start of worker {worker_idx}")
            );
        }
        other => panic!("expected worker {worker_idx} to be reported dead, got {other:?}"),
    }
}

#[test]
fn a_call_that_does_not_use_a_dead_worker_runs_whole() {
    watchdog(|| {
        let pool = ThreadPoolBuilder::default()
            .n_threads(3)
            .spin_budget(Duration::ZERO)
            .panic_at_start(2)
            .build()
            .unwrap();
        // Worker 2 is dead (or dying); calls on workers 0 and 1 do not wait for it.
        for _ in 0..20 {
            let ran = AtomicUsize::new(0);
            pool.parallel_for_with_threads(2, 100, SchedulePolicy::Guided, |rows| {
                ran.fetch_add(rows.len(), Ordering::Relaxed);
            })
            .unwrap();
            assert_eq!(ran.into_inner(), 100);
        }
        // A call that needs it finds it dead.
        assert_worker_died(pool.run(100, |_| {}), 2);
    });
}

#[test]
fn a_worker_that_dies_at_start_fails_the_dispatch_and_every_later_one() {
    for spin_budget in [DEFAULT_SPIN_BUDGET, Duration::ZERO] {
        watchdog(move || {
            let pool = ThreadPoolBuilder::default()
                .n_threads(3)
                .spin_budget(spin_budget)
                .panic_at_start(2)
                .build()
                .unwrap();
            let counts: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
            let result = pool.parallel_for(3, SchedulePolicy::Static, |rows| {
                for i in rows {
                    counts[i].fetch_add(1, Ordering::Relaxed);
                }
            });
            let err = result.as_ref().unwrap_err().to_string();
            assert_eq!(
                err,
                "worker 2 died: injected fault at the start of worker 2"
            );
            assert_worker_died(result, 2);
            // The live workers ran their shares; the dead worker's row was never handed out.
            let counts: Vec<usize> = counts.into_iter().map(AtomicUsize::into_inner).collect();
            assert_eq!(counts, [1, 1, 0]);
            // Every later dispatch fails at once, even one the dead worker is not part of.
            let ran = AtomicUsize::new(0);
            let count = |_| {
                ran.fetch_add(1, Ordering::Relaxed);
            };
            assert_worker_died(pool.broadcast(count), 2);
            assert_worker_died(pool.run(100, |_| count(0)), 2);
            assert_worker_died(
                pool.parallel_for_with_threads(2, 100, SchedulePolicy::Guided, |_| count(0)),
                2,
            );
            assert_eq!(ran.load(Ordering::Relaxed), 0);
            // A call that needs no worker still runs inline.
            pool.parallel_for_with_threads(1, 10, SchedulePolicy::Static, |_| count(0))
                .unwrap();
            assert_eq!(ran.load(Ordering::Relaxed), 1);
            // Drop joins the live worker and the dead one.
            drop(pool);
        });
    }
}

#[test]
fn a_dead_worker_is_reported_by_broadcast_too() {
    watchdog(|| {
        let pool = ThreadPoolBuilder::default()
            .n_threads(2)
            .panic_at_start(1)
            .build()
            .unwrap();
        let ran = AtomicUsize::new(0);
        let result = pool.broadcast(|worker_idx| {
            ran.fetch_add(1, Ordering::Relaxed);
            assert_eq!(worker_idx, 0);
        });
        assert_worker_died(result, 1);
        assert_eq!(ran.load(Ordering::Relaxed), 1);
    });
}

#[test]
fn drop_joins_every_worker() {
    /// Counts worker threads that ran their thread-local destructors (at thread exit).
    static EXITED: AtomicUsize = AtomicUsize::new(0);
    struct CountOnExit;
    impl Drop for CountOnExit {
        fn drop(&mut self) {
            EXITED.fetch_add(1, Ordering::SeqCst);
        }
    }
    thread_local! {
        static GUARD: std::cell::RefCell<Option<CountOnExit>> = const { std::cell::RefCell::new(None) };
    }
    watchdog(|| {
        let pool = ThreadPool::new(4);
        let caller = std::thread::current().id();
        pool.broadcast(|_| {
            if std::thread::current().id() != caller {
                GUARD.with(|g| *g.borrow_mut() = Some(CountOnExit));
            }
        })
        .unwrap();
        assert_eq!(EXITED.load(Ordering::SeqCst), 0);
        drop(pool);
        // `join` returns only after each thread exited, destructors included.
        assert_eq!(EXITED.load(Ordering::SeqCst), 3);
    });
}

#[test]
fn drop_wakes_parked_and_surplus_workers() {
    watchdog(|| {
        // A zero spin budget parks every worker at once; a lowered call leaves some surplus.
        let pool = ThreadPoolBuilder::default()
            .n_threads(4)
            .spin_budget(Duration::ZERO)
            .build()
            .unwrap();
        pool.parallel_for_with_threads(2, 100, SchedulePolicy::Fixed16, |_| {})
            .unwrap();
        drop(pool);
    });
}

#[test]
fn nested_calls_run_inline() {
    watchdog(|| {
        let pool = ThreadPool::new(3);
        let counts: Vec<AtomicUsize> = (0..30 * 40).map(|_| AtomicUsize::new(0)).collect();
        pool.parallel_for(30, SchedulePolicy::Fixed16, |outer| {
            for i in outer {
                pool.parallel_for(40, SchedulePolicy::Guided, |inner| {
                    for j in inner {
                        counts[i * 40 + j].fetch_add(1, Ordering::Relaxed);
                    }
                })
                .unwrap();
            }
        })
        .unwrap();
        assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
        let calls = AtomicUsize::new(0);
        pool.broadcast(|_| {
            pool.broadcast(|_| {
                calls.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap()
        })
        .unwrap();
        assert_eq!(calls.load(Ordering::Relaxed), 9);
    });
}

#[test]
fn a_pool_nested_in_another_pools_task_still_runs_in_parallel() {
    watchdog(|| {
        let outer = ThreadPool::new(2);
        let inner = ThreadPool::new(2);
        let total = AtomicUsize::new(0);
        outer
            .broadcast(|_| {
                inner
                    .parallel_for(100, SchedulePolicy::Static, |rows| {
                        total.fetch_add(rows.len(), Ordering::Relaxed);
                    })
                    .unwrap();
                // Back into the outer pool from the inner pool's caller: inline, no deadlock.
                outer
                    .parallel_for(10, SchedulePolicy::Static, |rows| {
                        total.fetch_add(rows.len(), Ordering::Relaxed);
                    })
                    .unwrap();
            })
            .unwrap();
        assert_eq!(total.load(Ordering::Relaxed), 2 * 110);
    });
}

#[test]
fn concurrent_callers_are_serialized() {
    watchdog(|| {
        let pool = ThreadPool::new(3);
        // Events `(call, is_end)` in the order the shares logged them.
        let log = Mutex::new(Vec::new());
        let n_calls_per_thread = 200;
        std::thread::scope(|scope| {
            for caller in 0..3 {
                let (pool, log) = (&pool, &log);
                scope.spawn(move || {
                    for i in 0..n_calls_per_thread {
                        let call = caller * n_calls_per_thread + i;
                        pool.parallel_for(3 * 16, SchedulePolicy::Fixed16, |_| {
                            log.lock().unwrap().push((call, false));
                            std::hint::black_box(());
                            log.lock().unwrap().push((call, true));
                        })
                        .unwrap();
                    }
                });
            }
        });
        let log = log.into_inner().unwrap();
        assert_eq!(log.len(), 3 * n_calls_per_thread * 3 * 2);
        // Every call's events form one contiguous block: no call interleaves with another.
        let mut finished = HashSet::new();
        let mut current = None;
        for (call, _) in log {
            if current != Some(call) {
                assert!(
                    finished.insert(call),
                    "call {call} interleaved with another"
                );
                current = Some(call);
            }
        }
    });
}

#[test]
fn a_million_back_to_back_dispatches_complete() {
    watchdog(|| {
        let pool = ThreadPool::new(2);
        let shares = AtomicUsize::new(0);
        for _ in 0..1_000_000 {
            pool.broadcast(|_| {
                shares.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        assert_eq!(shares.load(Ordering::Relaxed), 2_000_000);
    });
}

#[test]
fn back_to_back_dispatches_through_the_park_path_complete() {
    watchdog(|| {
        // A zero spin budget makes every wait park, so each call exercises the wake-up path.
        let pool = ThreadPoolBuilder::default()
            .n_threads(3)
            .spin_budget(Duration::ZERO)
            .build()
            .unwrap();
        let shares = AtomicUsize::new(0);
        for i in 0..20_000 {
            pool.parallel_for_with_threads(2 + i % 2, 64, SchedulePolicy::Static, |_| {
                shares.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        assert_eq!(shares.load(Ordering::Relaxed), 20_000 / 2 * 5);
    });
}

#[test]
fn adaptive_learns_a_speed_for_every_worker() {
    watchdog(|| {
        let pool = ThreadPool::new(3);
        assert!(pool.adaptive_speeds().iter().all(|s| *s == 0.0));
        pool.parallel_for(4096, SchedulePolicy::Static, |rows| {
            std::hint::black_box(rows);
        })
        .unwrap();
        assert!(pool.adaptive_speeds().iter().all(|s| *s == 0.0));
        let work = |rows: Range<usize>| {
            std::hint::black_box(rows.map(|i| i * i).sum::<usize>());
        };
        pool.parallel_for(3 * 4096, SchedulePolicy::Adaptive, work)
            .unwrap();
        assert!(
            pool.adaptive_speeds().iter().all(|s| *s > 0.0),
            "{:?}",
            pool.adaptive_speeds()
        );
        // A lowered call updates only the workers it used.
        let before = pool.adaptive_speeds();
        pool.parallel_for_with_threads(2, 4096, SchedulePolicy::Adaptive, work)
            .unwrap();
        assert_eq!(pool.adaptive_speeds()[2], before[2]);
    });
}

#[test]
fn the_pool_carries_a_default_policy_that_run_uses() {
    watchdog(|| {
        assert_eq!(ThreadPool::new(2).policy(), SchedulePolicy::Static);
        assert_eq!(
            ThreadPoolBuilder::default().build().unwrap().policy(),
            SchedulePolicy::Static
        );
        for policy in SchedulePolicy::ALL {
            let pool = ThreadPoolBuilder::default()
                .n_threads(2)
                .policy(policy)
                .build()
                .unwrap();
            assert_eq!(pool.policy(), policy);
            assert!(format!("{pool:?}").contains(&format!("{policy:?}")));
            let ranges = Mutex::new(Vec::new());
            pool.run(64, |rows| ranges.lock().unwrap().push(rows))
                .unwrap();
            let mut ranges = ranges.into_inner().unwrap();
            ranges.sort_by_key(|r| r.start);
            check_tiling(&ranges, 64).unwrap();
            // `run` splits as `parallel_for` with the pool's policy does: `static` hands
            // out two halves, the chunked policies 16-row pieces.
            let expected = handed_out(&pool, 2, 64, policy);
            match policy {
                SchedulePolicy::Static => assert_eq!(ranges, [0..32, 32..64]),
                SchedulePolicy::Fixed16 | SchedulePolicy::Interleaved => {
                    assert_eq!(ranges, [0..16, 16..32, 32..48, 48..64]);
                    assert_eq!(ranges, expected);
                }
                _ => assert!(ranges.iter().all(|r| r.len() <= 32), "{policy}: {ranges:?}"),
            }
        }
        // `run` with no items calls nothing, like `parallel_for`.
        ThreadPool::new(2)
            .run(0, |_| panic!("no range expected"))
            .unwrap();
    });
}

#[test]
fn builder_rejects_bad_input_and_reports_pinning_failures() {
    let err = ThreadPoolBuilder::default()
        .n_threads(MAX_THREADS + 1)
        .build()
        .unwrap_err();
    assert!(matches!(err, ThreadPoolError::TooManyThreads(n) if n == MAX_THREADS + 1));
    assert!(err.to_string().contains(&(MAX_THREADS + 1).to_string()));
    let err = ThreadPoolBuilder::default()
        .pinning(Pinning::Cpus(Vec::new()))
        .build()
        .unwrap_err();
    assert!(matches!(err, ThreadPoolError::EmptyCpuList));

    watchdog(|| {
        // CPUs that do not exist: every spawned worker reports it and runs unpinned.
        for bogus in [1000, 1 << 20] {
            let pool = ThreadPoolBuilder::default()
                .n_threads(3)
                .pinning(Pinning::Cpus(vec![bogus]))
                .build()
                .unwrap();
            let failures = pool.pinning_failures();
            assert_eq!(
                failures,
                &[1, 2].map(|worker_idx| PinningFailure {
                    worker_idx,
                    cpu: Some(bogus)
                })
            );
            assert!(failures[0].to_string().contains(&bogus.to_string()));
            assert_each_once(
                &visit_counts(&pool, 3, 500, SchedulePolicy::Guided),
                "unpinned",
            );
        }

        let pool = ThreadPoolBuilder::default()
            .n_threads(2)
            .pinning(Pinning::Sequential)
            .build()
            .unwrap();
        assert!(pool.pinning_failures().iter().all(|f| f.worker_idx == 1));
        assert_each_once(
            &visit_counts(&pool, 2, 500, SchedulePolicy::Static),
            "sequential",
        );
    });
}

#[test]
fn builder_defaults() {
    let pool = ThreadPoolBuilder::default().build().unwrap();
    let effective_cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(pool.n_threads(), effective_cpus);
    assert_eq!(pool.spin_budget(), DEFAULT_SPIN_BUDGET);
    assert_eq!(pool.policy(), SchedulePolicy::Static);
    assert!(pool.pinning_failures().is_empty());
    assert_eq!(ThreadPool::new(0).n_threads(), 1);
}

#[test]
fn the_pool_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ThreadPool>();
}

#[test]
fn a_pool_moves_to_another_thread_and_is_dropped_there() {
    watchdog(|| {
        let pool = ThreadPoolBuilder::default().n_threads(3).build().unwrap();
        let total = std::thread::spawn(move || {
            let total = AtomicUsize::new(0);
            pool.parallel_for(1000, SchedulePolicy::WorkStealing, |rows| {
                total.fetch_add(rows.len(), Ordering::Relaxed);
            })
            .unwrap();
            drop(pool);
            total.into_inner()
        })
        .join()
        .unwrap();
        assert_eq!(total, 1000);
    });
}

#[test]
fn one_pool_serves_many_outside_threads() {
    watchdog(|| {
        let pool = std::sync::Arc::new(ThreadPool::new(2));
        let handles: Vec<_> = (0..4)
            .map(|caller| {
                let pool = std::sync::Arc::clone(&pool);
                std::thread::spawn(move || {
                    let policy = SchedulePolicy::ALL[caller % 7];
                    for n_items in 0..200 {
                        let total = AtomicUsize::new(0);
                        pool.parallel_for(n_items, policy, |rows| {
                            total.fetch_add(rows.len(), Ordering::Relaxed);
                        })
                        .unwrap();
                        assert_eq!(total.into_inner(), n_items, "{policy}");
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
    });
}
