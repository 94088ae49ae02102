//! The tuning flags `sipllm`, `sipllm bench`, `sipllm emit` and `bench-micro` share, with
//! clap's parsing and `--help` text, and the options they make.

use crate::progress::stderr_reporter;
use auto_tuner::{AutoTunerOptions, Rigor, TunerError};
use model_workload::{DEFAULT_PRESET, Weights, Workload};
use std::time::Duration;
use threadpool::SchedulePolicy;

/// The flags both commands share, with clap's parsing and `--help` text.
#[derive(Debug, Clone, clap::Args)]
pub struct TuneArgs {
    /// Measure even when a cached profile exists, and replace it.
    #[arg(long)]
    pub recalibrate: bool,
    /// Bound the whole tune (preparation included) to about SECONDS (0.001 to 86400), keeping the best
    /// configuration so far (the profile is marked partial; a partial cached profile is
    /// reused only by runs whose budget is no larger, or that never measure). A complete
    /// cached profile is read without measuring.
    #[arg(long, value_name = "SECONDS", value_parser = budget, allow_hyphen_values = true)]
    pub budget: Option<Duration>,
    /// Largest thread count the search tries (1 to 1024, default 16; "none" lifts the cap
    /// to the CPUs this process may use). Each thread limit has its own cached profile.
    #[arg(long, value_name = "N|none", value_parser = thread_cap, allow_hyphen_values = true)]
    pub thread_cap: Option<ThreadCap>,
    /// The model to tune for: llama3-8b (the default), llama3.2-1b, llama3.2-3b,
    /// llama3.1-70b, mistral-7b, qwen2.5-7b, phi-3-mini, gemma-2-9b. Each workload (shapes,
    /// formats and layers) has its own cached profile.
    #[arg(long, value_name = "PRESET", value_parser = model_arg, conflicts_with_all = ["model_config", "gguf", "workload"])]
    pub model: Option<String>,
    /// The weight format of a preset's projections: f32, f16, bf16, q8_0, q4_0, q4_K, q6_K,
    /// or q4_K_M (llama.cpp's Q4_K_M: q4_K, with q6_K for v and down in the layers
    /// llama.cpp picks; the default).
    #[arg(long, value_name = "FORMAT", value_parser = weights_arg, conflicts_with_all = ["gguf", "workload"])]
    pub weights: Option<Weights>,
    /// The model's shapes from a Hugging Face config.json (in --weights).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["gguf", "workload"])]
    pub model_config: Option<std::path::PathBuf>,
    /// The model's shapes, formats and layer count from a .gguf file's header.
    #[arg(long, value_name = "PATH", conflicts_with = "workload")]
    pub gguf: Option<std::path::PathBuf>,
    /// One f32 matrix as ROWSxCOLS, measured as a one-layer workload instead of a model
    /// (the earlier synthetic proxy, for quick runs). Each workload has its own cached
    /// profile.
    #[arg(long, value_name = "ROWSxCOLS", value_parser = workload)]
    pub workload: Option<Workload>,
    /// Tokens per prefill step, m of the prefill GEMM (1 to 4096, default 64).
    #[arg(long, value_name = "N", value_parser = batch_arg)]
    pub batch: Option<usize>,
    /// How hard to look: estimate (nothing measured: the physical performance cores),
    /// measure (the default search), patient (every thread count, more repetitions),
    /// exhaustive (also one thread per physical core, performance cores, one NUMA node,
    /// each pinned). A cached profile serves requests of its rigor or lower.
    #[arg(long, value_name = "LEVEL", value_parser = rigor_arg)]
    pub rigor: Option<Rigor>,
    /// No progress on stderr (warnings and errors are still shown).
    #[arg(long, short)]
    pub quiet: bool,
}

/// The flags that measure llama.cpp instead of our kernels (`sipllm`, `bench`, `emit`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RuntimeArgs {
    /// Measure this runtime instead of our kernels: llama.cpp (every measurement a
    /// `llama-bench -o json` run on the --gguf file; needs --llama-bench). Its profiles have
    /// slots of their own, keyed by the llama.cpp build and the model file. A run is killed
    /// after 10 minutes, or with --budget at the budget's end (after at least 10 s), and the
    /// tune keeps the best so far.
    #[arg(long, value_name = "RUNTIME", value_parser = ["llama.cpp"])]
    pub runtime: Option<String>,
    /// The llama-bench binary of --runtime llama.cpp [env: SIPLLM_LLAMA_BENCH].
    #[arg(long, value_name = "PATH")]
    pub llama_bench: Option<std::path::PathBuf>,
}

/// Which of the flags that the environment can also set a command got itself: the
/// environment's value of one of them is an explicit setting only when the flag was not given.
#[derive(Debug, Clone, Copy, Default)]
pub struct GivenFlags {
    /// --cached-only.
    pub cached_only: bool,
    /// --threads.
    pub threads: bool,
    /// --policy.
    pub policy: bool,
}

/// The variable naming the llama-bench binary when --llama-bench is not given.
pub const LLAMA_BENCH_ENV: &str = "SIPLLM_LLAMA_BENCH";

impl RuntimeArgs {
    /// The llama-bench binary: --llama-bench, else `SIPLLM_LLAMA_BENCH`.
    pub fn binary(&self) -> Option<std::path::PathBuf> {
        self.llama_bench.clone().or_else(|| {
            std::env::var_os(LLAMA_BENCH_ENV)
                .filter(|v| !v.is_empty())
                .map(Into::into)
        })
    }

    /// The llama.cpp to measure, when --runtime llama.cpp asks for one: its binary and the
    /// --gguf model. Without --runtime, `None`; an error names what is missing, or the
    /// explicit settings of `opt` (a thread count, a policy, no tuning) that would leave
    /// llama.cpp unmeasured.
    pub fn llama_cpp(
        &self,
        tune: &TuneArgs,
        opt: &AutoTunerOptions,
    ) -> Result<Option<auto_tuner::LlamaCpp>, String> {
        if self.runtime.is_none() {
            if self.llama_bench.is_some() {
                return Err("--llama-bench needs --runtime llama.cpp".to_string());
            }
            return Ok(None);
        }
        let binary = self.binary().ok_or_else(|| {
            format!("--runtime llama.cpp needs --llama-bench PATH (or {LLAMA_BENCH_ENV})")
        })?;
        let model = tune.gguf.clone().ok_or_else(|| {
            "--runtime llama.cpp needs --gguf FILE, the model it runs".to_string()
        })?;
        let o = &opt.overrides;
        if o.threads.is_some() || o.policy.is_some() || o.disable_autotune {
            return Err(
                "--runtime llama.cpp measures llama.cpp: an explicit setting \
                        (--threads, --policy or --no-autotune where the command has them), \
                        SIPLLM_THREADS and SIPLLM_POLICY cannot be used with it"
                    .to_string(),
            );
        }
        Ok(Some(auto_tuner::LlamaCpp::new(binary, model)))
    }
}

/// A thread cap given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadCap {
    /// At most this many threads.
    At(usize),
    /// No cap beyond the CPUs this process may use.
    Uncapped,
}

impl TuneArgs {
    /// A measuring flag given while the environment settles that nothing is measured
    /// (`SIPLLM_CACHED_ONLY`, `SIPLLM_THREADS`, `SIPLLM_POLICY` in `opt`), so that the flag
    /// would have no effect: the error to show. The flags themselves conflict in clap.
    pub fn env_conflict(&self, given: GivenFlags, opt: &AutoTunerOptions) -> Option<String> {
        if opt.stores.cached_only
            && !given.cached_only
            && (self.recalibrate || self.budget.is_some())
        {
            return Some(format!(
                "{} cannot be used while {} is set: nothing is measured",
                if self.recalibrate {
                    "--recalibrate"
                } else {
                    "--budget"
                },
                auto_tuner::CACHED_ONLY_ENV
            ));
        }
        let var = if !given.threads && opt.overrides.threads.is_some() {
            "SIPLLM_THREADS"
        } else if !given.policy && opt.overrides.policy.is_some() {
            "SIPLLM_POLICY"
        } else {
            return None;
        };
        let flag = if self.recalibrate {
            "--recalibrate"
        } else if self.budget.is_some() {
            "--budget"
        } else if self.thread_cap.is_some() {
            "--thread-cap"
        } else {
            return None;
        };
        Some(format!(
            "{flag} cannot be used while {var} is set: explicit settings are used as they are \
             and nothing is measured (unset {var} to tune)"
        ))
    }

    /// Applies the flags to `opt`; `program` prefixes the lines shown on stderr. A model
    /// source that cannot be read is an error.
    pub fn apply(
        &self,
        program: &'static str,
        mut opt: AutoTunerOptions,
    ) -> Result<AutoTunerOptions, TunerError> {
        opt.stores.force_recalibrate |= self.recalibrate;
        if self.budget.is_some() {
            opt.question.budget = self.budget;
        }
        match self.thread_cap {
            Some(ThreadCap::At(n)) => opt.question.thread_cap = Some(n),
            Some(ThreadCap::Uncapped) => opt.question.thread_cap = None,
            None => {}
        }
        if let Some(w) = &self.workload {
            opt.question.workload = w.clone();
        }
        let weights = self.weights.unwrap_or_default();
        if let Some(path) = &self.model_config {
            opt.question.workload = Workload::from_hf_config(path, weights)?;
        } else if let Some(path) = &self.gguf {
            opt.question.workload = Workload::from_gguf(path)?;
        } else if self.model.is_some() || self.weights.is_some() {
            let model = self.model.as_deref().unwrap_or(DEFAULT_PRESET);
            opt.question.workload = Workload::preset(model, weights)?;
        }
        if let Some(batch) = self.batch {
            opt.question.batch = batch;
        }
        if let Some(rigor) = self.rigor {
            opt.question.rigor = rigor;
        }
        if self.rigor == Some(Rigor::Estimate) && self.recalibrate {
            // Nothing is measured and nothing replaced: refused, as --budget is below.
            return Err(TunerError::InvalidSetting {
                name: "--rigor".to_string(),
                value: "estimate".to_string(),
                expected: "no --recalibrate with --rigor estimate, which measures nothing and \
                           replaces no profile"
                    .to_string(),
            });
        }
        if let (Some(Rigor::Estimate), Some(budget)) = (self.rigor, self.budget) {
            // Nothing is measured, so a budget would bound nothing: refused, as the flags
            // that have no effect are.
            return Err(TunerError::InvalidSetting {
                name: "--budget".to_string(),
                value: format!("{}", budget.as_secs_f64()),
                expected: "no --budget with --rigor estimate, which measures nothing".to_string(),
            });
        }
        opt.reporter = stderr_reporter(program, self.quiet);
        Ok(opt)
    }
}

/// The process environment as a command that always measures reads it (`sipllm bench`,
/// `bench-micro`): without `SIPLLM_THREADS`, `SIPLLM_POLICY` and `SIPLLM_CACHED_ONLY`, which
/// choose what a runtime uses, so that no value of them, invalid or not, changes or stops
/// the measurement.
pub fn measuring_env(name: &str) -> Option<std::ffi::OsString> {
    if matches!(
        name,
        "SIPLLM_THREADS" | "SIPLLM_POLICY" | "SIPLLM_CACHED_ONLY"
    ) {
        None
    } else {
        std::env::var_os(name)
    }
}

/// What clap shows after its own "invalid value 'V' for '--flag <N>': ": what is accepted,
/// not the flag and value a second time.
fn reason(e: impl Into<TunerError>) -> String {
    match e.into() {
        TunerError::InvalidSetting { expected, .. }
        | TunerError::Workload(model_workload::WorkloadError::InvalidSetting {
            expected, ..
        }) => expected,
        other => other.to_string(),
    }
}

/// Refuses a flag taken as the value of the flag before it (`--threads --json`): the flags
/// that take numbers accept values that start with `-` (`-1`, `-.5`), so that a negative
/// number is told apart from a missing value by what it says.
fn not_a_flag(s: &str) -> Result<(), String> {
    let flag =
        s.starts_with("--") || (s.starts_with('-') && s[1..].starts_with(char::is_alphabetic));
    if flag {
        Err(format!("a value is required here, not the flag {s}"))
    } else {
        Ok(())
    }
}

fn budget(s: &str) -> Result<Duration, String> {
    not_a_flag(s)?;
    auto_tuner::parse_budget("--budget", s).map_err(reason)
}

fn workload(s: &str) -> Result<Workload, String> {
    Workload::parse_matrix("--workload", s).map_err(reason)
}

fn batch_arg(s: &str) -> Result<usize, String> {
    auto_tuner::parse_batch("--batch", s).map_err(reason)
}

fn rigor_arg(s: &str) -> Result<Rigor, String> {
    auto_tuner::parse_rigor("--rigor", s).map_err(reason)
}

fn model_arg(s: &str) -> Result<String, String> {
    match model_workload::find_preset(s.trim()) {
        Some(preset) => Ok(preset.name.to_string()),
        None => Err(format!(
            "unknown model preset {s:?}: expected one of {}",
            model_workload::preset_names()
        )),
    }
}

fn weights_arg(s: &str) -> Result<Weights, String> {
    Weights::parse("--weights", s.trim()).map_err(reason)
}

fn thread_cap(s: &str) -> Result<ThreadCap, String> {
    not_a_flag(s)?;
    if s.trim().eq_ignore_ascii_case("none") {
        return Ok(ThreadCap::Uncapped);
    }
    auto_tuner::parse_threads("--thread-cap", s)
        .map(ThreadCap::At)
        .map_err(|e| format!("{}, or \"none\"", reason(e)))
}

/// clap parser for `--threads`.
pub fn threads_arg(s: &str) -> Result<usize, String> {
    not_a_flag(s)?;
    auto_tuner::parse_threads("--threads", s).map_err(reason)
}

/// clap parser for `--policy`.
pub fn policy_arg(s: &str) -> Result<SchedulePolicy, String> {
    auto_tuner::parse_policy("--policy", s).map_err(reason)
}
