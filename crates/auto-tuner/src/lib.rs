//! The auto-tuner: measure the machine once on the model's workload, remember the answer,
//! hand it to the runtime.
//!
//! The crate reads top-down: [`tune_if_needed`] (module `resolve`) tries the overrides, the
//! user's store, the system store, and only then measures (module `tune`: the `bench`
//! engine under the `search`, both speaking [`Measure`] of [`Setting`]s), under the cache's
//! lock. The options ([`AutoTunerOptions`]) come in parts by what they are: the
//! [`Question`] asked (workload, batch, rigor, budget, thread cap, kernel or llama.cpp),
//! [`Measuring`] (repetitions, their length, the weights' bound), the [`Stores`] (where
//! profiles live, read or replace), the [`Overrides`] and the [`Reporter`]; what the question
//! derives on a machine (hardware id, request, kernel, [`Slot`]) is computed once per
//! resolution, and each step takes only the parts it uses.
//!
//! [`tune_if_needed`] resolves the [`RuntimeProfile`] (thread count, schedule policy and
//! pinning, for decode and for prefill) for a machine described by a
//! [`device_profile::HardwareInfo`] and a model [`Workload`] (default: Llama-3-8B in
//! `q4_K_M`):
//!
//! 1. [`Overrides::disable_autotune`]: the defaults (4 threads clamped to the
//!    `effective_cpus`, `static`).
//! 2. explicit [`Overrides`] `threads`/`policy` (`--threads`, `SIPLLM_THREADS`, …): they win; a knob not
//!    given comes from a valid cached profile, else from the defaults. Nothing is measured.
//! 3. a valid cached profile of the request, at its rigor or a higher one, in
//!    the user's cache ([`Stores::home`]: by default `$SIPLLM_HOME/runtime/`,
//!    else `$HOME/.sipllm/runtime/`; [`ProfileHome::None`] for none; one file per request,
//!    see [`ProfileCache::path_for`]), else
//!    in the read-only system store (`SIPLLM_SYSTEM_PROFILES`): used as is, unless it was
//!    measured on a busy machine (`noisy`), which is re-tuned once.
//! 4. [`Stores::cached_only`] (`SIPLLM_CACHED_ONLY=1`): the defaults; nothing is measured.
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
//! pool.parallel_for(4096, tuned.profile.schedule_policy(), |rows| { let _ = rows; })
//!     .map_err(|e| auto_tuner::TunerError::Pool(e.to_string()))?;
//! let prefill = tuned.profile.build_prefill_pool()?;
//! assert_eq!(prefill.n_threads(), tuned.profile.prefill.threads);
//! # Ok::<(), auto_tuner::TunerError>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

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
mod job;
mod layer;
mod measure;
mod optimized;
mod options;
mod phase;
mod profile;
mod progress;
mod ranges;
mod resolve;
mod rigor;
mod runtime_key;
mod runtime_llamacpp;
mod runtime_record;
mod search;
mod store;
mod tune;
mod tuned;
mod validate;
mod warnings;

pub use bench::MAX_WEIGHT_MATRICES;
pub use cache::{CacheLock, Lookup, MAX_LOCK_WAIT, ProfileCache, Slot};
pub use candidates::{
    CoreSet, PinnedSet, estimate_threads, pinning_candidates, unmeasured_cpu_limit,
};
pub use environment::{
    Environment, LOAD_AVERAGE_ENV, LoadAverage, NOISY_LOAD_PER_CPU, read_load_average,
};
pub use error::{OPTIMIZE_DEPENDENCIES_TOML, TunerError};
pub use exhaustive::{ExhaustiveReport, Pick, run_exhaustive};
/// The `llama-bench` crate the llama.cpp runtime is measured with.
pub use llama_bench;
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
    DEFAULT_SYSTEM_PROFILES, DEFAULT_THREAD_CAP, HOME_ENV, MAX_BATCH, MAX_BUDGET_SECONDS,
    MAX_REPETITIONS, MAX_THREADS_OVERRIDE, MAX_WORKLOAD_SIDE, MIN_BUDGET_SECONDS, MIN_REPETITIONS,
    Measuring, Overrides, ProfileHome, Question, SYSTEM_PROFILES_ENV, Stores, default_home,
    default_workload, matrix_workload, parse_batch, parse_budget, parse_flag,
    parse_matrix_workload, parse_policy, parse_threads,
};
pub use phase::{Phase, Step};
pub use profile::{
    Measurement, PhaseProfile, RuntimeProfile, SCHEMA_VERSION, TuningRequest, kernel_signature,
};
pub use progress::{Report, ReportFn, Reporter};
pub use rigor::{Rigor, parse_rigor};
pub use runtime_key::{LLAMA_CPP, LlamaCpp, LlamaCppKey};
pub use runtime_llamacpp::{
    CachedLlamaCpp, DECODE_TOKENS, LlamaSetting, MIN_RUN_TIMEOUT, find_llama_cpp_profile,
    measure_llama_cpp,
};
pub use runtime_record::{Failure, LlamaKnobs, RuntimeRecord};
pub use store::{
    BUNDLE_FORMAT_VERSION, Imported, MAX_BUNDLE_BYTES, ProfileBundle, Store, StoredProfile,
    clear_profiles, export_profiles, import_profiles, list_profiles,
};

pub use measure::{Measure, Setting, Stats, median};
pub use resolve::{DEFAULT_THREADS, default_profile, tune_if_needed};
pub use tune::{estimate_profile, measure_settings, run_micro_benchmarks};
pub use tuned::{Source, Tuned};
pub use validate::{
    MAX_GBPS, MAX_LOAD_AVERAGE, MAX_PROFILE_BYTES, MAX_TOKENS_PER_SEC, MAX_TUNING_SECONDS,
    Rejection,
};
