//! Tuning on a model workload: decode and prefill in the profile, the cache keyed by
//! workload, batch and rigor, the rigor serving rules, the estimate, the noisy flag, and
//! `measure_settings`, on small workloads in throwaway homes.

use auto_tuner::{
    AutoTunerOptions, CoreSet, LoadAverage, Phase, ProfileCache, Rigor, Setting, Source, Tuned,
    matrix_workload, tune_if_needed,
};
use device_profile::HardwareInfo;
use std::path::{Path, PathBuf};
use std::time::Duration;
use threadpool::SchedulePolicy;

/// This machine, read from `/` whatever `SIPLLM_SYSROOT` says.
fn hw() -> HardwareInfo {
    device_profile::get_hardware_info_from_root(Path::new("/"))
}

fn options(home: &Path) -> AutoTunerOptions {
    let mut opt = AutoTunerOptions::default();
    opt.stores.home = auto_tuner::ProfileHome::Dir(home.to_path_buf());
    opt.stores.system_profiles = None;
    opt.question.workload = matrix_workload(48, 256);
    opt.question.batch = 4;
    opt.measuring.repetition_time = Duration::from_micros(200);
    opt.measuring.max_working_set_bytes = 1 << 20;
    opt.measuring.load_average = LoadAverage::Given(None);
    opt
}

fn tune(opt: &AutoTunerOptions) -> Tuned {
    tune_if_needed(&hw(), opt).expect("tuning succeeds")
}

fn slot_path(opt: &AutoTunerOptions) -> PathBuf {
    ProfileCache::new(&opt.stores.home_dir().unwrap().unwrap())
        .path_for(&hw().hardware_id(), &opt.question.slot(&hw()))
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn workload_batch_and_rigor_each_name_their_own_file() {
    let home = tempfile::tempdir().unwrap();
    let id = hw().hardware_id();
    let mut default = AutoTunerOptions::default();
    default.stores.home = auto_tuner::ProfileHome::Dir(home.path().to_path_buf());
    default.question.kernel = Some(matmul_kernel::Kernel::best());
    // The default request keeps the plain <hardware_id>.json.
    assert_eq!(file_name(&slot_path(&default)), format!("{id}.json"));
    let small = matrix_workload(48, 256);
    let key = small.key();
    let cases = [
        (
            {
                let mut opt = default.clone();
                opt.question.workload = small.clone();
                opt
            },
            format!("{id}_w{key}.json"),
        ),
        (
            {
                let mut opt = default.clone();
                opt.question.batch = 8;
                opt
            },
            format!("{id}_b8.json"),
        ),
        (
            {
                let mut opt = default.clone();
                opt.question.rigor = Rigor::Patient;
                opt
            },
            format!("{id}_rpatient.json"),
        ),
        (
            {
                let mut opt = default.clone();
                opt.question.workload = small.clone();
                opt.question.batch = 8;
                opt.question.rigor = Rigor::Exhaustive;
                opt
            },
            format!("{id}_w{key}_b8_rexhaustive.json"),
        ),
    ];
    for (opt, name) in cases {
        assert_eq!(file_name(&slot_path(&opt)), name);
    }
    // The workload's name is not part of the key; its shapes are.
    let mut renamed = small.clone();
    renamed.name = "another name".into();
    assert_eq!(renamed.key(), key);
    assert_ne!(matrix_workload(48, 512).key(), key);
}

#[test]
fn a_profile_serves_its_rigor_and_lower_never_higher() {
    let home = tempfile::tempdir().unwrap();
    let mut patient = options(home.path());
    patient.question.rigor = Rigor::Patient;
    let first = tune(&patient);
    let patient_path = first.source.path().unwrap().clone();
    assert!(file_name(&patient_path).contains("_rpatient"), "{first:?}");
    assert_eq!(first.profile.rigor, Rigor::Patient);
    // Every thread count was measured for each phase.
    let limit = first.profile.request.thread_limit;
    for phase in Phase::ALL {
        let counts: std::collections::BTreeSet<usize> = first
            .profile
            .phase(phase)
            .measurements
            .iter()
            .map(|m| m.threads)
            .collect();
        assert_eq!(counts, (1..=limit).collect(), "{phase}");
    }
    // A lower rigor is served the patient profile, without a warning.
    let measure = tune(&options(home.path()));
    assert_eq!(measure.source, Source::Cache(patient_path.clone()));
    assert!(measure.warnings.is_empty(), "{:?}", measure.warnings);
    // A higher one is not: it tunes its own, in its own file, without a warning either.
    let mut exhaustive = options(home.path());
    exhaustive.question.rigor = Rigor::Exhaustive;
    let tuned = tune(&exhaustive);
    assert_eq!(tuned.source.name(), "measured");
    assert!(tuned.warnings.is_empty(), "{:?}", tuned.warnings);
    let exhaustive_path = tuned.source.path().unwrap().clone();
    assert!(file_name(&exhaustive_path).contains("_rexhaustive"));
    // Now the highest rigor serves every lower request first.
    assert_eq!(
        tune(&options(home.path())).source,
        Source::Cache(exhaustive_path.clone())
    );
    assert_eq!(tune(&patient).source, Source::Cache(exhaustive_path));
    // A patient profile copied into the exhaustive slot is refused there: its rigor is lower.
    let text = std::fs::read_to_string(&patient_path).unwrap();
    std::fs::write(slot_path(&exhaustive), text).unwrap();
    let again = tune(&exhaustive);
    assert_eq!(again.source.name(), "measured");
    assert!(
        again.warnings[0].contains("tuned at rigor patient, this run asks for exhaustive"),
        "{:?}",
        again.warnings
    );
}

#[test]
fn an_estimate_measures_nothing_and_saves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let hw = hw();
    let mut estimate = options(home.path());
    estimate.question.rigor = Rigor::Estimate;
    let tuned = tune(&estimate);
    assert_eq!(tuned.source, Source::Estimated);
    let expected = auto_tuner::estimate_threads(&hw, estimate.question.thread_limit(&hw));
    assert_eq!(tuned.profile.threads(), expected);
    assert_eq!(tuned.profile.prefill.threads, expected);
    assert_eq!(tuned.profile.schedule_policy(), SchedulePolicy::Static);
    assert_eq!(tuned.profile.rigor, Rigor::Estimate);
    assert!(tuned.profile.decode.measurements.is_empty());
    assert!(tuned.profile.tuning_seconds.is_none());
    assert!(!home.path().join("runtime").exists(), "nothing written");
    // Any measured profile serves an estimate request.
    let measured = tune(&options(home.path()));
    assert_eq!(
        tune(&estimate).source,
        Source::Cache(measured.source.path().unwrap().clone())
    );
}

#[test]
fn both_phases_are_measured_and_build_their_pools() {
    let home = tempfile::tempdir().unwrap();
    let tuned = tune(&options(home.path()));
    let p = &tuned.profile;
    assert_eq!(p.request.batch, 4);
    for phase in Phase::ALL {
        let setting = p.phase(phase);
        assert!(setting.tokens_per_sec.unwrap() > 0.0, "{phase}");
        assert!(!setting.measurements.is_empty(), "{phase}");
    }
    // The document's top level is decode, written from it.
    let doc = serde_json::to_value(p).unwrap();
    for key in [
        "threads",
        "schedule_policy",
        "schedule_policy_id",
        "cores",
        "pinned_cpus",
    ] {
        assert_eq!(doc[key], doc["decode"][key], "{key}");
    }
    let env = p.environment.as_ref().unwrap();
    assert!(!env.noisy && env.load_average_1m.is_none());
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let decode = p.build_pool().unwrap();
            let prefill = p.build_prefill_pool().unwrap();
            assert_eq!(decode.n_threads(), p.decode.threads);
            assert_eq!(prefill.n_threads(), p.prefill.threads);
            assert_eq!(prefill.policy(), p.prefill.schedule_policy);
        });
    });
}

#[test]
fn a_spent_budget_still_measures_each_phase_once() {
    let home = tempfile::tempdir().unwrap();
    let mut opt = options(home.path());
    opt.question.budget = Some(Duration::from_nanos(1));
    let tuned = tune(&opt);
    assert!(tuned.profile.partial);
    for phase in Phase::ALL {
        let setting = tuned.profile.phase(phase);
        assert!(!setting.measurements.is_empty(), "{phase}");
        assert!(setting.tokens_per_sec.is_some(), "{phase}");
    }
}

#[test]
fn a_noisy_profile_is_re_tuned_once_and_the_re_tune_is_kept() {
    let home = tempfile::tempdir().unwrap();
    let mut busy = options(home.path());
    busy.measuring.load_average = LoadAverage::Given(Some(64.0));
    let mut quiet = options(home.path());
    quiet.measuring.load_average = LoadAverage::Given(Some(0.0));
    // A busy machine: a warning, and the profile is marked noisy.
    let first = tune(&busy);
    assert_eq!(first.source.name(), "measured");
    assert!(
        first
            .warnings
            .iter()
            .any(|w| w.contains("busy") && w.contains("noisy")),
        "{:?}",
        first.warnings
    );
    let env = first.profile.environment.clone().unwrap();
    assert!(env.noisy && !env.retune);
    assert_eq!(env.load_average_1m, Some(64.0));
    // The next run re-tunes it, once, with a warning.
    let second = tune(&quiet);
    assert_eq!(second.source.name(), "measured");
    assert!(
        second.warnings[0].contains("busy machine (noisy); re-tuning it once"),
        "{:?}",
        second.warnings
    );
    let env = second.profile.environment.clone().unwrap();
    assert!(!env.noisy && env.retune);
    assert_eq!(tune(&quiet).source.name(), "cache");

    // Busy both times: the re-tune is noisy too, and kept.
    let home = tempfile::tempdir().unwrap();
    let mut busy = busy;
    busy.stores.home = auto_tuner::ProfileHome::Dir(home.path().to_path_buf());
    tune(&busy);
    let second = tune(&busy);
    assert_eq!(second.source.name(), "measured");
    let env = second.profile.environment.clone().unwrap();
    assert!(env.noisy && env.retune);
    assert!(
        second.warnings.iter().any(|w| w.contains("kept")),
        "{:?}",
        second.warnings
    );
    let third = tune(&busy);
    assert_eq!(third.source.name(), "cache", "{:?}", third.warnings);
    // Never measure means never measure, noisy or not.
    let mut cached_only = options(tempfile::tempdir().unwrap().path());
    cached_only.stores.cached_only = true;
    assert_eq!(tune(&cached_only).source, Source::Defaults);
}

#[test]
fn a_noisy_profile_of_a_higher_rigor_does_not_hide_the_clean_re_tune() {
    // A patient profile serves measure-rigor runs; tuned on a busy machine, a measure run
    // re-tunes into its own slot once, and the runs after it are served that profile.
    let home = tempfile::tempdir().unwrap();
    let mut busy_patient = options(home.path());
    busy_patient.measuring.load_average = LoadAverage::Given(Some(64.0));
    busy_patient.question.rigor = auto_tuner::Rigor::Patient;
    let mut quiet = options(home.path());
    quiet.measuring.load_average = LoadAverage::Given(Some(0.0));
    assert_eq!(tune(&busy_patient).source.name(), "measured");
    let second = tune(&quiet);
    assert_eq!(second.source.name(), "measured", "{:?}", second.warnings);
    for _ in 0..2 {
        let later = tune(&quiet);
        assert_eq!(later.source.name(), "cache", "{:?}", later.warnings);
        assert_eq!(later.profile, second.profile);
    }
}

#[test]
fn settings_are_measured_side_by_side_for_a_phase() {
    let hw = hw();
    let opt = options(Path::new("unused"));
    let settings = [
        Setting {
            threads: 1,
            policy: SchedulePolicy::Static,
            cores: CoreSet::Any,
        },
        Setting {
            threads: hw.logical_cores.max(1),
            policy: SchedulePolicy::Guided,
            cores: CoreSet::Any,
        },
    ];
    for phase in Phase::ALL {
        let measured = auto_tuner::measure_settings(&hw, &opt, phase, &settings).unwrap();
        assert_eq!(measured.len(), 2, "{phase}");
        for (m, s) in measured.iter().zip(&settings) {
            assert_eq!((m.threads, m.schedule_policy), (s.threads, s.policy));
            assert!(m.tokens_per_sec_min <= m.tokens_per_sec);
            assert!(m.tokens_per_sec <= m.tokens_per_sec_max);
            assert!(m.tokens_per_sec_min > 0.0);
            assert!(m.repetitions >= auto_tuner::MIN_REPETITIONS);
        }
    }
    // A pinned setting this machine has no set for, or too many threads for its set, is an
    // error naming it, before anything is measured.
    let bad = Setting {
        threads: 9999,
        policy: SchedulePolicy::Static,
        cores: CoreSet::Node(7),
    };
    let err = auto_tuner::measure_settings(&hw, &opt, Phase::Decode, &[bad])
        .unwrap_err()
        .to_string();
    assert!(err.contains("9999 threads on node7"), "{err}");
}

/// Replaces the profile at `path` by the same profile measured on a quiet machine, as
/// another process's re-tune or a `profile import` would, whole (a rename).
fn replace_with_a_quiet_copy(path: &Path) {
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    doc["environment"]["noisy"] = serde_json::Value::Bool(false);
    let tmp = path.with_extension("replacing");
    std::fs::write(&tmp, serde_json::to_vec(&doc).unwrap()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// `opt` reporting each step that says it waits for the lock on `waiting`.
fn telling_when_it_waits(
    mut opt: AutoTunerOptions,
) -> (AutoTunerOptions, std::sync::mpsc::Receiver<()>) {
    let (tx, waiting) = std::sync::mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    opt.reporter = auto_tuner::Reporter::new(move |report| {
        if let auto_tuner::Report::Step(line) = report
            && line.starts_with("waiting for another process")
        {
            let _ = tx.lock().unwrap().send(());
        }
    });
    (opt, waiting)
}

#[test]
fn a_noisy_profile_replaced_while_waiting_for_the_lock_is_served_not_re_tuned() {
    watchdog::guard("a re-tune waiting on a held lock", || {
        let home = tempfile::tempdir().unwrap();
        let mut busy = options(home.path());
        busy.measuring.load_average = LoadAverage::Given(Some(64.0));
        assert!(tune(&busy).profile.environment.unwrap().noisy);
        let path = slot_path(&busy);
        let cache = ProfileCache::new(home.path());
        let id = hw().hardware_id();
        let mut quiet = options(home.path());
        quiet.measuring.load_average = LoadAverage::Given(Some(0.0));

        // Waiting with the lock at the end (another worker's re-tune, a `profile import`):
        // the file as it is then is served, not the noisy copy read before the wait.
        let held = cache.lock(&id, std::time::Instant::now()).unwrap().unwrap();
        let (opt, waiting) = telling_when_it_waits(quiet.clone());
        let waiter = std::thread::spawn(move || tune(&opt));
        waiting.recv().unwrap();
        replace_with_a_quiet_copy(&path);
        drop(held);
        let tuned = waiter.join().unwrap();
        assert_eq!(
            tuned.source,
            Source::Cache(path.clone()),
            "{:?}",
            tuned.warnings
        );
        let env = tuned.profile.environment.unwrap();
        assert!(!env.noisy && !env.retune, "{env:?}");
        assert!(
            tuned
                .warnings
                .iter()
                .any(|w| w.contains("replaced the noisy profile")),
            "{:?}",
            tuned.warnings
        );

        // Waiting past its budget, the lock still held: the same.
        let mut measure_busy = busy.clone();
        measure_busy.stores.force_recalibrate = true;
        assert!(tune(&measure_busy).profile.environment.unwrap().noisy);
        let mut quick = quiet.clone();
        // Long enough for the file to be replaced during the wait on a loaded machine: the
        // wait lasts it all, the lock being held throughout.
        quick.question.budget = Some(Duration::from_secs(3));
        let held = cache.lock(&id, std::time::Instant::now()).unwrap().unwrap();
        let (opt, waiting) = telling_when_it_waits(quick);
        let waiter = std::thread::spawn(move || tune(&opt));
        waiting.recv().unwrap();
        replace_with_a_quiet_copy(&path);
        let tuned = waiter.join().unwrap();
        drop(held);
        assert_eq!(
            tuned.source,
            Source::Cache(path.clone()),
            "{:?}",
            tuned.warnings
        );
        assert!(!tuned.profile.environment.unwrap().noisy);

        // A re-measure asked for that cannot take the lock serves the profile cached, not
        // the estimate.
        let mut again = quiet;
        again.stores.force_recalibrate = true;
        again.question.budget = Some(Duration::from_millis(50));
        let held = cache.lock(&id, std::time::Instant::now()).unwrap().unwrap();
        let tuned = tune(&again);
        drop(held);
        assert_eq!(tuned.source, Source::Cache(path), "{:?}", tuned.warnings);
        assert!(
            tuned
                .warnings
                .iter()
                .any(|w| w.contains("still tuning") && w.contains("the cached profile")),
            "{:?}",
            tuned.warnings
        );
    });
}

#[test]
fn a_stale_profile_of_a_higher_rigor_is_not_said_to_be_re_tuned_by_a_lower_one() {
    let home = tempfile::tempdir().unwrap();
    let mut patient = options(home.path());
    patient.question.rigor = Rigor::Patient;
    tune(&patient);
    // Written by an older sipllm: no run of this version reads it.
    let path = slot_path(&patient);
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["schema_version"] = 3.into();
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    // A run at the default rigor measures its own slot; the patient one it leaves.
    let measure = options(home.path());
    let tuned = tune(&measure);
    assert_eq!(tuned.source.name(), "measured");
    let about = |tuned: &Tuned| {
        tuned
            .warnings
            .iter()
            .find(|w| w.contains(&file_name(&path)))
            .cloned()
            .unwrap_or_default()
    };
    let warning = about(&tuned);
    assert!(warning.contains("schema version 3"), "{:?}", tuned.warnings);
    assert!(!warning.contains("re-tuning"), "{warning}");
    assert!(
        warning.contains("a --rigor patient run re-tunes it; `sipllm profile clear` removes it"),
        "{warning}"
    );
    // A file no clear can tell to be a profile is not promised to be cleared.
    std::fs::write(&path, "{").unwrap();
    let warning = about(&tune(&measure));
    assert!(
        warning.contains("a --rigor patient run re-tunes it)"),
        "{warning}"
    );
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    // The patient run re-tunes it, and says so.
    let tuned = tune(&patient);
    assert_eq!(tuned.source.name(), "measured");
    assert!(
        about(&tuned).ends_with("; re-tuning"),
        "{:?}",
        tuned.warnings
    );
}
