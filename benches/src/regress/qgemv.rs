//! The GEMV checks of the weight formats other than f32: `gemv_<format>_vs_read`, our GEMV of
//! one matrix of at least 64 MiB (twice the CI machine's L3, as the f32 check's) ÷ the read of
//! as many bytes, both on [`N_THREADS`](super::N_THREADS) threads from DRAM and interleaved by
//! round.

use super::{Measured, N_THREADS, RunLength};
use crate::contenders::{qgemv, read};
use crate::matmul::{N, paired_ratio, time, values};
use crate::qmatmul::workload::{activations, weight_set};
use crate::qmatmul::{READ_ROW_FLOATS, read_rows};
use auto_tuner::median;
use matmul_kernel::{WeightBuffer, WeightFormat, WeightShape};
use std::hint::black_box;
use threadpool::ThreadPool;

/// The bytes of each check's matrix, at least: the f32 check's 4096² f32.
const MATRIX_BYTES: usize = N * N * size_of::<f32>();

/// The format a check name `gemv_<format>_vs_read` names with ggml's name, when it is not
/// f32 (whose check, `gemv_f32_vs_read`, is the f32 GEMV's own).
pub fn format_of(check: &str) -> Option<WeightFormat> {
    let name = check.strip_prefix("gemv_")?.strip_suffix("_vs_read")?;
    WeightFormat::ALL
        .into_iter()
        .find(|f| *f != WeightFormat::F32 && f.name() == name)
}

/// Read time ÷ GEMV time for `format`, paired by round: a `rows × 4096` matrix of `format`
/// with `rows` the fewest that make [`MATRIX_BYTES`], against the read of a buffer of the same
/// bytes summed as rows of 16 KiB (the perf report's read).
pub fn gemv_vs_read(format: WeightFormat, length: RunLength) -> Measured {
    let name = format!("gemv_{}_vs_read", format.name());
    let row_bytes = format
        .row_bytes(N)
        .expect("4096 is whole blocks of every format");
    let shape = WeightShape {
        n_out: MATRIX_BYTES.div_ceil(row_bytes),
        n_in: N,
    };
    let matrix = weight_set(format, shape, 1)
        .expect("a matrix of 64 MiB")
        .remove(0);
    let floats = matrix.as_bytes().len().div_ceil(READ_ROW_FLOATS * 4) * READ_ROW_FLOATS;
    let read_buf = WeightBuffer::from_slice(&values(2, floats)).expect("read buffer");
    let (pool, kernel) = (ThreadPool::new(N_THREADS), matmul_kernel::selected());
    let x = activations(1, N);
    let mut y = vec![0.0f32; shape.n_out];
    let mut sums = vec![0.0f32; read_rows(floats, shape.n_out)];
    let (mut ours, mut reference) = (Vec::new(), Vec::new());
    for round in 0..length.rounds(21) {
        let mut gemv = || {
            ours.push(time(|| {
                qgemv(kernel, &pool, &matrix, &x, &mut y);
                black_box(&y);
            }))
        };
        let mut stream = || {
            reference.push(time(|| {
                read(kernel, &pool, &read_buf, &mut sums);
                black_box(&sums);
            }))
        };
        // Each round starts with the other one.
        if round % 2 == 0 {
            gemv();
            stream();
        } else {
            stream();
            gemv();
        }
    }
    let gbps = |bytes: usize, t: &[f64]| bytes as f64 / median(t) / 1e9;
    Measured {
        name,
        ratio: paired_ratio(&ours, &reference),
        detail: format!(
            "gemv {:.1} GB/s, read {:.1} GB/s ({} x {N})",
            gbps(matrix.as_bytes().len(), &ours),
            gbps(floats * 4, &reference),
            shape.n_out
        ),
    }
}
