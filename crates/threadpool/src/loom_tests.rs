//! Loom models of the generation/arrive/park protocol (`RUSTFLAGS="--cfg loom"`).
//!
//! Each model runs the real pool code with loom's atomics, locks and threads: a caller
//! dispatching to one or two workers, through the spin and the park paths, then dropping the
//! pool. Loom explores the interleavings (bounded preemptions) and fails on a deadlock (a
//! lost wake-up), a data race on the job cell or on the shares' writes, or a missing share.

use crate::sync::UnsafeCell;
use crate::{SchedulePolicy, ThreadPoolBuilder};
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
        pool.broadcast(|worker_idx| seen.bump(worker_idx));
        assert_eq!(seen.counts(), [1, 1]);
        pool.broadcast(|worker_idx| seen.bump(worker_idx));
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
        pool.broadcast(|worker_idx| seen.bump(worker_idx));
        pool.broadcast(|worker_idx| seen.bump(worker_idx));
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
        pool.parallel_for_with_threads(2, 2, SchedulePolicy::Static, |rows| seen.bump(rows.start));
        assert_eq!(seen.counts(), [1, 1, 0]);
        pool.broadcast(|worker_idx| seen.bump(worker_idx));
        assert_eq!(seen.counts(), [2, 2, 1]);
    });
}
