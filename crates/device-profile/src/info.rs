//! What detection finds: [`HardwareInfo`] and its caches ([`CacheInfo`]), filled by the
//! platform modules (`sysfs.rs`, `macos.rs`); the id and the comparison of two machines are
//! `slug.rs`'s and `diff.rs`'s methods on it.

use serde::{Deserialize, Serialize};

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
    /// folders (one node). The tuner pins a node's CPUs from it. Node numbers need not run
    /// 0, 1, …: [`HardwareInfo::nodes`] pairs each list with its node's number.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_cpus: Vec<Vec<usize>>,
    /// The number of each node of `node_cpus` (its `nodeN` folder), in the same order;
    /// empty in JSON written before it was recorded, where the nodes count 0, 1, ….
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_ids: Vec<usize>,
    /// The cgroup CPU quota in thousandths of a CPU (`1500` for 1.5 CPUs), when one is set.
    /// `effective_cpus` rounds it up; the tuner's unmeasured estimate rounds it down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_quota_millicpus: Option<u64>,
}

impl HardwareInfo {
    /// Each NUMA node of [`HardwareInfo::node_cpus`] as its number and its online CPUs: the
    /// numbers of [`HardwareInfo::node_ids`] where it holds one per node, else 0, 1, … (JSON
    /// written before they were recorded). A machine whose nodes are numbered with gaps (a
    /// memory-only node, a node taken offline) names each by its own number, as `numactl`
    /// and the kernel do.
    pub fn nodes(&self) -> impl Iterator<Item = (usize, &[usize])> {
        let ids = (self.node_ids.len() == self.node_cpus.len()).then_some(&self.node_ids);
        self.node_cpus
            .iter()
            .enumerate()
            .map(move |(i, cpus)| (ids.map_or(i, |ids| ids[i]), cpus.as_slice()))
    }
}

/// The architecture this crate was compiled for, in the id's spelling (`arm64` for aarch64).
pub(crate) fn host_arch() -> String {
    match std::env::consts::ARCH {
        "aarch64" => "arm64".to_string(),
        other => other.to_string(),
    }
}
