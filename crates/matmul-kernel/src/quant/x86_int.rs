//! The x86 integer bodies of the quantized formats (q8_0, q4_0, q4_K, q6_K), for the tokens of
//! `x86.rs` through the wrappers of `quant/x86.rs`.
//!
//! Each block of 32 weight codes is dotted with the matching block of quantized activations
//! (`BlockQ8x`) in 32-bit integer lanes, four products per lane ([`Dot4`]: `vpmaddubsw` +
//! `vpmaddwd` on AVX2, `vpdpbusd` with VNNI; both exact), then converted to f32 and
//! multiplied by the block's scales into one of four vector accumulators (block `b` into
//! accumulator `b mod 4`); the lanes are combined once per row. q6_K's offset 32 is taken off
//! in the integers (`Σ (q − 32)·x` lane by lane); q4_0's 8 and q4_K's `dmin·m` are summed
//! apart in f32 from the activations' `d·sum` (`Σ (q − 8)·x = Σ q·x − 8·sum`).
//!
//! Each format's body is an [`IntBody`] (`Q8_0`, `Q4_0`, `Q4K`, `Q6K`), as the NEON side's
//! `QuantizedWeights`: the caller picks the format once per call (`quant/x86.rs`).
//! Every body dots one weight row with `M` rows of activations at once (the weight codes are
//! unpacked and their scales converted once for all `M`; the GEMM uses this for q8_0 on
//! AVX2, the other quantized GEMMs run the tiles of `quant/x86_tile.rs`). Each output has its
//! own accumulators and sees the same operations in the same order whatever `M` is, so a
//! row's value never depends on the rows around it.
//!
//! The same 256-bit bodies run on an AVX-512 CPU without VNNI (the table of `bodies.rs`); with
//! VNNI the GEMV runs the 512-bit bodies of `quant/x86_wide.rs`, and these run only as their
//! tails (a row's last blocks after its whole steps, `vpdpbusd` by [`Vnni`]). (An earlier
//! try of two blocks per 512-bit vector, each block scaled by itself, measured slower on an
//! AMD EPYC (Zen 5) VM, from cache, 1 thread, 512 × 4096: q8_0 21 against 31 GB/s, q4_0 13.8
//! against 13.8, q4_K 14.9 against 16.3; the wide bodies convert a group's scales at once.)

#![allow(
    clippy::needless_range_loop,
    reason = "indexed loops over accumulator arrays read like the math and unroll the same"
)]

use super::activations::Activations;
use super::blocks::BlockQ8x;
use std::arch::x86_64::*;

/// Sums of four consecutive `u8 · i8` products in each i32 lane of a 256-bit vector.
///
/// # Safety
/// Callers run on a CPU with the implementor's instructions; `a`'s bytes are at most 128 and
/// `b`'s at least −127 (so `vpmaddubsw`'s pairs, at most `2·128·127`, never saturate).
pub(super) trait Dot4 {
    /// `Σ_{j<4} a[4l + j]·b[4l + j]` in lane `l`.
    ///
    /// # Safety
    /// As the trait.
    unsafe fn dot4(a: __m256i, b: __m256i) -> __m256i;

    /// `acc + dot4(a, b)` lane by lane (`vpdpbusd` accumulates in place); the sums stay
    /// within i32 for the callers' values.
    ///
    /// # Safety
    /// As the trait.
    #[inline(always)]
    unsafe fn dot4_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: forwarded contract.
        unsafe { _mm256_add_epi32(acc, Self::dot4(a, b)) }
    }

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
pub(super) struct Maddubs;

/// AVX512-VNNI on 256-bit vectors: `vpdpbusd`.
pub(super) struct Vnni;

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

    #[inline(always)]
    unsafe fn dot4_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX512-VNNI and AVX512VL by the trait contract.
        unsafe { _mm256_dpbusd_epi32(acc, a, b) }
    }
}

/// The f32 value of the little-endian f16 at `p` (F16C; exact).
///
/// # Safety
/// `p..p + 2` is readable; the CPU has F16C.
#[inline(always)]
pub(super) unsafe fn f16_at(p: *const u8) -> f32 {
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
pub(super) unsafe fn hsum(v: __m256) -> f32 {
    // SAFETY: AVX by the contract.
    unsafe {
        let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let h = _mm_add_ps(q, _mm_movehl_ps(q, q));
        _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps::<0b01>(h, h)))
    }
}

/// Where one row of quantized activations lies: its blocks, and their `d` and `d·sum`.
#[derive(Clone, Copy)]
pub(super) struct XRow {
    q: *const BlockQ8x,
    d: *const f32,
    d_sum: *const f32,
}

impl XRow {
    /// The pointers of `acts` (readable for `acts.q().len()` blocks).
    pub(super) fn of(acts: &Activations<'_>) -> XRow {
        XRow {
            q: acts.q().as_ptr(),
            d: acts.d().as_ptr(),
            d_sum: acts.d_sum().as_ptr(),
        }
    }

    /// The same row from block `blocks` on.
    ///
    /// # Safety
    /// `blocks` is at most the row's number of blocks.
    pub(super) unsafe fn skip(self, blocks: usize) -> XRow {
        // SAFETY: within or one past the row's arrays, by the contract.
        unsafe {
            XRow {
                q: self.q.add(blocks),
                d: self.d.add(blocks),
                d_sum: self.d_sum.add(blocks),
            }
        }
    }
}

/// One q8_0 row of `nb` blocks at `row` dotted with `M` activation rows: `|w|` against `x`
/// with `w`'s sign (the same products; −128 becomes 128 as an unsigned byte).
///
/// # Safety
/// `row..row + 34·nb` and `nb` blocks of each `xs[i]` are readable; the CPU has AVX2, FMA,
/// F16C and `D`'s instructions.
#[inline(always)]
pub(super) unsafe fn dot_q8_0<D: Dot4, const M: usize>(
    row: *const u8,
    xs: [XRow; M],
    nb: usize,
) -> [f32; M] {
    // SAFETY: every read is inside block `b < nb` of `row` and the activations; ISA by the
    // contract.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); 4]; M];
        for b0 in (0..nb).step_by(4) {
            for j in 0..4.min(nb - b0) {
                let b = b0 + j;
                let block = row.add(34 * b);
                let w = _mm256_loadu_si256(block.add(2) as *const __m256i);
                let (w_abs, dw) = (_mm256_sign_epi8(w, w), f16_at(block));
                for i in 0..M {
                    let v = D::dot4(w_abs, _mm256_sign_epi8(codes(xs[i].q, b), w));
                    let s = _mm256_set1_ps(dw * *xs[i].d.add(b));
                    acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), s, acc[i][j]);
                }
            }
        }
        let mut out = [0.0; M];
        for i in 0..M {
            out[i] = finish(acc[i]);
        }
        out
    }
}

/// q4_0 block `b` with its unpacked codes `w`, against `M` activation rows: `Σ q·x` scaled
/// into accumulator `j` of each row, `dw·d·sum` into its offset sum `j`.
///
/// # Safety
/// Block `b` of `row` (18 bytes) and of each `xs[i]` is readable; the CPU has AVX2, FMA,
/// F16C and `D`'s instructions.
#[inline(always)]
unsafe fn q4_0_block<D: Dot4, const M: usize>(
    row: *const u8,
    xs: &[XRow; M],
    b: usize,
    j: usize,
    w: __m256i,
    acc: &mut [[__m256; 4]; M],
    offsets: &mut [[f32; 4]; M],
) {
    // SAFETY: block `b` is readable by the contract; ISA by the contract.
    unsafe {
        let dw = f16_at(row.add(18 * b));
        for i in 0..M {
            offsets[i][j] = dw.mul_add(*xs[i].d_sum.add(b), offsets[i][j]);
            let s = _mm256_set1_ps(dw * *xs[i].d.add(b));
            let v = D::dot4(w, codes(xs[i].q, b));
            acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), s, acc[i][j]);
        }
    }
}

/// One q4_0 row of `nb` blocks (18 bytes each) dotted with `M` activation rows: the nibbles
/// as they are against `x`, two blocks unpacked per step, the offset 8 summed apart in f32
/// (one partial sum per accumulator: a single one would chain every block's FMA).
///
/// # Safety
/// `row..row + 18·nb` and `nb` blocks of each `xs[i]` are readable; the CPU has AVX2, FMA,
/// F16C and `D`'s instructions.
#[inline(always)]
pub(super) unsafe fn dot_q4_0<D: Dot4, const M: usize>(
    row: *const u8,
    xs: [XRow; M],
    nb: usize,
) -> [f32; M] {
    // SAFETY: every read is inside block `b < nb` of `row` and the activations (the second
    // block of a step only when it exists); ISA by the contract.
    unsafe {
        let low = _mm256_set1_epi8(0x0F);
        let mut acc = [[_mm256_setzero_ps(); 4]; M];
        let mut offsets = [[0.0f32; 4]; M];
        let mut b = 0;
        while b + 4 <= nb {
            for pair in 0..2 {
                let b0 = b + 2 * pair;
                let lo = _mm_loadu_si128(row.add(18 * b0 + 2) as *const __m128i);
                let hi = _mm_loadu_si128(row.add(18 * b0 + 20) as *const __m128i);
                let raw = _mm256_set_m128i(hi, lo);
                let low_nibbles = _mm256_and_si256(raw, low);
                let high_nibbles = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low);
                let w0 = _mm256_permute2x128_si256::<0x20>(low_nibbles, high_nibbles);
                let w1 = _mm256_permute2x128_si256::<0x31>(low_nibbles, high_nibbles);
                q4_0_block::<D, M>(row, &xs, b0, 2 * pair, w0, &mut acc, &mut offsets);
                q4_0_block::<D, M>(row, &xs, b0 + 1, 2 * pair + 1, w1, &mut acc, &mut offsets);
            }
            b += 4;
        }
        for j in 0..nb - b {
            let raw = _mm_loadu_si128(row.add(18 * (b + j) + 2) as *const __m128i);
            let low = _mm256_castsi256_si128(low);
            let lo = _mm_and_si128(raw, low);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(raw), low);
            let w = _mm256_set_m128i(hi, lo);
            q4_0_block::<D, M>(row, &xs, b + j, j, w, &mut acc, &mut offsets);
        }
        let mut out = [0.0; M];
        for i in 0..M {
            let o = &offsets[i];
            out[i] = finish(acc[i]) - 8.0 * ((o[0] + o[1]) + (o[2] + o[3]));
        }
        out
    }
}

/// The eight 6-bit scales and the eight mins of a q4_K block's 12 packed bytes, each as eight
/// bytes of a u64 (ggml's unpacking, the inverse of `BlockQ4K::pack_scales_mins`).
#[inline(always)]
pub(super) fn q4k_scales_mins(p: &[u8; 12]) -> (u64, u64) {
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
pub(super) unsafe fn bytes_to_f32(bytes: u64) -> __m256 {
    // SAFETY: AVX2 by the contract.
    unsafe { _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes as i64))) }
}

/// One q4_K row of `nsb` super-blocks (144 bytes, eight sub-blocks of 32, each matching one
/// activation block) dotted with `M` activation rows. Per sub-block `s`:
/// `(d·sc_s·d_x)·Σ q·x_q − (dmin·m_s)·(d_x·sum)`; the first terms go to the four
/// accumulators, the mins to a fifth, subtracted at the end.
///
/// # Safety
/// `row..row + 144·nsb` and `8·nsb` blocks of each `xs[i]` are readable; the CPU has AVX2,
/// FMA, F16C and `D`'s instructions.
#[inline(always)]
unsafe fn dot_q4_k<D: Dot4, const M: usize>(row: *const u8, xs: [XRow; M], nsb: usize) -> [f32; M] {
    // SAFETY: every read is inside super-block `sb < nsb` of `row` and its eight activation
    // blocks (their codes, `d` and `d·sum`); ISA by the contract.
    unsafe {
        let low = _mm256_set1_epi8(0x0F);
        let mut acc = [[_mm256_setzero_ps(); 4]; M];
        let mut mins = [_mm256_setzero_ps(); M];
        for sb in 0..nsb {
            let block = row.add(144 * sb);
            let (sc, m) = q4k_scales_mins(&*(block.add(4) as *const [u8; 12]));
            // d·sc and dmin·m are exact (11 + 6 significant bits); one rounding each after.
            let d_sc = _mm256_mul_ps(_mm256_set1_ps(f16_at(block)), bytes_to_f32(sc));
            let dmin_m = _mm256_mul_ps(_mm256_set1_ps(f16_at(block.add(2))), bytes_to_f32(m));
            let mut scale = [_mm256_setzero_ps(); M];
            for i in 0..M {
                scale[i] = _mm256_mul_ps(d_sc, _mm256_loadu_ps(xs[i].d.add(8 * sb)));
                let d_sums = _mm256_loadu_ps(xs[i].d_sum.add(8 * sb));
                mins[i] = _mm256_fmadd_ps(dmin_m, d_sums, mins[i]);
            }
            for c in 0..4 {
                let raw = _mm256_loadu_si256(block.add(16 + 32 * c) as *const __m256i);
                let lo = _mm256_and_si256(raw, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low);
                let (a0, a1) = ((2 * c) % 4, (2 * c + 1) % 4);
                for i in 0..M {
                    let v0 = D::dot4(lo, codes(xs[i].q, 8 * sb + 2 * c));
                    let v1 = D::dot4(hi, codes(xs[i].q, 8 * sb + 2 * c + 1));
                    let s0 = _mm256_permutevar8x32_ps(scale[i], _mm256_set1_epi32(2 * c as i32));
                    let s1 =
                        _mm256_permutevar8x32_ps(scale[i], _mm256_set1_epi32(2 * c as i32 + 1));
                    acc[i][a0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v0), s0, acc[i][a0]);
                    acc[i][a1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v1), s1, acc[i][a1]);
                }
            }
        }
        let mut out = [0.0; M];
        for i in 0..M {
            out[i] = finish(acc[i]) - hsum(mins[i]);
        }
        out
    }
}

/// One q6_K row of `nsb` super-blocks (210 bytes; sixteen sub-blocks of 16, two per
/// activation block) dotted with `M` activation rows. Per activation block:
/// `Σ sc·(q − 32)·x_q` in i32 lanes (lanes 0–3 the first sub-block, 4–7 the second), times
/// `d·d_x` in f32.
///
/// # Safety
/// `row..row + 210·nsb` and `8·nsb` blocks of each `xs[i]` are readable; the CPU has AVX2,
/// FMA, F16C and `D`'s instructions.
#[inline(always)]
unsafe fn dot_q6_k<D: Dot4, const M: usize>(row: *const u8, xs: [XRow; M], nsb: usize) -> [f32; M] {
    // SAFETY: every read is inside super-block `sb < nsb` of `row` (ql at 0, qh at 128,
    // scales at 192, d at 208) and its eight activation blocks; ISA by the contract.
    unsafe {
        let low = _mm256_set1_epi8(0x0F);
        let bits = |mask: i8| _mm256_set1_epi8(mask);
        let offset = _mm256_set1_epi8(32);
        let mut acc = [[_mm256_setzero_ps(); 4]; M];
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
                    let pick = _mm256_add_epi32(
                        _mm256_set1_epi32(2 * j as i32),
                        _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1),
                    );
                    let sc_j = _mm256_permutevar8x32_epi32(sc, pick);
                    let xi = 8 * sb + 4 * h + j;
                    for i in 0..M {
                        let v = D::dot4_offset(codes6[j], offset, codes(xs[i].q, xi));
                        let v = _mm256_mullo_epi32(v, sc_j);
                        let s = _mm256_set1_ps(d * *xs[i].d.add(xi));
                        acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), s, acc[i][j]);
                    }
                }
            }
        }
        let mut out = [0.0; M];
        for i in 0..M {
            out[i] = finish(acc[i]);
        }
        out
    }
}

/// A quantized format's 256-bit body (as the NEON side's `QuantizedWeights`): one weight row
/// dotted with `M` activation rows. The callers pick the format once per call, not per row.
pub(super) trait IntBody {
    /// One weight row of `nb` blocks of 32 at `row` dotted with `M` activation rows.
    ///
    /// # Safety
    /// As the format's body: `nb` blocks of 32 in the row and in each activation row are
    /// readable; the CPU has AVX2, FMA, F16C and `D`'s instructions.
    unsafe fn dot<D: Dot4, const M: usize>(row: *const u8, xs: [XRow; M], nb: usize) -> [f32; M];
}

/// q8_0's body, [`dot_q8_0`].
pub(super) struct Q8_0;
/// q4_0's body, [`dot_q4_0`].
pub(super) struct Q4_0;
/// q4_K's body, [`dot_q4_k`] (eight blocks of 32 per super-block).
pub(super) struct Q4K;
/// q6_K's body, [`dot_q6_k`] (eight blocks of 32 per super-block).
pub(super) struct Q6K;

impl IntBody for Q8_0 {
    #[inline(always)]
    unsafe fn dot<D: Dot4, const M: usize>(row: *const u8, xs: [XRow; M], nb: usize) -> [f32; M] {
        // SAFETY: forwarded contract.
        unsafe { dot_q8_0::<D, M>(row, xs, nb) }
    }
}

impl IntBody for Q4_0 {
    #[inline(always)]
    unsafe fn dot<D: Dot4, const M: usize>(row: *const u8, xs: [XRow; M], nb: usize) -> [f32; M] {
        // SAFETY: forwarded contract.
        unsafe { dot_q4_0::<D, M>(row, xs, nb) }
    }
}

impl IntBody for Q4K {
    #[inline(always)]
    unsafe fn dot<D: Dot4, const M: usize>(row: *const u8, xs: [XRow; M], nb: usize) -> [f32; M] {
        // SAFETY: forwarded contract; a q4_K row is whole super-blocks of eight blocks.
        unsafe { dot_q4_k::<D, M>(row, xs, nb / 8) }
    }
}

impl IntBody for Q6K {
    #[inline(always)]
    unsafe fn dot<D: Dot4, const M: usize>(row: *const u8, xs: [XRow; M], nb: usize) -> [f32; M] {
        // SAFETY: forwarded contract; a q6_K row is whole super-blocks of eight blocks.
        unsafe { dot_q6_k::<D, M>(row, xs, nb / 8) }
    }
}

/// `y[i·n_rows + r]` = weight row `r` of `w` (format `B`) dotted with activation row
/// `xs[i]`, for every `r < n_rows` and `i < xs.len()`: activation rows in groups of `M`, then
/// one by one, each weight row read once for all of them.
///
/// # Safety
/// `w` holds `n_rows` rows of `row_bytes`, each `nb` blocks of 32; each `xs[i]` points to `nb`
/// readable activation blocks; `y.len() >= xs.len() · n_rows`; the CPU has AVX2, FMA, F16C
/// and `D`'s instructions.
#[inline(always)]
pub(super) unsafe fn int_rows<D: Dot4, B: IntBody, const M: usize>(
    w: &[u8],
    row_bytes: usize,
    xs: &[XRow],
    nb: usize,
    y: &mut [f32],
) {
    let n_rows = y.len().checked_div(xs.len()).unwrap_or(0);
    for r in 0..n_rows {
        // SAFETY: row `r < n_rows` lies in `w`; the rest by the contract.
        unsafe {
            let row = w.as_ptr().add(r * row_bytes);
            let mut i0 = 0;
            while i0 + M <= xs.len() {
                let group: [XRow; M] = std::array::from_fn(|k| xs[i0 + k]);
                let out = B::dot::<D, M>(row, group, nb);
                for k in 0..M {
                    y[(i0 + k) * n_rows + r] = out[k];
                }
                i0 += M;
            }
            while i0 < xs.len() {
                y[i0 * n_rows + r] = B::dot::<D, 1>(row, [xs[i0]], nb)[0];
                i0 += 1;
            }
        }
    }
}
