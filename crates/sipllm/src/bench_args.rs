//! What both `sipllm bench` commands share: their flags ([`BenchArgs`]), the chart's panel
//! of a tuned phase and the writing of the chart.

use crate::chart::{ChartPoint, PhasePanel};
use crate::render;
use crate::stop::Stop;
use crate::tune_args::{RuntimeArgs, TuneArgs};
use auto_tuner::{AutoTunerOptions, CoreSet, LlamaKnobs, Phase, PhaseProfile};
use std::path::PathBuf;
use threadpool::SchedulePolicy;

/// The repetitions `bench` runs of each contender unless told otherwise.
pub(crate) const DEFAULT_REPETITIONS: usize = 9;

/// Compare the tuned profile with the thread counts other runtimes pick by rule.
///
/// Tunes the workload first when no profile of it is cached (as plain `sipllm` would), then
/// runs its decode step (m = 1) and its prefill step (m = --batch) with: the tuned setting of
/// each phase; the seed's default (4 threads, static); all logical CPUs; one thread per
/// physical core; llama.cpp's rule (its default -t: physical performance cores). All static
/// and unpinned but the tuned one. Every round runs each contender once, in a rotating
/// order, and the table shows medians with min-max and the tuned setting's ratio to each.
/// SIPLLM_THREADS, SIPLLM_POLICY and SIPLLM_CACHED_ONLY are ignored here: the point is the
/// tuned profile, tuned now if none is cached.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Print one JSON object on stdout: workload, phases -> decode/prefill -> tuned,
    /// baselines -> name -> threads, policy, tokens_per_sec, ratio (tuned ÷ it).
    #[arg(long)]
    pub json: bool,
    /// Also draw the profile's measurements as SVG to FILE: tokens/s against threads, a line
    /// per policy, decode and prefill side by side, the pick circled. FILE is checked
    /// before anything is measured (its directory must exist) and written whole.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Rounds of the comparison (5 to 1000, default 9); --rigor patient runs twice the
    /// number, given or default.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(5..=1000))]
    pub repetitions: Option<u16>,
    /// The workload and tuning flags, as plain `sipllm` takes them.
    #[command(flatten)]
    pub tune: TuneArgs,
    /// --runtime llama.cpp: llama.cpp itself with its measured profile against the rules
    /// of llama.cpp, llama-cpp-python and ollama and all logical CPUs (see
    /// docs/runtimes.md); the JSON adds runtime, build_commit, crashed and picks (our
    /// kernels' pick beside llama.cpp's).
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// A phase's panel: every measurement of the tune, one line per policy (and per pinned core
/// set), the pick marked.
pub(crate) fn panel(phase: Phase, profile: &PhaseProfile, knobs: Option<LlamaKnobs>) -> PhasePanel {
    // A llama.cpp-measured row has no policy: its knobs name its line instead.
    let series = |policy: SchedulePolicy, knobs: Option<LlamaKnobs>, cores: CoreSet| {
        let name = knobs.map_or_else(|| policy.name().to_string(), render::knobs_label);
        match cores {
            CoreSet::Any => name,
            pinned => format!("{name} {}", pinned.label()),
        }
    };
    let points = profile
        .measurements
        .iter()
        .map(|m| ChartPoint {
            threads: m.threads,
            series: series(m.schedule_policy, m.knobs, m.cores),
            tokens_per_sec: m.tokens_per_sec,
        })
        .collect();
    let pick = profile.tokens_per_sec.map(|rate| ChartPoint {
        threads: profile.threads,
        series: series(profile.schedule_policy, knobs, profile.cores),
        tokens_per_sec: rate,
    });
    PhasePanel {
        phase: phase.name().to_string(),
        points,
        pick,
    }
}

/// Writes `text` to `path` whole or not at all, as `profile export --output` writes.
pub(crate) fn write_file(path: &std::path::Path, text: &str) -> Result<(), String> {
    crate::output::write_whole(path, text.as_bytes()).map_err(|e| svg_error(path, &e))
}

/// The message of a chart that cannot be written to `path`.
pub(crate) fn svg_error(path: &std::path::Path, e: &std::io::Error) -> String {
    format!("--svg {}: {e}", auto_tuner::shown_path(path))
}

/// The tuner's options of `bench` (either runtime): its flags and this process's
/// environment, but for `SIPLLM_THREADS`, `SIPLLM_POLICY` and `SIPLLM_CACHED_ONLY`, which
/// `bench` ignores (it compares the tuned setting with the rules, whatever an explicit one
/// says, and tunes when nothing is cached: the defaults in the tuned row would compare
/// nothing tuned), so that neither a value of them nor an invalid one changes or stops it;
/// and its `--svg` checked
/// against them before anything is measured.
pub(crate) fn bench_options(args: &BenchArgs) -> Result<AutoTunerOptions, Stop> {
    let mut opt = args
        .tune
        .apply("sipllm", AutoTunerOptions::default())
        .and_then(|opt| opt.with_env(crate::tune_args::measuring_env))?;
    opt.overrides.disable_autotune = false;
    if let Some(path) = &args.svg {
        crate::output::check_output(
            path,
            &crate::output::Guarded::of(Some(&args.tune), Some(&args.runtime), &opt),
        )
        .map_err(|e| svg_error(path, &e))?;
    }
    Ok(opt)
}
