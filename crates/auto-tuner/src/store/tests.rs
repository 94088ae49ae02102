//! The rules `clear` and `import` apply to a file before they act on it: which names of an
//! older version's profiles are ours to remove, and which refusals blame the version.

use super::{another_version, older_profile_named_ours};
use crate::profile::SCHEMA_VERSION;
use crate::validate::Rejection;
use std::path::Path;

const ID: &str = "x86_64_intel_xeon_f6m106_2c_24gb";

/// A profile of schema `schema` of the machine `id`.
fn profile_text(schema: u64, id: &str) -> Vec<u8> {
    format!(r#"{{"schema_version":{schema},"hardware_id":"{id}","threads":2}}"#).into_bytes()
}

/// Whether `clear` (for this machine, or with `--all` when `id` is `None`) takes an older
/// profile of `ID` at `name`.
fn older_ours(name: &str, id: Option<&str>) -> bool {
    let text = profile_text(u64::from(SCHEMA_VERSION) - 1, ID);
    older_profile_named_ours(&text, &Path::new("runtime").join(name), id)
}

#[test]
fn every_part_of_the_cache_grammar_names_an_older_profile_of_ours() {
    for parts in [
        "",
        "_w4ee5a1c794d4b2e5",
        "_w4096x14336",
        "_b8",
        "_t16",
        "_rmeasure",
        "_rpatient",
        "_kavx2",
        "_xllamacpp-88433aadb54d3dfd",
        "_w4ee5a1c794d4b2e5_b64_t2_rexhaustive_kportable",
    ] {
        let name = format!("{ID}{parts}.json");
        assert!(older_ours(&name, Some(ID)), "{name}");
        assert!(older_ours(&name, None), "{name} with --all");
    }
}

#[test]
fn a_name_outside_the_grammar_is_not_ours() {
    for parts in [
        "_backup",
        "_wcopy",
        // A workload key of 15 or 17 digits, in capitals, or a shape with a side missing.
        "_w4ee5a1c794d4b2e",
        "_w4ee5a1c794d4b2e5a",
        "_w4EE5A1C794D4B2E5",
        "_w4096x",
        "_wx4096",
        "_w",
        "_b",
        "_b8x",
        "_t-1",
        "_rcareful",
        "_r",
        "_k",
        "_kAVX2",
        "_x",
        "_xllama cpp",
        "_q1",
        "_",
        "_b8_",
        "extra",
        "-copy",
    ] {
        let name = format!("{ID}{parts}.json");
        assert!(!older_ours(&name, Some(ID)), "{name}");
        assert!(!older_ours(&name, None), "{name} with --all");
    }
    // Not a `.json` file, or another machine's stem.
    assert!(!older_ours(&format!("{ID}.json.bak"), Some(ID)));
    assert!(!older_ours("x86_64_other_2c_8gb.json", Some(ID)));
    assert!(!older_ours("x86_64_other_2c_8gb.json", None));
}

#[test]
fn only_an_older_schema_of_the_machine_asked_for_is_ours() {
    let name = Path::new("runtime").join(format!("{ID}_b8.json"));
    let older = |schema: u64, id: &str, wanted: Option<&str>| {
        older_profile_named_ours(&profile_text(schema, id), &name, wanted)
    };
    let now = u64::from(SCHEMA_VERSION);
    assert!(older(now - 1, ID, Some(ID)));
    assert!(older(1, ID, Some(ID)));
    // This version's schema (a file it could not parse is not removed as an older one),
    // and a newer version's, are not.
    assert!(!older(now, ID, Some(ID)));
    assert!(!older(now + 1, ID, Some(ID)));
    assert!(!older(now + 1, ID, None));
    // Another machine's file under this machine's name: not without `--all`, which takes
    // any machine's file under that machine's own name only.
    let other = "x86_64_other_2c_8gb";
    assert!(!older(now - 1, other, Some(ID)));
    assert!(!older(now - 1, other, None));
    let theirs = Path::new("runtime").join(format!("{other}_b8.json"));
    let text = profile_text(now - 1, other);
    assert!(!older_profile_named_ours(&text, &theirs, Some(ID)));
    assert!(older_profile_named_ours(&text, &theirs, None));
    // Not a profile: no schema, no machine, not JSON.
    for text in [
        format!(r#"{{"hardware_id":"{ID}"}}"#),
        format!(r#"{{"schema_version":{},"threads":2}}"#, now - 1),
        format!(r#"{{"schema_version":"{}","hardware_id":"{ID}"}}"#, now - 1),
        "not json".to_string(),
    ] {
        assert!(
            !older_profile_named_ours(text.as_bytes(), &name, Some(ID)),
            "{text}"
        );
    }
}

#[test]
fn only_another_schema_or_another_revision_of_the_same_kernel_blames_the_version() {
    let kernel = |cached: &str, now: &str| Rejection::KernelSignature {
        cached: cached.to_string(),
        now: now.to_string(),
    };
    assert!(another_version(&Rejection::SchemaVersion(3)));
    assert!(another_version(&kernel(
        "avx512 matmul-kernel r41",
        "avx512 matmul-kernel r42"
    )));
    // A kernel this CPU lacks, or runs under another name, is not a version's doing.
    assert!(!another_version(&kernel(
        "neon matmul-kernel r42",
        "avx512 matmul-kernel r42"
    )));
    assert!(!another_version(&kernel(
        "neon matmul-kernel r41",
        "avx512 matmul-kernel r42"
    )));
    assert!(!another_version(&kernel(
        "avx512 matmul-kernel r42",
        "avx512 matmul-kernel r42"
    )));
    for other in [
        Rejection::HardwareId("x86_64_other_2c_8gb".to_string()),
        Rejection::Empty,
        Rejection::NotAProfile("truncated".to_string()),
    ] {
        assert!(!another_version(&other), "{other}");
    }
}
