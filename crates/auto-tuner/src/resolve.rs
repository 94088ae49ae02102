//! The resolution order of [`tune_if_needed`]: explicit overrides, the user's store, the
//! system store, then a measurement under the machine's lock, with the warnings met on the
//! way. Measuring itself is the `tune` module's.

use crate::cache::{CacheLock, Lookup, MAX_LOCK_WAIT, ProfileCache, Slot, waiting_for_lock};
use crate::candidates::unmeasured_cpu_limit;
use crate::error::TunerError;
use crate::job::Job;
use crate::optimized::{BUILD_OPT_LEVELS, check_opt_levels};
use crate::options::{AutoTunerOptions, Overrides, ProfileHome};
use crate::profile::{PhaseProfile, RuntimeProfile, TuningRequest};
use crate::progress::Reporter;
use crate::rigor::Rigor;
use crate::store::Store;
use crate::tune::{estimate_profile_of, measure_profile};
use crate::tuned::{Source, Tuned};
use crate::validate::Rejection;
use crate::warnings::Warnings;

use device_profile::HardwareInfo;
use std::time::Instant;
use threadpool::SchedulePolicy;

/// The thread count of the defaults, before clamping to the `effective_cpus`.
pub const DEFAULT_THREADS: usize = 4;

/// The defaults for `opt` on `hw`: [`DEFAULT_THREADS`] clamped to the CPUs this process may
/// use without measuring ([`unmeasured_cpu_limit`]: `effective_cpus`, a fractional quota
/// rounded down), `static`.
pub fn default_profile(hw: &HardwareInfo, opt: &AutoTunerOptions) -> RuntimeProfile {
    default_profile_of(hw, &Job::new(hw, &opt.question))
}

/// [`default_profile`] of a job.
fn default_profile_of(hw: &HardwareInfo, job: &Job) -> RuntimeProfile {
    RuntimeProfile::unmeasured(
        hw,
        job.request.clone(),
        job.kernel,
        DEFAULT_THREADS.min(unmeasured_cpu_limit(hw)),
        SchedulePolicy::Static,
    )
}

/// Resolves the runtime profile for `hw` as the crate docs describe.
///
/// # Errors
/// [`TunerError::InvalidSetting`] for options outside the ranges the command line enforces
/// (a batch of 1 to [`MAX_BATCH`](crate::MAX_BATCH), a budget above 0 and at most
/// [`MAX_BUDGET_SECONDS`](crate::MAX_BUDGET_SECONDS), a thread override of 1 to
/// [`MAX_THREADS_OVERRIDE`](crate::MAX_THREADS_OVERRIDE), a thread cap above 0, at most
/// [`MAX_REPETITIONS`](crate::MAX_REPETITIONS) repetitions, an empty `ProfileHome::Dir`),
/// before
/// anything is read or written; otherwise what the measurement meets (an
/// unoptimized build, a workload that does not fit, llama.cpp failing). Problems worked
/// around are [`Tuned::warnings`]. It never panics on options or files.
pub fn tune_if_needed(hw: &HardwareInfo, opt: &AutoTunerOptions) -> Result<Tuned, TunerError> {
    resolve(hw, opt, &BUILD_OPT_LEVELS)
}

/// [`tune_if_needed`] as a build of the measuring crates at `opt_levels` runs it.
fn resolve(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    opt_levels: &[(&'static str, &'static str)],
) -> Result<Tuned, TunerError> {
    crate::ranges::refuse_out_of_range(opt)?;
    let AutoTunerOptions {
        question,
        measuring,
        stores,
        overrides,
        reporter,
    } = opt;
    let mut warnings = Warnings::new(reporter);
    if overrides.disable_autotune {
        let job = Job::new(hw, question);
        if !overrides.any() {
            return Ok(warnings.into_tuned(default_profile_of(hw, &job), Source::Defaults));
        }
        // Explicit settings win over the defaults too; the cache is not read.
        return Ok(resolve_overrides(
            hw,
            overrides,
            &job,
            [None, None],
            warnings,
        ));
    }
    let mut user = stores.home_dir()?.map(|dir| ProfileCache::new(&dir));
    // A cache that cannot exist is said once, not at each file it would have read or written.
    let unusable = user.as_ref().and_then(ProfileCache::unusable);
    if let Some(why) = &unusable {
        warnings.push(format!("{why}; no profile is read from it or saved to it"));
        user = None;
    }
    let system = stores
        .system_profiles
        .as_deref()
        .map(ProfileCache::in_dir)
        .filter(|system| match system.unusable() {
            Some(why) => {
                warnings.push(format!("{why}; no profile is read from it"));
                false
            }
            None => true,
        });
    let job = Job::resolve(hw, question)?;
    if overrides.any() {
        let stores = [user.as_ref(), system.as_ref()];
        return Ok(resolve_overrides(hw, overrides, &job, stores, warnings));
    }
    let rigor = job.request.rigor;
    let mut retune = false;
    // A noisy profile that this run re-tunes, served after all if another tuner keeps the
    // machine busy.
    let mut noisy_found = None;
    if !stores.force_recalibrate || stores.cached_only {
        let found = read_stores(
            [user.as_ref(), system.as_ref()],
            hw,
            &job,
            stores.cached_only,
            &mut warnings,
        );
        if let Some((profile, source)) = found {
            let noisy = profile
                .environment
                .as_ref()
                .is_some_and(|e| e.wants_retune());
            if !noisy || stores.cached_only || rigor == Rigor::Estimate {
                if job.runtime.is_none()
                    && let Err(e) = check_opt_levels(opt_levels)
                {
                    warnings.push(format!("{e}\n(the cached profile is used as it is)"));
                }
                return Ok(warnings.into_tuned(profile, source));
            }
            warnings.push(format!(
                "cached profile {} was measured on a busy machine (noisy); re-tuning it once",
                source
                    .path()
                    .map_or_else(String::new, |p| model_workload::shown_path(p))
            ));
            retune = true;
            noisy_found = Some((profile, source));
        }
    }
    if stores.cached_only {
        warnings.push(
            "no valid cached or system profile for this request; using the defaults without \
             measuring (cached-only)"
                .to_string(),
        );
        return Ok(warnings.into_tuned(default_profile_of(hw, &job), Source::Defaults));
    }
    if rigor == Rigor::Estimate {
        return Ok(warnings.into_tuned(estimate_profile_of(hw, &job), Source::Estimated));
    }
    let Some(cache) = user else {
        // No cache asked for is no surprise; no cache found is (said above when unusable).
        if stores.home != ProfileHome::None && unusable.is_none() {
            warnings.push(format!(
                "{}; the profile will not be saved",
                TunerError::NoHome
            ));
        }
        let profile = measure_profile(hw, &job, measuring, reporter, retune, &mut warnings)?;
        return Ok(warnings.into_tuned(profile, Source::Measured(None)));
    };
    let path = cache.path_for(&job.hardware_id, &job.slot);
    // Refuse before anything is created: no runtime directory, no lock file. (A tune of
    // llama.cpp times llama.cpp, whatever this build's optimization.)
    if job.runtime.is_none() {
        check_opt_levels(opt_levels)?;
    }
    let taken = take_lock(&cache, &job, reporter);
    // Another process that held the lock may have tuned this request while this one waited
    // (or re-tuned the noisy profile this one found, or imported one), whether the wait
    // ended with the lock or without it: the file is read again, not the copy read before.
    let mut now_cached = match taken {
        LockTaken::Unusable(_) => None,
        _ => match cache.lookup_measured(&path, hw, &job.measured(), Some(&job.request)) {
            Lookup::Hit(profile) => Some(*profile),
            _ => None,
        },
    };
    let wants_retune =
        |p: &RuntimeProfile| p.environment.as_ref().is_some_and(|e| e.wants_retune());
    if !stores.force_recalibrate
        && let Some(profile) = now_cached.take_if(|p| !(retune && wants_retune(p)))
    {
        if retune {
            warnings.push(
                "another process replaced the noisy profile while this one waited: it is used"
                    .to_string(),
            );
        }
        return Ok(warnings.into_tuned(profile, Source::Cache(path)));
    }
    let lock = match taken {
        LockTaken::Held(lock) => Some(lock),
        LockTaken::Unusable(why) => {
            warnings.push(why);
            None
        }
        LockTaken::Busy(why) => {
            // Measuring beside another tuner would disturb both measurements, and this run's
            // save could replace the other's profile: it takes the profile cached now (what
            // it asked to re-measure, or a noisy one), else the noisy profile it had found,
            // else the estimate.
            let (profile, source) = match now_cached {
                Some(profile) => (profile, Source::Cache(path)),
                None => noisy_found
                    .unwrap_or_else(|| (estimate_profile_of(hw, &job), Source::Estimated)),
            };
            warnings.push(format!(
                "{why}; not measuring beside it, which would disturb both: this run uses {}, \
                 and nothing is saved (run again once it has finished)",
                match source {
                    Source::Estimated => "the estimate (the physical cores)".to_string(),
                    _ => format!(
                        "the {} profile {}",
                        if wants_retune(&profile) {
                            "noisy"
                        } else {
                            "cached"
                        },
                        source
                            .path()
                            .map_or_else(String::new, |p| model_workload::shown_path(p))
                    ),
                }
            ));
            return Ok(warnings.into_tuned(profile, source));
        }
    };
    let profile = measure_profile(hw, &job, measuring, reporter, retune, &mut warnings)?;
    // A profile the next read would reject (a llama-bench that reported figures past the
    // bounds a read holds them to, a file past the size a read takes) is not saved: every
    // later run would re-tune it.
    let read_back =
        crate::cache::check_reads_back(&profile, hw, &job.measured(), Some(&job.request));
    if let Err(why) = read_back {
        warnings.push(format!(
            "the profile is not saved, as a later run would not read it back ({why}); \
             using it for this run only"
        ));
        drop(lock);
        return Ok(warnings.into_tuned(profile, Source::Measured(None)));
    }
    let saved = match cache.save(&profile, &path) {
        Ok(()) => Some(path),
        Err(e) => {
            warnings.push(format!(
                "cannot save the profile to {}: {e}; using it for this run only",
                model_workload::shown_path(&path)
            ));
            None
        }
    };
    drop(lock);
    Ok(warnings.into_tuned(profile, Source::Measured(saved)))
}

/// The first valid profile for `job` in the user's cache, then the system store, and where
/// it came from: in each store, the slot of the highest rigor first, down to the rigor asked
/// (a profile serves requests of its rigor or a lower one), a clean profile before any noisy
/// one. A rejected one is reported (as re-tuned unless `cached_only`).
fn read_stores(
    [user, system]: [Option<&ProfileCache>; 2],
    hw: &HardwareInfo,
    job: &Job,
    cached_only: bool,
    warnings: &mut Warnings,
) -> Option<(RuntimeProfile, Source)> {
    let id = &job.hardware_id;
    let stores = [
        (
            user,
            Store::User,
            Source::Cache as fn(std::path::PathBuf) -> Source,
        ),
        (system, Store::System, Source::System),
    ];
    let slots = job.slot.serving(job.request.rigor);
    // A profile measured on a busy machine (noisy) serves only when no clean one does: a
    // noisy one of a higher rigor, which a run of this rigor re-tunes into its own slot,
    // would otherwise be found first again on every run, and every run would measure.
    let mut noisy = None;
    for (cache, store, source) in stores {
        let Some(cache) = cache else { continue };
        for slot in &slots {
            let path = cache.path_for(id, slot);
            let read = read_cached(cache, &path, hw, job, (slot, store), cached_only, warnings);
            let Some(profile) = read else {
                continue;
            };
            if profile
                .environment
                .as_ref()
                .is_some_and(|e| e.wants_retune())
            {
                noisy.get_or_insert((profile, source(path)));
            } else {
                return Some((profile, source(path)));
            }
        }
    }
    noisy
}

/// The valid cached profile at `path` (of `slot`, in `store`) for `job`, if any; a
/// rejected one is reported, and said to be re-tuned only where this run's tune will
/// replace it (`slot` is the job's own).
fn read_cached(
    cache: &ProfileCache,
    path: &std::path::Path,
    hw: &HardwareInfo,
    job: &Job,
    (slot, store): (&Slot, Store),
    cached_only: bool,
    warnings: &mut Warnings,
) -> Option<RuntimeProfile> {
    // A run that never measures asks as a run with no time to measure: it takes a profile
    // whose search a budget cut short (`TuningRequest::answers`), which knows more than the
    // defaults it would serve instead.
    let never_measures;
    let request = if cached_only {
        never_measures = TuningRequest {
            budget_seconds: Some(0.0),
            ..job.request.clone()
        };
        &never_measures
    } else {
        &job.request
    };
    match cache.lookup_measured(path, hw, &job.measured(), Some(request)) {
        Lookup::Hit(profile) => Some(*profile),
        Lookup::Missing => None,
        Lookup::Rejected(why) => {
            let next = if cached_only || job.request.rigor == Rigor::Estimate {
                String::new()
            } else if *slot == job.slot {
                "; re-tuning".to_string()
            } else if store == Store::System {
                // Never replaced: a run of its rigor tunes one into the user's store.
                format!(" (a --rigor {} run tunes one of its own)", slot.rigor())
            } else {
                // A profile of a higher rigor, which only a run of that rigor replaces; what
                // `profile clear` can tell to be a profile, it removes.
                let clear = if matches!(
                    why,
                    Rejection::NotAFile
                        | Rejection::TooLarge(_)
                        | Rejection::Unreadable(_)
                        | Rejection::Empty
                        | Rejection::NotAProfile(_)
                        | Rejection::HardwareId(_)
                ) {
                    ""
                } else {
                    "; `sipllm profile clear` removes it"
                };
                format!(" (a --rigor {} run re-tunes it{clear})", slot.rigor())
            };
            warnings.push(format!(
                "ignoring cached profile {}: {why}{next}",
                model_workload::shown_path(path)
            ));
            None
        }
    }
}

/// What [`take_lock`] found.
enum LockTaken {
    /// The machine's lock, held until dropped.
    Held(CacheLock),
    /// No lock file can be used (why, as a warning): the tuner measures without it.
    Unusable(String),
    /// Another process still held the lock when the wait ended (why, as a warning).
    Busy(String),
}

/// Takes the machine's tuning lock, so that one process tunes at a time; the others wait
/// (within the budget, with [`lock_wait`]'s grace, and [`MAX_LOCK_WAIT`]), then read its
/// result.
fn take_lock(cache: &ProfileCache, job: &Job, reporter: &Reporter) -> LockTaken {
    let id = &job.hardware_id;
    let wait = lock_wait(job.budget);
    match cache.lock_or_wait(id, Instant::now() + wait, || {
        reporter.step(&waiting_for_lock(&cache.lock_path(id), wait));
    }) {
        Ok(Some(lock)) => LockTaken::Held(lock),
        Ok(None) => LockTaken::Busy(format!(
            "another process is still tuning this machine after a wait of {} s (lock {})",
            wait.as_secs_f64().ceil(),
            model_workload::shown_path(&cache.lock_path(id))
        )),
        Err(e) => LockTaken::Unusable(format!(
            "cannot lock the profile cache in {}: {e}; tuning without the lock",
            model_workload::shown_path(cache.runtime_dir())
        )),
    }
}

/// How long a run with `budget` waits for another tuner: the budget and a tenth of it more
/// (at most a second), at most [`MAX_LOCK_WAIT`]. The grace is the other tuner's: with the
/// same budget it ends its last repetition and saves a little past its own deadline, and
/// workers started together with one budget each served the estimate a moment before its
/// profile was saved.
fn lock_wait(budget: Option<std::time::Duration>) -> std::time::Duration {
    budget
        .map_or(MAX_LOCK_WAIT, |b| {
            b.saturating_add((b / 10).min(std::time::Duration::from_secs(1)))
        })
        .min(MAX_LOCK_WAIT)
}

/// Explicit settings win; a knob not given comes from a valid cached profile, else the
/// defaults. Nothing is measured and nothing is written.
fn resolve_overrides(
    hw: &HardwareInfo,
    overrides: &Overrides,
    job: &Job,
    stores: [Option<&ProfileCache>; 2],
    mut warnings: Warnings,
) -> Tuned {
    let cached = if overrides.threads.is_none() || overrides.policy.is_none() {
        stores.into_iter().flatten().find_map(|store| {
            let path = store.path_for(&job.hardware_id, &job.slot);
            match store.lookup_measured(&path, hw, &job.measured(), None) {
                Lookup::Hit(profile) => Some((*profile, path)),
                _ => None,
            }
        })
    } else {
        None
    };
    let (base, path) = match cached {
        Some((profile, path)) => (profile, Some(path)),
        None => (default_profile_of(hw, job), None),
    };
    let threads = overrides.threads.unwrap_or(base.threads());
    let effective = hw.effective_cpus.max(1);
    if threads > effective {
        warnings.push(format!(
            "{threads} threads is more than the {effective} CPUs this process may use (oversubscribed)"
        ));
    }
    let policy = overrides.policy.unwrap_or(base.schedule_policy());
    let mut profile =
        RuntimeProfile::unmeasured(hw, job.request.clone(), job.kernel, threads, policy);
    if overrides.threads.is_none() && !base.pinned_cpus().is_empty() {
        let mut decode = profile.decode.clone();
        decode.cores = base.cores();
        decode.pinned_cpus = base.decode.pinned_cpus;
        profile.decode = decode;
    }
    // The prefill setting follows the same explicit knobs; a knob not given comes from the
    // cached prefill setting.
    let prefill_policy = overrides.policy.unwrap_or(base.prefill.schedule_policy);
    profile.prefill = match overrides.threads {
        Some(threads) => PhaseProfile::unmeasured(threads, prefill_policy),
        None => PhaseProfile {
            schedule_policy: prefill_policy,
            schedule_policy_id: prefill_policy.id(),
            tokens_per_sec: None,
            gbps: None,
            measurements: Vec::new(),
            ..base.prefill
        },
    };
    warnings.into_tuned(profile, Source::Override(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::OPTIMIZE_DEPENDENCIES_TOML;
    use crate::options::{MAX_BATCH, MAX_THREADS_OVERRIDE};
    use std::time::Duration;

    fn machine() -> HardwareInfo {
        HardwareInfo {
            arch: "x86_64".into(),
            cpu_model: "Test CPU".into(),
            logical_cores: 2,
            effective_cpus: 2,
            ..HardwareInfo::default()
        }
    }

    const ALL_OPTIMIZED: [(&str, &str); 3] = [
        ("auto-tuner", "3"),
        ("matmul-kernel", "3"),
        ("threadpool", "3"),
    ];

    #[test]
    fn a_waiter_gives_the_other_tuner_a_tenth_of_its_budget_more_at_most_a_second() {
        let s = Duration::from_secs;
        assert_eq!(lock_wait(Some(s(2))), Duration::from_millis(2200));
        assert_eq!(lock_wait(Some(s(30))), s(31));
        assert_eq!(lock_wait(Some(s(119))), MAX_LOCK_WAIT);
        assert_eq!(lock_wait(Some(Duration::MAX)), MAX_LOCK_WAIT);
        assert_eq!(lock_wait(None), MAX_LOCK_WAIT);
    }

    #[test]
    fn options_out_of_the_flags_ranges_are_refused_before_anything_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("sipllm");
        type Spoil = fn(&mut AutoTunerOptions);
        let cases: [(&str, Spoil); 9] = [
            ("Question::batch", |o| o.question.batch = 0),
            ("Question::thread_cap", |o| o.question.thread_cap = Some(0)),
            ("Question::batch", |o| o.question.batch = MAX_BATCH + 1),
            ("Question::budget", |o| {
                o.question.budget = Some(Duration::MAX)
            }),
            ("Question::budget", |o| {
                o.question.budget = Some(Duration::ZERO)
            }),
            ("Overrides::threads", |o| o.overrides.threads = Some(0)),
            ("Overrides::threads", |o| {
                o.overrides.threads = Some(MAX_THREADS_OVERRIDE + 1)
            }),
            ("Stores::home", |o| {
                o.stores.home = ProfileHome::Dir(std::path::PathBuf::new())
            }),
            ("Measuring::repetitions", |o| {
                o.measuring.repetitions = usize::MAX
            }),
        ];
        for (field, spoil) in cases {
            let mut opt = AutoTunerOptions::default();
            opt.stores.home = ProfileHome::Dir(home.clone());
            spoil(&mut opt);
            match resolve(&machine(), &opt, &ALL_OPTIMIZED) {
                Err(TunerError::InvalidSetting { name, .. }) => assert_eq!(name, field),
                other => panic!("{field}: {other:?}"),
            }
            // The micro-benchmarks, the measure of given settings and the exhaustive
            // report alone refuse the same, before measuring.
            match crate::run_micro_benchmarks(&machine(), &opt) {
                Err(TunerError::InvalidSetting { name, .. }) => assert_eq!(name, field),
                other => panic!("{field}: {other:?}"),
            }
            let setting = crate::Setting {
                threads: 1,
                policy: threadpool::SchedulePolicy::Static,
                cores: crate::CoreSet::Any,
            };
            match crate::measure_settings(&machine(), &opt, crate::Phase::Prefill, &[setting]) {
                Err(TunerError::InvalidSetting { name, .. }) => assert_eq!(name, field),
                other => panic!("{field}: {other:?}"),
            }
            match crate::run_exhaustive(&machine(), &opt) {
                Err(TunerError::InvalidSetting { name, .. }) => assert_eq!(name, field),
                other => panic!("{field}: {other:?}"),
            }
            // No binary is started: the options are refused first.
            let runtime = crate::LlamaCpp::new("/nonexistent/llama-bench", "/nonexistent.gguf");
            let llama = crate::LlamaSetting {
                setting,
                knobs: crate::LlamaKnobs::default(),
            };
            match crate::measure_llama_cpp(
                &machine(),
                &opt,
                &runtime,
                crate::Phase::Decode,
                &[llama],
            ) {
                Err(TunerError::InvalidSetting { name, .. }) => assert_eq!(name, field),
                other => panic!("{field}: {other:?}"),
            }
            assert!(!home.exists(), "{field}: nothing is created");
        }
    }

    #[test]
    fn an_unoptimized_build_refuses_to_measure_before_creating_anything() {
        let home = tempfile::tempdir().unwrap();
        let mut opt = AutoTunerOptions::default();
        opt.stores.home = ProfileHome::Dir(home.path().join("sipllm"));
        // Any one of the measuring crates unoptimized is enough to refuse.
        for i in 0..ALL_OPTIMIZED.len() {
            let mut levels = ALL_OPTIMIZED;
            levels[i].1 = "0";
            let name = levels[i].0;
            let err = resolve(&machine(), &opt, &levels).unwrap_err();
            assert!(
                matches!(&err, TunerError::UnoptimizedBuild(c) if c == &[name]),
                "{err}"
            );
            let message = err.to_string();
            assert!(
                message.contains(&format!("[profile.dev.package.{name}]\nopt-level = 3")),
                "{message}"
            );
            assert!(message.contains("Cargo.toml"), "{message}");
            // A `main` returning the error prints it with `Debug`: the advice must be there.
            assert!(format!("{err:?}").contains(&format!("[profile.dev.package.{name}]")));
            // No home, no runtime directory, no lock file.
            assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 0);
        }
        let all = [
            ("auto-tuner", "0"),
            ("matmul-kernel", "0"),
            ("threadpool", "0"),
        ];
        let message = resolve(&machine(), &opt, &all).unwrap_err().to_string();
        assert!(message.contains(OPTIMIZE_DEPENDENCIES_TOML), "{message}");
        assert!(check_opt_levels(&ALL_OPTIMIZED).is_ok());
    }

    #[test]
    fn the_defaults_never_round_a_fractional_quota_up() {
        let opt = AutoTunerOptions::default();
        for (millicpus, effective, threads) in
            [(1500, 2, 1), (500, 1, 1), (2500, 3, 2), (8000, 8, 4)]
        {
            let hw = HardwareInfo {
                cpu_quota_millicpus: Some(millicpus),
                effective_cpus: effective,
                logical_cores: 16,
                ..machine()
            };
            assert_eq!(default_profile(&hw, &opt).threads(), threads, "{millicpus}");
        }
        assert_eq!(default_profile(&machine(), &opt).threads(), 2);
    }

    /// Saves the default profile of `hw` under `home` as if measured (scores set, `threads`
    /// in both phases when given), where `opt` looks for it; returns its path.
    fn save_measured(
        hw: &HardwareInfo,
        opt: &AutoTunerOptions,
        home: &std::path::Path,
        threads: Option<usize>,
    ) -> std::path::PathBuf {
        let cache = ProfileCache::new(home);
        let mut profile = default_profile(hw, opt);
        profile.rigor = opt.question.rigor;
        for phase in [&mut profile.decode, &mut profile.prefill] {
            if let Some(threads) = threads {
                phase.threads = threads;
            }
            phase.tokens_per_sec = Some(1.0);
            phase.gbps = Some(1.0);
        }
        profile.tuning_seconds = Some(1.0);
        let path = cache.path_for(&hw.hardware_id(), &Job::new(hw, &opt.question).slot);
        cache.save(&profile, &path).unwrap();
        path
    }

    #[test]
    fn an_unoptimized_build_serves_a_cached_profile_with_a_warning() {
        let home = tempfile::tempdir().unwrap();
        let hw = machine();
        let mut opt = AutoTunerOptions::default();
        opt.stores.home = ProfileHome::Dir(home.path().to_path_buf());
        let path = save_measured(&hw, &opt, home.path(), None);
        let tuned = resolve(&hw, &opt, &[("matmul-kernel", "0")]).unwrap();
        assert_eq!(tuned.source, Source::Cache(path));
        assert!(
            tuned.warnings[0].contains("opt-level = 3"),
            "{:?}",
            tuned.warnings
        );
    }

    #[test]
    fn a_pick_above_a_cpu_quota_is_served_from_the_cache() {
        // A 1-CPU quota on 2 allowed CPUs: the search may pick 2 threads (it measures up to
        // the CPUs the process may run on), and the next run must take that pick from the
        // cache instead of rejecting it as outside the quota and tuning again.
        let home = tempfile::tempdir().unwrap();
        let hw = HardwareInfo {
            cpu_quota_millicpus: Some(1000),
            effective_cpus: 1,
            allowed_cpus: vec![0, 1],
            ..machine()
        };
        let mut opt = AutoTunerOptions::default();
        opt.stores.home = ProfileHome::Dir(home.path().to_path_buf());
        let path = save_measured(&hw, &opt, home.path(), Some(2));
        let tuned = resolve(&hw, &opt, &ALL_OPTIMIZED).unwrap();
        assert_eq!(tuned.source, Source::Cache(path), "{:?}", tuned.warnings);
        assert_eq!(tuned.profile.decode.threads, 2);
    }
}
