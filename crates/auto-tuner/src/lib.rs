//! The auto-tuner: measure the machine once, remember the answer, hand it to the runtime.
//!
//! [`tune_if_needed`] resolves the [`RuntimeProfile`] (thread count and schedule policy) for
//! a machine described by a [`device_profile::HardwareInfo`]:
//!
//! 1. `disable_autotune`: the defaults (4 threads clamped to the `effective_cpus`, `static`).
//! 2. explicit `threads`/`policy` (`--threads`, `SIPLLM_THREADS`, …): they win; a knob not
//!    given comes from a valid cached profile, else from the defaults. Nothing is measured.
//! 3. a valid cached profile in `$SIPLLM_HOME/runtime/<hardware_id>.json` (one file per
//!    request), else in the read-only system store (`SIPLLM_SYSTEM_PROFILES`): used as is.
//! 4. `cached_only` (`SIPLLM_CACHED_ONLY=1`): the defaults; nothing is measured.
//! 5. otherwise [`run_micro_benchmarks`], and the profile is saved for the next run.
//!
//! [`list_profiles`], [`export_profiles`], [`import_profiles`] and [`clear_profiles`] work on
//! the stores as a whole.
//!
//! The result, a [`Tuned`], builds the runtime's ready [`threadpool::ThreadPool`].
//!
//! [`read_gguf_header`] reads a `.gguf` file's metadata and tensor table (never its weights),
//! every size in it bounded before anything is allocated.
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
//! # Ok::<(), auto_tuner::TunerError>(())
//! ```
#![deny(missing_docs)]

// The cache's lock (`flock`), its file modes and the caller's pinning are Unix calls.
#[cfg(not(unix))]
compile_error!("auto-tuner supports Linux and macOS only (other Unix systems are untested)");

mod affinity;
mod bench;
mod cache;
mod error;
mod exhaustive;
mod gguf;
mod options;
mod profile;
mod progress;
mod search;
mod store;
pub mod workload;

pub use bench::{MAX_WEIGHT_MATRICES, median};
pub use cache::{CacheLock, Lookup, MAX_PROFILE_BYTES, ProfileCache, Rejection, Slot};
pub use error::TunerError;
pub use exhaustive::{ExhaustiveReport, Pick, run_exhaustive};
pub use gguf::{
    ARCHITECTURE_KEY, GgufArray, GgufError, GgufHeader, GgufTensor, GgufValue, MAX_ARRAY_DEPTH,
    MAX_ARRAY_LEN, MAX_DIMS, MAX_HEADER_BYTES, MAX_METADATA_KVS, MAX_STRING_BYTES, MAX_TENSORS,
    read_gguf_header, tensor_format,
};
pub use options::{
    AutoTunerOptions, CACHED_ONLY_ENV, DEFAULT_MAX_WORKING_SET_BYTES, DEFAULT_SYSTEM_PROFILES,
    DEFAULT_THREAD_CAP, MAX_THREADS_OVERRIDE, MIN_REPETITIONS, SYSTEM_PROFILES_ENV, Workload,
    parse_budget, parse_flag, parse_policy, parse_threads,
};
pub use profile::{
    CoreSet, LLAMA3_8B_PARAMS_READ_PER_TOKEN, Measurement, Phase, RuntimeProfile, SCHEMA_VERSION,
    TuningRequest, kernel_signature, pseudo_tokens_per_sec,
};
pub use progress::{Report, ReportFn, Reporter};
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
}

impl Source {
    /// `defaults`, `cache`, `system`, `measured` or `override`.
    pub fn name(&self) -> &'static str {
        match self {
            Source::Defaults => "defaults",
            Source::Cache(_) => "cache",
            Source::System(_) => "system",
            Source::Measured(_) => "measured",
            Source::Override(_) => "override",
        }
    }

    /// The profile file read or written, if any.
    pub fn path(&self) -> Option<&PathBuf> {
        match self {
            Source::Defaults => None,
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
/// use (`effective_cpus`), `static`.
pub fn default_profile(hw: &HardwareInfo, opt: &AutoTunerOptions) -> RuntimeProfile {
    RuntimeProfile::unmeasured(
        hw,
        opt.request(hw),
        opt.kernel(),
        DEFAULT_THREADS.min(hw.effective_cpus.max(1)),
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
    if !opt.force_recalibrate || opt.cached_only {
        let stores = [user.as_ref(), system.as_ref()];
        if let Some((profile, source)) = read_stores(stores, slot, hw, opt, &mut warnings) {
            if let Err(e) = check_opt_levels(opt_levels) {
                warnings.push(format!("{e}\n(the cached profile is used as it is)"));
            }
            return Ok(warnings.into_tuned(profile, source));
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
    let Some(cache) = user else {
        warnings.push(format!(
            "{}; the profile will not be saved",
            TunerError::NoHome
        ));
        let profile = run_micro_benchmarks(hw, opt)?;
        return Ok(warnings.into_tuned(profile, Source::Measured(None)));
    };
    let path = cache.path_for(&hw.hardware_id(), slot);
    // Refuse before anything is created: no runtime directory, no lock file.
    check_opt_levels(opt_levels)?;
    let lock = take_lock(&cache, hw, opt, &mut warnings);
    if lock.is_some()
        && !opt.force_recalibrate
        && let Lookup::Hit(profile) = cache.lookup(&path, hw, opt.kernel(), Some(&opt.request(hw)))
    {
        // Another process finished tuning while this one waited.
        return Ok(warnings.into_tuned(*profile, Source::Cache(path)));
    }
    let profile = run_micro_benchmarks(hw, opt)?;
    let saved = match cache.save(&profile, &path) {
        Ok(()) => Some(path),
        Err(e) => {
            warnings.push(format!(
                "cannot save the profile to {}: {e}; using it for this run only",
                path.display()
            ));
            None
        }
    };
    drop(lock);
    Ok(warnings.into_tuned(profile, Source::Measured(saved)))
}

/// The first valid profile for what `opt` asks in the user's cache, then the system store,
/// and where it came from; a rejected one is reported.
fn read_stores(
    [user, system]: [Option<&ProfileCache>; 2],
    slot: Slot,
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    warnings: &mut Warnings,
) -> Option<(RuntimeProfile, Source)> {
    let id = hw.hardware_id();
    let stores = [
        (user, Source::Cache as fn(PathBuf) -> Source),
        (system, Source::System),
    ];
    stores.into_iter().find_map(|(store, source)| {
        let store = store?;
        let path = store.path_for(&id, slot);
        read_cached(store, &path, hw, opt, warnings).map(|profile| (profile, source(path)))
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
                path.display(),
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
                cache.lock_path(&id).display()
            ));
            None
        }
        Err(e) => {
            warnings.push(format!(
                "cannot lock the profile cache in {}: {e}; tuning without the lock",
                cache.runtime_dir().display()
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
            let path = store.path_for(&hw.hardware_id(), Slot::of(opt, hw));
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
        profile.cores = base.cores;
        profile.pinned_cpus = base.pinned_cpus;
    }
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

/// Measures this machine and returns the winning profile (not saved). See the crate docs
/// for the search and `docs/auto-tuner.md` for the score.
pub fn run_micro_benchmarks(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
) -> Result<RuntimeProfile, TunerError> {
    ensure_optimized()?;
    let started = Instant::now();
    let mut bench = bench::Bench::new(hw, opt, started)?;
    let winner = search::search(&mut bench, opt.thread_limit(hw))?;
    opt.reporter.finished();
    Ok(profile_from(hw, opt, &bench, winner, started))
}

/// The profile recording `config` as the winner of what `bench` measured.
pub(crate) fn profile_from(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    bench: &bench::Bench,
    config: bench::Config,
    started: Instant,
) -> RuntimeProfile {
    let winner = bench
        .measurements
        .iter()
        .rev()
        .find(|m| {
            m.threads == config.threads
                && m.schedule_policy == config.policy
                && m.cores == config.cores
        })
        .cloned();
    let mut profile = RuntimeProfile::unmeasured(
        hw,
        opt.request(hw),
        opt.kernel(),
        config.threads,
        config.policy,
    );
    profile.cores = config.cores;
    profile.pinned_cpus = bench.pinned_cpus(config);
    if let Some(m) = winner {
        profile.pseudo_tokens_per_sec = Some(m.pseudo_tokens_per_sec);
        profile.gbps = Some(m.gbps);
    }
    profile.partial = bench.out_of_time;
    profile.weight_matrices = Some(bench.n_matrices());
    profile.working_set_bytes = Some(bench.working_set_bytes());
    profile.measurements = bench.measurements.clone();
    profile.tuned_at = Some(profile::utc_timestamp(SystemTime::now()));
    profile.tuning_seconds = Some(started.elapsed().as_secs_f64());
    profile
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
    fn an_unoptimized_build_serves_a_cached_profile_with_a_warning() {
        let home = tempfile::tempdir().unwrap();
        let hw = machine();
        let opt = AutoTunerOptions {
            home: Some(home.path().to_path_buf()),
            ..AutoTunerOptions::default()
        };
        let cache = ProfileCache::new(home.path());
        let mut profile = default_profile(&hw, &opt);
        profile.pseudo_tokens_per_sec = Some(1.0);
        profile.gbps = Some(1.0);
        profile.tuning_seconds = Some(1.0);
        let path = cache.path_for(&hw.hardware_id(), Slot::of(&opt, &hw));
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
