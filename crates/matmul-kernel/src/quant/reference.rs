//! The portable reference for every format: [`dequantize_row`] (ggml's `dequantize_row_*`),
//! [`quantize_row`] and [`validate_row`] (ggml's `ggml_validate_row_data`).

use super::blocks::{BlockQ4_0, BlockQ4K, BlockQ6K, BlockQ8_0};
use super::format::WeightFormat;
use crate::error::MatmulError;
use half::{bf16, f16};

/// The number of blocks in `n_bytes` bytes of `format`, or `Err(Shape)` when it is not whole.
fn n_blocks(format: WeightFormat, n_bytes: usize) -> Result<usize, MatmulError> {
    if !n_bytes.is_multiple_of(format.block_bytes()) {
        return Err(MatmulError::Shape(format!(
            "{n_bytes} bytes are not a whole number of {format} blocks of {} bytes",
            format.block_bytes()
        )));
    }
    Ok(n_bytes / format.block_bytes())
}

/// Checks that `bytes` and `values` hold the same number of weights of `format`.
fn check_lengths(format: WeightFormat, bytes: usize, values: usize) -> Result<(), MatmulError> {
    let blocks = n_blocks(format, bytes)?;
    if blocks.checked_mul(format.block_size()) != Some(values) {
        return Err(MatmulError::Shape(format!(
            "{bytes} bytes of {format} hold {} weights, the f32 side has {values}",
            blocks.saturating_mul(format.block_size())
        )));
    }
    Ok(())
}

/// Dequantizes a run of whole blocks of `format` into `out` (one f32 per weight): the
/// reference every kernel is tested against.
///
/// For each format this is ggml's `dequantize_row_*` (`ggml-quants.c`) with the same
/// operations in the same order, so the result is bit for bit ggml's portable result and
/// gguf-py's (the tests check gguf-py's on committed vectors); f16 and bf16 widen exactly.
/// Blocks are not validated: a non-finite scale gives non-finite weights, as in ggml.
///
/// `Err(Shape)` when `bytes` is not a whole number of blocks or `out` does not have one
/// element per weight.
///
/// ```
/// use matmul_kernel::{dequantize_row, WeightFormat};
///
/// // One q4_0 block: d = 0.5 (f16 0x3800), every byte 0x9F: weights 0..16 have code 15,
/// // weights 16..32 code 9.
/// let mut block = vec![0x00, 0x38];
/// block.extend([0x9F; 16]);
/// let mut out = [0.0; 32];
/// dequantize_row(WeightFormat::Q4_0, &block, &mut out)?;
/// assert_eq!(out[0], 3.5); // 0.5 · (15 − 8)
/// assert_eq!(out[16], 0.5); // 0.5 · (9 − 8)
/// # Ok::<(), matmul_kernel::MatmulError>(())
/// ```
pub fn dequantize_row(
    format: WeightFormat,
    bytes: &[u8],
    out: &mut [f32],
) -> Result<(), MatmulError> {
    check_lengths(format, bytes.len(), out.len())?;
    dequantize_blocks(format, bytes, out);
    Ok(())
}

/// [`dequantize_row`] without the length check, for callers that have checked it: `bytes`
/// is whole blocks of `format` and `out` has one element per weight (otherwise the shorter
/// side bounds what is written).
pub(crate) fn dequantize_blocks(format: WeightFormat, bytes: &[u8], out: &mut [f32]) {
    debug_assert!(check_lengths(format, bytes.len(), out.len()).is_ok());
    let block_bytes = format.block_bytes();
    let chunks = bytes.chunks_exact(block_bytes);
    match format {
        WeightFormat::F32 => {
            for (y, b) in out.iter_mut().zip(chunks) {
                *y = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        WeightFormat::F16 => {
            for (y, b) in out.iter_mut().zip(chunks) {
                *y = f16::from_le_bytes([b[0], b[1]]).to_f32();
            }
        }
        WeightFormat::Bf16 => {
            for (y, b) in out.iter_mut().zip(chunks) {
                *y = bf16::from_le_bytes([b[0], b[1]]).to_f32();
            }
        }
        WeightFormat::Q8_0 => {
            for (y, b) in out.chunks_exact_mut(32).zip(chunks) {
                BlockQ8_0::from_bytes(fixed(b)).dequantize(fixed_mut(y));
            }
        }
        WeightFormat::Q4_0 => {
            for (y, b) in out.chunks_exact_mut(32).zip(chunks) {
                BlockQ4_0::from_bytes(fixed(b)).dequantize(fixed_mut(y));
            }
        }
        WeightFormat::Q4K => {
            for (y, b) in out.chunks_exact_mut(256).zip(chunks) {
                BlockQ4K::from_bytes(fixed(b)).dequantize(fixed_mut(y));
            }
        }
        WeightFormat::Q6K => {
            for (y, b) in out.chunks_exact_mut(256).zip(chunks) {
                BlockQ6K::from_bytes(fixed(b)).dequantize(fixed_mut(y));
            }
        }
    }
}

/// A chunk of `chunks_exact(N)` as an array reference.
fn fixed<const N: usize>(chunk: &[u8]) -> &[u8; N] {
    chunk
        .try_into()
        .expect("chunks_exact yields chunks of the block size")
}

/// A chunk of `chunks_exact_mut(N)` as an array reference.
fn fixed_mut<const N: usize>(chunk: &mut [f32]) -> &mut [f32; N] {
    chunk
        .try_into()
        .expect("chunks_exact_mut yields chunks of the block size")
}

/// Quantizes `values` (whole blocks of `format`) into `out`, which must have exactly the bytes
/// of as many blocks.
///
/// - f32: the values' bytes; f16 and bf16: rounded to nearest, ties to even (gguf-py's
///   conversions, bit for bit).
/// - q8_0 and q4_0: ggml's reference quantizers (`quantize_row_q8_0_ref`,
///   `quantize_row_q4_0_ref`), bit for bit, which gguf-py's match too.
/// - q4_K and q6_K: quantizers of our own, simpler than ggml's (which search for the scales
///   that minimise a weighted error): they write valid blocks that any reader of the format
///   decodes the same way, with every weight within half a quantization step of its value.
///
/// Every block written passes [`validate_row`]. `Err(Shape)` for lengths that do not match;
/// `Err(InvalidWeights)` for a non-finite value or values too large for the format (a scale or
/// an f16/bf16 that would round to infinity), naming the first one; after an error the
/// contents of `out` are unspecified.
///
/// ```
/// use matmul_kernel::{dequantize_row, quantize_row, WeightFormat};
///
/// let values: Vec<f32> = (0..32).map(|i| i as f32 - 16.0).collect();
/// let mut bytes = vec![0; WeightFormat::Q8_0.block_bytes()];
/// quantize_row(WeightFormat::Q8_0, &values, &mut bytes)?;
/// let mut back = [0.0; 32];
/// dequantize_row(WeightFormat::Q8_0, &bytes, &mut back)?;
/// assert!(back.iter().zip(&values).all(|(b, v)| (b - v).abs() <= 16.0 / 127.0));
/// # Ok::<(), matmul_kernel::MatmulError>(())
/// ```
pub fn quantize_row(
    format: WeightFormat,
    values: &[f32],
    out: &mut [u8],
) -> Result<(), MatmulError> {
    check_lengths(format, out.len(), values.len())?;
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(MatmulError::InvalidWeights(format!(
            "values[{i}] is {}, which {format} cannot hold",
            values[i]
        )));
    }
    let block_bytes = format.block_bytes();
    let chunks = out.chunks_exact_mut(block_bytes);
    match format {
        WeightFormat::F32 => {
            for (b, v) in chunks.zip(values) {
                b.copy_from_slice(&v.to_le_bytes());
            }
        }
        WeightFormat::F16 => {
            for (b, v) in chunks.zip(values) {
                b.copy_from_slice(&f16::from_f32(*v).to_le_bytes());
            }
        }
        WeightFormat::Bf16 => {
            for (b, v) in chunks.zip(values) {
                b.copy_from_slice(&bf16::from_f32(*v).to_le_bytes());
            }
        }
        WeightFormat::Q8_0 => {
            for (b, v) in chunks.zip(values.chunks_exact(32)) {
                b.copy_from_slice(&BlockQ8_0::quantize(fixed_f32(v)).to_bytes());
            }
        }
        WeightFormat::Q4_0 => {
            for (b, v) in chunks.zip(values.chunks_exact(32)) {
                b.copy_from_slice(&BlockQ4_0::quantize(fixed_f32(v)).to_bytes());
            }
        }
        WeightFormat::Q4K => {
            for (b, v) in chunks.zip(values.chunks_exact(256)) {
                b.copy_from_slice(&BlockQ4K::quantize(fixed_f32(v)).to_bytes());
            }
        }
        WeightFormat::Q6K => {
            for (b, v) in chunks.zip(values.chunks_exact(256)) {
                b.copy_from_slice(&BlockQ6K::quantize(fixed_f32(v)).to_bytes());
            }
        }
    }
    // Finite values can still overflow: an f16 above 65504, a bf16 above f32::MAX's rounding,
    // a scale above the largest f16.
    validate_row(format, out).map_err(|e| match e {
        MatmulError::InvalidWeights(why) => MatmulError::InvalidWeights(format!(
            "values too large for {format} ({why} after quantizing)"
        )),
        other => other,
    })
}

/// A chunk of `chunks_exact(N)` of values as an array reference.
fn fixed_f32<const N: usize>(chunk: &[f32]) -> &[f32; N] {
    chunk
        .try_into()
        .expect("chunks_exact yields chunks of the block size")
}

/// Checks a run of whole blocks of `format` as ggml's `ggml_validate_row_data` does (what
/// llama.cpp runs on every tensor it loads): every f32/f16/bf16 value finite, every block
/// scale (`d`, and `dmin` of q4_K) a finite f16. The codes need no check: every bit pattern
/// is a valid code.
///
/// `Err(Shape)` when `bytes` is not a whole number of blocks; `Err(InvalidWeights)` naming the
/// first offending block (or value) and field otherwise.
pub fn validate_row(format: WeightFormat, bytes: &[u8]) -> Result<(), MatmulError> {
    n_blocks(format, bytes.len())?;
    let block_bytes = format.block_bytes();
    let bad = |block: usize, what: &str, value: f32| {
        Err(MatmulError::InvalidWeights(format!(
            "{format} block {block}: {what} is {value}"
        )))
    };
    for (i, b) in bytes.chunks_exact(block_bytes).enumerate() {
        let f16_at = |at: usize| f16::from_le_bytes([b[at], b[at + 1]]);
        match format {
            WeightFormat::F32 => {
                let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                if !v.is_finite() {
                    return bad(i, "the value", v);
                }
            }
            WeightFormat::F16 => {
                let v = f16_at(0);
                if !v.is_finite() {
                    return bad(i, "the value", v.to_f32());
                }
            }
            WeightFormat::Bf16 => {
                let v = bf16::from_le_bytes([b[0], b[1]]);
                if !v.is_finite() {
                    return bad(i, "the value", v.to_f32());
                }
            }
            WeightFormat::Q8_0 | WeightFormat::Q4_0 => {
                if !f16_at(0).is_finite() {
                    return bad(i, "the scale d", f16_at(0).to_f32());
                }
            }
            WeightFormat::Q4K => {
                if !f16_at(0).is_finite() {
                    return bad(i, "the scale d", f16_at(0).to_f32());
                }
                if !f16_at(2).is_finite() {
                    return bad(i, "the scale dmin", f16_at(2).to_f32());
                }
            }
            WeightFormat::Q6K => {
                if !f16_at(208).is_finite() {
                    return bad(i, "the scale d", f16_at(208).to_f32());
                }
            }
        }
    }
    Ok(())
}
