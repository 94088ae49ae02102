//! Unit tests of `cache.rs`.

use super::*;

#[test]
fn a_request_is_served_from_its_rigor_and_every_higher_one_highest_first() {
    let hw = HardwareInfo {
        effective_cpus: 2,
        ..HardwareInfo::default()
    };
    let slot = Question::default().slot(&hw);
    let rigors = |asked| -> Vec<Option<Rigor>> {
        slot.serving(asked).into_iter().map(|s| s.rigor).collect()
    };
    use Rigor::{Exhaustive, Patient};
    assert_eq!(
        rigors(Rigor::Measure),
        [Some(Exhaustive), Some(Patient), None]
    );
    assert_eq!(rigors(Patient), [Some(Exhaustive), Some(Patient)]);
    assert_eq!(rigors(Exhaustive), [Some(Exhaustive)]);
    // An estimate is never stored, so any measured profile serves it.
    assert_eq!(rigors(Rigor::Estimate), rigors(Rigor::Measure));
}

#[test]
fn file_stems_never_escape_the_directory() {
    for id in ["", "..", "../x", "a/b", "/", "x\0y", "é"] {
        let stem = safe_file_stem(id);
        assert!(!stem.is_empty());
        assert!(
            stem.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
        assert_ne!(stem, "..");
    }
    assert_eq!(
        safe_file_stem("x86_64_amd_epyc_2c_24gb"),
        "x86_64_amd_epyc_2c_24gb"
    );
}

#[test]
fn no_number_of_other_files_hides_a_profile_or_a_stale_temporary_file() {
    let home = tempfile::tempdir().unwrap();
    let cache = ProfileCache::new(home.path());
    fs::create_dir_all(cache.runtime_dir()).unwrap();
    for i in 0..=MAX_ENTRIES_SCANNED {
        fs::File::create(cache.runtime_dir().join(format!("junk{i}"))).unwrap();
    }
    let profile = cache.runtime_dir().join("x86_64_some_machine.json");
    fs::write(&profile, "{}").unwrap();
    let stale = cache.runtime_dir().join(format!("{TEMP_PREFIX}left.tmp"));
    fs::write(&stale, "{").unwrap();
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    let file = fs::File::options().write(true).open(&stale).unwrap();
    file.set_modified(hour_ago).unwrap();
    assert_eq!(cache.profile_files().unwrap(), [profile]);
    cache.remove_stale_temp_files(STALE_TEMP_AGE);
    assert!(!stale.exists());
    assert!(
        cache.runtime_dir().join("junk0").exists(),
        "nothing else removed"
    );
}
