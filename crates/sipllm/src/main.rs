//! `sipllm`: resolves this machine's runtime profile (tuning it once if needed) and prints it.
#![forbid(unsafe_code)]

use auto_tuner::{AutoTunerOptions, tune_if_needed};
use clap::Parser;
use sipllm::{
    BenchArgs, EmitArgs, GivenFlags, ProfileCommand, RuntimeArgs, TuneArgs, policy_arg, say,
    threads_arg,
};
use std::process::ExitCode;
use threadpool::SchedulePolicy;

/// SipLLM: the thread counts, schedule policies and pinning that run a model's decode and
/// prefill fastest on this machine.
///
/// The first run measures the machine on the model's own projections (default: llama3-8b in
/// q4_K_M) and caches the answer in $SIPLLM_HOME/runtime/<hardware_id>.json (SIPLLM_HOME defaults to $HOME/.sipllm); later
/// runs read it back, or a profile shipped to the read-only system store
/// (SIPLLM_SYSTEM_PROFILES, default /etc/sipllm/runtime). Explicit settings (--threads, --policy, SIPLLM_THREADS,
/// SIPLLM_POLICY) always win over the cache and the tuner, and nothing is measured then: the
/// flags that steer a measurement (--recalibrate, --budget, --thread-cap) are refused with
/// them; with both given, no profile is read either, and a workload, --rigor or
/// --cached-only flag, which then has no effect, is named in a warning.
#[derive(Debug, Parser)]
#[command(name = "sipllm", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Print the detected hardware_id and the hardware JSON, then exit. Nothing is read,
    /// measured or written, so only --json (and --quiet) go with it.
    #[arg(
        long,
        conflicts_with_all = [
            "no_autotune", "threads", "policy", "recalibrate", "budget", "thread_cap", "workload",
            "model", "weights", "model_config", "gguf", "batch", "rigor", "cached_only",
            "runtime", "llama_bench",
        ]
    )]
    profile_info: bool,
    /// Print one JSON object on stdout and nothing else (progress and warnings go to stderr).
    #[arg(long)]
    json: bool,
    /// Skip tuning and the cache: 4 threads (at most the CPUs this process may use), policy
    /// static. --threads and --policy (and SIPLLM_THREADS, SIPLLM_POLICY) still win. Nothing
    /// is measured, so --recalibrate, --budget, --thread-cap, --rigor and the workload flags
    /// are refused with it.
    #[arg(
        long,
        conflicts_with_all = [
            "recalibrate", "budget", "thread_cap", "workload", "model", "weights",
            "model_config", "gguf", "batch", "rigor",
        ]
    )]
    no_autotune: bool,
    /// Use N threads (1 to 1024), whatever the cache says; nothing is measured. The policy
    /// comes from --policy, else a cached profile, else static. Wins over SIPLLM_THREADS.
    #[arg(
        long,
        value_name = "N",
        value_parser = threads_arg,
        allow_hyphen_values = true,
        conflicts_with_all = ["recalibrate", "budget", "thread_cap"]
    )]
    threads: Option<usize>,
    /// Use this schedule policy: static, fixed16, proportional2, adaptive, guided,
    /// interleaved, workstealing (or its id 0-6), whatever the cache says; nothing is
    /// measured. The thread count comes from --threads, else a cached profile, else the
    /// default. Wins over SIPLLM_POLICY.
    #[arg(
        long,
        value_name = "NAME",
        value_parser = policy_arg,
        conflicts_with_all = ["recalibrate", "budget", "thread_cap"]
    )]
    policy: Option<SchedulePolicy>,
    /// Never measure: use a cached profile (the user's, then the system store's) if there is
    /// one, else the defaults; "source" says which. For a server that must start in
    /// milliseconds [env: SIPLLM_CACHED_ONLY=1].
    #[arg(long, conflicts_with_all = ["recalibrate", "budget", "no_autotune"])]
    cached_only: bool,
    #[command(flatten)]
    tune: TuneArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// The subcommands.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// See, clear, export and import the cached profiles.
    #[command(subcommand)]
    Profile(ProfileCommand),
    /// Measure the tuned profile's decode and prefill steps against the thread counts other
    /// runtimes pick by rule (seed default, all logical CPUs, physical cores, llama.cpp).
    Bench(Box<BenchArgs>),
    /// Write the resolved profile in a runtime's own form: llama.cpp flags, a llama-server
    /// preset section, ollama Modelfile lines, or llama-cpp-python, candle or vLLM
    /// environment lines.
    Emit(Box<EmitArgs>),
}

fn main() -> ExitCode {
    let cli: Cli = match sipllm::parse_args("sipllm") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    // Every command may run llama-bench (a tune, `bench`, `emit`'s build check), each run in
    // a process group of its own that a terminal's Ctrl-C does not reach, and may write an
    // output through a temporary file.
    if let Err(e) = sipllm::handle_interrupts() {
        say(format_args!(
            "sipllm: warning: cannot handle SIGINT, SIGTERM, SIGHUP and SIGXFSZ: {e}"
        ));
    }
    let hw = match sipllm::detect_hardware("sipllm") {
        Ok(hw) => hw,
        Err(code) => return code,
    };

    if let Some(Command::Bench(args)) = &cli.command {
        return sipllm::run_bench(args, &hw);
    }
    if let Some(Command::Emit(args)) = &cli.command {
        return sipllm::run_emit(args, &hw);
    }
    if let Some(Command::Profile(command)) = &cli.command {
        // Only the stores and the kernel: a bad SIPLLM_THREADS does not stop `profile list`.
        let stores = AutoTunerOptions::default().with_store_env(|name| std::env::var_os(name));
        let mut opt = match stores {
            Ok(opt) => opt,
            Err(e) => return sipllm::report_error("sipllm", &e),
        };
        // Clear and import take the machine's lock: a wait for another process is said.
        opt.reporter = sipllm::stderr_reporter("sipllm", false);
        return sipllm::run_profile_command(command, &hw, &opt);
    }

    if cli.profile_info {
        let out = if cli.json {
            let json = serde_json::json!({ "hardware_id": hw.hardware_id(), "hardware": hw });
            format!("{json}\n")
        } else {
            match serde_json::to_string_pretty(&hw) {
                Ok(json) => format!("hardware_id: {}\n{json}\n", hw.hardware_id()),
                Err(e) => {
                    say(format_args!(
                        "sipllm: error: cannot encode the hardware profile: {e}"
                    ));
                    return ExitCode::FAILURE;
                }
            }
        };
        return sipllm::emit("sipllm", &out);
    }

    let mut opt = AutoTunerOptions::default();
    opt.overrides.disable_autotune = cli.no_autotune;
    opt.overrides.threads = cli.threads;
    opt.overrides.policy = cli.policy;
    opt.stores.cached_only = cli.cached_only;
    let opt = match cli
        .tune
        .apply("sipllm", opt)
        .and_then(AutoTunerOptions::with_process_env)
    {
        Ok(opt) => opt,
        Err(e) => return sipllm::report_error("sipllm", &e),
    };
    let mut opt = opt;
    match cli.runtime.llama_cpp(&cli.tune, &opt) {
        Ok(runtime) => opt.question.runtime = runtime,
        Err(message) => {
            say(format_args!("sipllm: error: {message}"));
            return ExitCode::from(sipllm::REFUSED);
        }
    }
    let given = GivenFlags {
        cached_only: cli.cached_only,
        threads: cli.threads.is_some(),
        policy: cli.policy.is_some(),
    };
    if let Some(message) = cli.tune.env_conflict(given, &opt) {
        say(format_args!("sipllm: error: {message}"));
        return ExitCode::from(sipllm::REFUSED);
    }
    let t = &cli.tune;
    let workload_flag = [
        (t.workload.is_some(), "--workload"),
        (t.model.is_some(), "--model"),
        (t.weights.is_some(), "--weights"),
        (t.batch.is_some(), "--batch"),
        (t.rigor.is_some(), "--rigor"),
        (cli.cached_only, "--cached-only"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag));
    if opt.overrides.threads.is_some()
        && opt.overrides.policy.is_some()
        && let Some(flag) = workload_flag
    {
        say(format_args!(
            "sipllm: warning: {flag} has no effect: with both the thread count and the \
             policy given, no profile is read and nothing is measured"
        ));
    }
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
