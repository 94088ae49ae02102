//! `sipllm bench --runtime llama.cpp`: llama.cpp itself with the llama.cpp-measured profile
//! against the thread counts its users get by rule, interleaved, decode and prefill; and our
//! kernels' pick beside llama.cpp's for the same machine and model.

use crate::bench_args::{BenchArgs, DEFAULT_REPETITIONS, panel, write_file};
use crate::bench_report::{self, Contender, Figures, PhaseResult};
use crate::chart::{self, PhasePanel};
use crate::progress::say;
use crate::render;
use crate::stop::Stop;
use auto_tuner::{
    AutoTunerOptions, CoreSet, LlamaCpp, LlamaKnobs, LlamaSetting, Phase, RuntimeProfile, Setting,
    TunerError, measure_llama_cpp, tune_if_needed,
};
use device_profile::HardwareInfo;
use serde_json::json;
use std::fmt::Write as _;
use threadpool::SchedulePolicy;

/// The rules llama.cpp's users get without a tuner, for `phase`, all unpinned with
/// llama.cpp's default knobs:
/// - `llama.cpp-default`: no `-t`, so llama-bench's own default (`cpu_get_num_math()`:
///   the physical cores without a hybrid Intel CPU's efficiency cores), read from its
///   `--help` (`default_threads`);
/// - `llama-cpp-python`: `multiprocessing.cpu_count() // 2` for decode (`n_threads`),
///   `cpu_count()` for batches (`n_threads_batch`), llama-cpp-python 0.3.36's `Llama`
///   defaults;
/// - `ollama`: the physical cores less the efficiency cores (ollama's
///   `GetOptimalThreadCount` in `discover/types.go`), for both phases;
/// - `all-logical`: every logical CPU.
pub fn llama_cpp_baselines(
    hw: &HardwareInfo,
    default_threads: usize,
    phase: Phase,
) -> Vec<Contender> {
    let logical = hw.logical_cores.max(1);
    let python = match phase {
        Phase::Decode => (logical / 2).max(1),
        Phase::Prefill => logical,
    };
    let ollama = hw.physical_cores.saturating_sub(hw.efficiency_cores).max(1);
    [
        ("llama.cpp-default", default_threads),
        ("llama-cpp-python", python),
        ("ollama", ollama),
        ("all-logical", logical),
    ]
    .into_iter()
    .map(|(name, threads)| Contender {
        name: name.to_string(),
        setting: Setting {
            threads: threads.max(1),
            policy: SchedulePolicy::Static,
            cores: CoreSet::Any,
        },
        pinned_cpus: Vec::new(),
    })
    .collect()
}

/// Runs the comparison on llama.cpp; the table or JSON to print.
pub(crate) fn bench(args: &BenchArgs, hw: &HardwareInfo) -> Result<String, Stop> {
    let text = |e: TunerError| e.to_string();
    let mut opt = crate::bench_args::bench_options(args)?;
    let runtime = args
        .runtime
        .llama_cpp(&args.tune, &opt)
        .map_err(Stop::Refused)?
        .ok_or_else(|| Stop::Refused("--runtime llama.cpp is needed here".to_string()))?;
    // An estimate measures nothing on llama.cpp, so there would be no llama.cpp pick (and
    // none of its knobs) to compare with the rules.
    if opt.question.rigor == auto_tuner::Rigor::Estimate {
        return Err(Stop::Refused(
            "bench --runtime llama.cpp compares the setting llama.cpp was measured at, which \
             --rigor estimate never measures: give measure, patient or exhaustive"
                .to_string(),
        ));
    }
    // Asked first, so that a llama-bench that cannot run fails before anything is tuned.
    let default_threads = runtime.bench.default_threads().map_err(|e| e.to_string())? as usize;
    // llama.cpp's own pick before our kernels': a model llama.cpp cannot load fails here,
    // before our kernels are tuned for nothing.
    let ours_opt = opt.clone();
    opt.question.runtime = Some(runtime.clone());
    let tuned = tune_if_needed(hw, &opt).map_err(text)?;
    // Our kernels' pick for the same machine and model, tuned once when not cached.
    let ours = tune_if_needed(hw, &ours_opt).map_err(text)?;
    if !args.tune.quiet {
        say(format_args!("sipllm: bench: {}", render::used(&tuned)));
    }
    let record = tuned
        .profile
        .runtime
        .clone()
        .ok_or_else(|| "the resolved profile was not measured on llama.cpp".to_string())?;
    opt.measuring.repetitions = args.repetitions.map_or(DEFAULT_REPETITIONS, usize::from);
    opt.question.budget = None;
    let mut phases = Vec::new();
    let mut crashed = Vec::new();
    for phase in Phase::ALL {
        let picked = tuned.profile.phase(phase);
        let tuned_contender = Contender {
            name: "tuned".to_string(),
            setting: Setting {
                threads: picked.threads,
                policy: SchedulePolicy::Static,
                cores: picked.cores,
            },
            pinned_cpus: picked.pinned_cpus.clone(),
        };
        let baselines = llama_cpp_baselines(hw, default_threads, phase);
        let contenders: Vec<LlamaSetting> = std::iter::once(LlamaSetting {
            setting: tuned_contender.setting,
            knobs: record.knobs(phase),
        })
        .chain(baselines.iter().map(|c| LlamaSetting {
            setting: c.setting,
            knobs: LlamaKnobs::default(),
        }))
        .collect();
        // A rule that gives the tuned configuration (the same threads, cores and knobs) is
        // that configuration: measured once, so that its ratio is 1, not the noise between
        // two runs of one command.
        let (distinct, index) = distinct(&contenders);
        let measured = measure(hw, &opt, &runtime, phase, &distinct)?;
        let figures = |i: usize| measured[index[i]];
        let tuned_figures =
            figures(0).ok_or_else(|| format!("{phase}: the tuned setting crashed"))?;
        let mut rows = Vec::new();
        for (i, c) in baselines.into_iter().enumerate() {
            match &figures(i + 1) {
                Some(f) => rows.push((c, *f)),
                None => crashed.push(format!("{phase} {} (-t {})", c.name, c.setting.threads)),
            }
        }
        phases.push(PhaseResult {
            phase: phase.name().to_string(),
            tuned: (tuned_contender, tuned_figures),
            baselines: rows,
        });
    }
    let name = format!("{} on llama.cpp {}", record.model_file, record.build_commit);
    if let Some(path) = &args.svg {
        let panels: Vec<PhasePanel> = Phase::ALL
            .iter()
            .map(|&p| panel(p, tuned.profile.phase(p), Some(record.knobs(p))))
            .collect();
        let title = format!("{name}: tokens/s by thread count ({})", hw.cpu_model);
        let svg = chart::render_svg(&title, &panels)?;
        write_file(path, &svg)?;
    }
    if args.json {
        let mut doc = bench_report::to_json(&name, &phases);
        doc["runtime"] = json!("llama.cpp");
        doc["build_commit"] = json!(record.build_commit);
        doc["crashed"] = json!(crashed);
        doc["picks"] = picks_json(&tuned.profile, &ours.profile);
        return Ok(format!("{doc}\n"));
    }
    let mut out = bench_report::table(&name, &phases);
    for line in &crashed {
        let _ = writeln!(out, "  crashed: {line}");
    }
    out.push_str(&picks_table(&tuned.profile, &ours.profile));
    Ok(out)
}

/// The distinct settings of `all`, in their first order, and the index into them of each of
/// `all`.
fn distinct(all: &[LlamaSetting]) -> (Vec<LlamaSetting>, Vec<usize>) {
    let mut distinct: Vec<LlamaSetting> = Vec::new();
    let index = all
        .iter()
        .map(|s| {
            distinct.iter().position(|d| d == s).unwrap_or_else(|| {
                distinct.push(*s);
                distinct.len() - 1
            })
        })
        .collect();
    (distinct, index)
}

/// Measures `contenders` through llama.cpp; each one's figures, `None` when it crashed.
fn measure(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    runtime: &LlamaCpp,
    phase: Phase,
    contenders: &[LlamaSetting],
) -> Result<Vec<Option<Figures>>, String> {
    let measured =
        measure_llama_cpp(hw, opt, runtime, phase, contenders).map_err(|e| e.to_string())?;
    Ok(measured
        .iter()
        .map(|m| m.as_ref().map(Figures::of))
        .collect())
}

/// A phase's pick in words: `2 threads static`, with `pinned <cores>` when pinned.
fn pick_words(p: &auto_tuner::PhaseProfile) -> String {
    let pinned = match p.cores {
        CoreSet::Any => String::new(),
        cores => format!(" pinned {}", cores.label()),
    };
    let noun = if p.threads == 1 { "thread" } else { "threads" };
    format!("{} {noun} {}{pinned}", p.threads, p.schedule_policy.name())
}

/// Our kernels' pick beside llama.cpp's measured pick, per phase.
fn picks_table(llama: &RuntimeProfile, ours: &RuntimeProfile) -> String {
    let mut s = String::from("\npicks for this machine and model\n");
    let _ = writeln!(
        s,
        "  {:<8} {:<34} {:<34}",
        "phase", "llama.cpp-measured", "our kernels"
    );
    for phase in Phase::ALL {
        let knobs = llama
            .runtime
            .as_ref()
            .map(|r| r.knobs(phase))
            .unwrap_or_default();
        let llama_pick = format!(
            "{}{}",
            pick_words(llama.phase(phase)),
            if knobs.repack { "" } else { ", --no-repack" }
        );
        let _ = writeln!(
            s,
            "  {:<8} {:<34} {:<34}",
            phase.name(),
            llama_pick,
            pick_words(ours.phase(phase))
        );
    }
    s
}

/// The `picks` object of the JSON: per phase, `llama_cpp` and `our_kernels` with their
/// threads, cores and (llama.cpp) repacking.
fn picks_json(llama: &RuntimeProfile, ours: &RuntimeProfile) -> serde_json::Value {
    let mut by_phase = serde_json::Map::new();
    for phase in Phase::ALL {
        let (l, o) = (llama.phase(phase), ours.phase(phase));
        let repack = llama.runtime.as_ref().map(|r| r.knobs(phase).repack);
        by_phase.insert(
            phase.name().to_string(),
            json!({
                "llama_cpp": { "threads": l.threads, "cores": l.cores.label(), "repack": repack },
                "our_kernels": {
                    "threads": o.threads,
                    "policy": o.schedule_policy.name(),
                    "cores": o.cores.label(),
                },
            }),
        );
    }
    serde_json::Value::Object(by_phase)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_configuration_is_measured_once() {
        let at = |threads: usize, repack: bool| LlamaSetting {
            setting: Setting {
                threads,
                policy: SchedulePolicy::Static,
                cores: CoreSet::Any,
            },
            knobs: LlamaKnobs {
                repack,
                ..LlamaKnobs::default()
            },
        };
        let all = [
            at(2, true),
            at(2, true),
            at(1, true),
            at(2, false),
            at(1, true),
        ];
        let (distinct, index) = distinct(&all);
        assert_eq!(distinct, vec![at(2, true), at(1, true), at(2, false)]);
        assert_eq!(index, vec![0, 0, 1, 2, 1]);
    }

    fn machine(logical: usize, physical: usize, perf: usize, eff: usize) -> HardwareInfo {
        let mut hw = device_profile::get_hardware_info_from_root(std::path::Path::new(
            "/nonexistent-sysroot",
        ));
        hw.logical_cores = logical;
        hw.physical_cores = physical;
        hw.performance_cores = perf;
        hw.efficiency_cores = eff;
        hw
    }

    fn threads(list: &[Contender]) -> Vec<(&str, usize)> {
        list.iter()
            .map(|c| (c.name.as_str(), c.setting.threads))
            .collect()
    }

    #[test]
    fn the_rules_follow_each_runtime() {
        // A hybrid laptop: 6 P-cores with SMT and 8 E-cores (20 threads, 14 cores); llama.cpp's
        // own default as its help says.
        let hw = machine(20, 14, 6, 8);
        assert_eq!(
            threads(&llama_cpp_baselines(&hw, 6, Phase::Decode)),
            [
                ("llama.cpp-default", 6),
                ("llama-cpp-python", 10),
                ("ollama", 6),
                ("all-logical", 20)
            ]
        );
        assert_eq!(
            threads(&llama_cpp_baselines(&hw, 6, Phase::Prefill))[1],
            ("llama-cpp-python", 20)
        );
        // One CPU: no rule asks for zero threads.
        let one = machine(1, 1, 1, 0);
        assert!(
            llama_cpp_baselines(&one, 1, Phase::Decode)
                .iter()
                .all(|c| c.setting.threads == 1 && c.setting.cores == CoreSet::Any)
        );
    }
}
