//! Unit tests of `report.rs`.

use super::*;
use crate::qmatmul::workload::{FFN, SQUARE};
use serde_json::Map;

fn cell(scale: f64) -> Cell {
    Cell {
        read_gbps: 10.0 * scale,
        qgemv_gbps: 9.0 * scale,
        qgemv_vs_stream: 0.9,
        candle_gbps: Some(6.0 * scale),
        qgemv_vs_candle: Some(1.5),
        qgemm_gflops: None,
        candle_gflops: Some(40.0 * scale),
        qgemm_vs_candle: None,
        llamacpp_gbps: (scale < 4.0).then_some(8.0 * scale),
        qgemv_vs_llamacpp: (scale < 4.0).then_some(1.1),
        llamacpp_from_dram: Some(scale > 1.5),
    }
}

fn results() -> ShapeResults {
    let mut cells = Vec::new();
    for format in [WeightFormat::Q4_0, WeightFormat::Q4K] {
        for (n_threads, scale) in [(1, 1.0), (2, 2.0), (8, 0.5)] {
            cells.push((format, n_threads, cell(scale)));
        }
    }
    ShapeResults {
        shape: SQUARE,
        cells,
        rotations: vec![(WeightFormat::Q4_0, Rotation::new(9 << 20, 32 << 20))],
    }
}

#[test]
fn every_key_is_keyed_by_format_then_thread_count() {
    let json = results().to_json();
    for key in [
        "qgemv_gbps",
        "qgemv_vs_stream",
        "qgemm_gflops",
        "qgemv_vs_candle",
        "qgemm_vs_candle",
        "qgemv_vs_llamacpp",
        "llamacpp_from_dram",
        "qstream_read_gbps",
    ] {
        let by_format = json[key].as_object().unwrap();
        assert_eq!(by_format.len(), 2, "{key}");
        for format in ["q4_0", "q4_K"] {
            let by_threads = by_format[format].as_object().unwrap();
            let keys: Vec<&str> = by_threads.keys().map(String::as_str).collect();
            assert_eq!(keys, ["1", "2", "8"], "{key} {format}");
        }
    }
    for key in ["peer_qgemv_gbps", "peer_qgemm_gflops"] {
        let peers = json[key].as_object().unwrap();
        let expected: &[&str] = if key == "peer_qgemv_gbps" {
            &["candle", "llamacpp"]
        } else {
            &["candle"]
        };
        assert_eq!(peers.keys().collect::<Vec<_>>(), expected, "{key}");
        assert_eq!(peers["candle"]["q4_K"].as_object().unwrap().len(), 3);
    }
    assert_eq!(
        json["peer_qgemv_gbps"]["llamacpp"]["q4_0"]["2"],
        json!(16.0)
    );
    assert_eq!(json["llamacpp_from_dram"]["q4_0"]["1"], json!(0.0));
    assert_eq!(json["llamacpp_from_dram"]["q4_0"]["2"], json!(1.0));
    assert_eq!(json["qgemv_gbps"]["q4_0"]["2"], json!(18.0));
    assert_eq!(json["peer_qgemv_gbps"]["candle"]["q4_K"]["8"], json!(3.0));
    assert_eq!(json["qgemm_gflops"]["q4_0"]["1"], Value::Null);
    assert_eq!(
        json["qmatmul_rotation"]["q4_0"],
        json!({"matrices": 15, "bytes": 15 * (9u64 << 20)})
    );
}

#[test]
fn the_table_shows_the_ratios_of_the_goals() {
    let results = results();
    let table = results.to_table("kernel portable");
    // Blank line, title, two header lines, 6 cells, the goals.
    assert_eq!(table.len(), 4 + 6 + 1);
    assert!(table[1].contains("4096x4096"), "{}", table[1]);
    // 8 threads: 0.5 ÷ 2.0 of the 2-thread rate.
    let eight = &table[6];
    assert!(eight.starts_with("q4_0     8"), "{eight}");
    assert!(eight.contains(" 0.25 |"), "{eight}");
    assert!(
        table[4].contains("   - "),
        "no 8÷2 at 1 thread: {}",
        table[4]
    );
    let goals = results.goals();
    // 0.9 ≥ 0.90 at 1 and 2 threads for both formats; 1.5 ≥ 1.2; no GEMM figure;
    // 8 threads at a quarter of 2 fails.
    assert_eq!(goals.gemv_vs_read, Tally { met: 4, checked: 4 });
    assert_eq!(goals.gemv_vs_candle, Tally { met: 4, checked: 4 });
    assert_eq!(goals.gemm_vs_candle, Tally { met: 0, checked: 0 });
    assert_eq!(goals.gemv_vs_llamacpp, Tally { met: 4, checked: 4 });
    // llama.cpp's 1-thread figure was from cache, and says so.
    assert!(table[4].contains(" 8.0c "), "{}", table[4]);
    assert_eq!(goals.eight_vs_two, Tally { met: 0, checked: 2 });
    assert!(
        table[10].contains("gemv 8 thr ≥ 0.5×2 thr 0/2"),
        "{}",
        table[10]
    );
    let ffn = ShapeResults {
        shape: FFN,
        ..results
    };
    assert!(ffn.to_table("")[1].contains("14336x4096"));
}

#[test]
fn from_json_reads_back_what_to_json_wrote() {
    let results = results();
    let back = ShapeResults::from_json(SQUARE, &results.to_json()).unwrap();
    assert_eq!(back.shape, SQUARE);
    assert_eq!(back.cells, results.cells);
    // A cell without its read is refused; so is a figure of a cell without a GEMV figure
    // (the table would drop it without a word); a cell with no figure at all is absent.
    let mut json = results.to_json();
    json["qstream_read_gbps"]["q4_K"]["8"] = Value::Null;
    let err = ShapeResults::from_json(SQUARE, &json).unwrap_err();
    assert_eq!(err, "`qstream_read_gbps` has no q4_K figure at 8 threads");
    json["qgemv_gbps"]["q4_K"]["8"] = Value::Null;
    let err = ShapeResults::from_json(SQUARE, &json).unwrap_err();
    assert!(
        err.contains("has a figure but `qgemv_gbps.q4_K.8` has none"),
        "{err}"
    );
    let mut json = results.to_json();
    for path in FIGURE_PATHS.iter().chain([&["qgemv_gbps"][..]].iter()) {
        let mut at = &mut json[path[0]];
        for key in &path[1..] {
            at = &mut at[*key];
        }
        if let Some(cell) = at.get_mut("q4_K").and_then(Value::as_object_mut) {
            cell.remove("8");
        }
    }
    let fewer = ShapeResults::from_json(SQUARE, &json).unwrap();
    assert_eq!(fewer.cells.len(), results.cells.len() - 1);
    assert!(ShapeResults::from_json(SQUARE, &Map::new()).is_err());
}

#[test]
fn the_markdown_table_holds_the_goals_thread_counts() {
    let lines = results().to_markdown();
    assert!(
        lines[0].starts_with("4096 x 4096: GEMV ÷ read"),
        "{}",
        lines[0]
    );
    let rows: Vec<&String> = lines.iter().filter(|l| l.starts_with("| q4")).collect();
    // 1 and 2 threads of two formats; not 8.
    assert_eq!(rows.len(), 4, "{lines:#?}");
    // llama.cpp's 1-thread buffer fitted the L3 (marked c), its 2-thread one did not;
    // no GEMM ratio.
    assert_eq!(
        rows[0],
        "| q4_0 | 1 | 9.00 | 10.00 | 0.90 | 1.50 | 8.00 c | 1.10 | – |"
    );
    assert_eq!(
        rows[1],
        "| q4_0 | 2 | 18.00 | 20.00 | 0.90 | 1.50 | 16.00 | 1.10 | – |"
    );
    let goals = lines.last().unwrap();
    assert!(goals.contains("GEMV ≥ 0.90 × read in 4 of 4"), "{goals}");
    assert!(goals.contains("GEMM m = 32 ≥ candle in 0 of 0"), "{goals}");
}

#[test]
fn read_or_candle_meets_the_second_goal() {
    let mut results = results();
    for (_, _, cell) in &mut results.cells {
        // Below 1.2 × candle, but at 0.95 × the read: the limit, so it counts.
        cell.qgemv_vs_candle = Some(1.0);
        cell.qgemv_vs_stream = 0.95;
    }
    assert_eq!(results.goals().gemv_vs_candle.met, 4);
    results.cells[0].2.qgemv_vs_stream = 0.5;
    assert_eq!(results.goals().gemv_vs_candle.met, 3);
    assert_eq!(results.goals().gemv_vs_read.met, 3);
}
