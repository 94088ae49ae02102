//! The helpers of the trials on their own harness (`libtest-mimic`): a run, its JSON, a check,
//! and what `bench --runtime llama.cpp --json` reports of a phase: its tuned configuration's
//! figures and which runs crashed.
#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use libtest_mimic::Failed;
use serde_json::Value;
use std::process::{Command, Output};

/// The output of `cmd`; a failure when it cannot start.
pub fn run(cmd: &mut Command) -> Result<Output, Failed> {
    cmd.output()
        .map_err(|e| Failed::from(format!("cannot run sipllm: {e}")))
}

/// The JSON on stdout of a run that succeeded.
pub fn json_of(out: &Output) -> Result<Value, Failed> {
    if !out.status.success() {
        return Err(format!(
            "failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| Failed::from(format!("{e}: {}", String::from_utf8_lossy(&out.stdout))))
}

/// Fails with `message` unless `condition` holds.
pub fn check(condition: bool, message: impl FnOnce() -> String) -> Result<(), Failed> {
    if condition {
        Ok(())
    } else {
        Err(message().into())
    }
}

/// Whether `bench --runtime llama.cpp --json`'s `crashed` list names `rule`'s run in `phase`
/// (`"{phase} {rule} (-t N)"`).
pub fn reported_crashed(doc: &Value, phase: &str, rule: &str) -> bool {
    let prefix = format!("{phase} {rule} (-t ");
    doc["crashed"].as_array().is_some_and(|all| {
        all.iter()
            .any(|c| c.as_str().is_some_and(|c| c.starts_with(&prefix)))
    })
}

/// Fails unless `bench --runtime llama.cpp --json`'s `phase` (its `phases` entry `p`) gives
/// the tuned configuration's threads, policy, cores and tokens per second (median, min, max).
pub fn check_tuned_figures(phase: &str, p: &Value) -> Result<(), Failed> {
    for key in [
        "threads",
        "policy",
        "cores",
        "tokens_per_sec",
        "tokens_per_sec_min",
        "tokens_per_sec_max",
    ] {
        check(!p["tuned"][key].is_null(), || {
            format!("{phase} tuned {key}: {p}")
        })?;
    }
    Ok(())
}
