//! `sipllm`: resolves this machine's runtime profile (tuning it once if needed) and prints it.

use auto_tuner::{AutoTunerOptions, tune_if_needed};
use clap::Parser;
use sipllm::{TuneArgs, policy_arg, threads_arg};
use std::process::ExitCode;
use threadpool::SchedulePolicy;

/// SipLLM: the thread count and schedule policy for memory-bound matmul on this machine.
///
/// The first run measures the machine (a few seconds) and caches the answer in
/// $SIPLLM_HOME/runtime/<hardware_id>.json (SIPLLM_HOME defaults to $HOME/.sipllm); later
/// runs read it back. Explicit settings (--threads, --policy, SIPLLM_THREADS,
/// SIPLLM_POLICY) always win over the cache and the tuner.
#[derive(Debug, Parser)]
#[command(name = "sipllm", version, about, long_about)]
struct Cli {
    /// Print the detected hardware_id and the hardware JSON, then exit.
    #[arg(long)]
    profile_info: bool,
    /// Print one JSON object on stdout and nothing else.
    #[arg(long)]
    json: bool,
    /// Skip tuning and the cache: 4 threads (at most the usable CPUs), policy static;
    /// --threads and --policy still win.
    #[arg(long, conflicts_with_all = ["recalibrate", "budget"])]
    no_autotune: bool,
    /// Use N threads (1 to 1024), whatever the cache says [env: SIPLLM_THREADS].
    #[arg(long, value_name = "N", value_parser = threads_arg, allow_hyphen_values = true)]
    threads: Option<usize>,
    /// Use this schedule policy: static, fixed16, proportional2, adaptive, guided,
    /// interleaved, workstealing (or its id 0-6) [env: SIPLLM_POLICY].
    #[arg(long, value_name = "NAME", value_parser = policy_arg)]
    policy: Option<SchedulePolicy>,
    #[command(flatten)]
    tune: TuneArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let hw = device_profile::get_hardware_info();

    if cli.profile_info {
        let out = if cli.json {
            let json = serde_json::json!({ "hardware_id": hw.hardware_id(), "hardware": hw });
            format!("{json}\n")
        } else {
            match serde_json::to_string_pretty(&hw) {
                Ok(json) => format!("hardware_id: {}\n{json}\n", hw.hardware_id()),
                Err(e) => {
                    eprintln!("sipllm: error: cannot encode the hardware profile: {e}");
                    return ExitCode::FAILURE;
                }
            }
        };
        return sipllm::emit("sipllm", &out);
    }

    let opt = AutoTunerOptions {
        disable_autotune: cli.no_autotune,
        threads: cli.threads,
        policy: cli.policy,
        ..AutoTunerOptions::default()
    };
    let opt = match cli.tune.apply("sipllm", opt).with_process_env() {
        Ok(opt) => opt,
        Err(e) => return sipllm::report_error("sipllm", &e),
    };
    let tuned = match tune_if_needed(&hw, &opt) {
        Ok(tuned) => tuned,
        Err(e) => return sipllm::report_error("sipllm", &e),
    };
    let out = if cli.json {
        format!("{}\n", sipllm::tuned_json(&tuned))
    } else {
        sipllm::summary(&tuned)
    };
    sipllm::emit("sipllm", &out)
}
