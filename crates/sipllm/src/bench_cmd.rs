//! `sipllm bench`: the tuned profile's decode and prefill steps against the rules other
//! runtimes use, measured interleaved on the same workload, and the chart of the tune.

use crate::bench_args::{BenchArgs, DEFAULT_REPETITIONS, bench_options, panel, write_file};
use crate::bench_report::{self, Contender, Figures, PhaseResult};
use crate::chart::{self, PhasePanel};
use crate::output::emit;
use crate::progress::say;
use crate::render;
use crate::stop::Stop;
use auto_tuner::{Phase, Setting, TunerError, measure_settings, tune_if_needed};
use device_profile::HardwareInfo;
use std::process::ExitCode;

/// Runs `sipllm bench` on `hw`; stdout gets the table or the JSON, stderr the progress.
pub fn run(args: &BenchArgs, hw: &HardwareInfo) -> ExitCode {
    match bench(args, hw) {
        Ok(out) => emit("sipllm", &out),
        Err(stop) => stop.report("sipllm"),
    }
}

fn bench(args: &BenchArgs, hw: &HardwareInfo) -> Result<String, Stop> {
    if args.runtime.runtime.is_some() {
        return crate::bench_llamacpp::bench(args, hw);
    }
    if args.runtime.llama_bench.is_some() {
        return Err(Stop::Refused(
            "--llama-bench needs --runtime llama.cpp".to_string(),
        ));
    }
    let text = |e: TunerError| e.to_string();
    let mut opt = bench_options(args)?;
    let tuned = tune_if_needed(hw, &opt).map_err(text)?;
    if !args.tune.quiet {
        say(format_args!("sipllm: bench: {}", render::used(&tuned)));
    }
    // The comparison's rounds: the library interleaves the settings of one call.
    opt.measuring.repetitions = args.repetitions.map_or(DEFAULT_REPETITIONS, usize::from);
    opt.question.budget = None;
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
        // The chart draws the tune's own measurements, which an estimate or a cached
        // profile set by hand has none of.
        if Phase::ALL
            .iter()
            .all(|&p| tuned.profile.phase(p).measurements.is_empty())
        {
            say(format_args!(
                "sipllm: warning: the profile holds no measurement of its search ({}), so the \
                 chart has no line; --rigor measure or --recalibrate measures one",
                tuned.source.name()
            ));
        }
        let panels: Vec<PhasePanel> = Phase::ALL
            .iter()
            .map(|&p| panel(p, tuned.profile.phase(p), None))
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
        bench_report::table(&name, &phases)
    })
}
