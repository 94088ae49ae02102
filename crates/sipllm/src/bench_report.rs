//! `sipllm bench`'s contenders and report: the rules other runtimes use for their thread
//! count ([`baselines`]), and the table and JSON of the measured phases.

use auto_tuner::{CoreSet, Setting};
use device_profile::HardwareInfo;
use serde_json::{Value, json};
use std::fmt::Write as _;
use threadpool::SchedulePolicy;

/// One setting that runs a phase: a thread count, a policy and, when pinned, its CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contender {
    /// `tuned`, or the rule's name (`seed-default`, `all-logical`, `physical-cores`,
    /// `llama.cpp`).
    pub name: String,
    /// Threads, policy and core set, as the tuner measures them.
    pub setting: Setting,
    /// The CPUs the workers are pinned to (worker 0 first); empty when unpinned.
    pub pinned_cpus: Vec<usize>,
}

impl Contender {
    fn unpinned(name: &str, threads: usize) -> Contender {
        Contender {
            name: name.to_string(),
            setting: Setting {
                threads: threads.max(1),
                policy: SchedulePolicy::Static,
                cores: CoreSet::Any,
            },
            pinned_cpus: Vec::new(),
        }
    }
}

/// The rules a runtime without a tuner uses, all `static` and unpinned:
/// - `seed-default`: 4 threads, whatever the machine;
/// - `all-logical`: every logical CPU of the machine;
/// - `physical-cores`: one thread per physical core;
/// - `llama.cpp`: its default `-t`, the physical performance cores (`cpu_get_num_math`:
///   physical cores, without the efficiency cores of a hybrid x86 CPU). Like the two rules
///   above it counts the machine's cores, not the CPUs a quota or an affinity mask leaves.
pub fn baselines(hw: &HardwareInfo) -> Vec<Contender> {
    let llama_cpp = if hw.efficiency_cores > 0 && hw.performance_cores > 0 {
        hw.performance_cores
    } else {
        hw.physical_cores
    };
    vec![
        Contender::unpinned("seed-default", 4),
        Contender::unpinned("all-logical", hw.logical_cores),
        Contender::unpinned("physical-cores", hw.physical_cores),
        Contender::unpinned("llama.cpp", llama_cpp),
    ]
}

/// Median, slowest and fastest tokens/s of a contender's repetitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// Median tokens per second.
    pub median: f64,
    /// Slowest repetition.
    pub min: f64,
    /// Fastest repetition.
    pub max: f64,
    /// Timed repetitions behind them (those run, which may be more than asked for).
    pub repetitions: usize,
}

impl Figures {
    /// The figures of a measurement.
    pub fn of(m: &auto_tuner::Measurement) -> Figures {
        Figures {
            median: m.tokens_per_sec,
            min: m.tokens_per_sec_min,
            max: m.tokens_per_sec_max,
            repetitions: m.repetitions,
        }
    }
}

/// One phase's result: the tuned setting and each baseline, with their figures.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseResult {
    /// `decode` or `prefill`.
    pub phase: String,
    /// The tuned setting and its figures.
    pub tuned: (Contender, Figures),
    /// Each baseline and its figures.
    pub baselines: Vec<(Contender, Figures)>,
}

impl PhaseResult {
    /// The tuned median ÷ the baseline's median (above 1: the tuned setting is faster).
    pub fn ratio(&self, baseline: &Figures) -> f64 {
        self.tuned.1.median / baseline.median
    }
}

/// The `--json` document: `workload`, then `phases` → `decode`/`prefill` → `tuned` and
/// `baselines` → name → `threads`, `policy`, `tokens_per_sec`, `ratio` (tuned ÷ it).
pub fn to_json(workload: &str, phases: &[PhaseResult]) -> Value {
    let setting = |c: &Contender, f: &Figures| {
        json!({
            "threads": c.setting.threads,
            "policy": c.setting.policy.name(),
            "cores": c.setting.cores.label(),
            "pinned_cpus": c.pinned_cpus,
            "tokens_per_sec": f.median,
            "tokens_per_sec_min": f.min,
            "tokens_per_sec_max": f.max,
        })
    };
    let mut by_phase = serde_json::Map::new();
    for p in phases {
        let mut baselines = serde_json::Map::new();
        for (c, f) in &p.baselines {
            let mut entry = setting(c, f);
            entry["ratio"] = json!(p.ratio(f));
            baselines.insert(c.name.clone(), entry);
        }
        by_phase.insert(
            p.phase.clone(),
            json!({ "tuned": setting(&p.tuned.0, &p.tuned.1), "baselines": baselines }),
        );
    }
    json!({ "workload": workload, "phases": by_phase })
}

/// The human-readable table: per phase, a row per contender with its tokens/s (median,
/// min–max) and the tuned setting's ratio to it; the header names the rounds that ran (the
/// most repetitions behind any contender's figures).
pub fn table(workload: &str, phases: &[PhaseResult]) -> String {
    let repetitions = phases
        .iter()
        .flat_map(|p| std::iter::once(&p.tuned).chain(&p.baselines))
        .map(|(_, f)| f.repetitions)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{workload}: tokens/s, median (min-max) of {repetitions} interleaved repetitions"
    );
    for p in phases {
        let _ = writeln!(out, "\n{}", p.phase);
        // The setting column as wide as its longest name (`llama.cpp-default`).
        let w = p
            .baselines
            .iter()
            .map(|(c, _)| c.name.chars().count())
            .chain([p.tuned.0.name.chars().count(), "setting".len()])
            .max()
            .unwrap_or(0);
        let _ = writeln!(
            out,
            "  {:<w$} {:>7} {:<14} {:>12} {:>21} {:>9}",
            "setting", "threads", "policy", "tokens/s", "min-max", "tuned ÷"
        );
        let row = |out: &mut String, c: &Contender, f: &Figures, ratio: Option<f64>| {
            let pinned = if c.pinned_cpus.is_empty() {
                ""
            } else {
                " pinned"
            };
            let ratio = ratio.map_or("-".to_string(), |r| format!("{r:.2}x"));
            let _ = writeln!(
                out,
                "  {:<w$} {:>7} {:<14} {:>12.2} {:>21} {:>9}",
                c.name,
                c.setting.threads,
                format!("{}{pinned}", c.setting.policy.name()),
                f.median,
                format!("{:.2}-{:.2}", f.min, f.max),
                ratio
            );
        };
        row(&mut out, &p.tuned.0, &p.tuned.1, None);
        for (c, f) in &p.baselines {
            row(&mut out, c, f, Some(p.ratio(f)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn threads_of(list: &[Contender]) -> Vec<(&str, usize)> {
        list.iter()
            .map(|c| (c.name.as_str(), c.setting.threads))
            .collect()
    }

    #[test]
    fn the_baselines_follow_each_runtimes_rule() {
        // An 8-core, 16-thread desktop.
        assert_eq!(
            threads_of(&baselines(&machine(16, 8, 8, 0))),
            [
                ("seed-default", 4),
                ("all-logical", 16),
                ("physical-cores", 8),
                ("llama.cpp", 8)
            ]
        );
        // A hybrid laptop: 6 P-cores with SMT and 8 E-cores (20 threads, 14 cores).
        assert_eq!(
            threads_of(&baselines(&machine(20, 14, 6, 8)))[3],
            ("llama.cpp", 6)
        );
        assert!(
            baselines(&machine(2, 1, 1, 0))
                .iter()
                .all(|c| c.setting.policy == SchedulePolicy::Static && c.pinned_cpus.is_empty())
        );
    }

    fn result() -> PhaseResult {
        let f = |m: f64| Figures {
            median: m,
            min: m - 1.0,
            max: m + 1.0,
            repetitions: 5,
        };
        PhaseResult {
            phase: "decode".into(),
            tuned: (Contender::unpinned("tuned", 2), f(20.0)),
            baselines: vec![
                (Contender::unpinned("seed-default", 4), f(10.0)),
                (Contender::unpinned("llama.cpp", 2), f(20.0)),
            ],
        }
    }

    #[test]
    fn the_json_has_the_documented_keys_and_ratios() {
        let doc = to_json("llama3-8b q4_K_M", &[result()]);
        assert_eq!(doc["workload"], "llama3-8b q4_K_M");
        let decode = &doc["phases"]["decode"];
        assert_eq!(decode["tuned"]["threads"], 2);
        assert_eq!(decode["tuned"]["policy"], "static");
        assert_eq!(decode["tuned"]["tokens_per_sec"], 20.0);
        let seed = &decode["baselines"]["seed-default"];
        assert_eq!(
            (seed["threads"].as_u64(), seed["policy"].as_str()),
            (Some(4), Some("static"))
        );
        assert_eq!(seed["tokens_per_sec"], 10.0);
        assert_eq!(seed["ratio"], 2.0);
        assert_eq!(decode["baselines"]["llama.cpp"]["ratio"], 1.0);
    }

    #[test]
    fn the_table_shows_each_contender_and_its_ratio() {
        let text = table("w", &[result()]);
        assert!(text.contains("of 5 interleaved repetitions"), "{text}");
        // The header names the rounds that ran: the most behind any contender.
        let mut more = result();
        more.baselines[1].1.repetitions = 10;
        assert!(table("w", &[more]).contains("of 10 interleaved repetitions"));
        let seed = text.lines().find(|l| l.contains("seed-default")).unwrap();
        assert!(
            seed.contains("2.00x") && seed.contains("9.00-11.00"),
            "{seed}"
        );
        let tuned = text
            .lines()
            .find(|l| l.trim_start().starts_with("tuned"))
            .unwrap();
        assert!(tuned.trim_end().ends_with('-'), "{tuned}");
    }
}
