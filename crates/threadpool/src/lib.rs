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
mod error;
mod pool;
mod protocol;
mod schedule;
mod sync;
mod wait;
mod worker;

#[cfg(all(test, loom))]
mod loom_tests;

pub use builder::{DEFAULT_SPIN_BUDGET, Pinning, ThreadPoolBuilder};
pub use error::{PinningFailure, ThreadPoolError};
pub use pool::ThreadPool;
pub use protocol::MAX_THREADS;
pub use schedule::{ParsePolicyError, SchedulePolicy};

/// The `opt-level` this crate was compiled with (`"0"` in a debug build of a program that
/// does not optimize its dependencies): the tuner refuses to measure an unoptimized pool.
pub const BUILD_OPT_LEVEL: &str = env!("SIPLLM_BUILD_OPT_LEVEL");

#[cfg(all(test, not(loom)))]
mod tests;
