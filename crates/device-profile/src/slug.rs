//! The `hardware_id` slug: model cleaning, the RAM bucket, and the length and charset rules.
//!
//! The rules themselves are written down on [`HardwareInfo::hardware_id`].

use crate::info::HardwareInfo;

/// The longest id this module builds.
pub(crate) const MAX_ID_LEN: usize = 64;

/// The longest arch part, so that a garbage arch cannot crowd out the rest.
const MAX_ARCH_LEN: usize = 16;

/// Builds the id; see [`HardwareInfo::hardware_id`] for the rules.
pub(crate) fn hardware_id(info: &HardwareInfo) -> String {
    let arch = {
        let cleaned = truncate_part(&clean_words(&info.arch), MAX_ARCH_LEN);
        if cleaned.is_empty() {
            "unknown".to_string()
        } else {
            cleaned
        }
    };
    let is_arm = matches!(arch.as_str(), "arm64" | "arm");
    let mut model = if is_arm && !info.cpu_uarch.is_empty() {
        clean_model(&info.cpu_uarch)
    } else {
        clean_model(&info.cpu_model)
    };
    if model.is_empty() {
        model = "unknown".to_string();
    }

    let mut tail = Vec::new();
    if !model.bytes().any(|b| b.is_ascii_digit())
        && let (Some(family), Some(model_number)) = (info.cpu_family, info.cpu_model_number)
    {
        tail.push(format!("f{family}m{model_number}"));
    }
    tail.push(format!("{}c", info.logical_cores));
    tail.push(format!("{}gb", ram_bucket_gib(info.ram_bytes)));
    if info.effective_cpus > 0 && info.effective_cpus < info.logical_cores {
        tail.push(format!("e{}", info.effective_cpus));
    }
    let tail = tail.join("_");

    // The model gives way first: the counts in the tail are what tell machines apart.
    let model_budget = MAX_ID_LEN.saturating_sub(arch.len() + tail.len() + 2);
    let id = if model_budget >= 1 {
        format!("{arch}_{}_{tail}", truncate_part(&model, model_budget))
    } else {
        // Only absurd counts (deserialized garbage) get here; the cap still holds.
        truncate_part(&format!("{arch}_{model}_{tail}"), MAX_ID_LEN)
    };
    debug_assert!(is_valid_id(&id), "{id:?}");
    id
}

/// Cleans a CPU model string into `[a-z0-9_]` words, dropping vendor marks and noise:
/// `(R)`, `(TM)`, `(C)`, `CPU`, `Processor`, the clock (`@ 2.40GHz`, `3.5GHz`),
/// core counts (`16-Core`, `Quad-Core`), generation prefixes (`12th Gen`) and graphics
/// suffixes (`with Radeon Graphics`). May return the empty string.
pub(crate) fn clean_model(model: &str) -> String {
    let mut text = model.to_ascii_lowercase();
    for mark in ["(r)", "(tm)", "(c)", "\u{ae}", "\u{2122}", "\u{a9}"] {
        text = text.replace(mark, " ");
    }
    // Everything after `@` is the clock; everything after `with`/`w/` is the integrated GPU.
    if let Some(at) = text.find('@') {
        text.truncate(at);
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut kept: Vec<&str> = Vec::new();
    let mut idx = 0;
    while idx < words.len() {
        let word = words[idx];
        if word == "with" || word == "w/" {
            break;
        }
        // Byte-wise, so that a multi-byte character cannot split a slice.
        let bytes = word.as_bytes();
        let is_ordinal = bytes.len() > 2
            && bytes[..bytes.len() - 2].iter().all(u8::is_ascii_digit)
            && matches!(&bytes[bytes.len() - 2..], b"st" | b"nd" | b"rd" | b"th");
        if is_ordinal && words.get(idx + 1).is_some_and(|next| *next == "gen") {
            idx += 2;
            continue;
        }
        let is_clock = word.starts_with(|c: char| c.is_ascii_digit())
            && (word.ends_with("ghz") || word.ends_with("mhz"));
        let is_core_count = ["-core", "-cores"]
            .iter()
            .any(|suffix| word.ends_with(suffix) && word.len() > suffix.len());
        let is_noise = matches!(word, "cpu" | "processor");
        if !(is_clock || is_core_count || is_noise) {
            kept.push(word);
        }
        idx += 1;
    }
    clean_words(&kept.join(" "))
}

/// Maps every character outside `[a-z0-9]` to `_` (after ASCII lowercasing), collapses runs
/// of `_` and trims them from both ends.
fn clean_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        let ch = ch.to_ascii_lowercase();
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
            out.push(ch);
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    while out.ends_with('_') {
        out.pop();
    }
    out
}

/// Cuts a clean part to at most `max_len` bytes (it is ASCII) without a trailing `_`.
fn truncate_part(part: &str, max_len: usize) -> String {
    let mut out: String = part.chars().take(max_len).collect();
    while out.ends_with('_') {
        out.pop();
    }
    out
}

/// The RAM size in the id, in GiB: the smallest L in 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48,
/// … (powers of two and 1.5 times powers of two) with `L × 1.03 ≥ MemTotal`. MemTotal is
/// a little below the installed size (the kernel and firmware keep some), so a 32 GB
/// machine reporting 31.03 GiB says 32 and a 24 GiB VM reporting 23.5 GiB says 24. Unknown
/// RAM (0 bytes) is 0.
pub(crate) fn ram_bucket_gib(ram_bytes: u64) -> u64 {
    if ram_bytes == 0 {
        return 0;
    }
    let fits =
        |size_gib: u64| u128::from(size_gib) * 103 * (1u128 << 30) >= u128::from(ram_bytes) * 100;
    let mut pow2: u64 = 1;
    loop {
        if fits(pow2) {
            return pow2;
        }
        let between = pow2 + pow2 / 2;
        if pow2 >= 2 && fits(between) {
            return between;
        }
        pow2 *= 2;
    }
}

/// Whether `id` keeps the charset and shape rules.
pub(crate) fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !id.starts_with('_')
        && !id.ends_with('_')
        && !id.contains("__")
}

impl HardwareInfo {
    /// The deterministic slug that keys the profile cache:
    /// `<arch>_<model>[_f<family>m<model>]_<logical>c_<ram>gb[_e<effective>]`, for example
    /// `x86_64_intel_core_i7_12700h_20c_32gb` or `arm64_cortex_a72_4c_4gb`.
    ///
    /// Rules:
    /// - Only `[a-z0-9_]`; no empty part; no leading, trailing or double `_`; at most 64
    ///   characters (the model part is shortened first). No input, however odd (`/`, `..`,
    ///   unicode, control characters, an empty model), can make it escape a file name.
    /// - The model is cleaned: lowercased, every other character a separator, and noise
    ///   dropped: `(R)`, `(TM)`, `(C)`, `CPU`, `Processor`, the clock (`@ 2.40GHz` and
    ///   whatever follows `@`), core counts (`16-Core`), generation prefixes (`12th Gen`),
    ///   and graphics suffixes (`with Radeon Graphics`). An empty result is `unknown`.
    /// - On ARM the model part is the microarchitecture of the highest-capacity core
    ///   ([`HardwareInfo::cpu_uarch`], e.g. `cortex_a72`, `cortex_x3`), never the board.
    /// - A cleaned model without any digit (`Intel(R) Xeon(R) CPU @ 2.20GHz` → `intel_xeon`,
    ///   which cloud VMs show for several CPU generations) gains `f<family>m<model>` from
    ///   cpuinfo, e.g. `x86_64_intel_xeon_f6m85_4c_16gb`.
    /// - RAM is the smallest L in 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, …
    ///   GiB (powers of two and 1.5 × powers of two) with L × 1.03 ≥ MemTotal, so a 32 GB
    ///   machine reporting 31.03 GiB is `32gb` on every boot. Unknown RAM is `0gb`.
    /// - Where the process may use fewer CPUs than are online (`effective_cpus <
    ///   logical_cores`: cgroup quota, cpuset, affinity), the id ends in `_e<effective>`, so
    ///   a 2-CPU container on a 64-core host never shares a profile with the whole host.
    pub fn hardware_id(&self) -> String {
        hardware_id(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn info(arch: &str, model: &str, logical: usize, ram_bytes: u64) -> HardwareInfo {
        HardwareInfo {
            arch: arch.into(),
            cpu_model: model.into(),
            logical_cores: logical,
            effective_cpus: logical,
            ram_bytes,
            ..HardwareInfo::default()
        }
    }

    const GIB: u64 = 1 << 30;

    #[test]
    fn cleans_models() {
        let cases = [
            (
                "12th Gen Intel(R) Core(TM) i7-12700H",
                "intel_core_i7_12700h",
            ),
            ("AMD EPYC", "amd_epyc"),
            ("AMD EPYC 7B13 64-Core Processor", "amd_epyc_7b13"),
            (
                "AMD Ryzen Threadripper PRO 5995WX 64-Cores",
                "amd_ryzen_threadripper_pro_5995wx",
            ),
            ("AMD Ryzen 9 7950X 16-Core Processor", "amd_ryzen_9_7950x"),
            (
                "AMD Ryzen 7 5800H with Radeon Graphics",
                "amd_ryzen_7_5800h",
            ),
            ("Intel(R) Xeon(R) CPU @ 2.20GHz", "intel_xeon"),
            (
                "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
                "intel_xeon_platinum_8375c",
            ),
            ("Intel(R) Core(TM) Ultra 7 155H", "intel_core_ultra_7_155h"),
            (
                "AMD Phenom(tm) II X4 965 Quad-Core Processor 3.4GHz",
                "amd_phenom_ii_x4_965",
            ),
            ("Apple M3", "apple_m3"),
            ("Cortex-A72", "cortex_a72"),
            ("Intel\u{ae} Core\u{2122} i5", "intel_core_i5"),
            ("", ""),
            ("../..//", ""),
            ("CPU", ""),
        ];
        for (model, want) in cases {
            assert_eq!(clean_model(model), want, "{model:?}");
        }
    }

    #[test]
    fn ram_buckets() {
        assert_eq!(ram_bucket_gib(32_541_736 * 1024), 32);
        assert_eq!(ram_bucket_gib(3_882_804 * 1024), 4);
        assert_eq!(ram_bucket_gib(24_684_096 * 1024), 24);
        assert_eq!(ram_bucket_gib(16 * GIB), 16);
        assert_eq!(ram_bucket_gib(16 * GIB + GIB / 4), 16);
        assert_eq!(ram_bucket_gib(17 * GIB), 24);
        assert_eq!(ram_bucket_gib(GIB / 2), 1);
        assert_eq!(ram_bucket_gib(5 * GIB + GIB / 2), 6);
        assert_eq!(ram_bucket_gib(62 * GIB), 64);
        assert_eq!(ram_bucket_gib(0), 0);
        assert_eq!(ram_bucket_gib(u64::MAX), 1 << 34);
    }

    #[test]
    fn ids_of_known_machines() {
        let i7 = info(
            "x86_64",
            "12th Gen Intel(R) Core(TM) i7-12700H",
            20,
            32_541_736 * 1024,
        );
        assert_eq!(i7.hardware_id(), "x86_64_intel_core_i7_12700h_20c_32gb");
        let m3 = info("arm64", "Apple M3", 8, 16 * GIB);
        assert_eq!(m3.hardware_id(), "arm64_apple_m3_8c_16gb");
        let mut pi = info("arm64", "Arm Cortex-A72", 4, 3_882_804 * 1024);
        pi.cpu_uarch = "Cortex-A72".into();
        assert_eq!(pi.hardware_id(), "arm64_cortex_a72_4c_4gb");
    }

    #[test]
    fn generic_models_gain_family_and_model() {
        let mut xeon = info("x86_64", "Intel(R) Xeon(R) CPU @ 2.20GHz", 4, 16 * GIB);
        xeon.cpu_family = Some(6);
        xeon.cpu_model_number = Some(85);
        assert_eq!(xeon.hardware_id(), "x86_64_intel_xeon_f6m85_4c_16gb");
        xeon.cpu_model_number = Some(79);
        assert_eq!(xeon.hardware_id(), "x86_64_intel_xeon_f6m79_4c_16gb");
        let mut numbered = info(
            "x86_64",
            "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz",
            4,
            16 * GIB,
        );
        numbered.cpu_family = Some(6);
        numbered.cpu_model_number = Some(85);
        assert_eq!(
            numbered.hardware_id(),
            "x86_64_intel_xeon_gold_6248_4c_16gb"
        );
    }

    #[test]
    fn restricted_cpus_gain_an_e_suffix() {
        let mut host = info("x86_64", "AMD EPYC 9654 96-Core Processor", 64, 256 * GIB);
        assert_eq!(host.hardware_id(), "x86_64_amd_epyc_9654_64c_256gb");
        host.effective_cpus = 2;
        assert_eq!(host.hardware_id(), "x86_64_amd_epyc_9654_64c_256gb_e2");
    }

    #[test]
    fn empty_and_hostile_inputs_give_valid_ids() {
        let empty = HardwareInfo::default();
        assert_eq!(empty.hardware_id(), "unknown_unknown_0c_0gb");
        let hostile = info("../..", "/etc/passwd\0\n..\u{202e}", 2, GIB);
        assert_eq!(hostile.hardware_id(), "unknown_etc_passwd_2c_1gb");
        let long = info(
            "x86_64",
            &"Very Long Model Name ".repeat(20),
            256,
            1024 * GIB,
        );
        let id = long.hardware_id();
        assert!(is_valid_id(&id) && id.ends_with("_256c_1024gb"), "{id}");
    }

    proptest! {
        #[test]
        fn ids_keep_the_rules(
            arch in any::<String>(),
            model in any::<String>(),
            uarch in any::<String>(),
            logical in 0usize..100_000,
            effective in 0usize..100_000,
            ram_bytes in 0u64..(1 << 50),
            family in proptest::option::of(0u32..1000),
            model_number in proptest::option::of(0u32..1000),
        ) {
            let hw = HardwareInfo {
                arch, cpu_model: model, cpu_uarch: uarch, logical_cores: logical,
                effective_cpus: effective, ram_bytes, cpu_family: family,
                cpu_model_number: model_number, ..HardwareInfo::default()
            };
            let id = hw.hardware_id();
            prop_assert!(is_valid_id(&id), "{:?}", id);
            prop_assert_eq!(&id, &hw.clone().hardware_id());
            let counts = format!("_{}c_{}gb", logical, ram_bucket_gib(ram_bytes));
            prop_assert!(id.contains(&counts), "{:?} lacks {:?}", id, counts);
            let suffix = format!("gb_e{effective}");
            prop_assert_eq!(id.ends_with(&suffix), effective > 0 && effective < logical);
        }

        #[test]
        fn ids_survive_absurd_counts(
            model in any::<String>(),
            logical in any::<usize>(),
            effective in any::<usize>(),
            ram_bytes in any::<u64>(),
        ) {
            let hw = HardwareInfo {
                arch: "x86_64".into(), cpu_model: model, logical_cores: logical,
                effective_cpus: effective, ram_bytes, cpu_family: Some(u32::MAX),
                cpu_model_number: Some(u32::MAX), ..HardwareInfo::default()
            };
            prop_assert!(is_valid_id(&hw.hardware_id()));
        }

        #[test]
        fn cleaned_models_are_clean(model in any::<String>()) {
            let cleaned = clean_model(&model);
            prop_assert!(cleaned.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
            prop_assert!(!cleaned.contains("__") && !cleaned.starts_with('_') && !cleaned.ends_with('_'));
        }
    }
}
