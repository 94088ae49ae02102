//! The auto-tuner: measure the machine once on the model's workload, remember the answer,
//! hand it to the runtime.
//!
//! [`tune_if_needed`] resolves the [`RuntimeProfile`] (thread count, schedule policy and
//! pinning, for decode and for prefill) for a machine described by a
//! [`device_profile::HardwareInfo`] and a model [`Workload`] (default: Llama-3-8B in
//! `q4_K_M`):
//!
//! 1. `disable_autotune`: the defaults (4 threads clamped to the `effective_cpus`, `static`).
//! 2. explicit `threads`/`policy` (`--threads`, `SIPLLM_THREADS`, …): they win; a knob not
//!    given comes from a valid cached profile, else from the defaults. Nothing is measured.
//! 3. a valid cached profile of the request, at its rigor or a higher one, in
//!    `$SIPLLM_HOME/runtime/` (one file per request, see [`ProfileCache::path_for`]), else
//!    in the read-only system store (`SIPLLM_SYSTEM_PROFILES`): used as is, unless it was
//!    measured on a busy machine (`noisy`), which is re-tuned once.
//! 4. `cached_only` (`SIPLLM_CACHED_ONLY=1`): the defaults; nothing is measured.
//! 5. [`Rigor::Estimate`]: the physical performance cores, `static`; nothing is measured or
//!    saved.
//! 6. otherwise [`run_micro_benchmarks`] (decode, then prefill), and the profile is saved
//!    for the next run.
//!
//! [`list_profiles`], [`export_profiles`], [`import_profiles`] and [`clear_profiles`] work on
//! the stores as a whole; [`measure_settings`] measures given settings on a workload (for
//! comparisons against baselines).
//!
//! The result, a [`Tuned`], builds the runtime's ready decode [`threadpool::ThreadPool`]
//! ([`RuntimeProfile::build_pool`]) and prefill pool ([`RuntimeProfile::build_prefill_pool`]).
//!
//! The model's workload comes from the [`model_workload`] crate (presets, `config.json`,
//! `.gguf` headers); this crate measures it.
//!
//! ```no_run
//! use auto_tuner::{AutoTunerOptions, tune_if_needed};
//!
//! let hw = device_profile::get_hardware_info();
//! let opt = AutoTunerOptions::default().with_process_env()?;
//! let tuned = tune_if_needed(&hw, &opt)?;
//! let pool = tuned.profile.build_pool()?;
//! pool.parallel_for(4096, tuned.profile.schedule_policy, |rows| { let _ = rows; })
//!     .map_err(|e| auto_tuner::TunerError::Pool(e.to_string()))?;
//! let prefill = tuned.profile.build_prefill_pool()?;
//! assert_eq!(prefill.n_threads(), tuned.profile.prefill.threads);
//! # Ok::<(), auto_tuner::TunerError>(())
//! ```
#![deny(missing_docs)]

// The cache's lock (`flock`), its file modes and the caller's pinning are Unix calls.
#[cfg(not(unix))]
compile_error!("auto-tuner supports Linux and macOS only (other Unix systems are untested)");

mod affinity;
mod bench;
mod cache;
mod candidates;
mod environment;
mod error;
mod exhaustive;
mod layer;
mod options;
mod profile;
mod progress;
mod rigor;
mod search;
mod store;

pub use bench::{MAX_WEIGHT_MATRICES, Setting, median};
pub use cache::{
    CacheLock, Lookup, MAX_GBPS, MAX_LOAD_AVERAGE, MAX_PROFILE_BYTES, MAX_TOKENS_PER_SEC,
    MAX_TUNING_SECONDS, ProfileCache, Rejection, Slot,
};
pub use candidates::{
    CoreSet, PinnedSet, estimate_threads, pinning_candidates, unmeasured_cpu_limit,
};
pub use environment::{
    Environment, LOAD_AVERAGE_ENV, LoadAverage, NOISY_LOAD_PER_CPU, read_load_average,
};
pub use error::TunerError;
pub use exhaustive::{ExhaustiveReport, Pick, run_exhaustive};
pub use matmul_kernel::WeightFormat;
/// The one sanitizer of text from files and the environment, from [`model_workload`]
/// (the lower crate, whose readers need it too).
pub use model_workload::{
    MAX_SHOWN_CHARS, MAX_SHOWN_MESSAGE_CHARS, MAX_SHOWN_PATH_CHARS, shown, shown_bytes,
    shown_message, shown_path, shown_within,
};
pub use model_workload::{Projection, Workload, WorkloadError};
pub use options::{
    AutoTunerOptions, CACHED_ONLY_ENV, DEFAULT_BATCH, DEFAULT_MAX_WORKING_SET_BYTES,
    DEFAULT_SYSTEM_PROFILES, DEFAULT_THREAD_CAP, MAX_BATCH, MAX_BUDGET_SECONDS,
    MAX_THREADS_OVERRIDE, MAX_WORKLOAD_SIDE, MIN_REPETITIONS, SYSTEM_PROFILES_ENV,
    default_workload, matrix_workload, parse_batch, parse_budget, parse_flag,
    parse_matrix_workload, parse_policy, parse_threads,
};
pub use profile::{
    Measurement, Phase, PhaseProfile, RuntimeProfile, SCHEMA_VERSION, Step, TuningRequest,
    kernel_signature,
};
pub use progress::{Report, ReportFn, Reporter};
pub use rigor::{Rigor, parse_rigor};
pub use store::{
    BUNDLE_FORMAT_VERSION, MAX_BUNDLE_BYTES, ProfileBundle, Store, StoredProfile, clear_profiles,
    export_profiles, import_profiles, list_profiles,
};

use device_profile::HardwareInfo;
use std::path::PathBuf;
use std::time::{Instant, SystemTime};
use threadpool::SchedulePolicy;

/// The thread count of the defaults, before clamping to the `effective_cpus`.
pub const DEFAULT_THREADS: usize = 4;

/// The longest a process waits for another one tuning the same machine (or its budget, if
/// shorter) before it tunes without waiting.
pub const MAX_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Where a [`Tuned`] profile came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `disable_autotune`: the defaults, nothing read or written.
    Defaults,
    /// A valid cached profile at this path.
    Cache(PathBuf),
    /// A valid profile of the read-only system store at this path.
    System(PathBuf),
    /// Measured now; saved at this path, or `None` when it could not be saved.
    Measured(Option<PathBuf>),
    /// Explicit settings; the path of the cached profile that gave the other knob, if any.
    Override(Option<PathBuf>),
    /// [`Rigor::Estimate`] without a cached profile: the physical performance cores,
    /// nothing measured or saved.
    Estimated,
}

impl Source {
    /// `defaults`, `cache`, `system`, `measured`, `override` or `estimated`.
    pub fn name(&self) -> &'static str {
        match self {
            Source::Defaults => "defaults",
            Source::Cache(_) => "cache",
            Source::System(_) => "system",
            Source::Measured(_) => "measured",
            Source::Override(_) => "override",
            Source::Estimated => "estimated",
        }
    }

    /// The profile file read or written, if any.
    pub fn path(&self) -> Option<&PathBuf> {
        match self {
            Source::Defaults | Source::Estimated => None,
            Source::Cache(p) | Source::System(p) => Some(p),
            Source::Measured(p) | Source::Override(p) => p.as_ref(),
        }
    }
}

/// The resolved profile, where it came from, and the warnings met on the way (a cached
/// profile ignored and why, a profile that could not be saved). The caller shows them.
#[derive(Debug, Clone)]
pub struct Tuned {
    /// The profile to run with.
    pub profile: RuntimeProfile,
    /// Where it came from.
    pub source: Source,
    /// One line per problem met and worked around.
    pub warnings: Vec<String>,
}

/// The warnings of one resolution: reported as they happen, and kept for
/// [`Tuned::warnings`].
struct Warnings {
    reporter: Reporter,
    lines: Vec<String>,
}

impl Warnings {
    fn new(opt: &AutoTunerOptions) -> Self {
        Warnings {
            reporter: opt.reporter.clone(),
            lines: Vec::new(),
        }
    }

    fn push(&mut self, line: String) {
        self.reporter.report(Report::Warning(&line));
        self.lines.push(line);
    }

    fn into_tuned(self, profile: RuntimeProfile, source: Source) -> Tuned {
        Tuned {
            profile,
            source,
            warnings: self.lines,
        }
    }
}

/// The defaults for `opt` on `hw`: [`DEFAULT_THREADS`] clamped to the CPUs this process may
/// use without measuring ([`unmeasured_cpu_limit`]: `effective_cpus`, a fractional quota
/// rounded down), `static`.
pub fn default_profile(hw: &HardwareInfo, opt: &AutoTunerOptions) -> RuntimeProfile {
    RuntimeProfile::unmeasured(
        hw,
        opt.request(hw),
        opt.kernel(),
        DEFAULT_THREADS.min(unmeasured_cpu_limit(hw)),
        SchedulePolicy::Static,
    )
}

/// Resolves the runtime profile for `hw` as the crate docs describe.
pub fn tune_if_needed(hw: &HardwareInfo, opt: &AutoTunerOptions) -> Result<Tuned, TunerError> {
    resolve(hw, opt, &BUILD_OPT_LEVELS)
}

/// [`tune_if_needed`] as a build of the measuring crates at `opt_levels` runs it.
fn resolve(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    opt_levels: &[(&'static str, &'static str)],
) -> Result<Tuned, TunerError> {
    let explicit = opt.threads.is_some() || opt.policy.is_some();
    if opt.disable_autotune && !explicit {
        return Ok(Tuned {
            profile: default_profile(hw, opt),
            source: Source::Defaults,
            warnings: Vec::new(),
        });
    }
    if opt.disable_autotune {
        // Explicit settings win over the defaults too; the cache is not read.
        return Ok(resolve_overrides(hw, opt, [None, None]));
    }
    let user = opt.home.as_deref().map(ProfileCache::new);
    let system = opt.system_profiles.as_deref().map(ProfileCache::in_dir);
    if explicit {
        return Ok(resolve_overrides(hw, opt, [user.as_ref(), system.as_ref()]));
    }
    let mut warnings = Warnings::new(opt);
    let slot = Slot::of(opt, hw);
    let mut retune = false;
    if !opt.force_recalibrate || opt.cached_only {
        let stores = [user.as_ref(), system.as_ref()];
        if let Some((profile, source)) = read_stores(stores, hw, opt, &mut warnings) {
            let noisy = profile
                .environment
                .as_ref()
                .is_some_and(|e| e.wants_retune());
            if !noisy || opt.cached_only || opt.rigor == Rigor::Estimate {
                if let Err(e) = check_opt_levels(opt_levels) {
                    warnings.push(format!("{e}\n(the cached profile is used as it is)"));
                }
                return Ok(warnings.into_tuned(profile, source));
            }
            warnings.push(format!(
                "cached profile {} was measured on a busy machine (noisy); re-tuning it once",
                source
                    .path()
                    .map_or_else(String::new, |p| crate::shown_path(p))
            ));
            retune = true;
        }
    }
    if opt.cached_only {
        warnings.push(
            "no valid cached or system profile for this request; using the defaults without \
             measuring (cached-only)"
                .to_string(),
        );
        return Ok(warnings.into_tuned(default_profile(hw, opt), Source::Defaults));
    }
    if opt.rigor == Rigor::Estimate {
        return Ok(warnings.into_tuned(estimate_profile(hw, opt), Source::Estimated));
    }
    let Some(cache) = user else {
        warnings.push(format!(
            "{}; the profile will not be saved",
            TunerError::NoHome
        ));
        let profile = measure_profile(hw, opt, retune, &mut warnings)?;
        return Ok(warnings.into_tuned(profile, Source::Measured(None)));
    };
    let path = cache.path_for(&hw.hardware_id(), &slot);
    // Refuse before anything is created: no runtime directory, no lock file.
    check_opt_levels(opt_levels)?;
    let lock = take_lock(&cache, hw, opt, &mut warnings);
    if lock.is_some()
        && !opt.force_recalibrate
        && !retune
        && let Lookup::Hit(profile) = cache.lookup(&path, hw, opt.kernel(), Some(&opt.request(hw)))
    {
        // Another process finished tuning while this one waited.
        return Ok(warnings.into_tuned(*profile, Source::Cache(path)));
    }
    let profile = measure_profile(hw, opt, retune, &mut warnings)?;
    let saved = match cache.save(&profile, &path) {
        Ok(()) => Some(path),
        Err(e) => {
            warnings.push(format!(
                "cannot save the profile to {}: {e}; using it for this run only",
                crate::shown_path(&path)
            ));
            None
        }
    };
    drop(lock);
    Ok(warnings.into_tuned(profile, Source::Measured(saved)))
}

/// The first valid profile for what `opt` asks in the user's cache, then the system store,
/// and where it came from: in each store, the slot of the highest rigor first, down to the
/// rigor asked (a profile serves requests of its rigor or a lower one). A rejected one is
/// reported.
fn read_stores(
    [user, system]: [Option<&ProfileCache>; 2],
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    warnings: &mut Warnings,
) -> Option<(RuntimeProfile, Source)> {
    let id = hw.hardware_id();
    let stores = [
        (user, Source::Cache as fn(PathBuf) -> Source),
        (system, Source::System),
    ];
    let rigors: Vec<Rigor> = Rigor::ALL
        .into_iter()
        .rev()
        .filter(|&r| r >= opt.rigor && r != Rigor::Estimate)
        .collect();
    stores.into_iter().find_map(|(store, source)| {
        let store = store?;
        rigors.iter().find_map(|&rigor| {
            let slot = Slot::of(opt, hw).with_rigor(rigor);
            let path = store.path_for(&id, &slot);
            read_cached(store, &path, hw, opt, warnings).map(|profile| (profile, source(path)))
        })
    })
}

/// The valid cached profile at `path` for what `opt` asks, if any; a rejected one is
/// reported.
fn read_cached(
    cache: &ProfileCache,
    path: &std::path::Path,
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    warnings: &mut Warnings,
) -> Option<RuntimeProfile> {
    match cache.lookup(path, hw, opt.kernel(), Some(&opt.request(hw))) {
        Lookup::Hit(profile) => Some(*profile),
        Lookup::Missing => None,
        Lookup::Rejected(why) => {
            warnings.push(format!(
                "ignoring cached profile {}: {why}{}",
                crate::shown_path(path),
                if opt.cached_only { "" } else { "; re-tuning" }
            ));
            None
        }
    }
}

/// Takes the machine's tuning lock, so that one process tunes at a time; the others wait
/// (within the budget and [`MAX_LOCK_WAIT`]), then read its result. `None`, with a warning,
/// when the lock cannot be had.
fn take_lock(
    cache: &ProfileCache,
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    warnings: &mut Warnings,
) -> Option<CacheLock> {
    let id = hw.hardware_id();
    let lock_deadline = Instant::now() + opt.budget.unwrap_or(MAX_LOCK_WAIT).min(MAX_LOCK_WAIT);
    match cache.lock(&id, lock_deadline) {
        Ok(Some(lock)) => Some(lock),
        Ok(None) => {
            warnings.push(format!(
                "another process has been tuning this machine for too long (lock {}); tuning without waiting",
                crate::shown_path(&cache.lock_path(&id))
            ));
            None
        }
        Err(e) => {
            warnings.push(format!(
                "cannot lock the profile cache in {}: {e}; tuning without the lock",
                crate::shown_path(cache.runtime_dir())
            ));
            None
        }
    }
}

/// Explicit settings win; a knob not given comes from a valid cached profile, else the
/// defaults. Nothing is measured and nothing is written.
fn resolve_overrides(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    stores: [Option<&ProfileCache>; 2],
) -> Tuned {
    let mut warnings = Warnings::new(opt);
    let cached = if opt.threads.is_none() || opt.policy.is_none() {
        stores.into_iter().flatten().find_map(|store| {
            let path = store.path_for(&hw.hardware_id(), &Slot::of(opt, hw));
            match store.lookup(&path, hw, opt.kernel(), None) {
                Lookup::Hit(profile) => Some((*profile, path)),
                _ => None,
            }
        })
    } else {
        None
    };
    let (base, path) = match cached {
        Some((profile, path)) => (profile, Some(path)),
        None => (default_profile(hw, opt), None),
    };
    let threads = opt.threads.unwrap_or(base.threads);
    let effective = hw.effective_cpus.max(1);
    if threads > effective {
        warnings.push(format!(
            "{threads} threads is more than the {effective} CPUs this process may use (oversubscribed)"
        ));
    }
    let policy = opt.policy.unwrap_or(base.schedule_policy);
    let mut profile =
        RuntimeProfile::unmeasured(hw, opt.request(hw), opt.kernel(), threads, policy);
    if opt.threads.is_none() && !base.pinned_cpus.is_empty() {
        let mut decode = profile.decode.clone();
        decode.cores = base.cores;
        decode.pinned_cpus = base.pinned_cpus;
        profile.set_decode(decode);
    }
    // The prefill setting follows the same explicit knobs; a knob not given comes from the
    // cached prefill setting.
    let prefill_policy = opt.policy.unwrap_or(base.prefill.schedule_policy);
    profile.prefill = match opt.threads {
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

/// The `Cargo.toml` lines that build the measuring crates optimized in a dependent's debug
/// builds.
pub const OPTIMIZE_DEPENDENCIES_TOML: &str = "[profile.dev.package.auto-tuner]
opt-level = 3
[profile.dev.package.matmul-kernel]
opt-level = 3
[profile.dev.package.threadpool]
opt-level = 3";

/// The `opt-level` of each crate whose code is measured (recorded by their build scripts).
const BUILD_OPT_LEVELS: [(&str, &str); 3] = [
    ("auto-tuner", env!("SIPLLM_TUNER_OPT_LEVEL")),
    ("matmul-kernel", matmul_kernel::BUILD_OPT_LEVEL),
    ("threadpool", threadpool::BUILD_OPT_LEVEL),
];

/// Refuses to measure when a measuring crate was built without optimizations.
pub(crate) fn ensure_optimized() -> Result<(), TunerError> {
    check_opt_levels(&BUILD_OPT_LEVELS)
}

/// [`ensure_optimized`] for given `(crate, opt-level)` pairs.
fn check_opt_levels(opt_levels: &[(&'static str, &'static str)]) -> Result<(), TunerError> {
    let unoptimized: Vec<&'static str> = opt_levels
        .iter()
        .filter(|(_, level)| *level == "0")
        .map(|(name, _)| *name)
        .collect();
    if unoptimized.is_empty() {
        Ok(())
    } else {
        Err(TunerError::UnoptimizedBuild(unoptimized))
    }
}

/// The `Cargo.toml` lines that optimize `crates` in a dependent's debug builds.
pub(crate) fn optimize_toml(crates: &[&str]) -> String {
    crates
        .iter()
        .map(|name| format!("[profile.dev.package.{name}]\nopt-level = 3"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The profile of [`Rigor::Estimate`]: [`estimate_threads`] for both phases, `static`,
/// nothing measured.
pub fn estimate_profile(hw: &HardwareInfo, opt: &AutoTunerOptions) -> RuntimeProfile {
    let threads = estimate_threads(hw, opt.thread_limit(hw));
    let mut request = opt.request(hw);
    request.rigor = Rigor::Estimate;
    RuntimeProfile::unmeasured(hw, request, opt.kernel(), threads, SchedulePolicy::Static)
}

/// Measures this machine on `opt`'s workload, decode then prefill, at `opt.rigor`, and
/// returns the winning profile (not saved); warnings (a busy machine) go to the reporter.
/// [`Rigor::Estimate`] measures nothing ([`estimate_profile`]). See `docs/auto-tuner.md` for
/// the search and the score.
pub fn run_micro_benchmarks(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
) -> Result<RuntimeProfile, TunerError> {
    measure_profile(hw, opt, false, &mut Warnings::new(opt))
}

/// [`run_micro_benchmarks`]; `retune` when it re-does a noisy profile.
fn measure_profile(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    retune: bool,
    warnings: &mut Warnings,
) -> Result<RuntimeProfile, TunerError> {
    if opt.rigor == Rigor::Estimate {
        return Ok(estimate_profile(hw, opt));
    }
    ensure_optimized()?;
    let started = Instant::now();
    let first_cpu = hw.allowed_cpus.first().copied().unwrap_or(0);
    let environment = Environment::assess(
        opt.load_average.read(),
        hw.logical_cores.max(hw.effective_cpus),
        environment::read_governor(first_cpu),
        retune,
    );
    if let Some(line) = environment.warning() {
        warnings.push(line);
    }
    let mut bench = bench::Bench::new(hw, opt, started)?;
    let limit = opt.thread_limit(hw);
    let decode = search::search(&mut bench, limit, opt.rigor)?;
    bench.set_phase(Phase::Prefill)?;
    let prefill = search::search(&mut bench, limit, opt.rigor)?;
    opt.reporter.finished();
    let mut profile = RuntimeProfile::unmeasured(
        hw,
        opt.request(hw),
        opt.kernel(),
        decode.threads,
        decode.policy,
    );
    profile.rigor = opt.rigor;
    profile.set_decode(phase_profile(&bench, Phase::Decode, decode));
    profile.prefill = phase_profile(&bench, Phase::Prefill, prefill);
    profile.partial = bench.partial();
    profile.layer_copies = Some(bench.layer_copies());
    profile.working_set_bytes = Some(bench.working_set_bytes());
    profile.environment = Some(environment);
    profile.tuned_at = Some(profile::utc_timestamp(SystemTime::now()));
    profile.tuning_seconds = Some(started.elapsed().as_secs_f64());
    Ok(profile)
}

/// The setting of `phase` recording `config` as the winner of what `bench` measured.
pub(crate) fn phase_profile(bench: &bench::Bench, phase: Phase, config: Setting) -> PhaseProfile {
    let measurements = bench.phase_measurements(phase).to_vec();
    let winner = measurements
        .iter()
        .rev()
        .find(|m| {
            m.threads == config.threads
                && m.schedule_policy == config.policy
                && m.cores == config.cores
        })
        .cloned();
    PhaseProfile {
        threads: config.threads,
        schedule_policy: config.policy,
        schedule_policy_id: config.policy.id(),
        cores: config.cores,
        pinned_cpus: bench.pinned_cpus(config),
        tokens_per_sec: winner.as_ref().map(|m| m.tokens_per_sec),
        gbps: winner.as_ref().map(|m| m.gbps),
        measurements,
    }
}

/// Measures each of `settings` on `opt`'s workload in `phase`, interleaved, with
/// `opt.repetitions` rounds (× the rigor's factor), and returns one [`Measurement`] each
/// (tokens/s median, min and max), in the order given; nothing is read or saved. A setting
/// the budget left unmeasured is missing from the result.
///
/// For comparisons of a tuned profile against baselines (`sipllm bench`): a pinned setting
/// pins to the first `threads` CPUs of the machine's [`pinning_candidates`] set of its
/// [`CoreSet`]; a thread count may exceed the CPUs this process may use (oversubscribed).
pub fn measure_settings(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    phase: Phase,
    settings: &[Setting],
) -> Result<Vec<Measurement>, TunerError> {
    let sets = pinning_candidates(hw);
    for s in settings {
        let fits = s.cores == CoreSet::Any
            || sets
                .iter()
                .any(|set| set.cores == s.cores && set.cpus.len() >= s.threads);
        if s.threads == 0 || s.threads > MAX_THREADS_OVERRIDE || !fits {
            return Err(TunerError::InvalidSetting {
                name: "setting".to_string(),
                value: format!("{} threads on {}", s.threads, s.cores.label()),
                expected:
                    "1 to 1024 threads, pinned only to a set of this machine with as many CPUs"
                        .to_string(),
            });
        }
    }
    ensure_optimized()?;
    let mut bench = bench::Bench::new(hw, opt, Instant::now())?;
    bench.set_phase(phase)?;
    use search::Measure as _;
    bench.measure(Step::Final, settings, None)?;
    opt.reporter.finished();
    Ok(bench.phase_measurements(phase).to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn an_unoptimized_build_refuses_to_measure_before_creating_anything() {
        let home = tempfile::tempdir().unwrap();
        let opt = AutoTunerOptions {
            home: Some(home.path().join("sipllm")),
            ..AutoTunerOptions::default()
        };
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
            assert_eq!(default_profile(&hw, &opt).threads, threads, "{millicpus}");
        }
        assert_eq!(default_profile(&machine(), &opt).threads, 2);
    }

    #[test]
    fn an_unoptimized_build_serves_a_cached_profile_with_a_warning() {
        let home = tempfile::tempdir().unwrap();
        let hw = machine();
        let opt = AutoTunerOptions {
            home: Some(home.path().to_path_buf()),
            ..AutoTunerOptions::default()
        };
        let cache = ProfileCache::new(home.path());
        let mut profile = default_profile(&hw, &opt);
        profile.rigor = opt.rigor;
        for phase in [&mut profile.decode, &mut profile.prefill] {
            phase.tokens_per_sec = Some(1.0);
            phase.gbps = Some(1.0);
        }
        profile.tuning_seconds = Some(1.0);
        let path = cache.path_for(&hw.hardware_id(), &Slot::of(&opt, &hw));
        cache.save(&profile, &path).unwrap();
        let tuned = resolve(&hw, &opt, &[("matmul-kernel", "0")]).unwrap();
        assert_eq!(tuned.source, Source::Cache(path));
        assert!(
            tuned.warnings[0].contains("opt-level = 3"),
            "{:?}",
            tuned.warnings
        );
    }
}
