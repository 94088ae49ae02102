//! A persistent fork-join barrier pool with seven schedule policies.
//!
//! Placeholder implementation: the API is final, the pool runs work inline.
#![deny(missing_docs)]

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::time::Duration;

/// How `parallel_for` splits `0..n_items` between workers. Ids 0–6 are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulePolicy {
    /// Contiguous near-equal blocks.
    Static = 0,
    /// Dynamic 16-row chunks.
    Fixed16 = 1,
    /// Two chunks per thread.
    Proportional2 = 2,
    /// Speed-weighted static share plus a dynamic tail.
    Adaptive = 3,
    /// Decreasing chunks.
    Guided = 4,
    /// Cyclic static 16-row chunks.
    Interleaved = 5,
    /// Per-thread ranges with stealing.
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
    /// Worker i on the i-th CPU of the allowed set.
    Sequential,
    /// Worker i on `cpus[i % cpus.len()]`.
    Cpus(Vec<usize>),
}

/// Builds a [`ThreadPool`].
#[derive(Debug, Clone, Default)]
pub struct ThreadPoolBuilder {
    n_threads: Option<usize>,
    pinning: Pinning,
    spin_budget: Option<Duration>,
}

impl ThreadPoolBuilder {
    /// Sets the number of threads, the caller included.
    pub fn n_threads(mut self, n_threads: usize) -> Self {
        self.n_threads = Some(n_threads);
        self
    }
    /// Sets the pinning.
    pub fn pinning(mut self, pinning: Pinning) -> Self {
        self.pinning = pinning;
        self
    }
    /// Sets how long a waiting thread spins before it yields and parks.
    pub fn spin_budget(mut self, spin_budget: Duration) -> Self {
        self.spin_budget = Some(spin_budget);
        self
    }
    /// Builds the pool.
    pub fn build(&self) -> ThreadPool {
        ThreadPool {
            n_threads: self.n_threads.unwrap_or(1).max(1),
        }
    }
}

/// A persistent fork-join pool; the calling thread is worker 0.
#[derive(Debug)]
pub struct ThreadPool {
    n_threads: usize,
}

impl ThreadPool {
    /// A pool of `n_threads` threads (at least 1), unpinned.
    pub fn new(n_threads: usize) -> Self {
        ThreadPoolBuilder::default().n_threads(n_threads).build()
    }

    /// Threads in the pool, the caller included.
    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// Runs `f` over ranges covering `0..n_items` exactly once, split by `policy`.
    pub fn parallel_for<F>(&self, n_items: usize, policy: SchedulePolicy, f: F)
    where
        F: Fn(Range<usize>) + Sync,
    {
        self.parallel_for_with_threads(self.n_threads, n_items, policy, f);
    }

    /// As [`ThreadPool::parallel_for`] on the first `n_threads` workers only.
    pub fn parallel_for_with_threads<F>(
        &self,
        n_threads: usize,
        n_items: usize,
        policy: SchedulePolicy,
        f: F,
    ) where
        F: Fn(Range<usize>) + Sync,
    {
        let _ = (n_threads, policy);
        if n_items > 0 {
            f(0..n_items);
        }
    }

    /// Runs `f(worker_idx)` once on every worker.
    pub fn broadcast<F>(&self, f: F)
    where
        F: Fn(usize) + Sync,
    {
        for worker_idx in 0..self.n_threads {
            f(worker_idx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_round_trip() {
        for p in SchedulePolicy::ALL {
            assert_eq!(p.name().parse::<SchedulePolicy>(), Ok(p));
            assert_eq!(SchedulePolicy::from_id(p.id()), Some(p));
        }
    }
}
