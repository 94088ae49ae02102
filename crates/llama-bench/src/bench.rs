//! The runner: a `llama-bench` binary, its timeout and output limit; one [`Run`] in, one
//! checked [`BenchResult`] out.

use crate::error::Error;
use crate::identity::BuildInfo;
use crate::output::{BenchResult, check_against, parse_json};
use crate::process::{Captured, run_bounded};
use crate::run::Run;
use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The timeout of [`LlamaBench::new`]: ten minutes, enough for a large model's prefill at one
/// thread with llama-bench's default repetitions.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The longest `--version` and `--help` may take, whatever the runs' timeout: they load no
/// model, so a binary that has not answered by then is not a working llama-bench (or is
/// stuck), and a tune should say so rather than wait for a run's timeout.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// The output limit of [`LlamaBench::new`], per stream: 1 MiB, a hundred times what one test
/// prints.
pub const DEFAULT_OUTPUT_LIMIT: usize = 1 << 20;

/// The signals of a crash, by which the process died or by whose exit status (128 + the
/// signal) a shell reports its child's: a fault, an abort, and `SIGKILL`, the kernel's
/// out-of-memory killer's. Any other signal (`SIGTERM`, `SIGINT`, `SIGHUP`, `SIGPIPE`) came
/// from outside the run and says nothing of the configuration: the run failed.
const CRASH_SIGNALS: [i32; 6] = [
    nix::libc::SIGILL,
    nix::libc::SIGABRT,
    nix::libc::SIGBUS,
    nix::libc::SIGFPE,
    nix::libc::SIGSEGV,
    nix::libc::SIGKILL,
];

/// A `llama-bench` binary and how to run it: each run in a process group of its own, killed
/// with the group past the timeout or past the output limit.
///
/// ```no_run
/// use llama_bench::{LlamaBench, Run};
/// use std::time::Duration;
///
/// let bench = LlamaBench::new("llama-bench").timeout(Duration::from_secs(120));
/// let result = bench.bench("model.gguf".as_ref(), &Run::decode(2, 16))?;
/// assert_eq!(result.n_threads, 2);
/// let tokens_per_second = result.avg_ts;
/// # let _ = tokens_per_second;
/// # Ok::<(), llama_bench::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct LlamaBench {
    binary: PathBuf,
    timeout: Duration,
    output_limit: usize,
    envs: Vec<(OsString, OsString)>,
}

impl LlamaBench {
    /// The binary at `binary` (a bare name is looked up in `PATH`), with
    /// [`DEFAULT_TIMEOUT`] and [`DEFAULT_OUTPUT_LIMIT`].
    pub fn new(binary: impl Into<PathBuf>) -> LlamaBench {
        LlamaBench {
            binary: binary.into(),
            timeout: DEFAULT_TIMEOUT,
            output_limit: DEFAULT_OUTPUT_LIMIT,
            envs: Vec::new(),
        }
    }

    /// The longest a run may take before it is killed (`--version` and `--help`: at most
    /// [`PROBE_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> LlamaBench {
        self.timeout = timeout;
        self
    }

    /// The longest a run may take ([`LlamaBench::timeout`]).
    pub fn run_timeout(&self) -> Duration {
        self.timeout
    }

    /// The longest `--version` and `--help` may take: the timeout, at most
    /// [`PROBE_TIMEOUT`].
    fn probe_timeout(&self) -> Duration {
        self.timeout.min(PROBE_TIMEOUT)
    }

    /// The most bytes a run may write to stdout, and to stderr; more is an error.
    pub fn output_limit(mut self, bytes: usize) -> LlamaBench {
        self.output_limit = bytes;
        self
    }

    /// An environment variable set for every run (the rest is inherited).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> LlamaBench {
        self.envs
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// The binary.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// The command line of `run` on `model`, as the errors show it.
    pub fn command_line(&self, model: &Path, run: &Run) -> Result<String, Error> {
        Ok(shown_command(&self.binary, &run.args(model)?))
    }

    /// Runs `run` on `model` and returns its one test, checked: the output is JSON with every
    /// field in its bounds, and the test is the one asked for (threads, tokens, mask, poll,
    /// repack, one sample per repetition).
    ///
    /// A crash of llama-bench is [`Error::Crashed`]: for a tuner, a measured failure of this
    /// configuration.
    pub fn bench(&self, model: &Path, run: &Run) -> Result<BenchResult, Error> {
        self.bench_within(model, run, self.timeout)
    }

    /// [`LlamaBench::bench`] with a timeout of its own for this run: `limit`, at most the
    /// timeout (a tuner's budget left). Past it the run is killed with its process group and
    /// the error is [`Error::Timeout`] with the timeout it ran past.
    pub fn bench_within(
        &self,
        model: &Path,
        run: &Run,
        limit: Duration,
    ) -> Result<BenchResult, Error> {
        let args = run.args(model)?;
        let shown = shown_command(&self.binary, &args);
        let captured = self.execute(&args, &shown, limit.min(self.timeout))?;
        let tests = parse_json(&shown, &captured.stdout)?;
        let result = check_against(&shown, run, tests)?;
        // The model's tensors lie in its file: a larger size is no measurement of it (and
        // would make the tuner's bandwidth figure anything at all).
        if let Ok(file) = std::fs::metadata(model)
            && result.model_size > file.len()
        {
            return Err(Error::Mismatch {
                command: shown,
                problem: format!(
                    "the test reports a model of {} bytes, more than the {} of its file",
                    result.model_size,
                    file.len()
                ),
            });
        }
        Ok(result)
    }

    /// The binary's build, from `llama-bench --version`. Builds without `--version` fail
    /// with [`Error::Failed`]; their build commit is in every result
    /// ([`BuildInfo::from`] a [`BenchResult`]). A binary that does not answer within
    /// [`PROBE_TIMEOUT`] (or the timeout, if shorter) is killed: [`Error::Timeout`].
    pub fn build_info(&self) -> Result<BuildInfo, Error> {
        let args = [OsString::from("--version")];
        let shown = shown_command(&self.binary, &args);
        let captured = self.execute(&args, &shown, self.probe_timeout())?;
        // llama.cpp prints its build information on stderr.
        let mut text = String::from_utf8_lossy(&captured.stderr).into_owned();
        text.push('\n');
        text.push_str(&String::from_utf8_lossy(&captured.stdout));
        BuildInfo::parse_version(&text).ok_or_else(|| Error::NoVersion {
            command: shown,
            output: crate::error::shown(text.trim()),
        })
    }

    /// The thread count llama-bench uses without `-t` (llama.cpp's `cpu_get_num_math()`: the
    /// physical cores, without a hybrid Intel CPU's efficiency cores), read from the default
    /// that `llama-bench --help` shows for `-t, --threads`. Bounded as
    /// [`LlamaBench::build_info`] is.
    pub fn default_threads(&self) -> Result<u32, Error> {
        let args = [OsString::from("--help")];
        let shown = shown_command(&self.binary, &args);
        let captured = self.execute(&args, &shown, self.probe_timeout())?;
        let text = String::from_utf8_lossy(&captured.stdout);
        parse_default_threads(&text).ok_or_else(|| Error::Mismatch {
            command: shown,
            problem: "its help shows no default for -t, --threads".to_string(),
        })
    }

    /// Runs the binary with `args`, killed past `timeout`; an exit that is not success is an
    /// error.
    fn execute(
        &self,
        args: &[OsString],
        shown: &str,
        timeout: Duration,
    ) -> Result<Captured, Error> {
        let mut command = Command::new(&self.binary);
        command.args(args);
        for (key, value) in &self.envs {
            command.env(key, value);
        }
        let captured = run_bounded(&mut command, shown, timeout, self.output_limit)?;
        let stderr = || crate::error::shown(String::from_utf8_lossy(&captured.stderr).trim());
        if let Some(signal) = captured.status.signal() {
            return Err(if CRASH_SIGNALS.contains(&signal) {
                Error::Crashed {
                    command: shown.to_string(),
                    signal,
                    stderr: stderr(),
                }
            } else {
                Error::Failed {
                    command: shown.to_string(),
                    code: 128 + signal,
                    stderr: stderr(),
                }
            });
        }
        match captured.status.code() {
            Some(0) => Ok(captured),
            Some(code) if CRASH_SIGNALS.iter().any(|&s| code == 128 + s) => Err(Error::Crashed {
                command: shown.to_string(),
                signal: code - 128,
                stderr: stderr(),
            }),
            code => Err(Error::Failed {
                command: shown.to_string(),
                code: code.unwrap_or(-1),
                stderr: stderr(),
            }),
        }
    }
}

/// The default of `-t, --threads` in llama-bench's help text: the number in
/// `(default: N)` on the line of `--threads`, 1 to [`crate::run::MAX_THREADS`].
pub(crate) fn parse_default_threads(help: &str) -> Option<u32> {
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("-t, --threads"))?;
    let (_, rest) = line.split_once("(default:")?;
    let (number, _) = rest.split_once(')')?;
    number
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=crate::run::MAX_THREADS).contains(n))
}

/// A command line as a shell would read it: plain words as they are, others in single
/// quotes, control characters escaped.
pub(crate) fn shown_command(binary: &Path, args: &[OsString]) -> String {
    std::iter::once(binary.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(|word| quoted(&word.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn quoted(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_string();
    }
    let mut out = String::from("'");
    for c in word.chars() {
        match c {
            '\'' => out.push_str("'\\''"),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests;
