//! [`WeightMatrix`]: an `n_out × n_in` weight matrix of any [`WeightFormat`], owning its bytes
//! in a [`WeightBytes`].

use super::format::WeightFormat;
use super::reference::{dequantize_row, quantize_row, validate_row};
use crate::buffer::{HugePages, WeightBytes};
use crate::error::MatmulError;

/// The shape of a weight matrix: `n_out` rows (output features) of `n_in` weights (input
/// features), the crate's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WeightShape {
    /// Rows (output features).
    pub n_out: usize,
    /// Weights per row (input features); a multiple of the format's block size.
    pub n_in: usize,
}

/// An `n_out × n_in` row-major weight matrix in one [`WeightFormat`]: each row is
/// `n_in / block_size` blocks, rows back to back, exactly as a GGUF file stores a 2-D tensor of
/// `ne = [n_in, n_out]`. The bytes live in a [`WeightBytes`] (64-byte aligned, huge pages where
/// the OS grants them) and every block is valid ([`validate_row`]).
///
/// ```
/// use matmul_kernel::{WeightFormat, WeightMatrix, WeightShape};
///
/// let shape = WeightShape { n_out: 2, n_in: 64 };
/// let values: Vec<f32> = (0..128).map(|i| (i as f32 * 0.37).sin()).collect();
/// let q = WeightMatrix::quantize(WeightFormat::Q8_0, shape, &values)?;
/// assert_eq!(q.as_bytes().len(), 2 * 2 * 34); // 2 rows of 2 blocks
///
/// // The same bytes, as a GGUF file would hold them, give the same matrix back.
/// let raw = WeightMatrix::from_raw(WeightFormat::Q8_0, shape, q.as_bytes())?;
/// let mut row = [0.0; 64];
/// raw.dequantize_row(1, &mut row)?;
/// assert!((row[0] - values[64]).abs() < 0.01);
/// # Ok::<(), matmul_kernel::MatmulError>(())
/// ```
#[derive(Debug)]
pub struct WeightMatrix {
    format: WeightFormat,
    shape: WeightShape,
    row_bytes: usize,
    bytes: WeightBytes,
}

impl WeightMatrix {
    /// Quantizes `values` (`n_out × n_in`, row-major) with [`quantize_row`].
    ///
    /// `Err(Shape)` when `values` does not have `n_out · n_in` elements or `n_in` is not a
    /// multiple of the block size; `Err(InvalidWeights)` for values the format cannot hold,
    /// naming the row; `Err(Alloc)` when the buffer cannot be allocated.
    pub fn quantize(
        format: WeightFormat,
        shape: WeightShape,
        values: &[f32],
    ) -> Result<Self, MatmulError> {
        let (row_bytes, total) = Self::sizes(format, shape)?;
        if shape.n_out.checked_mul(shape.n_in) != Some(values.len()) {
            return Err(MatmulError::Shape(format!(
                "values has {} elements, expected n_out {} x n_in {}",
                values.len(),
                shape.n_out,
                shape.n_in
            )));
        }
        let mut bytes = WeightBytes::zeroed(total)?;
        if row_bytes > 0 {
            let rows = values.chunks_exact(shape.n_in);
            for (r, (out, row)) in bytes.chunks_exact_mut(row_bytes).zip(rows).enumerate() {
                quantize_row(format, row, out).map_err(|e| in_row(e, r))?;
            }
        }
        Ok(WeightMatrix {
            format,
            shape,
            row_bytes,
            bytes,
        })
    }

    /// Takes a tensor's bytes as they lie in a GGUF file: `n_out` rows of `n_in / block_size`
    /// blocks of `format`, copied into a [`WeightBytes`] (`bytes` need not be aligned).
    ///
    /// Errors, each naming the problem, never a panic:
    /// - `Err(Shape)`: `n_in` is not a multiple of the block size, the size overflows, or
    ///   `bytes` is not exactly `n_out` rows long;
    /// - `Err(InvalidWeights)`: a block with a non-finite scale, or a non-finite f32/f16/bf16
    ///   value (what ggml's `ggml_validate_row_data` rejects), naming the row and block;
    /// - `Err(Alloc)`: the buffer cannot be allocated.
    pub fn from_raw(
        format: WeightFormat,
        shape: WeightShape,
        bytes: &[u8],
    ) -> Result<Self, MatmulError> {
        let (row_bytes, total) = Self::sizes(format, shape)?;
        if bytes.len() != total {
            return Err(MatmulError::Shape(format!(
                "{format} matrix of n_out {} x n_in {} is {total} bytes, got {}",
                shape.n_out,
                shape.n_in,
                bytes.len()
            )));
        }
        if row_bytes > 0 {
            for (r, row) in bytes.chunks_exact(row_bytes).enumerate() {
                validate_row(format, row).map_err(|e| in_row(e, r))?;
            }
        }
        Ok(WeightMatrix {
            format,
            shape,
            row_bytes,
            bytes: WeightBytes::from_slice(bytes)?,
        })
    }

    /// Bytes per row and in all, checked before anything is allocated.
    fn sizes(format: WeightFormat, shape: WeightShape) -> Result<(usize, usize), MatmulError> {
        let row_bytes = format.row_bytes(shape.n_in)?;
        let total = row_bytes.checked_mul(shape.n_out).ok_or_else(|| {
            MatmulError::Shape(format!(
                "{format} matrix of n_out {} x n_in {} overflows usize bytes",
                shape.n_out, shape.n_in
            ))
        })?;
        Ok((row_bytes, total))
    }

    /// The format of every block.
    pub fn format(&self) -> WeightFormat {
        self.format
    }

    /// The shape.
    pub fn shape(&self) -> WeightShape {
        self.shape
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// All bytes, rows back to back (a GGUF tensor's data).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes of row `row`, or `Err(Shape)` past the last row.
    pub fn row(&self, row: usize) -> Result<&[u8], MatmulError> {
        if row >= self.shape.n_out {
            return Err(MatmulError::Shape(format!(
                "row {row} of a matrix of {} rows",
                self.shape.n_out
            )));
        }
        Ok(&self.bytes[row * self.row_bytes..(row + 1) * self.row_bytes])
    }

    /// Dequantizes row `row` into `out` (`n_in` elements) with [`dequantize_row`].
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) -> Result<(), MatmulError> {
        dequantize_row(self.format, self.row(row)?, out)
    }

    /// The whole matrix as f32 (`n_out · n_in` elements, row-major).
    pub fn to_f32(&self) -> Result<Vec<f32>, MatmulError> {
        let len = self
            .shape
            .n_out
            .checked_mul(self.shape.n_in)
            .ok_or_else(|| {
                MatmulError::Shape(format!(
                    "n_out {} x n_in {} f32 values overflow usize",
                    self.shape.n_out, self.shape.n_in
                ))
            })?;
        let mut out = vec![0.0; len];
        dequantize_row(self.format, &self.bytes, &mut out)?;
        Ok(out)
    }

    /// Whether the bytes are backed by huge pages, as the OS reports it now.
    pub fn huge_pages(&self) -> HugePages {
        self.bytes.huge_pages()
    }
}

/// `e` with the row it happened in.
fn in_row(e: MatmulError, row: usize) -> MatmulError {
    match e {
        MatmulError::InvalidWeights(why) => {
            MatmulError::InvalidWeights(format!("row {row}: {why}"))
        }
        MatmulError::Shape(why) => MatmulError::Shape(format!("row {row}: {why}")),
        other => other,
    }
}
