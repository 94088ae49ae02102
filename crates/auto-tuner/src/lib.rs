//! The auto-tuner: measure the machine once, remember the answer, hand it to the runtime.
//!
//! [`tune_if_needed`] resolves the [`RuntimeProfile`] (thread count and schedule policy) for
//! a machine described by a [`device_profile::HardwareInfo`]:
//!
//! 1. `disable_autotune`: the defaults (4 threads clamped to the usable CPUs, `static`).
//! 2. explicit `threads`/`policy` (`--threads`, `SIPLLM_THREADS`, …): they win; a knob not
//!    given comes from a valid cached profile, else from the defaults. Nothing is measured.
//! 3. a valid cached profile in `$SIPLLM_HOME/runtime/<hardware_id>.json`: used as is.
//! 4. otherwise [`run_micro_benchmarks`], and the profile is saved for the next run.
//!
//! The result, a [`Tuned`], builds the runtime's ready [`threadpool::ThreadPool`].
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

mod affinity;
mod bench;
mod cache;
mod error;
mod exhaustive;
mod options;
mod profile;
mod progress;
mod search;

pub use cache::{Lookup, MAX_PROFILE_BYTES, ProfileCache, Rejection};
pub use error::TunerError;
pub use exhaustive::{ExhaustiveReport, Pick, run_exhaustive};
pub use options::{
    AutoTunerOptions, DEFAULT_MAX_WORKING_SET_BYTES, DEFAULT_THREAD_CAP, MAX_THREADS_OVERRIDE,
    MIN_REPETITIONS, Progress, Workload, parse_budget, parse_policy, parse_threads,
};
pub use profile::{
    CoreSet, LLAMA3_8B_PARAMS_READ_PER_TOKEN, Measurement, RuntimeProfile, SCHEMA_VERSION,
    kernel_signature, pseudo_tokens_per_sec,
};

use device_profile::HardwareInfo;
use std::path::PathBuf;
use std::time::{Instant, SystemTime};
use threadpool::SchedulePolicy;

/// The thread count of the defaults, before clamping to the usable CPUs.
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
    /// Measured now; saved at this path, or `None` when it could not be saved.
    Measured(Option<PathBuf>),
    /// Explicit settings; the path of the cached profile that gave the other knob, if any.
    Override(Option<PathBuf>),
}

impl Source {
    /// `defaults`, `cache`, `measured` or `override`.
    pub fn name(&self) -> &'static str {
        match self {
            Source::Defaults => "defaults",
            Source::Cache(_) => "cache",
            Source::Measured(_) => "measured",
            Source::Override(_) => "override",
        }
    }

    /// The profile file read or written, if any.
    pub fn path(&self) -> Option<&PathBuf> {
        match self {
            Source::Defaults => None,
            Source::Cache(p) => Some(p),
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

/// The warnings of one resolution: printed on stderr as they happen (unless
/// `print_warnings` is off), and kept for [`Tuned::warnings`].
struct Warnings {
    print: bool,
    lines: Vec<String>,
}

impl Warnings {
    fn new(opt: &AutoTunerOptions) -> Self {
        Warnings {
            print: opt.print_warnings,
            lines: Vec::new(),
        }
    }

    fn push(&mut self, line: String) {
        if self.print {
            eprintln!("sipllm: warning: {line}");
        }
        self.lines.push(line);
    }
}

/// The number of CPUs this process may use: `effective_cpus`, else the logical cores, at
/// least 1.
pub fn usable_cpus(hw: &HardwareInfo) -> usize {
    if hw.effective_cpus > 0 {
        hw.effective_cpus
    } else {
        hw.logical_cores.max(1)
    }
}

/// The fields of `earlier` (stored in a cached profile) that differ from `now` in a way that
/// invalidates the tuning.
pub(crate) fn hardware_differences(now: &HardwareInfo, earlier: &HardwareInfo) -> Vec<String> {
    now.tuning_differences(earlier)
}

/// The defaults: [`DEFAULT_THREADS`] clamped to the usable CPUs, `static`.
pub fn default_profile(hw: &HardwareInfo) -> RuntimeProfile {
    RuntimeProfile::unmeasured(
        hw,
        DEFAULT_THREADS.min(usable_cpus(hw)),
        SchedulePolicy::Static,
    )
}

/// Resolves the runtime profile for `hw` as the crate docs describe.
pub fn tune_if_needed(hw: &HardwareInfo, opt: &AutoTunerOptions) -> Result<Tuned, TunerError> {
    let mut warnings = Warnings::new(opt);
    let explicit = opt.threads.is_some() || opt.policy.is_some();
    if opt.disable_autotune {
        if explicit {
            // Explicit settings win over the defaults too; the cache is not read.
            return Ok(resolve_overrides(hw, opt, None));
        }
        return Ok(Tuned {
            profile: default_profile(hw),
            source: Source::Defaults,
            warnings: warnings.lines,
        });
    }
    // A forced kernel the CPU lacks (`SIPLLM_KERNEL`) is an error, not a silent fallback.
    matmul_kernel::try_selected().map_err(|e| TunerError::Kernel(e.to_string()))?;
    let cache = opt.home.as_deref().map(ProfileCache::new);
    let id = hw.hardware_id();

    if explicit {
        return Ok(resolve_overrides(hw, opt, cache.as_ref()));
    }
    // A profile cut short by a budget is kept only while the caller also sets a budget.
    let accept_partial = opt.budget.is_some();

    let Some(cache) = cache else {
        warnings.push(format!(
            "{}; the profile will not be saved",
            TunerError::NoHome
        ));
        let profile = run_micro_benchmarks(hw, opt)?;
        return Ok(Tuned {
            profile,
            source: Source::Measured(None),
            warnings: warnings.lines,
        });
    };
    let path = cache.path_for(&id);

    if !opt.force_recalibrate {
        match cache.lookup(hw, opt.workload, accept_partial) {
            Lookup::Hit(profile) => {
                return Ok(Tuned {
                    profile: *profile,
                    source: Source::Cache(path),
                    warnings: warnings.lines,
                });
            }
            Lookup::Missing => {}
            Lookup::Rejected(why) => warnings.push(format!(
                "ignoring cached profile {}: {why}; re-tuning",
                path.display()
            )),
        }
    }

    // One process tunes a machine at a time; the others wait, then read its result.
    let lock_deadline = Instant::now() + opt.budget.unwrap_or(MAX_LOCK_WAIT).min(MAX_LOCK_WAIT);
    let lock = match cache.lock(&id, lock_deadline) {
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
                "cannot lock the profile cache in {}: {e}; tuning without it",
                path.parent().unwrap_or(&path).display()
            ));
            None
        }
    };
    if lock.is_some()
        && !opt.force_recalibrate
        && let Lookup::Hit(profile) = cache.lookup(hw, opt.workload, accept_partial)
    {
        // Another process finished tuning while this one waited.
        return Ok(Tuned {
            profile: *profile,
            source: Source::Cache(path),
            warnings: warnings.lines,
        });
    }

    let profile = run_micro_benchmarks(hw, opt)?;
    let saved = match cache.save(&profile) {
        Ok(path) => Some(path),
        Err(e) => {
            warnings.push(format!(
                "cannot save the profile to {}: {e}; using it for this run only",
                path.display()
            ));
            None
        }
    };
    drop(lock);
    Ok(Tuned {
        profile,
        source: Source::Measured(saved),
        warnings: warnings.lines,
    })
}

/// Explicit settings win; a knob not given comes from a valid cached profile, else the
/// defaults. Nothing is measured and nothing is written.
fn resolve_overrides(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    cache: Option<&ProfileCache>,
) -> Tuned {
    let mut warnings = Warnings::new(opt);
    let cached = match cache {
        Some(cache) if opt.threads.is_none() || opt.policy.is_none() => {
            match cache.lookup(hw, opt.workload, true) {
                Lookup::Hit(profile) => Some((*profile, cache.path_for(&hw.hardware_id()))),
                _ => None,
            }
        }
        _ => None,
    };
    let (base, path) = match cached {
        Some((profile, path)) => (profile, Some(path)),
        None => (default_profile(hw), None),
    };
    let threads = opt.threads.unwrap_or(base.threads);
    if threads > usable_cpus(hw) {
        warnings.push(format!(
            "{threads} threads is more than the {} CPUs this process may use (oversubscribed)",
            usable_cpus(hw)
        ));
    }
    let policy = opt.policy.unwrap_or(base.schedule_policy);
    let mut profile = RuntimeProfile::unmeasured(hw, threads, policy);
    if opt.threads.is_none() && !base.pinned_cpus.is_empty() {
        profile.cores = base.cores;
        profile.pinned_cpus = base.pinned_cpus;
    }
    Tuned {
        profile,
        source: Source::Override(path),
        warnings: warnings.lines,
    }
}

/// Refuses to measure when this crate was built without optimizations.
pub(crate) fn ensure_optimized() -> Result<(), TunerError> {
    match env!("SIPLLM_TUNER_OPT_LEVEL") {
        "0" => Err(TunerError::UnoptimizedBuild("0")),
        _ => Ok(()),
    }
}

/// The largest thread count the search tries: the usable CPUs, capped by `thread_cap`.
pub(crate) fn max_threads(hw: &HardwareInfo, opt: &AutoTunerOptions) -> usize {
    let usable = usable_cpus(hw);
    opt.thread_cap.map_or(usable, |cap| usable.min(cap.max(1)))
}

/// Measures this machine and returns the winning profile (not saved). See the crate docs
/// for the search and `docs/auto-tuner.md` for the score.
pub fn run_micro_benchmarks(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
) -> Result<RuntimeProfile, TunerError> {
    ensure_optimized()?;
    let started = Instant::now();
    let max_threads = max_threads(hw, opt);
    let mut bench = bench::Bench::new(hw, opt, max_threads, started)?;
    let winner = search::search(&mut bench, max_threads)?;
    bench.progress.finish();
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
    let mut profile = RuntimeProfile::unmeasured(hw, config.threads, config.policy);
    profile.cores = config.cores;
    profile.pinned_cpus = bench.pinned_cpus(config);
    if let Some(m) = winner {
        profile.pseudo_tokens_per_sec = m.pseudo_tokens_per_sec;
        profile.gbps = m.gbps;
    }
    profile.partial = bench.out_of_time;
    profile.workload = opt.workload;
    profile.weight_matrices = bench.n_matrices();
    profile.measurements = bench.measurements.clone();
    profile.tuned_at = profile::utc_timestamp(SystemTime::now());
    profile.tuning_seconds = started.elapsed().as_secs_f64();
    profile
}
