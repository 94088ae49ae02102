//! The human-readable rendering of a resolved profile: its summary, settings, runtime
//! record and measurement table, and the one-object JSON form.

use auto_tuner::{LlamaKnobs, Measurement, Phase, PhaseProfile, RuntimeProfile, Source, Tuned};
use std::fmt::Write as _;

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
        "workload:    {} ({} layer{} x {} projection{} in {}), prefill batch {}, rigor {}",
        auto_tuner::shown(&w.name),
        w.layers,
        if w.layers == 1 { "" } else { "s" },
        w.projections.len(),
        if w.projections.len() == 1 { "" } else { "s" },
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
        // A llama.cpp-measured profile's rows carry their knobs: the pick's are the record's.
        let knobs = profile.runtime.as_ref().map(|r| r.knobs(phase));
        let pick = setting.measurements.iter().rposition(|m| {
            m.threads == setting.threads
                && m.schedule_policy == setting.schedule_policy
                && m.cores == setting.cores
                && (m.knobs.is_none() || m.knobs == knobs)
        });
        let _ = writeln!(s, "{phase}:");
        let on_llama_cpp = profile.runtime.is_some();
        s.push_str(&render_table(&setting.measurements, pick, on_llama_cpp));
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
    "       sweep, final = the exhaustive oracle; repack = llama.cpp's weight repacking\n",
    "       on and off; poll = its polling levels (exhaustive).\n",
    "policy: for a profile measured on llama.cpp, which has no policy, its knobs instead:\n",
    "       repack or no-repack, and pN for --poll N when not llama.cpp's default of 50\n",
    "       (not recorded: measured by a sipllm that did not record them).\n",
    "tok/s: tokens per second of the workload in the phase (decode: one token at a time;\n",
    "       prefill: the batch), median, and slowest..fastest repetition.\n",
    "GB/s: weight bytes per second (median). reps: timed repetitions.\n",
    "cores: any = unpinned; performance, physical_cores, nodeN = pinned to those CPUs.\n",
);

/// The mark on the pick's row.
const PICK_MARK: &str = "<- pick";

/// One phase's table of `measurements` with the row `pick` marked, and why the pick won
/// when another row shows a higher median; `on_llama_cpp` for a profile measured on
/// llama.cpp, whose rows show their knobs rather than a policy.
fn render_table(measurements: &[Measurement], pick: Option<usize>, on_llama_cpp: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<8}  {:>7}  {:<14}  {:<14}  {:>10}  {:>7}  {:>19}  {:>4}",
        "step", "threads", "policy", "cores", "tok/s", "GB/s", "tok/s min..max", "reps"
    );
    for (i, m) in measurements.iter().enumerate() {
        let _ = writeln!(s, "{}", table_row(m, Some(i) == pick, on_llama_cpp));
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

fn table_row(m: &Measurement, pick: bool, on_llama_cpp: bool) -> String {
    let spread = format!("{:.2}..{:.2}", m.tokens_per_sec_min, m.tokens_per_sec_max);
    format!(
        "{:<8}  {:>7}  {:<14}  {:<14}  {:>10.2}  {:>7.1}  {:>19}  {:>4}{}",
        m.step.name(),
        m.threads,
        match m.knobs {
            Some(knobs) => knobs_label(knobs),
            // llama.cpp has no policy: a row of an older profile that did not record its
            // knobs says so rather than show a policy that was never set.
            None if on_llama_cpp => "not recorded".to_string(),
            None => m.schedule_policy.name().to_string(),
        },
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

/// llama.cpp's knobs of a row, in the policy column: `repack` or `no-repack`, with `pN`
/// for a polling level other than the default (`no-repack p100`).
pub(crate) fn knobs_label(knobs: LlamaKnobs) -> String {
    let repack = if knobs.repack { "repack" } else { "no-repack" };
    match knobs.poll {
        Some(poll) => format!("{repack} p{poll}"),
        None => repack.to_string(),
    }
}

/// Which profile was used, in words: `source cache, <path>, workload llama3-8b q4_K_M`, and
/// for a profile measured on llama.cpp its build and model file.
pub(crate) fn used(tuned: &Tuned) -> String {
    let path = tuned
        .source
        .path()
        .map_or_else(String::new, |p| format!(", {}", auto_tuner::shown_path(p)));
    let on = match &tuned.profile.runtime {
        Some(r) => format!(
            "llama.cpp {} with {}",
            auto_tuner::shown(&r.build_commit),
            auto_tuner::shown(&r.model_file)
        ),
        None => "our kernels".to_string(),
    };
    let measured = match &tuned.source {
        Source::Cache(_) | Source::System(_) | Source::Measured(_) => {
            format!(", measured on {on}")
        }
        // The override's profile keeps no runtime record: the cached one is named by path.
        Source::Override(Some(_)) => ", set by hand over that cached profile".to_string(),
        Source::Override(None) => ", set by hand, nothing measured".to_string(),
        Source::Defaults | Source::Estimated => ", nothing measured".to_string(),
    };
    format!(
        "source {}{path}, workload {}{measured}",
        tuned.source.name(),
        auto_tuner::shown(&tuned.profile.request.workload.name)
    )
}

#[cfg(test)]
mod tests;
