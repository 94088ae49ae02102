//! The GEMV checks of the weight formats other than f32: `gemv_<format>_vs_read`, our GEMV of
//! one matrix ÷ the read of as many bytes, both on [`N_THREADS`](super::run::N_THREADS) threads from
//! DRAM and strictly alternating.
//!
//! From DRAM means: each buffer is at least twice the L3 ([`matrix_bytes`]), and neither is
//! ever timed right after itself. Where the L3 holds most of one buffer (96 MiB on an EPYC
//! with stacked cache), a read timed right after a read finds it in the L3 and runs at cache
//! speed while the GEMV, compute-bound from cache, does not: a run with rounds that began
//! with the other side (read, read, GEMV, GEMV, …) measured the quantized reads at 102–112
//! GB/s beside an f32 read of 60 GB/s from DRAM in the same run, and every ratio ~0.4 low.

use super::run::{GEMV_ROUNDS, Measured, N_THREADS, RunLength};
use crate::contenders::{qgemv, read};
use crate::matmul::{N, paired_ratio, time, values};
use crate::qmatmul::workload::{activations, weight_set};
use crate::qmatmul::{READ_ROW_FLOATS, read_rows};
use auto_tuner::median;
use matmul_kernel::{WeightBuffer, WeightFormat, WeightShape};
use std::hint::black_box;
use threadpool::ThreadPool;

/// The bytes of each check's matrix, at least: the f32 check's 4096² f32.
const MIN_MATRIX_BYTES: usize = N * N * size_of::<f32>();

/// The most bytes of each check's matrix (its read buffer is as large): an L3 over 256 MiB
/// is left partly resident rather than the run allocating more.
const MAX_MATRIX_BYTES: usize = 512 << 20;

/// The bytes of a check's matrix on a machine with `l3_bytes` of L3: twice the L3, so that
/// the matrix and the read buffer timed between two of its calls (four L3s together) evict
/// each other, within [`MIN_MATRIX_BYTES`] and [`MAX_MATRIX_BYTES`].
pub fn matrix_bytes(l3_bytes: u64) -> usize {
    let twice = usize::try_from(l3_bytes.saturating_mul(2)).unwrap_or(usize::MAX);
    twice.clamp(MIN_MATRIX_BYTES, MAX_MATRIX_BYTES)
}

/// The format a check name `gemv_<format>_vs_read` names with ggml's name, when it is not
/// f32 (whose check, `gemv_f32_vs_read`, is the f32 GEMV's own).
pub fn format_of(check: &str) -> Option<WeightFormat> {
    let name = check.strip_prefix("gemv_")?.strip_suffix("_vs_read")?;
    WeightFormat::ALL
        .into_iter()
        .find(|f| *f != WeightFormat::F32 && f.name() == name)
}

/// Read time ÷ GEMV time for `format`, paired by round: a `rows × 4096` matrix of `format`
/// with `rows` the fewest that make [`matrix_bytes`] of this machine's L3, against the read
/// of a buffer of the same bytes summed as rows of 16 KiB (the perf report's read).
pub fn gemv_vs_read(format: WeightFormat, length: RunLength) -> Measured {
    let l3_bytes = device_profile::get_hardware_info().l3_total_bytes;
    let matrix_bytes = matrix_bytes(l3_bytes);
    let name = format!("gemv_{}_vs_read", format.name());
    let row_bytes = format
        .row_bytes(N)
        .expect("4096 is whole blocks of every format");
    let shape = WeightShape {
        n_out: matrix_bytes.div_ceil(row_bytes),
        n_in: N,
    };
    let matrix = weight_set(format, shape, 1)
        .expect("a matrix of at most 512 MiB")
        .remove(0);
    let floats = matrix.as_bytes().len().div_ceil(READ_ROW_FLOATS * 4) * READ_ROW_FLOATS;
    let read_buf = WeightBuffer::from_slice(&values(2, floats)).expect("read buffer");
    let (pool, kernel) = (ThreadPool::new(N_THREADS), matmul_kernel::selected());
    let x = activations(1, N);
    let mut y = vec![0.0f32; shape.n_out];
    let mut sums = vec![0.0f32; read_rows(floats, shape.n_out)];
    let (mut ours, mut reference) = (Vec::new(), Vec::new());
    // GEMV, read, GEMV, read, …: each is timed right after the other buffer, never after
    // itself (see the module's docs); the first pair warms both up and is not kept.
    for round in 0..=length.rounds(GEMV_ROUNDS) {
        let gemv = time(|| {
            qgemv(kernel, &pool, &matrix, &x, &mut y);
            black_box(&y);
        });
        let stream = time(|| {
            read(kernel, &pool, &read_buf, &mut sums);
            black_box(&sums);
        });
        if round > 0 {
            ours.push(gemv);
            reference.push(stream);
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

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_check_s_matrix_is_twice_the_l3_within_its_bounds() {
        // This VM's 32 MiB L3 (and an undetected one): the f32 check's 64 MiB.
        assert_eq!(matrix_bytes(32 * MIB), 64 << 20);
        assert_eq!(matrix_bytes(0), 64 << 20);
        // An EPYC with stacked cache (96 MiB per CCD), a Xeon's 105 MiB: twice theirs, so a
        // read timed after the GEMV of the other buffer finds nothing of its own in the L3.
        assert_eq!(matrix_bytes(96 * MIB), 192 << 20);
        assert_eq!(matrix_bytes(105 * MIB), 210 << 20);
        // A huge L3 (or a bogus figure) stops at the bound rather than allocating it.
        assert_eq!(matrix_bytes(1 << 40), MAX_MATRIX_BYTES);
        assert_eq!(matrix_bytes(u64::MAX), MAX_MATRIX_BYTES);
    }

    #[test]
    fn every_format_but_f32_has_a_check_name() {
        for format in WeightFormat::ALL {
            let name = format!("gemv_{}_vs_read", format.name());
            let expected = (format != WeightFormat::F32).then_some(format);
            assert_eq!(format_of(&name), expected, "{name}");
        }
        assert_eq!(format_of("gemv_q4_0"), None);
    }
}
