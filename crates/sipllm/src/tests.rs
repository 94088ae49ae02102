//! Unit tests of the rendering: the measurement table and its legend.

use super::*;
use auto_tuner::{CoreSet, Phase};

fn row(phase: Phase, threads: usize, policy: SchedulePolicy, tok_s: f64) -> Measurement {
    Measurement {
        phase,
        threads,
        schedule_policy: policy,
        cores: CoreSet::Any,
        pseudo_tokens_per_sec: tok_s,
        gbps: tok_s * 10.0,
        gbps_min: tok_s * 9.0,
        gbps_median: tok_s * 10.0,
        gbps_max: tok_s * 11.0,
        repetitions: 7,
    }
}

/// A search whose pick (2 threads, guided, re-checked last) has the best median, 3.00.
fn search_rows() -> Vec<Measurement> {
    vec![
        row(Phase::Threads, 1, SchedulePolicy::Static, 1.50),
        row(Phase::Threads, 2, SchedulePolicy::Static, 2.80),
        row(Phase::Refine, 3, SchedulePolicy::Static, 2.70),
        row(Phase::Policy, 2, SchedulePolicy::Guided, 2.95),
        row(Phase::Recheck, 2, SchedulePolicy::Guided, 3.00),
    ]
}

const PICK: usize = 4;

fn data_lines(table: &str) -> Vec<&str> {
    table
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

#[test]
fn each_row_is_labelled_with_its_phase_and_the_pick_is_marked_once() {
    let table = render_table(&search_rows(), Some(PICK));
    assert!(
        table.lines().next().unwrap().starts_with("phase "),
        "{table}"
    );
    let lines = data_lines(&table);
    assert_eq!(lines.len(), 5, "{table}");
    for (line, phase) in lines
        .iter()
        .zip(["threads", "threads", "refine", "policy", "re-check"])
    {
        assert_eq!(line.split_whitespace().next(), Some(phase), "{line}");
    }
    let marked: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].ends_with(PICK_MARK))
        .collect();
    assert_eq!(marked, [PICK], "{table}");
}

#[test]
fn the_legend_explains_the_mark_the_phases_and_the_score() {
    let table = render_table(&search_rows(), Some(PICK));
    let legend: Vec<&str> = table.lines().skip(1 + 5).collect();
    for start in [
        "<- pick: the configuration chosen",
        "phase: threads = ",
        "pseudo tok/s: Llama-3-8B decode steps per second",
        "GB/s: ",
    ] {
        assert!(
            legend.iter().any(|l| l.starts_with(start)),
            "no legend line {start:?}:\n{table}"
        );
    }
    for phase in ["refine", "policy", "re-check"] {
        assert!(table.contains(&format!("{phase} = ")), "{phase}:\n{table}");
    }
    // Without a pick there is no mark to explain.
    let table = render_table(&search_rows(), None);
    assert!(!table.contains(PICK_MARK), "{table}");
}

#[test]
fn the_noise_rule_is_given_exactly_when_another_row_has_a_higher_median() {
    // The pick has the best median: nothing to explain.
    let table = render_table(&search_rows(), Some(PICK));
    assert!(!table.contains("why the pick"), "{table}");

    // A row with the same median is not higher.
    let mut rows = search_rows();
    rows[1].pseudo_tokens_per_sec = 3.00;
    assert!(!render_table(&rows, Some(PICK)).contains("why the pick"));

    // An earlier row of another configuration is higher: the line names it and the rule.
    let mut rows = search_rows();
    rows[2].pseudo_tokens_per_sec = 3.02;
    let table = render_table(&rows, Some(PICK));
    assert_eq!(table.matches("why the pick").count(), 1, "{table}");
    // The explanation is wrapped: read it as one paragraph.
    let start = table.find("why the pick").unwrap();
    let why = table[start..]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(why.contains("1 row shows a higher median"), "{why}");
    assert!(
        why.contains("3 threads static, refine phase, 3.02 vs the pick's 3.00"),
        "{why}"
    );
    assert!(
        why.contains("measured noise") && why.contains("0.5-3 %"),
        "{why}"
    );

    // The pick's own earlier measurement counts too: its figures are the last ones.
    let mut rows = search_rows();
    rows[3].pseudo_tokens_per_sec = 3.10;
    let table = render_table(&rows, Some(PICK));
    let words = table.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("2 threads guided, policy phase, 3.10 vs the pick's 3.00"),
        "{table}"
    );
}

#[test]
fn long_lines_are_wrapped_at_spaces_with_a_hanging_indent() {
    let text = "why the pick: one two three four five six seven eight nine ten";
    let wrapped = super::wrap(text, 24, "  ");
    for line in wrapped.lines() {
        assert!(line.chars().count() <= 24, "{line:?}");
    }
    assert!(wrapped.lines().skip(1).all(|l| l.starts_with("  ")));
    let words: Vec<&str> = wrapped.split_whitespace().collect();
    assert_eq!(words.join(" "), text);
    assert!(wrapped.ends_with('\n'));
}
