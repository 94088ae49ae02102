//! Unit tests of the rendering: the measurement table and its legend.

use super::*;
use auto_tuner::{AutoTunerOptions, CoreSet, Step};
use threadpool::SchedulePolicy;

fn row(step: Step, threads: usize, policy: SchedulePolicy, tok_s: f64) -> Measurement {
    Measurement {
        step,
        threads,
        schedule_policy: policy,
        cores: CoreSet::Any,
        tokens_per_sec: tok_s,
        tokens_per_sec_min: tok_s * 0.9,
        tokens_per_sec_max: tok_s * 1.1,
        gbps: tok_s * 10.0,
        repetitions: 7,
        knobs: None,
    }
}

/// A search whose pick (2 threads, guided, re-checked last) has the best median, 3.00.
fn search_rows() -> Vec<Measurement> {
    vec![
        row(Step::Threads, 1, SchedulePolicy::Static, 1.50),
        row(Step::Threads, 2, SchedulePolicy::Static, 2.80),
        row(Step::Refine, 3, SchedulePolicy::Static, 2.70),
        row(Step::Policy, 2, SchedulePolicy::Guided, 2.95),
        row(Step::Recheck, 2, SchedulePolicy::Guided, 3.00),
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
fn each_row_is_labelled_with_its_step_and_the_pick_is_marked_once() {
    let table = render_table(&search_rows(), Some(PICK), false);
    assert!(
        table.lines().next().unwrap().starts_with("step "),
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
fn the_legend_explains_the_mark_the_steps_and_the_score() {
    let legend: Vec<&str> = LEGEND.lines().collect();
    for start in [
        "<- pick: the configuration chosen",
        "step: threads = ",
        "tok/s: tokens per second of the workload",
        "GB/s: ",
        "cores: any = unpinned",
    ] {
        assert!(
            legend.iter().any(|l| l.starts_with(start)),
            "no legend line {start:?}:\n{LEGEND}"
        );
    }
    for step in ["refine", "pinning", "policy", "re-check"] {
        assert!(LEGEND.contains(&format!("{step} = ")), "{step}:\n{LEGEND}");
    }
    // Without a pick there is no mark.
    let table = render_table(&search_rows(), None, false);
    assert!(!table.contains(PICK_MARK), "{table}");
}

#[test]
fn a_profile_shows_one_table_per_phase_and_both_settings() {
    let hw = device_profile::HardwareInfo {
        logical_cores: 2,
        effective_cpus: 2,
        ..device_profile::HardwareInfo::default()
    };
    let opt = AutoTunerOptions::default();
    let mut p = RuntimeProfile::unmeasured(
        &hw,
        opt.question.request(&hw),
        matmul_kernel::selected(),
        2,
        SchedulePolicy::Guided,
    );
    p.decode.measurements = search_rows();
    let mut prefill = PhaseProfile::unmeasured(1, SchedulePolicy::Static);
    prefill.tokens_per_sec = Some(42.0);
    prefill.gbps = Some(1.0);
    prefill.measurements = vec![row(Step::Threads, 1, SchedulePolicy::Static, 42.0)];
    p.prefill = prefill;
    let tables = measurement_table(&p);
    let decode = tables.find("decode:").unwrap();
    let prefill = tables.find("prefill:").unwrap();
    assert!(decode < prefill, "{tables}");
    assert_eq!(
        tables.matches(PICK_MARK).count(),
        3,
        "two picks and the legend: {tables}"
    );
    let lines = answer_lines(&p);
    assert!(
        lines.contains("decode:      2 threads, guided (id 4), not measured"),
        "{lines}"
    );
    assert!(
        lines.contains("prefill:     1 thread, static (id 0), 42.00 tok/s"),
        "{lines}"
    );
    assert!(
        lines.contains(
            "llama3-8b q4_K_M (32 layers x 7 projections in q4_K, q6_K), prefill batch 64"
        ),
        "{lines}"
    );
}

#[test]
fn the_noise_rule_is_given_exactly_when_another_row_has_a_higher_median() {
    // The pick has the best median: nothing to explain.
    let table = render_table(&search_rows(), Some(PICK), false);
    assert!(!table.contains("why the pick"), "{table}");

    // A row with the same median is not higher.
    let mut rows = search_rows();
    rows[1].tokens_per_sec = 3.00;
    assert!(!render_table(&rows, Some(PICK), false).contains("why the pick"));

    // An earlier row of another configuration is higher: the line names it and the rule.
    let mut rows = search_rows();
    rows[2].tokens_per_sec = 3.02;
    let table = render_table(&rows, Some(PICK), false);
    assert_eq!(table.matches("why the pick").count(), 1, "{table}");
    // The explanation is wrapped: read it as one paragraph.
    let start = table.find("why the pick").unwrap();
    let why = table[start..]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(why.contains("1 row shows a higher median"), "{why}");
    assert!(
        why.contains("3 threads static, refine step, 3.02 vs the pick's 3.00"),
        "{why}"
    );
    assert!(
        why.contains("measured noise") && why.contains("0.5-3 %"),
        "{why}"
    );

    // The pick's own earlier measurement counts too: its figures are the last ones.
    let mut rows = search_rows();
    rows[3].tokens_per_sec = 3.10;
    let table = render_table(&rows, Some(PICK), false);
    let words = table.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("2 threads guided, policy step, 3.10 vs the pick's 3.00"),
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

#[test]
fn a_llama_cpp_row_without_its_knobs_says_so_not_a_policy() {
    let mut rows = vec![
        row(Step::Threads, 2, SchedulePolicy::Static, 80.0),
        row(Step::Repack, 2, SchedulePolicy::Static, 100.0),
    ];
    rows[1].knobs = Some(auto_tuner::LlamaKnobs {
        repack: false,
        poll: None,
    });
    let table = render_table(&rows, Some(1), true);
    let lines = data_lines(&table);
    assert!(lines[0].contains("not recorded"), "{table}");
    assert!(!lines[0].contains("static"), "{table}");
    assert!(lines[1].contains("no-repack"), "{table}");
    // Our kernels' rows show their policy.
    let table = render_table(&rows[..1], Some(0), false);
    assert!(data_lines(&table)[0].contains("static"), "{table}");
    assert!(LEGEND.contains("not recorded"));
}
