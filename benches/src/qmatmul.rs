//! The quantized kernels side by side: our GEMV on every weight format, the read of as many
//! bytes, candle's quantized matmul on the same bytes and, when `LLAMA_CPP_BIN` names its
//! folder, llama.cpp's own `MUL_MAT` ([`llamacpp`]), at 4096 × 4096 and at the Llama-3-8B
//! FFN shapes 14336 × 4096 (up, gate) and 4096 × 14336 (down), interleaved in one run.
//!
//! For each shape and format the report builds a rotation of matrices whose bytes together
//! exceed 4 × the L3 ([`workload::Rotation`]), so every call reads its weights from DRAM; the
//! read rotates over a buffer of the same total size (summed as rows of [`READ_ROW_FLOATS`]),
//! and candle over its own copy of the same bytes. Then, per thread count, each round times a
//! block of read calls and our GEMVs in turn, call by call (a read, then a GEMV), and a block
//! of candle's GEMVs, each call on the next matrix, each block after a pause ([`SETTLE`]) and
//! untimed calls for [`WARM_UP`], each round starting with another contender. llama.cpp's
//! block is one `test-backend-ops` run of its own timing, paired with ours from DRAM where its
//! one buffer exceeds the L3, else with a block of ours on one matrix, from cache like its
//! own, after [`CACHED_WARM_UP`] of untimed calls. Then come rounds of one GEMM call (m = 32)
//! of ours and one of candle's, each after its pause and warm-up, every other round starting
//! with candle's. Rates are medians over the
//! rounds kept after a warm-up round; GEMV ÷ read is the median over rounds of the median
//! ratio of a round's pairs of calls (a neighbour's burst on a shared VM slows both calls of a
//! pair or neither); the peers' ratios are paired by round (the median over rounds of the
//! ratio within a round).
//!
//! candle runs in a worker process per thread count ([`candle_process`]), because it sizes
//! its thread pools once per process. [`report`] turns the figures into JSON keys and a
//! table; `docs/benchmarking.md` explains both.

pub mod candle_process;
pub mod llamacpp;
pub mod report;
pub mod timing;
pub mod workload;

use crate::contenders::{POLICY, candle, qgemm, qgemv, read};
use crate::matmul::paired_ratio;
use crate::section::Section;
use auto_tuner::median;
use candle_process::CandleProcess;
use llamacpp::LlamaCpp;
use matmul_kernel::{Kernel, MatmulError, WeightBuffer, WeightFormat, WeightMatrix, WeightShape};
use report::{Cell, Goals, ShapeResults};
use serde_json::{Value, json};
use std::hint::black_box;
use threadpool::ThreadPool;
use timing::{CACHED_WARM_UP, Rotor, WARM_UP, alternating_rounds, time_block, time_pairs};
use workload::{DOWN, FFN, GEMM_M, Rotation, SQUARE, activations, matrix_bytes, weight_set};

/// The version of candle measured (the `candle-core` requirement in the root manifest).
pub const CANDLE_VERSION: &str = "0.11";

/// How many rounds and calls the section times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// GEMV rounds timed, after one warm-up round.
    pub gemv_rounds: usize,
    /// GEMM rounds timed, after one warm-up round; each block is one call (tens to hundreds
    /// of milliseconds, long enough that waking the threads does not count). A compute-bound
    /// call's time moved 1.5–2.6× between runs on the shared 2-vCPU Xeon (ours at one thread
    /// 77–201 GFLOP/s at 4096 × 4096, candle's 109–162), so the ratio is the median of seven
    /// rounds' (five with `--quick`).
    pub gemm_rounds: usize,
    /// Timed calls per GEMV block, after one untimed call.
    pub gemv_calls: usize,
    /// The shapes measured.
    pub shapes: &'static [WeightShape],
}

impl Plan {
    /// The full report: the three shapes, 5 GEMV rounds of 3 calls, 7 GEMM rounds.
    pub const FULL: Plan = Plan {
        gemv_rounds: 5,
        gemm_rounds: 7,
        gemv_calls: 3,
        shapes: &[SQUARE, FFN, DOWN],
    };
    /// `--quick`: 4096 × 4096 only, fewer rounds.
    pub const QUICK: Plan = Plan {
        gemv_rounds: 3,
        gemm_rounds: 5,
        gemv_calls: 2,
        shapes: &[SQUARE],
    };
}

/// The JSON key of the object that holds the FFN shape's keys.
pub const FFN_KEY: &str = "qmatmul_ffn_14336x4096";
/// The JSON key of the object that holds the down projection's keys.
pub const DOWN_KEY: &str = "qmatmul_down_4096x14336";

/// The thread counts llama.cpp is measured at: the goals' (more threads than CPUs only
/// measure its spinning barrier).
pub const LLAMACPP_THREADS: [usize; 2] = [1, 2];

/// One thread count's contenders: our pool and candle's worker (or why there is none).
struct Contenders {
    n_threads: usize,
    pool: ThreadPool,
    candle: Result<CandleProcess, String>,
}

impl Contenders {
    fn new(n_threads: usize, warnings: &mut Vec<String>) -> Contenders {
        let candle = CandleProcess::spawn(n_threads)
            .and_then(|mut process| {
                let threads = process.threads()?;
                if threads != n_threads {
                    warnings.push(format!(
                        "candle runs on {threads} threads where {n_threads} were asked"
                    ));
                }
                Ok(process)
            })
            .map_err(|err| format!("candle worker of {n_threads} threads: {err}"));
        if let Err(err) = &candle {
            warnings.push(err.clone());
        }
        Contenders {
            n_threads,
            pool: ThreadPool::new(n_threads),
            candle,
        }
    }

    /// Runs `f` on candle's worker, or notes why it could not (and stops asking it).
    fn candle<R>(
        &mut self,
        warnings: &mut Vec<String>,
        f: impl FnOnce(&mut CandleProcess) -> std::io::Result<R>,
    ) -> Option<R> {
        ask_candle(&mut self.candle, self.n_threads, warnings, f)
    }
}

/// Runs `f` on `candle`'s worker (of `n_threads`), or notes why it could not (and leaves the
/// reason in `candle`, so that no one asks it again).
fn ask_candle<R>(
    candle: &mut Result<CandleProcess, String>,
    n_threads: usize,
    warnings: &mut Vec<String>,
    f: impl FnOnce(&mut CandleProcess) -> std::io::Result<R>,
) -> Option<R> {
    let process = candle.as_mut().ok()?;
    match f(process) {
        Ok(value) => Some(value),
        Err(err) => {
            let err = format!("candle, {n_threads} threads: {err}");
            warnings.push(err.clone());
            *candle = Err(err);
            None
        }
    }
}

/// What one format's rounds run on.
struct Operands<'a> {
    kernel: Kernel,
    set: &'a [WeightMatrix],
    /// The read's rotation: `set.len()` slices of the weights' byte size.
    read_slices: Vec<&'a [f32]>,
    /// The rows the read sums each slice as (see [`read_rows`]).
    read_rows: usize,
}

/// Floats per row of the read: 16 KiB, the rows of the f32 GEMV at 4096 inputs.
pub const READ_ROW_FLOATS: usize = 4096;

/// Pause before each contender's block: longer than our pool's spin budget and candle's
/// barrier spin (25 000 spins), so the previous contender's threads have parked and do not
/// take the CPUs of the next.
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(3);

/// The rows the read sums `matrix_floats` as: rows of [`READ_ROW_FLOATS`] where they divide
/// it, else the matrix's `n_out` rows. The read is the physical reference, so it reads in its
/// fastest layout: a quantized row is short (2304 bytes for a 4096-wide q4_0 row), and the
/// read's per-row work (4 rows at a time, one horizontal sum per row) would weigh in its
/// time.
pub fn read_rows(matrix_floats: usize, n_out: usize) -> usize {
    if matrix_floats > 0 && matrix_floats.is_multiple_of(READ_ROW_FLOATS) {
        matrix_floats / READ_ROW_FLOATS
    } else {
        n_out
    }
}

/// Measures every format at both shapes (or as `plan` says) and at each thread count.
pub fn measure(thread_counts: &[usize], plan: Plan) -> Section {
    let kernel = matmul_kernel::selected();
    let l3_bytes = device_profile::get_hardware_info().l3_total_bytes;
    let mut warnings = Vec::new();
    let llamacpp = match LlamaCpp::from_env(&mut warnings) {
        Ok(found) => found,
        Err(err) => {
            warnings.push(format!("llama.cpp: {err}"));
            None
        }
    };
    let mut contenders: Vec<Contenders> = thread_counts
        .iter()
        .map(|&n| Contenders::new(n, &mut warnings))
        .collect();
    let rotation =
        |format, shape| Rotation::new(matrix_bytes(format, shape).unwrap_or(0), l3_bytes);
    let read_floats = plan
        .shapes
        .iter()
        .flat_map(|shape| WeightFormat::ALL.map(|format| rotation(format, *shape).total_bytes()))
        .max()
        .unwrap_or(0) as usize
        / size_of::<f32>();
    let read_buf = filled_buffer(read_floats);

    let mut results = Vec::new();
    for &shape in plan.shapes {
        let mut shape_results = ShapeResults {
            shape,
            ..ShapeResults::default()
        };
        for format in WeightFormat::ALL {
            let rotation = rotation(format, shape);
            let built = read_buf
                .as_ref()
                .map_err(MatmulError::clone)
                .and_then(|read_buf| {
                    Ok((read_buf, weight_set(format, shape, rotation.n_matrices)?))
                });
            let (read_buf, set) = match built {
                Ok(built) => built,
                Err(err) => {
                    warnings.push(format!("{format} {shape:?}: {err}"));
                    continue;
                }
            };
            let matrix_floats = rotation.matrix_bytes as usize / size_of::<f32>();
            let ops = Operands {
                kernel,
                set: &set,
                read_slices: read_buf
                    .chunks_exact(matrix_floats)
                    .take(set.len())
                    .collect(),
                read_rows: read_rows(matrix_floats, shape.n_out),
            };
            shape_results.rotations.push((format, rotation));
            for (idx, contenders) in contenders.iter_mut().enumerate() {
                let llama = llamacpp
                    .as_ref()
                    .filter(|l| {
                        LLAMACPP_THREADS.contains(&contenders.n_threads)
                            && l.runs(contenders.n_threads)
                    })
                    .map(|l| (l, LlamaCpp::from_dram(rotation.matrix_bytes, l3_bytes)));
                let cell = measure_cell(contenders, &ops, llama, plan, idx == 0, &mut warnings);
                shape_results
                    .cells
                    .push((format, contenders.n_threads, cell));
            }
        }
        results.push(shape_results);
    }
    drop(contenders);
    let llamacpp_status = match &llamacpp {
        Some(l) => match l.stopped() {
            None => "measured (test-backend-ops MUL_MAT)".to_string(),
            Some(why) => format!("stopped after a run that failed: {why}"),
        },
        None => format!("absent: set {}=DIR to measure it", llamacpp::BIN_ENV),
    };
    section(&results, kernel, l3_bytes, &llamacpp_status, warnings)
}

/// A buffer of `n` floats, every page written (an untouched page reads as the shared zero
/// page, from cache).
fn filled_buffer(n: usize) -> Result<WeightBuffer, MatmulError> {
    let mut buf = WeightBuffer::zeroed(n)?;
    for (idx, v) in buf.iter_mut().enumerate() {
        *v = (idx % 251) as f32 * 1e-3;
    }
    Ok(buf)
}

/// The rounds of one format at one thread count.
fn measure_cell(
    contenders: &mut Contenders,
    ops: &Operands<'_>,
    llama: Option<(&LlamaCpp, bool)>,
    plan: Plan,
    check_product: bool,
    warnings: &mut Vec<String>,
) -> Cell {
    let first = &ops.set[0];
    let (format, shape) = (first.format(), first.shape());
    let n_matrices = ops.set.len();
    let loaded = contenders
        .candle(warnings, |candle| candle.load(format, shape, n_matrices))
        .is_some();
    let x = activations(1, shape.n_in);
    let mut y = vec![0.0f32; shape.n_out];
    if loaded && check_product {
        qgemv(ops.kernel, &contenders.pool, first, &x, &mut y);
        if let Some(theirs) = contenders.candle(warnings, |candle| candle.product(1)) {
            check_close(&format!("candle {format} gemv"), &y, &theirs, warnings);
        }
        let xm = activations(GEMM_M, shape.n_in);
        let mut ym = vec![0.0f32; GEMM_M * shape.n_out];
        qgemm(ops.kernel, &contenders.pool, first, &xm, &mut ym);
        if let Some(theirs) = contenders.candle(warnings, |candle| candle.product(GEMM_M)) {
            check_close(&format!("candle {format} gemm"), &ym, &theirs, warnings);
        }
    }

    let mut sums = vec![0.0f32; ops.read_rows];
    let mut rotor = Rotor::new(n_matrices);
    let (mut read_times, mut ours_times, mut candle_times) = (Vec::new(), Vec::new(), Vec::new());
    // Per round, the median of the read's time ÷ ours over its pairs of calls.
    let mut read_vs_ours = Vec::new();
    // llama.cpp's times, and ours on one matrix called over and over, as its one buffer is
    // (from cache where that fits the L3, and in part where it is a few times the L3).
    let (mut llama_times, mut one_matrix_times) = (Vec::new(), Vec::new());
    let mut llama = llama;
    let slots = if llama.is_some() { 3 } else { 2 };
    for round in 0..1 + plan.gemv_rounds {
        let keep = round > 0;
        // Each round starts with another contender, so that none always follows the same one.
        for slot in 0..slots {
            std::thread::sleep(SETTLE);
            match (round + slot) % slots {
                2 => {
                    let Some((llamacpp, _)) = llama else {
                        continue;
                    };
                    match llamacpp.time_gemv(format, shape, contenders.n_threads) {
                        Ok(dt) => keep.then(|| llama_times.push(dt)),
                        Err(err) => {
                            warnings.push(format!("llama.cpp: {err}"));
                            llama = None;
                            continue;
                        }
                    };
                    let mut one = Rotor::new(1);
                    let dt = time_block(&mut one, CACHED_WARM_UP, plan.gemv_calls, |_| {
                        qgemv(ops.kernel, &contenders.pool, &ops.set[0], &x, &mut y);
                        black_box(&y);
                    });
                    keep.then(|| one_matrix_times.push(dt));
                }
                0 => {
                    let pairs = time_pairs(
                        &mut rotor,
                        WARM_UP,
                        plan.gemv_calls,
                        |idx| {
                            read(
                                ops.kernel,
                                &contenders.pool,
                                ops.read_slices[idx],
                                &mut sums,
                            );
                            black_box(&sums);
                        },
                        |idx| {
                            qgemv(ops.kernel, &contenders.pool, &ops.set[idx], &x, &mut y);
                            black_box(&y);
                        },
                    );
                    if keep {
                        read_times.push(pairs.first);
                        ours_times.push(pairs.second);
                        read_vs_ours.push(pairs.ratio);
                    }
                }
                _ => {
                    let gemv = |c: &mut CandleProcess| c.time(1, WARM_UP, plan.gemv_calls);
                    if loaded && let Some(dt) = contenders.candle(warnings, gemv) {
                        keep.then(|| candle_times.push(dt));
                    }
                }
            }
        }
    }

    let xm = activations(GEMM_M, shape.n_in);
    let mut ym = vec![0.0f32; GEMM_M * shape.n_out];
    let mut gemm_rotor = Rotor::new(n_matrices);
    let Contenders {
        n_threads,
        pool,
        candle,
    } = contenders;
    let (ours_gemm_times, candle_gemm_times) = alternating_rounds(
        plan.gemm_rounds,
        SETTLE,
        || {
            Some(time_block(&mut gemm_rotor, WARM_UP, 1, |idx| {
                qgemm(ops.kernel, pool, &ops.set[idx], &xm, &mut ym);
                black_box(&ym);
            }))
        },
        || {
            let time = |c: &mut CandleProcess| c.time(GEMM_M, WARM_UP, 1);
            loaded.then(|| ask_candle(candle, *n_threads, warnings, time))?
        },
    );
    if loaded {
        contenders.candle(warnings, CandleProcess::unload);
    }

    let bytes = matrix_bytes(format, shape).unwrap_or(0) as f64;
    let flops = 2.0 * (GEMM_M * shape.n_out * shape.n_in) as f64;
    let llama_from_dram = llama.map(|(_, from_dram)| from_dram);
    // Ours like llama.cpp's: one matrix over and over, beside its one buffer. A buffer a few
    // times the L3 is still read in part from it (a 2-vCPU EPYC with 32 MiB: llama.cpp's q6_K
    // at 14336 x 4096, 48 MB, read 42.5 GB/s where our read from DRAM ran at 23).
    let ours_like_llama = &one_matrix_times;
    // A rate from the kept rounds' median; none when a contender has no figure.
    let rate =
        |per_call: f64, times: &[f64]| (!times.is_empty()).then(|| per_call / median(times) / 1e9);
    Cell {
        read_gbps: bytes / median(&read_times) / 1e9,
        qgemv_gbps: bytes / median(&ours_times) / 1e9,
        qgemv_vs_stream: median(&read_vs_ours),
        candle_gbps: rate(bytes, &candle_times),
        qgemv_vs_candle: (!candle_times.is_empty() && candle_times.len() == ours_times.len())
            .then(|| paired_ratio(&ours_times, &candle_times)),
        qgemm_gflops: rate(flops, &ours_gemm_times),
        candle_gflops: rate(flops, &candle_gemm_times),
        qgemm_vs_candle: (!candle_gemm_times.is_empty()
            && candle_gemm_times.len() == ours_gemm_times.len())
        .then(|| paired_ratio(&ours_gemm_times, &candle_gemm_times)),
        llamacpp_gbps: rate(bytes, &llama_times),
        qgemv_vs_llamacpp: (llama.is_some()
            && !llama_times.is_empty()
            && llama_times.len() == ours_like_llama.len())
        .then(|| paired_ratio(ours_like_llama, &llama_times)),
        llamacpp_from_dram: llama_from_dram.filter(|_| !llama_times.is_empty()),
    }
}

/// Notes when candle's product is far from ours ([`candle::far_from_ours`]).
fn check_close(what: &str, ours: &[f32], theirs: &[f32], warnings: &mut Vec<String>) {
    if let Some(gap) = candle::far_from_ours(ours, theirs) {
        warnings.push(format!("{what} differs from ours: {gap}"));
    }
}

/// The Markdown tables of a saved `perf --json`'s quantized section (4096 × 4096 at the top
/// level, the FFN and down shapes under [`FFN_KEY`] and [`DOWN_KEY`]), as
/// `docs/matmul-kernel.md` keeps each vendor's: each shape's table and goals, then the goals
/// of every shape together. Errs when `json` holds no quantized section or a figure that is
/// not a number.
pub fn markdown_tables(json: &Value) -> Result<Vec<String>, String> {
    let top = json.as_object().ok_or("not a JSON object")?;
    let mut lines = Vec::new();
    let mut goals = Vec::new();
    let shape_keys = |key: &str| match top.get(key) {
        None => Ok(None),
        Some(Value::Object(keys)) => Ok(Some(keys)),
        Some(_) => Err(format!("`{key}` is not an object")),
    };
    for (shape, keys) in [
        (SQUARE, Some(top)),
        (FFN, shape_keys(FFN_KEY)?),
        (DOWN, shape_keys(DOWN_KEY)?),
    ] {
        let Some(keys) = keys.filter(|k| k.contains_key("qgemv_gbps")) else {
            continue;
        };
        let WeightShape { n_out, n_in } = shape;
        let results =
            ShapeResults::from_json(shape, keys).map_err(|e| format!("{n_out} x {n_in}: {e}"))?;
        // A table of no row would count no goal, met or missed, without a word.
        if !results.cells.iter().any(|(_, n, _)| [1, 2].contains(n)) {
            return Err(format!(
                "{n_out} x {n_in}: no cell at 1 or 2 threads, the goals' thread counts"
            ));
        }
        if !lines.is_empty() {
            lines.push(String::new());
        }
        lines.extend(results.to_markdown());
        goals.push(results.goals());
    }
    if goals.is_empty() {
        return Err(
            "no quantized section (`qgemv_gbps`): not the JSON of `perf --json` with `qmatmul`"
                .into(),
        );
    }
    lines.push(String::new());
    lines.push(format!("All shapes. {}", Goals::sum(goals).markdown()));
    Ok(lines)
}

/// The largest report [`markdown_tables_from`] reads (a full one is a few tens of KiB).
const MAX_REPORT_BYTES: u64 = 16 << 20;

/// [`markdown_tables`] of the report saved at `path` (`perf --json`'s output), or why there
/// are none: the file not a readable regular file (a FIFO or a device is refused at once),
/// larger than 16 MiB, not JSON, or without the section.
pub fn markdown_tables_from(path: &std::path::Path) -> Result<Vec<String>, String> {
    let shown = path.display();
    // Its errors name the file.
    let bytes = regular_file::read(path, MAX_REPORT_BYTES).map_err(|e| e.to_string())?;
    let json: Value = model_workload::from_slice_unique_keys(&bytes)
        .map_err(|e| format!("{shown}: not JSON: {e}"))?;
    markdown_tables(&json).map_err(|e| format!("{shown}: {e}"))
}

/// The section: the square shape's keys at the top level, the FFN's under [`FFN_KEY`].
fn section(
    results: &[ShapeResults],
    kernel: Kernel,
    l3_bytes: u64,
    llamacpp: &str,
    warnings: Vec<String>,
) -> Section {
    let mut section = Section::default();
    let header = format!(
        "kernel {kernel}, policy {POLICY}, candle {CANDLE_VERSION}, llama.cpp {llamacpp}; each \
         rotation > {} x L3 ({} MiB)",
        workload::L3_MULTIPLE,
        l3_bytes >> 20
    );
    for results in results {
        let keys = results.to_json();
        if results.shape == SQUARE {
            section.json.extend(keys);
        } else {
            let WeightShape { n_out, n_in } = results.shape;
            let name = if results.shape == FFN {
                FFN_KEY.to_string()
            } else if results.shape == DOWN {
                DOWN_KEY.to_string()
            } else {
                format!("qmatmul_{n_out}x{n_in}")
            };
            section.json.insert(name, Value::Object(keys));
        }
        section.table.extend(results.to_table(&header));
    }
    section
        .table
        .extend(warnings.iter().map(|w| format!("qmatmul warning: {w}")));
    section.json.insert(
        "qmatmul".into(),
        json!({
            "kernel": kernel.isa().name(),
            "policy": POLICY.name(),
            "gemm_m": GEMM_M,
            "l3_bytes": l3_bytes,
            "candle": CANDLE_VERSION,
            "llamacpp": llamacpp,
            "warnings": warnings,
        }),
    );
    section
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of q4_0 at 1 and 2 threads: `ratio` its GEMV ÷ read at both, the square
    /// shape at the top level and the FFN's under its key.
    fn report(ratio: f64) -> Value {
        let shape = |ratio: f64| {
            json!({
                "qgemv_gbps": {"q4_0": {"1": 20.0, "2": 30.0}},
                "qstream_read_gbps": {"q4_0": {"1": 22.0, "2": 33.0}},
                "qgemv_vs_stream": {"q4_0": {"1": ratio, "2": ratio}},
                "qgemv_vs_candle": {"q4_0": {"1": 3.0, "2": null}},
                "qgemm_vs_candle": {"q4_0": {"1": 1.5, "2": 0.9}},
            })
        };
        let mut top = shape(ratio);
        top[FFN_KEY] = shape(0.5);
        top["qmatmul"] = json!({"kernel": "avx512-vnni"});
        top
    }

    #[test]
    fn markdown_tables_give_every_shape_and_the_goals_of_all() {
        let lines = markdown_tables(&report(0.95)).unwrap();
        let titles: Vec<&String> = lines
            .iter()
            .filter(|l| l.contains(": GEMV ÷ read"))
            .collect();
        assert_eq!(titles.len(), 2, "{lines:#?}");
        assert!(titles[0].starts_with("4096 x 4096") && titles[1].starts_with("14336 x 4096"));
        assert!(
            lines.contains(&"| q4_0 | 1 | 20.00 | 22.00 | 0.95 | 3.00 | – | – | 1.50 |".into())
        );
        // The square shape meets the read at both thread counts, the FFN at neither; one
        // GEMM ratio of two per shape; candle's missing at 2 threads is not counted.
        let all = lines.last().unwrap();
        assert!(all.starts_with("All shapes."), "{all}");
        assert!(all.contains("≥ 0.90 × read in 2 of 4"), "{all}");
        assert!(
            all.contains("≥ 1.2 × candle or ≥ 0.95 × read in 2 of 2"),
            "{all}"
        );
        assert!(all.contains("≥ llama.cpp in 0 of 0"), "{all}");
        assert!(all.contains("≥ candle in 2 of 4"), "{all}");
    }

    #[test]
    fn markdown_tables_refuse_what_is_not_a_report() {
        for bad in [json!([]), json!({}), json!({"dispatch_ns": {"2": 1.0}})] {
            let err = markdown_tables(&bad).unwrap_err();
            assert!(
                err.contains("not a JSON object") || err.contains("no quantized"),
                "{err}"
            );
        }
        let mut text_figure = report(0.9);
        text_figure[FFN_KEY]["qgemv_vs_stream"]["q4_0"]["2"] = json!("fast");
        let err = markdown_tables(&text_figure).unwrap_err();
        assert!(
            err.starts_with("14336 x 4096: `qgemv_vs_stream` q4_0 at 2 threads"),
            "{err}"
        );
        // Reports that would count goals met on figures no run wrote.
        type Break = fn(&mut Value);
        let cases: [(&str, Break); 12] = [
            ("`qgemv_vs_candle.q4_k` is 3.0, not an object", |r| {
                r["qgemv_vs_candle"]["q4_k"] = json!(3.0);
            }),
            ("no cell at 1 or 2 threads", |r| {
                for key in ["qgemv_gbps", "qgemv_vs_stream", "qstream_read_gbps"] {
                    r[key] = json!({"q4_0": {"8": 9.0}});
                }
                for key in ["qgemv_vs_candle", "qgemm_gflops", "qgemm_vs_candle"] {
                    r[key] = json!({});
                }
                r["peer_qgemv_gbps"] = json!({});
                r["peer_qgemm_gflops"] = json!({});
            }),
            ("but `llamacpp_from_dram` has none", |r| {
                r["peer_qgemv_gbps"]["llamacpp"] = json!({"q4_0": {"1": 10.0}});
                r["llamacpp_from_dram"] = json!({});
            }),
            ("has a figure but `qgemv_gbps.q4_0.1` has none", |r| {
                r["qgemv_gbps"] = json!({});
            }),
            ("has a figure but `qgemv_gbps.q4_0.2` has none", |r| {
                r["qgemv_gbps"]["q4_0"]["2"] = Value::Null;
            }),
            ("`qgemv_vs_candle` is \"oops\", not an object", |r| {
                r["qgemv_vs_candle"] = json!("oops");
            }),
            ("unknown format \"q4_k\"", |r| {
                r["qgemv_gbps"]["q4_k"] = json!({"1": 9.0});
            }),
            ("has \"01\", not a thread count", |r| {
                r["qgemv_gbps"]["q4_0"]["01"] = json!(9.0);
            }),
            ("is not a figure of 0 to", |r| {
                r["qgemv_vs_stream"]["q4_0"]["1"] = json!(-0.5);
            }),
            ("is not a figure of 0 to", |r| {
                r["qgemv_vs_candle"]["q4_0"]["1"] = json!(1e308);
            }),
            ("is 0, not a measured figure", |r| {
                r["qstream_read_gbps"]["q4_0"]["1"] = json!(0.0);
            }),
            ("`qmatmul_down_4096x14336` is not an object", |r| {
                r[DOWN_KEY] = json!(7);
            }),
        ];
        for (why, break_it) in cases {
            let mut bad = report(0.9);
            break_it(&mut bad);
            let err = markdown_tables(&bad).expect_err(why);
            assert!(err.contains(why), "{why}: {err}");
        }
    }

    #[test]
    fn markdown_tables_from_a_file_bound_what_they_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf.json");
        std::fs::write(&path, report(0.9).to_string()).unwrap();
        assert_eq!(
            markdown_tables_from(&path).unwrap(),
            markdown_tables(&report(0.9)).unwrap()
        );
        std::fs::write(&path, "{\"qgemv_gbps\": ").unwrap();
        assert!(
            markdown_tables_from(&path)
                .unwrap_err()
                .contains("not JSON")
        );
        let big = std::fs::File::create(&path).unwrap();
        big.set_len(MAX_REPORT_BYTES + 1).unwrap();
        let err = markdown_tables_from(&path).unwrap_err();
        assert!(
            err.contains(&format!("above the limit of {MAX_REPORT_BYTES}")),
            "{err}"
        );
        let missing = dir.path().join("none.json");
        let err = markdown_tables_from(&missing).unwrap_err();
        assert!(err.starts_with(&missing.display().to_string()), "{err}");
        // A FIFO is refused at once, not read (which would wait for a writer).
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let err = markdown_tables_from(&fifo).unwrap_err();
        assert!(err.contains("is not a regular file"), "{err}");
    }

    #[test]
    fn the_read_sums_long_rows_of_the_same_bytes() {
        for format in WeightFormat::ALL {
            for shape in [SQUARE, FFN, DOWN] {
                let floats = matrix_bytes(format, shape).unwrap() as usize / size_of::<f32>();
                let rows = read_rows(floats, shape.n_out);
                assert_eq!(rows * READ_ROW_FLOATS, floats, "{format} {shape:?}");
            }
        }
        // Bytes that do not divide into 16 KiB rows keep the matrix's rows.
        assert_eq!(read_rows(3 * 1000, 3), 3);
        assert_eq!(read_rows(0, 5), 5);
    }
}
