//! [`ThreadPool`]: the caller's side of a dispatch (publish, run share 0, wait at the
//! barrier), the public calls, the `Adaptive` speeds and shutdown.
//!
//! `PROTOCOL.md` beside this file states the protocol; `protocol.rs` holds its state.

use crate::barrier::Barrier;
use crate::error::{PinningFailure, ThreadPoolError};
use crate::protocol::{
    CONTENDED, CONTENDED_CALLS, Death, JobRef, SHUTDOWN, Shared, WorkerStats, run_catching,
    state_word,
};
use crate::schedule::Plan;
use crate::schedule::SchedulePolicy;
use crate::sync::{self, Arc, AtomicUsize, Mutex, MutexGuard, Ordering, thread};
use crate::worker::{is_worker_of, thread_tag};
use crossbeam_utils::CachePadded;
use std::any::Any;
use std::fmt;
use std::ops::Range;
use std::panic;
use std::time::Duration;

/// A persistent fork-join pool; the calling thread is worker 0.
///
/// `parallel_for`, `run` and `broadcast` publish one generation, run worker 0's share on the
/// calling thread and return when every active worker has finished (a barrier), so the
/// closures may borrow from the caller's stack. Calls from several threads are serialized;
/// a call from inside a task of the same pool runs inline on the calling thread.
///
/// # Deadlocks
/// "Inside a task" means on the thread that runs it. While a call is in flight, a call on the
/// same pool from any other thread waits for it to end, so a task must not wait for another
/// thread that calls this pool: a thread it starts and joins (`std::thread::scope`), or a
/// second pool whose task, on another of its workers, calls back into this one (a cycle A →
/// B → A). Either blocks for good.
///
/// # Errors and panics
/// A panic in the closure is caught on whichever thread ran it; every other share still
/// runs to the barrier, then the first panic is resumed on the caller and the pool stays
/// usable. A worker thread that dies outside the closure (a panic as it starts or while it
/// pins itself) cannot be replaced: the call that finds it missing returns
/// [`ThreadPoolError::WorkerDied`] once the live workers finished, and so does every later
/// call that would dispatch to the workers. Calls that run inline (one thread, or nested)
/// need no worker and still succeed.
pub struct ThreadPool {
    pub(crate) shared: Arc<Shared>,
    pub(crate) n_threads: usize,
    /// The policy of [`ThreadPool::run`].
    pub(crate) policy: SchedulePolicy,
    pub(crate) handles: Vec<thread::JoinHandle<()>>,
    /// Serializes dispatches from several outside threads.
    pub(crate) dispatch: Mutex<DispatchState>,
    /// [`thread_tag`] of the thread holding `dispatch`, or 0.
    ///
    /// ## Memory ordering
    /// `Relaxed`: a thread only compares it with its own tag, which only that thread stores
    /// (and clears before releasing the lock), so it reads its own tag exactly while it
    /// dispatches.
    pub(crate) owner: AtomicUsize,
    pub(crate) pinning_failures: Vec<PinningFailure>,
}

/// The dispatch lock, held by the calling thread. However it is dropped (an unwind
/// included), the owner is cleared before the lock is released, so no later call from this
/// thread is taken for a nested one.
struct Dispatch<'a> {
    owner: &'a AtomicUsize,
    state: MutexGuard<'a, DispatchState>,
}

impl Drop for Dispatch<'_> {
    fn drop(&mut self) {
        // The fields, the lock among them, drop after this.
        self.owner.store(0, Ordering::Relaxed);
    }
}

impl std::ops::Deref for Dispatch<'_> {
    type Target = DispatchState;
    fn deref(&self) -> &DispatchState {
        &self.state
    }
}

impl std::ops::DerefMut for Dispatch<'_> {
    fn deref_mut(&mut self) -> &mut DispatchState {
        &mut self.state
    }
}

/// State only the dispatching caller touches, under the dispatch lock.
#[derive(Debug)]
pub(crate) struct DispatchState {
    /// The last published generation.
    pub(crate) generation: u64,
    /// `Adaptive`'s moving average of rows per second per worker (0.0 = no history).
    pub(crate) speeds: Vec<f64>,
    /// Calls still to publish with [`CONTENDED`].
    pub(crate) contended_calls: u32,
    /// The first worker death a barrier saw: every later dispatch fails with it.
    pub(crate) death: Option<Death>,
}

impl fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPool")
            .field("n_threads", &self.n_threads)
            .field("policy", &self.policy)
            .field("spin_budget", &self.shared.spin_budget)
            .field(
                "oversubscribed",
                &(self.n_threads > self.shared.effective_cpus),
            )
            .field("pinning_failures", &self.pinning_failures)
            .finish_non_exhaustive()
    }
}

/// The error of a dispatch that found worker `death.worker_idx` dead.
fn worker_died(death: &Death) -> ThreadPoolError {
    ThreadPoolError::WorkerDied {
        worker_idx: death.worker_idx,
        message: death.message.clone(),
    }
}

impl ThreadPool {
    /// Threads in the pool, the caller included.
    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// The policy [`ThreadPool::run`] splits with ([`ThreadPoolBuilder::policy`](crate::ThreadPoolBuilder::policy)).
    pub fn policy(&self) -> SchedulePolicy {
        self.policy
    }

    /// How long a waiting thread polls before it parks.
    pub fn spin_budget(&self) -> Duration {
        self.shared.spin_budget
    }

    /// Workers whose pinning failed (empty without pinning or when all succeeded).
    pub fn pinning_failures(&self) -> &[PinningFailure] {
        &self.pinning_failures
    }

    /// Whether the current thread is inside a task of this pool (a worker of it, or the
    /// thread dispatching on it).
    fn is_nested(&self) -> bool {
        is_worker_of(&self.shared) || self.owner.load(Ordering::Relaxed) == thread_tag()
    }

    /// [`ThreadPool::parallel_for`] with the pool's own policy ([`ThreadPool::policy`]).
    ///
    /// # Errors
    /// As [`ThreadPool::parallel_for`].
    pub fn run<F>(&self, n_items: usize, f: F) -> Result<(), ThreadPoolError>
    where
        F: Fn(Range<usize>) + Sync,
    {
        self.parallel_for_with_threads(self.n_threads, n_items, self.policy, f)
    }

    /// Runs `f` over ranges covering `0..n_items` exactly once, split by `policy`.
    ///
    /// ## Guarantee relied on by `unsafe` code
    ///
    /// The ranges handed to `f` in one call are disjoint and cover `0..n_items`, and every
    /// call of `f` has returned (its writes visible to the caller) before this returns,
    /// `Ok` or `Err`. Callers may rely on this for soundness: `matmul-kernel` writes each
    /// output row through a shared raw pointer from the one range that holds it. Breaking
    /// it is a soundness bug. (After an `Err` some ranges may not have been handed out.)
    ///
    /// Returns when every range has been processed. Panics in `f` are resumed here (the
    /// first one) after every worker finished; the pool stays usable. Called from inside
    /// a task of this pool, it runs `f(0..n_items)` inline.
    ///
    /// # Errors
    /// [`ThreadPoolError::WorkerDied`] when a worker this call waited for had died (then
    /// the ranges of the dead worker were not processed), or an earlier call found one
    /// dead (then nothing ran: the pool is broken for good). A call on fewer workers is
    /// not failed by the death of a worker it does not use, unless an earlier call found it.
    pub fn parallel_for<F>(
        &self,
        n_items: usize,
        policy: SchedulePolicy,
        f: F,
    ) -> Result<(), ThreadPoolError>
    where
        F: Fn(Range<usize>) + Sync,
    {
        self.parallel_for_with_threads(self.n_threads, n_items, policy, f)
    }

    /// As [`ThreadPool::parallel_for`] on the first `n_threads` workers only (clamped to
    /// `1..=self.n_threads()`); the others stay asleep.
    ///
    /// # Errors
    /// As [`ThreadPool::parallel_for`].
    pub fn parallel_for_with_threads<F>(
        &self,
        n_threads: usize,
        n_items: usize,
        policy: SchedulePolicy,
        f: F,
    ) -> Result<(), ThreadPoolError>
    where
        F: Fn(Range<usize>) + Sync,
    {
        if n_items == 0 {
            return Ok(());
        }
        let n_threads = n_threads.clamp(1, self.n_threads);
        if n_threads == 1 || self.is_nested() {
            f(0..n_items);
            return Ok(());
        }
        let shared = &*self.shared;
        let mut state = self.lock_dispatch();
        if let Some(death) = &state.death {
            let err = worker_died(death);
            self.unlock_dispatch(state, None);
            return Err(err);
        }
        let plan = Plan::prepare(
            policy,
            n_items,
            n_threads,
            &state.speeds,
            &shared.cursor,
            &shared.ranges,
        );
        let measure = policy == SchedulePolicy::Adaptive;
        let body = |worker_idx: usize| {
            if measure {
                let started = std::time::Instant::now();
                let rows = plan.run(worker_idx, &shared.cursor, &shared.ranges, &f);
                let nanos = started.elapsed().as_nanos();
                let stats = &shared.stats[worker_idx];
                stats.rows.store(rows as u64, Ordering::Relaxed);
                stats.nanos.store(nanos as u64, Ordering::Relaxed);
            } else {
                plan.run(worker_idx, &shared.cursor, &shared.ranges, &f);
            }
        };
        let panicked = self.run_locked(&mut state, n_threads, &body);
        if measure && panicked.is_none() && state.death.is_none() {
            update_speeds(&mut state.speeds[..n_threads], &shared.stats[..n_threads]);
        }
        let result = state.death.as_ref().map_or(Ok(()), |d| Err(worker_died(d)));
        self.unlock_dispatch(state, panicked);
        result
    }

    /// Runs `f(worker_idx)` once on every worker, the caller being worker 0.
    ///
    /// Called from inside a task of this pool, it runs `f(0)`, …, `f(n_threads - 1)` inline.
    /// Panics in `f` are resumed as in [`ThreadPool::parallel_for`].
    ///
    /// # Errors
    /// [`ThreadPoolError::WorkerDied`] when a worker thread died (this call or an earlier
    /// one found it missing); the dead worker's `f(worker_idx)` did not run.
    pub fn broadcast<F>(&self, f: F) -> Result<(), ThreadPoolError>
    where
        F: Fn(usize) + Sync,
    {
        if self.is_nested() {
            (0..self.n_threads).for_each(f);
            return Ok(());
        }
        let mut state = self.lock_dispatch();
        if let Some(death) = &state.death {
            let err = worker_died(death);
            self.unlock_dispatch(state, None);
            return Err(err);
        }
        let panicked = self.run_locked(&mut state, self.n_threads, &f);
        let result = state.death.as_ref().map_or(Ok(()), |d| Err(worker_died(d)));
        self.unlock_dispatch(state, panicked);
        result
    }

    /// Takes the dispatch lock and records this thread as its owner.
    fn lock_dispatch(&self) -> Dispatch<'_> {
        let state = sync::lock(&self.dispatch);
        self.owner.store(thread_tag(), Ordering::Relaxed);
        Dispatch {
            owner: &self.owner,
            state,
        }
    }

    /// Releases the dispatch lock, then resumes `panicked` if any.
    fn unlock_dispatch(&self, dispatch: Dispatch<'_>, panicked: Option<Box<dyn Any + Send>>) {
        drop(dispatch);
        if let Some(payload) = panicked {
            panic::resume_unwind(payload);
        }
    }

    /// Publishes `body` to workers `1..n_active`, runs `body(0)`, waits for the barrier and
    /// returns the first panic; records in `state` a worker death the barrier saw. Needs
    /// the dispatch lock (`state`).
    fn run_locked(
        &self,
        state: &mut DispatchState,
        n_active: usize,
        body: &(dyn Fn(usize) + Sync),
    ) -> Option<Box<dyn Any + Send>> {
        let shared = &*self.shared;
        if n_active > 1 {
            state.generation += 1;
            // SAFETY: the dispatch lock is held, so no other dispatcher touches the cell;
            // every worker that read the previous job arrived before the previous dispatch
            // returned, and no worker reads the cell before the state store below.
            // `JobRef::erase`: `Barrier` keeps `body` borrowed until all readers arrived.
            shared.published.job.with_mut(|job| unsafe {
                *job = Some(JobRef::erase(body));
            });
            shared.arrived.store(0, Ordering::Relaxed);
            let flags = if state.contended_calls > 0 {
                state.contended_calls -= 1;
                CONTENDED
            } else {
                0
            };
            let word = state_word(state.generation, n_active, flags);
            shared.published.state.store(word, Ordering::Release);
            let mut barrier = Barrier {
                shared,
                n_waited: n_active - 1,
                word,
                woke_any: false,
                done: false,
            };
            barrier.woke_any = shared.wake(1..n_active);
            run_catching(shared, || body(0));
            let arrivals = barrier.wait();
            // Only a stall with pure spinning (re)starts contended mode: contended calls
            // cost a few yields each, so pure spinning is retried after a bounded run.
            if arrivals.stalled && flags == 0 {
                state.contended_calls = CONTENDED_CALLS;
            }
            if state.death.is_none() {
                state.death = arrivals.death;
            }
        } else {
            run_catching(shared, || body(0));
        }
        shared.take_panic()
    }
}

/// Folds the last `Adaptive` call's per-worker rows per second into `speeds`.
fn update_speeds(speeds: &mut [f64], stats: &[CachePadded<WorkerStats>]) {
    for (speed, stats) in speeds.iter_mut().zip(stats) {
        let rows = stats.rows.load(Ordering::Relaxed);
        let nanos = stats.nanos.load(Ordering::Relaxed);
        if rows == 0 || nanos == 0 {
            continue;
        }
        let measured = rows as f64 * 1e9 / nanos as f64;
        *speed = if *speed > 0.0 {
            crate::schedule::ADAPTIVE_EMA_WEIGHT * measured
                + (1.0 - crate::schedule::ADAPTIVE_EMA_WEIGHT) * *speed
        } else {
            measured
        };
    }
}

impl Drop for ThreadPool {
    /// Publishes a shutdown generation, wakes every worker and joins them.
    fn drop(&mut self) {
        let word = {
            let mut state = sync::lock(&self.dispatch);
            state.generation += 1;
            state_word(state.generation, 0, SHUTDOWN)
        };
        self.shared.published.state.store(word, Ordering::Release);
        self.shared.wake(1..self.n_threads);
        for handle in self.handles.drain(..) {
            // A worker catches every panic (of user code and its own, as a death); a join
            // error cannot carry one.
            let _ = handle.join();
        }
    }
}

#[cfg(all(test, not(loom)))]
impl ThreadPool {
    /// `Adaptive`'s current rows-per-second averages, one per worker.
    pub(crate) fn adaptive_speeds(&self) -> Vec<f64> {
        sync::lock(&self.dispatch).speeds.clone()
    }
}
