//! Shared pieces of the `sipllm` and `bench-micro` commands, re-exported from their modules:
//! the tuning flags (`tune_args.rs`), the human-readable rendering of a profile
//! (`render.rs`), the checked stdout (`output.rs`), the exit codes (`stop.rs`), the signal handlers that stop
//! llama-bench with `sipllm` (`interrupt.rs`), and each subcommand.
#![deny(missing_docs)]

mod bench_args;
mod bench_cmd;
mod bench_llamacpp;
mod bench_report;
mod chart;
mod emit_cmd;
mod hardware;
mod interrupt;
mod output;
mod profiles;
mod progress;
mod render;
mod runtimes;
mod stop;
mod tune_args;

pub use bench_args::BenchArgs;
pub use bench_cmd::run as run_bench;
pub use bench_llamacpp::llama_cpp_baselines;
pub use bench_report::{
    Contender, Figures, PhaseResult, baselines, table as bench_table, to_json as bench_json,
};
pub use chart::{ChartPoint, PhasePanel, render_svg};
pub use emit_cmd::{EmitArgs, run as run_emit};
pub use hardware::detect_hardware;
pub use interrupt::handle_interrupts;
pub use output::{emit, parse_args};
pub use profiles::{ProfileCommand, run as run_profile_command};
pub use progress::{say, stderr_reporter};
pub use render::{answer_lines, measurement_table, runtime_lines, summary, tuned_json};
pub use runtimes::{
    EmitError, RuntimeSettings, Target, cpu_list, cpu_mask_hex, render as render_runtime,
    render_all as render_runtimes,
};
pub use stop::{REFUSED, report_error};
pub use tune_args::{
    GivenFlags, LLAMA_BENCH_ENV, RuntimeArgs, ThreadCap, TuneArgs, measuring_env, policy_arg,
    threads_arg,
};
