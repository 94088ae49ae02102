//! A persistent fork-join barrier pool with seven schedule policies.
//!
//! [`ThreadPool`] keeps `n_threads - 1` workers alive; the calling thread is worker 0 and
//! does its share. A call publishes its work by bumping a generation counter, every active
//! worker runs its share, and the caller returns once all of them reached the barrier, so
//! closures borrow from the caller's stack like [`std::thread::scope`], with no `'static`
//! bound and no allocation per call. Waiting threads spin for a budget
//! ([`DEFAULT_SPIN_BUDGET`], configurable), yield, then park; `PROTOCOL.md` beside the
//! source argues that no wake-up is lost, and a loom model checks it (`--cfg loom`).
//!
//! The main items: [`ThreadPool`] (`run` with the pool's own policy, `parallel_for`,
//! `parallel_for_with_threads`, `broadcast`), [`ThreadPoolBuilder`], [`SchedulePolicy`], [`Pinning`] and the errors
//! [`ThreadPoolError`], [`PinningFailure`] and [`ParsePolicyError`].
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use threadpool::{SchedulePolicy, ThreadPool};
//!
//! let pool = ThreadPool::new(2);
//! let data: Vec<u64> = (0..1000).collect();
//! let sum = AtomicU64::new(0);
//! pool.parallel_for(data.len(), SchedulePolicy::Guided, |rows| {
//!     let part: u64 = data[rows].iter().sum();
//!     sum.fetch_add(part, Ordering::Relaxed);
//! })?;
//! assert_eq!(sum.into_inner(), 499_500);
//!
//! let seen: Vec<AtomicU64> = (0..pool.n_threads()).map(|_| AtomicU64::new(0)).collect();
//! pool.broadcast(|worker_idx| {
//!     seen[worker_idx].fetch_add(1, Ordering::Relaxed);
//! })?;
//! assert!(seen.iter().all(|n| n.load(Ordering::Relaxed) == 1));
//!
//! // `run` splits with the pool's own policy (`ThreadPoolBuilder::policy`, `Static` by default).
//! let total = AtomicU64::new(0);
//! pool.run(data.len(), |rows| {
//!     total.fetch_add(rows.len() as u64, Ordering::Relaxed);
//! })?;
//! assert_eq!(total.into_inner(), 1000);
//! # Ok::<(), threadpool::ThreadPoolError>(())
//! ```
//!
//! # Schedule policies
//! With n rows, T threads and t the worker index; chunk edges are multiples of 16 where a
//! chunk size applies.
//!
//! | id | policy | split | anchor |
//! |---|---|---|---|
//! | 0 | `static` | thread t gets `[t·q + min(t, r), +q + (t < r))`, q = n / T, r = n % T; no shared state | OpenMP `static`, TBB `static_partitioner` |
//! | 1 | `fixed16` | 16-row chunks; t starts with chunk t, then `fetch_add`s a cursor starting at T | ggml matmul chunking, OpenMP `dynamic,16` |
//! | 2 | `proportional2` | as `fixed16` with chunk = roundup16(ceil(n / 2T)) | TBB's two initial pieces per thread |
//! | 3 | `adaptive` | 3/4 of the rows split statically by each worker's moving-average rows/s (weight 1/4 on the newest call), the rest in 16-row chunks; `proportional2` until every worker has history | hybrid cores, noisy neighbours |
//! | 4 | `guided` | chunks of max(16, roundup16(ceil(remaining / 2T))) claimed by CAS | OpenMP `guided` (LLVM) |
//! | 5 | `interleaved` | 16-row chunk c belongs to thread c mod T; no atomics | OpenMP `static,16` |
//! | 6 | `workstealing` | each thread owns its `static` range as a packed `(lo, hi)` atomic on its own cache line, takes 16 rows from the front, and when empty steals the upper half of a victim holding ≥ 32 rows | LLVM `static_steal`, rayon's split-on-steal |
//!
//! Above 2³² − 1 rows the packed ranges do not fit: `workstealing` then runs as `guided` and
//! `adaptive` as `proportional2`.
//!
//! # Waiting, oversubscription and pinning
//! A thread that finished a call polls for the spin budget ([`DEFAULT_SPIN_BUDGET`], about
//! four wake-ups' worth, so a loop of back-to-back GEMVs never parks): 10 µs with
//! `spin_loop`, the rest with `yield_now` between polls; then it parks on its own condition
//! variable (`docs/threadpool.md` has the measured figures). When a call has more active threads than CPUs, polling
//! threads yield from the start so the threads that have work get the CPUs; when other processes
//! load the machine, the caller notices workers that wait for a CPU and parks instead of
//! spinning (PROTOCOL.md, "Waiting"). Workers above a call's `n_threads` go straight to
//! sleep. Pinning ([`Pinning`]) applies to the spawned workers 1.. (worker 0 is whichever
//! thread calls); failures are reported by [`ThreadPool::pinning_failures`], never fatal.
//!
//! # Panics, dead workers, nesting, concurrent callers
//! A panic in any share is caught, every thread still reaches the barrier, the first panic
//! is resumed on the caller and the pool stays usable. A worker thread that dies outside a
//! share (a panic as it starts) makes the call that misses it, and every later call that
//! needs the workers, return [`ThreadPoolError::WorkerDied`] instead of waiting forever. A call from inside a task of the same
//! pool runs inline on the current thread. Calls from several outside threads are
//! serialized by a lock. `Drop` wakes and joins every worker.
#![deny(missing_docs)]

mod barrier;
mod builder;
mod pool;
mod protocol;
mod schedule;
mod sync;
mod wait;
mod worker;

#[cfg(all(test, loom))]
mod loom_tests;

pub use builder::{DEFAULT_SPIN_BUDGET, ThreadPoolBuilder};
pub use pool::ThreadPool;
pub use protocol::MAX_THREADS;

/// The `opt-level` this crate was compiled with (`"0"` in a debug build of a program that
/// does not optimize its dependencies): the tuner refuses to measure an unoptimized pool.
pub const BUILD_OPT_LEVEL: &str = env!("SIPLLM_BUILD_OPT_LEVEL");

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How `parallel_for` splits `0..n_items` between workers. Ids 0–6 are stable; names are
/// lowercase in `Display`, `FromStr` (which also accepts the id) and serde.
///
/// The crate docs hold the table with each policy's formula; below, n rows, T threads,
/// worker t.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulePolicy {
    /// Contiguous near-equal blocks `[t·q + min(t, r), +q + (t < r))`, q = n / T,
    /// r = n % T; no shared state (OpenMP `static`, TBB `static_partitioner`).
    Static = 0,
    /// Dynamic 16-row chunks: t starts with chunk t, then claims the next with a relaxed
    /// `fetch_add` on a cursor starting at T (ggml's matmul chunking, OpenMP `dynamic,16`).
    Fixed16 = 1,
    /// As `Fixed16` with chunk = roundup16(ceil(n / 2T)): two chunks per thread (TBB's
    /// initial two pieces per thread).
    Proportional2 = 2,
    /// Speed-weighted: 3/4 of the rows split statically in proportion to each worker's
    /// moving average of rows per second from earlier `Adaptive` calls (the newest call
    /// weighs 1/4), the rest handed out in 16-row chunks; `Proportional2` until every worker
    /// of the call has history (hybrid P/E cores, noisy neighbours).
    Adaptive = 3,
    /// Decreasing chunks of max(16, roundup16(ceil(remaining / 2T))) claimed by CAS
    /// (OpenMP `guided`, LLVM's variant).
    Guided = 4,
    /// Cyclic static: 16-row chunk c belongs to thread c mod T; no atomics (OpenMP
    /// `static,16`).
    Interleaved = 5,
    /// Each thread owns its `Static` range as a packed `(lo, hi)` atomic on its own cache
    /// line, takes 16 rows at a time from the front and, when empty, steals the upper half
    /// of a victim's remainder (LLVM's `static_steal`, rayon's split-on-steal).
    WorkStealing = 6,
}

impl SchedulePolicy {
    /// Every policy in id order.
    pub const ALL: [SchedulePolicy; 7] = [
        SchedulePolicy::Static,
        SchedulePolicy::Fixed16,
        SchedulePolicy::Proportional2,
        SchedulePolicy::Adaptive,
        SchedulePolicy::Guided,
        SchedulePolicy::Interleaved,
        SchedulePolicy::WorkStealing,
    ];

    /// The stable id (0–6).
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The policy with this id.
    pub fn from_id(id: u8) -> Option<Self> {
        Self::ALL.get(usize::from(id)).copied()
    }

    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            SchedulePolicy::Static => "static",
            SchedulePolicy::Fixed16 => "fixed16",
            SchedulePolicy::Proportional2 => "proportional2",
            SchedulePolicy::Adaptive => "adaptive",
            SchedulePolicy::Guided => "guided",
            SchedulePolicy::Interleaved => "interleaved",
            SchedulePolicy::WorkStealing => "workstealing",
        }
    }
}

impl fmt::Display for SchedulePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for an unknown policy name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown schedule policy {0:?} (expected one of: static, fixed16, proportional2, adaptive, guided, interleaved, workstealing, or an id 0-6)"
)]
pub struct ParsePolicyError(pub String);

impl FromStr for SchedulePolicy {
    type Err = ParsePolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|p| p.name() == t || p.id().to_string() == t)
            .ok_or_else(|| ParsePolicyError(s.to_string()))
    }
}

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

#[cfg(all(test, not(loom)))]
mod tests;
