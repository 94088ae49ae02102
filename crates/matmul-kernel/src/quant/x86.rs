//! The x86 bodies of the GEMV on weight formats, reached only through the ISA tokens of
//! `x86.rs` (`Avx2`, `Avx512`), whose safe methods call the `#[target_feature]` wrappers at
//! the end of this file.
//!
//! - Float formats (f32, f16, bf16): eight (AVX2) or sixteen (AVX-512) weights are widened at
//!   a time (`vcvtph2ps` for f16, a 16-bit shift for bf16, both exact) and multiplied into two
//!   vector accumulators by FMA; `x` stays in f32.
//! - Quantized formats (q8_0, q4_0, q4_K, q6_K): each block of 32 weight codes is dotted with
//!   the matching block of quantized activations (`BlockQ8x`) in 32-bit integer lanes, four
//!   products per lane ([`Dot4`]: `vpmaddubsw` + `vpmaddwd` on AVX2, `vpdpbusd` with VNNI;
//!   both exact, so both give the same bits), then converted to f32 and multiplied by the
//!   block's scales into one of four vector accumulators (block `b` into accumulator
//!   `b mod 4`). q6_K's offset 32 is taken off in the integers (`Σ (q − 32)·x` lane by lane);
//!   q4_0's 8 and q4_K's `dmin·m` are summed apart in f32 from the activations' `d·sum`
//!   (`Σ (q − 8)·x = Σ q·x − 8·sum`).
//! - The same 256-bit integer bodies run on the AVX-512 token (with `vpdpbusd` when it has
//!   VNNI): bodies with two blocks per 512-bit vector were written and measured slower on an
//!   AMD EPYC (Zen 5) VM, from cache, 1 thread, 512 × 4096: q8_0 21 against 31 GB/s, q4_0 13.8
//!   against 13.8, q4_K 14.9 against 16.3.
//!
//! Each row is one call of a fixed loop, so its value does not depend on the rows around it
//! or the thread that computes it. The lanes are combined once per row.

#![allow(
    clippy::needless_range_loop,
    reason = "indexed loops over accumulator arrays read like the math and unroll the same"
)]

use super::activations::{Activations, BlockQ8x, QX};
use super::format::WeightFormat;
use std::arch::x86_64::*;

/// Checks what the bodies rely on: `w` holds `n_rows` rows of `acts.x().len()` weights of
/// `format` (whole blocks), and the activations are quantized when the format is.
///
/// # Panics
/// When it does not hold (the public entry points check the shapes first).
pub(crate) fn check_rows(format: WeightFormat, w: &[u8], acts: Activations<'_>, n_rows: usize) {
    let n_in = acts.x().len();
    let row_bytes = format.row_bytes(n_in).expect("qgemv: n_in is whole blocks");
    assert!(
        crate::kernel::rows_fit(w.len(), n_rows, row_bytes),
        "qgemv: w too short"
    );
    let blocks = if format.is_quantized() { n_in / QX } else { 0 };
    assert!(
        acts.q().len() == blocks && acts.d().len() == blocks && acts.d_sum().len() == blocks,
        "qgemv: the activations of a quantized format are not quantized"
    );
}

/// Sums of four consecutive `u8 · i8` products in each i32 lane of a 256-bit vector.
///
/// # Safety
/// Callers run on a CPU with the implementor's instructions; `a`'s bytes are at most 128 and
/// `b`'s at least −127 (so `vpmaddubsw`'s pairs, at most `2·128·127`, never saturate).
trait Dot4 {
    /// `Σ_{j<4} a[4l + j]·b[4l + j]` in lane `l`.
    ///
    /// # Safety
    /// As the trait.
    unsafe fn dot4(a: __m256i, b: __m256i) -> __m256i;

    /// `Σ_{j<4} (a[4l + j] − o[4l + j])·b[4l + j]` in lane `l`, exactly (`o`'s bytes within
    /// `a`'s bounds).
    ///
    /// # Safety
    /// As the trait.
    #[inline(always)]
    unsafe fn dot4_offset(a: __m256i, o: __m256i, b: __m256i) -> __m256i {
        // SAFETY: forwarded contract.
        unsafe { _mm256_sub_epi32(Self::dot4(a, b), Self::dot4(o, b)) }
    }
}

/// AVX2: `vpmaddubsw` (pairs, in i16) then `vpmaddwd` by ones (pairs of pairs, in i32).
struct Maddubs;

/// AVX512-VNNI on 256-bit vectors: `vpdpbusd`.
struct Vnni;

impl Dot4 for Maddubs {
    #[inline(always)]
    unsafe fn dot4(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 by the trait contract; the pairs fit i16 by the value ranges.
        unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1)) }
    }

    #[inline(always)]
    unsafe fn dot4_offset(a: __m256i, o: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 by the trait contract. Both pair sums fit i16 and so does their
        // difference (`|a − o| ≤ 128`), so subtracting before `vpmaddwd` is exact and saves one.
        unsafe {
            let pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(a, b), _mm256_maddubs_epi16(o, b));
            _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
        }
    }
}

impl Dot4 for Vnni {
    #[inline(always)]
    unsafe fn dot4(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX512-VNNI and AVX512VL by the trait contract.
        unsafe { _mm256_dpbusd_epi32(_mm256_setzero_si256(), a, b) }
    }
}

/// The f32 value of the little-endian f16 at `p` (F16C; exact).
///
/// # Safety
/// `p..p + 2` is readable; the CPU has F16C.
#[inline(always)]
unsafe fn f16_at(p: *const u8) -> f32 {
    // SAFETY: two readable bytes by the contract; F16C available.
    unsafe {
        let bits = std::ptr::read_unaligned(p as *const u16);
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
    }
}

/// The 32 codes of activation block `b`.
///
/// # Safety
/// `q..q + b + 1` are readable blocks; the CPU has AVX.
#[inline(always)]
unsafe fn codes(q: *const BlockQ8x, b: usize) -> __m256i {
    // SAFETY: block `b` is readable; its 32 codes are contiguous.
    unsafe { _mm256_loadu_si256((*q.add(b)).qs.as_ptr() as *const __m256i) }
}

/// The sum of the lanes of four accumulators, `(a0 + a1) + (a2 + a3)` then a pairwise tree.
///
/// # Safety
/// The CPU has AVX.
#[inline(always)]
unsafe fn finish(acc: [__m256; 4]) -> f32 {
    // SAFETY: AVX by the contract.
    unsafe {
        hsum(_mm256_add_ps(
            _mm256_add_ps(acc[0], acc[1]),
            _mm256_add_ps(acc[2], acc[3]),
        ))
    }
}

/// The sum of eight lanes: (l, l + 4), (l, l + 2), (0, 1).
///
/// # Safety
/// The CPU has AVX.
#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    // SAFETY: AVX by the contract.
    unsafe {
        let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let h = _mm_add_ps(q, _mm_movehl_ps(q, q));
        _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps::<0b01>(h, h)))
    }
}

/// One q8_0 row of `nb` blocks at `row` dotted with the activation blocks at `q`.
///
/// # Safety
/// `row..row + 34·nb` and `nb` blocks at `q` are readable; the CPU has AVX2, FMA, F16C and
/// `D`'s instructions.
#[inline(always)]
unsafe fn dot_q8_0<D: Dot4>(row: *const u8, q: *const BlockQ8x, nb: usize) -> f32 {
    // SAFETY: every read is inside block `b < nb` of `row` and `q`; ISA by the contract.
    unsafe {
        let mut acc = [_mm256_setzero_ps(); 4];
        for b0 in (0..nb).step_by(4) {
            for j in 0..4.min(nb - b0) {
                let b = b0 + j;
                let block = row.add(34 * b);
                let w = _mm256_loadu_si256(block.add(2) as *const __m256i);
                let x = codes(q, b);
                // |w| as u8 (−128 becomes 128) against x with w's sign: the same products.
                let v = D::dot4(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
                let s = _mm256_set1_ps(f16_at(block) * (*q.add(b)).d);
                acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), s, acc[j]);
            }
        }
        finish(acc)
    }
}

/// One q4_0 block `b` with its codes `w` (unpacked): `Σ q·x` scaled into `acc`, `dw·d·sum`
/// into `offset`.
///
/// # Safety
/// Block `b` of `row` (18 bytes) and of the activations is readable; the CPU has AVX2, FMA,
/// F16C and `D`'s instructions.
#[allow(
    clippy::too_many_arguments,
    reason = "the inner step of one loop, inlined: the pointers are the loop's"
)]
#[inline(always)]
unsafe fn q4_0_block<D: Dot4>(
    row: *const u8,
    q: *const BlockQ8x,
    d: *const f32,
    d_sum: *const f32,
    b: usize,
    w: __m256i,
    acc: &mut __m256,
    offset: &mut f32,
) {
    // SAFETY: block `b` is readable by the contract; ISA by the contract.
    unsafe {
        let dw = f16_at(row.add(18 * b));
        *offset = dw.mul_add(*d_sum.add(b), *offset);
        let s = _mm256_set1_ps(dw * *d.add(b));
        let v = D::dot4(w, codes(q, b));
        *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), s, *acc);
    }
}

/// One q4_0 row of `nb` blocks (18 bytes each): the nibbles as they are against `x`, two
/// blocks per step (one 256-bit unpack for both), the offset 8 summed apart in f32 from the
/// activations' `d·sum` (`Σ (q − 8)·x = Σ q·x − 8·sum`).
///
/// # Safety
/// `row..row + 18·nb` and `nb` activation blocks are readable; the CPU has AVX2, FMA, F16C
/// and `D`'s instructions.
#[inline(always)]
unsafe fn dot_q4_0<D: Dot4>(row: *const u8, acts: Activations<'_>, nb: usize) -> f32 {
    let (q, d, d_sum) = (acts.q().as_ptr(), acts.d().as_ptr(), acts.d_sum().as_ptr());
    // SAFETY: every read is inside block `b < nb` of `row` and the activations (the second
    // block of a step only when `b + 1 < nb`); ISA by the contract.
    unsafe {
        let low = _mm256_set1_epi8(0x0F);
        let mut acc = [_mm256_setzero_ps(); 4];
        // One offset sum per accumulator: a single one would chain every block's FMA.
        let mut offsets = [0.0f32; 4];
        let mut b = 0;
        while b + 4 <= nb {
            for pair in 0..2 {
                let b0 = b + 2 * pair;
                let lo = _mm_loadu_si128(row.add(18 * b0 + 2) as *const __m128i);
                let hi = _mm_loadu_si128(row.add(18 * b0 + 20) as *const __m128i);
                let raw = _mm256_set_m128i(hi, lo);
                let low_nibbles = _mm256_and_si256(raw, low);
                let high_nibbles = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low);
                let w = [
                    _mm256_permute2x128_si256::<0x20>(low_nibbles, high_nibbles),
                    _mm256_permute2x128_si256::<0x31>(low_nibbles, high_nibbles),
                ];
                for (half, &w) in w.iter().enumerate() {
                    let j = 2 * pair + half;
                    q4_0_block::<D>(row, q, d, d_sum, b + j, w, &mut acc[j], &mut offsets[j]);
                }
            }
            b += 4;
        }
        for j in 0..nb - b {
            let raw = _mm_loadu_si128(row.add(18 * (b + j) + 2) as *const __m128i);
            let low = _mm256_castsi256_si128(low);
            let lo = _mm_and_si128(raw, low);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(raw), low);
            let w = _mm256_set_m128i(hi, lo);
            q4_0_block::<D>(row, q, d, d_sum, b + j, w, &mut acc[j], &mut offsets[j]);
        }
        finish(acc) - 8.0 * ((offsets[0] + offsets[1]) + (offsets[2] + offsets[3]))
    }
}

/// The eight 6-bit scales and the eight mins of a q4_K block's 12 packed bytes, each as eight
/// bytes of a u64 (ggml's unpacking, the inverse of `BlockQ4K::pack_scales_mins`).
#[inline(always)]
fn q4k_scales_mins(p: &[u8; 12]) -> (u64, u64) {
    let word = |i: usize| u32::from_le_bytes([p[4 * i], p[4 * i + 1], p[4 * i + 2], p[4 * i + 3]]);
    let (u0, u1, u2) = (word(0), word(1), word(2));
    let sc_lo = u0 & 0x3F3F_3F3F;
    let sc_hi = (u2 & 0x0F0F_0F0F) | (((u0 >> 6) & 0x0303_0303) << 4);
    let m_lo = u1 & 0x3F3F_3F3F;
    let m_hi = ((u2 >> 4) & 0x0F0F_0F0F) | (((u1 >> 6) & 0x0303_0303) << 4);
    (
        u64::from(sc_lo) | (u64::from(sc_hi) << 32),
        u64::from(m_lo) | (u64::from(m_hi) << 32),
    )
}

/// Eight bytes as eight f32 lanes.
///
/// # Safety
/// The CPU has AVX2.
#[inline(always)]
unsafe fn bytes_to_f32(bytes: u64) -> __m256 {
    // SAFETY: AVX2 by the contract.
    unsafe { _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes as i64))) }
}

/// One q4_K row of `nsb` super-blocks (144 bytes, eight sub-blocks of 32, each matching one
/// activation block). Per sub-block `s`: `(d·sc_s·d_x)·Σ q·x_q − (dmin·m_s)·(d_x·sum)`; the
/// first terms go to the four accumulators, the mins to a fifth, subtracted at the end.
///
/// # Safety
/// `row..row + 144·nsb` and `8·nsb` activation blocks are readable; the CPU has AVX2, FMA,
/// F16C and `D`'s instructions.
#[inline(always)]
unsafe fn dot_q4_k<D: Dot4>(row: *const u8, acts: Activations<'_>, nsb: usize) -> f32 {
    let (q, d, d_sum) = (acts.q().as_ptr(), acts.d().as_ptr(), acts.d_sum().as_ptr());
    // SAFETY: every read is inside super-block `sb < nsb` of `row` and its eight activation
    // blocks (their codes, `d` and `d·sum`); ISA by the contract.
    unsafe {
        let low = _mm256_set1_epi8(0x0F);
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut mins = _mm256_setzero_ps();
        for sb in 0..nsb {
            let block = row.add(144 * sb);
            let xb = q.add(8 * sb);
            let packed = &*(block.add(4) as *const [u8; 12]);
            let (sc, m) = q4k_scales_mins(packed);
            let dx = _mm256_loadu_ps(d.add(8 * sb));
            // d·sc and dmin·m are exact (11 + 6 significant bits); one rounding each after.
            let scale = _mm256_mul_ps(
                _mm256_mul_ps(_mm256_set1_ps(f16_at(block)), bytes_to_f32(sc)),
                dx,
            );
            let min = _mm256_mul_ps(_mm256_set1_ps(f16_at(block.add(2))), bytes_to_f32(m));
            mins = _mm256_fmadd_ps(min, _mm256_loadu_ps(d_sum.add(8 * sb)), mins);
            for c in 0..4 {
                let raw = _mm256_loadu_si256(block.add(16 + 32 * c) as *const __m256i);
                let lo = _mm256_and_si256(raw, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low);
                let v0 = D::dot4(lo, codes(xb, 2 * c));
                let v1 = D::dot4(hi, codes(xb, 2 * c + 1));
                let s0 = _mm256_permutevar8x32_ps(scale, _mm256_set1_epi32(2 * c as i32));
                let s1 = _mm256_permutevar8x32_ps(scale, _mm256_set1_epi32(2 * c as i32 + 1));
                let (a0, a1) = ((2 * c) % 4, (2 * c + 1) % 4);
                acc[a0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v0), s0, acc[a0]);
                acc[a1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v1), s1, acc[a1]);
            }
        }
        finish(acc) - hsum(mins)
    }
}

/// One q6_K row of `nsb` super-blocks (210 bytes; sixteen sub-blocks of 16, two per
/// activation block). Per activation block: `Σ sc·(q − 32)·x_q` in i32 lanes (lanes 0–3 the
/// first sub-block, 4–7 the second), times `d·d_x` in f32.
///
/// # Safety
/// `row..row + 210·nsb` and `8·nsb` blocks at `q` are readable; the CPU has AVX2, FMA, F16C
/// and `D`'s instructions.
#[inline(always)]
unsafe fn dot_q6_k<D: Dot4>(row: *const u8, q: *const BlockQ8x, nsb: usize) -> f32 {
    // SAFETY: every read is inside super-block `sb < nsb` of `row` (ql at 0, qh at 128,
    // scales at 192, d at 208) and its eight activation blocks; ISA by the contract.
    unsafe {
        let low = _mm256_set1_epi8(0x0F);
        let bits = |mask: i8| _mm256_set1_epi8(mask);
        let offset = _mm256_set1_epi8(32);
        let mut acc = [_mm256_setzero_ps(); 4];
        for sb in 0..nsb {
            let block = row.add(210 * sb);
            let d = f16_at(block.add(208));
            let scales = _mm_loadu_si128(block.add(192) as *const __m128i);
            for h in 0..2 {
                let a = _mm256_loadu_si256(block.add(64 * h) as *const __m256i);
                let b = _mm256_loadu_si256(block.add(64 * h + 32) as *const __m256i);
                let c = _mm256_loadu_si256(block.add(128 + 32 * h) as *const __m256i);
                let codes6 = [
                    _mm256_or_si256(
                        _mm256_and_si256(a, low),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(c, bits(0x03))),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(b, low),
                        _mm256_slli_epi16::<2>(_mm256_and_si256(c, bits(0x0C))),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(a), low),
                        _mm256_and_si256(c, bits(0x30)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(b), low),
                        _mm256_and_si256(_mm256_srli_epi16::<2>(c), bits(0x30)),
                    ),
                ];
                let half_scales = if h == 0 {
                    scales
                } else {
                    _mm_srli_si128::<8>(scales)
                };
                let sc = _mm256_cvtepi8_epi32(half_scales);
                for j in 0..4 {
                    let xi = 8 * sb + 4 * h + j;
                    let x = codes(q, xi);
                    let v = D::dot4_offset(codes6[j], offset, x);
                    let pick = _mm256_setr_epi32(
                        2 * j as i32,
                        2 * j as i32,
                        2 * j as i32,
                        2 * j as i32,
                        2 * j as i32 + 1,
                        2 * j as i32 + 1,
                        2 * j as i32 + 1,
                        2 * j as i32 + 1,
                    );
                    let v = _mm256_mullo_epi32(v, _mm256_permutevar8x32_epi32(sc, pick));
                    let s = _mm256_set1_ps(d * (*q.add(xi)).d);
                    acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), s, acc[j]);
                }
            }
        }
        finish(acc)
    }
}

/// A float format's widening to f32.
///
/// # Safety
/// The vector methods run on a CPU with AVX2+F16C (`w8`) or AVX-512F (`w16`); `row + k` is
/// readable for the weights loaded.
trait Widen {
    /// Weights `k..k + 8` of the row at `row`.
    ///
    /// # Safety
    /// As the trait.
    unsafe fn w8(row: *const u8, k: usize) -> __m256;
    /// Weights `k..k + 16` of the row at `row`.
    ///
    /// # Safety
    /// As the trait.
    unsafe fn w16(row: *const u8, k: usize) -> __m512;
    /// Weight `k` of the row at `row`.
    ///
    /// # Safety
    /// Weight `k`'s bytes are readable.
    unsafe fn w1(row: *const u8, k: usize) -> f32;
}

/// f32 weights.
struct WideF32;
/// f16 weights.
struct WideF16;
/// bf16 weights.
struct WideBf16;

impl Widen for WideF32 {
    #[inline(always)]
    unsafe fn w8(row: *const u8, k: usize) -> __m256 {
        // SAFETY: 32 readable bytes at `row + 4k` by the contract.
        unsafe { _mm256_loadu_ps(row.add(4 * k) as *const f32) }
    }
    #[inline(always)]
    unsafe fn w16(row: *const u8, k: usize) -> __m512 {
        // SAFETY: 64 readable bytes at `row + 4k` by the contract.
        unsafe { _mm512_loadu_ps(row.add(4 * k) as *const f32) }
    }
    #[inline(always)]
    unsafe fn w1(row: *const u8, k: usize) -> f32 {
        // SAFETY: 4 readable bytes by the contract; the host is little-endian, as the file.
        unsafe { std::ptr::read_unaligned(row.add(4 * k) as *const f32) }
    }
}

impl Widen for WideF16 {
    #[inline(always)]
    unsafe fn w8(row: *const u8, k: usize) -> __m256 {
        // SAFETY: 16 readable bytes at `row + 2k`; F16C by the contract.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(row.add(2 * k) as *const __m128i)) }
    }
    #[inline(always)]
    unsafe fn w16(row: *const u8, k: usize) -> __m512 {
        // SAFETY: 32 readable bytes at `row + 2k`; AVX-512F by the contract.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(row.add(2 * k) as *const __m256i)) }
    }
    #[inline(always)]
    unsafe fn w1(row: *const u8, k: usize) -> f32 {
        // SAFETY: 2 readable bytes by the contract.
        unsafe { half::f16::from_bits(std::ptr::read_unaligned(row.add(2 * k) as *const u16)) }
            .to_f32()
    }
}

impl Widen for WideBf16 {
    #[inline(always)]
    unsafe fn w8(row: *const u8, k: usize) -> __m256 {
        // SAFETY: 16 readable bytes at `row + 2k`; AVX2 by the contract. A bf16 is the upper
        // half of an f32: zero-extend and shift, exactly.
        unsafe {
            let h = _mm256_cvtepu16_epi32(_mm_loadu_si128(row.add(2 * k) as *const __m128i));
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(h))
        }
    }
    #[inline(always)]
    unsafe fn w16(row: *const u8, k: usize) -> __m512 {
        // SAFETY: 32 readable bytes at `row + 2k`; AVX-512F by the contract.
        unsafe {
            let h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(row.add(2 * k) as *const __m256i));
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(h))
        }
    }
    #[inline(always)]
    unsafe fn w1(row: *const u8, k: usize) -> f32 {
        // SAFETY: 2 readable bytes by the contract.
        let bits = unsafe { std::ptr::read_unaligned(row.add(2 * k) as *const u16) };
        f32::from_bits(u32::from(bits) << 16)
    }
}

/// Rows dotted together by the float bodies: they share each load of `x` and keep as many
/// streams of weights in flight; a row's value does not depend on them. Eight rows measured
/// about 0.95–1.0 of the same-size read from DRAM at 4096 × 4096 where four gave about 0.8
/// (f16, bf16; on AVX2 too, although its 16 accumulators then share 16 ymm registers).
const FLOAT_ROWS: usize = 8;

/// `R` float rows of `n` weights (`row_bytes` apart from `row`) dotted with `x` in eight
/// lanes: per row, 16 weights per step into two accumulators, a last 8 into the first, the
/// tail (< 8, widened one by one) into the second; then `hsum(acc0 + acc1)`.
///
/// # Safety
/// The first `n` weights of each of the `R` rows and `x..x + n` are readable; the CPU has
/// AVX2, FMA and F16C.
#[inline(always)]
unsafe fn dot_float8<F: Widen, const R: usize>(
    row: *const u8,
    row_bytes: usize,
    x: *const f32,
    n: usize,
    out: &mut [f32],
) {
    // SAFETY: every load stays inside the first `n` weights and values; ISA by the contract.
    unsafe {
        let rows: [*const u8; R] = std::array::from_fn(|r| row.add(r * row_bytes));
        let mut acc0 = [_mm256_setzero_ps(); R];
        let mut acc1 = [_mm256_setzero_ps(); R];
        let mut k = 0;
        while k + 16 <= n {
            let (x0, x1) = (_mm256_loadu_ps(x.add(k)), _mm256_loadu_ps(x.add(k + 8)));
            for r in 0..R {
                acc0[r] = _mm256_fmadd_ps(F::w8(rows[r], k), x0, acc0[r]);
                acc1[r] = _mm256_fmadd_ps(F::w8(rows[r], k + 8), x1, acc1[r]);
            }
            k += 16;
        }
        if k + 8 <= n {
            let x0 = _mm256_loadu_ps(x.add(k));
            for r in 0..R {
                acc0[r] = _mm256_fmadd_ps(F::w8(rows[r], k), x0, acc0[r]);
            }
            k += 8;
        }
        if k < n {
            let mut xs = [0.0f32; 8];
            for (l, i) in (k..n).enumerate() {
                xs[l] = *x.add(i);
            }
            for r in 0..R {
                let mut w = [0.0f32; 8];
                for (l, i) in (k..n).enumerate() {
                    w[l] = F::w1(rows[r], i);
                }
                let (wv, xv) = (_mm256_loadu_ps(w.as_ptr()), _mm256_loadu_ps(xs.as_ptr()));
                acc1[r] = _mm256_fmadd_ps(wv, xv, acc1[r]);
            }
        }
        for r in 0..R {
            out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r]));
        }
    }
}

/// [`dot_float8`] in sixteen lanes: 32 weights per step, a last 16, then the tail (< 16);
/// then the two halves of `acc0 + acc1` added and [`hsum`].
///
/// # Safety
/// As [`dot_float8`]; the CPU has AVX-512F.
#[inline(always)]
unsafe fn dot_float16<F: Widen, const R: usize>(
    row: *const u8,
    row_bytes: usize,
    x: *const f32,
    n: usize,
    out: &mut [f32],
) {
    // SAFETY: every load stays inside the first `n` weights and values; ISA by the contract.
    unsafe {
        let rows: [*const u8; R] = std::array::from_fn(|r| row.add(r * row_bytes));
        let mut acc0 = [_mm512_setzero_ps(); R];
        let mut acc1 = [_mm512_setzero_ps(); R];
        let mut k = 0;
        while k + 32 <= n {
            let (x0, x1) = (_mm512_loadu_ps(x.add(k)), _mm512_loadu_ps(x.add(k + 16)));
            for r in 0..R {
                acc0[r] = _mm512_fmadd_ps(F::w16(rows[r], k), x0, acc0[r]);
                acc1[r] = _mm512_fmadd_ps(F::w16(rows[r], k + 16), x1, acc1[r]);
            }
            k += 32;
        }
        if k + 16 <= n {
            let x0 = _mm512_loadu_ps(x.add(k));
            for r in 0..R {
                acc0[r] = _mm512_fmadd_ps(F::w16(rows[r], k), x0, acc0[r]);
            }
            k += 16;
        }
        if k < n {
            let mut xs = [0.0f32; 16];
            for (l, i) in (k..n).enumerate() {
                xs[l] = *x.add(i);
            }
            for r in 0..R {
                let mut w = [0.0f32; 16];
                for (l, i) in (k..n).enumerate() {
                    w[l] = F::w1(rows[r], i);
                }
                let (wv, xv) = (_mm512_loadu_ps(w.as_ptr()), _mm512_loadu_ps(xs.as_ptr()));
                acc1[r] = _mm512_fmadd_ps(wv, xv, acc1[r]);
            }
        }
        for r in 0..R {
            let v = _mm512_add_ps(acc0[r], acc1[r]);
            let lo = _mm512_castps512_ps256(v);
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
            out[r] = hsum(_mm256_add_ps(lo, hi));
        }
    }
}

/// Every row of `y` for a float format `F`, in blocks of [`FLOAT_ROWS`] then one by one, in
/// `WIDE` lanes (8 or 16).
///
/// # Safety
/// `w` holds `y.len()` rows of `x.len()` weights of `F`; the CPU has AVX2, FMA, F16C and,
/// for `WIDE = 16`, AVX-512F.
#[inline(always)]
unsafe fn float_rows<F: Widen, const WIDE: usize>(
    w: &[u8],
    row_bytes: usize,
    x: &[f32],
    y: &mut [f32],
) {
    let (xp, n) = (x.as_ptr(), x.len());
    let mut r = 0;
    // SAFETY: rows `r..` lie in `w` by the contract; ISA by the contract.
    unsafe {
        while r + FLOAT_ROWS <= y.len() {
            let (row, out) = (w.as_ptr().add(r * row_bytes), &mut y[r..r + FLOAT_ROWS]);
            if WIDE == 16 {
                dot_float16::<F, FLOAT_ROWS>(row, row_bytes, xp, n, out);
            } else {
                dot_float8::<F, FLOAT_ROWS>(row, row_bytes, xp, n, out);
            }
            r += FLOAT_ROWS;
        }
        while r < y.len() {
            let (row, out) = (w.as_ptr().add(r * row_bytes), &mut y[r..r + 1]);
            if WIDE == 16 {
                dot_float16::<F, 1>(row, row_bytes, xp, n, out);
            } else {
                dot_float8::<F, 1>(row, row_bytes, xp, n, out);
            }
            r += 1;
        }
    }
}

/// Every row of `y`: the float formats in `WIDE`-lane f32 (8 or 16), the quantized ones by
/// `D`'s integer dot products.
///
/// # Safety
/// `check_rows` holds; the CPU has AVX2, FMA, F16C, `D`'s instructions and, for `WIDE = 16`,
/// AVX-512F.
#[inline(always)]
unsafe fn rows<D: Dot4, const WIDE: usize>(
    format: WeightFormat,
    w: &[u8],
    acts: Activations<'_>,
    y: &mut [f32],
) {
    let x = acts.x();
    let n_in = x.len();
    let row_bytes = n_in / format.block_size() * format.block_bytes();
    let q = acts.q().as_ptr();
    let (nb, nsb) = (n_in / QX, n_in / 256);
    // SAFETY: `w` holds `y.len()` rows and the activations match, by `check_rows`; ISA by
    // the contract.
    unsafe {
        match format {
            WeightFormat::F32 => return float_rows::<WideF32, WIDE>(w, row_bytes, x, y),
            WeightFormat::F16 => return float_rows::<WideF16, WIDE>(w, row_bytes, x, y),
            WeightFormat::Bf16 => return float_rows::<WideBf16, WIDE>(w, row_bytes, x, y),
            _ => {}
        }
    }
    for (r, out) in y.iter_mut().enumerate() {
        // SAFETY: row `r < y.len()` lies in `w` and the activations match, by `check_rows`;
        // ISA by the contract.
        unsafe {
            let row = w.as_ptr().add(r * row_bytes);
            *out = match format {
                WeightFormat::Q8_0 => dot_q8_0::<D>(row, q, nb),
                WeightFormat::Q4_0 => dot_q4_0::<D>(row, acts, nb),
                WeightFormat::Q4K => dot_q4_k::<D>(row, acts, nsb),
                WeightFormat::Q6K => dot_q6_k::<D>(row, q, nsb),
                WeightFormat::F32 | WeightFormat::F16 | WeightFormat::Bf16 => unreachable!(),
            };
        }
    }
}

/// AVX2 rows: 8-lane f32 for the float formats, `vpmaddubsw` dot products for the others.
///
/// # Safety
/// `check_rows(format, w, acts, y.len())` holds; the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn qgemv_rows_avx2(
    format: WeightFormat,
    w: &[u8],
    acts: Activations<'_>,
    y: &mut [f32],
) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { rows::<Maddubs, 8>(format, w, acts, y) }
}

/// AVX-512 rows of a float format: 16-lane f32 (quantized formats would run AVX2's bodies).
///
/// # Safety
/// `check_rows(format, w, acts, y.len())` holds; the CPU has AVX-512F, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
pub(crate) unsafe fn qgemv_rows_avx512(
    format: WeightFormat,
    w: &[u8],
    acts: Activations<'_>,
    y: &mut [f32],
) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { rows::<Maddubs, 16>(format, w, acts, y) }
}

/// AVX-512 rows with VNNI: the integer bodies with `vpdpbusd` on 256-bit vectors (AVX512VL);
/// a float format runs in 16 lanes.
///
/// # Safety
/// `check_rows(format, w, acts, y.len())` holds; the CPU has AVX512-VNNI, AVX512VL,
/// AVX-512F, AVX2, FMA and F16C.
#[target_feature(enable = "avx512vnni,avx512vl,avx512f,avx2,fma,f16c")]
pub(crate) unsafe fn qgemv_rows_vnni(
    format: WeightFormat,
    w: &[u8],
    acts: Activations<'_>,
    y: &mut [f32],
) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { rows::<Vnni, 16>(format, w, acts, y) }
}
