//! What the cache and store tests share: this machine, small options in a throwaway home,
//! the profile files of a store, and the check that a broken cached profile is rejected and replaced.
#![allow(dead_code, reason = "each test binary uses a part of these helpers")]

use auto_tuner::{
    AutoTunerOptions, ProfileCache, RuntimeProfile, Source, Tuned, matrix_workload, tune_if_needed,
};
use device_profile::HardwareInfo;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// This machine, so that the profile's thread counts are real (read from `/`, whatever
/// `SIPLLM_SYSROOT` says: the tests are hermetic).
pub fn hw() -> HardwareInfo {
    device_profile::get_hardware_info_from_root(Path::new("/"))
}

pub fn options(home: &Path) -> AutoTunerOptions {
    let mut opt = AutoTunerOptions::default();
    opt.stores.home = auto_tuner::ProfileHome::Dir(home.to_path_buf());
    opt.question.workload = matrix_workload(48, 80);
    opt.measuring.repetition_time = Duration::from_micros(200);
    // Hermetic: the machine's own load never marks these profiles noisy.
    opt.measuring.load_average = auto_tuner::LoadAverage::Given(None);
    opt.measuring.max_working_set_bytes = 1 << 20;
    opt
}

pub fn tune(hw: &HardwareInfo, opt: &AutoTunerOptions) -> Tuned {
    tune_if_needed(hw, opt).expect("tuning succeeds")
}

/// The file the test options' profile lives in.
pub fn profile_path(home: &Path, hw: &HardwareInfo) -> PathBuf {
    slot_path(&options(home), hw)
}

/// The file the profile of `opt` lives in.
pub fn slot_path(opt: &AutoTunerOptions, hw: &HardwareInfo) -> PathBuf {
    ProfileCache::new(&opt.stores.home_dir().unwrap().unwrap())
        .path_for(&hw.hardware_id(), &opt.question.slot(hw))
}

/// Writes `text` as the cached profile, tunes, and checks that the cache was ignored with
/// one warning containing `reason`, and replaced by a valid profile.
pub fn assert_rejected(home: &Path, hw: &HardwareInfo, reason: &str) {
    let opt = options(home);
    let tuned = tune(hw, &opt);
    let path = profile_path(home, hw);
    assert_eq!(
        tuned.source,
        Source::Measured(Some(path.clone())),
        "{reason}"
    );
    assert_eq!(tuned.warnings.len(), 1, "{:?}", tuned.warnings);
    assert!(
        tuned.warnings[0].contains(reason) && tuned.warnings[0].contains("re-tuning"),
        "expected {reason:?} in {:?}",
        tuned.warnings[0]
    );
    let saved: RuntimeProfile = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .expect("the replacement is a valid profile");
    assert_eq!(saved, tuned.profile);
    assert_eq!(tune(hw, &opt).source, Source::Cache(path));
}

/// The `.json` files of `dir`, sorted; none when it cannot be read.
pub fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    files
}
