//! One text as every `/proc`, `/sys` and cgroup file device-profile parses, then as a whole
//! machine's tree: the first line names the file the rest is.
#![no_main]
#![forbid(unsafe_code)]

use device_profile::parse;
use libfuzzer_sys::fuzz_target;

/// The files a machine's tree may hold, as `get_hardware_info_from_root` reads them.
const FILES: &[&str] = &[
    "proc/cpuinfo",
    "proc/meminfo",
    "proc/self/status",
    "proc/self/cgroup",
    "proc/self/mountinfo",
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/possible",
    "sys/devices/system/cpu/cpu0/topology/core_id",
    "sys/devices/system/cpu/cpu0/topology/physical_package_id",
    "sys/devices/system/cpu/cpu0/topology/thread_siblings_list",
    "sys/devices/system/cpu/cpu0/cache/index0/size",
    "sys/devices/system/cpu/cpu0/cache/index0/level",
    "sys/devices/system/cpu/cpu0/cache/index0/type",
    "sys/devices/system/cpu/cpu0/cache/index0/shared_cpu_list",
    "sys/devices/system/cpu/cpu0/cache/index3/size",
    "sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list",
    "sys/devices/system/node/online",
    "sys/devices/system/node/node0/cpulist",
    "sys/fs/cgroup/cpu.max",
    "sys/fs/cgroup/cpuset.cpus.effective",
    "sys/fs/cgroup/memory.max",
    "sys/fs/cgroup/cpu/cpu.cfs_quota_us",
    "sys/fs/cgroup/cpu/cpu.cfs_period_us",
];

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse::parse_cpu_list(&text);
    let _ = parse::parse_cpu_mask(&text);
    let _ = parse::parse_size(&text);
    let _ = parse::parse_meminfo_total(&text);
    let _ = parse::parse_meminfo_available(&text);
    let _ = parse::parse_status_vm_size(&text);
    let _ = parse::parse_status_cpus_allowed(&text);
    let _ = parse::parse_cgroup_v2_cpu_max(&text);
    let (quota, period) = text.split_once('\n').unwrap_or((&text, ""));
    let _ = parse::parse_cgroup_v1_cpu_quota(quota, period);
    let _ = parse::parse_cpuinfo(&text);
    if let Ok(cpus) = parse::parse_cpu_list(&text) {
        let _ = parse::format_cpu_list(&cpus);
    }

    // A whole tree: each section `@<index>\n<text>` is the file FILES[index].
    let root = tempfile::tempdir().expect("a temporary folder");
    for section in text.split("\n@").filter(|s| !s.is_empty()) {
        let (head, body) = section.split_once('\n').unwrap_or((section, ""));
        let Some(index) = head.trim_start_matches('@').parse::<usize>().ok() else {
            continue;
        };
        let path = root.path().join(FILES[index % FILES.len()]);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, body).unwrap();
    }
    let hw = device_profile::get_hardware_info_from_root(root.path());
    let _ = device_profile::available_memory_bytes_from_root(root.path());
    let _ = (hw.hardware_id(), format!("{hw:?}"));
});
