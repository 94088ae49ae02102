//! The quantized matmul peer: candle's `QMatMul` on CPU, built from our [`WeightMatrix`]'s bytes.
//!
//! Our block layouts are ggml's byte for byte, and so are candle's, so candle takes our bytes
//! as they are (`QStorage::from_data`): both sides multiply the very same weights, and the
//! tests below check that candle decodes our bytes to the values our reference does.
//!
//! `QMatMul::from_arc` is what candle's model code calls: it keeps the k-quants and the
//! 32-blocks quantized (`QMatMul::QTensor`, candle's own kernels, which quantize the
//! activations to 8 bits) and widens f32, f16 and bf16 weights to an f32 tensor multiplied by
//! the `gemm` crate (`QMatMul::Tensor`). Either way candle spreads the work over threads whose
//! number it reads once per process from `CANDLE_NUM_THREADS` or `RAYON_NUM_THREADS` (its
//! barrier pool and its rayon pool), not from the rayon pool it is called in: to measure it at
//! several thread counts, run it in one process per count (see `qmatmul::candle_process`).

use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::{Device, Module, Tensor};
use matmul_kernel::{WeightFormat, WeightMatrix, WeightShape};
use std::borrow::Cow;
use std::sync::Arc;

/// candle's name for a weight format: the same ggml type.
pub fn ggml_dtype(format: WeightFormat) -> GgmlDType {
    match format {
        WeightFormat::F32 => GgmlDType::F32,
        WeightFormat::F16 => GgmlDType::F16,
        WeightFormat::Bf16 => GgmlDType::BF16,
        WeightFormat::Q8_0 => GgmlDType::Q8_0,
        WeightFormat::Q4_0 => GgmlDType::Q4_0,
        WeightFormat::Q4K => GgmlDType::Q4K,
        WeightFormat::Q6K => GgmlDType::Q6K,
    }
}

/// candle's `QTensor` holding a copy of `w`'s bytes, shaped `n_out × n_in` as a GGUF tensor of
/// `ne = [n_in, n_out]` loads.
pub fn qtensor(w: &WeightMatrix) -> candle_core::Result<QTensor> {
    let WeightShape { n_out, n_in } = w.shape();
    let storage = QStorage::from_data(
        Cow::Borrowed(w.as_bytes()),
        &Device::Cpu,
        ggml_dtype(w.format()),
    )?;
    QTensor::new(storage, (n_out, n_in))
}

/// candle's dequantization of `w`'s bytes, `n_out · n_in` values row-major.
pub fn dequantize(w: &WeightMatrix) -> candle_core::Result<Vec<f32>> {
    qtensor(w)?
        .dequantize(&Device::Cpu)?
        .flatten_all()?
        .to_vec1::<f32>()
}

/// One weight matrix as candle multiplies it: `Y = X·Wᵀ` for `X` of `m × n_in`.
pub struct CandleMatmul {
    matmul: QMatMul,
    shape: WeightShape,
}

impl CandleMatmul {
    /// The matmul of `w`'s weights, through `QMatMul::from_arc` as candle's models build it.
    pub fn new(w: &WeightMatrix) -> candle_core::Result<Self> {
        Ok(CandleMatmul {
            matmul: QMatMul::from_arc(Arc::new(qtensor(w)?))?,
            shape: w.shape(),
        })
    }

    /// Whether candle keeps the weights quantized (its own kernels) rather than widening them
    /// to an f32 tensor.
    pub fn is_quantized(&self) -> bool {
        matches!(self.matmul, QMatMul::QTensor(_))
    }

    /// The input tensor for [`CandleMatmul::forward`]: `m` tokens of `x` (`m × n_in` values).
    pub fn input(&self, x: &[f32], m: usize) -> candle_core::Result<Tensor> {
        Tensor::from_slice(x, (m, self.shape.n_in), &Device::Cpu)
    }

    /// `X·Wᵀ` (`m × n_out`), the call that is timed.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.matmul.forward(x)
    }

    /// `X·Wᵀ` as values, row-major.
    pub fn product(&self, x: &Tensor) -> candle_core::Result<Vec<f32>> {
        self.forward(x)?.flatten_all()?.to_vec1::<f32>()
    }
}

/// The threads candle's quantized kernels run on in this process: its barrier pool's workers
/// and the calling thread.
pub fn candle_threads() -> usize {
    candle_core::utils::barrier_pool().n_workers() + 1
}

/// How candle's product of the same weights and activations is far from ours, if it is: by
/// more than 5 % of our largest value anywhere, or in length. That is a wrong layout, not
/// rounding: candle's 8-bit activations move a product by well under 1 % of the largest.
pub fn far_from_ours(ours: &[f32], theirs: &[f32]) -> Option<String> {
    let largest = ours.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    // A NaN difference, once met, stays the worst, and counts as far.
    let worst = ours
        .iter()
        .zip(theirs)
        .map(|(o, t)| (o - t).abs())
        .fold(0.0f32, |a, d| if d > a || d.is_nan() { d } else { a });
    (theirs.len() != ours.len() || worst.is_nan() || worst > 0.05 * largest).then(|| {
        format!(
            "by {worst} (largest |y| {largest}, {} values vs {})",
            theirs.len(),
            ours.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matmul::values;

    #[test]
    fn a_product_is_far_from_ours_beyond_rounding_in_length_or_by_a_nan() {
        let ours = [1.0, -2.0, 100.0];
        assert_eq!(far_from_ours(&ours, &ours), None);
        assert_eq!(far_from_ours(&ours, &[1.5, -2.0, 104.0]), None);
        let far = far_from_ours(&ours, &[1.0, -2.0, 90.0]).expect("10 % of the largest");
        assert!(far.starts_with("by 10 "), "{far}");
        assert!(far_from_ours(&ours, &[1.0, -2.0]).is_some());
        assert!(far_from_ours(&ours, &[f32::NAN, -2.0, 100.0]).is_some());
        assert!(far_from_ours(&ours, &[1.0, f32::NAN, 100.0]).is_some());
    }

    fn matrix(format: WeightFormat, n_out: usize, n_in: usize, seed: u32) -> WeightMatrix {
        // Spread the magnitudes over a few orders, so scales vary from block to block.
        let vals: Vec<f32> = values(seed, n_out * n_in)
            .iter()
            .enumerate()
            .map(|(i, v)| v * [0.01, 1.0, 30.0][(i / 256) % 3])
            .collect();
        WeightMatrix::quantize(format, WeightShape { n_out, n_in }, &vals).unwrap()
    }

    /// candle reads our bytes as we do: its dequantization equals our reference bit for bit,
    /// for every format (candle knows all of ours).
    #[test]
    fn candle_decodes_our_bytes_as_our_reference_does() {
        for format in WeightFormat::ALL {
            let w = matrix(format, 6, 512, 7);
            let ours = w.to_f32().unwrap();
            let theirs = dequantize(&w).unwrap();
            assert_eq!(theirs.len(), ours.len(), "{format}");
            for (idx, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "{format} weight {idx}: {a} vs {b}"
                );
            }
        }
    }

    /// candle's product on our bytes is the product of the weights our reference decodes,
    /// within the error of its 8-bit activations (k-quants and 32-blocks) and of f32 sums.
    #[test]
    fn candle_multiplies_the_weights_we_decode() {
        let (m, n_out, n_in) = (3, 12, 512);
        let x = values(9, m * n_in);
        for format in WeightFormat::ALL {
            let w = matrix(format, n_out, n_in, 3);
            let dense = w.to_f32().unwrap();
            let candle = CandleMatmul::new(&w).unwrap();
            assert_eq!(candle.is_quantized(), format.is_quantized(), "{format}");
            let got = candle.product(&candle.input(&x, m).unwrap()).unwrap();
            assert_eq!(got.len(), m * n_out);
            for token in 0..m {
                let x_row = &x[token * n_in..(token + 1) * n_in];
                let x_max = x_row.iter().fold(0.0f64, |a, v| a.max(f64::from(v.abs())));
                for row in 0..n_out {
                    let w_row = &dense[row * n_in..(row + 1) * n_in];
                    let exact: f64 = w_row
                        .iter()
                        .zip(x_row)
                        .map(|(w, x)| f64::from(*w) * f64::from(*x))
                        .sum();
                    let magnitude: f64 = w_row
                        .iter()
                        .zip(x_row)
                        .map(|(w, x)| (f64::from(*w) * f64::from(*x)).abs())
                        .sum();
                    let w_abs: f64 = w_row.iter().map(|w| f64::from(w.abs())).sum();
                    // Each activation rounded to a step of at most max|x| / 127 (q8_0) or
                    // max|x| / 128 (q8_K) is off by half a step: Σ|w| · max|x| / 254 in all.
                    // Then f32 sums: 1e-4 of Σ|w·x| covers 512 terms with room.
                    let bound = if format.is_quantized() {
                        w_abs * x_max / 254.0
                    } else {
                        0.0
                    } + 1e-4 * magnitude
                        + 1e-6;
                    let y = f64::from(got[token * n_out + row]);
                    assert!(
                        (y - exact).abs() <= bound,
                        "{format} y[{token}][{row}] = {y}, exact {exact}, bound {bound}"
                    );
                }
            }
        }
    }
}
