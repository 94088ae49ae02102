//! GEMV and GEMM on a [`WeightMatrix`] of any [`WeightFormat`](crate::WeightFormat): the
//! bodies of [`Exec::qgemv`](crate::Exec::qgemv) and [`Exec::qgemm`](crate::Exec::qgemm), each
//! the same on the calling thread or split over a pool. [`Exec::qgemv`](crate::Exec::qgemv)
//! documents the numerics of each format and the error bound.

use crate::bodies::GemmBody;
use crate::error::MatmulError;
use crate::isa::Kernel;
use crate::kernel::as_f32;
use crate::quant::BlockQ8x;
use crate::quant::activations::{quantize_activations, quantize_for_call, quantize_for_call_by};
use crate::quant::{WeightMatrix, WeightShape};
use crate::split::{GemmShape, SharedOut, Split, gemm_split};
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

/// The body of [`Exec::qgemv`](crate::Exec::qgemv): `x` is quantized once (for a quantized
/// format), then the output rows are split.
pub(crate) fn qgemv_split(
    kernel: Kernel,
    split: Split<'_>,
    w: &WeightMatrix,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    let WeightShape { n_out, n_in } = w.shape();
    if x.len() != n_in || y.len() != n_out {
        return Err(MatmulError::Shape(format!(
            "x has {} and y {} elements, expected n_in {n_in} and n_out {n_out} of the {} matrix",
            x.len(),
            y.len(),
            w.format()
        )));
    }
    let (format, row_bytes, bytes) = (w.format(), w.row_bytes(), w.as_bytes());
    let quantized = quantize_for_call(format, kernel.gemv_layout(format), x, n_in);
    let acts = quantized.activations(x, 0);
    let threads = split.threads();
    split.for_output_rows(y, |rows, y_rows| {
        kernel.qgemv_rows(
            format,
            &bytes[rows.start * row_bytes..],
            acts,
            y_rows,
            threads,
        );
    })
}

/// Bytes of weight rows dotted with every row of `x` before the next tile: half of a 32 KiB
/// L1, leaving room for the activations streaming past.
const QGEMM_TILE_BYTES: usize = 16 * 1024;

/// The most weight rows in one tile.
const QGEMM_TILE_ROWS: usize = 16;

/// The fewest weight rows in a tile of the bodies that run a GEMV per activation row, however
/// long the rows.
const QGEMM_MIN_TILE_ROWS: usize = 4;

/// Weight rows in one tile of a GEMM by `body` on rows of `row_bytes`: the full height for
/// the quantized formats, whose x86 tiles pack eight rows a chunk of blocks at a time, and for
/// the x86 float tiles, which block a tile's rows for the caches themselves
/// (`quant/x86_float.rs`): every tile passes over all the activation rows, so on rows of
/// 14336 f16 inputs four rows a tile read the 1.8 MiB of 32 tokens' activations from L3 for
/// each 112 KiB of weights (revision 40). Elsewhere (one GEMV per activation row) the rows
/// that make [`QGEMM_TILE_BYTES`], so that a tile stays in L1 while the activation rows pass.
fn tile_rows(body: GemmBody, quantized: bool, row_bytes: usize) -> usize {
    if quantized || matches!(body, GemmBody::Avx2F32Tile | GemmBody::Avx512F32Tile) {
        QGEMM_TILE_ROWS
    } else {
        (QGEMM_TILE_BYTES / row_bytes.max(1)).clamp(QGEMM_MIN_TILE_ROWS, QGEMM_TILE_ROWS)
    }
}

/// Activation rows dotted with one tile per kernel call: the tile's outputs for them fill a
/// stack buffer of `QGEMM_X_ROWS · QGEMM_TILE_ROWS` floats (4 KiB).
const QGEMM_X_ROWS: usize = 64;

/// The activation rows of `x` (rows of `n_in`) quantized into `blocks` (as many blocks per
/// row), by [`quantize_activations`], the rows split over `split` as the output rows are:
/// each block is quantized by itself, so the blocks are those of one call on the whole of
/// `x`. (A GEMM's `m` rows cost about a microsecond per thousand values, which on many
/// threads would otherwise be a serial part of the call.)
fn quantize_rows(
    split: Split<'_>,
    x: &[f32],
    n_in: usize,
    blocks: &mut [BlockQ8x],
) -> Result<(), MatmulError> {
    let m = x.len().checked_div(n_in).unwrap_or(0);
    if split.threads() <= 1 || m <= 1 || blocks.is_empty() {
        quantize_activations(x, blocks);
        return Ok(());
    }
    let per_row = blocks.len() / m;
    // One lock per row, each taken once by the one range that holds the row.
    let rows: Vec<Mutex<&mut [BlockQ8x]>> = blocks.chunks_mut(per_row).map(Mutex::new).collect();
    split.for_ranges(m, |range: Range<usize>| {
        for i in range.start.min(m)..range.end.min(m) {
            let mut row = rows[i].lock().unwrap_or_else(PoisonError::into_inner);
            quantize_activations(&x[i * n_in..(i + 1) * n_in], &mut row);
        }
    })
}

/// The body of [`Exec::qgemm`](crate::Exec::qgemm).
pub(crate) fn qgemm_split(
    kernel: Kernel,
    split: Split<'_>,
    w: &WeightMatrix,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    let WeightShape { n_out, n_in } = w.shape();
    let format = w.format();
    if n_in == 0 || !x.len().is_multiple_of(n_in) {
        return Err(MatmulError::Shape(format!(
            "x has {} elements, not whole rows of n_in {n_in} of the {format} matrix",
            x.len()
        )));
    }
    let m = x.len() / n_in;
    if m.checked_mul(n_out) != Some(y.len()) {
        return Err(MatmulError::Shape(format!(
            "y has {} elements, expected m {m} x n_out {n_out}",
            y.len()
        )));
    }
    let (row_bytes, bytes) = (w.row_bytes(), w.as_bytes());
    if kernel.gemm_body(format) == GemmBody::F32Blocked
        && let Some(w32) = as_f32(bytes)
    {
        // The f32 GEMM of `Exec::gemm`: one f32 GEMM body per ISA.
        return gemm_split(kernel, split, GemmShape { m, n_in, n_out }, w32, x, y);
    }
    let mut quantized_rows = Ok(());
    let quantized =
        quantize_for_call_by(format, kernel.gemm_layout(format), x, n_in, |x, blocks| {
            quantized_rows = quantize_rows(split, x, n_in, blocks);
        });
    quantized_rows?;
    let tile_rows = tile_rows(kernel.gemm_body(format), format.is_quantized(), row_bytes);
    let acts: Vec<_> = (0..m)
        .map(|i| quantized.activations(&x[i * n_in..(i + 1) * n_in], i))
        .collect();
    let y_out = SharedOut::new(y);
    split.for_ranges(n_out, |rows: Range<usize>| {
        let rows = rows.start.min(n_out)..rows.end.min(n_out);
        let mut tile = [0.0f32; QGEMM_X_ROWS * QGEMM_TILE_ROWS];
        let mut r0 = rows.start;
        while r0 < rows.end {
            let n_rows = tile_rows.min(rows.end - r0);
            let w_tile = &bytes[r0 * row_bytes..(r0 + n_rows) * row_bytes];
            for (c, chunk) in acts.chunks(QGEMM_X_ROWS).enumerate() {
                let out = &mut tile[..chunk.len() * n_rows];
                kernel.qgemm_rows(format, w_tile, chunk, out);
                for (k, outputs) in out.chunks_exact(n_rows).enumerate() {
                    let i = c * QGEMM_X_ROWS + k;
                    for (j, &v) in outputs.iter().enumerate() {
                        // SAFETY: `i < m` and `r0 + j < rows.end <= n_out`, so the element
                        // lies in `y` (`m · n_out` elements, checked above); `for_ranges`
                        // hands out every weight row exactly once, so no other call writes
                        // column `r0 + j`.
                        unsafe { *y_out.as_ptr().add(i * n_out + r0 + j) = v };
                    }
                }
            }
            r0 += n_rows;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_keep_their_height_where_the_body_blocks_for_the_caches() {
        // The FFN down projection's rows: 14336 f16 inputs.
        let long = 14336 * 2;
        for body in [GemmBody::Avx512F32Tile, GemmBody::Avx2F32Tile] {
            assert_eq!(tile_rows(body, false, long), QGEMM_TILE_ROWS, "{body:?}");
        }
        assert_eq!(tile_rows(GemmBody::VnniTile, true, long), QGEMM_TILE_ROWS);
        // A GEMV per activation row keeps its tile in L1: four rows at least.
        assert_eq!(
            tile_rows(GemmBody::GemvRows, false, long),
            QGEMM_MIN_TILE_ROWS
        );
        assert_eq!(tile_rows(GemmBody::GemvRows, false, 1024), QGEMM_TILE_ROWS);
        assert_eq!(tile_rows(GemmBody::GemvRows, false, 2048), 8);
    }
}
