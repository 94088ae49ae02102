//! The GEMM checks of the formats other than f32: `gemm_<format>_m32_vs_candle`, candle's
//! time ÷ ours for m = 32 tokens through one 4096² matrix of `format`, on as many threads as
//! candle runs its kernels on in this process (`cargo xtask bench-regress` gives it one,
//! [`GEMM_THREADS`](super::run::GEMM_THREADS), through `CANDLE_NUM_THREADS`). candle keeps the
//! quantized formats quantized (its own kernels) and widens f16 and bf16 to an f32 tensor
//! once, at load, multiplied by the `gemm` crate (`contenders::candle`); ours reads the f16 and
//! bf16 bytes in every call (`matmul-kernel`'s float tiles).
//!
//! At m = 32 both sides are bound by their arithmetic, not by the weights' bytes (each weight
//! meets 32 tokens' activations), so the matrix is the same one call after call, and the
//! two sides alternate, ours first in even rounds and candle first in odd ones. candle
//! multiplies the very bytes we do (`contenders::candle`), and the first product
//! of each side is compared before anything is timed: a check never times a wrong answer (a
//! product far from candle's is a ratio of NaN, below any floor).

use super::run::{Measured, RunLength};
use crate::contenders::candle::{CandleMatmul, candle_threads, far_from_ours};
use crate::contenders::qgemm;
use crate::matmul::{GEMM_M, N, paired_ratio, time};
use crate::qmatmul::timing::alternating_rounds;
use crate::qmatmul::workload::{activations, weight_set};
use auto_tuner::median;
use matmul_kernel::{WeightFormat, WeightShape};
use std::hint::black_box;
use std::time::Duration;
use threadpool::ThreadPool;

/// The formats with a GEMM check: every one whose GEMM is one of `matmul-kernel`'s tiles
/// (f32's GEMM is `f32-blocked`, which `gemm_m32_vs_faer` checks).
pub const FORMATS: [WeightFormat; 6] = [
    WeightFormat::F16,
    WeightFormat::Bf16,
    WeightFormat::Q8_0,
    WeightFormat::Q4_0,
    WeightFormat::Q4K,
    WeightFormat::Q6K,
];

/// Kept rounds of a check in a quick run (twice in a full one): a call takes 4–50 ms here.
const ROUNDS: usize = 15;

/// The check's name for `format`.
pub fn check_name(format: WeightFormat) -> String {
    format!("gemm_{}_m32_vs_candle", format.name())
}

/// The format a check name `gemm_<format>_m32_vs_candle` names, one of [`FORMATS`].
pub fn format_of(check: &str) -> Option<WeightFormat> {
    FORMATS.into_iter().find(|f| check_name(*f) == check)
}

/// candle's time ÷ ours for m = 32 tokens through a 4096² matrix of `format`, paired by round,
/// both on [`candle_threads`] threads.
pub fn gemm_vs_candle(format: WeightFormat, length: RunLength) -> Measured {
    let name = check_name(format);
    let shape = WeightShape { n_out: N, n_in: N };
    let matrix = weight_set(format, shape, 1)
        .expect("a 4096² matrix of every format")
        .remove(0);
    let candle = CandleMatmul::new(&matrix).expect("candle takes ggml's blocks");
    let threads = candle_threads();
    let (pool, kernel) = (ThreadPool::new(threads), matmul_kernel::selected());
    let x = activations(GEMM_M, N);
    let input = candle.input(&x, GEMM_M).expect("candle's input tensor");
    let mut y = vec![0.0f32; GEMM_M * N];
    qgemm(kernel, &pool, &matrix, &x, &mut y);
    let theirs = candle.product(&input).expect("candle's product");
    if let Some(gap) = far_from_ours(&y, &theirs) {
        return Measured {
            name,
            ratio: f64::NAN,
            detail: format!("candle's product differs from ours {gap}"),
        };
    }
    // Ours first in even rounds, candle first in odd ones; the first round warms both up
    // and is not kept.
    let (ours, reference) = alternating_rounds(
        length.rounds(ROUNDS),
        Duration::ZERO,
        || {
            Some(time(|| {
                qgemm(kernel, &pool, &matrix, &x, &mut y);
                black_box(&y);
            }))
        },
        || {
            Some(time(|| {
                black_box(candle.forward(&input).expect("candle's forward"));
            }))
        },
    );
    let gflops = |t: &[f64]| 2.0 * (GEMM_M * N * N) as f64 / median(t) / 1e9;
    Measured {
        name,
        ratio: paired_ratio(&ours, &reference),
        detail: format!(
            "ours {:.1} GFLOP/s, candle {:.1} GFLOP/s ({threads} thread{})",
            gflops(&ours),
            gflops(&reference),
            if threads == 1 { "" } else { "s" }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_but_f32_has_a_check_name() {
        for format in WeightFormat::ALL {
            let expected = (format != WeightFormat::F32).then_some(format);
            assert_eq!(format_of(&check_name(format)), expected, "{format}");
        }
        assert_eq!(format_of("gemm_q4_K_vs_candle"), None);
        assert_eq!(format_of("gemm_m32_vs_faer"), None);
    }
}
