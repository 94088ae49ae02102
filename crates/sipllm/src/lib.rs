//! Shared pieces of the `sipllm` and `bench-micro` commands: the tuning flags, and the
//! human-readable rendering of a profile. The commands themselves are thin glue.
#![deny(missing_docs)]

mod bench_report;
mod chart;
mod output;
mod profiles;
mod progress;

pub use bench_report::{
    Contender, Figures, PhaseResult, baselines, interleave, table as bench_table,
    to_json as bench_json,
};
pub use chart::{ChartPoint, PhasePanel, render_svg};
pub use output::{emit, parse_args};
pub use profiles::{ProfileCommand, run as run_profile_command};
pub use progress::stderr_reporter;

use auto_tuner::{AutoTunerOptions, Measurement, RuntimeProfile, Tuned, TunerError, Workload};
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
    /// The matrix the benchmark multiplies, as ROWSxCOLS (default 4096x4096, one Llama-3-8B
    /// projection). Each shape has its own cached profile. It has no effect when both the thread count
    /// and the policy are given (sipllm --threads and --policy); a warning says so.
    #[arg(long, value_name = "ROWSxCOLS", value_parser = workload)]
    pub workload: Option<Workload>,
    /// No progress on stderr (warnings and errors are still shown).
    #[arg(long, short)]
    pub quiet: bool,
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
    /// Applies the flags to `opt`; `program` prefixes the lines shown on stderr.
    pub fn apply(&self, program: &'static str, mut opt: AutoTunerOptions) -> AutoTunerOptions {
        opt.force_recalibrate |= self.recalibrate;
        if self.budget.is_some() {
            opt.budget = self.budget;
        }
        match self.thread_cap {
            Some(ThreadCap::At(n)) => opt.thread_cap = Some(n),
            Some(ThreadCap::Uncapped) => opt.thread_cap = None,
            None => {}
        }
        if let Some(w) = self.workload {
            opt.workload = w;
        }
        opt.reporter = stderr_reporter(program, self.quiet);
        opt
    }
}

fn budget(s: &str) -> Result<Duration, String> {
    auto_tuner::parse_budget("--budget", s).map_err(|e| e.to_string())
}

fn workload(s: &str) -> Result<Workload, String> {
    Workload::parse("--workload", s).map_err(|e| e.to_string())
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
    let _ = writeln!(s, "hardware_id: {}", p.hardware_id);
    let _ = writeln!(s, "source:      {}", tuned.source.name());
    let path = tuned
        .source
        .path()
        .map_or_else(|| "-".to_string(), |p| p.display().to_string());
    let _ = writeln!(s, "path:        {path}");
    s.push_str(&answer_lines(p));
    s
}

/// The answer of a profile: threads (and pinning), policy, score, one line each.
pub fn answer_lines(p: &RuntimeProfile) -> String {
    let mut s = String::new();
    let pinned = if p.pinned_cpus.is_empty() {
        String::new()
    } else {
        format!(" (pinned to CPUs {:?})", p.pinned_cpus)
    };
    let _ = writeln!(s, "threads:     {}{pinned}", p.threads);
    let _ = writeln!(
        s,
        "policy:      {} (id {})",
        p.schedule_policy, p.schedule_policy_id
    );
    if let (Some(tokens), Some(gbps)) = (p.pseudo_tokens_per_sec, p.gbps) {
        let partial = if p.partial {
            " (partial: budget ran out)"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "score:       {tokens:.2} pseudo tok/s, {gbps:.1} GB/s{partial}"
        );
    } else {
        let _ = writeln!(s, "score:       not measured");
    }
    s
}

/// The table of every configuration measured, in the order measured, the pick marked, with
/// a legend that explains the columns and the mark, and why the pick won when another row
/// shows a higher median.
pub fn measurement_table(profile: &RuntimeProfile) -> String {
    // The pick's figures are those of its last measurement; that row is marked.
    let pick = profile.measurements.iter().rposition(|m| {
        m.threads == profile.threads
            && m.schedule_policy == profile.schedule_policy
            && m.cores == profile.cores
    });
    render_table(&profile.measurements, pick)
}

/// The mark on the pick's row.
const PICK_MARK: &str = "<- pick";

/// [`measurement_table`] of `measurements` with the row `pick` marked.
fn render_table(measurements: &[Measurement], pick: Option<usize>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<8}  {:>7}  {:<13}  {:<11}  {:>12}  {:>7}  {:>15}  {:>4}",
        "phase", "threads", "policy", "cores", "pseudo tok/s", "GB/s", "GB/s min..max", "reps"
    );
    for (i, m) in measurements.iter().enumerate() {
        let _ = writeln!(s, "{}", table_row(m, Some(i) == pick));
    }
    s.push('\n');
    if pick.is_some() {
        let _ = writeln!(
            s,
            "{PICK_MARK}: the configuration chosen, with the figures of its last measurement."
        );
    }
    s.push_str(concat!(
        "phase: threads = thread counts under static; refine = neighbours of the best count;\n",
        "       policy = every policy at the chosen count; re-check = the chosen count's\n",
        "       neighbours again under the chosen policy; sweep, final = the exhaustive oracle.\n",
        "pseudo tok/s: Llama-3-8B decode steps per second if every projection of the model\n",
        "       ran as fast as the measured one (median of the repetitions).\n",
        "GB/s: weight bytes read per second, median and slowest..fastest repetition.\n",
        "reps: timed repetitions; cores: any = unpinned, performance = pinned to performance\n",
        "       cores.\n",
    ));
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
        .filter(|&(i, m)| i != pick && m.pseudo_tokens_per_sec > picked.pseudo_tokens_per_sec)
        .map(|(_, m)| m)
        .collect();
    let best = higher
        .iter()
        .max_by(|a, b| a.pseudo_tokens_per_sec.total_cmp(&b.pseudo_tokens_per_sec))?;
    let rows = if higher.len() == 1 {
        "row shows"
    } else {
        "rows show"
    };
    Some(format!(
        "why the pick: {} {rows} a higher median (highest: {} {} {}, {} phase, {:.2} vs \
         the pick's {:.2}); a candidate replaces the choice only when its median beats the \
         choice's by more than the measured noise (the sum of both relative median absolute \
         deviations, clamped to 0.5-3 %). Each decision compares rows measured side by side \
         in one phase (the last: the pick against its neighbours); rows of other phases were \
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
        best.phase.name(),
        best.pseudo_tokens_per_sec,
        picked.pseudo_tokens_per_sec,
    ))
}

fn table_row(m: &Measurement, pick: bool) -> String {
    let cores = match m.cores {
        auto_tuner::CoreSet::Any => "any",
        auto_tuner::CoreSet::Performance => "performance",
    };
    let spread = format!("{:.1}..{:.1}", m.gbps_min, m.gbps_max);
    format!(
        "{:<8}  {:>7}  {:<13}  {:<11}  {:>12.2}  {:>7.1}  {:>15}  {:>4}{}",
        m.phase.name(),
        m.threads,
        m.schedule_policy.name(),
        cores,
        m.pseudo_tokens_per_sec,
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
