//! macOS detection through `sysctlbyname`.
//!
//! The mapping from sysctl names to [`HardwareInfo`] is plain code over the [`Sysctl`] trait
//! and is tested everywhere with a fake; only [`LiveSysctl`], two small FFI calls, is
//! compiled on macOS alone.

use crate::info::{CacheInfo, HardwareInfo, host_arch};
use crate::simd;

/// A source of sysctl values by name.
pub(crate) trait Sysctl {
    /// A string value such as `machdep.cpu.brand_string`.
    fn string(&self, name: &str) -> Option<String>;
    /// An integer value such as `hw.memsize`.
    fn number(&self, name: &str) -> Option<u64>;
}

/// Builds the machine description from sysctl values. macOS has no cgroups and reports no
/// CPU ids per class, so `allowed_cpus` is every CPU and the class CPU lists stay empty
/// on machines with two classes.
pub(crate) fn from_sysctl(sysctl: &impl Sysctl) -> HardwareInfo {
    let count = |name: &str| {
        sysctl
            .number(name)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0)
    };
    let logical_cores = count("hw.logicalcpu");
    let physical_cores = count("hw.physicalcpu");
    let mut info = HardwareInfo {
        arch: host_arch(),
        cpu_model: sysctl
            .string("machdep.cpu.brand_string")
            .unwrap_or_default(),
        logical_cores,
        physical_cores,
        ram_bytes: sysctl.number("hw.memsize").unwrap_or(0),
        page_size: sysctl.number("hw.pagesize").unwrap_or(0),
        simd: simd::detect_running(),
        numa_nodes: 1,
        allowed_cpus: (0..logical_cores).collect(),
        effective_cpus: logical_cores.max(1),
        ..HardwareInfo::default()
    };
    let n_levels = count("hw.nperflevels");
    if n_levels >= 2 {
        // perflevel0 is the fastest class; the last one is the efficiency class.
        info.performance_cores = (0..n_levels - 1)
            .map(|level| count(&format!("hw.perflevel{level}.physicalcpu")))
            .sum();
        info.efficiency_cores = count(&format!("hw.perflevel{}.physicalcpu", n_levels - 1));
        for level in 0..n_levels {
            info.caches.extend(perflevel_caches(sysctl, level));
        }
    } else {
        info.performance_cores = physical_cores;
        info.performance_cpus = info.allowed_cpus.clone();
        let per_core = |name: &str, level: u32, kind: &str, instances: usize| {
            let size_bytes = sysctl.number(name).filter(|&size| size > 0)?;
            Some(CacheInfo {
                level,
                kind: kind.to_string(),
                size_bytes,
                instances: u32::try_from(instances).unwrap_or(u32::MAX),
            })
        };
        info.caches.extend(
            [
                per_core("hw.l1dcachesize", 1, "data", physical_cores),
                per_core("hw.l1icachesize", 1, "instruction", physical_cores),
                per_core("hw.l2cachesize", 2, "unified", physical_cores),
                per_core("hw.l3cachesize", 3, "unified", 1),
            ]
            .into_iter()
            .flatten(),
        );
    }
    info.l3_total_bytes = info
        .caches
        .iter()
        .filter(|cache| cache.level == 3)
        .map(|cache| cache.size_bytes * u64::from(cache.instances))
        .sum();
    info
}

/// The L1 and L2 caches of one Apple Silicon performance level.
fn perflevel_caches(sysctl: &impl Sysctl, level: usize) -> Vec<CacheInfo> {
    let number = |name: &str| sysctl.number(&format!("hw.perflevel{level}.{name}"));
    let physical = number("physicalcpu").unwrap_or(0);
    let logical = number("logicalcpu").unwrap_or(0);
    let l2_instances = match number("cpusperl2") {
        Some(per_l2) if per_l2 > 0 => logical.div_ceil(per_l2),
        _ => 0,
    };
    [
        ("l1dcachesize", 1, "data", physical),
        ("l1icachesize", 1, "instruction", physical),
        ("l2cachesize", 2, "unified", l2_instances),
    ]
    .into_iter()
    .filter_map(|(name, cache_level, kind, instances)| {
        let size_bytes = number(name).filter(|&size| size > 0)?;
        (instances > 0).then(|| CacheInfo {
            level: cache_level,
            kind: kind.to_string(),
            size_bytes,
            instances: u32::try_from(instances).unwrap_or(u32::MAX),
        })
    })
    .collect()
}

/// The running Mac's sysctl values.
#[cfg(target_os = "macos")]
pub(crate) struct LiveSysctl;

#[cfg(target_os = "macos")]
impl Sysctl for LiveSysctl {
    fn string(&self, name: &str) -> Option<String> {
        let name = std::ffi::CString::new(name).ok()?;
        let mut len: libc::size_t = 0;
        // SAFETY: `name` is NUL-terminated; a null `oldp` asks only for the value's size,
        // which the kernel writes to `len`; no new value is given.
        let rc = unsafe {
            libc::sysctlbyname(
                name.as_ptr(),
                std::ptr::null_mut(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        if rc != 0 || len == 0 {
            return None;
        }
        let mut buf = vec![0u8; len];
        // SAFETY: `buf` is writable for `len` bytes and `len` says so; the kernel writes at
        // most `len` bytes and stores the length written back into `len`.
        let rc = unsafe {
            libc::sysctlbyname(
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        if rc != 0 {
            return None;
        }
        buf.truncate(len);
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Some(String::from_utf8_lossy(&buf[..end]).trim().to_string())
    }

    fn number(&self, name: &str) -> Option<u64> {
        let name = std::ffi::CString::new(name).ok()?;
        let mut value: u64 = 0;
        let mut len: libc::size_t = std::mem::size_of::<u64>();
        // SAFETY: `name` is NUL-terminated; `value` is a writable u64 and `len` holds its
        // size, so the kernel writes at most 8 bytes; no new value is given.
        let rc = unsafe {
            libc::sysctlbyname(
                name.as_ptr(),
                (&raw mut value).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        // A 4-byte (int) value lands in the low bytes of the zeroed u64: Macs are
        // little-endian.
        (rc == 0 && (1..=8).contains(&len)).then_some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct FakeSysctl(HashMap<&'static str, &'static str>);

    impl Sysctl for FakeSysctl {
        fn string(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|value| value.to_string())
        }
        fn number(&self, name: &str) -> Option<u64> {
            self.0.get(name)?.parse().ok()
        }
    }

    #[test]
    fn apple_m3() {
        let sysctl = FakeSysctl(HashMap::from([
            ("machdep.cpu.brand_string", "Apple M3"),
            ("hw.logicalcpu", "8"),
            ("hw.physicalcpu", "8"),
            ("hw.memsize", "17179869184"),
            ("hw.pagesize", "16384"),
            ("hw.nperflevels", "2"),
            ("hw.perflevel0.physicalcpu", "4"),
            ("hw.perflevel0.logicalcpu", "4"),
            ("hw.perflevel0.l1dcachesize", "131072"),
            ("hw.perflevel0.l2cachesize", "16777216"),
            ("hw.perflevel0.cpusperl2", "4"),
            ("hw.perflevel1.physicalcpu", "4"),
            ("hw.perflevel1.logicalcpu", "4"),
            ("hw.perflevel1.l2cachesize", "4194304"),
            ("hw.perflevel1.cpusperl2", "4"),
        ]));
        let info = from_sysctl(&sysctl);
        assert_eq!(info.cpu_model, "Apple M3");
        assert_eq!((info.logical_cores, info.physical_cores), (8, 8));
        assert_eq!((info.performance_cores, info.efficiency_cores), (4, 4));
        assert_eq!(info.page_size, 16384);
        assert_eq!(info.effective_cpus, 8);
        assert_eq!(info.l3_total_bytes, 0);
        let l2: Vec<(u64, u32)> = info
            .caches
            .iter()
            .filter(|c| c.level == 2)
            .map(|c| (c.size_bytes, c.instances))
            .collect();
        assert_eq!(l2, [(16 << 20, 1), (4 << 20, 1)]);
        let id = info.hardware_id();
        assert!(id.ends_with("_apple_m3_8c_16gb"), "{id}");
    }

    #[test]
    fn intel_mac_without_perflevels() {
        let sysctl = FakeSysctl(HashMap::from([
            (
                "machdep.cpu.brand_string",
                "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz",
            ),
            ("hw.logicalcpu", "16"),
            ("hw.physicalcpu", "8"),
            ("hw.l3cachesize", "16777216"),
        ]));
        let info = from_sysctl(&sysctl);
        assert_eq!((info.performance_cores, info.efficiency_cores), (8, 0));
        assert_eq!(info.performance_cpus, (0..16).collect::<Vec<_>>());
        assert_eq!(info.l3_total_bytes, 16 << 20);
    }

    #[test]
    fn nothing_known_gives_a_floor() {
        let info = from_sysctl(&FakeSysctl(HashMap::new()));
        assert_eq!(info.logical_cores, 0);
        assert_eq!(info.effective_cpus, 1);
    }
}
