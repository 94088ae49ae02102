//! Parsers for the text formats Linux uses to describe the machine.
//!
//! Each function takes the text of one file and returns what it says, or an [`Error`] naming
//! the value it could not read. They never touch the filesystem, so they are tested on
//! literal strings, and they never panic, whatever the input.

use crate::error::Error;

/// The largest CPU id a list may name: far above any kernel's `NR_CPUS`, low enough that a
/// garbage list such as `0-4294967295` cannot make the parser allocate gigabytes.
pub const MAX_CPU_ID: usize = 1 << 16;

/// Parses a kernel CPU list such as `0-3,8-11` (`online`, `shared_cpu_list`,
/// `Cpus_allowed_list`, `cpuset.cpus`) into sorted, distinct CPU ids.
///
/// An empty or all-whitespace text is the empty list.
///
/// ```
/// use device_profile::parse::parse_cpu_list;
/// assert_eq!(parse_cpu_list("0-2,8,10-11\n").unwrap(), vec![0, 1, 2, 8, 10, 11]);
/// assert!(parse_cpu_list("3-1").is_err());
/// ```
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, Error> {
    let bad = || Error::CpuList(text.trim().to_string());
    // The ranges, merged before they are expanded: the list holds each id once, at most
    // `MAX_CPU_ID + 1` of them, whatever the text repeats, and a short list costs no table
    // of every possible id.
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut merge_at = MERGE_AT;
    for part in text.trim().split(',') {
        let part = part.trim();
        if part.is_empty() {
            // `""` is the empty list; `"1,,2"` is as lenient as the kernel's own parser.
            continue;
        }
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (
                parse_cpu_id(a).ok_or_else(bad)?,
                parse_cpu_id(b).ok_or_else(bad)?,
            ),
            None => {
                let id = parse_cpu_id(part).ok_or_else(bad)?;
                (id, id)
            }
        };
        if first > last {
            return Err(bad());
        }
        ranges.push((first, last));
        // Merged whenever they have doubled since the last merge, so that a list repeating
        // one id (a 64 MiB `0,0,0,…`) holds about `MAX_CPU_ID` ranges at most, never one per
        // part, at a cost linear in the parts.
        if ranges.len() > merge_at {
            merge_at = MERGE_AT.max(2 * merge(&mut ranges));
        }
    }
    merge(&mut ranges);
    let mut cpus = Vec::new();
    for (first, last) in ranges {
        cpus.extend(first..=last);
    }
    Ok(cpus)
}

/// How many ranges [`parse_cpu_list`] gathers before it merges them.
const MERGE_AT: usize = 4096;

/// Sorts `ranges` and merges those that overlap or touch, in place; returns how many are
/// left.
fn merge(ranges: &mut Vec<(usize, usize)>) -> usize {
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for &(first, last) in ranges.iter() {
        match merged.last_mut() {
            Some((_, end)) if first <= *end + 1 => *end = (*end).max(last),
            _ => merged.push((first, last)),
        }
    }
    *ranges = merged;
    ranges.len()
}

fn parse_cpu_id(text: &str) -> Option<usize> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<usize>().ok().filter(|&id| id <= MAX_CPU_ID)
}

/// Parses a kernel CPU mask such as `ff` or `00000000,0000000f` (`shared_cpu_map`) into
/// sorted CPU ids. Bit `i` of the mask (counting from the right) is CPU `i`.
pub fn parse_cpu_mask(text: &str) -> Result<Vec<usize>, Error> {
    let bad = || Error::CpuList(text.trim().to_string());
    let digits: Vec<u8> = text.trim().bytes().filter(|&b| b != b',').collect();
    if digits.is_empty() || digits.len() > MAX_CPU_ID / 4 {
        return Err(bad());
    }
    let mut cpus = Vec::new();
    for (nibble_idx, &digit) in digits.iter().rev().enumerate() {
        let value = (digit as char).to_digit(16).ok_or_else(bad)?;
        for bit in 0..4 {
            if value & (1 << bit) != 0 {
                cpus.push(nibble_idx * 4 + bit);
            }
        }
    }
    Ok(cpus)
}

/// Formats sorted CPU ids as a kernel CPU list (`0-3,8-11`); the inverse of
/// [`parse_cpu_list`]. The empty list is `""`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut idx = 0;
    while idx < sorted.len() {
        let first = sorted[idx];
        let mut last = first;
        while idx + 1 < sorted.len() && sorted[idx + 1] == last + 1 {
            idx += 1;
            last = sorted[idx];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if first == last {
            out.push_str(&first.to_string());
        } else {
            out.push_str(&format!("{first}-{last}"));
        }
        idx += 1;
    }
    out
}

/// Parses a size such as `32K`, `1024K`, `32M`, `1G`, `24576 KB` or `512` (bytes) into bytes.
/// Suffixes are binary (`K` = 1024) as in sysfs and `/proc`, case-insensitive, with an optional
/// `B` or `iB`.
///
/// ```
/// use device_profile::parse::parse_size;
/// assert_eq!(parse_size("32K").unwrap(), 32 * 1024);
/// assert_eq!(parse_size("32M").unwrap(), 32 << 20);
/// ```
pub fn parse_size(text: &str) -> Result<u64, Error> {
    let bad = || Error::Size(text.trim().to_string());
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(bad());
    }
    let value: u64 = digits.parse().map_err(|_| bad())?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad()),
    };
    value.checked_mul(1u64 << shift).ok_or_else(bad)
}

/// Reads `MemTotal` from the text of `/proc/meminfo`, in bytes.
pub fn parse_meminfo_total(text: &str) -> Result<u64, Error> {
    text.lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|value| parse_size(value).ok())
        .ok_or(Error::MemTotal)
}

/// Reads `MemAvailable` (memory that can be allocated without swapping) from the text of
/// `/proc/meminfo`, in bytes.
pub fn parse_meminfo_available(text: &str) -> Result<u64, Error> {
    text.lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))
        .and_then(|value| parse_size(value).ok())
        .ok_or(Error::MemAvailable)
}

/// Reads the address space a process maps (`VmSize`) from the text of `/proc/<pid>/status`,
/// in bytes.
pub fn parse_status_vm_size(text: &str) -> Result<u64, Error> {
    text.lines()
        .find_map(|line| line.strip_prefix("VmSize:"))
        .and_then(|value| parse_size(value).ok())
        .ok_or(Error::VmSize)
}

/// Reads the affinity mask from `/proc/<pid>/status`: the `Cpus_allowed_list` line, else the
/// hex `Cpus_allowed` mask. `Ok(None)` when both are absent.
pub fn parse_status_cpus_allowed(text: &str) -> Result<Option<Vec<usize>>, Error> {
    let field = |name: &str| text.lines().find_map(|line| line.strip_prefix(name));
    if let Some(list) = field("Cpus_allowed_list:") {
        return parse_cpu_list(list).map(Some);
    }
    match field("Cpus_allowed:") {
        Some(mask) => parse_cpu_mask(mask).map(Some),
        None => Ok(None),
    }
}

/// A cgroup CPU bandwidth limit: `quota_us` of CPU time per `period_us` of wall time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuQuota {
    /// CPU time allowed per period, in microseconds (never 0).
    pub quota_us: u64,
    /// Length of the period, in microseconds (never 0).
    pub period_us: u64,
}

impl CpuQuota {
    /// Whole CPUs this quota pays for, rounded up, never below 1: `150000 100000` is 2.
    ///
    /// Rounding up is deliberate: the count is the upper end of what the tuner tries, so a
    /// fractional quota keeps the count that can use all of it, and the tuner measures
    /// whether fewer threads do better under throttling.
    pub fn cpus(&self) -> usize {
        let whole = self.quota_us.div_ceil(self.period_us).max(1);
        usize::try_from(whole).unwrap_or(usize::MAX)
    }
}

/// Parses cgroup v2 `cpu.max` (`max 100000` or `200000 100000`). `Ok(None)` means no limit.
///
/// ```
/// use device_profile::parse::parse_cgroup_v2_cpu_max;
/// assert_eq!(parse_cgroup_v2_cpu_max("max 100000").unwrap(), None);
/// assert_eq!(parse_cgroup_v2_cpu_max("200000 100000").unwrap().unwrap().cpus(), 2);
/// ```
pub fn parse_cgroup_v2_cpu_max(text: &str) -> Result<Option<CpuQuota>, Error> {
    let bad = || Error::CgroupLimit(text.trim().to_string());
    let mut words = text.split_whitespace();
    let quota = words.next().ok_or_else(bad)?;
    // The period may be left out when writing; the kernel's default is 100 ms.
    let period = words.next().unwrap_or("100000");
    if words.next().is_some() {
        return Err(bad());
    }
    let period_us: u64 = period.parse().map_err(|_| bad())?;
    if period_us == 0 {
        return Err(bad());
    }
    if quota == "max" {
        return Ok(None);
    }
    let quota_us: u64 = quota.parse().map_err(|_| bad())?;
    if quota_us == 0 {
        return Err(bad());
    }
    Ok(Some(CpuQuota {
        quota_us,
        period_us,
    }))
}

/// Parses cgroup v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us`. A quota of `-1` means no
/// limit (`Ok(None)`).
pub fn parse_cgroup_v1_cpu_quota(quota: &str, period: &str) -> Result<Option<CpuQuota>, Error> {
    let quota_text = quota.trim();
    let period_text = period.trim();
    let bad = || Error::CgroupLimit(format!("{quota_text} {period_text}"));
    let quota_us: i64 = quota_text.parse().map_err(|_| bad())?;
    if quota_us < 0 {
        return Ok(None);
    }
    let period_us: u64 = period_text.parse().map_err(|_| bad())?;
    if quota_us == 0 || period_us == 0 {
        return Err(bad());
    }
    Ok(Some(CpuQuota {
        quota_us: quota_us.unsigned_abs(),
        period_us,
    }))
}

/// One ARM core as `/proc/cpuinfo` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArmCoreId {
    /// The `processor` number.
    pub cpu: usize,
    /// `CPU implementer` (`0x41` is Arm Ltd).
    pub implementer: u32,
    /// `CPU part` (`0xd08` is the Cortex-A72).
    pub part: u32,
}

/// One x86 logical CPU's place as `/proc/cpuinfo` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackageCoreId {
    /// The `processor` number.
    pub cpu: usize,
    /// `physical id`: the package (socket).
    pub package: u32,
    /// `core id`: the core within the package (sparse on hybrid CPUs).
    pub core: u32,
}

/// What `/proc/cpuinfo` says, in either the x86 or the ARM format.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuInfo {
    /// `processor` numbers, in file order.
    pub processors: Vec<usize>,
    /// x86 `vendor_id` (`GenuineIntel`, `AuthenticAMD`).
    pub vendor_id: Option<String>,
    /// `model name` of the first processor that has one.
    pub model_name: Option<String>,
    /// x86 `cpu family`.
    pub family: Option<u32>,
    /// x86 `model` number.
    pub model_number: Option<u32>,
    /// x86 `flags` or ARM `Features` that every processor listing any has, in the order of
    /// the first processor.
    pub features: Vec<String>,
    /// ARM `CPU implementer` and `CPU part` of each processor that names both.
    pub arm_cores: Vec<ArmCoreId>,
    /// x86 `physical id` and `core id` of each processor that names both.
    pub package_cores: Vec<PackageCoreId>,
    /// ARM `CPU architecture` of the first processor (`8`, or `AArch64` on old kernels).
    pub arm_architecture: Option<String>,
    /// ARM `Hardware` line: the kernel's label for the platform, not the CPU.
    pub hardware: Option<String>,
    /// ARM `Model` line: the board, not the CPU.
    pub board_model: Option<String>,
    /// RISC-V `isa` line.
    pub isa: Option<String>,
}

impl CpuInfo {
    /// The architecture this text describes: `x86_64`, `x86`, `arm64`, `arm`, `riscv64`, or
    /// `None` when the format is not recognised.
    pub fn arch(&self) -> Option<&'static str> {
        if !self.arm_cores.is_empty() || self.arm_architecture.is_some() {
            let arch = self.arm_architecture.as_deref().unwrap_or("8");
            let major: u32 = arch
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap_or(8);
            return Some(if major >= 8 || arch.eq_ignore_ascii_case("aarch64") {
                "arm64"
            } else {
                "arm"
            });
        }
        if self.vendor_id.is_some() || self.family.is_some() {
            // `lm` (long mode) marks a 64-bit CPU; a cpuinfo without flags is taken as 64-bit.
            let is_64 = self.features.is_empty() || self.features.iter().any(|f| f == "lm");
            return Some(if is_64 { "x86_64" } else { "x86" });
        }
        match self.isa.as_deref() {
            Some(isa) if isa.starts_with("rv64") => Some("riscv64"),
            Some(isa) if isa.starts_with("rv32") => Some("riscv32"),
            _ => None,
        }
    }
}

/// Parses the text of `/proc/cpuinfo`. Unknown lines are skipped; a missing value stays
/// `None`, so this never fails.
pub fn parse_cpuinfo(text: &str) -> CpuInfo {
    let mut info = CpuInfo::default();
    // Distinct raw feature lines: big machines repeat one line hundreds of times (a set, so
    // that a hostile file of 10^5 distinct lines costs no 10^10 comparisons).
    let mut feature_lines: Vec<&str> = Vec::new();
    let mut feature_seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut block = Block::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        match key {
            "processor" => {
                // Ids past any CPU list's bound are garbage, as in the CPU lists.
                if let Ok(cpu) = value.parse::<usize>()
                    && cpu <= MAX_CPU_ID
                {
                    block.flush_into(&mut info);
                    block = Block {
                        cpu: Some(cpu),
                        ..Block::default()
                    };
                    info.processors.push(cpu);
                }
            }
            "vendor_id" => set_once(&mut info.vendor_id, value),
            "model name" => set_once(&mut info.model_name, value),
            "cpu family" if info.family.is_none() => info.family = value.parse().ok(),
            "model" if info.model_number.is_none() => info.model_number = value.parse().ok(),
            "flags" | "Features" if feature_seen.insert(value) => feature_lines.push(value),
            "physical id" => block.package = value.parse().ok(),
            "core id" => block.core = value.parse().ok(),
            "CPU implementer" => block.implementer = parse_hex(value),
            "CPU part" => block.part = parse_hex(value),
            "CPU architecture" => set_once(&mut info.arm_architecture, value),
            "Hardware" => set_once(&mut info.hardware, value),
            "Model" => set_once(&mut info.board_model, value),
            "isa" => set_once(&mut info.isa, value),
            _ => {}
        }
    }
    block.flush_into(&mut info);
    if let Some((first, rest)) = feature_lines.split_first() {
        let rest_sets: Vec<std::collections::HashSet<&str>> = rest
            .iter()
            .map(|line| line.split_whitespace().collect())
            .collect();
        let mut seen = std::collections::HashSet::new();
        info.features = first
            .split_whitespace()
            .filter(|f| rest_sets.iter().all(|set| set.contains(f)) && seen.insert(*f))
            .map(str::to_string)
            .collect();
    }
    info
}

/// The per-processor lines of the block being read.
#[derive(Default)]
struct Block {
    cpu: Option<usize>,
    implementer: Option<u32>,
    part: Option<u32>,
    package: Option<u32>,
    core: Option<u32>,
}

impl Block {
    fn flush_into(&self, info: &mut CpuInfo) {
        let Some(cpu) = self.cpu else { return };
        if let (Some(implementer), Some(part)) = (self.implementer, self.part) {
            info.arm_cores.push(ArmCoreId {
                cpu,
                implementer,
                part,
            });
        }
        if let (Some(package), Some(core)) = (self.package, self.core) {
            info.package_cores
                .push(PackageCoreId { cpu, package, core });
        }
    }
}

fn set_once(slot: &mut Option<String>, value: &str) {
    if slot.is_none() && !value.is_empty() {
        *slot = Some(value.to_string());
    }
}

fn parse_hex(text: &str) -> Option<u32> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))?;
    u32::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests;
