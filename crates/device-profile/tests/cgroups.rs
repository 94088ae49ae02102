//! Detection of the CPUs this process may use from synthetic roots: cgroup v1 and v2 CPU
//! quotas, cpusets and the affinity mask.

mod common;

use common::{Tree, XEON_GOLD};

#[test]
fn cgroup_v2_quota_limits_effective_cpus() {
    let tree = Tree::x86(8, XEON_GOLD, 6, 85);
    tree.file("proc/self/cgroup", "0::/system.slice/app.service\n")
        .file(
            "proc/self/mountinfo",
            "25 30 0:23 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
        )
        .file("sys/fs/cgroup/system.slice/cpu.max", "max 100000\n")
        .file(
            "sys/fs/cgroup/system.slice/app.service/cpu.max",
            "200000 100000\n",
        );
    let hw = tree.detect();
    assert_eq!(hw.allowed_cpus, (0..8).collect::<Vec<_>>());
    assert_eq!(hw.effective_cpus, 2);
    assert_eq!(hw.hardware_id(), "x86_64_intel_xeon_gold_6248_8c_16gb_e2");

    // A tighter ancestor wins: the kernel enforces every level.
    tree.file("sys/fs/cgroup/system.slice/cpu.max", "100000 100000\n");
    assert_eq!(tree.detect().effective_cpus, 1);

    // Rounding is up: 2.5 CPUs of quota is 3.
    tree.file("sys/fs/cgroup/system.slice/cpu.max", "max 100000\n")
        .file(
            "sys/fs/cgroup/system.slice/app.service/cpu.max",
            "250000 100000\n",
        );
    assert_eq!(tree.detect().effective_cpus, 3);

    // Never above the allowed CPUs.
    tree.file(
        "sys/fs/cgroup/system.slice/app.service/cpu.max",
        "6400000 100000\n",
    );
    let hw = tree.detect();
    assert_eq!(hw.effective_cpus, 8);
    assert_eq!(hw.hardware_id(), "x86_64_intel_xeon_gold_6248_8c_16gb");
}

#[test]
fn cgroup_v2_without_proc_self_files_reads_the_top_cgroup() {
    let tree = Tree::x86(8, XEON_GOLD, 6, 85);
    tree.file("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory\n")
        .file("sys/fs/cgroup/cpu.max", "300000 100000\n");
    assert_eq!(tree.detect().effective_cpus, 3);
}

#[test]
fn cgroup_v1_container_with_quota_and_cpuset() {
    let tree = Tree::x86(16, XEON_GOLD, 6, 85);
    tree.file(
        "proc/self/cgroup",
        "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n3:cpuset:/docker/abc\n1:name=systemd:/docker/abc\n",
    )
    .file(
        "proc/self/mountinfo",
        "600 590 0:60 / / rw,relatime - overlay overlay rw\n\
         610 600 0:62 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n\
         611 610 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid master:11 - cgroup cgroup rw,cpu,cpuacct\n\
         612 610 0:30 /docker/abc /sys/fs/cgroup/cpuset ro,nosuid master:12 - cgroup cgroup rw,cpuset\n",
    )
    .file("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "150000\n")
    .file("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    .file("sys/fs/cgroup/cpuset/cpuset.cpus", "0-5\n");
    let hw = tree.detect();
    assert_eq!(hw.allowed_cpus, [0, 1, 2, 3, 4, 5]);
    assert_eq!(hw.effective_cpus, 2);
    // 1.5 CPUs of quota: rounded up for the count, kept exact for the tuner.
    assert_eq!(hw.cpu_quota_millicpus, Some(1500));
    assert!(
        hw.hardware_id().ends_with("_16c_16gb_e2"),
        "{}",
        hw.hardware_id()
    );

    // `-1` is no quota: the cpuset alone limits.
    tree.file("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    assert_eq!(tree.detect().effective_cpus, 6);
}

#[test]
fn cgroup_v1_on_the_host_layout() {
    // The process sits in a child cgroup of a hierarchy mounted at its root.
    let tree = Tree::x86(4, XEON_GOLD, 6, 85);
    tree.file("proc/self/cgroup", "2:cpu:/batch\n")
        .file(
            "proc/self/mountinfo",
            "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n",
        )
        .file("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n")
        .file("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n")
        .file("sys/fs/cgroup/cpu/batch/cpu.cfs_quota_us", "50000\n")
        .file("sys/fs/cgroup/cpu/batch/cpu.cfs_period_us", "100000\n");
    assert_eq!(tree.detect().effective_cpus, 1);
}

#[test]
fn cpuset_restriction() {
    let tree = Tree::x86(8, XEON_GOLD, 6, 85);
    tree.file("proc/self/cgroup", "0::/pinned\n")
        .file(
            "proc/self/mountinfo",
            "25 30 0:23 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        )
        .file("sys/fs/cgroup/cpuset.cpus.effective", "0-7\n")
        .file("sys/fs/cgroup/pinned/cpuset.cpus.effective", "2-3\n");
    let hw = tree.detect();
    assert_eq!(hw.allowed_cpus, [2, 3]);
    assert_eq!(hw.effective_cpus, 2);
    assert_eq!(hw.logical_cores, 8);
    assert!(hw.hardware_id().ends_with("_8c_16gb_e2"));

    // An empty `cpuset.cpus` inherits from the parent.
    std::fs::remove_file(
        tree.path()
            .join("sys/fs/cgroup/pinned/cpuset.cpus.effective"),
    )
    .unwrap();
    tree.file("sys/fs/cgroup/pinned/cpuset.cpus", "\n")
        .file("sys/fs/cgroup/cpuset.cpus.effective", "4-7\n");
    assert_eq!(tree.detect().allowed_cpus, [4, 5, 6, 7]);
}

#[test]
fn affinity_restriction() {
    let tree = Tree::x86(4, XEON_GOLD, 6, 85);
    tree.file(
        "proc/self/status",
        "Name:\tdetector\nCpus_allowed:\ta\nCpus_allowed_list:\t1,3\n",
    );
    let hw = tree.detect();
    assert_eq!(hw.allowed_cpus, [1, 3]);
    assert_eq!(hw.effective_cpus, 2);
    assert_eq!(hw.hardware_id(), "x86_64_intel_xeon_gold_6248_4c_16gb_e2");

    // Affinity and cpuset intersect.
    tree.file("sys/fs/cgroup/cpuset.cpus.effective", "2-3\n");
    assert_eq!(tree.detect().allowed_cpus, [3]);
}

#[test]
fn a_cgroup_memory_limit_bounds_the_memory_available() {
    let tree = Tree::x86(4, XEON_GOLD, 6, 85);
    tree.file(
        "proc/meminfo",
        "MemTotal: 16777216 kB\nMemAvailable: 8388608 kB\n",
    );
    let available = || device_profile::available_memory_bytes_from_root(tree.path());
    // No limit anywhere: MemAvailable.
    assert_eq!(available(), Some(8 << 30));
    // cgroup v2: 128 MiB at the container, 96 MiB in use of which 32 MiB is inactive file
    // cache (reclaimable): 64 MiB left.
    tree.file("proc/self/cgroup", "0::/box\n")
        .file(
            "proc/self/mountinfo",
            "25 30 0:23 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n",
        )
        .file("sys/fs/cgroup/memory.max", "max\n")
        .file("sys/fs/cgroup/box/memory.max", "134217728\n")
        .file("sys/fs/cgroup/box/memory.current", "100663296\n")
        .file(
            "sys/fs/cgroup/box/memory.stat",
            "anon 67108864\nfile 33554432\ninactive_file 33554432\n",
        );
    assert_eq!(available(), Some(64 << 20));
    // A tighter ancestor wins.
    tree.file("sys/fs/cgroup/memory.max", "150000000\n")
        .file("sys/fs/cgroup/memory.current", "140000000\n");
    assert_eq!(available(), Some(10_000_000));
    // Used past its limit: nothing left, never a wrap-around.
    tree.file("sys/fs/cgroup/memory.current", "160000000\n");
    assert_eq!(available(), Some(0));

    // cgroup v1: the memory hierarchy's own files; the kernel's "no limit" is none.
    let tree = Tree::x86(4, XEON_GOLD, 6, 85);
    tree.file("proc/meminfo", "MemAvailable: 8388608 kB\n")
        .file(
            "proc/self/cgroup",
            "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n",
        )
        .file(
            "sys/fs/cgroup/memory/memory.limit_in_bytes",
            "9223372036854771712\n",
        )
        .file(
            "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
            "125829120\n",
        )
        .file(
            "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes",
            "62914560\n",
        )
        .file(
            "sys/fs/cgroup/memory/docker/abc/memory.stat",
            "cache 0\ntotal_inactive_file 20971520\n",
        );
    let available = device_profile::available_memory_bytes_from_root(tree.path());
    assert_eq!(available, Some(80 << 20));
}

#[test]
fn a_cgroup_deeper_than_any_real_one_reads_only_its_mount_s_limits() {
    let tree = Tree::x86(8, XEON_GOLD, 6, 85);
    let deep = "/a".repeat(100);
    tree.file("proc/self/cgroup", &format!("0::{deep}\n"))
        .file(
            "proc/self/mountinfo",
            "25 30 0:23 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n",
        )
        .file("sys/fs/cgroup/cpu.max", "400000 100000\n")
        .file(&format!("sys/fs/cgroup{deep}/cpu.max"), "100000 100000\n");
    // The levels of a path 100 deep are not walked (a hostile one 10^5 deep cost the square
    // of its depth): the mount's own quota holds.
    assert_eq!(tree.detect().effective_cpus, 4);
    // At a real depth, every level is read and the tightest wins.
    let shallow = "/a".repeat(8);
    tree.file("proc/self/cgroup", &format!("0::{shallow}\n"))
        .file(
            &format!("sys/fs/cgroup{shallow}/cpu.max"),
            "100000 100000\n",
        );
    assert_eq!(tree.detect().effective_cpus, 1);
}

#[test]
fn a_cpu_named_by_two_node_folders_belongs_to_the_first() {
    let tree = Tree::x86(8, XEON_GOLD, 6, 85);
    tree.file("sys/devices/system/node/node0/cpulist", "0-3\n")
        .file("sys/devices/system/node/node1/cpulist", "2-7\n")
        .file("sys/devices/system/node/node2/cpulist", "0-7\n");
    let hw = tree.detect();
    assert_eq!(hw.node_ids, [0, 1, 2]);
    assert_eq!(
        hw.node_cpus,
        [vec![0, 1, 2, 3], vec![4, 5, 6, 7], Vec::new()]
    );
}
