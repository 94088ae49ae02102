//! What every integration test of `sipllm` starts a command from.

use std::ffi::OsStr;
use std::process::Command;

/// `program` with no `SIPLLM_*` or `FAKE_LLAMA_BENCH_*` variable from the developer's
/// environment: every spawned command starts here, and a test sets what it needs on top.
pub fn hermetic(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if text.starts_with("SIPLLM_") || text.starts_with("FAKE_LLAMA_BENCH") {
            cmd.env_remove(name);
        }
    }
    // No system store unless a test names one (the default is /etc/sipllm/runtime).
    cmd.env("SIPLLM_SYSTEM_PROFILES", "");
    // A quiet machine, whatever else runs: no profile is marked noisy unless a test says so.
    cmd.env("SIPLLM_LOAD_AVERAGE", "0");
    cmd
}
