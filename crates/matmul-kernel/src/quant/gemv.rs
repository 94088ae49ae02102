//! The portable GEMV body for every [`WeightFormat`]: each weight row is widened to f32 one
//! chunk of whole blocks at a time (by the reference dequantizer, into a stack buffer) and
//! dotted with `x` in a fixed order.
//!
//! Order of one output element: weight `k` of the row goes to lane `k mod 8` of an eight-lane
//! accumulator, each lane adds its products (rounded, no FMA) in increasing `k`, and the lanes
//! are combined by the pairwise tree of the portable f32 kernel. That order depends on `n_in`
//! alone, not on the format's block size, the chunking or the rows that share a call, so a
//! row's value is the same on every thread and in every split.

#![allow(
    clippy::needless_range_loop,
    reason = "indexed loops over the lane array read like the math and unroll the same"
)]

use super::format::WeightFormat;
use super::reference::dequantize_blocks;

/// Lanes of the accumulator (the portable f32 kernel's eight).
const LANES: usize = 8;

/// Weights widened per step: one super-block of the k-quants, eight blocks of q8_0/q4_0, 256
/// values of the float formats. A multiple of every block size and of [`LANES`], so every
/// chunk but a float row's last starts and ends on a lane boundary.
const CHUNK: usize = 256;

/// `y[r] = Σ_k W[r][k]·x[k]` for the `y.len()` rows of `format` at the start of `w`, each row
/// `x.len()` weights long.
///
/// # Panics
/// When `x.len()` is not a whole number of blocks or `w` is shorter than `y.len()` rows; the
/// public entry points check both first.
pub(crate) fn gemv_rows(format: WeightFormat, w: &[u8], x: &[f32], y: &mut [f32]) {
    let n_in = x.len();
    let row_bytes = format.row_bytes(n_in).expect("qgemv: n_in is whole blocks");
    assert!(
        crate::kernel::rows_fit(w.len(), y.len(), row_bytes),
        "qgemv: w too short"
    );
    for (r, out) in y.iter_mut().enumerate() {
        *out = dot_row(format, &w[r * row_bytes..(r + 1) * row_bytes], x);
    }
}

/// The dot product of one row of `format` (`row` holds exactly `x.len()` weights) with `x`.
fn dot_row(format: WeightFormat, row: &[u8], x: &[f32]) -> f32 {
    let block_bytes = format.block_bytes();
    let block_size = format.block_size();
    let mut widened = [0.0f32; CHUNK];
    let mut acc = [0.0f32; LANES];
    let mut k = 0;
    while k < x.len() {
        let len = CHUNK.min(x.len() - k);
        let bytes = &row[k / block_size * block_bytes..(k + len) / block_size * block_bytes];
        dequantize_blocks(format, bytes, &mut widened[..len]);
        let xs = &x[k..k + len];
        let whole = len - len % LANES;
        let mut i = 0;
        while i < whole {
            for l in 0..LANES {
                acc[l] += widened[i + l] * xs[i + l];
            }
            i += LANES;
        }
        // Only a float row's last chunk has a tail; `k` and `whole` are multiples of LANES,
        // so weight `k + i` still goes to lane `i mod LANES`.
        for (l, i) in (whole..len).enumerate() {
            acc[l] += widened[i] * xs[i];
        }
        k += len;
    }
    let quads = [
        acc[0] + acc[4],
        acc[1] + acc[5],
        acc[2] + acc[6],
        acc[3] + acc[7],
    ];
    let halves = [quads[0] + quads[2], quads[1] + quads[3]];
    halves[0] + halves[1]
}
