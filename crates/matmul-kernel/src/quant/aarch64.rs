//! The NEON bodies of the GEMV on weight formats (`Neon::qgemv_rows`), one row at a time.
//!
//! - **f32, f16, bf16**: the weights are widened to f32 in registers (f16 with `FCVTL`,
//!   `vcvt_f32_f16`; bf16 by a shift of 16 bits, `vshll_n_u16`) and dotted with `x` in f32 by
//!   fused multiply-adds into four accumulators of four lanes: weight `k` goes to lane `k mod
//!   16` (a last partial step of fewer than 8 weights is zero-padded into the third and fourth
//!   accumulators), and the sum is `reduce((a0 + a2) + (a1 + a3))` with the lanes added as
//!   `(l, l+2)`, then `(0, 1)`. Each lane adds at most `⌈n_in / 16⌉ + 1` products, so the bound
//!   `Exec::qgemv` documents for the f32 widening (`⌈n_in / 8⌉ + 5` roundings) holds.
//! - **q8_0, q4_0, q4_K, q6_K**: per block of 32 weights (a q8_0/q4_0 block, a q4_K sub-block,
//!   two q6_K sub-blocks), the weight codes are decoded to i8 in registers and their dot
//!   product with the block's activation codes ([`BlockQ8x`]) is summed in integers, exactly,
//!   into four i32 lanes (lane `i` holds products `4i … 4i + 3` of each 16-byte half). A
//!   format's integer sub-block scales multiply the lanes in integers (exact: every lane stays
//!   below 2²⁴, so its conversion to f32 is exact too), and one fused multiply-add per block
//!   adds `lanes · (d_w · d_x)` to one of two f32 accumulators (even blocks to the first, odd
//!   to the second). q4_K's mins, `dmin·m · d_x · Σ q_x`, go to a scalar sum of their own,
//!   subtracted at the end. That is `⌈n_in / 32⌉` additions on a lane's longest path plus a
//!   constant few, inside the bound `Exec::qgemv` documents for quantized activations.
//!
//! The integer dot product has two implementations with the same lanes: `SDOT` where the CPU
//! has `dotprod` (four i8 products summed into each i32 lane by one instruction), and, where
//! it does not, `SMULL` (i8 × i8 → i16, exact: at most 128 · 127) followed by two pairwise
//! widening additions that group the products the same way. So both paths give bitwise the
//! same result, and the tests check that they do. `vdotq_s32` is still unstable in Rust
//! (`stdarch_neon_dotprod`), so `SDOT` is one line of inline assembly, in a function compiled
//! with `dotprod` enabled.
//!
//! The order of operations depends on the format and `n_in` alone, never on the rows that
//! share a call, so the result is bitwise identical on every thread count and policy.
//! Blocks are read from the bytes as they lie (little-endian, no alignment needed).

use super::activations::Activations;
use super::blocks::{BlockQ4_0, BlockQ4K, BlockQ6K, BlockQ8_0, BlockQ8x, QX};
use super::format::WeightFormat;
use crate::aarch64::Neon;
use crate::kernel::rows_fit;
use half::f16;
use std::arch::aarch64::*;

impl Neon {
    /// NEON GEMV over `y.len()` rows of `format` at the start of `w`, each `acts.x().len()`
    /// weights long (panics when `w` is shorter, the row is not whole blocks, or a quantized
    /// format comes without its activation blocks).
    pub(crate) fn qgemv_rows(
        self,
        format: WeightFormat,
        w: &[u8],
        acts: Activations<'_>,
        y: &mut [f32],
    ) {
        let n_in = acts.x().len();
        let row_bytes = format.row_bytes(n_in).expect("qgemv: n_in is whole blocks");
        assert!(rows_fit(w.len(), y.len(), row_bytes), "qgemv: w too short");
        assert!(
            !format.is_quantized() || acts.q().len() * QX == n_in,
            "qgemv: the activations of a {format} row are not quantized"
        );
        if self.has_dotprod() {
            // SAFETY: `self` has `dotprod` only when `detect` found it (and NEON) on this CPU.
            unsafe { qgemv_rows_dotprod(format, row_bytes, w, acts, y) }
        } else {
            // SAFETY: `self` exists, so `detect` found NEON on this CPU.
            unsafe { qgemv_rows_neon(format, row_bytes, w, acts, y) }
        }
    }
}

/// The GEMV rows with the plain NEON integer dot product.
///
/// # Safety
/// The CPU has NEON.
#[target_feature(enable = "neon")]
unsafe fn qgemv_rows_neon(
    format: WeightFormat,
    row_bytes: usize,
    w: &[u8],
    acts: Activations<'_>,
    y: &mut [f32],
) {
    // SAFETY: the feature is enabled on this function.
    unsafe { rows::<Smull>(format, row_bytes, w, acts, y) }
}

/// The GEMV rows with `SDOT`.
///
/// # Safety
/// The CPU has NEON and `dotprod`.
#[target_feature(enable = "neon,dotprod")]
unsafe fn qgemv_rows_dotprod(
    format: WeightFormat,
    row_bytes: usize,
    w: &[u8],
    acts: Activations<'_>,
    y: &mut [f32],
) {
    // SAFETY: the features are enabled on this function.
    unsafe { rows::<Sdot>(format, row_bytes, w, acts, y) }
}

/// `y[r]` = row `r` of `w` (`row_bytes` each) dotted with the activations.
///
/// # Safety
/// The CPU has NEON and what `D` needs. (Every read is bounds-checked: a `w` or `acts` that
/// does not match panics.)
#[inline(always)]
unsafe fn rows<D: DotI8>(
    format: WeightFormat,
    row_bytes: usize,
    w: &[u8],
    acts: Activations<'_>,
    y: &mut [f32],
) {
    if row_bytes == 0 {
        y.fill(0.0); // rows of no weights
        return;
    }
    let (x, xq) = (acts.x(), acts.q());
    for (out, row) in y.iter_mut().zip(w.chunks_exact(row_bytes)) {
        // SAFETY: the ISA is the caller's contract; the bodies check every read.
        *out = unsafe {
            match format {
                WeightFormat::F32 => dot_float::<F32Weights>(row, x),
                WeightFormat::F16 => dot_float::<F16Weights>(row, x),
                WeightFormat::Bf16 => dot_float::<Bf16Weights>(row, x),
                WeightFormat::Q8_0 => dot_quantized::<D, Q8_0>(row, xq),
                WeightFormat::Q4_0 => dot_quantized::<D, Q4_0>(row, xq),
                WeightFormat::Q4K => dot_quantized::<D, Q4K>(row, xq),
                WeightFormat::Q6K => dot_quantized::<D, Q6K>(row, xq),
            }
        };
    }
}

// ---------------------------------------------------------------------------------------------
// Loads and the reduction.

/// The 16 bytes of `bytes` at `at` (panics when they are not all there).
///
/// # Safety
/// The CPU has NEON.
#[inline(always)]
unsafe fn load_u8(bytes: &[u8], at: usize) -> uint8x16_t {
    let v: &[u8; 16] = bytes[at..at + 16].try_into().expect("16 bytes");
    // SAFETY: `v` is 16 readable bytes; NEON by the caller's contract.
    unsafe { vld1q_u8(v.as_ptr()) }
}

/// The 16 activation codes of `x` at `at` (0 or 16).
///
/// # Safety
/// The CPU has NEON.
#[inline(always)]
unsafe fn load_codes(x: &BlockQ8x, at: usize) -> int8x16_t {
    let v: &[i8; 16] = x.qs[at..at + 16].try_into().expect("16 codes");
    // SAFETY: `v` is 16 readable bytes; NEON by the caller's contract.
    unsafe { vld1q_s8(v.as_ptr()) }
}

/// The four floats of `x` at `at` (panics when they are not all there).
///
/// # Safety
/// The CPU has NEON.
#[inline(always)]
unsafe fn load_f32(x: &[f32], at: usize) -> float32x4_t {
    let v: &[f32; 4] = x[at..at + 4].try_into().expect("4 floats");
    // SAFETY: `v` is four readable floats; NEON by the caller's contract.
    unsafe { vld1q_f32(v.as_ptr()) }
}

/// The sum of the lanes as `(l, l+2)`, then `(0, 1)`: the portable tree's last two levels.
///
/// # Safety
/// The CPU has NEON.
#[inline(always)]
unsafe fn reduce(v: float32x4_t) -> f32 {
    // SAFETY: NEON by the caller's contract.
    unsafe {
        let h = vadd_f32(vget_low_f32(v), vget_high_f32(v));
        vget_lane_f32::<0>(h) + vget_lane_f32::<1>(h)
    }
}

/// The f16 at `bytes[at..at + 2]`, little-endian, as an f32 (exact).
fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

// ---------------------------------------------------------------------------------------------
// The float formats.

/// A float weight format: eight weights widened to two vectors of f32.
trait FloatWeights {
    /// Bytes per weight.
    const BYTES: usize;

    /// Weights `0..8` of `bytes` (at least `8 · BYTES` long) as f32: the first four, the last
    /// four.
    ///
    /// # Safety
    /// The CPU has NEON.
    unsafe fn widen8(bytes: &[u8]) -> [float32x4_t; 2];
}

/// f32 weights, little-endian.
struct F32Weights;
/// IEEE half weights, little-endian.
struct F16Weights;
/// bfloat16 weights, little-endian.
struct Bf16Weights;

impl FloatWeights for F32Weights {
    const BYTES: usize = 4;

    #[inline(always)]
    unsafe fn widen8(bytes: &[u8]) -> [float32x4_t; 2] {
        // SAFETY: NEON by the caller's contract; the loads are bounds-checked.
        unsafe {
            [
                vreinterpretq_f32_u8(load_u8(bytes, 0)),
                vreinterpretq_f32_u8(load_u8(bytes, 16)),
            ]
        }
    }
}

impl FloatWeights for F16Weights {
    const BYTES: usize = 2;

    #[inline(always)]
    unsafe fn widen8(bytes: &[u8]) -> [float32x4_t; 2] {
        // SAFETY: NEON by the caller's contract (`FCVTL` from half is base ARMv8, no `fp16`
        // extension); the load is bounds-checked.
        unsafe {
            let h = vreinterpretq_u16_u8(load_u8(bytes, 0));
            [
                vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))),
                vcvt_high_f32_f16(vreinterpretq_f16_u16(h)),
            ]
        }
    }
}

impl FloatWeights for Bf16Weights {
    const BYTES: usize = 2;

    #[inline(always)]
    unsafe fn widen8(bytes: &[u8]) -> [float32x4_t; 2] {
        // SAFETY: NEON by the caller's contract; the load is bounds-checked. A bf16 is the
        // upper half of an f32: widening each u16 to u32 shifted left by 16 is the f32.
        unsafe {
            let h = vreinterpretq_u16_u8(load_u8(bytes, 0));
            [
                vreinterpretq_f32_u32(vshll_n_u16::<16>(vget_low_u16(h))),
                vreinterpretq_f32_u32(vshll_high_n_u16::<16>(h)),
            ]
        }
    }
}

/// One row of float weights (`x.len()` of them in `row`) dotted with `x`, in the order the
/// module documents.
///
/// # Safety
/// The CPU has NEON.
#[inline(always)]
unsafe fn dot_float<F: FloatWeights>(row: &[u8], x: &[f32]) -> f32 {
    let n = x.len();
    // SAFETY: NEON by the caller's contract; every load is bounds-checked.
    unsafe {
        let mut acc = [vdupq_n_f32(0.0); 4];
        let mut k = 0;
        while k + 16 <= n {
            let [w0, w1] = F::widen8(&row[k * F::BYTES..]);
            let [w2, w3] = F::widen8(&row[(k + 8) * F::BYTES..]);
            acc[0] = vfmaq_f32(acc[0], w0, load_f32(x, k));
            acc[1] = vfmaq_f32(acc[1], w1, load_f32(x, k + 4));
            acc[2] = vfmaq_f32(acc[2], w2, load_f32(x, k + 8));
            acc[3] = vfmaq_f32(acc[3], w3, load_f32(x, k + 12));
            k += 16;
        }
        if k + 8 <= n {
            let [w0, w1] = F::widen8(&row[k * F::BYTES..]);
            acc[0] = vfmaq_f32(acc[0], w0, load_f32(x, k));
            acc[1] = vfmaq_f32(acc[1], w1, load_f32(x, k + 4));
            k += 8;
        }
        if k < n {
            // Fewer than 8 weights: zero-padded copies, so no read goes past the row.
            let tail = n - k;
            let mut w_pad = [0u8; 32];
            w_pad[..tail * F::BYTES].copy_from_slice(&row[k * F::BYTES..n * F::BYTES]);
            let mut x_pad = [0.0f32; 8];
            x_pad[..tail].copy_from_slice(&x[k..n]);
            let [w2, w3] = F::widen8(&w_pad);
            acc[2] = vfmaq_f32(acc[2], w2, load_f32(&x_pad, 0));
            acc[3] = vfmaq_f32(acc[3], w3, load_f32(&x_pad, 4));
        }
        reduce(vaddq_f32(
            vaddq_f32(acc[0], acc[2]),
            vaddq_f32(acc[1], acc[3]),
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// The integer dot product.

/// The dot product of 16 i8 pairs into four i32 lanes: lane `i` gets products `4i … 4i + 3`.
trait DotI8 {
    /// `acc` plus the products of `a` and `b`, grouped as the trait says.
    ///
    /// # Safety
    /// The CPU has NEON and the implementation's extension.
    unsafe fn dot16(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t;
}

/// `SDOT` (the `dotprod` extension).
struct Sdot;

/// `SMULL` and pairwise widening additions (plain NEON).
struct Smull;

impl DotI8 for Sdot {
    #[inline(always)]
    unsafe fn dot16(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        // SAFETY: the caller's contract includes `dotprod`.
        unsafe { sdot(acc, a, b) }
    }
}

/// `acc + SDOT(a, b)`: lane `i` adds `Σ_{j<4} a[4i + j]·b[4i + j]`, exactly.
///
/// # Safety
/// The CPU has NEON and `dotprod`.
#[target_feature(enable = "neon,dotprod")]
#[inline]
unsafe fn sdot(mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    // SAFETY: `SDOT` reads its three vector registers and writes the first; no memory, stack
    // or flags. The function's `dotprod` makes the assembler accept it; the caller's contract
    // makes the CPU run it.
    unsafe {
        std::arch::asm!(
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    acc
}

impl DotI8 for Smull {
    #[inline(always)]
    unsafe fn dot16(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        // SAFETY: NEON by the caller's contract. Products of i8 fit i16 (at most 128·128), pair
        // sums fit i32; `vpaddq_s32` of the pair sums of products 0..8 and 8..16 gives lanes
        // (0..4, 4..8, 8..12, 12..16): `SDOT`'s grouping.
        unsafe {
            let low = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
            let high = vpaddlq_s16(vmull_high_s8(a, b));
            vaddq_s32(acc, vpaddq_s32(low, high))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The quantized formats, per block of 32 weights.

/// A quantized format, seen one block of [`QX`] weights at a time.
trait QuantizedWeights {
    /// Bytes per weight block of the format.
    const BYTES: usize;
    /// Blocks of 32 per weight block (1 for q8_0/q4_0, 8 for the k-quants).
    const PARTS: usize;

    /// Part `part` of the weight block `block` dotted with the activation block `x`: the
    /// integer lanes (scaled by the integer sub-block scales), the f32 factor of the lanes,
    /// and the min term to subtract (q4_K; 0 for the others).
    ///
    /// # Safety
    /// The CPU has NEON and what `D` needs.
    unsafe fn part<D: DotI8>(block: &[u8], part: usize, x: &BlockQ8x) -> (int32x4_t, f32, f32);
}

/// q8_0: [`BlockQ8_0`]'s 32 codes as they are.
struct Q8_0;
/// q4_0: [`BlockQ4_0`]'s nibbles minus 8.
struct Q4_0;
/// q4_K: one sub-block of [`BlockQ4K`], nibbles times the 6-bit scale, the min apart.
struct Q4K;
/// q6_K: two sub-blocks of [`BlockQ6K`], 6-bit codes minus 32 times their i8 scales.
struct Q6K;

impl QuantizedWeights for Q8_0 {
    const BYTES: usize = BlockQ8_0::BYTES;
    const PARTS: usize = 1;

    #[inline(always)]
    unsafe fn part<D: DotI8>(block: &[u8], _: usize, x: &BlockQ8x) -> (int32x4_t, f32, f32) {
        // SAFETY: NEON and `D`'s extension by the caller's contract; loads bounds-checked.
        unsafe {
            let w0 = vreinterpretq_s8_u8(load_u8(block, 2));
            let w1 = vreinterpretq_s8_u8(load_u8(block, 18));
            let lanes = D::dot16(vdupq_n_s32(0), w0, load_codes(x, 0));
            let lanes = D::dot16(lanes, w1, load_codes(x, 16));
            (lanes, f16_at(block, 0) * x.d, 0.0)
        }
    }
}

impl QuantizedWeights for Q4_0 {
    const BYTES: usize = BlockQ4_0::BYTES;
    const PARTS: usize = 1;

    #[inline(always)]
    unsafe fn part<D: DotI8>(block: &[u8], _: usize, x: &BlockQ8x) -> (int32x4_t, f32, f32) {
        // SAFETY: NEON and `D`'s extension by the caller's contract; the load is
        // bounds-checked. Byte `j` holds weight `j` low and weight `j + 16` high.
        unsafe {
            let bytes = load_u8(block, 2);
            let eight = vdupq_n_s8(8);
            let w0 = vsubq_s8(
                vreinterpretq_s8_u8(vandq_u8(bytes, vdupq_n_u8(0x0F))),
                eight,
            );
            let w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(bytes)), eight);
            let lanes = D::dot16(vdupq_n_s32(0), w0, load_codes(x, 0));
            let lanes = D::dot16(lanes, w1, load_codes(x, 16));
            (lanes, f16_at(block, 0) * x.d, 0.0)
        }
    }
}

/// The 6-bit scale and min of sub-block `s < 8` from q4_K's 12 packed bytes (ggml's
/// `get_scale_min_k4`; [`BlockQ4K::scale_min`] without copying the block).
fn q4k_scale_min(scales: &[u8], s: usize) -> (u8, u8) {
    if s < 4 {
        (scales[s] & 63, scales[s + 4] & 63)
    } else {
        (
            (scales[s + 4] & 0x0F) | ((scales[s - 4] >> 6) << 4),
            (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4),
        )
    }
}

impl QuantizedWeights for Q4K {
    const BYTES: usize = BlockQ4K::BYTES;
    const PARTS: usize = 8;

    #[inline(always)]
    unsafe fn part<D: DotI8>(block: &[u8], s: usize, x: &BlockQ8x) -> (int32x4_t, f32, f32) {
        let (sc, m) = q4k_scale_min(&block[4..16], s);
        // Sub-blocks 2c and 2c + 1 share bytes 16 + 32c ..: low nibbles, then high ones.
        let at = 16 + 32 * (s / 2);
        // SAFETY: NEON and `D`'s extension by the caller's contract; loads bounds-checked.
        unsafe {
            let (b0, b1) = (load_u8(block, at), load_u8(block, at + 16));
            let (w0, w1) = if s.is_multiple_of(2) {
                let low = vdupq_n_u8(0x0F);
                (vandq_u8(b0, low), vandq_u8(b1, low))
            } else {
                (vshrq_n_u8::<4>(b0), vshrq_n_u8::<4>(b1))
            };
            let lanes = D::dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(w0), load_codes(x, 0));
            let lanes = D::dot16(lanes, vreinterpretq_s8_u8(w1), load_codes(x, 16));
            // Each lane is below 8 · 15 · 127 · 63 < 2²⁴, and so is `m · Σ q_x`.
            let scaled = vmulq_n_s32(lanes, i32::from(sc));
            let min = (f16_at(block, 2) * x.d) * (i32::from(m) * x.sum) as f32;
            (scaled, f16_at(block, 0) * x.d, min)
        }
    }
}

impl QuantizedWeights for Q6K {
    const BYTES: usize = BlockQ6K::BYTES;
    const PARTS: usize = 8;

    #[inline(always)]
    unsafe fn part<D: DotI8>(block: &[u8], p: usize, x: &BlockQ8x) -> (int32x4_t, f32, f32) {
        // Weights 32p .. 32p + 32 lie in half h = p / 4 as its quarter q = p % 4 (the layout
        // of `BlockQ6K`): low bits from `ql[64h + 32(q mod 2) ..]` (low nibbles for q < 2, high
        // ones after), high bits from `qh[32h ..]` shifted by 2q; scales 8h + 2q and + 1.
        let (h, q) = (p / 4, p % 4);
        let (ql, qh) = (64 * h + 32 * (q % 2), 128 + 32 * h);
        let sc = [block[192 + 8 * h + 2 * q], block[193 + 8 * h + 2 * q]].map(|b| b as i8);
        // SAFETY: NEON and `D`'s extension by the caller's contract; loads bounds-checked.
        unsafe {
            let low4 = vdupq_n_u8(0x0F);
            let three = vdupq_n_u8(3);
            let thirty_two = vdupq_n_s8(32);
            let mut lanes = vdupq_n_s32(0);
            for (half, &scale) in sc.iter().enumerate() {
                let lo = load_u8(block, ql + 16 * half);
                let lo = if q < 2 {
                    vandq_u8(lo, low4)
                } else {
                    vshrq_n_u8::<4>(lo)
                };
                let hi = vandq_u8(
                    vshlq_u8(load_u8(block, qh + 16 * half), vdupq_n_s8(-2 * q as i8)),
                    three,
                );
                let code = vorrq_u8(lo, vshlq_n_u8::<4>(hi));
                let w = vsubq_s8(vreinterpretq_s8_u8(code), thirty_two);
                let dot = D::dot16(vdupq_n_s32(0), w, load_codes(x, 16 * half));
                // |lane| ≤ 4 · 32 · 127 · 128 per half: the sum of both is below 2²⁴.
                lanes = vmlaq_n_s32(lanes, dot, i32::from(scale));
            }
            (lanes, f16_at(block, 208) * x.d, 0.0)
        }
    }
}

/// One row of a quantized format (`xq.len()` blocks of 32 weights in `row`) dotted with the
/// quantized activations `xq`, in the order the module documents: even blocks into the first
/// accumulator, odd ones into the second.
///
/// # Safety
/// The CPU has NEON and what `D` needs.
#[inline(always)]
unsafe fn dot_quantized<D: DotI8, Q: QuantizedWeights>(row: &[u8], xq: &[BlockQ8x]) -> f32 {
    let mut mins = 0.0f32;
    // SAFETY: NEON and `D`'s extension by the caller's contract.
    unsafe {
        let (mut even, mut odd) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
        let mut j = 0;
        while j + 2 <= xq.len() {
            even = add_block::<D, Q>(even, &mut mins, row, j, &xq[j]);
            odd = add_block::<D, Q>(odd, &mut mins, row, j + 1, &xq[j + 1]);
            j += 2;
        }
        if j < xq.len() {
            even = add_block::<D, Q>(even, &mut mins, row, j, &xq[j]);
        }
        reduce(vaddq_f32(even, odd)) - mins
    }
}

/// `acc` plus block `j` of `row` dotted with `x` (its min term added to `mins`).
///
/// # Safety
/// The CPU has NEON and what `D` needs.
#[inline(always)]
unsafe fn add_block<D: DotI8, Q: QuantizedWeights>(
    acc: float32x4_t,
    mins: &mut f32,
    row: &[u8],
    j: usize,
    x: &BlockQ8x,
) -> float32x4_t {
    let start = j / Q::PARTS * Q::BYTES;
    let block = &row[start..start + Q::BYTES];
    // SAFETY: NEON and `D`'s extension by the caller's contract.
    unsafe {
        let (lanes, scale, min) = Q::part::<D>(block, j % Q::PARTS, x);
        *mins += min;
        vfmaq_n_f32(acc, vcvtq_f32_s32(lanes), scale)
    }
}

#[cfg(test)]
mod tests;
