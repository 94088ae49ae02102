//! [`ThreadPoolBuilder`]: threads, pinning, spin budget and default policy; spawns the workers.

use crate::error::{PinningFailure, ThreadPoolError};
use crate::pool::{DispatchState, ThreadPool};
use crate::protocol::{MAX_THREADS, Shared};
use crate::schedule::SchedulePolicy;
use crate::sync::{Arc, AtomicUsize, Mutex, thread};
use crate::worker::worker_thread;
use std::time::Duration;

/// Where workers run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Pinning {
    /// No pinning (the default).
    #[default]
    None,
    /// Worker i on the i-th CPU of the allowed set (modulo its size); worker 0, the calling
    /// thread, is not pinned, so it keeps the first CPU to itself.
    Sequential,
    /// Worker i on `cpus[i % cpus.len()]` (worker 0, the calling thread, is not pinned).
    Cpus(Vec<usize>),
}

/// The default spin budget: how long a waiting thread polls before it parks.
///
/// About four wake-ups' worth of polling: back-to-back calls (a loop of GEMVs) never pay
/// the wake-up of a parked thread, while an idle pool soon stops burning CPU.
/// `docs/threadpool.md` has the measured figures behind the choice.
pub const DEFAULT_SPIN_BUDGET: Duration = Duration::from_micros(100);

/// CPUs a Linux `cpu_set_t` can name; higher ids are reported as pinning failures.
const CPU_SET_SIZE: usize = 1024;

/// Builds a [`ThreadPool`]: threads, pinning, spin budget and default policy.
///
/// ```
/// use std::time::Duration;
/// use threadpool::{Pinning, SchedulePolicy, ThreadPoolBuilder};
///
/// let pool = ThreadPoolBuilder::default()
///     .n_threads(2)
///     .pinning(Pinning::None)
///     .spin_budget(Duration::from_micros(50))
///     .policy(SchedulePolicy::Guided)
///     .build()?;
/// assert_eq!(pool.n_threads(), 2);
/// assert_eq!(pool.policy(), SchedulePolicy::Guided);
/// # Ok::<(), threadpool::ThreadPoolError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ThreadPoolBuilder {
    n_threads: Option<usize>,
    pinning: Pinning,
    spin_budget: Option<Duration>,
    policy: Option<SchedulePolicy>,
    /// Fault injection for tests: this worker panics as its thread starts.
    #[cfg(test)]
    panic_at_start: Option<usize>,
}

impl ThreadPoolBuilder {
    /// Sets the number of threads, the caller included (0 counts as 1). The default is
    /// [`std::thread::available_parallelism`].
    pub fn n_threads(mut self, n_threads: usize) -> Self {
        self.n_threads = Some(n_threads);
        self
    }

    /// Sets the pinning (default [`Pinning::None`]).
    pub fn pinning(mut self, pinning: Pinning) -> Self {
        self.pinning = pinning;
        self
    }

    /// Sets how long a waiting thread polls before it parks (default
    /// [`DEFAULT_SPIN_BUDGET`]); `Duration::ZERO` parks at once.
    pub fn spin_budget(mut self, spin_budget: Duration) -> Self {
        self.spin_budget = Some(spin_budget);
        self
    }

    /// Sets the policy [`ThreadPool::run`] splits with (default [`SchedulePolicy::Static`]).
    pub fn policy(mut self, policy: SchedulePolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Makes worker `worker_idx` panic as its thread starts, before it ever waits.
    #[cfg(test)]
    pub(crate) fn panic_at_start(mut self, worker_idx: usize) -> Self {
        self.panic_at_start = Some(worker_idx);
        self
    }

    /// Spawns the workers (`n_threads - 1` of them: the caller is worker 0).
    ///
    /// Pinning failures do not fail the build; read them with
    /// [`ThreadPool::pinning_failures`].
    pub fn build(&self) -> Result<ThreadPool, ThreadPoolError> {
        let available = std::thread::available_parallelism().map_or(1, |n| n.get());
        let n_threads = self.n_threads.unwrap_or(available).max(1);
        if n_threads > MAX_THREADS {
            return Err(ThreadPoolError::TooManyThreads(n_threads));
        }
        // The CPUs to pin to (`None` without pinning, empty when the allowed set could not
        // be read) and how many distinct CPUs the pool may use.
        let (targets, effective_cpus): (Option<Vec<usize>>, usize) = match &self.pinning {
            Pinning::None => (None, available),
            Pinning::Sequential => {
                let allowed: Vec<usize> = core_affinity::get_core_ids()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|core| core.id)
                    .collect();
                (Some(allowed), available)
            }
            Pinning::Cpus(cpus) if cpus.is_empty() => return Err(ThreadPoolError::EmptyCpuList),
            Pinning::Cpus(cpus) => {
                let mut distinct = cpus.clone();
                distinct.sort_unstable();
                distinct.dedup();
                (Some(cpus.clone()), distinct.len().min(available))
            }
        };
        let spin_budget = self.spin_budget.unwrap_or(DEFAULT_SPIN_BUDGET);
        let shared = Arc::new(Shared::new(n_threads, spin_budget, effective_cpus));
        let mut pool = ThreadPool {
            shared: Arc::clone(&shared),
            n_threads,
            policy: self.policy.unwrap_or(SchedulePolicy::Static),
            handles: Vec::with_capacity(n_threads - 1),
            dispatch: Mutex::new(DispatchState {
                generation: 0,
                speeds: vec![0.0; n_threads],
                contended_calls: 0,
                death: None,
            }),
            owner: AtomicUsize::new(0),
            pinning_failures: Vec::new(),
        };
        // Each pinned worker reports `(worker_idx, cpu, pinned)` once, from its own thread.
        let (pinned_tx, pinned_rx) = std::sync::mpsc::channel::<(usize, Option<usize>, bool)>();
        for worker_idx in 1..n_threads {
            let shared = Arc::clone(&shared);
            // This worker's CPU: `None` without pinning, `Some(None)` when none is known.
            let target = targets
                .as_ref()
                .map(|cpus| (!cpus.is_empty()).then(|| cpus[worker_idx % cpus.len()]));
            let pinned_tx = pinned_tx.clone();
            #[cfg(test)]
            let panic_at_start = self.panic_at_start == Some(worker_idx);
            let start = move || {
                #[cfg(test)]
                if panic_at_start {
                    panic!("injected fault at the start of worker {worker_idx}");
                }
                if let Some(cpu) = target {
                    let pinned = cpu.is_some_and(|id| {
                        // `core_affinity` indexes a `cpu_set_t` without a bounds check.
                        id < CPU_SET_SIZE
                            && core_affinity::set_for_current(core_affinity::CoreId { id })
                    });
                    // The receiver is gone only if the build failed; nothing to report.
                    let _ = pinned_tx.send((worker_idx, cpu, pinned));
                }
            };
            let spawned = thread::Builder::new()
                .name(format!("threadpool-{worker_idx}"))
                .spawn(move || worker_thread(shared, worker_idx, start));
            match spawned {
                Ok(handle) => pool.handles.push(handle),
                // Dropping `pool` shuts down and joins the workers spawned so far.
                Err(source) => return Err(ThreadPoolError::Spawn { worker_idx, source }),
            }
        }
        drop(pinned_tx);
        if targets.is_some() {
            let mut failures: Vec<PinningFailure> = pinned_rx
                .iter()
                .filter(|(_, _, pinned)| !pinned)
                .map(|(worker_idx, cpu, _)| PinningFailure { worker_idx, cpu })
                .collect();
            failures.sort_by_key(|failure| failure.worker_idx);
            pool.pinning_failures = failures;
        }
        Ok(pool)
    }
}

impl ThreadPool {
    /// A pool of `n_threads` threads (clamped to `1..=MAX_THREADS`), unpinned, with the
    /// default spin budget and the `Static` policy.
    ///
    /// # Panics
    /// If the operating system refuses to spawn a thread (as [`std::thread::spawn`] does);
    /// use [`ThreadPoolBuilder::build`] to get the error instead.
    pub fn new(n_threads: usize) -> Self {
        let n_threads = n_threads.min(MAX_THREADS);
        match ThreadPoolBuilder::default().n_threads(n_threads).build() {
            Ok(pool) => pool,
            Err(err) => panic!("{err}"),
        }
    }
}
