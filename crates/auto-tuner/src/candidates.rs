//! Where the workers may run: [`CoreSet`], and the pinned candidates a machine offers beyond
//! "N threads anywhere" ([`pinning_candidates`]), as a pure function of its
//! [`HardwareInfo`].
//!
//! - SMT: one thread per physical core, pinned, against all logical CPUs.
//! - Hybrid: the performance cores only, pinned (the caller too), against all cores.
//! - NUMA: one node, pinned, against all nodes.

use device_profile::HardwareInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Which CPUs a configuration's workers run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CoreSet {
    /// Unpinned: the OS places the workers on any CPU the process may use.
    #[default]
    Any,
    /// Pinned one worker per CPU, to the performance cores only (hybrid CPUs), one thread
    /// per physical core before any second SMT thread.
    Performance,
    /// Pinned one worker per physical core (one SMT thread of each).
    PhysicalCores,
    /// Pinned to the CPUs of this NUMA node, one thread per physical core first.
    Node(usize),
}

impl CoreSet {
    /// `any`, `performance`, `physical_cores` or `node<N>`: the name shown in tables.
    pub fn label(self) -> String {
        match self {
            CoreSet::Any => "any".to_string(),
            CoreSet::Performance => "performance".to_string(),
            CoreSet::PhysicalCores => "physical_cores".to_string(),
            CoreSet::Node(n) => format!("node{n}"),
        }
    }
}

/// A pinned candidate: its core set and the CPUs its workers take, worker 0 (the caller)
/// first. A configuration of `n` threads pins to the first `n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedSet {
    /// What the set is.
    pub cores: CoreSet,
    /// The CPUs, in pinning order.
    pub cpus: Vec<usize>,
}

/// The largest thread count a search may try on `hw`: every CPU the process may run on.
/// Under a CPU quota that is more than the quota (`effective_cpus` rounds the quota up):
/// whether threads beyond it pay (a machine whose per-thread bandwidth grows with threads)
/// or cost (the quota's stops) is measured, with repetitions long enough to include the
/// stops, never assumed. Without a quota it is `effective_cpus`.
pub fn candidate_cpus(hw: &HardwareInfo) -> usize {
    let cpus = if hw.cpu_quota_millicpus.is_some() {
        allowed(hw).len().max(hw.effective_cpus)
    } else {
        hw.effective_cpus
    };
    // A pool holds at most MAX_THREADS; a described machine (a test root) may claim more.
    cpus.clamp(1, threadpool::MAX_THREADS)
}

/// The CPUs this process may use: `allowed_cpus`, else every online CPU.
fn allowed(hw: &HardwareInfo) -> Vec<usize> {
    if hw.allowed_cpus.is_empty() {
        (0..hw.logical_cores.max(1)).collect()
    } else {
        hw.allowed_cpus.clone()
    }
}

/// `cpus` reordered one per physical core first (in core order), then each core's second
/// SMT thread, and so on; CPUs of no known core keep their order at the end.
fn spread(cpus: &[usize], hw: &HardwareInfo) -> Vec<usize> {
    let groups: Vec<Vec<usize>> = hw
        .core_cpus
        .iter()
        .map(|g| g.iter().copied().filter(|c| cpus.contains(c)).collect())
        .filter(|g: &Vec<usize>| !g.is_empty())
        .collect();
    let deepest = groups.iter().map(Vec::len).max().unwrap_or(0);
    let mut out: Vec<usize> = (0..deepest)
        .flat_map(|level| groups.iter().filter_map(move |g| g.get(level).copied()))
        .collect();
    let rest: Vec<usize> = cpus.iter().copied().filter(|c| !out.contains(c)).collect();
    out.extend(rest);
    out
}

/// The pinned candidates of `hw`, within the CPUs this process may use:
/// - [`CoreSet::PhysicalCores`] when some physical core has two or more usable SMT threads;
/// - [`CoreSet::Performance`] when both core classes have usable CPUs (hybrid);
/// - [`CoreSet::Node`] of the first node with usable CPUs when two or more nodes have some.
///
/// A machine with none of these (one class, no SMT, one node) has no pinned candidate.
pub fn pinning_candidates(hw: &HardwareInfo) -> Vec<PinnedSet> {
    let allowed = allowed(hw);
    let usable = |cpus: &[usize]| -> Vec<usize> {
        cpus.iter()
            .copied()
            .filter(|c| allowed.contains(c))
            .collect()
    };
    let mut sets = Vec::new();
    let cores: Vec<Vec<usize>> = hw
        .core_cpus
        .iter()
        .map(|g| usable(g))
        .filter(|g| !g.is_empty())
        .collect();
    if cores.iter().any(|g| g.len() > 1) {
        sets.push(PinnedSet {
            cores: CoreSet::PhysicalCores,
            cpus: cores.iter().map(|g| g[0]).collect(),
        });
    }
    let performance = usable(&hw.performance_cpus);
    if !performance.is_empty() && !usable(&hw.efficiency_cpus).is_empty() {
        sets.push(PinnedSet {
            cores: CoreSet::Performance,
            cpus: spread(&performance, hw),
        });
    }
    let nodes: Vec<(usize, Vec<usize>)> = hw
        .nodes()
        .map(|(n, cpus)| (n, usable(cpus)))
        .filter(|(_, cpus)| !cpus.is_empty())
        .collect();
    if nodes.len() > 1 {
        let (n, cpus) = &nodes[0];
        sets.push(PinnedSet {
            cores: CoreSet::Node(*n),
            cpus: spread(cpus, hw),
        });
    }
    sets
}

/// The thread count of [`crate::Rigor::Estimate`]: the physical cores of the performance
/// class this process may use (llama.cpp's rule; the cores it may use when it may use no
/// performance core), at most `thread_limit`, and at most the CPU quota rounded down (a
/// quota of 1.5 CPUs gives 1 thread, never 2 by rounding up).
pub fn estimate_threads(hw: &HardwareInfo, thread_limit: usize) -> usize {
    let allowed: BTreeSet<usize> = allowed(hw).into_iter().collect();
    let performance: BTreeSet<usize> = hw
        .performance_cpus
        .iter()
        .copied()
        .filter(|c| allowed.contains(c))
        .collect();
    // A process allowed no performance CPU (only efficiency cores, an ARM process on the
    // LITTLE cores) runs on what it is allowed.
    let performance = if performance.is_empty() {
        allowed
    } else {
        performance
    };
    let cores = if hw.core_cpus.is_empty() {
        // No topology: the physical share of the logical CPUs.
        let smt = hw.logical_cores.max(1).div_ceil(hw.physical_cores.max(1));
        performance.len().div_ceil(smt.max(1))
    } else {
        hw.core_cpus
            .iter()
            .filter(|g| g.iter().any(|c| performance.contains(c)))
            .count()
    };
    cores.min(unmeasured_cpu_limit(hw)).min(thread_limit).max(1)
}

/// The most threads a setting that was not measured may use: `effective_cpus`, and the CPU
/// quota rounded down (at least 1). `effective_cpus` rounds a quota up, so that the search
/// measures the rounded-up count; without a measurement, 1.5 CPUs of quota is 1 thread.
pub fn unmeasured_cpu_limit(hw: &HardwareInfo) -> usize {
    let quota = hw.cpu_quota_millicpus.map_or(usize::MAX, |m| {
        usize::try_from(m / 1000).unwrap_or(usize::MAX)
    });
    hw.effective_cpus.max(1).min(quota).max(1)
}

#[cfg(test)]
mod tests;
