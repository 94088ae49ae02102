//! GEMV/GEMM side by side: the same-size STREAM read, our kernels, and the peers (`faer`, the
//! `gemm` crate, and OpenBLAS with the `openblas` feature), interleaved in one process.
//!
//! Each round times a short block of hot calls of every contender, one contender after the
//! other (see `time`); the figures are medians over
//! the rounds after a warm-up, so the VM's slow bandwidth swings hit every contender alike.
//! `gemv_vs_stream` is the median over rounds of (read time ÷ GEMV time) of the same round;
//! `gemv_vs_best_peer` and `gemm_vs_faer` are paired the same way (peer time ÷ our time, the
//! lowest over peers), and the tables' ratio columns show these paired figures.
//! Peers run with their parallelism set to the thread count, on a rayon pool of that size
//! (OpenBLAS through `openblas_set_num_threads`).

use crate::Section;
use crate::stats::median;
use matmul_kernel::{GemmShape, WeightBuffer};
use serde_json::{Map, Value, json};
use std::hint::black_box;
use std::time::Instant;
use threadpool::{SchedulePolicy, ThreadPool};

/// Rows and columns of the GEMV/GEMM weight matrix.
pub const N: usize = 4096;
/// Tokens in the measured GEMM batch.
pub const GEMM_M: usize = 32;
/// The policy our kernels run under in this report.
pub const POLICY: SchedulePolicy = SchedulePolicy::Static;
/// Floats in the DRAM read buffer: 256 MiB, eight times this machine's 32 MiB L3.
const DRAM_FLOATS: usize = 64 << 20;

const GEMV_ROUNDS: usize = 21;
const GEMM_ROUNDS: usize = 7;
const WARMUP_ROUNDS: usize = 2;

/// OpenBLAS through its C interface (Debian's `libopenblas`).
#[cfg(feature = "openblas")]
mod openblas {
    #[link(name = "openblas")]
    unsafe extern "C" {
        pub fn openblas_set_num_threads(n_threads: i32);
        pub fn cblas_sgemv(
            order: i32,
            trans: i32,
            m: i32,
            n: i32,
            alpha: f32,
            a: *const f32,
            lda: i32,
            x: *const f32,
            incx: i32,
            beta: f32,
            y: *mut f32,
            incy: i32,
        );
        #[allow(clippy::too_many_arguments)]
        pub fn cblas_sgemm(
            order: i32,
            trans_a: i32,
            trans_b: i32,
            m: i32,
            n: i32,
            k: i32,
            alpha: f32,
            a: *const f32,
            lda: i32,
            b: *const f32,
            ldb: i32,
            beta: f32,
            c: *mut f32,
            ldc: i32,
        );
    }
    pub const ROW_MAJOR: i32 = 101;
    pub const NO_TRANS: i32 = 111;
    pub const TRANS: i32 = 112;
}

/// The peers measured in this build.
pub fn peer_names() -> Vec<&'static str> {
    let mut names = vec!["faer", "gemm"];
    if cfg!(feature = "openblas") {
        names.push("openblas");
    }
    names
}

/// `y = W·x` by a peer on `n_threads` (call it inside a rayon pool of that size).
pub fn peer_gemv(peer: &str, n_threads: usize, w: &[f32], x: &[f32], y: &mut [f32]) {
    let (n_out, n_in) = (y.len(), x.len());
    match peer {
        "faer" => {
            use faer::{Accum, MatMut, MatRef, Par};
            let par = if n_threads == 1 {
                Par::Seq
            } else {
                Par::rayon(n_threads)
            };
            faer::linalg::matmul::matmul(
                MatMut::from_column_major_slice_mut(y, n_out, 1),
                Accum::Replace,
                MatRef::from_row_major_slice(w, n_out, n_in),
                MatRef::from_column_major_slice(x, n_in, 1),
                1.0f32,
                par,
            );
        }
        "gemm" => {
            let par = if n_threads == 1 {
                gemm::Parallelism::None
            } else {
                gemm::Parallelism::Rayon(n_threads)
            };
            // SAFETY: the strides describe `y` (n_out × 1), `w` (n_out × n_in, row-major) and
            // `x` (n_in × 1) exactly; `y` is exclusively borrowed.
            unsafe {
                gemm::gemm(
                    n_out,
                    1,
                    n_in,
                    y.as_mut_ptr(),
                    n_out as isize,
                    1,
                    false,
                    w.as_ptr(),
                    1,
                    n_in as isize,
                    x.as_ptr(),
                    n_in as isize,
                    1,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    par,
                );
            }
        }
        #[cfg(feature = "openblas")]
        "openblas" => {
            use openblas::*;
            // SAFETY: row-major `w` (n_out × n_in, lda n_in), unit-stride `x` and `y` of the
            // stated lengths; `y` is exclusively borrowed.
            unsafe {
                openblas_set_num_threads(n_threads as i32);
                cblas_sgemv(
                    ROW_MAJOR,
                    NO_TRANS,
                    n_out as i32,
                    n_in as i32,
                    1.0,
                    w.as_ptr(),
                    n_in as i32,
                    x.as_ptr(),
                    1,
                    0.0,
                    y.as_mut_ptr(),
                    1,
                );
            }
        }
        _ => unreachable!("unknown peer {peer}"),
    }
}

/// `Y = X·Wᵀ` by a peer on `n_threads` (call it inside a rayon pool of that size).
pub fn peer_gemm(
    peer: &str,
    n_threads: usize,
    shape: GemmShape,
    w: &[f32],
    x: &[f32],
    y: &mut [f32],
) {
    let GemmShape { m, n_in, n_out } = shape;
    match peer {
        "faer" => {
            use faer::{Accum, MatMut, MatRef, Par};
            let par = if n_threads == 1 {
                Par::Seq
            } else {
                Par::rayon(n_threads)
            };
            faer::linalg::matmul::matmul(
                MatMut::from_row_major_slice_mut(y, m, n_out),
                Accum::Replace,
                MatRef::from_row_major_slice(x, m, n_in),
                MatRef::from_row_major_slice(w, n_out, n_in).transpose(),
                1.0f32,
                par,
            );
        }
        "gemm" => {
            let par = if n_threads == 1 {
                gemm::Parallelism::None
            } else {
                gemm::Parallelism::Rayon(n_threads)
            };
            // SAFETY: `y` is m × n_out row-major, `x` m × n_in row-major, and `Wᵀ` (n_in × n_out)
            // is `w` with row stride 1 and column stride n_in; `y` is exclusively borrowed.
            unsafe {
                gemm::gemm(
                    m,
                    n_out,
                    n_in,
                    y.as_mut_ptr(),
                    1,
                    n_out as isize,
                    false,
                    x.as_ptr(),
                    1,
                    n_in as isize,
                    w.as_ptr(),
                    n_in as isize,
                    1,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    par,
                );
            }
        }
        #[cfg(feature = "openblas")]
        "openblas" => {
            use openblas::*;
            // SAFETY: row-major X (m × n_in), W (n_out × n_in) used transposed, Y (m × n_out),
            // leading dimensions as stated; `y` is exclusively borrowed.
            unsafe {
                openblas_set_num_threads(n_threads as i32);
                cblas_sgemm(
                    ROW_MAJOR,
                    NO_TRANS,
                    TRANS,
                    m as i32,
                    n_out as i32,
                    n_in as i32,
                    1.0,
                    x.as_ptr(),
                    n_in as i32,
                    w.as_ptr(),
                    n_in as i32,
                    0.0,
                    y.as_mut_ptr(),
                    n_out as i32,
                );
            }
        }
        _ => unreachable!("unknown peer {peer}"),
    }
}

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
fn time(mut f: impl FnMut()) -> f64 {
    for _ in 0..BLOCK_WARM_CALLS {
        f();
    }
    let mut samples: Vec<f64> = (0..BLOCK_TIMED_CALLS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    median(&mut samples)
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

/// Measures GEMV/GEMM and the reads at each thread count.
pub fn measure(thread_counts: &[usize]) -> Section {
    let selection = matmul_kernel::selection();
    if let Some(warning) = selection.warning() {
        eprintln!("perf: warning: {warning}");
    }
    let isa = selection.kernel.isa();
    let w = WeightBuffer::from_slice(&values(1, N * N)).expect("weight buffer");
    let read_buf = WeightBuffer::from_slice(&values(2, N * N)).expect("read buffer");
    let dram_buf = WeightBuffer::from_slice(&values(3, DRAM_FLOATS)).expect("dram buffer");
    let huge = w.huge_pages();
    let x = values(4, N);
    let xm = values(5, GEMM_M * N);
    let shape = GemmShape {
        m: GEMM_M,
        n_in: N,
        n_out: N,
    };
    let w_bytes = (N * N * size_of::<f32>()) as f64;
    let gemm_flops = 2.0 * (GEMM_M * N * N) as f64;
    let peers = peer_names();

    let mut stream = Vec::new();
    let mut dram = Vec::new();
    let mut ours_gemv = Vec::new();
    let mut ratio = Vec::new();
    let mut vs_best_peer = Vec::new();
    let mut gemm_vs_faer = Vec::new();
    let mut ours_gemm = Vec::new();
    let mut peer_gemv_gbps: Vec<Vec<(usize, f64)>> = vec![Vec::new(); peers.len()];
    let mut peer_gemm_gflops: Vec<Vec<(usize, f64)>> = vec![Vec::new(); peers.len()];

    for &n_threads in thread_counts {
        let pool = ThreadPool::new(n_threads);
        let rayon_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n_threads)
            .build()
            .expect("rayon pool");
        let mut y = vec![0.0f32; N];
        let mut y_peer = vec![0.0f32; N];
        let mut sums = vec![0.0f32; N];
        let mut t_read = Vec::new();
        let mut t_gemv = Vec::new();
        let mut t_peer: Vec<Vec<f64>> = vec![Vec::new(); peers.len()];
        for round in 0..WARMUP_ROUNDS + GEMV_ROUNDS {
            let keep = round >= WARMUP_ROUNDS;
            let dt = time(|| {
                matmul_kernel::stream_read(&pool, POLICY, &read_buf, &mut sums).expect("read")
            });
            black_box(&sums);
            if keep {
                t_read.push(dt);
            }
            let dt =
                time(|| matmul_kernel::gemv_parallel(&pool, POLICY, &w, &x, &mut y).expect("gemv"));
            black_box(&y);
            if keep {
                t_gemv.push(dt);
            }
            for (p, peer) in peers.iter().enumerate() {
                let dt =
                    rayon_pool.install(|| time(|| peer_gemv(peer, n_threads, &w, &x, &mut y_peer)));
                black_box(&y_peer);
                if keep {
                    t_peer[p].push(dt);
                }
                if round == 0 {
                    check_close(&format!("{peer} gemv"), &y, &y_peer);
                }
            }
        }
        let mut t_dram = Vec::new();
        let mut dram_sums = vec![0.0f32; N];
        for round in 0..WARMUP_ROUNDS + 5 {
            let dt = time(|| {
                matmul_kernel::stream_read(&pool, POLICY, &dram_buf, &mut dram_sums).expect("read")
            });
            black_box(&dram_sums);
            if round >= WARMUP_ROUNDS {
                t_dram.push(dt);
            }
        }
        // The ratio is the median of each round's read time over its GEMV time: the two run
        // back to back, so a bandwidth swing between rounds cancels out.
        let mut paired: Vec<f64> = t_read.iter().zip(&t_gemv).map(|(r, g)| r / g).collect();
        let paired_ratio = median(&mut paired);
        let read_gbps = w_bytes / median(&mut t_read) / 1e9;
        let gemv_gbps = w_bytes / median(&mut t_gemv) / 1e9;
        stream.push((n_threads, read_gbps));
        ours_gemv.push((n_threads, gemv_gbps));
        ratio.push((n_threads, paired_ratio));
        dram.push((
            n_threads,
            (DRAM_FLOATS * 4) as f64 / median(&mut t_dram) / 1e9,
        ));
        // Ours against each peer, paired by round like the read ratio; the best peer is the
        // one with the lowest paired ratio.
        let paired_vs = |ours: &[f64], theirs: &[f64]| {
            let mut r: Vec<f64> = theirs.iter().zip(ours).map(|(p, o)| p / o).collect();
            median(&mut r)
        };
        let best = t_peer
            .iter()
            .map(|t| paired_vs(&t_gemv, t))
            .fold(f64::INFINITY, f64::min);
        vs_best_peer.push((n_threads, best));
        for (p, times) in t_peer.iter_mut().enumerate() {
            peer_gemv_gbps[p].push((n_threads, w_bytes / median(times) / 1e9));
        }

        let mut ym = vec![0.0f32; GEMM_M * N];
        let mut ym_peer = vec![0.0f32; GEMM_M * N];
        let mut t_gemm = Vec::new();
        let mut t_peer_gemm: Vec<Vec<f64>> = vec![Vec::new(); peers.len()];
        for round in 0..1 + GEMM_ROUNDS {
            let dt = time(|| {
                matmul_kernel::gemm_parallel(&pool, POLICY, shape, &w, &xm, &mut ym).expect("gemm")
            });
            black_box(&ym);
            if round > 0 {
                t_gemm.push(dt);
            }
            for (p, peer) in peers.iter().enumerate() {
                let dt = rayon_pool
                    .install(|| time(|| peer_gemm(peer, n_threads, shape, &w, &xm, &mut ym_peer)));
                black_box(&ym_peer);
                if round > 0 {
                    t_peer_gemm[p].push(dt);
                } else {
                    check_close(&format!("{peer} gemm"), &ym, &ym_peer);
                }
            }
        }
        gemm_vs_faer.push((n_threads, paired_vs(&t_gemm, &t_peer_gemm[0])));
        ours_gemm.push((n_threads, gemm_flops / median(&mut t_gemm) / 1e9));
        for (p, times) in t_peer_gemm.iter_mut().enumerate() {
            peer_gemm_gflops[p].push((n_threads, gemm_flops / median(times) / 1e9));
        }
    }

    let mut json = Map::new();
    json.insert("stream_read_gbps".into(), by_threads(&stream));
    json.insert("gemv_gbps".into(), by_threads(&ours_gemv));
    json.insert("gemv_vs_stream".into(), by_threads(&ratio));
    json.insert(
        "peer_gemv_gbps".into(),
        Value::Object(
            peers
                .iter()
                .zip(&peer_gemv_gbps)
                .map(|(p, v)| (p.to_string(), by_threads(v)))
                .collect(),
        ),
    );
    json.insert("gemm_gflops".into(), by_threads(&ours_gemm));
    json.insert(
        "peer_gemm_gflops".into(),
        Value::Object(
            peers
                .iter()
                .zip(&peer_gemm_gflops)
                .map(|(p, v)| (p.to_string(), by_threads(v)))
                .collect(),
        ),
    );
    json.insert("gemv_vs_best_peer".into(), by_threads(&vs_best_peer));
    json.insert("gemm_vs_faer".into(), by_threads(&gemm_vs_faer));
    json.insert("dram_read_gbps".into(), by_threads(&dram));
    json.insert("matmul_kernel".into(), json!(isa.name()));
    json.insert("matmul_policy".into(), json!(POLICY.name()));
    json.insert("weight_huge_pages".into(), json!(huge.granted()));

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
            "{:>7} {:>9} {:>9} {:>8} {}  {:>9}",
            "threads",
            "read GB/s",
            "gemv GB/s",
            "gemv/rd",
            peers.iter().map(|p| format!("{p:>9}")).collect::<String>(),
            "vs best"
        ),
    ];
    for (i, &(n_threads, read)) in stream.iter().enumerate() {
        table.push(format!(
            "{n_threads:>7} {read:>9.1} {:>9.1} {:>8.2} {}  {:>8.2}x",
            ours_gemv[i].1,
            ratio[i].1,
            peer_gemv_gbps
                .iter()
                .map(|v| format!("{:>9.1}", v[i].1))
                .collect::<String>(),
            vs_best_peer[i].1
        ));
    }
    table.push(format!(
        "{:>7} {:>9} {} {:>9}   (GEMM m={GEMM_M}, GFLOP/s)",
        "threads",
        "ours",
        peers.iter().map(|p| format!("{p:>9}")).collect::<String>(),
        "vs faer"
    ));
    for (i, &(n_threads, ours)) in ours_gemm.iter().enumerate() {
        table.push(format!(
            "{n_threads:>7} {ours:>9.1} {} {:>8.2}x",
            peer_gemm_gflops
                .iter()
                .map(|v| format!("{:>9.1}", v[i].1))
                .collect::<String>(),
            gemm_vs_faer[i].1
        ));
    }
    table.push(format!(
        "DRAM read (256 MiB) GB/s: {}",
        dram.iter()
            .map(|(t, v)| format!("{t} thr {v:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Section { json, table }
}
