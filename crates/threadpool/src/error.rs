//! The pool's errors: [`ThreadPoolError`] (a pool that cannot be built, a call that cannot
//! run) and [`PinningFailure`] (a worker that runs unpinned).

use crate::protocol::MAX_THREADS;

/// A worker that could not be pinned; the pool runs it unpinned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("worker {worker_idx} could not be pinned to cpu {}", cpu.map_or_else(|| "(none known)".to_string(), |c| c.to_string()))]
pub struct PinningFailure {
    /// The worker that runs unpinned.
    pub worker_idx: usize,
    /// The CPU it should have run on (`None`: the allowed CPU set could not be read).
    pub cpu: Option<usize>,
}

/// Why a pool could not be built, or a call could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ThreadPoolError {
    /// The operating system refused to spawn a worker thread.
    #[error("failed to spawn worker thread {worker_idx}: {source}")]
    Spawn {
        /// The worker that could not be spawned.
        worker_idx: usize,
        /// The error from the operating system.
        #[source]
        source: std::io::Error,
    },
    /// More threads than the pool supports.
    #[error("n_threads {0} exceeds the maximum of {MAX_THREADS}")]
    TooManyThreads(usize),
    /// `Pinning::Cpus` with no CPU.
    #[error("pinning cpu list is empty")]
    EmptyCpuList,
    /// A worker thread died outside the closure (for example a panic as it started): the
    /// call that found it missing and every later call that needs the workers fail.
    #[error("worker {worker_idx} died: {message}")]
    WorkerDied {
        /// The worker that died.
        worker_idx: usize,
        /// Its panic message.
        message: String,
    },
}
