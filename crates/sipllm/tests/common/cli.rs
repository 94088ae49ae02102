//! The helpers of the tests that run `sipllm` as a user does (`cli.rs`, `emit.rs`,
//! `profiles.rs`): a command with its own home, its output, its JSON.

use super::common::hermetic;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// A small one-matrix workload so that each tune takes about a second.
pub const WORKLOAD: &str = "48x80";

/// `sipllm` with `args`, its home at `home`, from a hermetic environment.
pub fn sipllm(home: &Path, args: &[&str]) -> Command {
    let mut cmd = hermetic(env!("CARGO_BIN_EXE_sipllm"));
    cmd.args(args).env("SIPLLM_HOME", home);
    cmd
}

/// Runs `body` under the workspace's test watchdog for two minutes: a regression that hangs
/// (a lock never released) fails instead of blocking the run forever.
pub fn with_watchdog(what: &str, body: impl FnOnce() + Send + 'static) {
    watchdog::within(what, std::time::Duration::from_secs(120), body);
}

/// [`sipllm`] run to its end.
pub fn run(home: &Path, args: &[&str]) -> Output {
    sipllm(home, args).output().expect("sipllm runs")
}

/// The one JSON line of a successful run.
pub fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(stdout.trim().lines().count(), 1, "one JSON line: {stdout}");
    serde_json::from_str(&stdout).expect("stdout is JSON")
}

/// A run's standard error, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that the command of `out` failed and said `why` on stderr.
pub fn assert_refused(out: &Output, why: &str) {
    assert!(!out.status.success(), "not refused: {}", stderr(out));
    assert!(stderr(out).contains(why), "{}", stderr(out));
}

/// Asserts that `out` refused to write `dest` because its directory does not exist, and
/// created neither.
pub fn assert_refused_missing_dir(out: &Output, dest: &Path) {
    let missing = dest.parent().expect("a destination in a directory");
    assert_refused(
        out,
        &format!(
            "cannot write {}: the directory {} does not exist",
            dest.display(),
            missing.display()
        ),
    );
    assert!(!missing.exists(), "{} was created", missing.display());
}

/// Whether `path` is (still) a FIFO, not a file written in its place.
pub fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}
