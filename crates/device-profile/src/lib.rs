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
#[cfg(any(target_os = "macos", test))]
#[allow(unsafe_code, reason = "the sysctl calls of macOS detection")]
mod macos;
pub mod parse;
mod root;
mod simd;
mod slug;
mod sysfs;

pub use error::Error;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The environment variable naming a test root: when set (and not empty),
/// [`get_hardware_info`] reads `$SIPLLM_SYSROOT/proc/...` and `$SIPLLM_SYSROOT/sys/...`
/// instead of the running machine, as hwloc's `HWLOC_FSROOT` does.
pub const SYSROOT_ENV: &str = "SIPLLM_SYSROOT";

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
///
/// The JSON keys are the field names. The fields from `arch` to `effective_cpus` are always
/// written; the optional ones after them only when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct HardwareInfo {
    /// `x86_64` or `arm64` (any aarch64); `x86`, `arm` or `riscv64` where those run.
    pub arch: String,
    /// CPU model as the OS gives it. On ARM, where Linux gives none, the cores named from
    /// their implementer and part numbers, fastest first (`Arm Cortex-A72`,
    /// `Arm Cortex-X3 + Cortex-A715 + Cortex-A510`).
    pub cpu_model: String,
    /// Online logical CPUs.
    pub logical_cores: usize,
    /// Physical cores (distinct sibling groups).
    pub physical_cores: usize,
    /// Total RAM in bytes (`MemTotal`).
    pub ram_bytes: u64,
    /// Page size in bytes.
    pub page_size: u64,
    /// Distinct caches, grouped by level, kind and size.
    pub caches: Vec<CacheInfo>,
    /// Sum over distinct L3 instances; 0 when there is none.
    pub l3_total_bytes: u64,
    /// SIMD features that matter to the kernels (`avx2`, `fma`, `avx512f`, `avx_vnni`,
    /// `neon`, `dotprod`, `i8mm`, …), present on every core.
    pub simd: Vec<String>,
    /// NUMA nodes (1 when the OS shows none).
    pub numa_nodes: usize,
    /// Physical performance cores: all cores on a CPU with one class.
    pub performance_cores: usize,
    /// Physical efficiency cores: 0 on a CPU with one class.
    pub efficiency_cores: usize,
    /// CPU ids of performance cores.
    pub performance_cpus: Vec<usize>,
    /// CPU ids of efficiency cores.
    pub efficiency_cpus: Vec<usize>,
    /// CPU ids this process may run on: online ∩ affinity ∩ cgroup cpuset.
    pub allowed_cpus: Vec<usize>,
    /// How many CPUs this process may really use: the allowed CPUs limited by the cgroup
    /// CPU quota (rounded up to whole CPUs).
    ///
    /// This is the workspace's one name for "the CPUs this process may use"; the tuner's
    /// thread counts and the `_e<N>` suffix of the hardware id come from it. It is never 0
    /// after detection: where no source says, it falls back to the allowed CPUs, then the
    /// logical cores, then 1. Only a value built by hand or read from old JSON can be 0.
    pub effective_cpus: usize,
    /// x86 `cpu family` number, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_family: Option<u32>,
    /// x86 `model` number, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_model_number: Option<u32>,
    /// ARM: the microarchitecture of the highest-capacity core (`Cortex-A72`), which names
    /// the model in the hardware id.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cpu_uarch: String,
    /// Online CPUs grouped by physical core (SMT siblings together), each group sorted and
    /// the groups in order of their first CPU; empty when unknown. The tuner pins one
    /// thread per physical core from it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub core_cpus: Vec<Vec<usize>>,
    /// Online CPUs of each NUMA node, in node order; empty when the OS shows no node
    /// folders (one node). The tuner pins a node's CPUs from it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_cpus: Vec<Vec<usize>>,
    /// The cgroup CPU quota in thousandths of a CPU (`1500` for 1.5 CPUs), when one is set.
    /// `effective_cpus` rounds it up; the tuner's unmeasured estimate rounds it down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_quota_millicpus: Option<u64>,
}

impl HardwareInfo {
    /// The deterministic slug that keys the profile cache:
    /// `<arch>_<model>[_f<family>m<model>]_<logical>c_<ram>gb[_e<effective>]`, for example
    /// `x86_64_intel_core_i7_12700h_20c_32gb` or `arm64_cortex_a72_4c_4gb`.
    ///
    /// Rules:
    /// - Only `[a-z0-9_]`; no empty part; no leading, trailing or double `_`; at most 64
    ///   characters (the model part is shortened first). No input, however odd (`/`, `..`,
    ///   unicode, control characters, an empty model), can make it escape a file name.
    /// - The model is cleaned: lowercased, every other character a separator, and noise
    ///   dropped: `(R)`, `(TM)`, `(C)`, `CPU`, `Processor`, the clock (`@ 2.40GHz` and
    ///   whatever follows `@`), core counts (`16-Core`), generation prefixes (`12th Gen`),
    ///   and graphics suffixes (`with Radeon Graphics`). An empty result is `unknown`.
    /// - On ARM the model part is the microarchitecture of the highest-capacity core
    ///   ([`HardwareInfo::cpu_uarch`], e.g. `cortex_a72`, `cortex_x3`), never the board.
    /// - A cleaned model without any digit (`Intel(R) Xeon(R) CPU @ 2.20GHz` → `intel_xeon`,
    ///   which cloud VMs show for several CPU generations) gains `f<family>m<model>` from
    ///   cpuinfo, e.g. `x86_64_intel_xeon_f6m85_4c_16gb`.
    /// - RAM is the smallest L in 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, …
    ///   GiB (powers of two and 1.5 × powers of two) with L × 1.03 ≥ MemTotal, so a 32 GB
    ///   machine reporting 31.03 GiB is `32gb` on every boot. Unknown RAM is `0gb`.
    /// - Where the process may use fewer CPUs than are online (`effective_cpus <
    ///   logical_cores`: cgroup quota, cpuset, affinity), the id ends in `_e<effective>`, so
    ///   a 2-CPU container on a 64-core host never shares a profile with the whole host.
    pub fn hardware_id(&self) -> String {
        slug::hardware_id(self)
    }

    /// What differs, in the fields that matter to tuning, between `self` (fresh detection,
    /// "now") and `earlier` (the machine a cached runtime profile was tuned on): one line
    /// per field, earlier value first, e.g. `effective_cpus 2 -> 4` when the cached profile
    /// was tuned with 2 and 4 are usable now. Empty when the cached profile may be reused.
    /// Call it as `now.tuning_differences(&earlier)`.
    ///
    /// Compared: `arch`, `cpu_model`, `logical_cores`, `physical_cores`, `allowed_cpus`,
    /// `effective_cpus`, `simd` (as a set), `performance_cpus`, `efficiency_cpus`,
    /// `numa_nodes` and `l3_total_bytes`. RAM is left out: its bucket is already in the id,
    /// and `MemTotal` moves by a few MiB between kernels.
    pub fn tuning_differences(&self, earlier: &HardwareInfo) -> Vec<String> {
        diff::tuning_differences(self, earlier)
    }
}

/// Detects the running machine, or the test root named by `SIPLLM_SYSROOT` when that is
/// set. Never fails: unknown fields are 0 or empty, except `effective_cpus`, which is at
/// least 1, and on the running machine `logical_cores`, which is at least
/// `std::thread::available_parallelism()`.
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

/// Memory that can be allocated now without swapping (`MemAvailable`), in bytes; `None` where
/// the OS does not say. Not part of [`HardwareInfo`]: it changes from one moment to the next.
/// Honours `SIPLLM_SYSROOT` like [`get_hardware_info`].
pub fn available_memory_bytes() -> Option<u64> {
    let root = sysroot_from(std::env::var_os(SYSROOT_ENV)).unwrap_or_else(|| PathBuf::from("/"));
    let text = root::Root::new(&root).read("proc/meminfo")?;
    parse::parse_meminfo_available(&text).ok()
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
        arch: host_arch(),
        simd: simd::detect_running(),
        numa_nodes: 1,
        ..HardwareInfo::default()
    };
    apply_parallelism_floor(&mut info);
    ensure_effective_cpus(&mut info);
    info
}

/// Keeps the promise on [`HardwareInfo::effective_cpus`]: where detection left it 0, the
/// allowed CPUs, else the logical cores, else 1.
fn ensure_effective_cpus(info: &mut HardwareInfo) {
    if info.effective_cpus == 0 {
        info.effective_cpus = if info.allowed_cpus.is_empty() {
            info.logical_cores
        } else {
            info.allowed_cpus.len()
        };
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

/// The architecture this crate was compiled for, in the id's spelling (`arm64` for aarch64).
pub(crate) fn host_arch() -> String {
    match std::env::consts::ARCH {
        "aarch64" => "arm64".to_string(),
        other => other.to_string(),
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
