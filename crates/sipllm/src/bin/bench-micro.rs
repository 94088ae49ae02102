//! `bench-micro`: the standalone tuner run (`cargo xtask bench-micro`): tunes (or shows the
//! cached profile), prints every configuration measured, the winner and the profile's path.
#![forbid(unsafe_code)]

use auto_tuner::{AutoTunerOptions, run_exhaustive, tune_if_needed};
use clap::Parser;
use sipllm::TuneArgs;
use std::fmt::Write as _;
use std::process::ExitCode;

/// Runs the auto-tuner's micro-benchmark and prints every configuration it measured.
///
/// Without --recalibrate, a valid cached profile ($SIPLLM_HOME/runtime/<hardware_id>.json)
/// is shown as it is. SIPLLM_THREADS, SIPLLM_POLICY and SIPLLM_CACHED_ONLY do not apply
/// (invalid values of them neither): this command measures.
/// Always run it through `cargo xtask bench-micro`, which builds it optimized.
#[derive(Debug, Parser)]
#[command(name = "bench-micro", version)]
struct Cli {
    /// The oracle: the normal search, then every thread count x all seven policies, and the
    /// ratio of the search's pick to the best. It always measures and saves nothing, so
    /// --recalibrate is refused with it.
    #[arg(long, conflicts_with = "recalibrate")]
    exhaustive: bool,
    /// Print one JSON object on stdout and nothing else (progress and warnings go to stderr).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tune: TuneArgs,
}

fn main() -> ExitCode {
    let cli: Cli = match sipllm::parse_args("bench-micro") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let hw = match sipllm::detect_hardware("bench-micro") {
        Ok(hw) => hw,
        Err(code) => return code,
    };
    // The tuner run measures; SIPLLM_THREADS/SIPLLM_POLICY/SIPLLM_CACHED_ONLY choose what a
    // runtime uses, not what bench-micro does: not read, so no value of them stops it.
    let opt = match cli
        .tune
        .apply("bench-micro", AutoTunerOptions::default())
        .and_then(|opt| opt.with_env(sipllm::measuring_env))
    {
        Ok(opt) => opt,
        Err(e) => return sipllm::report_error("bench-micro", &e),
    };

    let mut out = String::new();
    if cli.exhaustive {
        let report = match run_exhaustive(&hw, &opt) {
            Ok(r) => r,
            Err(e) => return sipllm::report_error("bench-micro", &e),
        };
        if cli.json {
            let json = serde_json::json!({
                "tuned": report.tuned,
                "best": report.best,
                "ratio": report.ratio,
                "tune_seconds": report.tune_seconds,
            });
            let _ = writeln!(out, "{json}");
        } else {
            let _ = writeln!(out, "hardware_id: {}", hw.hardware_id());
            for (name, p) in [("tuned", &report.tuned), ("best", &report.best)] {
                let _ = writeln!(
                    out,
                    "{name:>5}: {} threads, {:<13} {:.2} decode tok/s",
                    p.threads,
                    p.schedule_policy.name(),
                    p.tokens_per_sec
                );
            }
            let _ = writeln!(
                out,
                "ratio: {:.3} (tuned / best, re-measured back to back)",
                report.ratio
            );
            let _ = writeln!(out, "search took {:.2} s", report.tune_seconds);
        }
        return sipllm::emit("bench-micro", &out);
    }

    let tuned = match tune_if_needed(&hw, &opt) {
        Ok(t) => t,
        Err(e) => return sipllm::report_error("bench-micro", &e),
    };
    if cli.json {
        let _ = writeln!(out, "{}", sipllm::tuned_json(&tuned));
        return sipllm::emit("bench-micro", &out);
    }
    let p = &tuned.profile;
    let _ = writeln!(
        out,
        "workload: {}, {} layer copies rotated ({} MiB), kernel {}",
        p.request.workload.name,
        p.layer_copies.unwrap_or(0),
        p.working_set_bytes.unwrap_or(0) >> 20,
        p.kernel
    );
    out.push_str(&sipllm::measurement_table(p));
    out.push('\n');
    out.push_str(&sipllm::summary(&tuned));
    if let (Some(seconds), Some(at)) = (p.tuning_seconds, &p.tuned_at) {
        let _ = writeln!(out, "tuned in:    {seconds:.2} s at {at}");
    }
    sipllm::emit("bench-micro", &out)
}
