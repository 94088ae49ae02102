//! The tuner's error type.

/// Everything that can stop [`crate::tune_if_needed`] from handing back a profile.
///
/// Problems with the cache are not errors: a bad cached profile is ignored with a warning and
/// the machine is re-tuned; an unwritable home only means the profile is not saved.
///
/// `Debug` shows the message too: a program whose `main` returns `Result<(), E>` prints its
/// error with `Debug`, and the message (the `Cargo.toml` lines of an unoptimized build, the
/// setting at fault) is what its user needs to read.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum TunerError {
    /// An explicit setting (environment variable or flag) has a bad value.
    #[error(
        "invalid {name}=\"{}\": {}",
        crate::shown(.value),
        crate::shown_within(.expected, LONG)
    )]
    InvalidSetting {
        /// The variable or flag, e.g. `SIPLLM_THREADS` or `--threads`.
        name: String,
        /// The value as given.
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// The measuring crates (the tuner, the kernels, the pool), or some of them, were built
    /// without optimizations (opt-level 0), so their timings would be wrong. The message
    /// names them and shows the `Cargo.toml` lines that fix a dependent's debug builds
    /// ([`crate::OPTIMIZE_DEPENDENCIES_TOML`]).
    #[error(
        "refusing to measure with an unoptimized build of {crates} (opt-level 0): its timings would be cached as this machine's. Build with --release, or add these lines to your workspace's Cargo.toml so that debug builds optimize the measuring crates:\n{toml}",
        crates = .0.join(", "),
        toml = crate::optimize_toml(.0)
    )]
    UnoptimizedBuild(Vec<&'static str>),
    /// The benchmark workload is unusable.
    #[error(
        "invalid workload {}: {}",
        crate::shown(.name),
        crate::shown_within(.reason, LONG)
    )]
    InvalidWorkload {
        /// The workload's name.
        name: String,
        /// Why it is unusable (naming the projection at fault, if one is).
        reason: String,
    },
    /// The kernel rejected the benchmark (a bug or a forced kernel the CPU lacks).
    #[error("kernel error: {0}")]
    Kernel(String),
    /// The thread pool could not be built, pinned as the profile says, or run (a worker
    /// died).
    #[error("thread pool error: {0}")]
    Pool(String),
    /// A profile bundle cannot be imported; nothing was installed.
    #[error(
        "cannot import the profiles: {}; nothing was imported",
        crate::shown_within(.0, LONG)
    )]
    Import(String),
    /// A profile store cannot be read or changed.
    #[error(
        "profile store {}: {}",
        crate::shown_within(.path, crate::shown::MAX_SHOWN_PATH_CHARS),
        crate::shown_within(.message, LONG)
    )]
    Store {
        /// The store's directory or file at fault.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A `.gguf` file's header cannot be read or lacks what is needed.
    #[error(transparent)]
    Gguf(#[from] crate::GgufError),
    /// A model preset that does not exist; the message lists those that do.
    #[error(
        "unknown model preset {0:?}; the presets are {presets}",
        presets = crate::workload::presets::names()
    )]
    UnknownPreset(String),
    /// A Hugging Face `config.json` cannot be read or is not a JSON object.
    #[error(
        "model config {}: {}",
        crate::shown_path(.path),
        crate::shown_within(.message, LONG)
    )]
    ModelConfig {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A field of a Hugging Face `config.json` is missing or holds an unusable value.
    #[error(
        "model config {}: field `{}` {}",
        crate::shown_path(.path),
        crate::shown(.field),
        crate::shown_within(.reason, LONG)
    )]
    ModelConfigField {
        /// The file.
        path: std::path::PathBuf,
        /// The field, e.g. `num_key_value_heads` (or `text_config.hidden_size`).
        field: String,
        /// What is wrong, e.g. `is missing`.
        reason: String,
    },
    /// No cache location is known (neither `SIPLLM_HOME` nor `HOME` is set).
    #[error("cannot locate the profile cache: neither SIPLLM_HOME nor HOME is set")]
    NoHome,
}

/// The most characters of a message of ours that quotes values ([`crate::shown_within`]):
/// its own text is whole, a value it quotes was already cut.
const LONG: usize = 2000;

impl std::fmt::Debug for TunerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}
