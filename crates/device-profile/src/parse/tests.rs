//! The parsers against the texts of real machines and against hostile ones.

use super::*;
use proptest::prelude::*;

#[test]
fn cpu_lists_merge_overlapping_and_repeated_ranges() {
    assert_eq!(
        parse_cpu_list("5,0-3,2-6,6,1").unwrap(),
        (0..=6).collect::<Vec<_>>()
    );
    assert_eq!(parse_cpu_list("8-9,0").unwrap(), [0, 8, 9]);
    let top = format!("{MAX_CPU_ID}");
    assert_eq!(
        parse_cpu_list(&format!("{top},{top}")).unwrap(),
        [MAX_CPU_ID]
    );
    assert_eq!(
        parse_cpu_list(&format!("0-{top},0-{top}")).unwrap().len(),
        MAX_CPU_ID + 1
    );
    // Past the merge threshold: repeated and interleaved ids, merged as they come.
    let many: Vec<String> = (0..20_000).map(|i| ((i * 7) % 3000).to_string()).collect();
    assert_eq!(
        parse_cpu_list(&many.join(",")).unwrap(),
        (0..3000).collect::<Vec<_>>()
    );
}

#[test]
fn cpu_lists() {
    assert_eq!(
        parse_cpu_list("0-3,8-11").unwrap(),
        vec![0, 1, 2, 3, 8, 9, 10, 11]
    );
    assert_eq!(parse_cpu_list("5\n").unwrap(), vec![5]);
    assert_eq!(parse_cpu_list("").unwrap(), Vec::<usize>::new());
    assert_eq!(parse_cpu_list(" \n").unwrap(), Vec::<usize>::new());
    assert_eq!(parse_cpu_list("3,1-2,2").unwrap(), vec![1, 2, 3]);
    for garbage in ["a", "1-", "-1", "3-1", "1-2-3", "0-99999999", "0x3", "1 2"] {
        assert!(
            parse_cpu_list(garbage).is_err(),
            "{garbage:?} should be rejected"
        );
    }
}

#[test]
fn cpu_masks() {
    assert_eq!(parse_cpu_mask("f").unwrap(), vec![0, 1, 2, 3]);
    assert_eq!(parse_cpu_mask("00000000,00000101\n").unwrap(), vec![0, 8]);
    assert_eq!(parse_cpu_mask("3").unwrap(), vec![0, 1]);
    assert!(parse_cpu_mask("xyz").is_err());
    assert!(parse_cpu_mask("").is_err());
}

#[test]
fn meminfo_available() {
    let text = "MemTotal:       32541736 kB\nMemAvailable:   22779215 kB\n";
    assert_eq!(parse_meminfo_available(text).unwrap(), 22_779_215 * 1024);
    assert!(parse_meminfo_available("MemTotal: 1 kB\n").is_err());
}

#[test]
fn status_vm_size() {
    let text = "Name:\tsipllm\nVmPeak:\t  20000 kB\nVmSize:\t   15872 kB\nVmRSS:\t 4000 kB\n";
    assert_eq!(parse_status_vm_size(text).unwrap(), 15_872 * 1024);
    assert!(parse_status_vm_size("VmPeak: 1 kB\n").is_err());
    assert!(parse_status_vm_size("VmSize: lots\n").is_err());
}

#[test]
fn repeated_wide_ranges_stay_bounded() {
    let text = "0-65536,".repeat(20_000);
    let cpus = parse_cpu_list(&text).unwrap();
    assert_eq!(cpus.len(), MAX_CPU_ID + 1);
    assert_eq!(cpus.last(), Some(&MAX_CPU_ID));
}

#[test]
fn format_cpu_lists() {
    assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 9, 10, 11]), "0-3,8-11");
    assert_eq!(format_cpu_list(&[4]), "4");
    assert_eq!(format_cpu_list(&[1, 3]), "1,3");
    assert_eq!(format_cpu_list(&[]), "");
}

proptest! {
    #[test]
    fn cpu_list_round_trips(cpus in proptest::collection::btree_set(0usize..300, 0..40)) {
        let cpus: Vec<usize> = cpus.into_iter().collect();
        prop_assert_eq!(parse_cpu_list(&format_cpu_list(&cpus)).unwrap(), cpus);
    }

    #[test]
    fn parsers_never_panic(text in ".{0,64}") {
        let _ = parse_cpu_list(&text);
        let _ = parse_cpu_mask(&text);
        let _ = parse_size(&text);
        let _ = parse_meminfo_total(&text);
        let _ = parse_cgroup_v2_cpu_max(&text);
        let _ = parse_cgroup_v1_cpu_quota(&text, &text);
        let _ = parse_cpuinfo(&text).arch();
    }
}

#[test]
fn sizes() {
    assert_eq!(parse_size("32K").unwrap(), 32 * 1024);
    assert_eq!(parse_size("1024K\n").unwrap(), 1024 * 1024);
    assert_eq!(parse_size("32M").unwrap(), 32 * 1024 * 1024);
    assert_eq!(parse_size("1G").unwrap(), 1 << 30);
    assert_eq!(parse_size("24576 KB").unwrap(), 24 << 20);
    assert_eq!(parse_size("   32541736 kB").unwrap(), 32_541_736 * 1024);
    assert_eq!(parse_size("512").unwrap(), 512);
    for garbage in ["", "K", "12Q", "-5K", "99999999999999999999K", "1.5M"] {
        assert!(
            parse_size(garbage).is_err(),
            "{garbage:?} should be rejected"
        );
    }
}

#[test]
fn meminfo() {
    let text = "MemTotal:       32541736 kB\nMemFree:        19525041 kB\n";
    assert_eq!(parse_meminfo_total(text).unwrap(), 32_541_736 * 1024);
    assert_eq!(parse_meminfo_total("MemFree: 1 kB\n"), Err(Error::MemTotal));
    assert_eq!(
        parse_meminfo_total("MemTotal: lots\n"),
        Err(Error::MemTotal)
    );
}

#[test]
fn status_affinity() {
    let text = "Name:\tdetector\nCpus_allowed:\tfffff\nCpus_allowed_list:\t0-19\n";
    assert_eq!(
        parse_status_cpus_allowed(text).unwrap(),
        Some((0..20).collect::<Vec<_>>())
    );
    assert_eq!(parse_status_cpus_allowed("Name:\tx\n").unwrap(), None);
    assert_eq!(
        parse_status_cpus_allowed("Cpus_allowed:\t00000000,0000000a\n").unwrap(),
        Some(vec![1, 3])
    );
    assert!(parse_status_cpus_allowed("Cpus_allowed_list:\tzz\n").is_err());
}

#[test]
fn cgroup_v2_cpu_max() {
    assert_eq!(parse_cgroup_v2_cpu_max("max 100000\n").unwrap(), None);
    assert_eq!(parse_cgroup_v2_cpu_max("max").unwrap(), None);
    let quota = parse_cgroup_v2_cpu_max("200000 100000\n").unwrap().unwrap();
    assert_eq!(
        quota,
        CpuQuota {
            quota_us: 200_000,
            period_us: 100_000
        }
    );
    assert_eq!(quota.cpus(), 2);
    for garbage in ["", "abc 100000", "100000 0", "0 100000", "1 2 3", "max x"] {
        assert!(parse_cgroup_v2_cpu_max(garbage).is_err(), "{garbage:?}");
    }
}

#[test]
fn cgroup_v1_quota() {
    assert_eq!(parse_cgroup_v1_cpu_quota("-1\n", "100000\n").unwrap(), None);
    let quota = parse_cgroup_v1_cpu_quota("150000", "100000")
        .unwrap()
        .unwrap();
    assert_eq!(quota.cpus(), 2);
    assert!(parse_cgroup_v1_cpu_quota("x", "100000").is_err());
    assert!(parse_cgroup_v1_cpu_quota("100000", "0").is_err());
}

#[test]
fn quota_rounding_is_ceil_and_at_least_one() {
    let cpus = |quota_us, period_us| {
        CpuQuota {
            quota_us,
            period_us,
        }
        .cpus()
    };
    assert_eq!(cpus(100_000, 100_000), 1);
    assert_eq!(cpus(100_001, 100_000), 2);
    assert_eq!(cpus(50_000, 100_000), 1);
    assert_eq!(cpus(1, 100_000), 1);
    assert_eq!(cpus(400_000, 100_000), 4);
}

const X86: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
    model\t\t: 85\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n\
    flags\t\t: fpu lm avx2 fma avx512f\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n\
    cpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n\
    flags\t\t: fpu lm avx2 fma avx512f\n\n";

#[test]
fn cpuinfo_x86() {
    let info = parse_cpuinfo(X86);
    assert_eq!(info.processors, vec![0, 1]);
    assert_eq!(info.vendor_id.as_deref(), Some("GenuineIntel"));
    assert_eq!(
        info.model_name.as_deref(),
        Some("Intel(R) Xeon(R) CPU @ 2.20GHz")
    );
    assert_eq!(info.family, Some(6));
    assert_eq!(info.model_number, Some(85));
    assert_eq!(info.features, ["fpu", "lm", "avx2", "fma", "avx512f"]);
    assert!(info.arm_cores.is_empty());
    assert!(info.package_cores.is_empty());
    assert_eq!(info.arch(), Some("x86_64"));
    let with_ids = "processor : 0\nphysical id : 0\ncore id : 4\n\nprocessor : 1\n\
        physical id : 1\ncore id : 4\n";
    assert_eq!(
        parse_cpuinfo(with_ids).package_cores,
        vec![
            PackageCoreId {
                cpu: 0,
                package: 0,
                core: 4
            },
            PackageCoreId {
                cpu: 1,
                package: 1,
                core: 4
            }
        ]
    );
}

#[test]
fn cpuinfo_features_are_the_intersection() {
    let text = "processor : 0\nFeatures : fp asimd asimddp i8mm\nCPU implementer : 0x41\n\
        CPU part : 0xd4e\n\nprocessor : 1\nFeatures : fp asimd asimddp\n\
        CPU implementer : 0x41\nCPU part : 0xd46\n";
    let info = parse_cpuinfo(text);
    assert_eq!(info.features, ["fp", "asimd", "asimddp"]);
    // A processor id past any CPU list's bound is garbage, not a CPU.
    let text = format!("processor : 1\n\nprocessor : {}\n", MAX_CPU_ID + 1);
    assert_eq!(parse_cpuinfo(&text).processors, [1]);
}

#[test]
fn cpuinfo_arm() {
    let text = "processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\n\
        CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\n\
        CPU revision\t: 3\n\nprocessor\t: 1\nFeatures\t: fp asimd evtstrm crc32 cpuid\n\
        CPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd03\n\n\
        Hardware\t: BCM2835\nRevision\t: c03114\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n";
    let info = parse_cpuinfo(text);
    assert_eq!(info.processors, vec![0, 1]);
    assert_eq!(
        info.arm_cores,
        vec![
            ArmCoreId {
                cpu: 0,
                implementer: 0x41,
                part: 0xd08
            },
            ArmCoreId {
                cpu: 1,
                implementer: 0x41,
                part: 0xd03
            }
        ]
    );
    assert_eq!(info.hardware.as_deref(), Some("BCM2835"));
    assert_eq!(
        info.board_model.as_deref(),
        Some("Raspberry Pi 4 Model B Rev 1.4")
    );
    assert_eq!(info.model_name, None);
    assert_eq!(info.arch(), Some("arm64"));
    assert_eq!(info.features, ["fp", "asimd", "evtstrm", "crc32", "cpuid"]);
}

#[test]
fn cpuinfo_other_formats() {
    assert_eq!(parse_cpuinfo("").arch(), None);
    assert_eq!(
        parse_cpuinfo("processor : 0\nisa : rv64imafdc\n").arch(),
        Some("riscv64")
    );
    let armv7 = "processor : 0\nmodel name : ARMv7 Processor rev 4 (v7l)\n\
        CPU implementer : 0x41\nCPU architecture: 7\nCPU part : 0xc07\n";
    assert_eq!(parse_cpuinfo(armv7).arch(), Some("arm"));
    let x86_32 = "processor : 0\nvendor_id : GenuineIntel\nflags : fpu sse2\n";
    assert_eq!(parse_cpuinfo(x86_32).arch(), Some("x86"));
}

#[test]
fn a_cpu_id_is_digits_only() {
    for text in ["+5", "5a", "0x5", "-0", "5,+6", "1-+3"] {
        assert!(parse_cpu_list(text).is_err(), "{text}");
    }
    assert_eq!(parse_cpu_list(" 5 ").unwrap(), [5]);
}

#[test]
fn a_mask_may_have_as_many_digits_as_the_highest_cpu_id_needs_and_no_more() {
    let longest = MAX_CPU_ID / 4;
    let mask = format!("{}1", "0".repeat(longest - 1));
    assert_eq!(parse_cpu_mask(&mask).unwrap(), [0]);
    let mask = format!("{}1", "0".repeat(longest));
    assert!(parse_cpu_mask(&mask).is_err());
}

#[test]
fn sizes_in_tebibytes_are_read() {
    for text in ["1T", "1 TB", "1tib"] {
        assert_eq!(parse_size(text).unwrap(), 1 << 40, "{text}");
    }
    assert_eq!(parse_size("3T").unwrap(), 3 << 40);
}

#[test]
fn a_v1_quota_of_zero_is_an_error_not_no_limit() {
    assert!(parse_cgroup_v1_cpu_quota("0", "100000").is_err());
    assert_eq!(parse_cgroup_v1_cpu_quota("-1", "100000").unwrap(), None);
}

#[test]
fn an_x86_cpu_is_64_bit_when_its_flags_say_long_mode() {
    let text = |flags: &str| format!("processor : 0\nvendor_id : GenuineIntel\nflags : {flags}\n");
    assert_eq!(parse_cpuinfo(&text("fpu lm sse2")).arch(), Some("x86_64"));
    assert_eq!(parse_cpuinfo(&text("fpu sse2")).arch(), Some("x86"));
}

#[test]
fn a_risc_v_cpu_is_named_by_its_isa_line() {
    let arch = |isa: &str| parse_cpuinfo(&format!("processor : 0\nisa : {isa}\n")).arch();
    assert_eq!(arch("rv64imafdc"), Some("riscv64"));
    assert_eq!(arch("rv32imac"), Some("riscv32"));
    assert_eq!(arch("mips32"), None);
}

#[test]
fn the_first_value_of_a_machine_wide_line_wins() {
    let info = parse_cpuinfo(
        "processor : 0\nvendor_id : GenuineIntel\ncpu family : 6\nmodel : 106\n\
         model name : First\n\nprocessor : 1\nvendor_id : AuthenticAMD\ncpu family : 25\n\
         model : 17\nmodel name : Second\n",
    );
    assert_eq!(info.vendor_id.as_deref(), Some("GenuineIntel"));
    assert_eq!(info.family, Some(6));
    assert_eq!(info.model_number, Some(106));
    assert_eq!(info.model_name.as_deref(), Some("First"));
    // An empty value is no value: the next one is taken.
    let info = parse_cpuinfo("model name :\nmodel name : Named\n");
    assert_eq!(info.model_name.as_deref(), Some("Named"));
}

#[test]
fn an_arm_cpu_is_known_by_its_cores_or_by_its_architecture_line() {
    // Cores named (implementer and part), no architecture line: 64-bit by default.
    let cores = parse_cpuinfo("processor : 0\nCPU implementer : 0x41\nCPU part : 0xd0b\n");
    assert_eq!(cores.arch(), Some("arm64"));
    // An architecture line without named cores.
    let line = parse_cpuinfo("processor : 0\nCPU architecture : 7\n");
    assert_eq!(line.arch(), Some("arm"));
}
