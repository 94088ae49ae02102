//! Shared pieces of the `sipllm` and `bench-micro` commands: the tuning flags, and the
//! human-readable rendering of a profile. The commands themselves are thin glue.
#![deny(missing_docs)]

mod output;
mod progress;

pub use output::{emit, parse_args};
pub use progress::stderr_reporter;

use auto_tuner::{
    AutoTunerOptions, Measurement, RuntimeProfile, Source, Tuned, TunerError, Workload,
};
use std::fmt::Write as _;
use std::time::Duration;
use threadpool::SchedulePolicy;

/// The flags both commands share, with clap's parsing and `--help` text.
#[derive(Debug, Clone, clap::Args)]
pub struct TuneArgs {
    /// Measure even when a cached profile exists, and replace it.
    #[arg(long)]
    pub recalibrate: bool,
    /// Stop the search after SECONDS with the best configuration so far (the profile is
    /// marked partial, and a partial cached profile is reused only by runs that also give
    /// --budget). A cached profile is read without measuring, so the budget does not apply.
    #[arg(long, value_name = "SECONDS", value_parser = budget, allow_hyphen_values = true)]
    pub budget: Option<Duration>,
    /// Largest thread count the search tries (1 to 1024, default 16; "none" lifts the cap
    /// to the usable CPUs). It steers a measurement only: a cached profile is used as it is
    /// (with a warning), so add --recalibrate to apply a new cap.
    #[arg(long, value_name = "N|none", value_parser = thread_cap, allow_hyphen_values = true)]
    pub thread_cap: Option<ThreadCap>,
    /// The matrix the benchmark multiplies, as ROWSxCOLS (default 4096x4096, one Llama-3-8B
    /// projection). A cached profile measured on another shape is not used: the machine is
    /// measured again and the cache replaced.
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
    /// No cap beyond the usable CPUs.
    None,
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
            Some(ThreadCap::None) => opt.thread_cap = None,
            None => {}
        }
        if let Some(w) = self.workload {
            opt.workload = w;
        }
        opt.reporter = stderr_reporter(program, self.quiet);
        opt
    }

    /// Warns on stderr about a flag that had no effect on `tuned`: a thread cap steers a
    /// measurement, and a cached profile is used as it is.
    pub fn warn_unused(&self, program: &str, tuned: &Tuned) {
        if self.thread_cap.is_some()
            && let Source::Cache(path) = &tuned.source
        {
            eprintln!(
                "{program}: warning: --thread-cap has no effect on the cached profile {}; \
                 add --recalibrate to measure again under the cap",
                path.display()
            );
        }
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
        return Ok(ThreadCap::None);
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
    if p.pseudo_tokens_per_sec > 0.0 {
        let partial = if p.partial {
            " (partial: budget ran out)"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "score:       {:.2} pseudo tok/s, {:.1} GB/s{partial}",
            p.pseudo_tokens_per_sec, p.gbps
        );
    } else {
        let _ = writeln!(s, "score:       not measured");
    }
    s
}

/// The table of every configuration measured, winner marked.
pub fn measurement_table(profile: &RuntimeProfile) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>7}  {:<13}  {:<11}  {:>14}  {:>8}  {:>17}  {:>4}",
        "threads", "policy", "cores", "pseudo tok/s", "GB/s", "GB/s min..max", "reps"
    );
    // The winner's figures are those of its last measurement; that row is marked.
    let last_of_winner = profile.measurements.iter().rposition(|m| {
        m.threads == profile.threads
            && m.schedule_policy == profile.schedule_policy
            && m.cores == profile.cores
    });
    for (i, m) in profile.measurements.iter().enumerate() {
        let _ = writeln!(s, "{}", table_row(m, Some(i) == last_of_winner));
    }
    s
}

fn table_row(m: &Measurement, winner: bool) -> String {
    let cores = match m.cores {
        auto_tuner::CoreSet::Any => "any",
        auto_tuner::CoreSet::Performance => "performance",
    };
    format!(
        "{:>7}  {:<13}  {:<11}  {:>14.2}  {:>8.1}  {:>8.1}..{:<8.1}  {:>4}{}",
        m.threads,
        m.schedule_policy.name(),
        cores,
        m.pseudo_tokens_per_sec,
        m.gbps,
        m.gbps_min,
        m.gbps_max,
        m.repetitions,
        if winner { "  <" } else { "" }
    )
}
