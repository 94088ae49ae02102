//! What the quantized section multiplies: the shapes, how many matrices each rotation holds
//! so that it exceeds the L3 ([`Rotation`]), and the weights themselves ([`weight_set`]),
//! made the same way in the report's process and in each candle process.

use crate::matmul::values;
use matmul_kernel::{MatmulError, WeightFormat, WeightMatrix, WeightShape};

/// The square shape of the issue: 4096 × 4096 (the JSON's top-level keys).
pub const SQUARE: WeightShape = WeightShape {
    n_out: 4096,
    n_in: 4096,
};
/// The Llama-3-8B FFN up/gate projection: 14336 × 4096 (the JSON's `qmatmul_ffn_14336x4096`).
pub const FFN: WeightShape = WeightShape {
    n_out: 14336,
    n_in: 4096,
};
/// The Llama-3-8B FFN down projection: 4096 × 14336 (the JSON's `qmatmul_down_4096x14336`),
/// the long rows of every model's down projection (q6_K in a Q4_K_M file).
pub const DOWN: WeightShape = WeightShape {
    n_out: 4096,
    n_in: 14336,
};
/// Tokens in the measured GEMM batch.
pub const GEMM_M: usize = 32;

/// Each rotation's matrices together exceed this many times the L3.
pub const L3_MULTIPLE: u64 = 4;
/// The L3 assumed when detection finds none.
pub const FALLBACK_L3_BYTES: u64 = 32 << 20;
/// The most bytes one rotation holds (unless a single matrix is larger): the read holds as
/// much again and candle about as much (twice for f16/bf16, which it widens to f32), so the
/// section stays under ~2.5 GiB even where the L3 is large.
pub const MAX_ROTATION_BYTES: u64 = 768 << 20;

/// How many matrices of one size a contender cycles through, call after call, so that each
/// call reads its weights from DRAM rather than from the L3 the previous calls filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Distinct matrices (at least 1).
    pub n_matrices: usize,
    /// Bytes of one matrix.
    pub matrix_bytes: u64,
    /// Whether the matrices together exceed [`L3_MULTIPLE`] × the L3; false only when
    /// [`MAX_ROTATION_BYTES`] cut the rotation short (an L3 over 192 MiB).
    pub exceeds_l3: bool,
}

impl Rotation {
    /// The fewest matrices of `matrix_bytes` whose sum exceeds [`L3_MULTIPLE`] × `l3_bytes`
    /// (a 0 L3, not detected, counts as [`FALLBACK_L3_BYTES`]), but no more than fit in
    /// [`MAX_ROTATION_BYTES`], and at least one.
    pub fn new(matrix_bytes: u64, l3_bytes: u64) -> Rotation {
        let l3_bytes = if l3_bytes == 0 {
            FALLBACK_L3_BYTES
        } else {
            l3_bytes
        };
        let target = l3_bytes.saturating_mul(L3_MULTIPLE);
        let matrix_bytes = matrix_bytes.max(1);
        let wanted = target / matrix_bytes + 1;
        let allowed = (MAX_ROTATION_BYTES / matrix_bytes).max(1);
        let n_matrices = wanted.min(allowed);
        Rotation {
            n_matrices: usize::try_from(n_matrices).unwrap_or(usize::MAX),
            matrix_bytes,
            exceeds_l3: n_matrices.saturating_mul(matrix_bytes) > target,
        }
    }

    /// Bytes of all the matrices.
    pub fn total_bytes(&self) -> u64 {
        self.matrix_bytes * self.n_matrices as u64
    }
}

/// Bytes of an `shape` matrix of `format`.
pub fn matrix_bytes(format: WeightFormat, shape: WeightShape) -> Result<u64, MatmulError> {
    Ok((format.row_bytes(shape.n_in)? as u64).saturating_mul(shape.n_out as u64))
}

/// Distinct weight rows in a set; larger matrices repeat them (bandwidth depends on the
/// addresses read, not on the values).
const DISTINCT_ROWS: usize = 64;

/// `n_matrices` matrices of `format` and `shape`: `DISTINCT_ROWS` (64) rows of values in
/// [-1, 1) quantized once, then laid out row after row, each matrix starting at another row
/// of them. The same arguments give the same bytes in every process.
pub fn weight_set(
    format: WeightFormat,
    shape: WeightShape,
    n_matrices: usize,
) -> Result<Vec<WeightMatrix>, MatmulError> {
    let tile_shape = WeightShape {
        n_out: DISTINCT_ROWS,
        n_in: shape.n_in,
    };
    let seed = 100 + format.gguf_type_id();
    let tile = WeightMatrix::quantize(
        format,
        tile_shape,
        &values(seed, DISTINCT_ROWS * shape.n_in),
    )?;
    let row_bytes = tile.row_bytes();
    let total = usize::try_from(matrix_bytes(format, shape)?)
        .map_err(|_| MatmulError::Shape(format!("{format} matrix too large")))?;
    let mut bytes = vec![0u8; total];
    (0..n_matrices)
        .map(|idx| {
            for (row, out) in bytes.chunks_exact_mut(row_bytes.max(1)).enumerate() {
                let src = tile.row((row + 7 * idx) % DISTINCT_ROWS)?;
                out.copy_from_slice(src);
            }
            WeightMatrix::from_raw(format, shape, &bytes)
        })
        .collect()
}

/// Activations in [-1, 1): `m` tokens of `n_in` values, the same in every process.
pub fn activations(m: usize, n_in: usize) -> Vec<f32> {
    values(200 + m as u32, m * n_in)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_rotation_exceeds_four_l3s_with_the_fewest_matrices() {
        // A 4096² q4_0 matrix (9 MiB) against a 32 MiB L3: 15 matrices, 135 MiB > 128 MiB.
        let q4_0 = matrix_bytes(WeightFormat::Q4_0, SQUARE).unwrap();
        assert_eq!(q4_0, 9 * MIB);
        let rotation = Rotation::new(q4_0, 32 * MIB);
        assert_eq!(rotation.n_matrices, 15);
        assert!(rotation.exceeds_l3);
        assert!(rotation.total_bytes() > 4 * 32 * MIB);
        assert!((rotation.n_matrices as u64 - 1) * q4_0 <= 4 * 32 * MIB);
        // Exactly 4 L3s is not more than 4 L3s.
        assert_eq!(Rotation::new(32 * MIB, 32 * MIB).n_matrices, 5);
        // One matrix larger than 4 L3s is a rotation of one.
        let f32_ffn = matrix_bytes(WeightFormat::F32, FFN).unwrap();
        assert_eq!(f32_ffn, 224 * MIB);
        assert_eq!(Rotation::new(f32_ffn, 32 * MIB).n_matrices, 1);
    }

    #[test]
    fn every_rotation_here_stays_bounded() {
        for format in WeightFormat::ALL {
            for shape in [SQUARE, FFN] {
                let bytes = matrix_bytes(format, shape).unwrap();
                let rotation = Rotation::new(bytes, 32 * MIB);
                assert!(rotation.exceeds_l3, "{format} {shape:?}");
                assert!(rotation.total_bytes() <= 256 * MIB, "{format} {shape:?}");
            }
        }
    }

    #[test]
    fn a_huge_l3_is_capped_and_said_so() {
        let rotation = Rotation::new(9 * MIB, 1024 * MIB);
        assert!(!rotation.exceeds_l3);
        assert!(rotation.total_bytes() <= MAX_ROTATION_BYTES);
        assert_eq!(rotation.n_matrices as u64, MAX_ROTATION_BYTES / (9 * MIB));
        // Undetected: the fallback L3.
        assert_eq!(
            Rotation::new(9 * MIB, 0),
            Rotation::new(9 * MIB, FALLBACK_L3_BYTES)
        );
    }

    #[test]
    fn weight_sets_are_reproducible_and_their_matrices_differ() {
        let shape = WeightShape {
            n_out: 80,
            n_in: 256,
        };
        for format in WeightFormat::ALL {
            let a = weight_set(format, shape, 2).unwrap();
            let b = weight_set(format, shape, 2).unwrap();
            assert_eq!(a.len(), 2);
            assert_eq!(a[0].as_bytes(), b[0].as_bytes(), "{format}");
            assert_eq!(a[1].as_bytes(), b[1].as_bytes(), "{format}");
            assert_ne!(a[0].as_bytes(), a[1].as_bytes(), "{format}");
            assert_eq!(a[0].shape(), shape);
            assert_eq!(a[0].format(), format);
        }
    }
}
