//! Activations quantized per block of [`QX`] = 32 values, as ggml does (its `q8_0`/`q8_K`
//! idea), for the integer dot products of the quantized formats on every SIMD ISA; and
//! [`Activations`], what one kernel call receives: the f32 row and, for the quantized
//! formats, its blocks.
//!
//! The scalar [`quantize_activations`] is the definition. A block of values `x` becomes
//! `d = max|x| / 127` and `q = round(x / d)` (halves away from zero, clamped to ±127), with
//! `sum = Σ q` so that a weight format's constant offset (`q − 8` of q4_0, `− dmin·m` of
//! q4_K) is applied once per block: `Σ (q_w − 8)·q = Σ q_w·q − 8·sum`.
//!
//! What that costs in accuracy: for every element, `|x − d·q| ≤ d·(1/2 + 2⁻¹⁶)` (half a
//! step, plus the rounding of the quotient `x / d`, `|x / d| ≤ 127` so at most `127·2⁻²⁴`
//! of a step). A weight row `w` dotted with the quantized block is then off the exact
//! `Σ w·x` by at most `d·(1/2 + 2⁻¹⁶)·Σ|w|` per block, before any float rounding.
//!
//! Edge cases, defined here and kept by every SIMD body:
//! - `max|x| = 0` (or so small that `d` underflows to 0): `d = 0`, every `q = 0`; the block
//!   contributes exactly 0.
//! - a non-finite value (NaN or ±∞) anywhere in the block: `d = NaN`, every `q = 0`, so every
//!   output that reads the block is NaN (the f32 result would be NaN or ±∞).

use super::blocks::{BlockQ8x, QX};
use super::format::WeightFormat;
#[cfg(target_arch = "x86_64")]
use super::x86_layout::{FloatRows, TileCodes, TileLayout, WideCodes, WideLayout};

/// The layout of the activations a call prepares beside what every body reads (the blocks of
/// a quantized format, `x` of a float one): one ISA's own, which only that ISA's kernel asks
/// for (`Kernel::gemv_layout`, `Kernel::gemm_layout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CodeLayout {
    /// The blocks alone.
    Blocks,
    /// Also the x86 wide GEMV bodies' order of the codes (`quant/x86_layout.rs`).
    WideGemv,
    /// Also the x86 GEMM tiles' chunks (`quant/x86_layout.rs`).
    GemmTiles,
    /// Also `x` as the x86 sixteen-lane float GEMM tiles read it: each row on 64-byte lines,
    /// bf16's in their even-odd order (`quant/x86_layout.rs`).
    FloatTiles,
}

/// Quantizes `x` into `out`, one block per [`QX`] values (the module's definition). On an
/// x86 CPU with AVX2 the same code runs compiled for its vectors (revision 28: GEMM calls of
/// 32 rows spent 5–10 % of their time here), the same bits: IEEE division, comparisons and
/// conversions, in any width.
///
/// # Panics
/// When `x.len() != QX * out.len()`; the callers size `out` from `x`.
pub(crate) fn quantize_activations(x: &[f32], out: &mut [BlockQ8x]) {
    assert_eq!(
        x.len(),
        QX * out.len(),
        "activations: x is not whole blocks"
    );
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, just detected.
        unsafe { quantize_blocks_avx2(x, out) };
        return;
    }
    quantize_blocks(x, out);
}

/// Every block of `x` into `out` (as many), by [`quantize_block`].
#[inline(always)]
fn quantize_blocks(x: &[f32], out: &mut [BlockQ8x]) {
    for (block, xs) in out.iter_mut().zip(x.chunks_exact(QX)) {
        *block = quantize_block(xs);
    }
}

/// [`quantize_blocks`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn quantize_blocks_avx2(x: &[f32], out: &mut [BlockQ8x]) {
    quantize_blocks(x, out);
}

/// One block (`xs.len() == QX`). Written without library calls (no `roundf`), so the
/// compiler keeps it in registers and vectorizes it: the quotient is clamped to ±127 (the
/// same as clamping the rounded code, the bounds being integers), truncated, and moved one
/// away from zero when the dropped fraction is at least a half (the fraction `r − trunc(r)`
/// is exact).
#[inline(always)]
fn quantize_block(xs: &[f32]) -> BlockQ8x {
    // The largest magnitude by its bits: for non-negative floats the order of the bits is the
    // order of the values, and the infinities and NaNs lie above every finite value (an
    // integer maximum vectorizes; `f32::max` with its NaN rule does not).
    let amax_bits = xs
        .iter()
        .fold(0u32, |m, v| m.max(v.to_bits() & 0x7FFF_FFFF));
    let amax = f32::from_bits(amax_bits);
    if amax_bits >= f32::INFINITY.to_bits() {
        return BlockQ8x {
            d: f32::NAN,
            ..BlockQ8x::default()
        };
    }
    let d = amax / 127.0;
    if d == 0.0 {
        return BlockQ8x::default();
    }
    let mut qs = [0i8; QX];
    for (q, &v) in qs.iter_mut().zip(xs) {
        // `|v / d| ≤ 127` up to rounding; the clamp keeps the codes' range a hard invariant
        // (the SIMD bodies rely on it), also when `d` is subnormal and inexact.
        let r = (v / d).clamp(-127.0, 127.0);
        // SAFETY: `v` is finite and `d` finite and positive, so `r` is a number in
        // [−127, 127], which i32 holds (the unchecked conversion vectorizes; `as` must handle
        // NaN and overflow).
        let t: i32 = unsafe { r.to_int_unchecked() };
        let frac = r - t as f32;
        *q = (t + i32::from(frac >= 0.5) - i32::from(frac <= -0.5)) as i8;
    }
    let sum = qs.iter().map(|&q| i32::from(q)).sum();
    BlockQ8x { d, sum, qs }
}

/// The activations of one weight row's dot products: `x` in f32 and, when the weight format
/// is quantized, `x` quantized into `x.len() / QX` blocks with each block's `d` and `d·sum`
/// beside them in f32 and the sum of its first 16 codes (`sum_lo`), each contiguous (for
/// SIMD bodies that load the scales of 8 or 16 blocks at once); all four are empty for the
/// float formats, which widen the weights and keep `x` in f32.
///
/// Only [`QuantizedX::activations`] makes one, so the kernels may rely on the lengths: either
/// the four slices (`q`, `d`, `d_sum`, `sum_lo`) are empty or each has exactly
/// `x().len() / QX` elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Activations<'a> {
    x: &'a [f32],
    q: &'a [BlockQ8x],
    d: &'a [f32],
    d_sum: &'a [f32],
    sum_lo: &'a [i32],
    /// The x86 wide bodies' own layout of the codes (`quant/x86_layout.rs`).
    #[cfg(target_arch = "x86_64")]
    wide: WideCodes<'a>,
    /// The x86 GEMM tiles' own layout of the blocks (`quant/x86_layout.rs`).
    #[cfg(target_arch = "x86_64")]
    tiles: TileCodes<'a>,
    /// `x` as the x86 sixteen-lane float GEMM tiles read it (`quant/x86_layout.rs`).
    #[cfg(target_arch = "x86_64")]
    tile_x: &'a [f32],
}

#[allow(
    dead_code,
    reason = "the quantized parts are read by the SIMD bodies, which a target without a SIMD \
              ISA lacks"
)]
impl<'a> Activations<'a> {
    /// The values in f32.
    pub(crate) fn x(&self) -> &'a [f32] {
        self.x
    }

    /// The quantized blocks: empty, or exactly `x().len() / QX` of them.
    pub(crate) fn q(&self) -> &'a [BlockQ8x] {
        self.q
    }

    /// `q()[b].d` for every block, contiguous.
    pub(crate) fn d(&self) -> &'a [f32] {
        self.d
    }

    /// `q()[b].d · q()[b].sum` for every block (one rounding), contiguous.
    pub(crate) fn d_sum(&self) -> &'a [f32] {
        self.d_sum
    }

    /// The sum of the first 16 codes of `q()[b]` for every block, contiguous (q6_K's
    /// sub-blocks of 16 take their offset off with it).
    pub(crate) fn sum_lo(&self) -> &'a [i32] {
        self.sum_lo
    }

    /// The codes in the order of an x86 wide GEMV body (`x86_layout::wide_order`); empty
    /// unless the call asked for them.
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn wide(&self) -> WideCodes<'a> {
        self.wide
    }

    /// The blocks in the chunks of the x86 GEMM tiles (`x86_layout::TileLayout`); empty
    /// unless the call asked for them.
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn tiles(&self) -> TileCodes<'a> {
        self.tiles
    }

    /// `x` as the x86 sixteen-lane float GEMM tiles read it (`x86_layout::FloatRows`): from
    /// the start of a 64-byte line, bf16's in its even-odd order; empty unless the call asked
    /// for it.
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn tile_x(&self) -> &'a [f32] {
        self.tile_x
    }
}

/// The activations of one call, quantized once before the output rows are split: the blocks
/// of every row of `x` (rows of a multiple of [`QX`]), and their `d`, `d·sum` and `sum_lo`
/// (empty when the weight format is not quantized).
#[derive(Debug, Default)]
pub(crate) struct QuantizedX {
    blocks: Vec<BlockQ8x>,
    d: Vec<f32>,
    d_sum: Vec<f32>,
    sum_lo: Vec<i32>,
    /// Blocks per row (0 when nothing is quantized).
    nb: usize,
    /// The x86 wide bodies' layout, when the call asked for it.
    #[cfg(target_arch = "x86_64")]
    wide: WideLayout,
    /// The x86 GEMM tiles' layout, when the call asked for it.
    #[cfg(target_arch = "x86_64")]
    tiles: TileLayout,
    /// Every row of a float format's `x` as the x86 sixteen-lane float GEMM tiles read it,
    /// when the call asked for it.
    #[cfg(target_arch = "x86_64")]
    float_rows: FloatRows,
}

impl QuantizedX {
    /// The activations `x_row` of the call's row `row` (`x_row` is that row of the `x` given
    /// to [`quantize_for_call`]).
    ///
    /// # Panics
    /// When the blocks are not empty and `x_row` is not whole blocks or its blocks are not all
    /// there.
    pub(crate) fn activations<'a>(&'a self, x_row: &'a [f32], row: usize) -> Activations<'a> {
        if self.blocks.is_empty() {
            return Activations {
                x: x_row,
                q: &[],
                d: &[],
                d_sum: &[],
                sum_lo: &[],
                #[cfg(target_arch = "x86_64")]
                wide: WideCodes::default(),
                #[cfg(target_arch = "x86_64")]
                tiles: TileCodes::default(),
                #[cfg(target_arch = "x86_64")]
                tile_x: self.float_rows.row(row),
            };
        }
        assert!(
            x_row.len().is_multiple_of(QX),
            "activations: a row of {} values is not whole blocks",
            x_row.len()
        );
        let n = x_row.len() / QX;
        assert_eq!(n, self.nb, "activations: a row of another length");
        let range = row * n..(row + 1) * n;
        Activations {
            x: x_row,
            q: &self.blocks[range.clone()],
            d: &self.d[range.clone()],
            d_sum: &self.d_sum[range.clone()],
            sum_lo: &self.sum_lo[range],
            #[cfg(target_arch = "x86_64")]
            wide: self.wide.row(row, n),
            #[cfg(target_arch = "x86_64")]
            tiles: self.tiles.row(row),
            #[cfg(target_arch = "x86_64")]
            tile_x: &[],
        }
    }
}

/// The blocks of `x` (rows of `n_in`, a multiple of [`QX`]) when `format` is quantized, else
/// none: the one quantization of a call's activations, made before the output rows are
/// split; with the codes also in `layout`, which only an x86 kernel asks for (each ISA
/// prepares its own layout, `quant/x86_layout.rs` x86's; elsewhere only the blocks).
///
/// # Panics
/// When `format` is quantized and `n_in` or `x.len()` is not a multiple of [`QX`] (the
/// callers check the shape: a quantized format's rows are whole blocks of 32 or 256).
pub(crate) fn quantize_for_call(
    format: WeightFormat,
    layout: CodeLayout,
    x: &[f32],
    n_in: usize,
) -> QuantizedX {
    quantize_for_call_by(format, layout, x, n_in, |x, blocks| {
        quantize_activations(x, blocks);
    })
}

/// [`quantize_for_call`], its blocks made by `quantize(x, blocks)` (as
/// [`quantize_activations`], which it may run over parts of `x` at once: each block is
/// quantized by itself).
///
/// # Panics
/// As [`quantize_for_call`].
pub(crate) fn quantize_for_call_by(
    format: WeightFormat,
    layout: CodeLayout,
    x: &[f32],
    n_in: usize,
    quantize: impl FnOnce(&[f32], &mut [BlockQ8x]),
) -> QuantizedX {
    if !format.is_quantized() {
        return QuantizedX {
            #[cfg(target_arch = "x86_64")]
            float_rows: if layout == CodeLayout::FloatTiles {
                FloatRows::of(x, n_in, format == WeightFormat::Bf16)
            } else {
                FloatRows::default()
            },
            ..QuantizedX::default()
        };
    }
    assert!(
        n_in.is_multiple_of(QX) && x.len().is_multiple_of(n_in.max(1)),
        "activations: rows of {n_in} are not whole blocks"
    );
    let nb = n_in / QX;
    let mut blocks = vec![BlockQ8x::default(); x.len() / QX];
    quantize(x, &mut blocks);
    let d = blocks.iter().map(|b| b.d).collect();
    // `sum` is exact in f32 (|sum| ≤ 32·127).
    let d_sum: Vec<f32> = blocks.iter().map(|b| b.d * b.sum as f32).collect();
    let sum_lo: Vec<i32> = blocks
        .iter()
        .map(|b| b.qs[..QX / 2].iter().map(|&q| i32::from(q)).sum())
        .collect();
    #[cfg(target_arch = "x86_64")]
    let wide = if layout == CodeLayout::WideGemv && nb > 0 {
        WideLayout::of(format, &blocks, nb)
    } else {
        WideLayout::default()
    };
    #[cfg(target_arch = "x86_64")]
    let tiles = if layout == CodeLayout::GemmTiles && nb > 0 {
        TileLayout::of(&blocks, &d_sum, &sum_lo, nb)
    } else {
        TileLayout::default()
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = layout;
    QuantizedX {
        blocks,
        d,
        d_sum,
        sum_lo,
        nb,
        #[cfg(target_arch = "x86_64")]
        wide,
        #[cfg(target_arch = "x86_64")]
        tiles,
        #[cfg(target_arch = "x86_64")]
        float_rows: FloatRows::default(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Deterministic values in [-scale, scale).
    pub(crate) fn values(seed: u64, n: usize, scale: f32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0) * scale
            })
            .collect()
    }

    #[test]
    fn blocks_hold_every_value_within_half_a_step() {
        for (seed, scale) in [(1, 1.0), (2, 1e-3), (3, 3e4), (4, 1e-30)] {
            let x = values(seed, 4 * QX, scale);
            let mut out = [BlockQ8x::default(); 4];
            quantize_activations(&x, &mut out);
            for (block, xs) in out.iter().zip(x.chunks_exact(QX)) {
                let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                assert_eq!(block.d, amax / 127.0);
                let sum: i32 = block.qs.iter().map(|&q| i32::from(q)).sum();
                assert_eq!(block.sum, sum);
                let bound = f64::from(block.d) * (0.5 + 2f64.powi(-16));
                for (&q, &v) in block.qs.iter().zip(xs) {
                    assert!((-127..=127).contains(&q));
                    let err = (f64::from(v) - f64::from(block.d) * f64::from(q)).abs();
                    assert!(err <= bound, "{v} as {q}·{}: {err:e} > {bound:e}", block.d);
                }
                // The largest magnitude maps to ±127 exactly.
                assert!(block.qs.iter().any(|q| q.unsigned_abs() == 127));
            }
        }
    }

    #[test]
    fn codes_are_the_rounded_quotients() {
        for seed in 0..50 {
            let x = values(seed, QX, 10.0);
            let mut out = [BlockQ8x::default()];
            quantize_activations(&x, &mut out);
            for (&q, &v) in out[0].qs.iter().zip(&x) {
                let expected = (v / out[0].d).round().clamp(-127.0, 127.0) as i8;
                assert_eq!(q, expected, "{v} / {}", out[0].d);
            }
        }
    }

    #[test]
    fn halves_round_away_from_zero() {
        // amax = 127, so d = 1 and each x / d is exact.
        let mut x = [0.0f32; QX];
        let below_half = 0.5 - f32::EPSILON / 4.0;
        x[..9].copy_from_slice(&[
            127.0,
            0.5,
            -0.5,
            1.5,
            -2.5,
            126.5,
            below_half,
            -below_half,
            -126.5,
        ]);
        let mut out = [BlockQ8x::default()];
        quantize_activations(&x, &mut out);
        assert_eq!(out[0].d, 1.0);
        assert_eq!(&out[0].qs[..9], &[127, 1, -1, 2, -3, 127, 0, 0, -127]);
        assert_eq!(out[0].sum, 127 + 1 - 1 + 2 - 3 + 127 - 127);
    }

    #[test]
    fn an_all_zero_block_is_exactly_zero() {
        let mut x = vec![0.0f32; 2 * QX];
        x[QX + 3] = -0.0;
        x[5] = 1.0;
        let mut out = [BlockQ8x::default(); 2];
        quantize_activations(&x, &mut out);
        assert_eq!(out[1], BlockQ8x::default());
        assert_eq!(out[0].d, 1.0 / 127.0);
        assert_eq!(out[0].qs[5], 127);
        // A block whose scale underflows is zero too (each value is below 127 · 2⁻¹⁴⁹).
        let tiny = [f32::from_bits(1); QX];
        let mut out = [BlockQ8x::default()];
        quantize_activations(&tiny, &mut out);
        assert_eq!(out[0], BlockQ8x::default());
    }

    #[test]
    fn a_non_finite_value_makes_its_block_nan() {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut x = values(5, 3 * QX, 1.0);
            x[QX + 7] = bad;
            let mut out = [BlockQ8x::default(); 3];
            quantize_activations(&x, &mut out);
            assert!(out[1].d.is_nan(), "{bad}");
            assert_eq!((out[1].sum, out[1].qs), (0, [0; QX]));
            assert!(out[0].d.is_finite() && out[2].d.is_finite(), "{bad}");
        }
    }

    #[test]
    fn every_compile_of_the_quantizer_gives_the_same_bits() {
        // `quantize_activations` runs a copy compiled for this CPU's vectors where it has
        // them; the plain one is the definition.
        let mut x = Vec::new();
        for (seed, scale) in [(7, 1.0), (8, 1e-30), (9, 3e38), (10, 1e-3)] {
            x.extend(values(seed, 8 * QX, scale));
        }
        x.extend((0..QX).map(|i| i as f32 - 15.5)); // halves
        x.extend([f32::from_bits(1); QX]); // underflows
        x[3 * QX + 1] = f32::NAN;
        x[5 * QX] = f32::NEG_INFINITY;
        let n = x.len() / QX;
        let (mut fast, mut plain) = (vec![BlockQ8x::default(); n], vec![BlockQ8x::default(); n]);
        quantize_activations(&x, &mut fast);
        quantize_blocks(&x, &mut plain);
        for (b, (f, p)) in fast.iter().zip(&plain).enumerate() {
            assert_eq!(f.d.to_bits(), p.d.to_bits(), "block {b}");
            assert_eq!((f.sum, f.qs), (p.sum, p.qs), "block {b}");
        }
    }

    #[test]
    fn a_call_quantizes_every_row_once() {
        let x = values(6, 4 * QX, 2.0); // two rows of 2 blocks
        let all = quantize_for_call(WeightFormat::Q8_0, CodeLayout::Blocks, &x, 2 * QX);
        let mut expected = [BlockQ8x::default(); 4];
        quantize_activations(&x, &mut expected);
        let row1 = all.activations(&x[2 * QX..], 1);
        assert_eq!(row1.x(), &x[2 * QX..]);
        assert_eq!(row1.q(), &expected[2..]);
        assert_eq!(row1.d(), [expected[2].d, expected[3].d]);
        let d_sum = expected[2..].iter().map(|b| b.d * b.sum as f32);
        assert_eq!(row1.d_sum(), d_sum.collect::<Vec<_>>());
        let sum_lo = expected[2..]
            .iter()
            .map(|b| b.qs[..16].iter().map(|&q| i32::from(q)).sum());
        assert_eq!(row1.sum_lo(), sum_lo.collect::<Vec<i32>>());
        let float = quantize_for_call(WeightFormat::F16, CodeLayout::Blocks, &x, 2 * QX);
        let acts = float.activations(&x[..2 * QX], 0);
        assert!(acts.q().is_empty() && acts.d().is_empty() && acts.d_sum().is_empty());
        assert!(acts.sum_lo().is_empty());
        #[cfg(target_arch = "x86_64")]
        assert!(row1.wide().lines.is_empty() && acts.wide().lines.is_empty());
    }
}
