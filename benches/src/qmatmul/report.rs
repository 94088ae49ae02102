//! The quantized section's figures ([`Cell`]) as JSON keys and as a table.
//!
//! JSON (see `docs/benchmarking.md`): for the 4096 × 4096 shape the top-level keys
//! `qgemv_gbps`, `qgemv_vs_stream`, `peer_qgemv_gbps`, `qgemm_gflops`, `peer_qgemm_gflops`
//! and the paired ratios `qgemv_vs_candle`, `qgemm_vs_candle`, `qgemv_vs_llamacpp`, with the
//! read's own rate in `qstream_read_gbps` and whether llama.cpp read its weights from DRAM in
//! `llamacpp_from_dram`; each keyed `{format: {"1": x, "2": x, "8": x}}` (the peer keys one
//! level deeper, under `"candle"` and `"llamacpp"`). The same keys for 14336 × 4096 sit in
//! the object `qmatmul_ffn_14336x4096`, for 4096 × 14336 in `qmatmul_down_4096x14336`. A
//! figure that could not be measured is `null`.

use super::workload::{GEMM_M, Rotation};
use matmul_kernel::{WeightFormat, WeightShape};
use serde_json::{Map, Value, json};

/// The figures of one format, shape and thread count. Rates are medians over rounds; ratios
/// are paired by round (the median over rounds of the other's time ÷ ours in that round).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cell {
    /// Our read of as many bytes as the weights, GB/s.
    pub read_gbps: f64,
    /// Our GEMV, weight bytes per second, GB/s.
    pub qgemv_gbps: f64,
    /// Read time ÷ our GEMV time.
    pub qgemv_vs_stream: f64,
    /// candle's GEMV (m = 1), the same weight bytes per second, GB/s.
    pub candle_gbps: Option<f64>,
    /// candle's GEMV time ÷ ours.
    pub qgemv_vs_candle: Option<f64>,
    /// Our GEMM at m = [`GEMM_M`], GFLOP/s (2·m·n_out·n_in per call).
    pub qgemm_gflops: Option<f64>,
    /// candle's GEMM at m = [`GEMM_M`], GFLOP/s.
    pub candle_gflops: Option<f64>,
    /// candle's GEMM time ÷ ours.
    pub qgemm_vs_candle: Option<f64>,
    /// llama.cpp's `MUL_MAT` (n = 1), the same weight bytes per second, GB/s.
    pub llamacpp_gbps: Option<f64>,
    /// llama.cpp's time ÷ ours, ours on one matrix called over and over as its one buffer is.
    pub qgemv_vs_llamacpp: Option<f64>,
    /// Whether llama.cpp's one weight buffer exceeded the L3 (could not stay there whole).
    pub llamacpp_from_dram: Option<bool>,
}

/// Every cell of one shape.
#[derive(Debug, Clone, Default)]
pub struct ShapeResults {
    /// The weights' shape.
    pub shape: WeightShape,
    /// `(format, n_threads, cell)`, in measuring order.
    pub cells: Vec<(WeightFormat, usize, Cell)>,
    /// The rotation each format was measured on.
    pub rotations: Vec<(WeightFormat, Rotation)>,
}

impl ShapeResults {
    fn cell(&self, format: WeightFormat, n_threads: usize) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|(f, t, _)| *f == format && *t == n_threads)
            .map(|(_, _, cell)| cell)
    }

    fn formats(&self) -> Vec<WeightFormat> {
        let mut formats: Vec<WeightFormat> = Vec::new();
        for (format, _, _) in &self.cells {
            if !formats.contains(format) {
                formats.push(*format);
            }
        }
        formats
    }

    fn thread_counts(&self) -> Vec<usize> {
        let mut counts: Vec<usize> = Vec::new();
        for (_, n_threads, _) in &self.cells {
            if !counts.contains(n_threads) {
                counts.push(*n_threads);
            }
        }
        counts
    }

    /// `{format: {"1": v, …}}` of one figure (`null` where absent).
    fn by_format(&self, figure: impl Fn(&Cell) -> Option<f64>) -> Value {
        let threads = self.thread_counts();
        Value::Object(
            self.formats()
                .into_iter()
                .map(|format| {
                    let by_threads: Map<String, Value> = threads
                        .iter()
                        .map(|t| {
                            let value = self.cell(format, *t).and_then(&figure);
                            (
                                t.to_string(),
                                value.map_or(Value::Null, |v| json!(round2(v))),
                            )
                        })
                        .collect();
                    (format.name().to_string(), Value::Object(by_threads))
                })
                .collect(),
        )
    }

    /// The figures' keys for this shape.
    pub fn to_json(&self) -> Map<String, Value> {
        let candle = |figure: Value| json!({ "candle": figure });
        let mut json = Map::new();
        json.insert("qgemv_gbps".into(), self.by_format(|c| Some(c.qgemv_gbps)));
        json.insert(
            "qgemv_vs_stream".into(),
            self.by_format(|c| Some(c.qgemv_vs_stream)),
        );
        json.insert(
            "peer_qgemv_gbps".into(),
            json!({
                "candle": self.by_format(|c| c.candle_gbps),
                "llamacpp": self.by_format(|c| c.llamacpp_gbps),
            }),
        );
        json.insert(
            "qgemv_vs_llamacpp".into(),
            self.by_format(|c| c.qgemv_vs_llamacpp),
        );
        json.insert(
            "llamacpp_from_dram".into(),
            self.by_format(|c| c.llamacpp_from_dram.map(|d| if d { 1.0 } else { 0.0 })),
        );
        json.insert("qgemm_gflops".into(), self.by_format(|c| c.qgemm_gflops));
        json.insert(
            "peer_qgemm_gflops".into(),
            candle(self.by_format(|c| c.candle_gflops)),
        );
        json.insert(
            "qgemv_vs_candle".into(),
            self.by_format(|c| c.qgemv_vs_candle),
        );
        json.insert(
            "qgemm_vs_candle".into(),
            self.by_format(|c| c.qgemm_vs_candle),
        );
        json.insert(
            "qstream_read_gbps".into(),
            self.by_format(|c| Some(c.read_gbps)),
        );
        json.insert(
            "qmatmul_rotation".into(),
            Value::Object(
                self.rotations
                    .iter()
                    .map(|(format, r)| {
                        let value = json!({"matrices": r.n_matrices, "bytes": r.total_bytes()});
                        (format.name().to_string(), value)
                    })
                    .collect(),
            ),
        );
        json
    }

    /// The cells of one shape read back from the keys [`ShapeResults::to_json`] wrote (a
    /// saved `perf --json`): every format (in [`WeightFormat::ALL`]'s order) and thread
    /// count that has a GEMV figure; a `null` or missing peer figure is absent. Errs when a
    /// figure is not a number in `0..=`[`MAX_FIGURE`] (a rate or ratio of 0 neither), a cell
    /// lacks its read or its ratio to it, a format or a thread count is not one `to_json`
    /// writes (`q4_k`, `01`), or the shape has no cell at all.
    pub fn from_json(
        shape: WeightShape,
        json: &Map<String, Value>,
    ) -> Result<ShapeResults, String> {
        let gemv = json
            .get("qgemv_gbps")
            .and_then(Value::as_object)
            .ok_or("`qgemv_gbps` is not an object")?;
        // The names as `to_json` writes them: `q4_k` would be read as no format at all.
        let written = |k: &String| WeightFormat::ALL.iter().any(|f| f.name() == k);
        if let Some(unknown) = gemv.keys().find(|k| !written(k)) {
            return Err(format!("`qgemv_gbps` has an unknown format {unknown:?}"));
        }
        no_orphan_figures(json, gemv)?;
        let mut cells = Vec::new();
        for format in WeightFormat::ALL {
            let name = format.name();
            let Some(by_threads) = gemv.get(name) else {
                continue;
            };
            let by_threads = by_threads
                .as_object()
                .ok_or_else(|| format!("`qgemv_gbps.{name}` is not an object"))?;
            let mut threads = Vec::new();
            for key in by_threads.keys() {
                match key.parse::<usize>() {
                    Ok(n) if n >= 1 && *key == n.to_string() => threads.push(n),
                    _ => {
                        return Err(format!(
                            "`qgemv_gbps.{name}` has {key:?}, not a thread count"
                        ));
                    }
                }
            }
            threads.sort_unstable();
            for n_threads in threads {
                let at = |path: &[&str]| figure(json, path, name, n_threads);
                // A rate or a ratio: 0 is no measurement.
                let rate = |path: &[&str]| -> Result<Option<f64>, String> {
                    match at(path)? {
                        Some(0.0) => Err(format!(
                            "`{}` {name} at {n_threads} threads is 0, not a measured figure",
                            path.join(".")
                        )),
                        other => Ok(other),
                    }
                };
                let needed = |path: &[&str]| {
                    rate(path)?.ok_or_else(|| {
                        format!(
                            "`{}` has no {name} figure at {n_threads} threads",
                            path.join(".")
                        )
                    })
                };
                let Some(qgemv_gbps) = rate(&["qgemv_gbps"])? else {
                    continue;
                };
                let llamacpp_from_dram = at(&["llamacpp_from_dram"])?;
                if llamacpp_from_dram.is_some_and(|v| v != 0.0 && v != 1.0) {
                    return Err(format!(
                        "`llamacpp_from_dram` {name} at {n_threads} threads is neither 0 nor 1"
                    ));
                }
                cells.push((
                    format,
                    n_threads,
                    Cell {
                        read_gbps: needed(&["qstream_read_gbps"])?,
                        qgemv_gbps,
                        qgemv_vs_stream: needed(&["qgemv_vs_stream"])?,
                        candle_gbps: rate(&["peer_qgemv_gbps", "candle"])?,
                        qgemv_vs_candle: rate(&["qgemv_vs_candle"])?,
                        qgemm_gflops: rate(&["qgemm_gflops"])?,
                        candle_gflops: rate(&["peer_qgemm_gflops", "candle"])?,
                        qgemm_vs_candle: rate(&["qgemm_vs_candle"])?,
                        llamacpp_gbps: match rate(&["peer_qgemv_gbps", "llamacpp"])? {
                            // Where it read its weights from decides what it is paired with.
                            Some(_) if llamacpp_from_dram.is_none() => {
                                return Err(format!(
                                    "`peer_qgemv_gbps.llamacpp` has a {name} figure at \
                                     {n_threads} threads but `llamacpp_from_dram` has none"
                                ));
                            }
                            figure => figure,
                        },
                        qgemv_vs_llamacpp: rate(&["qgemv_vs_llamacpp"])?,
                        llamacpp_from_dram: llamacpp_from_dram.map(|v| v != 0.0),
                    },
                ));
            }
        }
        if cells.is_empty() {
            return Err("no format has a GEMV figure".into());
        }
        Ok(ShapeResults {
            shape,
            cells,
            rotations: Vec::new(),
        })
    }

    /// This shape's cells at 1 and 2 threads (the goals' thread counts) as a Markdown table,
    /// as `docs/matmul-kernel.md` keeps each vendor's: a title, the table (`–` for a figure
    /// not measured; `c` after llama.cpp's rate where its buffer fitted the L3, both then
    /// from cache), and the goals met.
    pub fn to_markdown(&self) -> Vec<String> {
        let WeightShape { n_out, n_in } = self.shape;
        let mut lines = vec![
            format!(
                "{n_out} x {n_in}: GEMV ÷ read, ÷ candle, ÷ llama.cpp (c: both from cache), \
                 GEMM m = {GEMM_M} ÷ candle"
            ),
            String::new(),
            "| format | thr | GEMV GB/s | read GB/s | ÷ read | ÷ candle | llama.cpp GB/s | \
             ÷ llama.cpp | GEMM ÷ candle |"
                .to_string(),
            "|---|---|---|---|---|---|---|---|---|".to_string(),
        ];
        let text = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format!("{v:.2}"));
        for (format, n_threads, cell) in &self.cells {
            if *n_threads != 1 && *n_threads != 2 {
                continue;
            }
            let from_cache =
                if cell.llamacpp_from_dram == Some(false) && cell.llamacpp_gbps.is_some() {
                    " c"
                } else {
                    ""
                };
            lines.push(format!(
                "| {} | {} | {:.2} | {:.2} | {:.2} | {} | {}{from_cache} | {} | {} |",
                format.name(),
                n_threads,
                cell.qgemv_gbps,
                cell.read_gbps,
                cell.qgemv_vs_stream,
                text(cell.qgemv_vs_candle),
                text(cell.llamacpp_gbps),
                text(cell.qgemv_vs_llamacpp),
                text(cell.qgemm_vs_candle),
            ));
        }
        lines.push(String::new());
        lines.push(self.goals().markdown());
        lines
    }

    /// The table of this shape: one line per format and thread count, then the goals.
    pub fn to_table(&self, header: &str) -> Vec<String> {
        let WeightShape { n_out, n_in } = self.shape;
        let mut table = vec![
            String::new(),
            format!("qmatmul: W {n_out}x{n_in}, {header}"),
            format!(
                "{:<6} {:>3} {:>8} {:>8} {:>6} {:>8} {:>6} {:>8} {:>6} {:>5} | {:>8} {:>8} {:>6} {:>5}",
                "format",
                "thr",
                "read",
                "gemv",
                "÷read",
                "candle",
                "÷cndl",
                "llama",
                "÷llam",
                "8÷2",
                "gemm",
                "candle",
                "÷cndl",
                "8÷2"
            ),
            format!(
                "{:<6} {:>3} {:>8} {:>8} {:>6} {:>8} {:>6} {:>8} {:>6} {:>5} | {:>8} {:>8} {:>6} {:>5}",
                "",
                "",
                "GB/s",
                "GB/s",
                "",
                "GB/s",
                "",
                "GB/s",
                "",
                "",
                "GFLOP/s",
                "GFLOP/s",
                "",
                ""
            ),
        ];
        let cell_text = |v: Option<f64>, decimals: usize| {
            v.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
        };
        for (format, n_threads, cell) in &self.cells {
            let two = self.cell(*format, 2);
            let eight_vs_two = |figure: fn(&Cell) -> Option<f64>| {
                (*n_threads == 8)
                    .then(|| Some(figure(cell)? / figure(two?)?))
                    .flatten()
            };
            // A llama.cpp figure from cache is marked: it is paired with ours from cache.
            let llama = cell.llamacpp_gbps.map_or_else(
                || "-".to_string(),
                |v| match cell.llamacpp_from_dram {
                    Some(false) => format!("{v:.1}c"),
                    _ => format!("{v:.1}"),
                },
            );
            table.push(format!(
                "{:<6} {:>3} {:>8.1} {:>8.1} {:>6.2} {:>8} {:>6} {:>8} {:>6} {:>5} | {:>8} {:>8} {:>6} {:>5}",
                format.name(),
                n_threads,
                cell.read_gbps,
                cell.qgemv_gbps,
                cell.qgemv_vs_stream,
                cell_text(cell.candle_gbps, 1),
                cell_text(cell.qgemv_vs_candle, 2),
                llama,
                cell_text(cell.qgemv_vs_llamacpp, 2),
                cell_text(eight_vs_two(|c| Some(c.qgemv_gbps)), 2),
                cell_text(cell.qgemm_gflops, 1),
                cell_text(cell.candle_gflops, 1),
                cell_text(cell.qgemm_vs_candle, 2),
                cell_text(eight_vs_two(|c| c.qgemm_gflops), 2),
            ));
        }
        table.push(self.goals().line());
        table
    }

    /// How many cells meet each goal of the issue (at 1 and 2 threads; 8 against 2).
    pub fn goals(&self) -> Goals {
        let mut goals = Goals::default();
        for (format, n_threads, cell) in &self.cells {
            if *n_threads == 1 || *n_threads == 2 {
                goals.gemv_vs_read.count(Some(cell.qgemv_vs_stream >= 0.90));
                goals.gemv_vs_candle.count(
                    cell.qgemv_vs_candle
                        .map(|r| r >= 1.2 || cell.qgemv_vs_stream >= 0.95),
                );
                goals
                    .gemm_vs_candle
                    .count(cell.qgemm_vs_candle.map(|r| r >= 1.0));
                goals
                    .gemv_vs_llamacpp
                    .count(cell.qgemv_vs_llamacpp.map(|r| r >= 1.0));
            }
            if *n_threads == 8
                && let Some(two) = self.cell(*format, 2)
            {
                goals
                    .eight_vs_two
                    .count(Some(cell.qgemv_gbps >= 0.5 * two.qgemv_gbps));
            }
        }
        goals
    }
}

/// The figure at `json[path…][format][n_threads]`: `None` where it or a key on the way is
/// missing or `null`; an error where it is there but not a finite number.
/// The largest figure a report may hold, GB/s, GFLOP/s or ratio: a petabyte a second is no
/// measurement of this machine.
pub const MAX_FIGURE: f64 = 1e6;

fn figure(
    json: &Map<String, Value>,
    path: &[&str],
    format: &str,
    n_threads: usize,
) -> Result<Option<f64>, String> {
    // Missing or `null` on the way is "not measured"; anything else that is not an object
    // where one is expected (a string, a number, an array) is a broken report, not a gap.
    let threads = n_threads.to_string();
    let mut at = json.get(path[0]);
    let mut walked = vec![path[0]];
    for key in path.iter().skip(1).chain([&format, &threads.as_str()]) {
        at = match at {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => map.get(*key),
            Some(other) => {
                return Err(format!(
                    "`{}` is {}, not an object",
                    walked.join("."),
                    model_workload::shown(&other.to_string())
                ));
            }
        };
        walked.push(key);
    }
    match at {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|x| (0.0..=MAX_FIGURE).contains(x))
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "`{}` {format} at {n_threads} threads: {} is not a figure of 0 to {MAX_FIGURE}",
                    path.join("."),
                    model_workload::shown(&v.to_string())
                )
            }),
    }
}

/// Every figure key [`ShapeResults::from_json`] reads, as a path to its `{format: {threads}}`.
const FIGURE_PATHS: [&[&str]; 10] = [
    &["qstream_read_gbps"],
    &["qgemv_vs_stream"],
    &["peer_qgemv_gbps", "candle"],
    &["qgemv_vs_candle"],
    &["qgemm_gflops"],
    &["peer_qgemm_gflops", "candle"],
    &["qgemm_vs_candle"],
    &["peer_qgemv_gbps", "llamacpp"],
    &["qgemv_vs_llamacpp"],
    &["llamacpp_from_dram"],
];

/// Errs when a figure key holds a format or a thread count that `qgemv_gbps` does not (a
/// misspelt `q4_k`, a `"01"`, a cell whose GEMV figure is gone): such a figure would
/// otherwise be dropped from the table without a word.
fn no_orphan_figures(json: &Map<String, Value>, gemv: &Map<String, Value>) -> Result<(), String> {
    let has_gemv = |format: &str, threads: &str| {
        gemv.get(format)
            .and_then(|t| t.get(threads))
            .is_some_and(|v| !v.is_null())
    };
    for path in FIGURE_PATHS {
        let mut at = json.get(path[0]);
        for key in &path[1..] {
            at = at.and_then(|v| v.get(*key));
        }
        let Some(Value::Object(by_format)) = at else {
            continue;
        };
        for (format, by_threads) in by_format {
            let by_threads = match by_threads {
                Value::Object(by_threads) => by_threads,
                Value::Null => continue,
                other => {
                    return Err(format!(
                        "`{}.{format}` is {}, not an object",
                        path.join("."),
                        model_workload::shown(&other.to_string())
                    ));
                }
            };
            for (threads, value) in by_threads {
                if !value.is_null() && !has_gemv(format, threads) {
                    return Err(format!(
                        "`{}.{format}.{threads}` has a figure but `qgemv_gbps.{format}.{threads}` has none",
                        path.join(".")
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Cells that met a goal, out of the cells it was checked on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Cells that met it.
    pub met: usize,
    /// Cells it was checked on (a figure that is missing is not checked).
    pub checked: usize,
}

impl Tally {
    fn count(&mut self, met: Option<bool>) {
        if let Some(met) = met {
            self.checked += 1;
            self.met += usize::from(met);
        }
    }
}

/// The goals, each as a [`Tally`] over one shape's cells.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Goals {
    /// GEMV ≥ 0.90 × the read, at 1 and 2 threads.
    pub gemv_vs_read: Tally,
    /// GEMV ≥ 1.2 × candle's, or ≥ 0.95 × the read, at 1 and 2 threads.
    pub gemv_vs_candle: Tally,
    /// GEMM (m = 32) ≥ candle's, at 1 and 2 threads.
    pub gemm_vs_candle: Tally,
    /// GEMV ≥ llama.cpp's `MUL_MAT`, at 1 and 2 threads.
    pub gemv_vs_llamacpp: Tally,
    /// GEMV at 8 threads ≥ 0.5 × at 2 threads.
    pub eight_vs_two: Tally,
}

impl Goals {
    /// The goals of several shapes together.
    pub fn sum(goals: impl IntoIterator<Item = Goals>) -> Goals {
        let add = |a: Tally, b: Tally| Tally {
            met: a.met + b.met,
            checked: a.checked + b.checked,
        };
        goals.into_iter().fold(Goals::default(), |a, b| Goals {
            gemv_vs_read: add(a.gemv_vs_read, b.gemv_vs_read),
            gemv_vs_candle: add(a.gemv_vs_candle, b.gemv_vs_candle),
            gemm_vs_candle: add(a.gemm_vs_candle, b.gemm_vs_candle),
            gemv_vs_llamacpp: add(a.gemv_vs_llamacpp, b.gemv_vs_llamacpp),
            eight_vs_two: add(a.eight_vs_two, b.eight_vs_two),
        })
    }

    /// The goals of the 1- and 2-thread cells as one Markdown line.
    pub fn markdown(&self) -> String {
        let t = |t: Tally| format!("{} of {}", t.met, t.checked);
        format!(
            "Goals met (1 and 2 threads): GEMV ≥ 0.90 × read in {}; ≥ 1.2 × candle or ≥ 0.95 × \
             read in {}; ≥ llama.cpp in {}; GEMM m = {GEMM_M} ≥ candle in {}.",
            t(self.gemv_vs_read),
            t(self.gemv_vs_candle),
            t(self.gemv_vs_llamacpp),
            t(self.gemm_vs_candle),
        )
    }

    /// One line for the table.
    pub fn line(&self) -> String {
        let t = |t: Tally| format!("{}/{}", t.met, t.checked);
        format!(
            "goals met (1, 2 threads): gemv ≥ 0.90×read {}; gemv ≥ 1.2×candle or ≥ 0.95×read {}; \
             gemv ≥ llama.cpp {}; gemm m={GEMM_M} ≥ candle {}; gemv 8 thr ≥ 0.5×2 thr {} \
             (c: llama.cpp from cache, beside ours from cache)",
            t(self.gemv_vs_read),
            t(self.gemv_vs_candle),
            t(self.gemv_vs_llamacpp),
            t(self.gemm_vs_candle),
            t(self.eight_vs_two)
        )
    }
}

/// `v` rounded to two decimals, as every figure of the report.
fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests;
