//! The crate's one error type, and the escaping of the text it quotes.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can keep a `llama-bench` run from giving a measurement.
///
/// Each variant that comes from a run names the command line (`command`), so the message
/// alone says which configuration failed. A tuner tells a failed candidate from a broken
/// setup by the variant: [`Error::Crashed`] is a configuration that llama.cpp cannot run
/// (record it, never pick it); the others say the binary, the model or the output is not what
/// a measurement needs.
///
/// `Debug` shows the message too, so that a `main` returning `Result<(), Error>` prints what
/// its user needs to read.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The run asks for something `llama-bench` cannot do (zero threads, no tokens, a poll
    /// level above 100, …); nothing was started.
    #[error("invalid llama-bench run: {reason}")]
    InvalidRun {
        /// What is wrong, naming the field and its value.
        reason: String,
    },
    /// The binary could not be started (missing, not executable).
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why the spawn failed.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for the process or reading its output failed.
    #[error("`{command}`: {what}: {source}")]
    Io {
        /// The command line.
        command: String,
        /// What was being done.
        what: &'static str,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The process ran past its timeout; it was killed with its process group.
    #[error("`{command}` ran past its timeout of {} s and was killed", timeout.as_secs_f64())]
    Timeout {
        /// The command line.
        command: String,
        /// The timeout it ran past.
        timeout: Duration,
    },
    /// The process wrote more than the limit to one of its streams; it was killed with its
    /// process group.
    #[error("`{command}` wrote more than {limit} bytes to {stream} and was killed")]
    OutputTooLarge {
        /// The command line.
        command: String,
        /// `stdout` or `stderr`.
        stream: &'static str,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The process died of a crash's signal (`SIGILL`, `SIGABRT`, `SIGBUS`, `SIGFPE`,
    /// `SIGSEGV`, or `SIGKILL`, the kernel's out-of-memory killer's), or exited with a
    /// shell's code for one (128 + the signal, as a wrapper script reports its child's
    /// crash). For a tuner this is a failed candidate: the configuration does not run on this
    /// machine. Another signal (`SIGTERM`, `SIGINT`) is [`Error::Failed`], with 128 + the
    /// signal as its status.
    #[error("`{command}` crashed with signal {signal} ({}){}", signal_name(*signal), tail(stderr))]
    Crashed {
        /// The command line.
        command: String,
        /// The signal's number (11 is `SIGSEGV`).
        signal: i32,
        /// The end of its stderr, escaped.
        stderr: String,
    },
    /// The process exited with a non-zero status (a model it cannot load, a flag it does not
    /// know).
    #[error("`{command}` failed with exit status {code}{}", tail(stderr))]
    Failed {
        /// The command line.
        command: String,
        /// The exit status.
        code: i32,
        /// The end of its stderr, escaped.
        stderr: String,
    },
    /// Its stdout is not a JSON array of objects (`-o json`'s form); a NaN or infinite rate,
    /// which llama-bench prints as `nan` or `inf`, ends up here too.
    #[error("`{command}` printed no JSON array of tests on stdout: {reason}")]
    NotJson {
        /// The command line.
        command: String,
        /// What the parser found.
        reason: String,
    },
    /// A test of the output lacks a field, or a field's value is of the wrong type or out of
    /// its bounds (a rate that is negative, zero or absurd).
    #[error("`{command}`: test {index}: {problem}")]
    BadField {
        /// The command line.
        command: String,
        /// The test's index in the output.
        index: usize,
        /// The field at fault.
        field: &'static str,
        /// What is wrong with it, quoting the value.
        problem: String,
    },
    /// The output does not answer the run: another number of tests, or a test whose
    /// parameters (threads, tokens, mask, …) are not the ones asked for.
    #[error("`{command}`: {problem}")]
    Mismatch {
        /// The command line.
        command: String,
        /// What differs, quoting both values.
        problem: String,
    },
    /// The version output names no build commit.
    #[error("`{command}` printed no build commit: {}", tail(output))]
    NoVersion {
        /// The command line.
        command: String,
        /// What it printed, escaped and cut.
        output: String,
    },
    /// The model file cannot be read.
    #[error("cannot read model file {}: {source}", shown(&path.to_string_lossy()))]
    Model {
        /// The file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The model file is not a regular file starting with the GGUF magic.
    #[error("{} is not a GGUF model file: {reason}", shown(&path.to_string_lossy()))]
    NotGguf {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        reason: String,
    },
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// The most characters of a quoted text (a stderr tail, a value) that a message shows.
pub(crate) const MAX_SHOWN_CHARS: usize = 400;

/// `text` fit to be shown: control characters escaped, and cut to its last
/// [`MAX_SHOWN_CHARS`] characters (the end of a log says why it stopped) with the cut said.
pub(crate) fn shown(text: &str) -> String {
    let escaped: String = text
        .chars()
        .flat_map(|c| {
            let plain = !c.is_control() || c == '\n';
            let out: Vec<char> = if plain {
                vec![c]
            } else {
                c.escape_default().collect()
            };
            out
        })
        .collect();
    let n = escaped.chars().count();
    if n <= MAX_SHOWN_CHARS {
        return escaped;
    }
    let tail: String = escaped.chars().skip(n - MAX_SHOWN_CHARS).collect();
    format!("[{} characters cut] …{tail}", n - MAX_SHOWN_CHARS)
}

/// A stderr tail as the end of a message: nothing when empty.
fn tail(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!("; its output ends: {text}")
    }
}

/// The name of a signal, for messages.
fn signal_name(signal: i32) -> &'static str {
    nix::sys::signal::Signal::try_from(signal).map_or("unknown signal", |s| s.as_str())
}
