//! GEMV/GEMM side by side: the same-size STREAM read, our kernels, and the peers (`faer`, the
//! `gemm` crate, and OpenBLAS with the `openblas` feature), interleaved in one process. The
//! contenders themselves are defined in [`crate::contenders`].
//!
//! Each round times a short block of hot calls of every contender, one contender after the
//! other (see `time`); the figures are medians over the rounds after a warm-up, so the VM's
//! slow bandwidth swings hit every contender alike. `gemv_vs_stream` is the median over
//! rounds of (read time ÷ GEMV time) of the same round; `gemv_vs_best_peer` and
//! `gemm_vs_faer` are paired the same way (peer time ÷ our time, the lowest over peers), and
//! the tables' ratio columns show these paired figures. Peers run with their parallelism set
//! to the thread count, on a rayon pool of that size (OpenBLAS through
//! `openblas_set_num_threads`).
//!
//! [`measure`] runs, for each thread count, `measure_threads` (GEMV rounds with the read,
//! the DRAM read, GEMM rounds) into one `Row`, then writes the rows as JSON (`to_json`) and
//! as a table (`to_table`).

use crate::contenders::{self, Matmul, Op, POLICY, Pools};
use crate::section::Section;
use auto_tuner::median;
use matmul_kernel::{GemmShape, HugePages, Kernel, WeightBuffer};
use serde_json::{Map, Value, json};
use std::hint::black_box;
use std::time::Instant;

/// Rows and columns of the GEMV/GEMM weight matrix.
pub const N: usize = 4096;
/// Tokens in the measured GEMM batch.
pub const GEMM_M: usize = 32;
/// The measured GEMM: a batch of [`GEMM_M`] tokens through the `N × N` weights.
pub const GEMM_SHAPE: GemmShape = GemmShape {
    m: GEMM_M,
    n_in: N,
    n_out: N,
};
/// Floats in the DRAM read buffer: 256 MiB, far more than any L3 this runs on.
const DRAM_FLOATS: usize = 64 << 20;

const GEMV_ROUNDS: usize = 21;
const GEMM_ROUNDS: usize = 7;
const DRAM_ROUNDS: usize = 5;
const GEMV_WARMUP_ROUNDS: usize = 2;
const GEMM_WARMUP_ROUNDS: usize = 1;

/// Deterministic values in [-1, 1).
pub fn values(seed: u32, n: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

/// Untimed calls that start each contender's block in a round.
const BLOCK_WARM_CALLS: usize = 2;
/// Timed calls per block; the block's figure is their median.
const BLOCK_TIMED_CALLS: usize = 3;

/// Seconds per call of `f`, in a block of back-to-back calls: [`BLOCK_WARM_CALLS`] untimed,
/// then the median of [`BLOCK_TIMED_CALLS`] timed ones. The untimed calls wake the contender's
/// threads and let the previous contender's threads stop spinning, so every contender is
/// timed hot, as in a decode loop. On this 2-vCPU VM a thread parked for milliseconds takes
/// up to ~1.5 ms to run again, and a peer's threads that still spin after its call slow the
/// next contender's workers; single interleaved calls charged both to whoever ran next.
pub(crate) fn time(mut f: impl FnMut()) -> f64 {
    for _ in 0..BLOCK_WARM_CALLS {
        f();
    }
    let samples: Vec<f64> = (0..BLOCK_TIMED_CALLS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    median(&samples)
}

/// Warns on stderr when a peer's result is far from ours (a wrong stride, not rounding).
fn check_close(what: &str, ours: &[f32], theirs: &[f32]) {
    let worst = ours
        .iter()
        .zip(theirs)
        .map(|(a, b)| (a - b).abs() / (1.0 + a.abs()))
        .fold(0.0f32, f32::max);
    if worst > 1e-3 {
        eprintln!("perf: {what} differs from ours by {worst} (relative)");
    }
}

/// A `{"1": v, "2": v, …}` object from `(n_threads, value)` pairs.
fn by_threads(values: &[(usize, f64)]) -> Value {
    Value::Object(
        values
            .iter()
            .map(|(t, v)| (t.to_string(), json!((v * 100.0).round() / 100.0)))
            .collect(),
    )
}

/// The inputs of the report, built once for every thread count.
struct Operands {
    /// The `N × N` weights.
    w: WeightBuffer,
    /// A buffer of the weights' size for the same-size read.
    read_buf: WeightBuffer,
    /// A [`DRAM_FLOATS`] buffer for the DRAM read.
    dram_buf: WeightBuffer,
    /// One token.
    x: Vec<f32>,
    /// [`GEMM_M`] tokens.
    xm: Vec<f32>,
}

impl Operands {
    fn new() -> Self {
        let buffer = |seed, n| WeightBuffer::from_slice(&values(seed, n)).expect("weight buffer");
        Operands {
            w: buffer(1, N * N),
            read_buf: buffer(2, N * N),
            dram_buf: buffer(3, DRAM_FLOATS),
            x: values(4, N),
            xm: values(5, GEMM_M * N),
        }
    }
}

/// The seconds per call of every round kept: the reference (the read, for GEMV), ours, and
/// each peer in [`Matmul::peers`] order.
#[derive(Default)]
pub(crate) struct RoundTimes {
    pub(crate) reference: Vec<f64>,
    pub(crate) ours: Vec<f64>,
    pub(crate) peers: Vec<Vec<f64>>,
}

/// Times `op` by `ours` and every peer, interleaved: each round times the `reference`
/// block (if any), then ours, then each peer in turn. The first `warmup` rounds are not
/// kept; in the first round each peer's result is checked against ours.
pub(crate) fn interleaved_rounds(
    op: Op,
    pools: &Pools,
    (ours, peers): (Matmul, &[Matmul]),
    (w, x, y_len): (&[f32], &[f32], usize),
    (warmup, kept): (usize, usize),
    mut reference: Option<&mut dyn FnMut() -> f64>,
) -> RoundTimes {
    let mut times = RoundTimes {
        peers: vec![Vec::new(); peers.len()],
        ..RoundTimes::default()
    };
    let mut y = vec![0.0f32; y_len];
    let mut y_peer = vec![0.0f32; y_len];
    for round in 0..warmup + kept {
        let keep = round >= warmup;
        if let Some(reference) = reference.as_mut() {
            let dt = reference();
            if keep {
                times.reference.push(dt);
            }
        }
        let dt = time(|| ours.run(op, pools, w, x, &mut y));
        black_box(&y);
        if keep {
            times.ours.push(dt);
        }
        for (peer, peer_times) in peers.iter().zip(&mut times.peers) {
            let dt = peer.enter(pools, || time(|| peer.run(op, pools, w, x, &mut y_peer)));
            black_box(&y_peer);
            if keep {
                peer_times.push(dt);
            }
            if round == 0 {
                check_close(&format!("{} {}", peer.name(), op.name()), &y, &y_peer);
            }
        }
    }
    times
}

/// GB/s of our read of the [`DRAM_FLOATS`] buffer, the median over the rounds after the
/// warm-up.
fn dram_read_gbps(pools: &Pools, dram_buf: &[f32]) -> f64 {
    let mut sums = vec![0.0f32; N];
    let mut times = Vec::with_capacity(DRAM_ROUNDS);
    for round in 0..GEMV_WARMUP_ROUNDS + DRAM_ROUNDS {
        let dt = time(|| contenders::stream_read(pools, dram_buf, &mut sums));
        black_box(&sums);
        if round >= GEMV_WARMUP_ROUNDS {
            times.push(dt);
        }
    }
    (DRAM_FLOATS * size_of::<f32>()) as f64 / median(&times) / 1e9
}

/// The median over rounds of `theirs[round] / ours[round]`: how many times longer they took,
/// each round paired with itself so that a bandwidth swing between rounds cancels out.
pub(crate) fn paired_ratio(ours: &[f64], theirs: &[f64]) -> f64 {
    let ratios: Vec<f64> = theirs.iter().zip(ours).map(|(t, o)| t / o).collect();
    median(&ratios)
}

/// The figures of one thread count.
struct Row {
    n_threads: usize,
    read_gbps: f64,
    gemv_gbps: f64,
    /// Read time ÷ GEMV time, paired by round.
    gemv_vs_stream: f64,
    /// Per peer, in [`Matmul::peers`] order.
    peer_gemv_gbps: Vec<f64>,
    /// The lowest paired peer time ÷ our time over the peers.
    gemv_vs_best_peer: f64,
    dram_gbps: f64,
    gemm_gflops: f64,
    /// Per peer, in [`Matmul::peers`] order.
    peer_gemm_gflops: Vec<f64>,
    /// faer's time ÷ ours, paired by round.
    gemm_vs_faer: f64,
}

/// Measures GEMV (with the same-size read), the DRAM read and GEMM on `n_threads`.
fn measure_threads(n_threads: usize, ops: &Operands, ours: Matmul, peers: &[Matmul]) -> Row {
    let pools = Pools::new(n_threads);
    let w_bytes = (N * N * size_of::<f32>()) as f64;
    let gemm_flops = 2.0 * (GEMM_M * N * N) as f64;
    let gbps = |times: &mut Vec<f64>| w_bytes / median(times) / 1e9;
    let gflops = |times: &mut Vec<f64>| gemm_flops / median(times) / 1e9;

    let mut sums = vec![0.0f32; N];
    let mut read = || {
        let dt = time(|| contenders::stream_read(&pools, &ops.read_buf, &mut sums));
        black_box(&sums);
        dt
    };
    let mut gemv = interleaved_rounds(
        Op::Gemv,
        &pools,
        (ours, peers),
        (&ops.w, &ops.x, N),
        (GEMV_WARMUP_ROUNDS, GEMV_ROUNDS),
        Some(&mut read),
    );
    let dram_gbps = dram_read_gbps(&pools, &ops.dram_buf);
    let mut gemm = interleaved_rounds(
        Op::Gemm(GEMM_SHAPE),
        &pools,
        (ours, peers),
        (&ops.w, &ops.xm, GEMM_M * N),
        (GEMM_WARMUP_ROUNDS, GEMM_ROUNDS),
        None,
    );

    let faer = peers
        .iter()
        .position(|peer| *peer == Matmul::Peer(contenders::Peer::Faer))
        .expect("faer is always a peer");
    // Paired ratios: round k of ours against round k of the reference.
    let gemv_vs_stream = paired_ratio(&gemv.ours, &gemv.reference);
    let gemv_vs_best_peer = gemv
        .peers
        .iter()
        .map(|theirs| paired_ratio(&gemv.ours, theirs))
        .fold(f64::INFINITY, f64::min);
    let gemm_vs_faer = paired_ratio(&gemm.ours, &gemm.peers[faer]);
    Row {
        n_threads,
        read_gbps: gbps(&mut gemv.reference),
        gemv_gbps: gbps(&mut gemv.ours),
        gemv_vs_stream,
        peer_gemv_gbps: gemv.peers.iter_mut().map(gbps).collect(),
        gemv_vs_best_peer,
        dram_gbps,
        gemm_gflops: gflops(&mut gemm.ours),
        peer_gemm_gflops: gemm.peers.iter_mut().map(gflops).collect(),
        gemm_vs_faer,
    }
}

/// The report's JSON keys (see `docs/matmul-kernel.md`).
fn to_json(rows: &[Row], peers: &[Matmul], isa: Kernel, huge: &HugePages) -> Map<String, Value> {
    let column = |value: fn(&Row) -> f64| {
        by_threads(
            &rows
                .iter()
                .map(|row| (row.n_threads, value(row)))
                .collect::<Vec<_>>(),
        )
    };
    let per_peer = |values: fn(&Row) -> &[f64]| {
        Value::Object(
            peers
                .iter()
                .enumerate()
                .map(|(p, peer)| {
                    let by_row: Vec<(usize, f64)> = rows
                        .iter()
                        .map(|row| (row.n_threads, values(row)[p]))
                        .collect();
                    (peer.name(), by_threads(&by_row))
                })
                .collect(),
        )
    };
    let mut json = Map::new();
    json.insert("stream_read_gbps".into(), column(|row| row.read_gbps));
    json.insert("gemv_gbps".into(), column(|row| row.gemv_gbps));
    json.insert("gemv_vs_stream".into(), column(|row| row.gemv_vs_stream));
    json.insert("peer_gemv_gbps".into(), per_peer(|row| &row.peer_gemv_gbps));
    json.insert("gemm_gflops".into(), column(|row| row.gemm_gflops));
    json.insert(
        "peer_gemm_gflops".into(),
        per_peer(|row| &row.peer_gemm_gflops),
    );
    json.insert(
        "gemv_vs_best_peer".into(),
        column(|row| row.gemv_vs_best_peer),
    );
    json.insert("gemm_vs_faer".into(), column(|row| row.gemm_vs_faer));
    json.insert("dram_read_gbps".into(), column(|row| row.dram_gbps));
    json.insert("matmul_kernel".into(), json!(isa.isa().name()));
    json.insert("matmul_policy".into(), json!(POLICY.name()));
    json.insert("weight_huge_pages".into(), json!(huge.granted()));
    json
}

/// The human table: a GEMV table, a GEMM table and the DRAM read line.
fn to_table(rows: &[Row], peers: &[Matmul], isa: Kernel, huge: &HugePages) -> Vec<String> {
    let peer_header: String = peers.iter().map(|p| format!("{:>9}", p.name())).collect();
    let peer_columns =
        |values: &[f64]| -> String { values.iter().map(|v| format!("{v:>9.1}")).collect() };
    let mut table = vec![
        String::new(),
        format!(
            "matmul: W {N}x{N} f32 (64 MiB), kernel {isa}, policy {POLICY}, huge pages {}",
            if huge.granted() {
                "granted"
            } else {
                "not granted"
            }
        ),
        format!(
            "{:>7} {:>9} {:>9} {:>8} {peer_header}  {:>9}",
            "threads", "read GB/s", "gemv GB/s", "gemv/rd", "vs best"
        ),
    ];
    for row in rows {
        table.push(format!(
            "{:>7} {:>9.1} {:>9.1} {:>8.2} {}  {:>8.2}x",
            row.n_threads,
            row.read_gbps,
            row.gemv_gbps,
            row.gemv_vs_stream,
            peer_columns(&row.peer_gemv_gbps),
            row.gemv_vs_best_peer
        ));
    }
    table.push(format!(
        "{:>7} {:>9} {peer_header} {:>9}   (GEMM m={GEMM_M}, GFLOP/s)",
        "threads", "ours", "vs faer"
    ));
    for row in rows {
        table.push(format!(
            "{:>7} {:>9.1} {} {:>8.2}x",
            row.n_threads,
            row.gemm_gflops,
            peer_columns(&row.peer_gemm_gflops),
            row.gemm_vs_faer
        ));
    }
    table.push(format!(
        "DRAM read (256 MiB) GB/s: {}",
        rows.iter()
            .map(|row| format!("{} thr {:.1}", row.n_threads, row.dram_gbps))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    table
}

/// Measures GEMV/GEMM and the reads at each thread count.
pub fn measure(thread_counts: &[usize]) -> Section {
    let isa = matmul_kernel::selected();
    let ops = Operands::new();
    let huge = ops.w.huge_pages();
    let peers = Matmul::peers();
    let rows: Vec<Row> = thread_counts
        .iter()
        .map(|&n_threads| measure_threads(n_threads, &ops, Matmul::Ours(isa), &peers))
        .collect();
    Section {
        json: to_json(&rows, &peers, isa, &huge),
        table: to_table(&rows, &peers, isa, &huge),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_paired_by_round() {
        // Unpaired medians would give 2 / 10; each round, though, the peer took twice as long.
        assert_eq!(paired_ratio(&[1.0, 10.0, 10.0], &[2.0, 20.0, 20.0]), 2.0);
        assert_eq!(paired_ratio(&[1.0, 10.0, 10.0], &[2.0, 20.0, 2.0]), 2.0);
    }

    #[test]
    fn report_has_every_documented_key_per_thread_count_and_peer() {
        let peers = Matmul::peers();
        let row = |n_threads| Row {
            n_threads,
            read_gbps: 10.0,
            gemv_gbps: 9.0,
            gemv_vs_stream: 0.9,
            peer_gemv_gbps: vec![8.0; peers.len()],
            gemv_vs_best_peer: 1.1,
            dram_gbps: 7.0,
            gemm_gflops: 50.0,
            peer_gemm_gflops: vec![40.0; peers.len()],
            gemm_vs_faer: 1.25,
        };
        let rows = [row(1), row(2)];
        let huge = WeightBuffer::from_slice(&[0.0; 4]).unwrap().huge_pages();
        let json = to_json(&rows, &peers, portable(), &huge);
        for key in [
            "stream_read_gbps",
            "gemv_gbps",
            "gemv_vs_stream",
            "gemm_gflops",
            "gemv_vs_best_peer",
            "gemm_vs_faer",
            "dram_read_gbps",
        ] {
            assert_eq!(
                json[key],
                json!({"1": rows[0].value(key), "2": rows[1].value(key)}),
                "{key}"
            );
        }
        for key in ["peer_gemv_gbps", "peer_gemm_gflops"] {
            let by_peer = json[key].as_object().unwrap();
            let names: Vec<&str> = by_peer.keys().map(String::as_str).collect();
            assert!(
                names.contains(&"faer") && names.contains(&"gemm"),
                "{key}: {names:?}"
            );
            assert_eq!(by_peer.len(), peers.len(), "{key}");
        }
        assert_eq!(
            json["peer_gemm_gflops"]["faer"],
            json!({"1": 40.0, "2": 40.0})
        );
        assert_eq!(json["matmul_kernel"], json!("portable"));
        assert_eq!(json["matmul_policy"], json!(POLICY.name()));
        let table = to_table(&rows, &peers, portable(), &huge);
        assert_eq!(table.len(), 3 + rows.len() + 1 + rows.len() + 1);
    }

    fn portable() -> Kernel {
        matmul_kernel::Isa::Portable.token().unwrap()
    }

    impl Row {
        /// The value the JSON key `key` takes from this row, rounded as the report rounds.
        fn value(&self, key: &str) -> f64 {
            let value = match key {
                "stream_read_gbps" => self.read_gbps,
                "gemv_gbps" => self.gemv_gbps,
                "gemv_vs_stream" => self.gemv_vs_stream,
                "gemm_gflops" => self.gemm_gflops,
                "gemv_vs_best_peer" => self.gemv_vs_best_peer,
                "gemm_vs_faer" => self.gemm_vs_faer,
                "dram_read_gbps" => self.dram_gbps,
                _ => unreachable!("no such key {key}"),
            };
            (value * 100.0).round() / 100.0
        }
    }
}
