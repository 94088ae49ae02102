//! The tuner's error type.

use std::path::PathBuf;

/// Everything that can stop [`crate::tune_if_needed`] from handing back a profile.
///
/// Problems with the cache are not errors: a bad cached profile is ignored with a warning and
/// the machine is re-tuned; an unwritable home only means the profile is not saved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TunerError {
    /// An explicit setting (environment variable or flag) has a bad value.
    #[error("invalid {name}={value:?}: {expected}")]
    InvalidSetting {
        /// The variable or flag, e.g. `SIPLLM_THREADS` or `--threads`.
        name: String,
        /// The value as given.
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// The tuner itself was built without optimizations, so its timings would be wrong.
    #[error(
        "refusing to measure an unoptimized build (opt-level {0}); build with --release or run `cargo xtask bench-micro`"
    )]
    UnoptimizedBuild(&'static str),
    /// The benchmark workload is unusable.
    #[error("invalid workload {n_out}x{n_in}: {reason}")]
    InvalidWorkload {
        /// Rows of the weight matrix.
        n_out: usize,
        /// Columns of the weight matrix.
        n_in: usize,
        /// Why it is unusable.
        reason: String,
    },
    /// The kernel rejected the benchmark (a bug or a forced kernel the CPU lacks).
    #[error("kernel error: {0}")]
    Kernel(String),
    /// The thread pool could not be built.
    #[error("thread pool error: {0}")]
    Pool(String),
    /// No cache location is known (neither `SIPLLM_HOME` nor `HOME` is set).
    #[error("cannot locate the profile cache: neither SIPLLM_HOME nor HOME is set")]
    NoHome,
    /// Reading the profile cache failed in a way that is not a bad profile.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file or directory at fault.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}
