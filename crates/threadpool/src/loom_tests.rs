//! Loom models of the generation/arrive/park protocol and of the policies' shared claims
//! (`RUSTFLAGS="--cfg loom"`).
//!
//! The pool models run the real pool code with loom's atomics, locks and threads: a caller
//! dispatching to one or two workers, through the spin and the park paths, then dropping the
//! pool. Loom explores the interleavings (bounded preemptions) and fails on a deadlock (a
//! lost wake-up), a data race on the job cell or on the shares' writes, or a missing share.
//!
//! The claim models run `Plan::run` of every policy whose claims go through shared atomics
//! on concurrent claimers and check that the ranges they claimed are disjoint and cover
//! every index exactly once: `matmul-kernel`'s unsafe output writes rely on it.

use crate::schedule::Plan;
use crate::sync::{Arc, AtomicU64, AtomicUsize, UnsafeCell, thread};
use crate::{SchedulePolicy, ThreadPoolBuilder, ThreadPoolError};
use crossbeam_utils::CachePadded;
use std::cell::RefCell;
use std::ops::Range;
use std::time::Duration;

/// One plain counter per worker, written by that worker's share without synchronization:
/// the caller may read it only because the barrier orders the write before the return.
struct PerWorker(Vec<UnsafeCell<usize>>);

// SAFETY: share `worker_idx` touches only cell `worker_idx` during a call, and the caller
// reads the cells only between calls; loom checks exactly this claim.
unsafe impl Sync for PerWorker {}

impl PerWorker {
    fn new(n: usize) -> Self {
        PerWorker((0..n).map(|_| UnsafeCell::new(0)).collect())
    }

    fn bump(&self, worker_idx: usize) {
        // SAFETY: see the `Sync` impl.
        self.0[worker_idx].with_mut(|count| unsafe { *count += 1 });
    }

    fn counts(&self) -> Vec<usize> {
        // SAFETY: see the `Sync` impl; no call is in flight.
        self.0
            .iter()
            .map(|c| c.with(|count| unsafe { *count }))
            .collect()
    }
}

/// Runs `model` under loom with a preemption bound small enough for CI.
fn check(preemption_bound: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemption_bound);
    builder.check(model);
}

/// Two back-to-back broadcasts on a caller and one worker, with spinning: each generation
/// is seen exactly once and the shares' writes are visible after each call.
#[test]
fn loom_two_threads_spin_then_park() {
    check(3, || {
        let pool = ThreadPoolBuilder::default()
            .n_threads(2)
            .spin_budget(Duration::from_micros(1))
            .build()
            .unwrap();
        let seen = PerWorker::new(2);
        pool.broadcast(|worker_idx| seen.bump(worker_idx)).unwrap();
        assert_eq!(seen.counts(), [1, 1]);
        pool.broadcast(|worker_idx| seen.bump(worker_idx)).unwrap();
        assert_eq!(seen.counts(), [2, 2]);
    });
}

/// With a zero spin budget every wait parks: the worker parks for the next generation and the
/// caller parks at the barrier, so both handshakes with `sleeping` are explored.
#[test]
fn loom_two_threads_park_only() {
    check(3, || {
        let pool = ThreadPoolBuilder::default()
            .n_threads(2)
            .spin_budget(Duration::ZERO)
            .build()
            .unwrap();
        let seen = PerWorker::new(2);
        pool.broadcast(|worker_idx| seen.bump(worker_idx)).unwrap();
        pool.broadcast(|worker_idx| seen.bump(worker_idx)).unwrap();
        assert_eq!(seen.counts(), [2, 2]);
    });
}

/// Three threads: a call on two of them leaves worker 2 surplus (it goes to sleep), the next
/// call uses all three and must wake it; then drop wakes and joins everyone.
#[test]
fn loom_three_threads_surplus_worker_wakes() {
    check(2, || {
        let pool = ThreadPoolBuilder::default()
            .n_threads(3)
            .spin_budget(Duration::ZERO)
            .build()
            .unwrap();
        let seen = PerWorker::new(3);
        pool.parallel_for_with_threads(2, 2, SchedulePolicy::Static, |rows| seen.bump(rows.start))
            .unwrap();
        assert_eq!(seen.counts(), [1, 1, 0]);
        pool.broadcast(|worker_idx| seen.bump(worker_idx)).unwrap();
        assert_eq!(seen.counts(), [2, 2, 1]);
    });
}

/// A worker that panics as it starts, before it ever waits: the caller, spinning or
/// parked at the barrier, must wake up and report the death instead of waiting forever;
/// the next call fails at once, and drop still joins everyone.
#[test]
fn loom_a_worker_dead_at_start_fails_the_dispatch() {
    silence_injected_panics();
    for spin_budget in [Duration::from_micros(1), Duration::ZERO] {
        check(3, move || {
            let pool = ThreadPoolBuilder::default()
                .n_threads(2)
                .spin_budget(spin_budget)
                .panic_at_start(1)
                .build()
                .unwrap();
            let seen = PerWorker::new(2);
            let result = pool.broadcast(|worker_idx| seen.bump(worker_idx));
            assert!(
                matches!(
                    result,
                    Err(ThreadPoolError::WorkerDied { worker_idx: 1, .. })
                ),
                "{result:?}"
            );
            assert_eq!(seen.counts(), [1, 0]);
            let again = pool.broadcast(|worker_idx| seen.bump(worker_idx));
            assert!(matches!(again, Err(ThreadPoolError::WorkerDied { .. })));
            assert_eq!(seen.counts(), [1, 0]);
        });
    }
}

/// Keeps the default panic hook from printing the injected panic once per explored
/// execution; every other panic is printed as usual.
fn silence_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let injected = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|message| message.starts_with("injected fault"));
            if !injected {
                default(info);
            }
        }));
    });
}

/// The shared claim state of one call: the cursor and the per-worker packed ranges.
struct Claims {
    cursor: AtomicUsize,
    ranges: Box<[CachePadded<AtomicU64>]>,
}

/// The ranges worker `worker_idx` claims under `plan`.
fn claims_of(plan: &Plan, worker_idx: usize, claims: &Claims) -> Vec<Range<usize>> {
    let claimed = RefCell::new(Vec::new());
    plan.run(worker_idx, &claims.cursor, &claims.ranges, &|rows| {
        claimed.borrow_mut().push(rows)
    });
    claimed.into_inner()
}

/// Under loom, runs `policy`'s plan for `n_items` on `n_threads` concurrent claimers (the
/// model's thread is worker 0) and asserts that the claimed ranges are non-empty, disjoint
/// and cover `0..n_items`: every index claimed exactly once.
fn check_claims(
    preemption_bound: usize,
    policy: SchedulePolicy,
    n_items: usize,
    n_threads: usize,
    speeds: &'static [f64],
) {
    check(preemption_bound, move || {
        let claims = Arc::new(Claims {
            cursor: AtomicUsize::new(0),
            ranges: (0..n_threads)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        });
        let plan = Plan::prepare(
            policy,
            n_items,
            n_threads,
            speeds,
            &claims.cursor,
            &claims.ranges,
        );
        let claimers: Vec<_> = (1..n_threads)
            .map(|worker_idx| {
                let claims = Arc::clone(&claims);
                thread::spawn(move || claims_of(&plan, worker_idx, &claims))
            })
            .collect();
        let mut claimed = claims_of(&plan, 0, &claims);
        for claimer in claimers {
            claimed.extend(claimer.join().unwrap());
        }
        claimed.sort_by_key(|rows| rows.start);
        let mut next = 0;
        for rows in &claimed {
            assert!(
                !rows.is_empty() && rows.start == next,
                "{policy}: {rows:?} claimed where {next} was next: {claimed:?}"
            );
            next = rows.end;
        }
        assert_eq!(next, n_items, "{policy}: {claimed:?}");
    });
}

/// `Fixed16`: a `fetch_add` cursor over 16-row chunks after each worker's first chunk.
#[test]
fn loom_fixed16_claims_every_index_once() {
    check_claims(3, SchedulePolicy::Fixed16, 80, 2, &[]);
}

/// `Proportional2` (and `Adaptive` without history): the same cursor with larger chunks
/// and a short last one.
#[test]
fn loom_proportional2_claims_every_index_once() {
    check_claims(3, SchedulePolicy::Proportional2, 100, 2, &[]);
    check_claims(3, SchedulePolicy::Adaptive, 100, 2, &[]);
}

/// `Guided`: decreasing chunks claimed by compare-and-swap on a row cursor.
#[test]
fn loom_guided_claims_every_index_once() {
    check_claims(3, SchedulePolicy::Guided, 100, 2, &[]);
    check_claims(2, SchedulePolicy::Guided, 70, 3, &[]);
}

/// `Adaptive` with history: packed static shares by speed, then a `fetch_add` row cursor
/// over the 16-row tail.
#[test]
fn loom_adaptive_claims_every_index_once() {
    check_claims(3, SchedulePolicy::Adaptive, 100, 2, &[1.0, 3.0]);
}

/// `WorkStealing`: owners take 16 rows from the front of their packed range while thieves
/// CAS away the upper half; with three threads two thieves race for one victim.
#[test]
fn loom_workstealing_claims_every_index_once() {
    check_claims(3, SchedulePolicy::WorkStealing, 128, 2, &[]);
    // Three threads explode the state space: one preemption keeps it to seconds.
    check_claims(1, SchedulePolicy::WorkStealing, 96, 3, &[]);
}
