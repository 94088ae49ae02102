//! Detection against filesystem trees: the fixture machines of `tests/fixtures/EXPECTED.md`,
//! small synthetic trees for each source (core classes, ARM models, caches and NUMA nodes;
//! cgroups, cpusets and affinity in `cgroups.rs`), broken trees, and the `SIPLLM_SYSROOT`
//! variable in a child process.

use device_profile::{CacheInfo, HardwareInfo, get_hardware_info, get_hardware_info_from_root};
use std::path::{Path, PathBuf};
use std::process::Command;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn cache(info: &HardwareInfo, level: u32, kind: &str) -> Vec<(u64, u32)> {
    info.caches
        .iter()
        .filter(|c| c.level == level && c.kind == kind)
        .map(|c| (c.size_bytes, c.instances))
        .collect()
}

// ---------------------------------------------------------------------------------------
// The fixture machines: every value in EXPECTED.md.

#[test]
fn intel_i7_12700h_matches_expected() {
    let hw = get_hardware_info_from_root(&fixture("intel_i7_12700h"));
    assert_eq!(hw.cpu_model, "12th Gen Intel(R) Core(TM) i7-12700H");
    assert_eq!(hw.arch, "x86_64");
    assert_eq!(hw.logical_cores, 20);
    assert_eq!(hw.physical_cores, 14);
    assert_eq!((hw.performance_cores, hw.efficiency_cores), (6, 8));
    assert_eq!(hw.performance_cpus, (0..12).collect::<Vec<_>>());
    assert_eq!(hw.efficiency_cpus, (12..20).collect::<Vec<_>>());
    assert_eq!(hw.numa_nodes, 1);
    assert_eq!(cache(&hw, 2, "unified"), [(1280 * KIB, 6), (2048 * KIB, 2)]);
    assert_eq!(cache(&hw, 3, "unified"), [(24 * MIB, 1)]);
    assert_eq!(cache(&hw, 1, "data"), [(32 * KIB, 8), (48 * KIB, 6)]);
    assert_eq!(cache(&hw, 1, "instruction"), [(32 * KIB, 6), (64 * KIB, 8)]);
    assert_eq!(hw.l3_total_bytes, 24 * MIB);
    for feature in ["avx2", "fma", "avx_vnni"] {
        assert!(hw.simd.iter().any(|s| s == feature), "{feature} missing");
    }
    assert!(!hw.simd.iter().any(|s| s.starts_with("avx512")));
    assert_eq!(hw.effective_cpus, 20);
    assert_eq!(hw.allowed_cpus, (0..20).collect::<Vec<_>>());
    assert_eq!(hw.ram_bytes, 32_541_736 * 1024);
    assert_eq!((hw.cpu_family, hw.cpu_model_number), (Some(6), Some(154)));
    assert_eq!(hw.hardware_id(), "x86_64_intel_core_i7_12700h_20c_32gb");
    // Six P-cores with two threads each, then eight E-cores; one node; no quota.
    let mut cores: Vec<Vec<usize>> = (0..6).map(|c| vec![2 * c, 2 * c + 1]).collect();
    cores.extend((12..20).map(|cpu| vec![cpu]));
    assert_eq!(hw.core_cpus, cores);
    assert_eq!(hw.node_cpus, [(0..20).collect::<Vec<_>>()]);
    assert_eq!(hw.cpu_quota_millicpus, None);
}

#[test]
fn intel_i7_12700h_frequencies_give_the_same_split() {
    let tree = Tree::copy_of(&fixture("intel_i7_12700h"));
    std::fs::remove_dir_all(tree.path().join("sys/devices/cpu_core")).unwrap();
    std::fs::remove_dir_all(tree.path().join("sys/devices/cpu_atom")).unwrap();
    let hw = tree.detect();
    assert_eq!(hw.performance_cpus, (0..12).collect::<Vec<_>>());
    assert_eq!(hw.efficiency_cpus, (12..20).collect::<Vec<_>>());
    assert_eq!((hw.performance_cores, hw.efficiency_cores), (6, 8));
}

#[test]
fn rpi4_matches_expected() {
    let hw = get_hardware_info_from_root(&fixture("rpi4"));
    assert_eq!(hw.cpu_model, "Arm Cortex-A72");
    assert_eq!(hw.cpu_uarch, "Cortex-A72");
    assert_eq!(hw.arch, "arm64");
    assert_eq!(hw.logical_cores, 4);
    assert_eq!(hw.physical_cores, 4);
    assert_eq!((hw.performance_cores, hw.efficiency_cores), (4, 0));
    assert_eq!(hw.performance_cpus, [0, 1, 2, 3]);
    assert!(hw.efficiency_cpus.is_empty());
    assert_eq!(hw.numa_nodes, 1);
    assert_eq!(hw.core_cpus, [[0], [1], [2], [3]]);
    assert!(
        hw.node_cpus.is_empty(),
        "no node folder: {:?}",
        hw.node_cpus
    );
    assert_eq!(cache(&hw, 2, "unified"), [(MIB, 1)]);
    assert!(cache(&hw, 3, "unified").is_empty());
    assert_eq!(hw.l3_total_bytes, 0);
    assert_eq!(hw.simd, ["neon"]);
    assert_eq!(hw.effective_cpus, 4);
    assert_eq!(hw.ram_bytes, 3_882_804 * 1024);
    assert_eq!((hw.cpu_family, hw.cpu_model_number), (None, None));
    assert_eq!(hw.hardware_id(), "arm64_cortex_a72_4c_4gb");
}

/// A stand-in for a process-level probe: prints what `get_hardware_info` sees between
/// markers. Run plainly it checks the running machine; [`sysroot_variable_is_honoured`]
/// runs it again in a child process with `SIPLLM_SYSROOT` set.
#[test]
fn probe_get_hardware_info() {
    let hw = get_hardware_info();
    assert!(hw.effective_cpus >= 1 && hw.logical_cores >= 1);
    println!("<<<{}>>>", serde_json::to_string(&hw).unwrap());
}

#[test]
fn sysroot_variable_is_honoured() {
    for name in ["intel_i7_12700h", "rpi4"] {
        let root = fixture(name);
        let output = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "probe_get_hardware_info",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SIPLLM_SYSROOT", &root)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        let stdout = String::from_utf8(output.stdout).unwrap();
        let json = stdout
            .split_once("<<<")
            .and_then(|(_, rest)| rest.split_once(">>>"))
            .map(|(json, _)| json)
            .unwrap_or_else(|| panic!("no probe output in {stdout:?}"));
        let seen: HardwareInfo = serde_json::from_str(json).unwrap();
        assert_eq!(seen, get_hardware_info_from_root(&root), "{name}");
    }
}

// ---------------------------------------------------------------------------------------
// Synthetic trees (`common/mod.rs`; the cgroup and affinity ones are in `cgroups.rs`).

mod common;

use common::{Tree, XEON_GOLD};

#[test]
fn frequency_clusters_make_core_classes() {
    let tree = Tree::x86(8, XEON_GOLD, 6, 85);
    for cpu in 0..8 {
        let khz = if cpu < 4 { "3000000" } else { "2000000" };
        tree.cpu(cpu, "cpufreq/cpuinfo_max_freq", khz);
    }
    let hw = tree.detect();
    assert_eq!(hw.performance_cpus, [0, 1, 2, 3]);
    assert_eq!(hw.efficiency_cpus, [4, 5, 6, 7]);
    assert_eq!((hw.performance_cores, hw.efficiency_cores), (4, 4));

    // Within ~10% is one class (turbo-favoured cores).
    for cpu in 0..8 {
        let khz = if cpu < 2 { "4800000" } else { "4600000" };
        tree.cpu(cpu, "cpufreq/cpuinfo_max_freq", khz);
    }
    let hw = tree.detect();
    assert_eq!(hw.performance_cpus, (0..8).collect::<Vec<_>>());
    assert!(hw.efficiency_cpus.is_empty());
    assert_eq!((hw.performance_cores, hw.efficiency_cores), (8, 0));
}

#[test]
fn arm_big_little_from_cpu_capacity() {
    // Four Cortex-A510, three Cortex-A715, one Cortex-X3.
    let mut parts = vec![(0x41, 0xd46); 4];
    parts.extend([(0x41, 0xd4d); 3]);
    parts.push((0x41, 0xd4e));
    let tree = Tree::arm(&parts, "fp asimd evtstrm asimdhp cpuid asimddp i8mm bf16");
    for (cpu, capacity) in [400, 400, 400, 400, 870, 870, 870, 1024].iter().enumerate() {
        tree.cpu(cpu, "cpu_capacity", &format!("{capacity}\n"));
    }
    let hw = tree.detect();
    assert_eq!(hw.arch, "arm64");
    assert_eq!(hw.cpu_model, "Arm Cortex-X3 + Cortex-A715 + Cortex-A510");
    assert_eq!(hw.cpu_uarch, "Cortex-X3");
    assert_eq!(hw.performance_cpus, [4, 5, 6, 7]);
    assert_eq!(hw.efficiency_cpus, [0, 1, 2, 3]);
    assert_eq!((hw.performance_cores, hw.efficiency_cores), (4, 4));
    assert_eq!(hw.simd, ["neon", "fp16", "dotprod", "i8mm", "bf16"]);
    assert_eq!(hw.hardware_id(), "arm64_cortex_x3_8c_8gb");
}

#[test]
fn arm_equal_capacities_fall_back_to_frequencies() {
    // A device tree without capacity-dmips-mhz gives 1024 everywhere; the clocks differ.
    let parts = [(0x41, 0xd03), (0x41, 0xd03), (0x41, 0xd09), (0x41, 0xd09)];
    let tree = Tree::arm(&parts, "fp asimd");
    for (cpu, khz) in ["1800000", "1800000", "2200000", "2200000"]
        .iter()
        .enumerate()
    {
        tree.cpu(cpu, "cpu_capacity", "1024\n")
            .cpu(cpu, "cpufreq/cpuinfo_max_freq", khz);
    }
    let hw = tree.detect();
    assert_eq!(hw.performance_cpus, [2, 3]);
    assert_eq!(hw.efficiency_cpus, [0, 1]);
    assert_eq!(hw.cpu_uarch, "Cortex-A73");
    assert_eq!(hw.cpu_model, "Arm Cortex-A73 + Cortex-A53");
}

#[test]
fn arm_frequency_policies_without_per_cpu_folders() {
    let parts = [(0x41, 0xd05), (0x41, 0xd05), (0x41, 0xd0b), (0x41, 0xd0b)];
    let tree = Tree::arm(&parts, "fp asimd asimddp");
    tree.file(
        "sys/devices/system/cpu/cpufreq/policy0/related_cpus",
        "0 1\n",
    )
    .file(
        "sys/devices/system/cpu/cpufreq/policy0/cpuinfo_max_freq",
        "1800000\n",
    )
    .file(
        "sys/devices/system/cpu/cpufreq/policy2/related_cpus",
        "2 3\n",
    )
    .file(
        "sys/devices/system/cpu/cpufreq/policy2/cpuinfo_max_freq",
        "2400000\n",
    );
    let hw = tree.detect();
    assert_eq!(hw.performance_cpus, [2, 3]);
    assert_eq!(hw.efficiency_cpus, [0, 1]);
    assert_eq!(hw.hardware_id(), "arm64_cortex_a76_4c_8gb");
}

#[test]
fn graviton2_neoverse_n1() {
    let tree = Tree::arm(
        &[(0x41, 0xd0c); 4],
        "fp asimd evtstrm aes crc32 atomics asimdrdm lrcpc dcpop asimddp",
    );
    let hw = tree.detect();
    assert_eq!(hw.cpu_model, "Arm Neoverse-N1");
    assert_eq!(hw.simd, ["neon", "dotprod"]);
    assert_eq!((hw.performance_cores, hw.efficiency_cores), (4, 0));
    assert_eq!(hw.hardware_id(), "arm64_neoverse_n1_4c_8gb");
}

#[test]
fn unknown_arm_part_still_names_the_model() {
    let hw = Tree::arm(&[(0x41, 0xd99); 2], "fp asimd").detect();
    assert_eq!(hw.cpu_model, "Arm part 0xd99");
    assert_eq!(hw.hardware_id(), "arm64_arm_part_0xd99_2c_8gb");
}

#[test]
fn generic_cloud_xeon_gains_family_and_model() {
    let skylake = Tree::x86(4, "Intel(R) Xeon(R) CPU @ 2.20GHz", 6, 85).detect();
    let broadwell = Tree::x86(4, "Intel(R) Xeon(R) CPU @ 2.20GHz", 6, 79).detect();
    assert_eq!(skylake.hardware_id(), "x86_64_intel_xeon_f6m85_4c_16gb");
    assert_eq!(broadwell.hardware_id(), "x86_64_intel_xeon_f6m79_4c_16gb");
    assert_eq!(skylake.simd, ["sse4_2", "avx", "avx2", "fma", "avx512f"]);
}

#[test]
fn epyc_with_several_l3s_and_numa_nodes() {
    // 8 cores with SMT (CPU i and i+8 are siblings), two CCXs of 4 cores, two NUMA nodes.
    let tree = Tree::new();
    let mut cpuinfo = String::new();
    for cpu in 0..16 {
        let core = cpu % 8;
        let ccx = core / 4;
        cpuinfo.push_str(&format!(
            "processor\t: {cpu}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n\
             model name\t: AMD EPYC 7B13 64-Core Processor\nphysical id\t: 0\ncore id\t\t: {core}\n\
             flags\t\t: fpu lm avx avx2 fma\n\n"
        ));
        let siblings = format!("{core},{}", core + 8);
        let ccx_cpus = format!(
            "{}-{},{}-{}",
            ccx * 4,
            ccx * 4 + 3,
            ccx * 4 + 8,
            ccx * 4 + 11
        );
        tree.cpu(cpu, "topology/core_cpus_list", &siblings);
        tree.cache(cpu, 0, 1, "Data", "32K", &siblings);
        tree.cache(cpu, 1, 1, "Instruction", "32K", &siblings);
        tree.cache(cpu, 2, 2, "Unified", "512K", &siblings);
        tree.cache(cpu, 3, 3, "Unified", "32768K", &ccx_cpus);
    }
    tree.file("proc/cpuinfo", &cpuinfo)
        .file("proc/meminfo", "MemTotal:       65842196 kB\n")
        .file("sys/devices/system/cpu/online", "0-15\n")
        .file("sys/devices/system/node/online", "0-1\n")
        .file("sys/devices/system/node/node0/cpulist", "0-3,8-11\n")
        .file("sys/devices/system/node/node1/cpulist", "4-7,12-15\n");
    let hw = tree.detect();
    assert_eq!(hw.logical_cores, 16);
    assert_eq!(hw.physical_cores, 8);
    assert_eq!(hw.numa_nodes, 2);
    assert_eq!(cache(&hw, 3, "unified"), [(32 * MIB, 2)]);
    assert_eq!(hw.l3_total_bytes, 64 * MIB);
    assert_eq!(cache(&hw, 2, "unified"), [(512 * KIB, 8)]);
    assert_eq!(cache(&hw, 1, "data"), [(32 * KIB, 8)]);
    assert_eq!(hw.hardware_id(), "x86_64_amd_epyc_7b13_16c_64gb");
    assert_eq!(
        hw.core_cpus,
        (0..8).map(|c| vec![c, c + 8]).collect::<Vec<_>>()
    );
    assert_eq!(
        hw.node_cpus,
        [
            vec![0, 1, 2, 3, 8, 9, 10, 11],
            vec![4, 5, 6, 7, 12, 13, 14, 15]
        ]
    );

    assert_eq!(hw.nodes().map(|(n, _)| n).collect::<Vec<_>>(), [0, 1]);

    // Without a node `online` list, the node folders are counted; numbered with a gap,
    // each keeps its own number.
    std::fs::remove_file(tree.path().join("sys/devices/system/node/online")).unwrap();
    let node = |n| tree.path().join(format!("sys/devices/system/node/node{n}"));
    std::fs::rename(node(1), node(3)).unwrap();
    let gap = tree.detect();
    assert_eq!(gap.numa_nodes, 2);
    assert_eq!(
        gap.nodes().map(|(n, c)| (n, c[0])).collect::<Vec<_>>(),
        [(0, 0), (3, 4)]
    );
    // Without sysfs topology, cpuinfo's (physical id, core id) pairs give the cores.
    for cpu in 0..16 {
        std::fs::remove_dir_all(
            tree.path()
                .join(format!("sys/devices/system/cpu/cpu{cpu}/topology")),
        )
        .unwrap();
    }
    assert_eq!(tree.detect().physical_cores, 8);
}

// ---------------------------------------------------------------------------------------
// Broken trees: partial information, never a panic.

#[test]
fn empty_root_gives_unknowns() {
    let hw = Tree::new().detect();
    assert_eq!(hw.arch, "");
    assert_eq!(hw.cpu_model, "");
    assert_eq!(
        (hw.logical_cores, hw.physical_cores, hw.ram_bytes),
        (0, 0, 0)
    );
    assert!(hw.caches.is_empty() && hw.simd.is_empty() && hw.allowed_cpus.is_empty());
    assert_eq!(hw.numa_nodes, 1);
    assert_eq!(hw.effective_cpus, 1);
    assert_eq!(hw.hardware_id(), "unknown_unknown_0c_0gb");
    // A root that does not exist at all is the same.
    assert_eq!(
        get_hardware_info_from_root(Path::new("/nonexistent/root")),
        hw
    );
    // A quota is CPU time, not CPUs: with no CPU known it makes no count of them.
    let quota = Tree::new();
    quota.file(
        "sys/fs/cgroup/cpu.max",
        "18446744073709551615 1
",
    );
    assert_eq!(quota.detect().effective_cpus, 1);
}

#[test]
fn missing_files_leave_only_their_fields_unknown() {
    let tree = Tree::copy_of(&fixture("rpi4"));
    std::fs::remove_file(tree.path().join("proc/meminfo")).unwrap();
    std::fs::remove_dir_all(tree.path().join("sys")).unwrap();
    let hw = tree.detect();
    assert_eq!(hw.ram_bytes, 0);
    // The `processor` lines stand in for the online list.
    assert_eq!(hw.logical_cores, 4);
    assert_eq!(hw.physical_cores, 4);
    assert_eq!(hw.cpu_model, "Arm Cortex-A72");
    assert!(hw.caches.is_empty());
    assert_eq!(hw.hardware_id(), "arm64_cortex_a72_4c_0gb");
}

#[test]
fn garbage_files_give_partial_info_without_panic() {
    let garbage = [
        "",
        "garbage",
        "-1",
        "99999999999999999999999",
        "0-4294967295",
        "\u{0}\u{1}\n\n::::",
        ":\n:\nprocessor : x\nCPU part : 0xzz\n",
    ];
    let tree = Tree::copy_of(&fixture("rpi4"));
    for text in garbage {
        overwrite_all(tree.path(), text.as_bytes());
        let hw = tree.detect();
        assert!(hw.effective_cpus >= 1, "{text:?}");
        assert!(hw.logical_cores <= 4, "{text:?}");
        let id = hw.hardware_id();
        assert!(id.len() <= 64 && !id.contains("__"), "{text:?}: {id}");
    }
    // Invalid UTF-8 in one file hides nothing else.
    let tree = Tree::copy_of(&fixture("intel_i7_12700h"));
    std::fs::write(tree.path().join("proc/meminfo"), b"MemTotal: \xff\xfe kB\n").unwrap();
    let hw = tree.detect();
    assert_eq!(hw.ram_bytes, 0);
    assert_eq!(hw.logical_cores, 20);
    assert_eq!(hw.hardware_id(), "x86_64_intel_core_i7_12700h_20c_0gb");
}

#[cfg(unix)]
#[test]
fn endless_files_are_not_read_forever() {
    let tree = Tree::copy_of(&fixture("rpi4"));
    let cpuinfo = tree.path().join("proc/cpuinfo");
    std::fs::remove_file(&cpuinfo).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &cpuinfo).unwrap();
    let hw = tree.detect();
    assert_eq!(hw.arch, "");
    assert_eq!(hw.logical_cores, 4);
    assert_eq!(hw.ram_bytes, 3_882_804 * 1024);
}

/// How long a detection over odd files may take before its test fails: far more than it
/// ever needs, so this only catches a read that blocks.
#[cfg(unix)]
const WATCHDOG: std::time::Duration = std::time::Duration::from_secs(60);

/// Detects `root` under the workspace's test watchdog, so a blocking read fails the test
/// instead of hanging the run.
#[cfg(unix)]
fn detect_within_watchdog(root: &Path) -> HardwareInfo {
    let root = root.to_path_buf();
    watchdog::within("detection (a read blocks)", WATCHDOG, move || {
        get_hardware_info_from_root(&root)
    })
}

/// Replaces the file at `relative` under `root` with a FIFO that nobody writes to: opening
/// it for reading the ordinary way blocks forever.
#[cfg(unix)]
fn make_fifo(root: &Path, relative: &str) {
    let path = root.join(relative);
    if path.exists() {
        std::fs::remove_file(&path).unwrap();
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    nix::unistd::mkfifo(
        &path,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .unwrap();
}

#[cfg(unix)]
#[test]
fn fifo_at_proc_cpuinfo_does_not_block() {
    let tree = Tree::copy_of(&fixture("rpi4"));
    make_fifo(tree.path(), "proc/cpuinfo");
    let hw = detect_within_watchdog(tree.path());
    // Only what cpuinfo alone gives is unknown.
    assert_eq!(hw.arch, "");
    assert_eq!(hw.cpu_model, "");
    assert!(hw.simd.is_empty());
    assert_eq!(hw.logical_cores, 4);
    assert_eq!(hw.ram_bytes, 3_882_804 * 1024);
    assert_eq!(hw.effective_cpus, 4);
}

#[cfg(unix)]
#[test]
fn fifos_in_sys_files_do_not_block() {
    let tree = Tree::copy_of(&fixture("intel_i7_12700h"));
    std::fs::remove_dir_all(tree.path().join("sys/devices/cpu_core")).unwrap();
    std::fs::remove_dir_all(tree.path().join("sys/devices/cpu_atom")).unwrap();
    make_fifo(tree.path(), "sys/devices/system/cpu/cpu0/cache/index3/size");
    make_fifo(
        tree.path(),
        "sys/devices/system/cpu/cpu19/cpufreq/cpuinfo_max_freq",
    );
    make_fifo(tree.path(), "sys/fs/cgroup/cpu.max");
    let hw = detect_within_watchdog(tree.path());
    // The L3 is still found, its size unknown.
    assert_eq!(cache(&hw, 3, "unified"), [(0, 1)]);
    assert_eq!(hw.l3_total_bytes, 0);
    // Without every CPU's frequency there are no core classes; the rest is intact.
    assert!(hw.efficiency_cpus.is_empty());
    assert_eq!(hw.performance_cpus, (0..20).collect::<Vec<_>>());
    assert_eq!(hw.logical_cores, 20);
    assert_eq!(hw.effective_cpus, 20);
    assert_eq!(hw.hardware_id(), "x86_64_intel_core_i7_12700h_20c_32gb");
}

#[cfg(unix)]
#[test]
fn nothing_readable_still_gives_one_effective_cpu() {
    // Every file of a full fixture is a FIFO: no file can be read, only folders listed.
    let tree = Tree::copy_of(&fixture("intel_i7_12700h"));
    fifo_all(tree.path(), tree.path());
    let hw = detect_within_watchdog(tree.path());
    assert_eq!(
        (hw.logical_cores, hw.physical_cores, hw.ram_bytes),
        (0, 0, 0)
    );
    assert!(hw.allowed_cpus.is_empty() && hw.caches.is_empty());
    assert_eq!(hw.effective_cpus, 1);
    assert_eq!(hw.hardware_id(), "unknown_unknown_0c_0gb");
}

/// Replaces every file below `dir` with a FIFO.
#[cfg(unix)]
fn fifo_all(root: &Path, dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            fifo_all(root, &entry.path());
        } else {
            let relative = entry.path().strip_prefix(root).unwrap().to_path_buf();
            make_fifo(root, relative.to_str().unwrap());
        }
    }
}

#[test]
fn one_garbage_cache_file_drops_only_its_value() {
    let tree = Tree::copy_of(&fixture("intel_i7_12700h"));
    for cpu in 0..20 {
        std::fs::write(
            tree.path()
                .join(format!("sys/devices/system/cpu/cpu{cpu}/cache/index3/size")),
            "lots\n",
        )
        .unwrap();
    }
    let hw = tree.detect();
    assert_eq!(hw.l3_total_bytes, 0);
    assert!(hw.caches.contains(&CacheInfo {
        level: 3,
        kind: "unified".into(),
        size_bytes: 0,
        instances: 1
    }));
    assert_eq!(cache(&hw, 2, "unified"), [(1280 * KIB, 6), (2048 * KIB, 2)]);
}

fn overwrite_all(dir: &Path, bytes: &[u8]) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            overwrite_all(&entry.path(), bytes);
        } else {
            std::fs::write(entry.path(), bytes).unwrap();
        }
    }
}
