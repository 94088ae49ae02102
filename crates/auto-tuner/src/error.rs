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
        model_workload::shown(.value),
        model_workload::shown_within(.expected, LONG)
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
    /// ([`OPTIMIZE_DEPENDENCIES_TOML`]).
    #[error(
        "refusing to measure with an unoptimized build of {crates} (opt-level 0): its timings would be cached as this machine's. Build with --release, or add these lines to your workspace's Cargo.toml so that debug builds optimize the measuring crates:\n{toml}",
        crates = .0.join(", "),
        toml = optimize_toml(.0)
    )]
    UnoptimizedBuild(Vec<&'static str>),
    /// The benchmark workload does not fit in the memory the benchmark may use (its shape
    /// and bounds are checked by [`model_workload::Workload::validate`], a
    /// [`TunerError::Workload`]).
    #[error(
        "invalid workload {}: {}",
        model_workload::shown(.name),
        model_workload::shown_within(.reason, LONG)
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
        model_workload::shown_within(.0, LONG)
    )]
    Import(String),
    /// A profile of the bundle was measured on a machine that differs from this one (the
    /// `HardwareInfo` it stores); nothing was installed. An import with `force` takes such
    /// profiles as this machine's, when the user knows the machines to be the same.
    #[error(
        "cannot import the profiles: entry {entry}: the machine has changed ({}); nothing was imported",
        crate::validate::shown_differences(.differences)
    )]
    ImportFromChangedMachine {
        /// The entry's position in the bundle, from 1.
        entry: usize,
        /// What differs, one field each (as a cached profile's warning names them).
        differences: Vec<String>,
    },
    /// A file a command was asked to write (an export, a rendered profile) cannot be written;
    /// `path` is the file as the user named it.
    #[error(
        "cannot write {}: {}",
        model_workload::shown_within(.path, model_workload::MAX_SHOWN_PATH_CHARS),
        model_workload::shown_within(.message, LONG)
    )]
    Write {
        /// The file asked for.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// [`crate::clear_profiles`] could not remove every profile it was to remove: it went on
    /// past each failure, and names what it removed and what it could not.
    #[error(
        "cannot remove {}; removed {}",
        list_failed(.failed),
        list_paths(.removed)
    )]
    ClearIncomplete {
        /// The profiles removed.
        removed: Vec<std::path::PathBuf>,
        /// The profiles left, each with why it could not be removed.
        failed: Vec<(std::path::PathBuf, String)>,
    },
    /// A profile store cannot be read or changed.
    #[error(
        "profile store {}: {}",
        // Shown by its maker, so not cut again (a second cut named the length of the
        // first's text, not the path's).
        .path,
        model_workload::shown_within(.message, LONG)
    )]
    Store {
        /// The store's directory or file at fault, as `model_workload::shown_path` shows it.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A workload cannot be built or is unusable (a preset, a setting, a `config.json`, a
    /// `.gguf` header, or a workload that breaks its bounds).
    #[error(transparent)]
    Workload(#[from] model_workload::WorkloadError),
    /// A `llama-bench` run gave no measurement: output that is not what a measurement needs,
    /// a timeout, a flood, a failed start or exit, a model file that cannot be read; the
    /// message names the command. Nothing is cached.
    #[error(transparent)]
    LlamaBench(#[from] llama_bench::Error),
    /// A tune of llama.cpp found nothing to pick (every candidate of a phase crashed).
    #[error("llama.cpp: {}", model_workload::shown_within(.0, LONG))]
    Runtime(String),
    /// No cache location is known (neither `SIPLLM_HOME` nor `HOME` is set).
    #[error("cannot locate the profile cache: neither SIPLLM_HOME nor HOME is set")]
    NoHome,
    /// The options ask for no cache ([`crate::ProfileHome::None`]) and the work needs one.
    #[error("no profile cache: the options ask for none (home: ProfileHome::None)")]
    NoCache,
}

/// The most characters of a message of ours that quotes values ([`model_workload::shown_within`]):
/// its own text is whole, a value it quotes was already cut.
const LONG: usize = 2000;

impl std::fmt::Debug for TunerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// `paths` as a message lists them: a count, then each (cut at a few).
fn list_paths(paths: &[std::path::PathBuf]) -> String {
    let shown: Vec<String> = paths
        .iter()
        .map(|p| model_workload::shown_path(p))
        .collect();
    listed(paths.len(), &shown)
}

/// `failed` as a message lists them: a count, then each path with its reason.
fn list_failed(failed: &[(std::path::PathBuf, String)]) -> String {
    let shown: Vec<String> = failed
        .iter()
        .map(|(p, why)| {
            format!(
                "{} ({})",
                model_workload::shown_path(p),
                model_workload::shown_message(why)
            )
        })
        .collect();
    listed(failed.len(), &shown)
}

/// "N profile(s): a, b, c" with at most [`LISTED`] shown and the rest counted.
fn listed(n: usize, shown: &[String]) -> String {
    let mut text = format!("{n} profile{}", if n == 1 { "" } else { "s" });
    if n > 0 {
        text.push_str(": ");
        text.push_str(&shown[..n.min(LISTED)].join(", "));
        if n > LISTED {
            text.push_str(&format!(" and {} more", n - LISTED));
        }
    }
    text
}

/// The most paths a message lists one by one.
const LISTED: usize = 8;

/// The `Cargo.toml` lines that build the measuring crates optimized in a dependent's debug
/// builds.
pub const OPTIMIZE_DEPENDENCIES_TOML: &str = "[profile.dev.package.auto-tuner]
opt-level = 3
[profile.dev.package.matmul-kernel]
opt-level = 3
[profile.dev.package.threadpool]
opt-level = 3";

/// The `Cargo.toml` lines that optimize `crates` in a dependent's debug builds.
pub(crate) fn optimize_toml(crates: &[&str]) -> String {
    crates
        .iter()
        .map(|name| format!("[profile.dev.package.{name}]\nopt-level = 3"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_store_path_is_cut_once_with_its_own_length() {
        // A long path, and one that escaping lengthens in the text shown: each cut once.
        let cases = [
            (format!("/{}", "d/".repeat(2000)), "(4001 bytes)"),
            ("\n".repeat(1000), "(1000 bytes)"),
        ];
        for (path, length) in cases {
            let e = TunerError::Store {
                path: model_workload::shown_path(std::path::Path::new(&path)),
                message: "x".into(),
            };
            let text = e.to_string();
            assert!(text.contains(length), "{text}");
            assert_eq!(text.matches(" bytes)").count(), 1, "{text}");
        }
    }
}
