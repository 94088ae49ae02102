//! How a waiting thread waits: spin, then yield, then park, and when to stop spinning early.
//!
//! None of this affects correctness: every wait ends in `Shared::park_until`, which cannot
//! miss its wake-up (PROTOCOL.md); these heuristics only decide when a thread parks.

use crate::protocol::{CONTENDED, Death, Shared, n_active};
#[cfg(not(loom))]
use crate::sync::thread;
use crate::sync::{Ordering, spin_loop};
use std::time::Duration;
#[cfg(not(loom))]
use std::time::Instant;

/// How long the caller waits at the barrier before it checks that every worker picked the
/// generation up (see `Shared::wait_arrivals`); a running worker does so at once, so one
/// that has not is waiting for a CPU.
#[cfg(not(loom))]
const PICKUP_GRACE: Duration = Duration::from_micros(5);

/// As [`PICKUP_GRACE`] when the caller had to wake a parked worker: about two wake-ups
/// (docs/threadpool.md has the measured figures).
#[cfg(not(loom))]
const WOKEN_PICKUP_GRACE: Duration = Duration::from_micros(50);

/// How long a waiting thread polls with `spin_loop` only; for the rest of the spin budget it
/// calls `yield_now` between polls, so that when other processes load the machine a thread
/// of the pool that shares this CPU still gets to run (a syscall that returns at once on an
/// idle machine).
pub(crate) const PURE_SPIN: Duration = Duration::from_micros(10);

/// Polls between two clock reads while spinning on an undersubscribed machine.
#[cfg(not(loom))]
const SPINS_PER_CLOCK_READ: u32 = 64;
/// `yield_now` rounds between the spin phase and parking.
#[cfg(not(loom))]
const YIELD_ROUNDS: u32 = 8;

/// What the caller learned at a barrier.
#[derive(Debug, Default)]
pub(crate) struct Arrivals {
    /// A worker had not picked the generation up after the grace period: it waits for a
    /// CPU, the machine is contended.
    pub(crate) stalled: bool,
    /// The first worker death the caller saw while it waited, if any.
    pub(crate) death: Option<Death>,
}

impl Shared {
    /// How long a thread waiting around the generation published as `word` spins before it
    /// yields: not at all when the generation is contended or has more active threads than
    /// the pool has CPUs (`effective_cpus`).
    pub(crate) fn pure_spin(&self, word: u64) -> Duration {
        if word & CONTENDED != 0 || n_active(word) > self.effective_cpus || cfg!(loom) {
            Duration::ZERO
        } else {
            PURE_SPIN
        }
    }

    /// Polls `ready` for the spin budget, with `spin_loop` for the first `pure_spin` and
    /// with `yield_now` after that; `None` if it never fired.
    ///
    /// `stalled(elapsed)` is asked at each clock read; `true` gives up at once (no yields).
    #[cfg(not(loom))]
    fn spin_until<T>(
        &self,
        mut ready: impl FnMut() -> Option<T>,
        mut stalled: impl FnMut(Duration) -> bool,
        pure_spin: Duration,
    ) -> Option<T> {
        if self.spin_budget.is_zero() {
            return None;
        }
        let mut start = None;
        let mut spins: u32 = 0;
        // An oversubscribed or contended generation (`pure_spin` zero) yields from the
        // start: another thread of the pool may be waiting for this CPU.
        let mut yielding = pure_spin.is_zero();
        loop {
            if let Some(value) = ready() {
                return Some(value);
            }
            if yielding {
                thread::yield_now();
            } else {
                spin_loop();
            }
            spins = spins.wrapping_add(1);
            if yielding || spins.is_multiple_of(SPINS_PER_CLOCK_READ) {
                // The clock starts at the first read, which keeps it off the fast path.
                let start = *start.get_or_insert_with(Instant::now);
                let elapsed = start.elapsed();
                if stalled(elapsed) {
                    // Park at once: a caller that yields keeps sharing its CPU with the
                    // stalled worker (both stay cache-hot, so the scheduler does not move
                    // either), while a parked one is woken onto an idle CPU if there is one.
                    return None;
                }
                if elapsed >= self.spin_budget {
                    break;
                }
                yielding |= elapsed >= pure_spin;
            }
        }
        for _ in 0..YIELD_ROUNDS {
            if let Some(value) = ready() {
                return Some(value);
            }
            thread::yield_now();
        }
        None
    }

    /// The loom model has no clock: poll twice around one scheduling point.
    #[cfg(loom)]
    fn spin_until<T>(
        &self,
        mut ready: impl FnMut() -> Option<T>,
        _stalled: impl FnMut(Duration) -> bool,
        _pure_spin: Duration,
    ) -> Option<T> {
        if self.spin_budget.is_zero() {
            return None;
        }
        if let Some(value) = ready() {
            return Some(value);
        }
        spin_loop();
        ready()
    }

    /// Waits (spin, yield, park) until the state word differs from `seen`; returns it.
    /// Skips the spin phase when `spin` is false (surplus workers go straight to sleep).
    pub(crate) fn wait_for_state(&self, worker_idx: usize, seen: u64, spin: bool) -> u64 {
        let ready = || {
            let word = self.published.state.load(Ordering::Acquire);
            (word != seen).then_some(word)
        };
        // The next generation usually has as many threads as the last one.
        let pure_spin = self.pure_spin(seen);
        if spin && let Some(word) = self.spin_until(ready, |_| false, pure_spin) {
            return word;
        }
        self.park_until(worker_idx, ready)
    }

    /// The caller waits until the workers `1..=n_waited` arrived at the barrier of the
    /// generation published as `word`, or died.
    ///
    /// It spins for the budget while they run, but parks early when one of them has not
    /// even picked the generation up after [`PICKUP_GRACE`] ([`WOKEN_PICKUP_GRACE`] when
    /// the caller had to wake someone, `woke_any`): that worker waits for a CPU, and a
    /// spinning caller would keep its own CPU from taking it over (the machine is loaded
    /// by others). Deaths are only looked for in the park path: a dead worker never picks
    /// the generation up, so the caller always reaches that path.
    #[cfg_attr(loom, allow(unused_variables))]
    pub(crate) fn wait_arrivals(&self, n_waited: usize, word: u64, woke_any: bool) -> Arrivals {
        let ready = || (self.arrived.load(Ordering::Acquire) == n_waited).then_some(());
        let mut checked = false;
        #[cfg(not(loom))]
        let grace = if woke_any {
            WOKEN_PICKUP_GRACE
        } else {
            PICKUP_GRACE
        };
        #[cfg(loom)]
        let grace = Duration::ZERO;
        let pure_spin = self.pure_spin(word);
        let mut arrivals = Arrivals::default();
        let stalled = |elapsed: Duration| {
            if checked || elapsed < grace {
                return false;
            }
            checked = true;
            arrivals.stalled = self.picked[1..=n_waited]
                .iter()
                .any(|picked| picked.load(Ordering::Relaxed) != word);
            arrivals.stalled
        };
        if self.spin_until(ready, stalled, pure_spin).is_none() {
            let mut credited = 0;
            self.park_until(0, || {
                let complete = ready().is_some()
                    || self.credit_deaths(&mut credited, n_waited, word, &mut arrivals.death);
                complete.then_some(())
            });
        }
        arrivals
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::protocol::{CONTENDED, MAX_THREADS, state_word};
    use crate::sync::Ordering;
    use crate::tests::watchdog;
    use crate::wait::PURE_SPIN;
    use crate::{SchedulePolicy, ThreadPool, ThreadPoolBuilder};
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    /// Polls `condition` with yields until it holds (the watchdog of the test bounds it).
    fn eventually(condition: impl Fn() -> bool) {
        while !condition() {
            std::thread::yield_now();
        }
    }

    #[test]
    fn surplus_workers_park_at_once_while_active_ones_keep_spinning() {
        watchdog(|| {
            let pool = ThreadPoolBuilder::default()
                .n_threads(4)
                .spin_budget(Duration::from_secs(3600))
                .build()
                .unwrap();
            pool.parallel_for_with_threads(2, 64, SchedulePolicy::Static, |_| {})
                .unwrap();
            // Workers 2 and 3 saw a generation without them: they park instead of spinning
            // for the hour-long budget.
            for worker_idx in [2, 3] {
                let slot = &pool.shared.slots[worker_idx];
                eventually(|| slot.sleeping.load(Ordering::SeqCst));
            }
            // Worker 1 was active: it keeps polling for the next call.
            assert!(!pool.shared.slots[1].sleeping.load(Ordering::SeqCst));
            // The sleepers are woken by the next call that includes them.
            let seen: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
            pool.broadcast(|worker_idx| {
                seen[worker_idx].fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
            assert!(seen.iter().all(|n| n.load(Ordering::Relaxed) == 1));
        });
    }

    #[test]
    fn workers_park_after_the_spin_budget() {
        watchdog(|| {
            let pool = ThreadPoolBuilder::default()
                .n_threads(3)
                .spin_budget(Duration::from_micros(50))
                .build()
                .unwrap();
            pool.broadcast(|_| {}).unwrap();
            for worker_idx in 1..3 {
                let slot = &pool.shared.slots[worker_idx];
                eventually(|| slot.sleeping.load(Ordering::SeqCst));
            }
        });
    }

    #[test]
    fn pure_spin_stops_for_contended_and_oversubscribed_generations() {
        let word = state_word(5, MAX_THREADS, CONTENDED);
        let pool = ThreadPool::new(2);
        let effective_cpus = pool.shared.effective_cpus;
        assert_eq!(
            effective_cpus,
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
        assert_eq!(pool.shared.pure_spin(word), Duration::ZERO);
        assert_eq!(
            pool.shared
                .pure_spin(state_word(5, 2.min(effective_cpus), 0)),
            PURE_SPIN
        );
        assert_eq!(
            pool.shared
                .pure_spin(state_word(5, 2.min(effective_cpus), CONTENDED)),
            Duration::ZERO
        );
        assert_eq!(
            pool.shared.pure_spin(state_word(5, effective_cpus + 1, 0)),
            Duration::ZERO
        );
    }
}
