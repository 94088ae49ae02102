//! `sipllm bench`: the tuned profile's decode and prefill steps against the rules other
//! runtimes use, measured interleaved on the same workload, and the chart of the tune.

use crate::bench_report::{self, Contender, Figures, PhaseResult};
use crate::chart::{self, ChartPoint, PhasePanel};
use crate::output::emit;
use crate::tune_args::{RuntimeArgs, TuneArgs};
use auto_tuner::{
    AutoTunerOptions, CoreSet, Phase, PhaseProfile, Setting, TunerError, measure_settings,
    tune_if_needed,
};
use device_profile::HardwareInfo;
use std::path::PathBuf;
use std::process::ExitCode;

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
/// SIPLLM_THREADS and SIPLLM_POLICY are ignored here: the point is the tuned profile.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Print one JSON object on stdout: workload, phases -> decode/prefill -> tuned,
    /// baselines -> name -> threads, policy, tokens_per_sec, ratio (tuned ÷ it).
    #[arg(long)]
    pub json: bool,
    /// Also draw the profile's measurements as SVG to FILE: tokens/s against threads, a line
    /// per policy, decode and prefill side by side, the pick circled.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Rounds of the comparison (3 to 1000, default 9).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(3..=1000))]
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

/// Runs `sipllm bench` on `hw`; stdout gets the table or the JSON, stderr the progress.
pub fn run(args: &BenchArgs, hw: &HardwareInfo) -> ExitCode {
    match bench(args, hw) {
        Ok(out) => emit("sipllm", &out),
        Err(message) => {
            eprintln!("sipllm: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn bench(args: &BenchArgs, hw: &HardwareInfo) -> Result<String, String> {
    if args.runtime.runtime.is_some() {
        return crate::bench_llamacpp::bench(args, hw);
    }
    if args.runtime.llama_bench.is_some() {
        return Err("--llama-bench needs --runtime llama.cpp".to_string());
    }
    let text = |e: TunerError| e.to_string();
    // A destination that would be refused is refused before anything is measured.
    if let Some(path) = &args.svg {
        crate::output::check_destination(path).map_err(|e| svg_error(path, &e))?;
    }
    let mut opt = args
        .tune
        .apply("sipllm", AutoTunerOptions::default())
        .and_then(AutoTunerOptions::with_process_env)
        .map_err(text)?;
    opt.threads = None;
    opt.policy = None;
    opt.disable_autotune = false;
    let tuned = tune_if_needed(hw, &opt).map_err(text)?;
    // The comparison's rounds: the library interleaves the settings of one call.
    opt.repetitions = args.repetitions.map_or(DEFAULT_REPETITIONS, usize::from);
    opt.budget = None;
    let baselines = bench_report::baselines(hw);
    let mut phases = Vec::new();
    for phase in Phase::ALL {
        let picked = tuned.profile.phase(phase);
        let tuned_contender = Contender {
            name: "tuned".to_string(),
            setting: Setting {
                threads: picked.threads,
                policy: picked.schedule_policy,
                cores: picked.cores,
            },
            pinned_cpus: picked.pinned_cpus.clone(),
        };
        let settings: Vec<Setting> = std::iter::once(&tuned_contender)
            .chain(&baselines)
            .map(|c| c.setting)
            .collect();
        let measured = measure_settings(hw, &opt, phase, &settings).map_err(text)?;
        let figures_of = |s: &Setting| {
            measured
                .iter()
                .find(|m| {
                    m.threads == s.threads && m.schedule_policy == s.policy && m.cores == s.cores
                })
                .map(Figures::of)
                .ok_or_else(|| {
                    format!(
                        "{phase}: {} threads, {} was not measured",
                        s.threads,
                        s.policy.name()
                    )
                })
        };
        let tuned_figures = figures_of(&tuned_contender.setting)?;
        let mut rows = Vec::new();
        for b in &baselines {
            rows.push((b.clone(), figures_of(&b.setting)?));
        }
        phases.push(PhaseResult {
            phase: phase.name().to_string(),
            tuned: (tuned_contender, tuned_figures),
            baselines: rows,
        });
    }
    let name = tuned.profile.request.workload.name.clone();
    if let Some(path) = &args.svg {
        let panels: Vec<PhasePanel> = Phase::ALL
            .iter()
            .map(|&p| panel(p, tuned.profile.phase(p)))
            .collect();
        let title = format!(
            "{name}: tokens/s by thread count and policy ({})",
            hw.cpu_model
        );
        let svg = chart::render_svg(&title, &panels)?;
        write_file(path, &svg)?;
    }
    Ok(if args.json {
        format!("{}\n", bench_report::to_json(&name, &phases))
    } else {
        bench_report::table(&name, opt.repetitions, &phases)
    })
}

/// A phase's panel: every measurement of the tune, one line per policy (and per pinned core
/// set), the pick marked.
pub(crate) fn panel(phase: Phase, profile: &PhaseProfile) -> PhasePanel {
    let series = |policy: &str, cores: CoreSet| match cores {
        CoreSet::Any => policy.to_string(),
        pinned => format!("{policy} {}", pinned.label()),
    };
    let points = profile
        .measurements
        .iter()
        .map(|m| ChartPoint {
            threads: m.threads,
            series: series(m.schedule_policy.name(), m.cores),
            tokens_per_sec: m.tokens_per_sec,
        })
        .collect();
    let pick = profile.tokens_per_sec.map(|rate| ChartPoint {
        threads: profile.threads,
        series: series(profile.schedule_policy.name(), profile.cores),
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
