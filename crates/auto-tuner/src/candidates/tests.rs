//! Candidate generation on every fixture machine of `device-profile` (detected from its
//! tree, as `SIPLLM_SYSROOT` would), and on machines built by hand: NUMA, a CPU quota, a
//! cpuset.

use super::*;
use std::path::{Path, PathBuf};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../device-profile/tests/fixtures")
}

fn fixture(name: &str) -> HardwareInfo {
    device_profile::get_hardware_info_from_root(&fixtures_dir().join(name))
}

/// Every candidate pins distinct CPUs this process may use.
fn assert_sound(hw: &HardwareInfo, sets: &[PinnedSet]) {
    let allowed = allowed(hw);
    for set in sets {
        let mut seen = std::collections::BTreeSet::new();
        for &cpu in &set.cpus {
            assert!(allowed.contains(&cpu), "{set:?}: CPU {cpu} not allowed");
            assert!(seen.insert(cpu), "{set:?}: CPU {cpu} twice");
        }
        assert!(!set.cpus.is_empty(), "{set:?}");
    }
}

#[test]
fn every_fixture_machine_gets_sound_candidates() {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("proc").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 2, "{names:?}");
    for name in &names {
        let hw = fixture(name);
        let sets = pinning_candidates(&hw);
        assert_sound(&hw, &sets);
        let estimate = estimate_threads(&hw, usize::MAX);
        assert!((1..=hw.effective_cpus).contains(&estimate), "{name}");
        match name.as_str() {
            "intel_i7_12700h" => {
                // SMT on the P-cores, and two core classes; one node.
                let mut physical: Vec<usize> = (0..12).step_by(2).collect();
                physical.extend(12..20);
                let evens: Vec<usize> = (0..12).step_by(2).collect();
                let odds: Vec<usize> = (1..12).step_by(2).collect();
                assert_eq!(
                    sets,
                    [
                        PinnedSet {
                            cores: CoreSet::PhysicalCores,
                            cpus: physical,
                        },
                        PinnedSet {
                            cores: CoreSet::Performance,
                            cpus: [evens, odds].concat(),
                        },
                    ]
                );
                // llama.cpp's rule: the six P-cores.
                assert_eq!(estimate, 6);
                assert_eq!(estimate_threads(&hw, 4), 4);
                // A process allowed only the eight E-cores runs on them, not on one thread.
                let mut e_only = hw.clone();
                e_only.allowed_cpus = (12..20).collect();
                e_only.effective_cpus = 8;
                assert_eq!(estimate_threads(&e_only, usize::MAX), 8);
            }
            "rpi4" => {
                // Four equal cores, no SMT, no NUMA: nothing to pin.
                assert!(sets.is_empty(), "{sets:?}");
                assert_eq!(estimate, 4);
            }
            other => panic!("fixture {other} has no expectations here; add them"),
        }
    }
}

/// A two-node EPYC: 8 cores with SMT (CPU i and i+8 are siblings), nodes of 4 cores.
fn epyc() -> HardwareInfo {
    HardwareInfo {
        logical_cores: 16,
        physical_cores: 8,
        numa_nodes: 2,
        performance_cores: 8,
        performance_cpus: (0..16).collect(),
        allowed_cpus: (0..16).collect(),
        effective_cpus: 16,
        core_cpus: (0..8).map(|c| vec![c, c + 8]).collect(),
        node_cpus: vec![
            vec![0, 1, 2, 3, 8, 9, 10, 11],
            vec![4, 5, 6, 7, 12, 13, 14, 15],
        ],
        ..HardwareInfo::default()
    }
}

#[test]
fn a_numa_machine_offers_one_node_and_one_thread_per_core() {
    let hw = epyc();
    let sets = pinning_candidates(&hw);
    assert_sound(&hw, &sets);
    assert_eq!(
        sets,
        [
            PinnedSet {
                cores: CoreSet::PhysicalCores,
                cpus: (0..8).collect(),
            },
            PinnedSet {
                cores: CoreSet::Node(0),
                cpus: vec![0, 1, 2, 3, 8, 9, 10, 11],
            },
        ]
    );
    assert_eq!(estimate_threads(&hw, 16), 8);
    // Nodes numbered with a gap (node 0 memory only, say): the pick names node 1 by its own
    // number, as `numactl` does, not by its place in the list.
    let gap = HardwareInfo {
        node_ids: vec![1, 3],
        ..epyc()
    };
    assert_eq!(pinning_candidates(&gap)[1].cores, CoreSet::Node(1));
    // A cpuset inside node 1 only: no second node to compare with, and node 1's cores.
    let inside = HardwareInfo {
        allowed_cpus: vec![4, 5, 12, 13],
        effective_cpus: 4,
        ..epyc()
    };
    let sets = pinning_candidates(&inside);
    assert_sound(&inside, &sets);
    assert_eq!(
        sets,
        [PinnedSet {
            cores: CoreSet::PhysicalCores,
            cpus: vec![4, 5],
        }]
    );
    assert_eq!(estimate_threads(&inside, 16), 2);
}

#[test]
fn a_fractional_quota_is_never_rounded_up_without_measuring() {
    // 1.5 CPUs of quota on 6 allowed CPUs: effective_cpus (the search's limit) is 2, the
    // estimate is 1.
    let hw = HardwareInfo {
        logical_cores: 16,
        physical_cores: 16,
        allowed_cpus: (0..6).collect(),
        effective_cpus: 2,
        cpu_quota_millicpus: Some(1500),
        core_cpus: (0..16).map(|c| vec![c]).collect(),
        ..HardwareInfo::default()
    };
    assert_eq!(estimate_threads(&hw, 16), 1);
    assert!(pinning_candidates(&hw).is_empty());
    // A quota below one CPU still runs one thread.
    let tiny = HardwareInfo {
        cpu_quota_millicpus: Some(500),
        effective_cpus: 1,
        ..hw.clone()
    };
    assert_eq!(estimate_threads(&tiny, 16), 1);
    // A whole quota is used whole.
    let four = HardwareInfo {
        cpu_quota_millicpus: Some(4000),
        effective_cpus: 4,
        ..hw
    };
    assert_eq!(estimate_threads(&four, 16), 4);
}

#[test]
fn without_topology_the_estimate_counts_physical_cores() {
    let hw = HardwareInfo {
        logical_cores: 8,
        physical_cores: 4,
        effective_cpus: 8,
        ..HardwareInfo::default()
    };
    assert_eq!(estimate_threads(&hw, 16), 4);
    assert!(pinning_candidates(&hw).is_empty());
}

#[test]
fn under_a_quota_every_cpu_the_process_may_run_on_is_a_candidate() {
    let hw = |quota: Option<u64>, effective: usize| HardwareInfo {
        logical_cores: 4,
        allowed_cpus: vec![0, 1, 2],
        effective_cpus: effective,
        cpu_quota_millicpus: quota,
        ..HardwareInfo::default()
    };
    // A 1-CPU quota on three allowed CPUs: thread counts up to 3 are measured, not 1.
    assert_eq!(candidate_cpus(&hw(Some(1000), 1)), 3);
    // 1.5 CPUs of quota rounds up to 2 effective CPUs, and still every allowed CPU is tried.
    assert_eq!(candidate_cpus(&hw(Some(1500), 2)), 3);
    // Without a quota the effective CPUs are the limit (a cpuset already made them fewer).
    assert_eq!(candidate_cpus(&hw(None, 3)), 3);
    assert_eq!(candidate_cpus(&hw(None, 2)), 2);
    // The unmeasured estimate still keeps to the quota, rounded down.
    assert_eq!(estimate_threads(&hw(Some(1000), 1), 16), 1);
}
