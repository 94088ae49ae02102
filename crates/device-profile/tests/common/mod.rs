//! The synthetic filesystem roots the detection tests build: [`Tree`], a temporary root
//! written file by file, with an x86 and an ARM machine ready-made.

#![allow(dead_code, reason = "each test file uses the helpers it needs")]

use device_profile::{HardwareInfo, get_hardware_info_from_root};
use std::path::Path;

/// A temporary filesystem root.
pub struct Tree(tempfile::TempDir);

impl Tree {
    pub fn new() -> Self {
        Tree(tempfile::tempdir().unwrap())
    }

    pub fn copy_of(source: &Path) -> Self {
        let tree = Tree::new();
        copy_dir(source, tree.path());
        tree
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn file(&self, relative: &str, text: &str) -> &Self {
        let path = self.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    pub fn detect(&self) -> HardwareInfo {
        get_hardware_info_from_root(self.path())
    }

    pub fn cpu(&self, cpu: usize, relative: &str, text: &str) -> &Self {
        self.file(&format!("sys/devices/system/cpu/cpu{cpu}/{relative}"), text)
    }

    pub fn cache(
        &self,
        cpu: usize,
        index: usize,
        level: u32,
        kind: &str,
        size: &str,
        shared: &str,
    ) {
        let dir = format!("cache/index{index}");
        self.cpu(cpu, &format!("{dir}/level"), &format!("{level}\n"))
            .cpu(cpu, &format!("{dir}/type"), &format!("{kind}\n"))
            .cpu(cpu, &format!("{dir}/size"), &format!("{size}\n"))
            .cpu(
                cpu,
                &format!("{dir}/shared_cpu_list"),
                &format!("{shared}\n"),
            );
    }

    /// An x86 machine of `n_cpus` CPUs, no SMT, one L2 per CPU, with `model` and 16 GiB.
    pub fn x86(n_cpus: usize, model: &str, family: u32, model_number: u32) -> Self {
        let tree = Tree::new();
        let mut cpuinfo = String::new();
        for cpu in 0..n_cpus {
            cpuinfo.push_str(&format!(
                "processor\t: {cpu}\nvendor_id\t: GenuineIntel\ncpu family\t: {family}\n\
                 model\t\t: {model_number}\nmodel name\t: {model}\n\
                 flags\t\t: fpu lm sse4_2 avx avx2 fma avx512f\n\n"
            ));
            tree.cpu(cpu, "topology/core_cpus_list", &format!("{cpu}\n"));
            tree.cache(cpu, 0, 2, "Unified", "1024K", &cpu.to_string());
        }
        tree.file("proc/cpuinfo", &cpuinfo)
            .file("proc/meminfo", "MemTotal:       16303812 kB\n")
            .file(
                "sys/devices/system/cpu/online",
                &format!("0-{}\n", n_cpus - 1),
            );
        tree
    }

    /// An ARM machine with one core of each `(implementer, part)` listed, 8 GiB.
    pub fn arm(parts: &[(u32, u32)], features: &str) -> Self {
        let tree = Tree::new();
        let mut cpuinfo = String::new();
        for (cpu, (implementer, part)) in parts.iter().enumerate() {
            cpuinfo.push_str(&format!(
                "processor\t: {cpu}\nBogoMIPS\t: 50.00\nFeatures\t: {features}\n\
                 CPU implementer\t: 0x{implementer:02x}\nCPU architecture: 8\n\
                 CPU variant\t: 0x1\nCPU part\t: 0x{part:03x}\nCPU revision\t: 1\n\n"
            ));
            tree.cpu(cpu, "topology/core_cpus_list", &format!("{cpu}\n"));
        }
        tree.file("proc/cpuinfo", &cpuinfo)
            .file("proc/meminfo", "MemTotal:        7990000 kB\n")
            .file(
                "sys/devices/system/cpu/online",
                &format!("0-{}\n", parts.len() - 1),
            );
        tree
    }
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            let mut permissions = std::fs::metadata(&target).unwrap().permissions();
            #[allow(
                clippy::permissions_set_readonly_false,
                reason = "a private temporary copy that tests overwrite"
            )]
            permissions.set_readonly(false);
            std::fs::set_permissions(&target, permissions).unwrap();
        }
    }
}

pub const XEON_GOLD: &str = "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz";
