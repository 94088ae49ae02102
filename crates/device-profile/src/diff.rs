//! [`crate::HardwareInfo::tuning_differences`]: has the machine behind an id changed?
//!
//! The cached runtime profile stores the [`HardwareInfo`] it was tuned on. Machines that
//! share an id can still differ where tuning cares: a process pinned to the efficiency
//! cores instead of the performance cores (same count, other CPUs), a VM moved to a host
//! with other SIMD or another L3 behind the same brand string, SMT or NUMA settings
//! changed. The tuner compares the stored description with fresh detection and re-tunes
//! when this list is not empty.

use crate::info::HardwareInfo;
use crate::parse::format_cpu_list;
use std::fmt::Display;

/// What differs between `now` (fresh detection) and `earlier` (the machine a cached profile
/// was tuned on), one `name earlier -> now` line per field. The arguments come in the order
/// of the method, `now.tuning_differences(&earlier)`: now first, earlier second.
pub(crate) fn tuning_differences(now: &HardwareInfo, earlier: &HardwareInfo) -> Vec<String> {
    let mut lines = Vec::new();
    let mut value = |name: &str, before: &dyn Display, after: &dyn Display, differs: bool| {
        if differs {
            lines.push(format!("{name} {before} -> {after}"));
        }
    };
    value(
        "arch",
        &quoted(&earlier.arch),
        &quoted(&now.arch),
        earlier.arch != now.arch,
    );
    value(
        "cpu_model",
        &quoted(&earlier.cpu_model),
        &quoted(&now.cpu_model),
        earlier.cpu_model != now.cpu_model,
    );
    let counts = [
        ("logical_cores", earlier.logical_cores, now.logical_cores),
        ("physical_cores", earlier.physical_cores, now.physical_cores),
    ];
    for (name, before, after) in counts {
        value(name, &before, &after, before != after);
    }
    let cpu_lists = [
        ("allowed_cpus", &earlier.allowed_cpus, &now.allowed_cpus),
        (
            "performance_cpus",
            &earlier.performance_cpus,
            &now.performance_cpus,
        ),
        (
            "efficiency_cpus",
            &earlier.efficiency_cpus,
            &now.efficiency_cpus,
        ),
    ];
    for (name, before, after) in cpu_lists {
        let (before, after) = (cpu_list(before), cpu_list(after));
        value(name, &before, &after, before != after);
    }
    value(
        "effective_cpus",
        &earlier.effective_cpus,
        &now.effective_cpus,
        earlier.effective_cpus != now.effective_cpus,
    );
    // A quota that rounds up to the same CPU count still changes what pays (the tuner
    // measures through its stops): 1.5 CPUs and none are two machines.
    let quota = |q: Option<u64>| q.map_or_else(|| "(none)".to_string(), |m| m.to_string());
    value(
        "cpu_quota_millicpus",
        &quota(earlier.cpu_quota_millicpus),
        &quota(now.cpu_quota_millicpus),
        earlier.cpu_quota_millicpus != now.cpu_quota_millicpus,
    );
    let (simd_before, simd_after) = (feature_set(&earlier.simd), feature_set(&now.simd));
    value("simd", &simd_before, &simd_after, simd_before != simd_after);
    value(
        "numa_nodes",
        &earlier.numa_nodes,
        &now.numa_nodes,
        earlier.numa_nodes != now.numa_nodes,
    );
    value(
        "l3_total_bytes",
        &earlier.l3_total_bytes,
        &now.l3_total_bytes,
        earlier.l3_total_bytes != now.l3_total_bytes,
    );
    lines
}

fn quoted(text: &str) -> String {
    format!("{text:?}")
}

/// A CPU list in kernel notation, `(none)` when empty.
fn cpu_list(cpus: &[usize]) -> String {
    let list = format_cpu_list(cpus);
    if list.is_empty() {
        "(none)".to_string()
    } else {
        list
    }
}

/// Feature names sorted and deduplicated, comma-separated, `(none)` when empty.
fn feature_set(names: &[String]) -> String {
    let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.is_empty() {
        "(none)".to_string()
    } else {
        sorted.join(",")
    }
}

impl HardwareInfo {
    /// What differs, in the fields that matter to tuning, between `self` (fresh detection,
    /// "now") and `earlier` (the machine a cached runtime profile was tuned on): one line
    /// per field, earlier value first, e.g. `effective_cpus 2 -> 4` when the cached profile
    /// was tuned with 2 and 4 are usable now. Empty when the cached profile may be reused.
    /// Call it as `now.tuning_differences(&earlier)`.
    ///
    /// Compared: `arch`, `cpu_model`, `logical_cores`, `physical_cores`, `allowed_cpus`,
    /// `effective_cpus`, `cpu_quota_millicpus` (a quota that rounds up to the CPUs there are
    /// is still a quota), `simd` (as a set), `performance_cpus`, `efficiency_cpus`,
    /// `numa_nodes` and `l3_total_bytes`. RAM is left out: its bucket is already in the id,
    /// and `MemTotal` moves by a few MiB between kernels.
    pub fn tuning_differences(&self, earlier: &HardwareInfo) -> Vec<String> {
        tuning_differences(self, earlier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> HardwareInfo {
        HardwareInfo {
            arch: "x86_64".into(),
            cpu_model: "AMD EPYC".into(),
            logical_cores: 4,
            physical_cores: 2,
            ram_bytes: 16 << 30,
            simd: vec!["avx2".into(), "fma".into()],
            numa_nodes: 1,
            performance_cores: 2,
            performance_cpus: vec![0, 1, 2, 3],
            allowed_cpus: vec![0, 1, 2, 3],
            effective_cpus: 2,
            l3_total_bytes: 32 << 20,
            ..HardwareInfo::default()
        }
    }

    #[test]
    fn same_machine_has_no_differences() {
        assert!(tuning_differences(&machine(), &machine()).is_empty());
    }

    #[test]
    fn ram_jitter_and_simd_order_are_not_differences() {
        let mut now = machine();
        now.ram_bytes -= 3 << 20;
        now.simd.reverse();
        now.page_size = 65536;
        assert!(tuning_differences(&now, &machine()).is_empty());
    }

    #[test]
    fn each_tuning_field_is_reported() {
        let earlier = machine();
        let mut now = machine();
        now.effective_cpus = 4;
        assert_eq!(
            tuning_differences(&now, &earlier),
            ["effective_cpus 2 -> 4"]
        );

        // A quota that rounds up to the same CPUs is still a change.
        let mut now = machine();
        now.cpu_quota_millicpus = Some(1500);
        assert_eq!(
            tuning_differences(&now, &earlier),
            ["cpu_quota_millicpus (none) -> 1500"]
        );

        let mut now = machine();
        now.allowed_cpus = vec![0, 1];
        assert_eq!(
            tuning_differences(&now, &earlier),
            ["allowed_cpus 0-3 -> 0-1"]
        );

        let mut now = machine();
        now.simd.push("avx512f".into());
        assert_eq!(
            tuning_differences(&now, &earlier),
            ["simd avx2,fma -> avx2,avx512f,fma"]
        );

        let mut now = machine();
        now.cpu_model = "AMD EPYC 9B14".into();
        now.arch = "arm64".into();
        now.logical_cores = 8;
        now.physical_cores = 8;
        now.performance_cpus = vec![0, 1, 2, 3, 4, 5];
        now.efficiency_cpus = vec![6, 7];
        now.numa_nodes = 2;
        now.l3_total_bytes = 64 << 20;
        assert_eq!(
            tuning_differences(&now, &earlier),
            [
                "arch \"x86_64\" -> \"arm64\"",
                "cpu_model \"AMD EPYC\" -> \"AMD EPYC 9B14\"",
                "logical_cores 4 -> 8",
                "physical_cores 2 -> 8",
                "performance_cpus 0-3 -> 0-5",
                "efficiency_cpus (none) -> 6-7",
                "numa_nodes 1 -> 2",
                "l3_total_bytes 33554432 -> 67108864",
            ]
        );
    }

    #[test]
    fn method_and_function_take_now_first() {
        let earlier = machine();
        let mut now = machine();
        now.effective_cpus = 4;
        assert_eq!(now.tuning_differences(&earlier), ["effective_cpus 2 -> 4"]);
        assert_eq!(
            tuning_differences(&now, &earlier),
            ["effective_cpus 2 -> 4"]
        );
        assert_eq!(earlier.tuning_differences(&now), ["effective_cpus 4 -> 2"]);
    }

    #[test]
    fn a_profile_survives_a_json_round_trip() {
        let json = serde_json::to_string(&machine()).unwrap();
        let stored: HardwareInfo = serde_json::from_str(&json).unwrap();
        assert!(machine().tuning_differences(&stored).is_empty());
    }
}
