//! Hardware detection: what this machine is, and the `hardware_id` slug that keys the cache.
//!
//! [`get_hardware_info`] reads the running machine; [`get_hardware_info_from_root`] reads a
//! fake `/proc` + `/sys` tree (the `SIPLLM_SYSROOT` test root). Both return a
//! [`HardwareInfo`], whose [`HardwareInfo::hardware_id`] names the machine in the cache and
//! whose [`HardwareInfo::tuning_differences`] tells the tuner whether a cached profile was
//! tuned on a machine like this one.
//!
//! Detection never fails and never panics: a source that is missing or malformed leaves its
//! fields unknown (0 or empty). The text parsers behind it are public in [`parse`], for
//! callers that read the same files.
//!
//! ```
//! let hw = device_profile::get_hardware_info();
//! assert!(hw.effective_cpus >= 1);
//! let id = hw.hardware_id();
//! assert!(id.len() <= 64 && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
//! assert!(hw.tuning_differences(&hw).is_empty());
//! ```
//!
//! # Platform support
//!
//! Supported, meaning detected from the OS's own sources and tested:
//! - **Linux** (and Android, which shares its `/proc` and `/sys`): `/proc/cpuinfo`,
//!   `/proc/meminfo`, `/proc/self/status`, `/sys/devices/system/cpu` (online list,
//!   topology, caches, `cpu_capacity`, `cpufreq`), `/sys/devices/cpu_core` and `cpu_atom`
//!   (Intel hybrid), `/sys/devices/system/node`, and the process's cgroup (v1 or v2);
//!   `sched_getaffinity` and `sysconf` fill gaps. `lscpu` is never run.
//! - **macOS**: `sysctlbyname` (the mapping is tested on every OS with a fake).
//!
//! Every other target (the BSDs, Windows, …) builds, and detection there gives only the
//! compiled-in arch, runtime SIMD detection, one NUMA node, and
//! `std::thread::available_parallelism` as the CPU count; the other fields stay unknown
//! (0 or empty). [`get_hardware_info_from_root`] reads a Linux-layout test root on any
//! host.
#![deny(missing_docs)]
// Only the macOS `sysctl` calls are unsafe; everything else may not be.
#![deny(unsafe_code)]

mod arm;
mod cgroup;
mod diff;
mod error;
mod info;
#[cfg(any(target_os = "macos", test))]
#[allow(unsafe_code, reason = "the sysctl calls of macOS detection")]
mod macos;
pub mod parse;
mod root;
mod simd;
mod slug;
mod sysfs;

pub use error::Error;
pub use info::{CacheInfo, HardwareInfo};

use std::path::{Path, PathBuf};

/// The environment variable naming a test root: when set (and not empty),
/// [`get_hardware_info`] reads `$SIPLLM_SYSROOT/proc/...` and `$SIPLLM_SYSROOT/sys/...`
/// instead of the running machine, as hwloc's `HWLOC_FSROOT` does.
pub const SYSROOT_ENV: &str = "SIPLLM_SYSROOT";

/// Detects the running machine, or the test root named by `SIPLLM_SYSROOT` when that is
/// set. Never fails: unknown fields are 0 or empty, except `effective_cpus`, which is at
/// least 1, and on the running machine `logical_cores`, which is at least
/// `std::thread::available_parallelism()`. So a mistyped root describes a machine of
/// nothing (`unknown_unknown_0c_0gb`): the `sipllm` command refuses a root without a
/// `proc/cpuinfo` file before detecting, and a program that takes the variable from its
/// users should check as much.
pub fn get_hardware_info() -> HardwareInfo {
    match sysroot_from(std::env::var_os(SYSROOT_ENV)) {
        Some(root) => get_hardware_info_from_root(&root),
        None => detect_running(),
    }
}

/// Detects the machine described by a filesystem root (`root/proc`, `root/sys`), as Linux
/// lays them out, on any host. Every value those files can give comes from them: the
/// affinity mask from `proc/self/status`, the cgroup from `proc/self/cgroup` and
/// `proc/self/mountinfo`, the arch from the format of `proc/cpuinfo`. Only the page size
/// comes from the running system. `effective_cpus` is at least 1 even where nothing under
/// `root` can be read.
pub fn get_hardware_info_from_root(root: &Path) -> HardwareInfo {
    let mut info = sysfs::detect(&root::Root::new(root), sysfs::Mode::TestRoot);
    ensure_effective_cpus(&mut info);
    info
}

/// Memory that can be allocated now without swapping or being killed, in bytes: the least
/// of `MemAvailable`, what this process's cgroups leave it (a container's memory limit
/// less what it uses and cannot reclaim) and what its address-space limit leaves it
/// (`ulimit -v`: the limit less the address space it maps now); `None` where none is
/// known. Not part of [`HardwareInfo`]: it changes from one moment to the next. Honours
/// `SIPLLM_SYSROOT` like [`get_hardware_info`] for the machine's figures; the
/// address-space limit is always the running process's own.
pub fn available_memory_bytes() -> Option<u64> {
    let root = sysroot_from(std::env::var_os(SYSROOT_ENV)).unwrap_or_else(|| PathBuf::from("/"));
    let machine = available_memory_bytes_from_root(&root);
    match (machine, sysfs::address_space_headroom()) {
        (Some(m), Some(a)) => Some(m.min(a)),
        (m, a) => m.or(a),
    }
}

/// [`available_memory_bytes`] of the machine described by a filesystem root (`root/proc`,
/// `root/sys`), as [`get_hardware_info_from_root`] reads one.
pub fn available_memory_bytes_from_root(root: &Path) -> Option<u64> {
    let root = root::Root::new(root);
    let available = root
        .read("proc/meminfo")
        .and_then(|text| parse::parse_meminfo_available(&text).ok());
    let headroom = cgroup::memory_headroom(&root);
    match (available, headroom) {
        (Some(a), Some(h)) => Some(a.min(h)),
        (a, h) => a.or(h),
    }
}

/// The test root named by the variable's value, if any: an empty value means none.
fn sysroot_from(value: Option<std::ffi::OsString>) -> Option<PathBuf> {
    value.filter(|v| !v.is_empty()).map(PathBuf::from)
}

fn detect_running() -> HardwareInfo {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let mut info = sysfs::detect(&root::Root::new("/"), sysfs::Mode::Live);
    #[cfg(target_os = "macos")]
    let mut info = macos::from_sysctl(&macos::LiveSysctl);
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "macos")))]
    let mut info = HardwareInfo {
        arch: info::host_arch(),
        simd: simd::detect_running(),
        numa_nodes: 1,
        ..HardwareInfo::default()
    };
    apply_parallelism_floor(&mut info);
    ensure_effective_cpus(&mut info);
    info
}

/// Keeps the promise on [`HardwareInfo::effective_cpus`]: where detection left it 0, the
/// allowed CPUs, else the logical cores, under the CPU quota rounded up, else 1.
fn ensure_effective_cpus(info: &mut HardwareInfo) {
    if info.effective_cpus == 0 {
        info.effective_cpus = if info.allowed_cpus.is_empty() {
            info.logical_cores
        } else {
            info.allowed_cpus.len()
        };
        if let Some(millicpus) = info.cpu_quota_millicpus {
            let quota = usize::try_from(millicpus.div_ceil(1000)).unwrap_or(usize::MAX);
            info.effective_cpus = info.effective_cpus.min(quota);
        }
    }
    info.effective_cpus = info.effective_cpus.max(1);
}

/// Fills the CPU counts that detection left unknown from `available_parallelism`.
fn apply_parallelism_floor(info: &mut HardwareInfo) {
    // Asked only when needed: it reads the cgroup files again.
    let floor = || std::thread::available_parallelism().map_or(1, |n| n.get());
    if info.logical_cores == 0 {
        info.logical_cores = floor();
    }
    if info.physical_cores == 0 {
        info.physical_cores = info.logical_cores;
    }
    if info.allowed_cpus.is_empty() {
        info.allowed_cpus = (0..info.logical_cores).collect();
    }
    if info.performance_cpus.is_empty() && info.efficiency_cpus.is_empty() {
        info.performance_cpus = info.allowed_cpus.clone();
        if info.performance_cores == 0 {
            info.performance_cores = info.physical_cores;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_this_machine() {
        let hw = detect_running();
        assert!(hw.effective_cpus >= 1);
        assert!(hw.logical_cores >= 1);
        assert!(hw.effective_cpus <= hw.logical_cores.max(1));
        assert!(!hw.arch.is_empty());
        assert!(!hw.allowed_cpus.is_empty());
        assert!(slug::is_valid_id(&hw.hardware_id()));
    }

    #[test]
    fn sysroot_value_rules() {
        assert_eq!(sysroot_from(None), None);
        assert_eq!(sysroot_from(Some("".into())), None);
        assert_eq!(sysroot_from(Some("/x".into())), Some(PathBuf::from("/x")));
    }

    #[test]
    fn floor_fills_unknown_counts() {
        let mut info = HardwareInfo::default();
        apply_parallelism_floor(&mut info);
        assert!(info.logical_cores >= 1);
        assert_eq!(info.physical_cores, info.logical_cores);
        assert_eq!(info.allowed_cpus.len(), info.logical_cores);
        assert_eq!(info.performance_cpus, info.allowed_cpus);
        ensure_effective_cpus(&mut info);
        assert_eq!(info.effective_cpus, info.logical_cores);
    }

    #[test]
    fn effective_cpus_falls_back_to_allowed_then_logical_then_one() {
        let mut info = HardwareInfo {
            logical_cores: 8,
            allowed_cpus: vec![2, 3],
            ..HardwareInfo::default()
        };
        ensure_effective_cpus(&mut info);
        assert_eq!(info.effective_cpus, 2);
        let mut info = HardwareInfo {
            logical_cores: 8,
            ..HardwareInfo::default()
        };
        ensure_effective_cpus(&mut info);
        assert_eq!(info.effective_cpus, 8);
        let mut info = HardwareInfo::default();
        ensure_effective_cpus(&mut info);
        assert_eq!(info.effective_cpus, 1);
        // A known value is kept.
        let mut info = HardwareInfo {
            logical_cores: 8,
            effective_cpus: 3,
            ..HardwareInfo::default()
        };
        ensure_effective_cpus(&mut info);
        assert_eq!(info.effective_cpus, 3);
    }

    #[test]
    fn json_keys_are_the_field_names() {
        let hw = HardwareInfo {
            cpu_model: "x".into(),
            ..HardwareInfo::default()
        };
        let json = serde_json::to_value(&hw).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for key in [
            "arch",
            "cpu_model",
            "logical_cores",
            "physical_cores",
            "ram_bytes",
            "page_size",
            "caches",
            "l3_total_bytes",
            "simd",
            "numa_nodes",
            "performance_cores",
            "efficiency_cores",
            "performance_cpus",
            "efficiency_cpus",
            "allowed_cpus",
            "effective_cpus",
        ] {
            assert!(keys.contains(&key), "{key} missing");
        }
        // Unknown optional fields are left out, and old JSON without them still loads.
        for optional in [
            "cpu_family",
            "cpu_uarch",
            "core_cpus",
            "node_cpus",
            "cpu_quota_millicpus",
        ] {
            assert!(!keys.contains(&optional), "{optional} present");
        }
        let back: HardwareInfo = serde_json::from_value(json).unwrap();
        assert_eq!(back, hw);
    }
}
