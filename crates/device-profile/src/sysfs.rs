//! Linux detection from a filesystem root: `/` for the running machine, or a test root.
//!
//! Every value comes from a file under the root (`proc/...`, `sys/...`); a missing or
//! malformed file leaves its value unknown. Only in [`Mode::Live`] do the compiled-in
//! architecture, the process's own affinity mask and `sysconf` come in.

use crate::info::{CacheInfo, HardwareInfo, host_arch};
use crate::parse::{self, CpuInfo};
use crate::root::Root;
use crate::{arm, cgroup, simd};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The CPU folder of sysfs.
const CPU_DIR: &str = "sys/devices/system/cpu";

/// The most NUMA node folders read: the kernel's `MAX_NUMNODES` at its largest.
const MAX_NODES: usize = 1024;

/// Cache index folders probed per CPU (`index0` …); real CPUs have four or five.
const MAX_CACHE_INDEXES: usize = 16;

/// Where values may come from besides the files under the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The running machine: the arch is the compiled-in one, the affinity mask comes from
    /// `sched_getaffinity`, and `sysconf` fills values the files do not give.
    #[cfg_attr(
        not(any(target_os = "linux", target_os = "android")),
        allow(dead_code, reason = "live detection reads sysfs on Linux only")
    )]
    Live,
    /// A test root: only its files, plus the page size from `sysconf`.
    TestRoot,
}

/// Detects the machine described under `root`.
pub(crate) fn detect(root: &Root, mode: Mode) -> HardwareInfo {
    let cpuinfo = root
        .read("proc/cpuinfo")
        .map(|text| parse::parse_cpuinfo(&text))
        .unwrap_or_default();
    let mut info = HardwareInfo {
        // The running process's arch is the one its kernels are built for (an emulated
        // x86_64 binary on an arm64 host still runs x86_64 code); a test root has only the
        // format of its cpuinfo to go by.
        arch: match mode {
            Mode::Live => host_arch(),
            Mode::TestRoot => cpuinfo.arch().unwrap_or_default().to_string(),
        },
        cpu_family: cpuinfo.family,
        cpu_model_number: cpuinfo.model_number,
        ..HardwareInfo::default()
    };

    let online = online_cpus(root, &cpuinfo, mode);
    info.logical_cores = online.len();

    let cores = core_groups(root, &online, &cpuinfo);
    info.physical_cores = cores.len();
    let core_of: BTreeMap<usize, usize> = cores
        .iter()
        .enumerate()
        .flat_map(|(core_idx, cpus)| cpus.iter().map(move |&cpu| (cpu, core_idx)))
        .collect();

    (info.caches, info.l3_total_bytes) = caches(root, &online);

    info.ram_bytes = root
        .read("proc/meminfo")
        .and_then(|text| parse::parse_meminfo_total(&text).ok())
        .or_else(|| (mode == Mode::Live).then(live_ram_bytes).flatten())
        .unwrap_or(0);
    info.page_size = page_size();

    info.simd = simd::from_cpuinfo_features(&info.arch, &cpuinfo.features);
    if info.simd.is_empty() && mode == Mode::Live {
        info.simd = simd::detect_running();
    }

    info.numa_nodes = numa_nodes(root);
    (info.node_ids, info.node_cpus) = node_cpus(root, &online);

    let classes = core_classes(root, &online);
    let count_cores = |cpus: &[usize]| {
        cpus.iter()
            .filter_map(|cpu| core_of.get(cpu))
            .collect::<HashSet<_>>()
            .len()
    };
    info.performance_cores = count_cores(&classes.performance);
    info.efficiency_cores = count_cores(&classes.efficiency);
    info.performance_cpus = classes.performance;
    info.efficiency_cpus = classes.efficiency;

    if let Some((model, uarch)) = arm_model(&cpuinfo, &classes.speed) {
        info.cpu_model = model;
        info.cpu_uarch = uarch;
    } else {
        info.cpu_model = cpuinfo
            .model_name
            .clone()
            .or_else(|| cpuinfo.board_model.clone())
            .or_else(|| cpuinfo.hardware.clone())
            .unwrap_or_default();
    }

    let affinity = match mode {
        Mode::Live => live_affinity().or_else(|| status_affinity(root)),
        Mode::TestRoot => status_affinity(root),
    };
    let limits = cgroup::limits(root);
    info.allowed_cpus = allowed_cpus(&online, [affinity, limits.cpuset]);
    let usable = if info.allowed_cpus.is_empty() {
        info.logical_cores
    } else {
        info.allowed_cpus.len()
    };
    info.effective_cpus = effective_cpus(usable, limits.quota.map(|q| q.cpus()));
    info.cpu_quota_millicpus = limits.quota.map(|q| {
        (u128::from(q.quota_us) * 1000 / u128::from(q.period_us)).min(u128::from(u64::MAX)) as u64
    });
    info.core_cpus = cores;
    info
}

/// Online CPUs: sysfs `online`, else the `processor` lines, else (live) `sysconf`.
fn online_cpus(root: &Root, cpuinfo: &CpuInfo, mode: Mode) -> Vec<usize> {
    if let Some(cpus) = root
        .read_cpus(format!("{CPU_DIR}/online"))
        .filter(|cpus| !cpus.is_empty())
    {
        return cpus;
    }
    let mut cpus = cpuinfo.processors.clone();
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() && mode == Mode::Live {
        cpus = (0..live_online_count().unwrap_or(0)).collect();
    }
    cpus
}

/// Groups online CPUs into physical cores: distinct `core_cpus_list` (or the older
/// `thread_siblings_list`), else distinct cpuinfo (`physical id`, `core id`) pairs, else
/// one core per CPU. `core_id` alone is never used: it is sparse and repeats across
/// packages.
fn core_groups(root: &Root, online: &[usize], cpuinfo: &CpuInfo) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut covered: HashSet<usize> = HashSet::new();
    let online_set: HashSet<usize> = online.iter().copied().collect();
    let package_core: BTreeMap<usize, (u32, u32)> = cpuinfo
        .package_cores
        .iter()
        .map(|id| (id.cpu, (id.package, id.core)))
        .collect();
    // The CPUs of each (package, core) pair, found once: looking them up per CPU is linear in
    // the CPUs, so a hostile cpuinfo of 10^5 processors cost 10^10 steps.
    let mut by_core: HashMap<(u32, u32), Vec<usize>> = HashMap::new();
    for (&cpu, &key) in &package_core {
        by_core.entry(key).or_default().push(cpu);
    }
    for &cpu in online {
        if covered.contains(&cpu) {
            continue;
        }
        let topology = format!("{CPU_DIR}/cpu{cpu}/topology");
        let siblings = root
            .read_cpus(format!("{topology}/core_cpus_list"))
            .or_else(|| root.read_cpus(format!("{topology}/thread_siblings_list")))
            .or_else(|| by_core.get(package_core.get(&cpu)?).cloned());
        let mut group: Vec<usize> = siblings
            .unwrap_or_default()
            .into_iter()
            .filter(|other| online_set.contains(other) && !covered.contains(other))
            .collect();
        if !group.contains(&cpu) {
            group.push(cpu);
            group.sort_unstable();
        }
        covered.extend(group.iter().copied());
        groups.push(group);
    }
    groups
}

/// Walks every online CPU's `cache/index*` folders, removes duplicates by (level, type,
/// shared CPU list), and sums the distinct L3 instances.
///
/// A CPU already named in the shared list of an earlier CPU's `indexN` skips its own
/// `indexN`: CPUs that share a cache number it alike, and this keeps the walk to a few
/// reads per distinct cache rather than per CPU.
fn caches(root: &Root, online: &[usize]) -> (Vec<CacheInfo>, u64) {
    let mut covered: Vec<HashSet<usize>> = vec![HashSet::new(); MAX_CACHE_INDEXES];
    let mut seen: HashSet<(u32, String, Vec<usize>)> = HashSet::new();
    // (level, kind, size) → distinct instances.
    let mut counts: BTreeMap<(u32, u32, String, u64), u32> = BTreeMap::new();
    let mut l3_total_bytes: u64 = 0;
    for &cpu in online {
        for (index, covered_cpus) in covered.iter_mut().enumerate() {
            if covered_cpus.contains(&cpu) {
                continue;
            }
            let dir = format!("{CPU_DIR}/cpu{cpu}/cache/index{index}");
            let Some(level_text) = root.read(format!("{dir}/level")) else {
                break; // No such index folder: this CPU has no more caches.
            };
            let Ok(level) = level_text.trim().parse::<u32>() else {
                continue;
            };
            let mut shared = root
                .read_cpus(format!("{dir}/shared_cpu_list"))
                .or_else(|| {
                    root.read(format!("{dir}/shared_cpu_map"))
                        .and_then(|text| parse::parse_cpu_mask(&text).ok())
                })
                .unwrap_or_default();
            if !shared.contains(&cpu) {
                shared.push(cpu);
                shared.sort_unstable();
            }
            covered_cpus.extend(shared.iter().copied());
            let kind = root
                .read(format!("{dir}/type"))
                .map(|text| text.trim().to_ascii_lowercase())
                .filter(|kind| !kind.is_empty())
                .unwrap_or_else(|| "unknown".to_string());
            if !seen.insert((level, kind.clone(), shared)) {
                continue;
            }
            let size_bytes = root
                .read(format!("{dir}/size"))
                .and_then(|text| parse::parse_size(&text).ok())
                .unwrap_or(0);
            if level == 3 {
                l3_total_bytes = l3_total_bytes.saturating_add(size_bytes);
            }
            let kind_order = match kind.as_str() {
                "data" => 0,
                "instruction" => 1,
                "unified" => 2,
                _ => 3,
            };
            *counts
                .entry((level, kind_order, kind, size_bytes))
                .or_insert(0) += 1;
        }
    }
    let caches = counts
        .into_iter()
        .map(|((level, _, kind, size_bytes), instances)| CacheInfo {
            level,
            kind,
            size_bytes,
            instances,
        })
        .collect();
    (caches, l3_total_bytes)
}

/// NUMA nodes: the `node/online` list, else the `nodeN` folders, else one.
fn numa_nodes(root: &Root) -> usize {
    let node_dir = "sys/devices/system/node";
    if let Some(nodes) = root
        .read_cpus(format!("{node_dir}/online"))
        .filter(|nodes| !nodes.is_empty())
    {
        return nodes.len();
    }
    let folders = root
        .list_dir(node_dir)
        .iter()
        .filter(|name| {
            name.strip_prefix("node")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    folders.clamp(1, MAX_NODES)
}

/// The number and the online CPUs of each node folder (`nodeN/cpulist`), in node order;
/// empty when there is no node folder or a node's list cannot be read (then nothing is
/// pinned per node).
fn node_cpus(root: &Root, online: &[usize]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let node_dir = "sys/devices/system/node";
    let mut nodes: Vec<usize> = root
        .list_dir(node_dir)
        .iter()
        .filter_map(|name| name.strip_prefix("node")?.parse().ok())
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    // The kernel numbers at most `MAX_NUMNODES` (1024) nodes.
    nodes.truncate(MAX_NODES);
    // A CPU belongs to one node: one that an earlier list named is left out of the later
    // ones, so the lists hold at most the online CPUs between them, however many folders a
    // hostile root holds. `online` is sorted.
    let mut placed = HashSet::new();
    let lists: Option<Vec<Vec<usize>>> = nodes
        .iter()
        .map(|n| {
            let cpus = root.read_cpus(format!("{node_dir}/node{n}/cpulist"))?;
            Some(
                cpus.into_iter()
                    .filter(|c| online.binary_search(c).is_ok() && placed.insert(*c))
                    .collect(),
            )
        })
        .collect();
    match lists {
        Some(lists) => (nodes, lists),
        None => (Vec::new(), Vec::new()),
    }
}

/// The CPU classes of the machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CoreClasses {
    /// CPU ids of the performance class (all online CPUs when there is one class).
    pub performance: Vec<usize>,
    /// CPU ids of the efficiency class.
    pub efficiency: Vec<usize>,
    /// Each CPU's relative speed (`cpu_capacity`, else `cpuinfo_max_freq`), when known for
    /// all: it names the big core of an ARM machine.
    pub speed: BTreeMap<usize, u64>,
}

/// Splits online CPUs into performance and efficiency classes, from the first source that
/// shows two classes: Intel's `sys/devices/cpu_core/cpus` and `cpu_atom/cpus`, then ARM's
/// `cpu_capacity`, then `cpufreq/cpuinfo_max_freq` clusters.
fn core_classes(root: &Root, online: &[usize]) -> CoreClasses {
    let mut classes = CoreClasses::default();
    let capacity = per_cpu_values(root, online, "cpu_capacity");
    let max_freq = per_cpu_values(root, online, "cpufreq/cpuinfo_max_freq")
        .or_else(|| policy_max_freqs(root, online));
    classes.speed = capacity
        .clone()
        .or_else(|| max_freq.clone())
        .map(|values| values.into_iter().collect())
        .unwrap_or_default();

    let intel_class = |name: &str| {
        root.read_cpus(format!("sys/devices/{name}/cpus"))
            .map(|cpus| {
                cpus.into_iter()
                    .filter(|cpu| online.binary_search(cpu).is_ok())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let (intel_core, intel_atom) = (intel_class("cpu_core"), intel_class("cpu_atom"));
    let split = if !intel_core.is_empty() && !intel_atom.is_empty() {
        Some((intel_core, intel_atom))
    } else {
        [capacity, max_freq]
            .iter()
            .flatten()
            .find_map(|values| split_by_speed(values))
    };
    match split {
        Some((performance, efficiency)) => {
            classes.performance = performance;
            classes.efficiency = efficiency;
        }
        None => classes.performance = online.to_vec(),
    }
    classes
}

/// `cpuN/<file>` as a number for every online CPU, or `None` when any CPU lacks it.
fn per_cpu_values(root: &Root, online: &[usize], file: &str) -> Option<Vec<(usize, u64)>> {
    if online.is_empty() {
        return None;
    }
    online
        .iter()
        .map(|&cpu| Some((cpu, root.read_u64(format!("{CPU_DIR}/cpu{cpu}/{file}"))?)))
        .collect()
}

/// `cpuinfo_max_freq` of every online CPU from the `cpufreq/policyN` folders (whose
/// `related_cpus` say which CPUs each one governs), for trees without `cpuN/cpufreq`.
fn policy_max_freqs(root: &Root, online: &[usize]) -> Option<Vec<(usize, u64)>> {
    let dir = format!("{CPU_DIR}/cpufreq");
    let mut freqs: BTreeMap<usize, u64> = BTreeMap::new();
    for policy in root.list_dir(&dir) {
        if !policy.starts_with("policy") {
            continue;
        }
        let Some(khz) = root.read_u64(format!("{dir}/{policy}/cpuinfo_max_freq")) else {
            continue;
        };
        let cpus = root
            .read(format!("{dir}/{policy}/related_cpus"))
            .or_else(|| root.read(format!("{dir}/{policy}/affected_cpus")))
            .unwrap_or_default();
        // These files separate CPU ids by spaces, not in the `0-3` list format.
        for cpu in cpus.split_whitespace().filter_map(|id| id.parse().ok()) {
            freqs.insert(cpu, khz);
        }
    }
    online
        .iter()
        .map(|cpu| Some((*cpu, *freqs.get(cpu)?)))
        .collect()
}

/// Splits CPUs by a speed value into classes: sorted from fastest, a CPU whose value is
/// below 90% of its class's fastest starts a new class, so values within ~10% are one class
/// (turbo-favoured cores, or the Cortex-A715 and A710 at the same clock, stay together).
/// With two or more classes, the slowest class is the efficiency class and all the others
/// are performance. `None` when there is only one class.
pub(crate) fn split_by_speed(values: &[(usize, u64)]) -> Option<(Vec<usize>, Vec<usize>)> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut class_top = sorted.first()?.1;
    let mut slowest_class_start = 0;
    for (idx, &(_, speed)) in sorted.iter().enumerate() {
        if u128::from(speed) * 10 < u128::from(class_top) * 9 {
            class_top = speed;
            slowest_class_start = idx;
        }
    }
    if slowest_class_start == 0 {
        return None;
    }
    let mut performance: Vec<usize> = sorted[..slowest_class_start].iter().map(|v| v.0).collect();
    let mut efficiency: Vec<usize> = sorted[slowest_class_start..].iter().map(|v| v.0).collect();
    performance.sort_unstable();
    efficiency.sort_unstable();
    Some((performance, efficiency))
}

/// The ARM model (`Arm Cortex-X3 + Cortex-A715 + Cortex-A510`, fastest first) and the
/// microarchitecture of the fastest core (`Cortex-X3`), from the implementer/part pairs.
/// The fastest core is the one with the highest speed value, else the highest tier in the
/// table, else the one on the highest CPU id (big cores come last on most SoCs).
fn arm_model(cpuinfo: &CpuInfo, speed: &BTreeMap<usize, u64>) -> Option<(String, String)> {
    // (implementer, part) → (best speed, highest cpu id).
    let mut kinds: Vec<((u32, u32), Option<u64>, usize)> = Vec::new();
    for core in &cpuinfo.arm_cores {
        let key = (core.implementer, core.part);
        let core_speed = speed.get(&core.cpu).copied();
        match kinds.iter_mut().find(|kind| kind.0 == key) {
            Some(kind) => {
                kind.1 = kind.1.max(core_speed);
                kind.2 = kind.2.max(core.cpu);
            }
            None => kinds.push((key, core_speed, core.cpu)),
        }
    }
    kinds.sort_by(|a, b| {
        let tier = |k: &((u32, u32), Option<u64>, usize)| arm::tier(k.0.0, k.0.1);
        b.1.cmp(&a.1)
            .then(tier(b).cmp(&tier(a)))
            .then(b.2.cmp(&a.2))
    });
    let ((implementer, part), _, _) = *kinds.first()?;
    let mut model = arm::model_name(implementer, part);
    for ((other_implementer, other_part), _, _) in &kinds[1..] {
        model.push_str(" + ");
        model.push_str(&arm::core_name(*other_implementer, *other_part));
    }
    Some((model, arm::core_name(implementer, part)))
}

fn status_affinity(root: &Root) -> Option<Vec<usize>> {
    root.read("proc/self/status")
        .and_then(|text| parse::parse_status_cpus_allowed(&text).ok().flatten())
}

/// online ∩ each restriction, skipping a restriction that would leave no CPU (a garbage or
/// stale file): a process always runs somewhere.
fn allowed_cpus<const N: usize>(
    online: &[usize],
    restrictions: [Option<Vec<usize>>; N],
) -> Vec<usize> {
    let mut allowed = online.to_vec();
    for restriction in restrictions.into_iter().flatten() {
        if allowed.is_empty() {
            allowed = restriction;
            continue;
        }
        let narrowed: Vec<usize> = allowed
            .iter()
            .copied()
            .filter(|cpu| restriction.binary_search(cpu).is_ok())
            .collect();
        if !narrowed.is_empty() {
            allowed = narrowed;
        }
    }
    allowed
}

/// The usable CPU count limited by the quota's CPUs; 0 when no CPU is known (a quota alone
/// says how much time, not how many CPUs there are), which the public entry points fill
/// from what they know, under the quota, at least 1 (`ensure_effective_cpus` in `lib.rs`).
fn effective_cpus(usable: usize, quota_cpus: Option<usize>) -> usize {
    match (usable, quota_cpus) {
        (0, _) => 0,
        (usable, Some(quota)) => usable.min(quota),
        (usable, None) => usable,
    }
}

#[cfg(unix)]
fn page_size() -> u64 {
    use nix::unistd::{SysconfVar, sysconf};
    sysconf(SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|size| u64::try_from(size).ok())
        .unwrap_or(0)
}

#[cfg(not(unix))]
fn page_size() -> u64 {
    0
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn live_ram_bytes() -> Option<u64> {
    use nix::unistd::{SysconfVar, sysconf};
    let pages = u64::try_from(sysconf(SysconfVar::_PHYS_PAGES).ok()??).ok()?;
    pages.checked_mul(page_size())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn live_ram_bytes() -> Option<u64> {
    None
}

/// What the running process's address-space limit (`RLIMIT_AS`, `ulimit -v`) leaves it:
/// the soft limit less the address space it maps now (`VmSize`, the whole limit when that
/// cannot be read); `None` without a limit.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn address_space_headroom() -> Option<u64> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    let (soft, _hard) = getrlimit(Resource::RLIMIT_AS).ok()?;
    if soft == RLIM_INFINITY {
        return None;
    }
    // `rlim_t` is 32 bits wide on some 32-bit targets.
    #[allow(clippy::useless_conversion)]
    let soft = u64::from(soft);
    let mapped = Root::new("/")
        .read("proc/self/status")
        .and_then(|text| parse::parse_status_vm_size(&text).ok())
        .unwrap_or(0);
    Some(soft.saturating_sub(mapped))
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn address_space_headroom() -> Option<u64> {
    None
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn live_online_count() -> Option<usize> {
    use nix::unistd::{SysconfVar, sysconf};
    usize::try_from(sysconf(SysconfVar::_NPROCESSORS_ONLN).ok()??).ok()
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn live_online_count() -> Option<usize> {
    std::thread::available_parallelism().ok().map(|n| n.get())
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn live_affinity() -> Option<Vec<usize>> {
    use nix::sched::{CpuSet, sched_getaffinity};
    use nix::unistd::Pid;
    let set = sched_getaffinity(Pid::from_raw(0)).ok()?;
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect();
    (!cpus.is_empty()).then_some(cpus)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn live_affinity() -> Option<Vec<usize>> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::root::{MAX_FILE_BYTES, MAX_SYS_FILE_BYTES};

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        std::fs::write(dir.path().join("small"), "0-3\n").unwrap();
        assert_eq!(root.read("small").as_deref(), Some("0-3\n"));
        // A sparse file just over the limit is refused from its size, without reading it.
        let big = std::fs::File::create(dir.path().join("big")).unwrap();
        big.set_len(MAX_FILE_BYTES + 1).unwrap();
        assert_eq!(root.read("big"), None);
        // Under `sys/` a file of a megabyte and more is no attribute the kernel writes.
        std::fs::create_dir(dir.path().join("sys")).unwrap();
        let attribute = std::fs::File::create(dir.path().join("sys/online")).unwrap();
        attribute.set_len(MAX_SYS_FILE_BYTES + 1).unwrap();
        assert_eq!(root.read("sys/online"), None);
        attribute.set_len(MAX_SYS_FILE_BYTES).unwrap();
        assert!(root.read("sys/online").is_some());
        std::fs::create_dir(dir.path().join("folder")).unwrap();
        assert_eq!(root.read("folder"), None);
        assert_eq!(root.read("missing"), None);
    }

    #[test]
    fn speed_classes_within_ten_percent_are_one() {
        // Turbo-favoured cores a few percent faster: one class.
        assert_eq!(
            split_by_speed(&[(0, 4_800_000), (1, 4_600_000), (2, 4_600_000)]),
            None
        );
        // Intel hybrid: 4.7 GHz P-cores, 3.5 GHz E-cores.
        assert_eq!(
            split_by_speed(&[
                (0, 4_700_000),
                (1, 4_700_000),
                (2, 3_500_000),
                (3, 3_500_000)
            ]),
            Some((vec![0, 1], vec![2, 3]))
        );
        // X3 3.2 GHz, A715/A710 2.8 GHz, A510 2.0 GHz: the A715 and A710 share a class and
        // only the slowest class is efficiency.
        let sd8g2 = [
            (0, 2_016_000),
            (1, 2_016_000),
            (2, 2_803_000),
            (3, 2_803_000),
            (4, 2_803_000),
            (5, 2_803_000),
            (6, 3_187_000),
        ];
        assert_eq!(
            split_by_speed(&sd8g2),
            Some((vec![2, 3, 4, 5, 6], vec![0, 1]))
        );
        assert_eq!(split_by_speed(&[]), None);
        assert_eq!(split_by_speed(&[(0, 0), (1, 0)]), None);
    }

    #[test]
    fn allowed_is_online_narrowed_by_each_restriction() {
        let online: Vec<usize> = (0..8).collect();
        assert_eq!(
            allowed_cpus(&online, [Some(vec![0, 1, 2, 3]), Some(vec![2, 3, 4])]),
            [2, 3]
        );
        assert_eq!(allowed_cpus(&online, [None, None]), online);
        // A restriction naming no online CPU is ignored.
        assert_eq!(allowed_cpus(&online, [Some(vec![40, 41]), None]), online);
        assert_eq!(allowed_cpus(&[], [Some(vec![1, 2]), None]), [1, 2]);
    }

    #[test]
    fn effective_is_limited_by_quota() {
        assert_eq!(effective_cpus(8, Some(2)), 2);
        assert_eq!(effective_cpus(2, Some(16)), 2);
        assert_eq!(effective_cpus(8, None), 8);
        assert_eq!(effective_cpus(0, None), 0);
        // A quota with no CPU known is no CPU count: 3 CPUs' time on a machine of 2, or
        // u64::MAX CPUs' time, must not become the count.
        assert_eq!(effective_cpus(0, Some(3)), 0);
        assert_eq!(effective_cpus(0, Some(usize::MAX)), 0);
    }

    #[test]
    fn arm_model_names_the_fastest_core() {
        let text = "processor : 0\nCPU implementer : 0x41\nCPU part : 0xd46\n\n\
            processor : 1\nCPU implementer : 0x41\nCPU part : 0xd4d\n\n\
            processor : 2\nCPU implementer : 0x41\nCPU part : 0xd4e\n";
        let cpuinfo = parse::parse_cpuinfo(text);
        let speed = BTreeMap::from([(0, 400), (1, 900), (2, 1024)]);
        let (model, uarch) = arm_model(&cpuinfo, &speed).unwrap();
        assert_eq!(model, "Arm Cortex-X3 + Cortex-A715 + Cortex-A510");
        assert_eq!(uarch, "Cortex-X3");
        // Without speeds the table's tiers decide.
        let (_, uarch) = arm_model(&cpuinfo, &BTreeMap::new()).unwrap();
        assert_eq!(uarch, "Cortex-X3");
        // Speeds outrank the table: here the kernel says CPU 1 is the fastest.
        let odd = BTreeMap::from([(0, 400), (1, 1024), (2, 900)]);
        assert_eq!(arm_model(&cpuinfo, &odd).unwrap().1, "Cortex-A715");
        assert_eq!(arm_model(&CpuInfo::default(), &BTreeMap::new()), None);
    }
}
