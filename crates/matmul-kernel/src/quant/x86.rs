//! The x86 bodies of the GEMV and GEMM on weight formats, reached only through the ISA tokens
//! of `x86.rs` (`Avx2`, `Avx512`), whose safe methods call the `#[target_feature]` wrappers at
//! the end of this file.
//!
//! - Float formats (f32, f16, bf16): the widening FMA bodies of `quant/x86_float.rs`.
//! - Quantized formats (q8_0, q4_0, q4_K, q6_K): the GEMV by the bodies of
//!   `quant/x86_wide.rs` (512-bit with VNNI, and q4_0's AVX2 body) or else the 256-bit
//!   bodies of `quant/x86_int.rs`; the GEMM by the row tiles of `quant/x86_tile.rs` (q8_0
//!   without VNNI: `x86_int.rs`); the activations quantized per block.
//!
//! Each output is computed by one fixed sequence of operations, so its value does not depend
//! on the rows around it, the activation rows computed with it, or the thread.

#![allow(
    clippy::needless_range_loop,
    reason = "indexed loops over accumulator arrays read like the math and unroll the same"
)]

use super::activations::Activations;
use super::blocks::QX;
use super::format::WeightFormat;
use super::x86_float::{WideBf16, WideF16, WideF32, float_gemm, float_rows};
use super::x86_int::{self as int, Dot4, Maddubs, Vnni, XRow, int_rows};
use super::x86_tile::{Full, Half, Width, tile_rows};
use crate::bodies::{IsaLevel, gemm_body};

/// Checks what the bodies rely on: `y_len` is whole rows, one per activation row, and `w`
/// holds `n_rows = y_len / acts.len()` rows of each `acts[i].x().len()` weights of `format`
/// (whole blocks), the activations quantized when the format is.
///
/// # Panics
/// When it does not hold (the public entry points check the shapes first).
pub(crate) fn check_all_rows(
    format: WeightFormat,
    w: &[u8],
    acts: &[Activations<'_>],
    y_len: usize,
) {
    let n_rows = y_len.checked_div(acts.len()).unwrap_or(0);
    assert_eq!(n_rows * acts.len(), y_len, "qgemm: y is not whole rows");
    for a in acts {
        check_rows(format, w, *a, n_rows);
    }
}

/// [`check_all_rows`] for one activation row.
fn check_rows(format: WeightFormat, w: &[u8], acts: Activations<'_>, n_rows: usize) {
    let n_in = acts.x().len();
    let row_bytes = format.row_bytes(n_in).expect("qgemv: n_in is whole blocks");
    assert!(
        crate::kernel::rows_fit(w.len(), n_rows, row_bytes),
        "qgemv: w too short"
    );
    let blocks = if format.is_quantized() { n_in / QX } else { 0 };
    let wide = acts.wide();
    assert!(
        wide.lines.is_empty()
            || (wide.lines.len() == n_in.div_ceil(64)
                && (format != WeightFormat::Q6K || wide.sums16.len() == n_in / 16)),
        "qgemv: the wide activation codes do not match the row"
    );
    assert!(
        acts.q().len() == blocks
            && acts.d().len() == blocks
            && acts.d_sum().len() == blocks
            && acts.sum_lo().len() == blocks,
        "qgemv: the activations of a quantized format are not quantized"
    );
}

/// `y[i·n_rows + r]` = weight row `r` dotted with activation row `acts[i]`, for the
/// `n_rows = y.len() / acts.len()` rows at the start of `w`: the float formats in
/// `WIDE`-lane f32 (8 or 16), one activation row at a time; the quantized ones by `D`'s
/// integer dot products, `M` activation rows at a time.
///
/// # Safety
/// `check_rows` holds for every `acts[i]` with `n_rows`; `y.len()` is a multiple of
/// `acts.len()`; the CPU has AVX2, FMA, F16C, `D`'s instructions and, for `WIDE = 16`,
/// AVX-512F.
#[inline(always)]
unsafe fn rows<D: Dot4, const WIDE: usize, const M: usize>(
    format: WeightFormat,
    w: &[u8],
    acts: &[Activations<'_>],
    y: &mut [f32],
) {
    let Some(first) = acts.first() else {
        return;
    };
    let n_in = first.x().len();
    let row_bytes = n_in / format.block_size() * format.block_bytes();
    let n_rows = y.len() / acts.len();
    if n_rows == 0 {
        return;
    }
    if !format.is_quantized() {
        for (a, out) in acts.iter().zip(y.chunks_exact_mut(n_rows)) {
            // SAFETY: `w` holds `n_rows` rows of `a.x().len()` weights, by `check_rows`; ISA
            // by the contract.
            unsafe {
                match format {
                    WeightFormat::F32 => float_rows::<WideF32, WIDE>(w, row_bytes, a.x(), out),
                    WeightFormat::F16 => float_rows::<WideF16, WIDE>(w, row_bytes, a.x(), out),
                    _ => float_rows::<WideBf16, WIDE>(w, row_bytes, a.x(), out),
                }
            }
        }
        return;
    }
    let mut xs = [XRow::of(first); QGEMM_X_ROWS];
    for (chunk, out) in acts
        .chunks(QGEMM_X_ROWS)
        .zip(y.chunks_mut(QGEMM_X_ROWS * n_rows))
    {
        for (x, a) in xs.iter_mut().zip(chunk) {
            *x = XRow::of(a);
        }
        let (xs, nb) = (&xs[..chunk.len()], n_in / QX);
        // SAFETY: the rows and activations match, by `check_rows`; ISA by the contract.
        unsafe {
            match format {
                WeightFormat::Q8_0 => int_rows::<D, int::Q8_0, M>(w, row_bytes, xs, nb, out),
                WeightFormat::Q4_0 => int_rows::<D, int::Q4_0, M>(w, row_bytes, xs, nb, out),
                WeightFormat::Q4K => int_rows::<D, int::Q4K, M>(w, row_bytes, xs, nb, out),
                WeightFormat::Q6K => int_rows::<D, int::Q6K, M>(w, row_bytes, xs, nb, out),
                // The float formats returned above.
                WeightFormat::F32 | WeightFormat::F16 | WeightFormat::Bf16 => out.fill(f32::NAN),
            }
        }
    }
}

/// `y = W·x` for `Exec::gemv`'s f32 rows (`y.len()` rows of `x.len()`): the float formats'
/// GEMV body on f32 weights (`quant/x86_float.rs`), `WIDE` lanes (8 or 16), so one f32 body
/// serves both entry points.
///
/// # Safety
/// `w.len() >= y.len() · x.len()`; the CPU has AVX2, FMA, F16C and, for `WIDE = 16`,
/// AVX-512F.
#[inline(always)]
pub(crate) unsafe fn gemv_f32<const WIDE: usize>(w: &[f32], x: &[f32], y: &mut [f32]) {
    // SAFETY: the bytes of `w`'s initialized floats, in its own allocation (a `u8` view needs
    // no alignment and every byte of an f32 is initialized).
    let bytes = unsafe { std::slice::from_raw_parts(w.as_ptr().cast::<u8>(), size_of_val(w)) };
    // SAFETY: `bytes` holds `y.len()` rows of `x.len()` f32 weights, `4·x.len()` bytes apart,
    // by the contract; ISA by the contract.
    unsafe { float_rows::<WideF32, WIDE>(bytes, 4 * x.len(), x, y) }
}

/// The 512-bit GEMV rows of q8_0, q4_0, q4_K or q6_K (`quant/x86_wide.rs`), one of the
/// `threads` the call's rows are split over.
///
/// # Safety
/// `check_rows(format, w, acts, y.len())` holds, `format` is quantized and `acts` carries
/// its wide codes; the CPU has AVX512-VNNI, AVX512BW, AVX512VL, AVX-512F, AVX2, FMA and F16C.
#[target_feature(enable = "avx512vnni,avx512bw,avx512vl,avx512f,avx2,fma,f16c")]
pub(crate) unsafe fn qgemv_rows_wide(
    format: WeightFormat,
    w: &[u8],
    acts: Activations<'_>,
    y: &mut [f32],
    threads: usize,
) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { super::x86_wide::rows::<true, false>(format, w, acts, y, threads) }
}

/// [`qgemv_rows_wide`] on a CPU with AVX512-VBMI too: q4_0's body gathers its nibbles and
/// scales by byte permutes (`quant/x86_wide.rs`); the same bits.
///
/// # Safety
/// As [`qgemv_rows_wide`], and the CPU has AVX512-VBMI.
#[target_feature(enable = "avx512vbmi,avx512vnni,avx512bw,avx512vl,avx512f,avx2,fma,f16c")]
pub(crate) unsafe fn qgemv_rows_wide_vbmi(
    format: WeightFormat,
    w: &[u8],
    acts: Activations<'_>,
    y: &mut [f32],
    threads: usize,
) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { super::x86_wide::rows::<true, true>(format, w, acts, y, threads) }
}

/// The AVX2 GEMV rows of q4_0 on the wide activation layout (`quant/x86_wide.rs`), one of
/// the `threads` the call's rows are split over.
///
/// # Safety
/// `check_rows(format, w, acts, y.len())` holds, `format` is q4_0 and `acts`
/// carries its wide codes; the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn qgemv_rows_wide_avx2(
    format: WeightFormat,
    w: &[u8],
    acts: Activations<'_>,
    y: &mut [f32],
    threads: usize,
) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { super::x86_wide::rows::<false, false>(format, w, acts, y, threads) }
}

/// Activation rows handed to the integer bodies at once (a stack array of their pointers).
const QGEMM_X_ROWS: usize = 64;

/// AVX2 rows: 8-lane f32 for the float formats, `vpmaddubsw` dot products for the others, two
/// activation rows at a time (AVX2 has sixteen ymm registers).
///
/// # Safety
/// `check_rows(format, w, a, n_rows)` holds for every `a` in `acts`, with
/// `y.len() = acts.len() · n_rows`; the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn qgemm_rows_avx2(
    format: WeightFormat,
    w: &[u8],
    acts: &[Activations<'_>],
    y: &mut [f32],
) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { rows::<Maddubs, 8, 2>(format, w, acts, y) }
}

/// AVX-512 rows: 16-lane f32 for a float format, AVX2's `vpmaddubsw` bodies for the others
/// (four activation rows at a time: AVX-512 has 32 registers).
///
/// # Safety
/// As [`qgemm_rows_avx2`]; the CPU has AVX-512F, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
pub(crate) unsafe fn qgemm_rows_avx512(
    format: WeightFormat,
    w: &[u8],
    acts: &[Activations<'_>],
    y: &mut [f32],
) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { rows::<Maddubs, 16, 4>(format, w, acts, y) }
}

/// The GEMM's rows, by the table of `bodies.rs` at `level`: a quantized format by the row
/// tiles of `quant/x86_tile.rs` (`TM` activation rows at a time; q4_K `TM4K`, q6_K `TM6K`)
/// where the table says so,
/// f16 and bf16 by the float tiles (f32 runs `Exec::gemm`'s blocked body before it gets
/// here, `qmatmul.rs`; the tiles still take it correctly), everything else as [`rows`].
///
/// # Safety
/// As [`rows`].
#[inline(always)]
unsafe fn gemm_rows<
    D: Dot4,
    T: Width,
    const WIDE: usize,
    const M: usize,
    const TM: usize,
    const TM4K: usize,
    const TM6K: usize,
>(
    format: WeightFormat,
    w: &[u8],
    acts: &[Activations<'_>],
    y: &mut [f32],
    level: IsaLevel,
) {
    match acts.first() {
        Some(first) if gemm_body(level, format).is_int_tile() => {
            let n_in = first.x().len();
            let row_bytes = n_in / format.block_size() * format.block_bytes();
            // SAFETY: `check_rows` holds for every activation row: `w` holds the rows of
            // `n_in / QX` blocks and each row's blocks, `d·sum` and `sum_lo` are there; the
            // table gives a tile only where `T` multiplies the format's codes exactly
            // (`vpmaddubsw` never runs q8_0's `q + 128`); ISA by the contract.
            unsafe { tile_rows::<T, TM, TM4K, TM6K>(format, w, row_bytes, n_in / QX, acts, y) }
        }
        Some(first) if !format.is_quantized() && y.len() >= acts.len() => {
            let row_bytes = first.x().len() * format.block_bytes();
            // SAFETY: `check_rows` holds for every activation row; ISA by the contract.
            unsafe {
                match (format, WIDE) {
                    // AVX-512: 2 × 4 outputs in 16 of the 32 registers; AVX2: 2 × 2 in 8 of 16.
                    (WeightFormat::F32, 16) => float_gemm::<WideF32, 16, 4>(w, row_bytes, acts, y),
                    (WeightFormat::F16, 16) => float_gemm::<WideF16, 16, 4>(w, row_bytes, acts, y),
                    (_, 16) => float_gemm::<WideBf16, 16, 4>(w, row_bytes, acts, y),
                    (WeightFormat::F32, _) => float_gemm::<WideF32, 8, 2>(w, row_bytes, acts, y),
                    (WeightFormat::F16, _) => float_gemm::<WideF16, 8, 2>(w, row_bytes, acts, y),
                    _ => float_gemm::<WideBf16, 8, 2>(w, row_bytes, acts, y),
                }
            }
        }
        // SAFETY: forwarded contract.
        _ => unsafe { rows::<D, WIDE, M>(format, w, acts, y) },
    }
}

/// AVX2 GEMM rows: [`qgemm_rows_avx2`], except the quantized formats other than q8_0, which
/// run the row tiles eight lanes at a time with `vpmaddubsw`, four activation rows at a time.
///
/// # Safety
/// As [`qgemm_rows_avx2`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn qgemm_tiles_avx2(
    format: WeightFormat,
    w: &[u8],
    acts: &[Activations<'_>],
    y: &mut [f32],
) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe {
        gemm_rows::<Maddubs, Half<Maddubs>, 8, 2, 4, 2, 2>(format, w, acts, y, IsaLevel::Avx2)
    }
}

/// AVX-512 GEMM rows with VNNI: the quantized formats by the sixteen-row tiles with
/// 512-bit `vpdpbusd`, eight activation rows at a time (32 registers; q6_K four); a float
/// format by the float tiles in sixteen lanes.
///
/// # Safety
/// As [`rows`]; the CPU has AVX512-VNNI, AVX512VL, AVX-512F, AVX2, FMA and F16C.
#[target_feature(enable = "avx512vnni,avx512vl,avx512f,avx2,fma,f16c")]
pub(crate) unsafe fn qgemm_tiles_vnni(
    format: WeightFormat,
    w: &[u8],
    acts: &[Activations<'_>],
    y: &mut [f32],
) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { gemm_rows::<Vnni, Full, 16, 4, 8, 8, 4>(format, w, acts, y, IsaLevel::Avx512Vnni) }
}

/// AVX-512 GEMM rows of a float format: [`qgemm_rows_avx512`]'s 16-lane bodies on two weight
/// rows × four activation rows at once.
///
/// # Safety
/// As [`qgemm_rows_avx512`].
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
pub(crate) unsafe fn qgemm_tiles_avx512(
    format: WeightFormat,
    w: &[u8],
    acts: &[Activations<'_>],
    y: &mut [f32],
) {
    // SAFETY: forwarded contract; the features are enabled on this function (the quantized
    // formats never use `D`'s instructions here: the table gives q8_0 no `Maddubs` tile
    // and the others run AVX2's `vpmaddubsw`).
    unsafe {
        gemm_rows::<Maddubs, Half<Maddubs>, 16, 4, 4, 2, 2>(format, w, acts, y, IsaLevel::Avx512)
    }
}
