//! The tuner contenders: detection, and `tune_if_needed` answered from a cached profile.

use auto_tuner::{AutoTunerOptions, Source, Tuned, matrix_workload, tune_if_needed};
use device_profile::HardwareInfo;
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

/// Options for a quick first tune into `home`: a 256×256 workload, 500 µs repetitions and
/// an 8 MiB working set, so the profile exists after a fraction of a second.
pub fn small_tune_options(home: &Path) -> AutoTunerOptions {
    let mut opt = AutoTunerOptions::default();
    opt.stores.home = auto_tuner::ProfileHome::Dir(home.to_path_buf());
    opt.question.workload = matrix_workload(256, 256);
    // A busy machine must not mark the profile noisy: the next call would re-tune it
    // instead of answering from the cache, which is what the contender times.
    opt.measuring.load_average = auto_tuner::LoadAverage::Given(None);
    opt.measuring.repetition_time = Duration::from_micros(500);
    opt.measuring.max_working_set_bytes = 8 << 20;
    opt
}

/// One detection of this machine.
pub fn detect() -> HardwareInfo {
    black_box(device_profile::get_hardware_info())
}

/// A temporary cache home holding this machine's profile, tuned once on creation: every
/// [`CachedTune::call`] is the cached path of `tune_if_needed`.
pub struct CachedTune {
    /// Removed when dropped.
    home: tempfile::TempDir,
    hw: HardwareInfo,
    opt: AutoTunerOptions,
}

impl CachedTune {
    /// Creates the temporary home and tunes into it with [`small_tune_options`]. Panics when
    /// the profile cannot be measured or saved: a bench without it would time the tuner.
    pub fn prepare() -> Self {
        let home = tempfile::tempdir().expect("temporary cache home");
        let hw = device_profile::get_hardware_info();
        let opt = small_tune_options(home.path());
        let first = tune_if_needed(&hw, &opt).expect("first tune");
        assert!(
            matches!(first.source, Source::Measured(Some(_))),
            "the first tune was not saved (source {})",
            first.source.name()
        );
        CachedTune { home, hw, opt }
    }

    /// The cache home.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// One `tune_if_needed` call for the machine detected at creation, answered from the cache.
    /// Panics when it is not: the figure would time a measurement.
    pub fn call(&self) -> Tuned {
        let tuned = tune_if_needed(&self.hw, &self.opt).expect("cached tune");
        assert!(
            matches!(tuned.source, Source::Cache(_)),
            "tune_if_needed did not answer from the cache (source {})",
            tuned.source.name()
        );
        black_box(tuned)
    }
}
