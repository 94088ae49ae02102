//! GEMV and GEMM on a [`WeightMatrix`] of any [`WeightFormat`]: the `qgemv*` and `qgemm*`
//! families, each the same body on the calling thread or split over a pool.
//! [`qgemv`] documents the numerics of each format and the error bound.

use crate::quant::activations::quantize_for_call;
use crate::{Kernel, selected};
use crate::{MatmulError, SharedOut, Split, WeightMatrix, WeightShape};
use std::ops::Range;
use threadpool::{SchedulePolicy, ThreadPool};

/// `y = W·x` for a [`WeightMatrix`] of any [`WeightFormat`](crate::WeightFormat) (`x` has
/// `n_in` elements, `y` `n_out`), on the [`selected`] kernel.
///
/// Each output's order of operations depends on the kernel and `n_in` alone, so the result is
/// bitwise identical on every thread count and policy ([`qgemv_parallel_with`]).
///
/// `Err(Shape)` when `x` or `y` does not match the matrix's shape.
///
/// # Numerics, per format
/// - **f32, f16, bf16**: the weights are widened to f32 (exactly: F16C's `vcvtph2ps`, a
///   16-bit shift for bf16) and dotted with `x` in f32 by FMA; `x` is used as it is. BF16's
///   `vdpbf16ps` is not used: it would round `x` to bf16 (8 significant bits).
/// - **q8_0, q4_0, q4_K, q6_K** on the SIMD kernels: `x` is quantized once per call, per
///   block of 32, to 8-bit codes with an f32 scale (`d = max|x| / 127`, as ggml's q8_0/q8_K),
///   and each block's dot product with the weight codes is computed in integers, exactly
///   (AVX2's `vpmaddubsw` + `vpmaddwd`, AVX512-VNNI's `vpdpbusd`); the block's scales multiply
///   it in f32. q4_0's offset 8 and q4_K's mins are summed apart in f32 from the
///   activations' per-block `d·Σq` (and, in the 512-bit GEMV bodies, q8_0's 128 and
///   q6_K's 32).
/// - The portable kernel is the reference: it widens every format's weights to f32 with
///   [`dequantize_row`](crate::dequantize_row) and keeps `x` in f32.
///
/// # Error bound
/// Against the exact dot product of the dequantized weights `w` with `x`, with
/// `γ(n) = n·u / (1 − n·u)` and `u = 2⁻²⁴`:
/// - f32 widening: `|ŷ − y| ≤ γ(n)·Σ_k |w_k·x_k|` with `n = ⌈n_in / 8⌉ + 5` roundings on the
///   longest path (a product, a lane's additions, the lanes' pairwise tree).
/// - quantized activations: each `x_k` is replaced by `d_b·q_k` with
///   `|x_k − d_b·q_k| ≤ d_b·(1/2 + 2⁻¹⁶)` (block `b`'s scale `d_b`), which moves the result by
///   at most `Σ_b d_b·(1/2 + 2⁻¹⁶)·Σ_{k∈b} |w_k|`; the f32 part then adds at most
///   `γ(n)·Σ_k M_k·(|x_k| + d_b)` with `n = ⌈n_in / 32⌉ + 10` (one accumulation per block, the
///   scales' products, the tree) and `M_k = |w_k| + 2·|o_k|`, where `o_k` is the offset summed
///   apart from the scaled codes: `128·d` for q8_0 (the 512-bit body dots `q + 128`), `8·d`
///   for q4_0, `dmin·m` of the weight's sub-block for q4_K, `32·d·sc` of the weight's
///   sub-block for q6_K (the 512-bit body dots the codes `0…63` as they are), 0 otherwise.
///
/// Non-finite activations: the f32 paths follow IEEE arithmetic; with quantized activations a
/// block holding a NaN or an infinity makes every output NaN.
///
/// # Example
/// ```
/// use matmul_kernel::{qgemv, WeightFormat, WeightMatrix, WeightShape};
///
/// let shape = WeightShape { n_out: 2, n_in: 32 };
/// // Row 0 cycles through -8..=7 twice, row 1 is all -8: q4_0 holds both exactly (d = 1).
/// let values: Vec<f32> = (0..64).map(|i| if i < 32 { (i % 16) as f32 - 8.0 } else { -8.0 }).collect();
/// let w = WeightMatrix::quantize(WeightFormat::Q4_0, shape, &values)?;
/// // 127/64: the 8-bit activation blocks hold it exactly (scale 1/64, code 127).
/// let x = [1.984375; 32];
/// let mut y = [0.0; 2];
/// qgemv(&w, &x, &mut y)?;
/// assert_eq!(y, [-31.75, -508.0]);
/// # Ok::<(), matmul_kernel::MatmulError>(())
/// ```
pub fn qgemv(w: &WeightMatrix, x: &[f32], y: &mut [f32]) -> Result<(), MatmulError> {
    qgemv_with(selected(), w, x, y)
}

/// [`qgemv`] on a given kernel.
pub fn qgemv_with(
    kernel: Kernel,
    w: &WeightMatrix,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    qgemv_split(kernel, Split::Serial, w, x, y)
}

/// [`qgemv`] with output rows split over `pool` by the pool's own policy, as
/// [`gemv_on`](crate::gemv_on).
pub fn qgemv_on(
    pool: &ThreadPool,
    w: &WeightMatrix,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    qgemv_parallel_with(selected(), pool, pool.policy(), w, x, y)
}

/// [`qgemv`] with output rows split over `pool` by `policy` (a runtime calls [`qgemv_on`]).
pub fn qgemv_parallel(
    pool: &ThreadPool,
    policy: SchedulePolicy,
    w: &WeightMatrix,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    qgemv_parallel_with(selected(), pool, policy, w, x, y)
}

/// [`qgemv_parallel`] on a given kernel: bitwise identical to [`qgemv_with`] for every
/// policy and thread count.
pub fn qgemv_parallel_with(
    kernel: Kernel,
    pool: &ThreadPool,
    policy: SchedulePolicy,
    w: &WeightMatrix,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    qgemv_split(kernel, Split::Pool(pool, policy), w, x, y)
}

/// The body of every quantized GEMV entry point: `x` is quantized once (for a quantized
/// format), then the output rows are split.
fn qgemv_split(
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
    let quantized = quantize_for_call(format, kernel.wide_gemv(format), x, n_in);
    let acts = quantized.activations(x, 0);
    split.for_output_rows(y, |rows, y_rows| {
        kernel.qgemv_rows(format, &bytes[rows.start * row_bytes..], acts, y_rows);
    })
}

/// `Y = X·Wᵀ` for a [`WeightMatrix`] of any [`WeightFormat`](crate::WeightFormat): `x` holds
/// `m` rows of `n_in` (row-major, `m = x.len() / n_in`), `y` the `m × n_out` result
/// (row-major), on the [`selected`] kernel.
///
/// Each weight row is read from memory once per call and dotted with all `m` rows of `x`
/// while it is in cache (tiles of 16 weight rows for the quantized formats; for the float
/// formats 4 to 16 rows, at most 16 KiB unless 4 rows need more); `x` is quantized once per
/// call.
///
/// # Numerics
/// As [`qgemv`]'s, within the same error bound, but not bitwise the [`qgemv`] of a row on
/// the x86 kernels' quantized formats: they repack sixteen weight rows into the lanes of
/// `vpdpbusd` and accumulate each output's scaled block dot products in one f32 lane, in
/// increasing block order (the offsets of q8_0, q4_0 and q6_K taken off exactly in the
/// integers, q4_K's mins in a second lane subtracted at the end). The float formats and the
/// other ISAs compute each output as [`qgemv`] does. Either way an output's order of
/// operations depends on the kernel, the format and `n_in` alone: `y[i]` is bitwise the
/// `qgemm` of row `i` of `x` alone, and the result is bitwise identical for every policy and
/// thread count.
///
/// `Err(Shape)` when `n_in` is 0, `x` is not whole rows of `n_in`, or `y` does not have
/// `m · n_out` elements.
///
/// ```
/// use matmul_kernel::{qgemm, WeightFormat, WeightMatrix, WeightShape};
///
/// let shape = WeightShape { n_out: 3, n_in: 64 };
/// let values: Vec<f32> = (0..192).map(|i| (i as f32 * 0.61).sin()).collect();
/// let w = WeightMatrix::quantize(WeightFormat::Q8_0, shape, &values)?;
/// let x: Vec<f32> = (0..128).map(|i| (i as f32 * 0.3).cos()).collect(); // m = 2
/// let mut y = [0.0; 6];
/// qgemm(&w, &x, &mut y)?;
/// let mut row1 = [0.0; 3];
/// qgemm(&w, &x[64..], &mut row1)?; // row 1 of `x` alone
/// assert_eq!(y[3..], row1);
/// # Ok::<(), matmul_kernel::MatmulError>(())
/// ```
pub fn qgemm(w: &WeightMatrix, x: &[f32], y: &mut [f32]) -> Result<(), MatmulError> {
    qgemm_with(selected(), w, x, y)
}

/// [`qgemm`] on a given kernel.
pub fn qgemm_with(
    kernel: Kernel,
    w: &WeightMatrix,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    qgemm_split(kernel, Split::Serial, w, x, y)
}

/// [`qgemm`] with the weight rows (columns of `Y`) split over `pool` by the pool's own
/// policy, as [`gemm_on`](crate::gemm_on).
pub fn qgemm_on(
    pool: &ThreadPool,
    w: &WeightMatrix,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    qgemm_parallel_with(selected(), pool, pool.policy(), w, x, y)
}

/// [`qgemm`] with the weight rows split over `pool` by `policy` (a runtime calls
/// [`qgemm_on`]).
pub fn qgemm_parallel(
    pool: &ThreadPool,
    policy: SchedulePolicy,
    w: &WeightMatrix,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    qgemm_parallel_with(selected(), pool, policy, w, x, y)
}

/// [`qgemm_parallel`] on a given kernel: bitwise identical to [`qgemm_with`] for every
/// policy and thread count.
pub fn qgemm_parallel_with(
    kernel: Kernel,
    pool: &ThreadPool,
    policy: SchedulePolicy,
    w: &WeightMatrix,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    qgemm_split(kernel, Split::Pool(pool, policy), w, x, y)
}

/// Bytes of weight rows dotted with every row of `x` before the next tile: half of a 32 KiB
/// L1, leaving room for the activations streaming past.
const QGEMM_TILE_BYTES: usize = 16 * 1024;

/// The most weight rows in one tile.
const QGEMM_TILE_ROWS: usize = 16;

/// The fewest weight rows in a float format's tile, however long the rows: the x86 bodies dot
/// two weight rows at a time with several activation rows.
const QGEMM_MIN_TILE_ROWS: usize = 4;

/// Activation rows dotted with one tile per kernel call: the tile's outputs for them fill a
/// stack buffer of `QGEMM_X_ROWS · QGEMM_TILE_ROWS` floats (4 KiB).
const QGEMM_X_ROWS: usize = 64;

/// The body of every quantized GEMM entry point.
fn qgemm_split(
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
    let quantized = quantize_for_call(format, false, x, n_in);
    // The quantized formats' x86 tiles pack eight rows a chunk of blocks at a time, so a tile
    // keeps its full height whatever the row length.
    let tile_rows = if format.is_quantized() {
        QGEMM_TILE_ROWS
    } else {
        (QGEMM_TILE_BYTES / row_bytes.max(1)).clamp(QGEMM_MIN_TILE_ROWS, QGEMM_TILE_ROWS)
    };
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
