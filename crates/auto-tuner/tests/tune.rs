//! Every branch of `tune_if_needed`, the overrides and an unwritable home, on a small
//! workload in throwaway homes (the corrupt-cache cases are in `corrupt.rs`).

mod common;

use auto_tuner::{AutoTunerOptions, ProfileCache, ProfileHome, Source, matrix_workload};
use common::{assert_rejected, hw, options, profile_path, slot_path, tune};
use device_profile::HardwareInfo;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use threadpool::SchedulePolicy;

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn disable_autotune_gives_the_defaults_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let hw = hw();
    let mut opt = options(home.path());
    opt.overrides.disable_autotune = true;
    let tuned = tune(&hw, &opt);
    assert_eq!(tuned.source, Source::Defaults);
    assert_eq!(tuned.profile.threads(), 4.min(hw.effective_cpus));
    assert_eq!(tuned.profile.schedule_policy(), SchedulePolicy::Static);
    assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 0);
}

#[test]
fn defaults_are_clamped_to_the_usable_cpus() {
    let one_cpu = HardwareInfo {
        effective_cpus: 1,
        ..hw()
    };
    assert_eq!(
        auto_tuner::default_profile(&one_cpu, &AutoTunerOptions::default()).threads(),
        1
    );
}

#[test]
fn first_run_measures_and_saves_then_the_cache_is_used() {
    let home = tempfile::tempdir().unwrap();
    let hw = hw();
    let opt = options(home.path());
    let first = tune(&hw, &opt);
    let path = profile_path(home.path(), &hw);
    assert_eq!(first.source, Source::Measured(Some(path.clone())));
    assert!(first.warnings.is_empty(), "{:?}", first.warnings);

    let json = read_json(&path);
    for key in [
        "schema_version",
        "hardware_id",
        "threads",
        "schedule_policy",
        "schedule_policy_id",
        "decode",
        "prefill",
        "rigor",
        "environment",
        "hardware",
        "crate_version",
        "kernel",
        "tuned_at",
        "tuning_seconds",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    assert_eq!(json["schema_version"], 4);
    assert_eq!(json["rigor"], "measure");
    // Each phase: its setting, its score, and every policy measured at least once, each
    // with min <= median <= max.
    for phase in ["decode", "prefill"] {
        for key in ["threads", "schedule_policy", "tokens_per_sec", "gbps"] {
            assert!(json[phase].get(key).is_some(), "missing {phase}.{key}");
        }
        let measurements = json[phase]["measurements"].as_array().unwrap();
        for policy in SchedulePolicy::ALL {
            assert!(
                measurements
                    .iter()
                    .any(|m| m["schedule_policy"] == policy.name()),
                "{phase}: {policy} never measured"
            );
        }
        for m in measurements {
            let (lo, mid, hi) = (
                m["tokens_per_sec_min"].as_f64().unwrap(),
                m["tokens_per_sec"].as_f64().unwrap(),
                m["tokens_per_sec_max"].as_f64().unwrap(),
            );
            assert!(lo <= mid && mid <= hi && lo > 0.0, "{m}");
            assert!(m["repetitions"].as_u64().unwrap() >= 5);
        }
    }
    // The top level repeats decode.
    assert_eq!(json["threads"], json["decode"]["threads"]);
    assert_eq!(json["schedule_policy"], json["decode"]["schedule_policy"]);
    assert!(first.profile.threads() >= 1 && first.profile.threads() <= hw.effective_cpus);

    let second = tune(&hw, &opt);
    assert_eq!(second.source, Source::Cache(path));
    assert_eq!(second.profile, first.profile);
    assert!(second.warnings.is_empty());
}

#[test]
fn recalibrate_measures_again_and_replaces_the_profile() {
    let home = tempfile::tempdir().unwrap();
    let hw = hw();
    let opt = options(home.path());
    let first = tune(&hw, &opt);
    let path = profile_path(home.path(), &hw);
    // A marker the tuner would never measure shows whether the file was replaced.
    let mut marked = first.profile.clone();
    marked.decode.gbps = Some(123_456.0);
    std::fs::write(&path, serde_json::to_string(&marked).unwrap()).unwrap();
    assert_eq!(tune(&hw, &opt).profile.decode.gbps, Some(123_456.0));

    let mut forced = opt;
    forced.stores.force_recalibrate = true;
    let again = tune(&hw, &forced);
    assert_eq!(again.source, Source::Measured(Some(path.clone())));
    assert_ne!(read_json(&path)["decode"]["gbps"], 123_456.0);
}

#[test]
fn an_empty_directory_at_the_profile_path_is_replaced() {
    let home = tempfile::tempdir().unwrap();
    let hw = hw();
    std::fs::create_dir_all(profile_path(home.path(), &hw)).unwrap();
    assert_rejected(home.path(), &hw, "not a regular file");
}

#[test]
fn a_directory_with_contents_is_never_deleted() {
    let home = tempfile::tempdir().unwrap();
    let hw = hw();
    let path = profile_path(home.path(), &hw);
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(path.join("keep.txt"), "data").unwrap();
    let tuned = tune(&hw, &options(home.path()));
    assert_eq!(tuned.source, Source::Measured(None));
    assert_eq!(tuned.warnings.len(), 2, "{:?}", tuned.warnings);
    assert!(tuned.warnings[1].contains("cannot save"));
    assert_eq!(
        std::fs::read_to_string(path.join("keep.txt")).unwrap(),
        "data"
    );
}

#[test]
fn an_unwritable_home_still_gives_a_profile_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let tuned = tune(&hw(), &options(&file.join("home")));
    assert_eq!(tuned.source, Source::Measured(None));
    // Said once, before anything is read: not once per file it would have read, locked or
    // saved.
    let about_home: Vec<_> = tuned
        .warnings
        .iter()
        .filter(|w| w.contains("not-a-dir"))
        .collect();
    assert_eq!(about_home.len(), 1, "{:?}", tuned.warnings);
    assert!(
        about_home[0].contains("not-a-dir is not a directory")
            && about_home[0].contains("no profile is read from it or saved to it"),
        "{about_home:?}"
    );
    assert!(tuned.profile.threads() >= 1);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    // Listing says it once too, not again as a store it cannot list.
    let (listed, problems) = auto_tuner::list_profiles(&hw(), &options(&file.join("home")));
    assert!(listed.is_empty());
    assert_eq!(problems.len(), 1, "{problems:?}");
}

#[test]
fn a_store_that_is_a_link_to_nothing_is_named_as_one_by_tune_export_and_import() {
    let home = tempfile::tempdir().unwrap();
    let runtime = home.path().join("runtime");
    std::os::unix::fs::symlink(home.path().join("gone"), &runtime).unwrap();
    let opt = options(home.path());
    let tuned = tune(&hw(), &opt);
    assert_eq!(tuned.source, Source::Measured(None));
    assert!(
        tuned.warnings[0].contains("runtime is a symbolic link that leads nowhere")
            && tuned.warnings[0].contains("no profile is read from it or saved to it"),
        "{:?}",
        tuned.warnings
    );
    let export = auto_tuner::export_profiles(&hw(), &opt)
        .unwrap_err()
        .to_string();
    assert!(
        export.contains("cannot be used: ") && export.contains("leads nowhere"),
        "{export}"
    );
    let other = tempfile::tempdir().unwrap();
    tune(&hw(), &options(other.path()));
    let (bundle, _) = auto_tuner::export_profiles(&hw(), &options(other.path())).unwrap();
    let bundle = serde_json::to_vec(&bundle).unwrap();
    let import = auto_tuner::import_profiles(&hw(), &opt, &bundle, false)
        .unwrap_err()
        .to_string();
    assert!(import.contains("leads nowhere"), "{import}");
    assert!(
        !home.path().join("gone").exists(),
        "nothing created through the link"
    );
}

#[test]
fn no_cache_asked_for_measures_every_time_and_saves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut opt = options(dir.path());
    opt.stores.home = ProfileHome::None;
    for _ in 0..2 {
        let tuned = tune(&hw(), &opt);
        assert_eq!(tuned.source, Source::Measured(None));
        assert!(tuned.warnings.is_empty(), "{:?}", tuned.warnings);
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let err = auto_tuner::export_profiles(&hw(), &opt)
        .unwrap_err()
        .to_string();
    assert!(err.contains("ProfileHome::None"), "{err}");
}

#[test]
fn overrides_win_over_cache_and_tuner() {
    let home = tempfile::tempdir().unwrap();
    let hw = hw();
    let path = profile_path(home.path(), &hw);

    // No cache: nothing is measured or written; the other knob is the default.
    let mut opt = options(home.path());
    opt.overrides.threads = Some(1);
    let tuned = tune(&hw, &opt);
    assert_eq!(tuned.source, Source::Override(None));
    assert_eq!(tuned.profile.threads(), 1);
    assert_eq!(tuned.profile.schedule_policy(), SchedulePolicy::Static);
    assert!(!path.exists());

    // With a cache: the knob not given comes from it.
    let cached = tune(&hw, &options(home.path())).profile;
    let mut opt = options(home.path());
    opt.overrides.policy = Some(SchedulePolicy::Guided);
    let tuned = tune(&hw, &opt);
    assert_eq!(tuned.source, Source::Override(Some(path.clone())));
    assert_eq!(tuned.profile.threads(), cached.threads());
    assert_eq!(tuned.profile.schedule_policy(), SchedulePolicy::Guided);

    // Both given, even with force_recalibrate: no measuring.
    let mut opt = options(home.path());
    opt.overrides.threads = Some(3);
    opt.overrides.policy = Some(SchedulePolicy::WorkStealing);
    opt.stores.force_recalibrate = true;
    let tuned = tune(&hw, &opt);
    assert_eq!(
        (tuned.profile.threads(), tuned.profile.schedule_policy()),
        (3, SchedulePolicy::WorkStealing)
    );
    assert!(tuned.profile.decode.measurements.is_empty());
    assert_eq!(tuned.profile.prefill.threads, 3);
    assert_eq!(read_json(&path)["threads"], cached.threads());
}

#[test]
fn an_oversubscribing_override_is_allowed_with_a_warning() {
    let hw = hw();
    let n = hw.effective_cpus + 1;
    let mut opt = options(Path::new("unused"));
    opt.overrides.threads = Some(n);
    let tuned = tune(&hw, &opt);
    assert_eq!(tuned.profile.threads(), n);
    assert!(tuned.warnings[0].contains("oversubscribed"));
}

#[test]
fn a_spent_budget_gives_a_partial_profile() {
    let home = tempfile::tempdir().unwrap();
    let mut opt = options(home.path());
    opt.question.budget = Some(Duration::from_nanos(1));
    let tuned = tune(&hw(), &opt);
    assert!(tuned.profile.partial);
    assert!(tuned.profile.threads() >= 1);
    let partial = tuned.profile.clone();
    // The partial profile is saved and serves later runs that also set a budget; a run
    // without one replaces it with a full search.
    assert_eq!(tune(&hw(), &opt).source.name(), "cache");
    // A run with more time would search further: it is not served the partial profile.
    let mut longer = options(home.path());
    longer.question.budget = Some(Duration::from_secs(30));
    let tuned = tune(&hw(), &longer);
    assert_eq!(tuned.source.name(), "measured");
    assert!(
        tuned.warnings[0].contains("cut short by a 0.000000001 s budget and this run has 30 s"),
        "{:?}",
        tuned.warnings
    );
    // A complete profile serves budgeted runs; put the partial one back for the last cases.
    std::fs::write(
        profile_path(home.path(), &hw()),
        serde_json::to_string(&partial).unwrap(),
    )
    .unwrap();
    // A run that never measures takes it: it knows more than the defaults.
    let mut cached_only = options(home.path());
    cached_only.stores.cached_only = true;
    let served = tune(&hw(), &cached_only);
    assert_eq!(served.source.name(), "cache", "{:?}", served.warnings);
    assert!(served.profile.partial);
    assert!(served.warnings.is_empty(), "{:?}", served.warnings);
    // Nor does an estimate, which says why it does not take it but not that it re-tunes.
    let mut estimate = options(home.path());
    estimate.question.rigor = auto_tuner::Rigor::Estimate;
    let estimated = tune(&hw(), &estimate);
    assert_eq!(estimated.source.name(), "estimated");
    assert!(
        estimated.warnings.iter().any(|w| w.contains("cut short"))
            && !estimated.warnings.iter().any(|w| w.contains("re-tuning")),
        "{:?}",
        estimated.warnings
    );
    let full = tune(&hw(), &options(home.path()));
    assert_eq!(full.source.name(), "measured");
    assert!(
        full.warnings[0].contains("cut short"),
        "{:?}",
        full.warnings
    );
    assert!(!full.profile.partial);
}

#[test]
fn a_budget_bounds_the_preparation_too() {
    // 16 matrices of 4 MiB would be prepared without a budget (within 72 MiB: the bound
    // also holds the prefill buffers and the row sample, about 5 MiB); a spent budget stops
    // the preparation after the first one, and the repetitions shrink to fit.
    let home = tempfile::tempdir().unwrap();
    let workload = matrix_workload(1024, 1024);
    let mut base = options(home.path());
    base.question.workload = workload;
    base.measuring.max_working_set_bytes = 72 << 20;
    let hw = HardwareInfo {
        l3_total_bytes: 16 << 20,
        ..hw()
    };
    let mut budgeted = base.clone();
    budgeted.question.budget = Some(Duration::from_nanos(1));
    let tuned = tune(&hw, &budgeted);
    assert_eq!(tuned.profile.layer_copies, Some(1));
    assert!(tuned.profile.partial);
    let full = tune(&hw, &base);
    assert_eq!(full.profile.layer_copies, Some(16));
}

#[test]
fn a_tiny_workload_is_measured_quickly_in_bounded_memory() {
    let home = tempfile::tempdir().unwrap();
    let mut opt = options(home.path());
    opt.question.workload = matrix_workload(1, 1);
    opt.measuring.max_working_set_bytes = auto_tuner::DEFAULT_MAX_WORKING_SET_BYTES;
    let tuned = watchdog::guard("tuning a 1x1 workload", move || tune(&hw(), &opt));
    let matrices = tuned.profile.layer_copies.unwrap();
    assert!(
        (1..=auto_tuner::MAX_WEIGHT_MATRICES).contains(&matrices),
        "{matrices}"
    );
    assert_eq!(tuned.profile.working_set_bytes, Some(matrices as u64 * 4));
    assert!(tuned.profile.decode.gbps.unwrap() > 0.0);
}

#[test]
fn runs_asking_different_questions_never_share_a_profile() {
    let home = tempfile::tempdir().unwrap();
    let hw = hw();
    if hw.effective_cpus < 2 {
        // One CPU: a cap of 1 asks what the default asks; nothing to separate.
        assert_eq!(
            slot_path(
                &{
                    let mut opt = options(home.path());
                    opt.question.thread_cap = Some(1);
                    opt
                },
                &hw
            ),
            profile_path(home.path(), &hw)
        );
        return;
    }
    let mut capped = options(home.path());
    capped.question.thread_cap = Some(1);
    let first = tune(&hw, &capped);
    assert_eq!(first.profile.threads(), 1);
    assert_eq!(first.profile.request.thread_limit, 1);
    // An uncapped run is not served the capped answer: it tunes its own, in its own file.
    let uncapped = tune(&hw, &options(home.path()));
    assert_eq!(uncapped.source.name(), "measured");
    assert!(uncapped.warnings.is_empty(), "{:?}", uncapped.warnings);
    assert_ne!(uncapped.source.path(), first.source.path());
    // And each is served its own afterwards.
    let capped_path = first.source.path().unwrap().clone();
    assert_eq!(tune(&hw, &capped).source, Source::Cache(capped_path));
    assert_eq!(tune(&hw, &options(home.path())).source.name(), "cache");
    // The default request, on the widest kernel, keeps the plain <hardware_id>.json.
    let mut default = AutoTunerOptions::default();
    default.stores.home = auto_tuner::ProfileHome::Dir(home.path().to_path_buf());
    default.question.kernel = Some(matmul_kernel::Kernel::best());
    assert_eq!(
        slot_path(&default, &hw)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap(),
        format!("{}.json", hw.hardware_id())
    );
}

#[test]
fn a_symlink_at_the_lock_path_is_never_followed() {
    let hw = hw();
    let home = tempfile::tempdir().unwrap();
    let runtime = home.path().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    let lock = ProfileCache::new(home.path()).lock_path(&hw.hardware_id());
    // A dangling link: following it would create the target.
    let target = home.path().join("created-by-the-lock");
    std::os::unix::fs::symlink(&target, &lock).unwrap();
    let tuned = tune(&hw, &options(home.path()));
    assert!(!target.exists(), "the lock followed the link");
    assert_eq!(tuned.source.name(), "measured");
    assert!(
        tuned.warnings.iter().any(|w| w.contains("symbolic link")),
        "{:?}",
        tuned.warnings
    );
    // A link to a FIFO: opening it would block forever.
    std::fs::remove_file(&lock).unwrap();
    std::fs::remove_file(profile_path(home.path(), &hw)).unwrap();
    let fifo = home.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::os::unix::fs::symlink(&fifo, &lock).unwrap();
    let opt = options(home.path());
    let hw2 = hw.clone();
    let tuned = watchdog::guard("tuning with a FIFO lock", move || tune(&hw2, &opt));
    assert_eq!(tuned.source.name(), "measured");
    // A FIFO at the lock path itself.
    std::fs::remove_file(&lock).unwrap();
    std::fs::remove_file(profile_path(home.path(), &hw)).unwrap();
    nix::unistd::mkfifo(&lock, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let opt = options(home.path());
    let tuned = watchdog::guard("tuning with a FIFO lock", move || tune(&hw, &opt));
    assert!(
        tuned
            .warnings
            .iter()
            .any(|w| w.contains("not a regular file")),
        "{:?}",
        tuned.warnings
    );
}

#[test]
fn stale_temporary_files_of_ours_are_removed_and_nothing_else() {
    let hw = hw();
    let home = tempfile::tempdir().unwrap();
    let runtime = home.path().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    let write = |name: &str, age: std::time::SystemTime| {
        let path = runtime.join(name);
        let file = std::fs::File::create(&path).unwrap();
        file.set_modified(age).unwrap();
        path
    };
    let stale = write(".profile-AbC123.tmp", old);
    let fresh = write(".profile-XyZ789.tmp", std::time::SystemTime::now());
    let foreign = write("notes.tmp", old);
    let tuned = tune(&hw, &options(home.path()));
    assert_eq!(tuned.source.name(), "measured");
    assert!(!stale.exists(), "a stale temporary file was left");
    assert!(fresh.exists(), "a live save's temporary file was removed");
    assert!(foreign.exists(), "a file not ours was removed");
}

#[test]
fn an_unmeasured_profile_has_no_scores_in_its_json() {
    let mut opt = options(Path::new("unused"));
    opt.overrides.disable_autotune = true;
    let tuned = tune(&hw(), &opt);
    let v = serde_json::to_value(&tuned.profile).unwrap();
    for key in [
        "pseudo_tokens_per_sec",
        "gbps",
        "tuned_at",
        "tuning_seconds",
        "weight_matrices",
        "working_set_bytes",
    ] {
        assert!(v.get(key).is_none(), "{key} present in {v}");
    }
    assert_eq!(v["threads"], tuned.profile.threads());
}

#[test]
fn explicit_settings_win_over_no_autotune_too() {
    let home = tempfile::tempdir().unwrap();
    let mut opt = options(home.path());
    opt.overrides.disable_autotune = true;
    opt.overrides.threads = Some(1);
    opt.overrides.policy = Some(SchedulePolicy::Interleaved);
    let tuned = tune(&hw(), &opt);
    assert_eq!(tuned.source, Source::Override(None));
    assert_eq!(
        (tuned.profile.threads(), tuned.profile.schedule_policy()),
        (1, SchedulePolicy::Interleaved)
    );
    let mut opt = options(home.path());
    opt.overrides.disable_autotune = true;
    opt.overrides.policy = Some(SchedulePolicy::Guided);
    let tuned = tune(&hw(), &opt);
    assert_eq!(tuned.profile.threads(), 4.min(hw().effective_cpus));
    assert_eq!(tuned.profile.schedule_policy(), SchedulePolicy::Guided);
    assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 0);
}

#[test]
fn a_waiting_process_gives_up_on_a_stuck_lock_at_its_deadline() {
    watchdog::guard("waiting on a held lock", || {
        let home = tempfile::tempdir().unwrap();
        let hw = hw();
        let cache = auto_tuner::ProfileCache::new(home.path());
        let id = hw.hardware_id();
        let now = std::time::Instant::now;
        let held = cache.lock(&id, now()).unwrap().expect("free lock");
        assert!(
            cache
                .lock(&id, now() + Duration::from_millis(30))
                .unwrap()
                .is_none()
        );
        // A tuner with a budget waits no longer than its budget, then serves the estimate:
        // measuring beside the other tuner would disturb both, and its save could replace
        // the other's profile. It says that it waits, once, before it does.
        let mut opt = options(home.path());
        opt.question.budget = Some(Duration::from_millis(50));
        let steps = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&steps);
        opt.reporter = auto_tuner::Reporter::new(move |report| {
            if let auto_tuner::Report::Step(line) = report {
                sink.lock().unwrap().push(line.to_string());
            }
        });
        let tuned = tune(&hw, &opt);
        assert_eq!(tuned.source.name(), "estimated");
        assert!(
            tuned.warnings.iter().any(|w| w.contains("still tuning")
                && w.contains("not measuring beside it")
                && w.contains("nothing is saved")),
            "{:?}",
            tuned.warnings
        );
        let files: Vec<_> = std::fs::read_dir(cache.runtime_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(files.iter().all(|f| f.ends_with(".lock")), "{files:?}");
        let steps = steps.lock().unwrap().clone();
        let waits: Vec<_> = steps
            .iter()
            .filter(|s| s.starts_with("waiting for another process"))
            .collect();
        assert_eq!(waits.len(), 1, "{steps:?}");
        assert!(waits[0].contains(".lock; at most 1 s)"), "{steps:?}");
        drop(held);
        assert!(cache.lock(&id, now()).unwrap().is_some());
    });
}

#[test]
fn the_profile_builds_the_runtime_pool() {
    let home = tempfile::tempdir().unwrap();
    let tuned = tune(&hw(), &options(home.path()));
    let pool = tuned.profile.build_pool().unwrap();
    assert_eq!(pool.n_threads(), tuned.profile.threads());
    // The pool carries the tuned policy: nothing to pass separately.
    assert_eq!(pool.policy(), tuned.profile.schedule_policy());
    let hits = std::sync::atomic::AtomicUsize::new(0);
    pool.run(100, |rows| {
        hits.fetch_add(rows.len(), std::sync::atomic::Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(hits.into_inner(), 100);
    let (w, x) = (vec![0.5f32; 48 * 80], vec![2.0f32; 80]);
    let (mut y, mut expected) = (vec![0.0f32; 48], vec![0.0f32; 48]);
    matmul_kernel::Exec::new()
        .pool(&pool)
        .gemv(&w, &x, &mut y)
        .unwrap();
    matmul_kernel::Exec::new()
        .gemv(&w, &x, &mut expected)
        .unwrap();
    assert_eq!(y, expected);
}

#[test]
fn the_exhaustive_oracle_compares_the_pick_with_the_best() {
    let home = tempfile::tempdir().unwrap();
    let report = auto_tuner::run_exhaustive(&hw(), &options(home.path())).unwrap();
    // The ratio is the pick's re-measured score over the best's (the surface-known picks
    // are checked in the crate's unit tests, exhaustive.rs).
    assert!(report.best.tokens_per_sec > 0.0);
    let same = (report.tuned.threads, report.tuned.schedule_policy)
        == (report.best.threads, report.best.schedule_policy);
    if same {
        assert_eq!(report.ratio, 1.0);
    } else {
        assert_eq!(
            report.ratio,
            report.tuned.tokens_per_sec / report.best.tokens_per_sec
        );
    }
    assert!(report.best.threads <= hw().effective_cpus);
    let sweep = hw().effective_cpus * SchedulePolicy::ALL.len();
    assert!(report.measurements.len() >= sweep);
    // The oracle saves nothing.
    assert!(!home.path().join("runtime").exists());
}

#[test]
fn on_a_hybrid_cpu_the_performance_cores_are_a_pinned_candidate() {
    // One performance CPU among at least two usable ones (oversubscribed on a one-CPU
    // machine, which the pinned candidate does not care about).
    let mut hw = hw();
    let allowed = hw.allowed_cpus.clone();
    let first = allowed.first().copied().unwrap_or(0);
    hw.effective_cpus = hw.effective_cpus.max(2);
    hw.performance_cpus = vec![first];
    hw.efficiency_cpus = allowed.iter().copied().skip(1).collect();
    hw.performance_cores = 1;
    hw.efficiency_cores = hw.effective_cpus - 1;
    let home = tempfile::tempdir().unwrap();
    let tuned = tune(&hw, &options(home.path()));
    let pinned: Vec<_> = tuned
        .profile
        .decode
        .measurements
        .iter()
        .filter(|m| m.cores == auto_tuner::CoreSet::Performance)
        .collect();
    assert!(
        !pinned.is_empty(),
        "no performance-cores candidate measured"
    );
    assert!(pinned.iter().all(|m| m.threads == 1));
    if tuned.profile.cores() == auto_tuner::CoreSet::Performance {
        assert_eq!(tuned.profile.pinned_cpus(), vec![first]);
        tuned.profile.build_pool().unwrap();
    } else {
        assert!(tuned.profile.pinned_cpus().is_empty());
    }
}

/// The child half of [`the_library_prints_nothing`]: a run that warns (a corrupt cached
/// profile) and measures (progress), with the default, silent reporter.
#[test]
#[ignore = "the child process of the_library_prints_nothing, which runs it"]
fn library_output_child() {
    let home = std::env::var_os("AUTO_TUNER_TEST_CHILD_HOME")
        .expect("started by the_library_prints_nothing");
    let opt = options(Path::new(&home));
    let hw = hw();
    let path = profile_path(Path::new(&home), &hw);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "garbage").unwrap();
    let tuned = tune(&hw, &opt);
    assert_eq!(tuned.warnings.len(), 1, "{:?}", tuned.warnings);
}

#[test]
fn the_library_prints_nothing() {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "library_output_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("AUTO_TUNER_TEST_CHILD_HOME", home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "{out:?}"
    );
    // libtest writes its report on stdout; anything on stderr came from the library.
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn a_forced_kernel_has_its_own_profile() {
    let home = tempfile::tempdir().unwrap();
    let hw = hw();
    let mut portable = options(home.path());
    portable.question.kernel = Some(matmul_kernel::Isa::Portable.token().unwrap());
    if matmul_kernel::selected().isa() == matmul_kernel::Isa::Portable {
        // The portable kernel is the one this process runs: it asks the default question.
        assert_eq!(slot_path(&portable, &hw), profile_path(home.path(), &hw));
        return;
    }
    let forced = tune(&hw, &portable);
    let forced_path = forced.source.path().unwrap().clone();
    assert!(
        forced_path.to_string_lossy().ends_with("_kportable.json"),
        "{}",
        forced_path.display()
    );
    assert!(forced.profile.kernel.starts_with("portable "));
    // Alternating kernels never re-tune: each run finds its own profile.
    let best = tune(&hw, &options(home.path()));
    assert_eq!(best.source.name(), "measured");
    assert!(best.warnings.is_empty(), "{:?}", best.warnings);
    assert_eq!(tune(&hw, &portable).source, Source::Cache(forced_path));
    assert_eq!(tune(&hw, &options(home.path())).source.name(), "cache");
}

#[test]
fn a_fifo_at_the_profile_path_is_rejected_without_blocking() {
    let home = tempfile::tempdir().unwrap();
    let hw = hw();
    let path = profile_path(home.path(), &hw);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let opt = options(home.path());
    let tuned = watchdog::guard("reading a FIFO profile", move || tune(&hw, &opt));
    assert!(
        tuned.warnings[0].contains("not a regular file"),
        "{:?}",
        tuned.warnings
    );
}

#[test]
fn prefill_buffers_beyond_the_memory_bound_are_an_error_before_anything_is_allocated() {
    // One layer of 4 MiB fits in 64 MiB, but a batch of 4096 rows of 65536 activations
    // (1 GiB of them) does not: an error, not an allocation outside the bound.
    let home = tempfile::tempdir().unwrap();
    let mut opt = options(home.path());
    opt.question.workload = matrix_workload(16, 65536);
    opt.question.batch = 4096;
    opt.measuring.max_working_set_bytes = 64 << 20;
    // On a busy machine too, with no warning that a profile will be marked noisy: no profile
    // is made.
    opt.measuring.load_average = auto_tuner::LoadAverage::Given(Some(100.0));
    let warned = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&warned);
    opt.reporter = auto_tuner::Reporter::new(move |report| {
        if let auto_tuner::Report::Warning(line) = report {
            sink.lock().unwrap().push(line.to_string());
        }
    });
    let err = auto_tuner::tune_if_needed(&hw(), &opt)
        .unwrap_err()
        .to_string();
    assert!(err.contains("prefill buffers of a batch of 4096"), "{err}");
    let warned = warned.lock().unwrap();
    assert!(!warned.iter().any(|w| w.contains("noisy")), "{warned:?}");
}
