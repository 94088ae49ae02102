//! The SIMD feature names that matter to the kernels, from cpuinfo flags or the running CPU.

/// x86 cpuinfo flags kept, in the order reported. The names are the kernel's.
const X86_FEATURES: &[&str] = &[
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
];

/// ARM cpuinfo `Features` and the names reported for them.
const ARM_FEATURES: &[(&str, &str)] = &[
    ("asimd", "neon"),
    ("neon", "neon"),
    ("asimdhp", "fp16"),
    ("asimddp", "dotprod"),
    ("i8mm", "i8mm"),
    ("bf16", "bf16"),
    ("sve", "sve"),
    ("sve2", "sve2"),
    ("sme", "sme"),
];

/// The kernel-relevant SIMD names among cpuinfo `flags`/`Features` for `arch`.
pub(crate) fn from_cpuinfo_features(arch: &str, features: &[String]) -> Vec<String> {
    let has = |name: &str| features.iter().any(|f| f == name);
    let mut names: Vec<String> = Vec::new();
    if arch.starts_with("x86") {
        names.extend(
            X86_FEATURES
                .iter()
                .filter(|f| has(f))
                .map(|f| f.to_string()),
        );
    } else if arch.starts_with("arm") {
        for (flag, name) in ARM_FEATURES {
            if has(flag) && !names.iter().any(|n| n == name) {
                names.push((*name).to_string());
            }
        }
    }
    names
}

/// The kernel-relevant SIMD names of the running CPU, from the standard library's runtime
/// detection: for systems without `/proc/cpuinfo`.
pub(crate) fn detect_running() -> Vec<String> {
    let mut names: Vec<&str> = Vec::new();
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        use std::arch::is_x86_feature_detected as has;
        let found = [
            ("sse4_2", has!("sse4.2")),
            ("avx", has!("avx")),
            ("avx2", has!("avx2")),
            ("fma", has!("fma")),
            ("f16c", has!("f16c")),
            ("avx512f", has!("avx512f")),
            ("avx512bw", has!("avx512bw")),
            ("avx512vl", has!("avx512vl")),
            ("avx512_vnni", has!("avx512vnni")),
            ("avx512_bf16", has!("avx512bf16")),
            ("avx512_fp16", has!("avx512fp16")),
            ("avx_vnni", has!("avxvnni")),
        ];
        names.extend(found.iter().filter(|(_, on)| *on).map(|(name, _)| *name));
    }
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected as has;
        let found = [
            ("neon", has!("neon")),
            ("fp16", has!("fp16")),
            ("dotprod", has!("dotprod")),
            ("i8mm", has!("i8mm")),
            ("bf16", has!("bf16")),
            ("sve", has!("sve")),
            ("sve2", has!("sve2")),
        ];
        names.extend(found.iter().filter(|(_, on)| *on).map(|(name, _)| *name));
    }
    names.into_iter().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn x86_flags() {
        let flags = words("fpu sse4_2 avx fma avx2 avx512f avx_vnni lm");
        assert_eq!(
            from_cpuinfo_features("x86_64", &flags),
            ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx_vnni"]
        );
    }

    #[test]
    fn arm_features() {
        let features = words("fp asimd evtstrm crc32 cpuid");
        assert_eq!(from_cpuinfo_features("arm64", &features), ["neon"]);
        let features = words("fp asimd asimddp asimdhp i8mm bf16 sve sve2");
        assert_eq!(
            from_cpuinfo_features("arm64", &features),
            ["neon", "fp16", "dotprod", "i8mm", "bf16", "sve", "sve2"]
        );
    }

    #[test]
    fn unknown_arch_has_no_names() {
        assert!(from_cpuinfo_features("", &words("avx2 asimd")).is_empty());
    }

    #[test]
    fn running_cpu_names_are_known_names() {
        for name in detect_running() {
            assert!(
                X86_FEATURES.contains(&name.as_str())
                    || ARM_FEATURES.iter().any(|(_, n)| *n == name),
                "{name}"
            );
        }
    }
}
