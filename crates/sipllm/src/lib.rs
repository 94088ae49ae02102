//! Shared pieces of the `sipllm` and `bench-micro` commands: the tuning flags, and the
//! human-readable rendering of a profile. The commands themselves are thin glue.
#![deny(missing_docs)]

mod bench_cmd;
mod bench_llamacpp;
mod bench_report;
mod chart;
mod emit_cmd;
mod output;
mod profiles;
mod progress;
mod runtimes;

pub use bench_cmd::{BenchArgs, run as run_bench};
pub use bench_llamacpp::llama_cpp_baselines;
pub use bench_report::{
    Contender, Figures, PhaseResult, baselines, table as bench_table, to_json as bench_json,
};
pub use chart::{ChartPoint, PhasePanel, render_svg};
pub use emit_cmd::{EmitArgs, run as run_emit};
pub use output::{emit, parse_args};
pub use profiles::{ProfileCommand, run as run_profile_command};
pub use progress::stderr_reporter;
pub use runtimes::{
    EmitError, RuntimeSettings, Target, cpu_list, cpu_mask_hex, render as render_runtime,
    render_all as render_runtimes,
};

use auto_tuner::{
    AutoTunerOptions, Measurement, Phase, PhaseProfile, Rigor, RuntimeProfile, Tuned, TunerError,
};
use model_workload::{DEFAULT_PRESET, Weights, Workload};
use std::fmt::Write as _;
use std::time::Duration;
use threadpool::SchedulePolicy;

/// The flags both commands share, with clap's parsing and `--help` text.
#[derive(Debug, Clone, clap::Args)]
pub struct TuneArgs {
    /// Measure even when a cached profile exists, and replace it.
    #[arg(long)]
    pub recalibrate: bool,
    /// Bound the whole tune (preparation included) to about SECONDS, keeping the best
    /// configuration so far (the profile is marked partial; a partial cached profile is
    /// reused only by runs whose budget is no larger). A complete cached profile is read
    /// without measuring.
    #[arg(long, value_name = "SECONDS", value_parser = budget, allow_hyphen_values = true)]
    pub budget: Option<Duration>,
    /// Largest thread count the search tries (1 to 1024, default 16; "none" lifts the cap
    /// to the CPUs this process may use). Each thread limit has its own cached profile.
    #[arg(long, value_name = "N|none", value_parser = thread_cap, allow_hyphen_values = true)]
    pub thread_cap: Option<ThreadCap>,
    /// The model to tune for: llama3-8b (the default), llama3.2-1b, llama3.2-3b,
    /// llama3.1-70b, mistral-7b, qwen2.5-7b, phi-3-mini, gemma-2-9b. Each workload (shapes,
    /// formats and layers) has its own cached profile.
    #[arg(long, value_name = "PRESET", value_parser = model_arg, conflicts_with_all = ["model_config", "gguf", "workload"])]
    pub model: Option<String>,
    /// The weight format of a preset's projections: f32, f16, bf16, q8_0, q4_0, q4_K, q6_K,
    /// or q4_K_M (llama.cpp's Q4_K_M: q4_K, with q6_K for v and down in the layers
    /// llama.cpp picks; the default).
    #[arg(long, value_name = "FORMAT", value_parser = weights_arg, conflicts_with_all = ["gguf", "workload"])]
    pub weights: Option<Weights>,
    /// The model's shapes from a Hugging Face config.json (in --weights).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["gguf", "workload"])]
    pub model_config: Option<std::path::PathBuf>,
    /// The model's shapes, formats and layer count from a .gguf file's header.
    #[arg(long, value_name = "PATH", conflicts_with = "workload")]
    pub gguf: Option<std::path::PathBuf>,
    /// One f32 matrix as ROWSxCOLS, measured as a one-layer workload instead of a model
    /// (the earlier synthetic proxy, for quick runs). Each workload has its own cached profile. It has no effect when both the
    /// thread count and the policy are given (sipllm --threads and --policy); a warning says
    /// so.
    #[arg(long, value_name = "ROWSxCOLS", value_parser = workload)]
    pub workload: Option<Workload>,
    /// Tokens per prefill step, m of the prefill GEMM (1 to 4096, default 64).
    #[arg(long, value_name = "N", value_parser = batch_arg)]
    pub batch: Option<usize>,
    /// How hard to look: estimate (nothing measured: the physical performance cores),
    /// measure (the default search), patient (every thread count, more repetitions),
    /// exhaustive (also one thread per physical core, performance cores, one NUMA node,
    /// each pinned). A cached profile serves requests of its rigor or lower.
    #[arg(long, value_name = "LEVEL", value_parser = rigor_arg)]
    pub rigor: Option<Rigor>,
    /// No progress on stderr (warnings and errors are still shown).
    #[arg(long, short)]
    pub quiet: bool,
}

/// The flags that measure llama.cpp instead of our kernels (`sipllm`, `bench`, `emit`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RuntimeArgs {
    /// Measure this runtime instead of our kernels: llama.cpp (every measurement a
    /// `llama-bench -o json` run on the --gguf file; needs --llama-bench). Its profiles have
    /// slots of their own, keyed by the llama.cpp build and the model file.
    #[arg(long, value_name = "RUNTIME", value_parser = ["llama.cpp"])]
    pub runtime: Option<String>,
    /// The llama-bench binary of --runtime llama.cpp [env: SIPLLM_LLAMA_BENCH].
    #[arg(long, value_name = "PATH")]
    pub llama_bench: Option<std::path::PathBuf>,
}

/// The variable naming the llama-bench binary when --llama-bench is not given.
pub const LLAMA_BENCH_ENV: &str = "SIPLLM_LLAMA_BENCH";

impl RuntimeArgs {
    /// The llama-bench binary: --llama-bench, else `SIPLLM_LLAMA_BENCH`.
    pub fn binary(&self) -> Option<std::path::PathBuf> {
        self.llama_bench.clone().or_else(|| {
            std::env::var_os(LLAMA_BENCH_ENV)
                .filter(|v| !v.is_empty())
                .map(Into::into)
        })
    }

    /// The llama.cpp to measure, when --runtime llama.cpp asks for one: its binary and the
    /// --gguf model. Without --runtime, `None`; an error names what is missing.
    pub fn llama_cpp(&self, tune: &TuneArgs) -> Result<Option<auto_tuner::LlamaCpp>, String> {
        if self.runtime.is_none() {
            if self.llama_bench.is_some() {
                return Err("--llama-bench needs --runtime llama.cpp".to_string());
            }
            return Ok(None);
        }
        let binary = self.binary().ok_or_else(|| {
            format!("--runtime llama.cpp needs --llama-bench PATH (or {LLAMA_BENCH_ENV})")
        })?;
        let model = tune.gguf.clone().ok_or_else(|| {
            "--runtime llama.cpp needs --gguf FILE, the model it runs".to_string()
        })?;
        Ok(Some(auto_tuner::LlamaCpp::new(binary, model)))
    }
}

/// A thread cap given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadCap {
    /// At most this many threads.
    At(usize),
    /// No cap beyond the CPUs this process may use.
    Uncapped,
}

impl TuneArgs {
    /// Applies the flags to `opt`; `program` prefixes the lines shown on stderr. A model
    /// source that cannot be read is an error.
    pub fn apply(
        &self,
        program: &'static str,
        mut opt: AutoTunerOptions,
    ) -> Result<AutoTunerOptions, TunerError> {
        opt.force_recalibrate |= self.recalibrate;
        if self.budget.is_some() {
            opt.budget = self.budget;
        }
        match self.thread_cap {
            Some(ThreadCap::At(n)) => opt.thread_cap = Some(n),
            Some(ThreadCap::Uncapped) => opt.thread_cap = None,
            None => {}
        }
        if let Some(w) = &self.workload {
            opt.workload = w.clone();
        }
        let weights = self.weights.unwrap_or_default();
        if let Some(path) = &self.model_config {
            opt.workload = Workload::from_hf_config(path, weights)?;
        } else if let Some(path) = &self.gguf {
            opt.workload = Workload::from_gguf(path)?;
        } else if self.model.is_some() || self.weights.is_some() {
            let model = self.model.as_deref().unwrap_or(DEFAULT_PRESET);
            opt.workload = Workload::preset(model, weights)?;
        }
        if let Some(batch) = self.batch {
            opt.batch = batch;
        }
        if let Some(rigor) = self.rigor {
            opt.rigor = rigor;
        }
        opt.reporter = stderr_reporter(program, self.quiet);
        Ok(opt)
    }
}

fn budget(s: &str) -> Result<Duration, String> {
    auto_tuner::parse_budget("--budget", s).map_err(|e| e.to_string())
}

fn workload(s: &str) -> Result<Workload, String> {
    Workload::parse_matrix("--workload", s).map_err(|e| e.to_string())
}

fn batch_arg(s: &str) -> Result<usize, String> {
    auto_tuner::parse_batch("--batch", s).map_err(|e| e.to_string())
}

fn rigor_arg(s: &str) -> Result<Rigor, String> {
    auto_tuner::parse_rigor("--rigor", s).map_err(|e| e.to_string())
}

fn model_arg(s: &str) -> Result<String, String> {
    match model_workload::find_preset(s.trim()) {
        Some(preset) => Ok(preset.name.to_string()),
        None => Err(format!(
            "unknown model preset {s:?}: expected one of {}",
            model_workload::preset_names()
        )),
    }
}

fn weights_arg(s: &str) -> Result<Weights, String> {
    Weights::parse("--weights", s.trim()).map_err(|e| e.to_string())
}

fn thread_cap(s: &str) -> Result<ThreadCap, String> {
    if s.trim().eq_ignore_ascii_case("none") {
        return Ok(ThreadCap::Uncapped);
    }
    auto_tuner::parse_threads("--thread-cap", s)
        .map(ThreadCap::At)
        .map_err(|e| e.to_string())
}

/// clap parser for `--threads`.
pub fn threads_arg(s: &str) -> Result<usize, String> {
    auto_tuner::parse_threads("--threads", s).map_err(|e| e.to_string())
}

/// clap parser for `--policy`.
pub fn policy_arg(s: &str) -> Result<SchedulePolicy, String> {
    auto_tuner::parse_policy("--policy", s).map_err(|e| e.to_string())
}

/// Prints `err` on stderr and returns the exit code for it.
pub fn report_error(program: &str, err: &TunerError) -> std::process::ExitCode {
    eprintln!("{program}: error: {err}");
    std::process::ExitCode::FAILURE
}

/// The one-object JSON form of a resolved profile: `source`, `path`, `profile`.
pub fn tuned_json(tuned: &Tuned) -> serde_json::Value {
    serde_json::json!({
        "source": tuned.source.name(),
        "path": tuned.source.path().map(|p| p.display().to_string()),
        "profile": tuned.profile,
    })
}

/// A short human summary of a resolved profile.
pub fn summary(tuned: &Tuned) -> String {
    let p = &tuned.profile;
    let mut s = String::new();
    let _ = writeln!(s, "hardware_id: {}", auto_tuner::shown(&p.hardware_id));
    let _ = writeln!(s, "source:      {}", tuned.source.name());
    let path = tuned
        .source
        .path()
        .map_or_else(|| "-".to_string(), |p| auto_tuner::shown_path(p));
    let _ = writeln!(s, "path:        {path}");
    s.push_str(&answer_lines(p));
    s.push_str(&runtime_lines(p));
    s
}

/// The llama.cpp lines of a profile measured on llama.cpp: the build and model, repacking
/// and polling per phase, and the candidates that crashed; nothing for our kernels.
pub fn runtime_lines(p: &RuntimeProfile) -> String {
    let mut s = String::new();
    let Some(r) = &p.runtime else {
        return s;
    };
    let _ = writeln!(
        s,
        "runtime:     llama.cpp {} on {} ({} bytes, header hash {}), tg{} and pp{}",
        auto_tuner::shown(&r.build_commit),
        auto_tuner::shown(&r.model_file),
        r.model.size,
        r.model.header_hash,
        r.gen_tokens,
        r.prompt_tokens
    );
    for (name, k) in [("decode", r.decode), ("prefill", r.prefill)] {
        let _ = writeln!(
            s,
            "  {name:<8}   repack {}, poll {}",
            if k.repack { "on" } else { "off (--no-repack)" },
            k.poll
                .map_or_else(|| "default".to_string(), |p| p.to_string())
        );
    }
    for f in &r.failures {
        let _ = writeln!(
            s,
            "  crashed:   {} -t {} on {}{}: signal {} (`{}`)",
            f.phase,
            f.threads,
            f.cores.label(),
            if f.knobs.repack { "" } else { " --repack 0" },
            f.signal,
            auto_tuner::shown_within(&f.command, 1000)
        );
    }
    s
}

/// The answer of a profile: the workload, then the decode setting (threads, pinning,
/// policy, score) and the prefill setting, one line each.
pub fn answer_lines(p: &RuntimeProfile) -> String {
    let mut s = String::new();
    let w = &p.request.workload;
    let _ = writeln!(
        s,
        "workload:    {} ({} layers x {} projections in {}), prefill batch {}, rigor {}",
        auto_tuner::shown(&w.name),
        w.layers,
        w.projections.len(),
        w.formats()
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(", "),
        p.request.batch,
        p.rigor
    );
    let partial = if p.partial {
        " (partial: budget ran out)"
    } else {
        ""
    };
    for phase in Phase::ALL {
        let setting = p.phase(phase);
        let _ = writeln!(
            s,
            "{:<12} {}{partial}",
            format!("{phase}:"),
            setting_line(setting)
        );
    }
    if let Some(env) = &p.environment {
        let load = env
            .load_average_1m
            .map_or_else(|| "unknown".to_string(), |l| format!("{l:.2}"));
        let governor = auto_tuner::shown(env.governor.as_deref().unwrap_or("unknown"));
        let noisy = if env.noisy { ", noisy" } else { "" };
        let _ = writeln!(
            s,
            "environment: load {load} on {} CPUs, governor {governor}{noisy}",
            env.cpus
        );
    }
    s
}

/// One phase's setting on one line: threads, pinning, policy and score.
fn setting_line(p: &PhaseProfile) -> String {
    let pinned = if p.pinned_cpus.is_empty() {
        String::new()
    } else {
        format!(" pinned to CPUs {:?} ({})", p.pinned_cpus, p.cores.label())
    };
    let score = match (p.tokens_per_sec, p.gbps) {
        (Some(tokens), Some(gbps)) => format!(", {tokens:.2} tok/s, {gbps:.1} GB/s"),
        _ => ", not measured".to_string(),
    };
    let threads = if p.threads == 1 { "thread" } else { "threads" };
    format!(
        "{} {threads}{pinned}, {} (id {}){score}",
        p.threads, p.schedule_policy, p.schedule_policy_id
    )
}

/// The tables of every configuration measured, one per phase, in the order measured, each
/// pick marked, with a legend that explains the columns and the mark, and why a pick won
/// when another row shows a higher median.
pub fn measurement_table(profile: &RuntimeProfile) -> String {
    let mut s = String::new();
    for phase in Phase::ALL {
        let setting = profile.phase(phase);
        // The pick's figures are those of its last measurement; that row is marked.
        let pick = setting.measurements.iter().rposition(|m| {
            m.threads == setting.threads
                && m.schedule_policy == setting.schedule_policy
                && m.cores == setting.cores
        });
        let _ = writeln!(s, "{phase}:");
        s.push_str(&render_table(&setting.measurements, pick));
        s.push('\n');
    }
    s.push_str(LEGEND);
    s
}

/// What the columns and marks of [`measurement_table`] mean.
const LEGEND: &str = concat!(
    "<- pick: the configuration chosen, with the figures of its last measurement.\n",
    "step: threads = thread counts under static; refine = neighbours of the best count;\n",
    "       pinning = pinned candidates (exhaustive); policy = every policy at the chosen\n",
    "       count; re-check = the chosen count's neighbours again under the chosen policy;\n",
    "       sweep, final = the exhaustive oracle.\n",
    "tok/s: tokens per second of the workload in the phase (decode: one token at a time;\n",
    "       prefill: the batch), median, and slowest..fastest repetition.\n",
    "GB/s: weight bytes per second (median). reps: timed repetitions.\n",
    "cores: any = unpinned; performance, physical_cores, nodeN = pinned to those CPUs.\n",
);

/// The mark on the pick's row.
const PICK_MARK: &str = "<- pick";

/// One phase's table of `measurements` with the row `pick` marked, and why the pick won
/// when another row shows a higher median.
fn render_table(measurements: &[Measurement], pick: Option<usize>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<8}  {:>7}  {:<13}  {:<14}  {:>10}  {:>7}  {:>19}  {:>4}",
        "step", "threads", "policy", "cores", "tok/s", "GB/s", "tok/s min..max", "reps"
    );
    for (i, m) in measurements.iter().enumerate() {
        let _ = writeln!(s, "{}", table_row(m, Some(i) == pick));
    }
    if let Some(line) = pick.and_then(|pick| why_the_pick(measurements, pick)) {
        s.push_str(&wrap(&line, 88, "       "));
    }
    s
}

/// `text` broken at spaces into lines of at most `width` characters (a longer word stays
/// whole), every line after the first starting with `indent`; ends with a newline.
fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_string();
        } else if !line.is_empty() && line != indent {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// Why the pick won although another row shows a higher median (the search's noise rule),
/// or `None` when no row does.
fn why_the_pick(measurements: &[Measurement], pick: usize) -> Option<String> {
    let picked = &measurements[pick];
    let higher: Vec<&Measurement> = measurements
        .iter()
        .enumerate()
        .filter(|&(i, m)| i != pick && m.tokens_per_sec > picked.tokens_per_sec)
        .map(|(_, m)| m)
        .collect();
    let best = higher
        .iter()
        .max_by(|a, b| a.tokens_per_sec.total_cmp(&b.tokens_per_sec))?;
    let rows = if higher.len() == 1 {
        "row shows"
    } else {
        "rows show"
    };
    Some(format!(
        "why the pick: {} {rows} a higher median (highest: {} {} {}, {} step, {:.2} vs \
         the pick's {:.2}); a candidate replaces the choice only when its median beats the \
         choice's by more than the measured noise (the sum of both relative median absolute \
         deviations, clamped to 0.5-3 %). Each decision compares rows measured side by side \
         in one step (the last: the pick against its neighbours); rows of other steps were \
         measured at other moments, and other load or clock changes can move them by more \
         than that.",
        higher.len(),
        best.threads,
        if best.threads == 1 {
            "thread"
        } else {
            "threads"
        },
        best.schedule_policy.name(),
        best.step.name(),
        best.tokens_per_sec,
        picked.tokens_per_sec,
    ))
}

fn table_row(m: &Measurement, pick: bool) -> String {
    let spread = format!("{:.2}..{:.2}", m.tokens_per_sec_min, m.tokens_per_sec_max);
    format!(
        "{:<8}  {:>7}  {:<13}  {:<14}  {:>10.2}  {:>7.1}  {:>19}  {:>4}{}",
        m.step.name(),
        m.threads,
        m.schedule_policy.name(),
        m.cores.label(),
        m.tokens_per_sec,
        m.gbps,
        spread,
        m.repetitions,
        if pick {
            format!("  {PICK_MARK}")
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests;
