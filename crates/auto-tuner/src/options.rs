//! What the caller asks of the tuner: [`AutoTunerOptions`] and its parts ([`Question`],
//! [`Measuring`], [`Stores`], [`Overrides`]), the environment's settings, their parsers, and
//! the default [`Workload`] (Llama-3-8B in `q4_K_M`).

use crate::environment::{LOAD_AVERAGE_ENV, LoadAverage, parse_load_average};
use crate::error::TunerError;
use crate::profile::TuningRequest;
use crate::progress::Reporter;
use crate::rigor::Rigor;
use device_profile::HardwareInfo;
use matmul_kernel::Kernel;
use model_workload::Workload;
pub use model_workload::{MAX_WORKLOAD_SIDE, default_workload};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;
use threadpool::SchedulePolicy;

/// The largest thread count an override may ask for.
pub const MAX_THREADS_OVERRIDE: usize = 1024;

/// The default cap on thread-count candidates (memory-bound GEMV stops scaling well before).
pub const DEFAULT_THREAD_CAP: usize = 16;

/// Tokens per prefill step by default (`--batch`).
pub const DEFAULT_BATCH: usize = 64;

/// The largest prefill batch (`--batch`).
pub const MAX_BATCH: usize = 4096;

/// The [`Workload::key`] of [`default_workload`], computed once.
pub(crate) fn default_workload_key() -> &'static str {
    static KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEY.get_or_init(|| default_workload().key())
}

/// A workload of one `n_out × n_in` f32 matrix and one layer ([`Workload::matrix`]).
pub fn matrix_workload(n_out: usize, n_in: usize) -> Workload {
    Workload::matrix(n_out, n_in)
}

/// [`Workload::parse_matrix`], its error as a [`TunerError`].
pub fn parse_matrix_workload(name: &str, value: &str) -> Result<Workload, TunerError> {
    Ok(Workload::parse_matrix(name, value)?)
}

/// Parses a prefill batch (1 to [`MAX_BATCH`] tokens).
pub fn parse_batch(name: &str, value: &str) -> Result<usize, TunerError> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=MAX_BATCH).contains(n))
        .ok_or_else(|| TunerError::InvalidSetting {
            name: name.to_string(),
            value: value.to_string(),
            expected: format!("a whole number of tokens from 1 to {MAX_BATCH}"),
        })
}

/// What [`crate::tune_if_needed`] should do, split by what each part is: the question asked
/// (what to tune for, which names the profile), how to measure, where profiles live,
/// explicit overrides, and where progress goes. The crate's entry points take the whole
/// options, as a caller holds them; inside, each step takes only the parts it uses. Each
/// part has its defaults, so a caller sets only what it changes:
///
/// ```
/// let mut opt = auto_tuner::AutoTunerOptions::default();
/// opt.question.batch = 128;
/// opt.stores.home = auto_tuner::ProfileHome::None;
/// ```
#[derive(Debug, Clone, Default)]
pub struct AutoTunerOptions {
    /// What to tune for; with the machine it names the profile (its slot).
    pub question: Question,
    /// How each measurement is taken; none of it names the profile.
    pub measuring: Measuring,
    /// Where profiles are read and saved, and whether to read or to measure.
    pub stores: Stores,
    /// Explicit settings that win over profiles and measurements.
    pub overrides: Overrides,
    /// Where progress and warnings are reported as they happen (default: nowhere; the
    /// warnings are also returned in `Tuned::warnings`).
    pub reporter: Reporter,
}

/// The question a tune answers: the workload and batch, how hard to look and for how long,
/// the thread cap, the kernel, and (or) llama.cpp measured instead of our kernels. With the
/// machine it derives the [`TuningRequest`] and the profile's slot.
#[derive(Debug, Clone)]
pub struct Question {
    /// The model workload the benchmark runs (default: [`default_workload`]).
    pub workload: Workload,
    /// Tokens per prefill step (m of the prefill GEMM; default [`DEFAULT_BATCH`]).
    pub batch: usize,
    /// How hard to look (default [`Rigor::Measure`]).
    pub rigor: Rigor,
    /// Stop the search after this long with the best configuration so far (marked partial).
    pub budget: Option<Duration>,
    /// Largest thread count tried, 1 or more (0 is refused); `None` lifts the cap
    /// (default 16).
    pub thread_cap: Option<usize>,
    /// The kernel to measure and to record in the profile; `None`: the one this process
    /// runs (`matmul_kernel::selected()`), which the tuned pool's kernels use too.
    /// [`AutoTunerOptions::with_env`] sets it from `SIPLLM_KERNEL`, refusing a bad value.
    pub kernel: Option<Kernel>,
    /// Measure llama.cpp (its `llama-bench` on a model file) instead of our kernels; `None`:
    /// our kernels. Its profiles have slots of their own, keyed by the build and the model.
    pub runtime: Option<crate::runtime_key::LlamaCpp>,
}

impl Default for Question {
    fn default() -> Self {
        Question {
            workload: default_workload(),
            batch: DEFAULT_BATCH,
            rigor: Rigor::default(),
            budget: None,
            thread_cap: Some(DEFAULT_THREAD_CAP),
            kernel: None,
            runtime: None,
        }
    }
}

/// How each measurement is taken: repetitions, their length, the weights' bound, and where
/// the load average before a tune comes from.
#[derive(Debug, Clone)]
pub struct Measuring {
    /// Timed repetitions per configuration (at least [`MIN_REPETITIONS`] are always run, at
    /// most [`MAX_REPETITIONS`] may be asked for).
    pub repetitions: usize,
    /// Wall time one repetition aims at.
    pub repetition_time: Duration,
    /// Upper bound on the weights the benchmark rotates through (see the crate docs).
    pub max_working_set_bytes: u64,
    /// Where the 1-minute load average before a tune comes from (default: `/proc/loadavg`;
    /// [`AutoTunerOptions::with_env`] takes `SIPLLM_LOAD_AVERAGE` when set).
    pub load_average: LoadAverage,
}

impl Default for Measuring {
    fn default() -> Self {
        Measuring {
            repetitions: DEFAULT_REPETITIONS,
            repetition_time: Duration::from_millis(20),
            max_working_set_bytes: DEFAULT_MAX_WORKING_SET_BYTES,
            load_average: LoadAverage::Proc,
        }
    }
}

/// Where profiles live, and whether a valid one is read, replaced or the only answer.
#[derive(Debug, Clone, Default)]
pub struct Stores {
    /// Where the user's cache lives (`<home>/runtime/`). The default,
    /// [`ProfileHome::FromEnv`], is `$SIPLLM_HOME`, else `$HOME/.sipllm`, so that
    /// `tune_if_needed(hw, &Default::default())` measures once and then reads the cache;
    /// [`ProfileHome::None`] is the one way to ask for no cache.
    pub home: ProfileHome,
    /// The read-only system store of profiles, read after the user's cache (a fleet's
    /// profiles, FFTW's system wisdom); `None`: none. [`AutoTunerOptions::with_env`] sets it
    /// from `SIPLLM_SYSTEM_PROFILES`, else [`DEFAULT_SYSTEM_PROFILES`].
    pub system_profiles: Option<PathBuf>,
    /// Measure even when a valid cached profile exists, and replace it.
    pub force_recalibrate: bool,
    /// Never measure: use a cached or system profile if there is one, else the defaults
    /// (`--cached-only`, `SIPLLM_CACHED_ONLY=1`). Wins over `force_recalibrate`.
    pub cached_only: bool,
}

/// Explicit settings (`--threads`, `--policy` and their variables), which win over cache
/// and tuner, and the switch that skips tuning.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Skip tuning and the cache: use the defaults (4 threads clamped to the
    /// `effective_cpus`, `static`), or the explicit settings.
    pub disable_autotune: bool,
    /// An explicit thread count (`--threads`, `SIPLLM_THREADS`).
    pub threads: Option<usize>,
    /// An explicit policy (`--policy`, `SIPLLM_POLICY`).
    pub policy: Option<SchedulePolicy>,
}

impl Overrides {
    /// Whether a thread count or a policy is given.
    pub fn any(&self) -> bool {
        self.threads.is_some() || self.policy.is_some()
    }
}

/// The default bound on the benchmark's memory: 8 GiB, within a quarter of RAM and half of
/// the memory available (`bench::memory_bound`). It is what lets a layer of a 70B model in
/// f16 (1.6 GiB, 3.2 GiB with its buffers) be measured where the RAM allows, and a server
/// whose L3 is over 512 MiB rotate through four times its L3; a workload's copies take only
/// what streaming from DRAM needs (four times the L3), so a common model takes far less.
pub const DEFAULT_MAX_WORKING_SET_BYTES: u64 = 8 << 30;

/// The fewest timed repetitions behind any configuration's median.
pub const MIN_REPETITIONS: usize = 5;

/// The most timed repetitions per configuration a caller may ask for
/// ([`Measuring::repetitions`]; `sipllm bench --repetitions` takes at most as many).
pub const MAX_REPETITIONS: usize = u16::MAX as usize;

/// Timed repetitions per configuration by default (see `docs/auto-tuner.md` for the cost).
pub const DEFAULT_REPETITIONS: usize = 7;

impl AutoTunerOptions {
    /// Fills what is not already set from the environment, reading variables through `var`
    /// (so tests need not touch the process environment): the overrides from
    /// `SIPLLM_THREADS` and `SIPLLM_POLICY`, `SIPLLM_CACHED_ONLY`, the load average from
    /// `SIPLLM_LOAD_AVERAGE`, and what [`Self::with_store_env`] reads. Explicit values
    /// already in `self` win. The directories may be any bytes the OS allows; a setting
    /// that is not UTF-8 text is an error, never taken as unset.
    pub fn with_env(self, var: impl Fn(&str) -> Option<OsString>) -> Result<Self, TunerError> {
        let mut opt = self.with_store_env(&var)?;
        let text = |name: &str| text_of(name, var(name));
        let overrides = &mut opt.overrides;
        if overrides.threads.is_none()
            && let Some(value) = text("SIPLLM_THREADS")?
        {
            overrides.threads = Some(parse_threads("SIPLLM_THREADS", &value)?);
        }
        if overrides.policy.is_none()
            && let Some(value) = text("SIPLLM_POLICY")?
        {
            overrides.policy = Some(parse_policy("SIPLLM_POLICY", &value)?);
        }
        if !opt.stores.cached_only
            && let Some(value) = text(CACHED_ONLY_ENV)?
        {
            opt.stores.cached_only = parse_flag(CACHED_ONLY_ENV, &value)?;
        }
        if opt.measuring.load_average == LoadAverage::Proc
            && let Some(value) = text(LOAD_AVERAGE_ENV)?
        {
            let load = parse_load_average(&value).ok_or_else(|| TunerError::InvalidSetting {
                name: LOAD_AVERAGE_ENV.to_string(),
                value: value.clone(),
                expected: "a non-negative number (the 1-minute load average)".to_string(),
            })?;
            opt.measuring.load_average = LoadAverage::Given(Some(load));
        }
        Ok(opt)
    }

    /// Fills, where not already set, only what finding and judging the stored profiles
    /// takes (what `sipllm profile` reads): the stores from `SIPLLM_HOME`/`HOME` and
    /// `SIPLLM_SYSTEM_PROFILES`, and the kernel from `SIPLLM_KERNEL`. A setting of a run
    /// (`SIPLLM_THREADS`, `SIPLLM_POLICY`, `SIPLLM_CACHED_ONLY`, `SIPLLM_LOAD_AVERAGE`) is
    /// not read, so a bad one does not stop a command that never uses it.
    pub fn with_store_env(
        mut self,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Self, TunerError> {
        let text = |name: &str| text_of(name, var(name));
        if self.question.kernel.is_none()
            && let Some(value) = text(matmul_kernel::KERNEL_ENV)?
        {
            // A forced kernel the CPU lacks is an error, not a silent fallback.
            self.question.kernel = Some(
                matmul_kernel::kernel_from_env_value(Some(&value)).map_err(|e| {
                    TunerError::InvalidSetting {
                        name: matmul_kernel::KERNEL_ENV.to_string(),
                        value: value.clone(),
                        expected: e.to_string(),
                    }
                })?,
            );
        }
        let stores = &mut self.stores;
        if stores.system_profiles.is_none() {
            // Unset: the default directory; empty: no system store.
            stores.system_profiles = match var(SYSTEM_PROFILES_ENV) {
                None => Some(PathBuf::from(DEFAULT_SYSTEM_PROFILES)),
                Some(dir) if dir.is_empty() => None,
                Some(dir) => Some(absolute_home(SYSTEM_PROFILES_ENV, PathBuf::from(dir))?),
            };
        }
        if stores.home == ProfileHome::FromEnv
            && let Some(dir) = default_home(&var)?
        {
            stores.home = ProfileHome::Dir(dir);
        }
        Ok(self)
    }

    /// [`AutoTunerOptions::with_env`] over the process environment.
    pub fn with_process_env(self) -> Result<Self, TunerError> {
        self.with_env(|name| std::env::var_os(name))
    }
}

impl Stores {
    /// The directory of the user's cache: [`Self::home`] with [`ProfileHome::FromEnv`] read
    /// from the process environment now; `None` when no cache was asked for or none can be
    /// located.
    pub fn home_dir(&self) -> Result<Option<PathBuf>, TunerError> {
        match &self.home {
            ProfileHome::FromEnv => default_home(|name| std::env::var_os(name)),
            ProfileHome::Dir(dir) => Ok(Some(dir.clone())),
            ProfileHome::None => Ok(None),
        }
    }
}

impl Question {
    /// The largest thread count the search may try on `hw`: the CPUs this process may run
    /// on (`candidates::candidate_cpus`: under a CPU quota, more than the quota),
    /// capped by `thread_cap`.
    pub fn thread_limit(&self, hw: &HardwareInfo) -> usize {
        let cpus = crate::candidates::candidate_cpus(hw);
        self.thread_cap.map_or(cpus, |cap| cpus.min(cap.max(1)))
    }

    /// The kernel this question measures with: [`Self::kernel`], else the one this process
    /// runs (`matmul_kernel::selected()`).
    pub fn kernel(&self) -> Kernel {
        self.kernel.unwrap_or_else(matmul_kernel::selected)
    }

    /// What a tuning run asking this asks for on `hw`.
    pub fn request(&self, hw: &HardwareInfo) -> TuningRequest {
        TuningRequest {
            workload: self.workload.clone(),
            batch: self.batch,
            thread_limit: self.thread_limit(hw),
            budget_seconds: self.budget.map(|b| b.as_secs_f64()),
            rigor: self.rigor,
        }
    }

    /// Whether this asks what the defaults ask (default workload, batch, thread cap and
    /// rigor), so that the profile lives in the machine's plain `<hardware_id>.json`.
    pub fn is_default_request(&self, hw: &HardwareInfo) -> bool {
        self.workload.key() == default_workload_key()
            && self.batch == DEFAULT_BATCH
            && self.rigor == Rigor::default()
            && self.thread_limit(hw)
                == crate::candidates::candidate_cpus(hw).clamp(1, DEFAULT_THREAD_CAP)
    }
}

/// Where the user's cache of profiles lives ([`Stores::home`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ProfileHome {
    /// `$SIPLLM_HOME`, else `$HOME/.sipllm` ([`default_home`]), read from the process
    /// environment when the tuner runs (the default). [`AutoTunerOptions::with_env`] turns it
    /// into [`ProfileHome::Dir`] when either variable is set.
    #[default]
    FromEnv,
    /// This directory: profiles in `<dir>/runtime/`.
    Dir(PathBuf),
    /// No cache: nothing is read from or saved to a user's store, and the tuner measures on
    /// every call (the system store is still read).
    None,
}

/// The default cache directory given the environment `var`: `$SIPLLM_HOME`, else
/// `$HOME/.sipllm`, made absolute against the current directory; `None` when neither is set
/// (an empty variable counts as unset).
pub fn default_home(var: impl Fn(&str) -> Option<OsString>) -> Result<Option<PathBuf>, TunerError> {
    let home = var(HOME_ENV)
        .filter(|h| !h.is_empty())
        .map(|h| (HOME_ENV, PathBuf::from(h)))
        .or_else(|| {
            var("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| ("HOME", PathBuf::from(h).join(".sipllm")))
        });
    match home {
        Some((name, path)) => Ok(Some(absolute_home(name, path)?)),
        None => Ok(None),
    }
}

/// The variable naming the user's cache directory (profiles in `$SIPLLM_HOME/runtime/`).
pub const HOME_ENV: &str = "SIPLLM_HOME";

/// `path` made absolute against the current directory, so that the cache does not move with
/// the working directory of later runs.
fn absolute_home(name: &str, path: PathBuf) -> Result<PathBuf, TunerError> {
    if path.is_absolute() {
        return Ok(path);
    }
    std::path::absolute(&path).map_err(|e| TunerError::InvalidSetting {
        name: name.to_string(),
        value: path.display().to_string(),
        expected: format!("a directory path that can be made absolute ({e})"),
    })
}

/// The variable naming the system store of profiles.
pub const SYSTEM_PROFILES_ENV: &str = "SIPLLM_SYSTEM_PROFILES";

/// The system store of profiles when `SIPLLM_SYSTEM_PROFILES` is unset.
pub const DEFAULT_SYSTEM_PROFILES: &str = "/etc/sipllm/runtime";

/// The variable that forbids measuring (`1`): as `--cached-only`.
pub const CACHED_ONLY_ENV: &str = "SIPLLM_CACHED_ONLY";

/// Parses a yes/no setting named `name`: `1`, `true`, `yes`, `on` or `0`, `false`, `no`,
/// `off`, empty (case-insensitive).
pub fn parse_flag(name: &str, value: &str) -> Result<bool, TunerError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        _ => Err(TunerError::InvalidSetting {
            name: name.to_string(),
            value: value.to_string(),
            expected: "1, true, yes, on, or 0, false, no, off".to_string(),
        }),
    }
}

/// The value of the variable `name` as text: `None` when it is unset; an error naming it
/// when it is not UTF-8, so that a value that cannot be read is never taken as unset.
fn text_of(name: &str, value: Option<OsString>) -> Result<Option<String>, TunerError> {
    value
        .map(|v| {
            v.into_string().map_err(|v| TunerError::InvalidSetting {
                name: name.to_string(),
                value: v.to_string_lossy().into_owned(),
                expected: "UTF-8 text".to_string(),
            })
        })
        .transpose()
}

/// Parses a thread-count override named `name` (1 to [`MAX_THREADS_OVERRIDE`]).
pub fn parse_threads(name: &str, value: &str) -> Result<usize, TunerError> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=MAX_THREADS_OVERRIDE).contains(n))
        .ok_or_else(|| TunerError::InvalidSetting {
            name: name.to_string(),
            value: value.to_string(),
            expected: format!("a whole number of threads from 1 to {MAX_THREADS_OVERRIDE}"),
        })
}

/// Parses a policy override named `name` (a name such as `static` or an id 0–6).
pub fn parse_policy(name: &str, value: &str) -> Result<SchedulePolicy, TunerError> {
    value
        .parse::<SchedulePolicy>()
        .map_err(|_| TunerError::InvalidSetting {
            name: name.to_string(),
            value: value.to_string(),
            expected: format!(
                "one of {} or an id 0-6",
                SchedulePolicy::ALL.map(|p| p.name()).join(", ")
            ),
        })
}

/// The longest time budget, in seconds: one day.
pub const MAX_BUDGET_SECONDS: f64 = 86_400.0;

/// The shortest time budget, in seconds: one millisecond (a shorter one measures nothing,
/// and one below a nanosecond would be saved as 0, which no cached profile may hold).
pub const MIN_BUDGET_SECONDS: f64 = 0.001;

/// Parses a time budget in seconds (a finite number from [`MIN_BUDGET_SECONDS`] to
/// [`MAX_BUDGET_SECONDS`]).
pub fn parse_budget(name: &str, value: &str) -> Result<Duration, TunerError> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| (MIN_BUDGET_SECONDS..=MAX_BUDGET_SECONDS).contains(s))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| TunerError::InvalidSetting {
            name: name.to_string(),
            value: value.to_string(),
            expected: "a number of seconds from 0.001 to 86400".to_string(),
        })
}

#[cfg(test)]
mod tests;
