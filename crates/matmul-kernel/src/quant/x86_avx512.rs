//! The AVX-512 bodies of the quantized formats with VNNI: two blocks of 32 codes per 512-bit
//! vector, one `vpdpbusd` for both, the scales of sixteen blocks at a time.
//!
//! Reached only through `quant::x86::qgemv_rows_vnni`, which runs on the AVX-512 token when
//! it recorded VNNI (with AVX512BW and AVX512VL). Per pair of blocks the weight codes are
//! unpacked into one vector whose low half is block `b` and high half block `b + 1`, matching
//! two consecutive activation blocks; the i32 lanes are converted to f32 and multiplied by a
//! vector holding block `b`'s scale in lanes 0–7 and block `b + 1`'s in lanes 8–15. The
//! weight scales of sixteen blocks are picked out of 128-byte windows (`vpermt2w`) and
//! converted at once (F16C), and the
//! activations' `d` and `d·sum` are loaded from their contiguous arrays. q4_0's offset 8 is
//! summed apart in f32 (`Σ (q − 8)·x = Σ q·x − 8·sum`, sixteen blocks per FMA), as is q4_K's
//! `dmin·m`. q6_K runs the 256-bit body of `quant/x86.rs` with VNNI.
//!
//! Each row is one call of a fixed loop (pairs of blocks into accumulator `pair mod 4`, the
//! lanes combined once per row), so its value does not depend on the rows around it.

#![allow(
    clippy::needless_range_loop,
    reason = "indexed loops over accumulator arrays read like the math and unroll the same"
)]

use super::activations::{Activations, BlockQ8x, QX};
use super::format::WeightFormat;
use super::x86::{Vnni, WideBf16, WideF16, WideF32, dot_q6_k, float_rows, hsum, q4k_scales_mins};
use std::arch::x86_64::*;

/// The lanes' sum of a 512-bit vector: halves first, then the 8-lane tree of [`hsum`].
///
/// # Safety
/// The CPU has AVX-512F.
#[inline(always)]
unsafe fn hsum16(v: __m512) -> f32 {
    // SAFETY: AVX-512F by the contract.
    unsafe {
        let lo = _mm512_castps512_ps256(v);
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
        hsum(_mm256_add_ps(lo, hi))
    }
}

/// The sum of four accumulators' lanes, `(a0 + a1) + (a2 + a3)` first.
///
/// # Safety
/// The CPU has AVX-512F.
#[inline(always)]
unsafe fn finish16(acc: [__m512; 4]) -> f32 {
    // SAFETY: AVX-512F by the contract.
    unsafe {
        hsum16(_mm512_add_ps(
            _mm512_add_ps(acc[0], acc[1]),
            _mm512_add_ps(acc[2], acc[3]),
        ))
    }
}

/// The permutation that spreads elements `2p` and `2p + 1` of a scale vector over the two
/// halves of a pair's lanes.
///
/// # Safety
/// The CPU has AVX-512F.
#[inline(always)]
unsafe fn pair_pick(p: usize) -> __m512i {
    // SAFETY: AVX-512F by the contract.
    unsafe {
        let halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
        _mm512_add_epi32(_mm512_set1_epi32(2 * p as i32), halves)
    }
}

/// The codes of activation blocks `b` (low half) and `b + 1` (high half, zero when `two` is
/// false).
///
/// # Safety
/// Blocks `b` and, when `two`, `b + 1` at `q` are readable; the CPU has AVX-512F.
#[inline(always)]
unsafe fn codes2(q: *const BlockQ8x, b: usize, two: bool) -> __m512i {
    // SAFETY: only the blocks the contract names are read.
    unsafe {
        let lo = _mm256_loadu_si256((*q.add(b)).qs.as_ptr() as *const __m256i);
        let v = _mm512_zextsi256_si512(lo);
        if two {
            let hi = _mm256_loadu_si256((*q.add(b + 1)).qs.as_ptr() as *const __m256i);
            _mm512_inserti64x4::<1>(v, hi)
        } else {
            v
        }
    }
}

/// The f16 scales at the start of `n ≤ 16` blocks of `stride` bytes (even, at most 128) from `p`, as
/// f32 (lanes `n..` zero), without a gather (`vpgatherdd` is microcoded on AMD's cores) and
/// without narrow stores (a wide load after them stalls on store forwarding): the blocks are
/// read in windows of 128 bytes (masked loads, so nothing past the `n` blocks is touched),
/// and one `vpermt2w` per window picks the scales' 16-bit words.
///
/// # Safety
/// The `n` blocks are readable; the CPU has AVX-512F and AVX512BW.
#[inline(always)]
unsafe fn block_scales(p: *const u8, stride: usize, n: usize) -> __m512 {
    let stride_words = stride / 2;
    // Blocks whose scale lies in one window of 64 words.
    let per_window = 63 / stride_words + 1;
    // SAFETY: each masked load enables only words inside the `n` blocks; ISA by the contract.
    unsafe {
        let lane = _mm512_setr_epi32(
            0x0001_0000,
            0x0003_0002,
            0x0005_0004,
            0x0007_0006,
            0x0009_0008,
            0x000B_000A,
            0x000D_000C,
            0x000F_000E,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        );
        let mut words = _mm512_setzero_si512();
        let mut j0 = 0;
        while j0 < n {
            let avail = ((n - j0) * stride_words).min(64);
            let lo = (u64::MAX >> (64 - avail.min(32))) as __mmask32;
            let hi = if avail > 32 {
                (u64::MAX >> (64 - (avail - 32))) as __mmask32
            } else {
                0
            };
            let base = p.add(stride * j0);
            let a = _mm512_maskz_loadu_epi16(lo, base as *const i16);
            let b = _mm512_maskz_loadu_epi16(hi, base.add(64) as *const i16);
            let rel = _mm512_sub_epi16(lane, _mm512_set1_epi16(j0 as i16));
            let idx = _mm512_mullo_epi16(rel, _mm512_set1_epi16(stride_words as i16));
            let end = (j0 + per_window).min(n);
            let take = (((1u32 << end) - 1) & !((1u32 << j0) - 1)) as __mmask32;
            words = _mm512_mask_mov_epi16(words, take, _mm512_permutex2var_epi16(a, idx, b));
            j0 = end;
        }
        _mm512_cvtph_ps(_mm512_castsi512_si256(words))
    }
}

/// A format of 32-weight blocks, as the VNNI body reads it.
///
/// # Safety
/// `unpack` runs on a CPU with AVX-512F, BW and VL.
trait Blocks32 {
    /// Bytes per block; the f16 scale is at its start.
    const BYTES: usize;
    /// The constant subtracted from every code, summed apart in f32 (`offset·d·sum`).
    const OFFSET: f32;
    /// The codes of blocks `b` (low half) and `b + 1` (high half, zero when `two` is false)
    /// of the row at `row` as unsigned bytes, and the activation codes to dot them with.
    ///
    /// # Safety
    /// Blocks `b` and, when `two`, `b + 1` of the row and of `q` are readable; the CPU has
    /// AVX-512F, BW and VL.
    unsafe fn unpack(row: *const u8, q: *const BlockQ8x, b: usize, two: bool)
    -> (__m512i, __m512i);
}

/// q8_0: `|w|` against `x` with `w`'s sign (the same products).
struct Q8_0;

/// q4_0: the nibbles as they are, the offset 8 taken off per block.
struct Q4_0;

impl Blocks32 for Q8_0 {
    const BYTES: usize = 34;
    const OFFSET: f32 = 0.0;

    #[inline(always)]
    unsafe fn unpack(
        row: *const u8,
        q: *const BlockQ8x,
        b: usize,
        two: bool,
    ) -> (__m512i, __m512i) {
        // SAFETY: block `b` and, when `two`, `b + 1` of the row and the activations; ISA by
        // the contract.
        unsafe {
            let lo = _mm256_loadu_si256(row.add(34 * b + 2) as *const __m256i);
            let mut w = _mm512_zextsi256_si512(lo);
            if two {
                let hi = _mm256_loadu_si256(row.add(34 * b + 36) as *const __m256i);
                w = _mm512_inserti64x4::<1>(w, hi);
            }
            let x = codes2(q, b, two);
            let negative = _mm512_movepi8_mask(w);
            let x = _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x);
            (_mm512_abs_epi8(w), x)
        }
    }
}

impl Blocks32 for Q4_0 {
    const BYTES: usize = 18;
    const OFFSET: f32 = 8.0;

    #[inline(always)]
    unsafe fn unpack(
        row: *const u8,
        q: *const BlockQ8x,
        b: usize,
        two: bool,
    ) -> (__m512i, __m512i) {
        // SAFETY: block `b` and, when `two`, `b + 1` of the row and the activations; ISA by
        // the contract.
        unsafe {
            let lo = _mm_loadu_si128(row.add(18 * b + 2) as *const __m128i);
            let mut raw = _mm256_zextsi128_si256(lo);
            if two {
                let hi = _mm_loadu_si128(row.add(18 * b + 20) as *const __m128i);
                raw = _mm256_inserti128_si256::<1>(raw, hi);
            }
            // [r_b, r_b, r_b1, r_b1] in 128-bit lanes, the second and fourth shifted down by
            // a nibble: low nibbles (weights 0–15) then high nibbles (16–31) of each block.
            let dup = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3);
            let t = _mm512_permutexvar_epi64(dup, _mm512_zextsi256_si512(raw));
            let shifted = _mm512_srlv_epi64(t, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
            let w = _mm512_and_si512(shifted, _mm512_set1_epi8(0x0F));
            (w, codes2(q, b, two))
        }
    }
}

/// A row of `nb` blocks of `F` on VNNI.
///
/// # Safety
/// `row..row + F::BYTES·nb` and `nb` blocks of `acts` are readable; the CPU has AVX-512F,
/// BW, VL and VNNI.
#[inline(always)]
unsafe fn dot_blocks32<F: Blocks32>(row: *const u8, acts: Activations<'_>, nb: usize) -> f32 {
    let (q, d, d_sum) = (acts.q().as_ptr(), acts.d().as_ptr(), acts.d_sum().as_ptr());
    // SAFETY: groups of up to sixteen blocks inside `nb`; masked loads read only the blocks
    // of the group; ISA by the contract.
    unsafe {
        let mut acc = [_mm512_setzero_ps(); 4];
        let mut offsets = _mm512_setzero_ps();
        let mut g0 = 0;
        while g0 < nb {
            let n = 16.min(nb - g0);
            let mask = ((1u32 << n) - 1) as __mmask16;
            let dw = block_scales(row.add(F::BYTES * g0), F::BYTES, n);
            let scales = _mm512_mul_ps(dw, _mm512_maskz_loadu_ps(mask, d.add(g0)));
            if F::OFFSET != 0.0 {
                let d_sums = _mm512_maskz_loadu_ps(mask, d_sum.add(g0));
                offsets = _mm512_fmadd_ps(dw, d_sums, offsets);
            }
            let pairs = n.div_ceil(2);
            // Pairs in fours, so that each accumulator index is a constant (registers, not
            // the stack) and each pair's permutation too.
            for p0 in [0, 4] {
                for j in 0..4 {
                    let p = p0 + j;
                    if p < pairs {
                        let b = g0 + 2 * p;
                        let (w, x) = F::unpack(row, q, b, b + 1 < g0 + n);
                        let v = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, x);
                        let s = _mm512_permutexvar_ps(pair_pick(p), scales);
                        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), s, acc[j]);
                    }
                }
            }
            g0 += n;
        }
        finish16(acc) - F::OFFSET * hsum16(offsets)
    }
}

/// One q4_K row of `nsb` super-blocks on VNNI: per 32 bytes of nibbles, sub-blocks `2c`
/// (low nibbles) and `2c + 1` (high) in one vector against two activation blocks; the mins
/// summed apart.
///
/// # Safety
/// `row..row + 144·nsb` and `8·nsb` activation blocks are readable; the CPU has AVX-512F,
/// BW, VL and VNNI.
#[inline(always)]
unsafe fn dot_q4_k(row: *const u8, acts: Activations<'_>, nsb: usize) -> f32 {
    let (q, d, d_sum) = (acts.q().as_ptr(), acts.d().as_ptr(), acts.d_sum().as_ptr());
    // SAFETY: every read is inside super-block `sb < nsb` and its eight activation blocks;
    // ISA by the contract.
    unsafe {
        let low = _mm512_set1_epi8(0x0F);
        let halves = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
        let mut acc = [_mm512_setzero_ps(); 4];
        let mut mins = _mm256_setzero_ps();
        for sb in 0..nsb {
            let block = row.add(144 * sb);
            let (sc, m) = q4k_scales_mins(&*(block.add(4) as *const [u8; 12]));
            let dx = _mm256_loadu_ps(d.add(8 * sb));
            let d_scale = _mm256_set1_ps(super::x86::f16_at(block));
            let dmin = _mm256_set1_ps(super::x86::f16_at(block.add(2)));
            // d·sc and dmin·m are exact (11 + 6 significant bits); one rounding after each.
            let scale = _mm256_mul_ps(_mm256_mul_ps(d_scale, super::x86::bytes_to_f32(sc)), dx);
            let min = _mm256_mul_ps(dmin, super::x86::bytes_to_f32(m));
            mins = _mm256_fmadd_ps(min, _mm256_loadu_ps(d_sum.add(8 * sb)), mins);
            let scale = _mm512_castps256_ps512(scale);
            for c in 0..4 {
                let raw = _mm256_loadu_si256(block.add(16 + 32 * c) as *const __m256i);
                let t = _mm512_broadcast_i64x4(raw);
                let w = _mm512_and_si512(_mm512_srlv_epi64(t, halves), low);
                let v =
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, codes2(q, 8 * sb + 2 * c, true));
                let s = _mm512_permutexvar_ps(pair_pick(c), scale);
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), s, acc[c]);
            }
        }
        finish16(acc) - hsum(mins)
    }
}

/// Every row of `y` on VNNI: the float formats in 16 lanes, q8_0, q4_0 and q4_K two blocks
/// per vector, q6_K by the 256-bit body.
///
/// # Safety
/// `quant::x86::check_rows` holds; the CPU has AVX-512F, BW, VL, VNNI, AVX2, FMA and F16C.
#[inline(always)]
pub(super) unsafe fn rows_vnni(
    format: WeightFormat,
    w: &[u8],
    acts: Activations<'_>,
    y: &mut [f32],
) {
    let x = acts.x();
    let n_in = x.len();
    let row_bytes = n_in / format.block_size() * format.block_bytes();
    let (nb, nsb) = (n_in / QX, n_in / 256);
    // SAFETY: `w` holds `y.len()` rows of the format, by `check_rows`; ISA by the contract.
    unsafe {
        match format {
            WeightFormat::F32 => return float_rows::<WideF32, 16>(w, row_bytes, x, y),
            WeightFormat::F16 => return float_rows::<WideF16, 16>(w, row_bytes, x, y),
            WeightFormat::Bf16 => return float_rows::<WideBf16, 16>(w, row_bytes, x, y),
            _ => {}
        }
    }
    for (r, out) in y.iter_mut().enumerate() {
        // SAFETY: row `r < y.len()` lies in `w` and the activations match, by `check_rows`;
        // ISA by the contract.
        unsafe {
            let row = w.as_ptr().add(r * row_bytes);
            *out = match format {
                WeightFormat::Q8_0 => dot_blocks32::<Q8_0>(row, acts, nb),
                WeightFormat::Q4_0 => dot_blocks32::<Q4_0>(row, acts, nb),
                WeightFormat::Q4K => dot_q4_k(row, acts, nsb),
                WeightFormat::Q6K => dot_q6_k::<Vnni>(row, acts.q().as_ptr(), nsb),
                WeightFormat::F32 | WeightFormat::F16 | WeightFormat::Bf16 => unreachable!(),
            };
        }
    }
}
