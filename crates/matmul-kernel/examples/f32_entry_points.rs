//! The f32 entry points side by side: `Exec::gemv` / `Exec::gemm` on f32 slices (a `Vec`)
//! against `Exec::qgemv` / `Exec::qgemm` on the same weights in an f32 `WeightMatrix` (its own
//! 64-byte aligned buffer, which asks for huge pages), alternated call by call, at one and two
//! threads. Since revision 18 both run one f32 body per ISA, so what is left between them is
//! the buffers'; between two builds, run the same command with each and compare.
//!
//! `cargo run --release -p matmul-kernel --example f32_entry_points -- N_OUT N_IN M ROUNDS`
//! (`M = 1`: the GEMV; more: the GEMM on `M` rows of `x`). `F32_FORMAT=f16` (or `bf16`, or a
//! quantized format) puts the matrix in that format instead, for its `qgemv`/`qgemm` beside
//! the f32 slice's. Prints, per thread count, the medians in GB/s of each one's weight bytes and GFLOP/s, and
//! the matrix's speed ÷ the slice's.

use matmul_kernel::{Exec, GemmShape, WeightFormat, WeightMatrix, WeightShape};
use std::time::Instant;
use threadpool::ThreadPool;

/// `N_OUT N_IN M ROUNDS` from the command line, or why not.
fn args() -> Result<[usize; 4], String> {
    let values: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().map_err(|e| format!("{a:?}: {e}")))
        .collect::<Result<_, _>>()?;
    match values[..] {
        [n_out, n_in, m, rounds] if n_out > 0 && n_in > 0 && m > 0 && rounds > 0 => {
            Ok([n_out, n_in, m, rounds])
        }
        _ => Err("expected N_OUT N_IN M ROUNDS, each at least 1".into()),
    }
}

/// The median of `times`.
fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let [n_out, n_in, m, rounds] = args()?;
    let format: WeightFormat = std::env::var("F32_FORMAT")
        .unwrap_or_else(|_| "f32".into())
        .parse()
        .map_err(|e| format!("F32_FORMAT: {e:?}"))?;
    let w: Vec<f32> = (0..n_out * n_in)
        .map(|i| (i as f32 * 0.731).sin())
        .collect();
    let x: Vec<f32> = (0..m * n_in).map(|i| (i as f32 * 1.37).cos()).collect();
    let matrix = WeightMatrix::quantize(format, WeightShape { n_out, n_in }, &w)?;
    let mut y = vec![0.0f32; m * n_out];
    let (slice_bytes, matrix_bytes) = ((n_out * n_in * 4) as f64, matrix.as_bytes().len() as f64);
    let flops = 2.0 * (m * n_in * n_out) as f64;
    println!("{n_out} x {n_in}, m = {m}, {rounds} rounds; the matrix in {format}");
    for threads in [1, 2] {
        let pool = ThreadPool::new(threads);
        let exec = Exec::new().pool(&pool);
        let (mut slice, mut mat) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let start = Instant::now();
            if m == 1 {
                exec.gemv(&w, &x, &mut y)?;
            } else {
                exec.gemm(GemmShape { m, n_in, n_out }, &w, &x, &mut y)?;
            }
            slice.push(start.elapsed().as_secs_f64());
            let start = Instant::now();
            if m == 1 {
                exec.qgemv(&matrix, &x, &mut y)?;
            } else {
                exec.qgemm(&matrix, &x, &mut y)?;
            }
            mat.push(start.elapsed().as_secs_f64());
        }
        let (a, b) = (median(&mut slice), median(&mut mat));
        println!(
            "threads {threads}: slice {:.1} GB/s {:.1} GFLOP/s, matrix {:.1} GB/s {:.1} GFLOP/s, \
             matrix ÷ slice {:.2}",
            slice_bytes / a * 1e-9,
            flops / a * 1e-9,
            matrix_bytes / b * 1e-9,
            flops / b * 1e-9,
            a / b
        );
    }
    Ok(())
}
