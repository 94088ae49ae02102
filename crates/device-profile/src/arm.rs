//! ARM core names from the `CPU implementer` / `CPU part` pair of `/proc/cpuinfo`.
//!
//! ARM kernels print no `model name`; the MIDR implementer and part numbers name the core's
//! microarchitecture instead. The table follows the Linux kernel's
//! `arch/arm64/include/asm/cputype.h` and util-linux's `lscpu-arm.c`.

/// Implementer codes and the vendor names used in model strings.
const IMPLEMENTERS: &[(u32, &str)] = &[
    (0x41, "Arm"),
    (0x42, "Broadcom"),
    (0x43, "Cavium"),
    (0x46, "Fujitsu"),
    (0x48, "HiSilicon"),
    (0x4e, "NVIDIA"),
    (0x50, "APM"),
    (0x51, "Qualcomm"),
    (0x53, "Samsung"),
    (0x56, "Marvell"),
    (0x61, "Apple"),
    (0x6d, "Microsoft"),
    (0x70, "Phytium"),
    (0xc0, "Ampere"),
];

/// `(implementer, part, core name)`. Arm Ltd's names stand alone (`Cortex-A72`); other
/// vendors' names carry the vendor (`Apple M1 Firestorm`) so that the name alone says whose
/// core it is.
const PARTS: &[(u32, u32, &str)] = &[
    (0x41, 0xc07, "Cortex-A7"),
    (0x41, 0xc09, "Cortex-A9"),
    (0x41, 0xc0d, "Cortex-A17"),
    (0x41, 0xc0e, "Cortex-A17"),
    (0x41, 0xc0f, "Cortex-A15"),
    (0x41, 0xd01, "Cortex-A32"),
    (0x41, 0xd02, "Cortex-A34"),
    (0x41, 0xd03, "Cortex-A53"),
    (0x41, 0xd04, "Cortex-A35"),
    (0x41, 0xd05, "Cortex-A55"),
    (0x41, 0xd06, "Cortex-A65"),
    (0x41, 0xd07, "Cortex-A57"),
    (0x41, 0xd08, "Cortex-A72"),
    (0x41, 0xd09, "Cortex-A73"),
    (0x41, 0xd0a, "Cortex-A75"),
    (0x41, 0xd0b, "Cortex-A76"),
    (0x41, 0xd0c, "Neoverse-N1"),
    (0x41, 0xd0d, "Cortex-A77"),
    (0x41, 0xd0e, "Cortex-A76AE"),
    (0x41, 0xd40, "Neoverse-V1"),
    (0x41, 0xd41, "Cortex-A78"),
    (0x41, 0xd42, "Cortex-A78AE"),
    (0x41, 0xd43, "Cortex-A65AE"),
    (0x41, 0xd44, "Cortex-X1"),
    (0x41, 0xd46, "Cortex-A510"),
    (0x41, 0xd47, "Cortex-A710"),
    (0x41, 0xd48, "Cortex-X2"),
    (0x41, 0xd49, "Neoverse-N2"),
    (0x41, 0xd4a, "Neoverse-E1"),
    (0x41, 0xd4b, "Cortex-A78C"),
    (0x41, 0xd4c, "Cortex-X1C"),
    (0x41, 0xd4d, "Cortex-A715"),
    (0x41, 0xd4e, "Cortex-X3"),
    (0x41, 0xd4f, "Neoverse-V2"),
    (0x41, 0xd80, "Cortex-A520"),
    (0x41, 0xd81, "Cortex-A720"),
    (0x41, 0xd82, "Cortex-X4"),
    (0x41, 0xd83, "Neoverse-V3AE"),
    (0x41, 0xd84, "Neoverse-V3"),
    (0x41, 0xd85, "Cortex-X925"),
    (0x41, 0xd87, "Cortex-A725"),
    (0x41, 0xd8e, "Neoverse-N3"),
    (0x42, 0x516, "Broadcom ThunderX2"),
    (0x43, 0x0a1, "Cavium ThunderX 88XX"),
    (0x43, 0x0af, "Cavium ThunderX2 99XX"),
    (0x46, 0x001, "Fujitsu A64FX"),
    (0x48, 0xd01, "HiSilicon Kunpeng 920"),
    (0x4e, 0x003, "NVIDIA Denver 2"),
    (0x4e, 0x004, "NVIDIA Carmel"),
    (0x51, 0x001, "Qualcomm Oryon"),
    (0x51, 0x800, "Qualcomm Kryo 2XX Gold"),
    (0x51, 0x801, "Qualcomm Kryo 2XX Silver"),
    (0x51, 0x802, "Qualcomm Kryo 3XX Gold"),
    (0x51, 0x803, "Qualcomm Kryo 3XX Silver"),
    (0x51, 0x804, "Qualcomm Kryo 4XX Gold"),
    (0x51, 0x805, "Qualcomm Kryo 4XX Silver"),
    (0x51, 0xc00, "Qualcomm Falkor"),
    (0x51, 0xc01, "Qualcomm Saphira"),
    (0x61, 0x020, "Apple A14 Icestorm"),
    (0x61, 0x021, "Apple A14 Firestorm"),
    (0x61, 0x022, "Apple M1 Icestorm"),
    (0x61, 0x023, "Apple M1 Firestorm"),
    (0x61, 0x024, "Apple M1 Pro Icestorm"),
    (0x61, 0x025, "Apple M1 Pro Firestorm"),
    (0x61, 0x028, "Apple M1 Max Icestorm"),
    (0x61, 0x029, "Apple M1 Max Firestorm"),
    (0x61, 0x030, "Apple A15 Blizzard"),
    (0x61, 0x031, "Apple A15 Avalanche"),
    (0x61, 0x032, "Apple M2 Blizzard"),
    (0x61, 0x033, "Apple M2 Avalanche"),
    (0x61, 0x034, "Apple M2 Pro Blizzard"),
    (0x61, 0x035, "Apple M2 Pro Avalanche"),
    (0x61, 0x038, "Apple M2 Max Blizzard"),
    (0x61, 0x039, "Apple M2 Max Avalanche"),
    (0x6d, 0xd49, "Microsoft Azure Cobalt 100"),
    (0xc0, 0xac3, "Ampere-1"),
    (0xc0, 0xac4, "Ampere-1A"),
];

/// The core's name: `Cortex-A72`, `Neoverse-N1`, `Apple M1 Firestorm`, or for a part not in
/// the table `Arm part 0xd99` / `implementer 0x99 part 0x001`. Never empty.
pub(crate) fn core_name(implementer: u32, part: u32) -> String {
    if let Some((_, _, name)) = PARTS
        .iter()
        .find(|(imp, p, _)| *imp == implementer && *p == part)
    {
        return (*name).to_string();
    }
    match vendor(implementer) {
        Some(vendor) => format!("{vendor} part 0x{part:03x}"),
        None => format!("implementer 0x{implementer:02x} part 0x{part:03x}"),
    }
}

/// The model string for a core: Arm Ltd's cores get the vendor in front (`Arm Cortex-A72`),
/// the others already carry it.
pub(crate) fn model_name(implementer: u32, part: u32) -> String {
    let name = core_name(implementer, part);
    if implementer == 0x41 && !name.starts_with("Arm ") {
        format!("Arm {name}")
    } else {
        name
    }
}

/// A rough performance tier of a known core, used only to pick the big core when the
/// kernel gives neither `cpu_capacity` nor frequencies: higher is bigger.
pub(crate) fn tier(implementer: u32, part: u32) -> u32 {
    const BIG: &[(u32, u32)] = &[
        (0x41, 0xd44), // Cortex-X1
        (0x41, 0xd48), // Cortex-X2
        (0x41, 0xd4c), // Cortex-X1C
        (0x41, 0xd4e), // Cortex-X3
        (0x41, 0xd82), // Cortex-X4
        (0x41, 0xd85), // Cortex-X925
        (0x61, 0x021),
        (0x61, 0x023),
        (0x61, 0x025),
        (0x61, 0x029),
        (0x61, 0x031),
        (0x61, 0x033),
        (0x61, 0x035),
        (0x61, 0x039),
    ];
    const LITTLE: &[(u32, u32)] = &[
        (0x41, 0xc07), // Cortex-A7
        (0x41, 0xd01), // Cortex-A32
        (0x41, 0xd02), // Cortex-A34
        (0x41, 0xd03), // Cortex-A53
        (0x41, 0xd04), // Cortex-A35
        (0x41, 0xd05), // Cortex-A55
        (0x41, 0xd46), // Cortex-A510
        (0x41, 0xd80), // Cortex-A520
        (0x51, 0x801),
        (0x51, 0x803),
        (0x51, 0x805),
        (0x61, 0x020),
        (0x61, 0x022),
        (0x61, 0x024),
        (0x61, 0x028),
        (0x61, 0x030),
        (0x61, 0x032),
        (0x61, 0x034),
        (0x61, 0x038),
    ];
    let key = (implementer, part);
    if BIG.contains(&key) {
        3
    } else if LITTLE.contains(&key) {
        1
    } else {
        2
    }
}

fn vendor(implementer: u32) -> Option<&'static str> {
    IMPLEMENTERS
        .iter()
        .find(|(imp, _)| *imp == implementer)
        .map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_known_cores() {
        assert_eq!(core_name(0x41, 0xd08), "Cortex-A72");
        assert_eq!(model_name(0x41, 0xd08), "Arm Cortex-A72");
        assert_eq!(core_name(0x41, 0xd0c), "Neoverse-N1");
        assert_eq!(core_name(0x41, 0xd40), "Neoverse-V1");
        assert_eq!(core_name(0x41, 0xd4f), "Neoverse-V2");
        assert_eq!(core_name(0x41, 0xd4e), "Cortex-X3");
        assert_eq!(core_name(0x41, 0xd82), "Cortex-X4");
        assert_eq!(core_name(0x41, 0xd81), "Cortex-A720");
        assert_eq!(model_name(0x61, 0x023), "Apple M1 Firestorm");
        assert_eq!(model_name(0x51, 0x804), "Qualcomm Kryo 4XX Gold");
    }

    #[test]
    fn names_unknown_parts_without_an_empty_name() {
        assert_eq!(core_name(0x41, 0xd99), "Arm part 0xd99");
        assert_eq!(core_name(0x99, 0x1), "implementer 0x99 part 0x001");
    }

    #[test]
    fn table_has_no_duplicate_keys() {
        for (idx, (imp, part, _)) in PARTS.iter().enumerate() {
            assert!(
                !PARTS[idx + 1..]
                    .iter()
                    .any(|(i, p, _)| i == imp && p == part),
                "0x{imp:02x}/0x{part:03x} twice"
            );
        }
    }

    #[test]
    fn tiers_order_big_above_little() {
        assert_eq!(tier(0x41, 0xd4e), 3); // Cortex-X3
        assert_eq!(tier(0x41, 0xd4d), 2); // Cortex-A715
        assert_eq!(tier(0x41, 0xd46), 1); // Cortex-A510
        assert_eq!(tier(0x41, 0xd05), 1); // Cortex-A55
        assert_eq!(tier(0x41, 0xd03), 1); // Cortex-A53
        assert_eq!(tier(0x41, 0xd0b), 2); // Cortex-A76
        assert_eq!(tier(0x41, 0xd47), 2); // Cortex-A710
        assert_eq!(tier(0x61, 0x022), 1); // Icestorm
    }
}
