//! The x86 float GEMV and GEMM bodies (f32, f16, bf16), reached from `quant/x86.rs`: eight
//! (AVX2) or sixteen (AVX-512) weights widened at a time (`vcvtph2ps` for f16, a 16-bit shift
//! for bf16, both exact) and multiplied into two vector accumulators per row by FMA, eight
//! rows at a time, the sixteen-lane body asking for the weights ahead by this CPU's
//! `Fill` (the eight-lane body of AVX2 has no software prefetch); the GEMM takes
//! two rows against several activation rows, block of rows by block, and on long rows
//! (sixteen lanes) a piece of the row at a time. `x` stays in f32. The sixteen-lane bf16
//! body widens a step of 32 weights from one load into its even and its odd weights, and
//! takes `x` in that order ([`Widen::PAIRED`]).

#![allow(
    clippy::needless_range_loop,
    reason = "indexed loops over accumulator arrays read like the math and unroll the same"
)]

use super::activations::Activations;
use super::x86_int::hsum;
use super::x86_layout::{even_odd_order, even_odd_step};
use super::x86_walk::Fill;
use std::arch::x86_64::*;
use std::borrow::Cow;

/// A float format's widening to f32.
///
/// # Safety
/// The vector methods run on a CPU with AVX2+F16C (`w8`) or AVX-512F (`w16`); `row + k` is
/// readable for the weights loaded.
pub(super) trait Widen {
    /// Bytes per weight.
    const BYTES: usize;
    /// Whether [`Widen::w32`] gives a step's even and odd weights rather than its first and
    /// second sixteen (`x86_layout::even_odd_step`), so that the sixteen-lane bodies take `x`
    /// in that order ([`x32`], [`tile_x`]).
    const PAIRED: bool = false;
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
    /// Weights `k..k + 32` of the row at `row` as two vectors of sixteen: its first and second
    /// sixteen, or its even and odd weights when [`Widen::PAIRED`].
    ///
    /// # Safety
    /// As the trait (AVX-512F).
    #[inline(always)]
    unsafe fn w32(row: *const u8, k: usize) -> (__m512, __m512) {
        // SAFETY: forwarded contract.
        unsafe { (Self::w16(row, k), Self::w16(row, k + 16)) }
    }
}

/// f32 weights.
pub(super) struct WideF32;
/// f16 weights.
pub(super) struct WideF16;
/// bf16 weights.
pub(super) struct WideBf16;

impl Widen for WideF32 {
    const BYTES: usize = 4;
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
    const BYTES: usize = 2;
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
    const BYTES: usize = 2;
    const PAIRED: bool = true;
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
    /// The even weights are the low halves of the 32-bit lanes shifted up, the odd ones the
    /// high halves with the low ones masked off: two integer operations on one load, where
    /// two zero-extensions (shuffles) and two shifts widen the first and second sixteen
    /// (revision 39).
    #[inline(always)]
    unsafe fn w32(row: *const u8, k: usize) -> (__m512, __m512) {
        // SAFETY: 64 readable bytes at `row + 2k`; AVX-512F by the contract.
        unsafe {
            let v = _mm512_loadu_si512(row.add(2 * k) as *const __m512i);
            let even = _mm512_slli_epi32::<16>(v);
            let odd = _mm512_and_si512(v, _mm512_set1_epi32(0xFFFF_0000_u32 as i32));
            (_mm512_castsi512_ps(even), _mm512_castsi512_ps(odd))
        }
    }
}

/// The values `x[k..k + 32]` of a sixteen-lane GEMV step, in the order of `F`'s
/// [`Widen::w32`].
///
/// # Safety
/// `x..x + k + 32` is readable; the CPU has AVX-512F.
#[inline(always)]
unsafe fn x32<F: Widen>(x: *const f32, k: usize) -> (__m512, __m512) {
    // SAFETY: 128 readable bytes at `x + k`; AVX-512F; by the contract.
    unsafe {
        let (x0, x1) = (_mm512_loadu_ps(x.add(k)), _mm512_loadu_ps(x.add(k + 16)));
        if F::PAIRED {
            even_odd_step(x0, x1)
        } else {
            (x0, x1)
        }
    }
}

/// The values `F`'s `WIDE`-lane GEMM tile reads for the activation row `acts`: in sixteen
/// lanes as the call prepared them (`Kernel::gemm_layout`, `x86_layout::FloatRows`: on
/// 64-byte lines, a paired format's in its steps' order), or when it did not, a paired
/// format's made here (`x86_layout::even_odd_order`); else `x` as it is.
fn tile_x<'a, F: Widen, const WIDE: usize>(acts: &Activations<'a>) -> Cow<'a, [f32]> {
    let x = acts.x();
    if WIDE != 16 {
        Cow::Borrowed(x)
    } else if acts.tile_x().len() == x.len() {
        Cow::Borrowed(acts.tile_x())
    } else if F::PAIRED {
        Cow::Owned(even_odd_order(x, x.len()))
    } else {
        Cow::Borrowed(x)
    }
}

/// Rows dotted together by the float bodies: they share each load of `x` and keep as many
/// streams of weights in flight; a row's value does not depend on them. Eight rows measured
/// about 0.95–1.0 of the same-size read from DRAM at 4096 × 4096 where four gave about 0.8
/// (f16, bf16; on AVX2 too, although its 16 accumulators then share 16 ymm registers).
const FLOAT_ROWS: usize = 8;

/// How far ahead of the weights it reads each row of the 16-lane float GEMV asks for them
/// (`prefetcht0`, one line per row per step). On a Zen 4 VM from DRAM, interleaved in one
/// run, f16 ÷ the same-size read went from 0.57–0.59 to 0.73–0.75 at one thread and from
/// 0.58–0.71 to 0.77–0.79 at two, bf16 alike (0.58–0.77 to 0.68–0.86); 512 and 1536 bytes
/// gave a little less, 2048 and more about half the gain, `prefetcht1` no more. Ahead of a
/// row's end the line asked for is the same distance into the row `R` rows on, which the next
/// block of rows reads first (the row right after is already being read): f16 ÷ the read
/// went from 0.66–0.79 to 0.78–0.90 at 4096 inputs on one thread and from 0.79 to 0.86 on two,
/// bf16 from 0.72–0.88 to 0.85–1.04, f32 from 0.76–0.90 to 0.82–0.94, interleaved in one run
/// each. A prefetch past the matrix's end reads nothing and cannot fault. This is the
/// distance of the prefetch into L1 (Intel's `Fill`); into L2 it is
/// [`FLOAT_L2_PREFETCH_AHEAD`].
const FLOAT_PREFETCH_AHEAD: usize = 1024;

/// How far ahead the 16-lane float GEMV asks for its weights when its prefetch fills L2
/// (`prefetcht1`, AMD's `Fill`; revision 15, 8 KiB from revision 27). On a 2-vCPU Zen 4 VM, 4 KiB against 1 KiB
/// (interleaved in one run of `examples/qgemv_vs_read`, f16 and bf16, 2026-12-04): on one
/// 14336 × 4096 matrix called over and over, as llama.cpp's `test-backend-ops` reads its
/// buffer (1.5–3.6 times the L3), one thread 20.4–23.3 → 25.8–26.2 GB/s (f16) and 21.6–22.7 →
/// 23.6–24.0 (bf16), three rounds each, two threads level (30–33); from DRAM, two rounds,
/// ÷ the same-size read at 4096 × 4096 one thread 0.99–1.09 → 1.05–1.15, at 14336 × 4096
/// 0.98–1.08 → 0.98–1.09, two threads level (1.03–1.12 against 1.04–1.12); 2 KiB between
/// the two, 512 bytes 0.82–1.03, below both. 8 KiB against 4 KiB (revision 27; builds run
/// in turn, `QGEMV_FORMATS=f16,bf16 qgemv_vs_read N K 5`, the same kind of VM, 2026-12-05),
/// ÷ the same-size read at one thread: 0.86–0.89 → 0.89–0.93 at 4096 × 4096 (four runs),
/// 0.86–0.88 → 0.89–0.91 at 14336 × 4096 (two), 0.91–0.95 → 0.94–0.97 at 4096 × 14336
/// (two); on one 14336 × 4096 matrix called over and over 24.5–24.8 → 25.2–25.8 GB/s (two);
/// two threads level (0.87–1.04 against 0.90–1.04). 12 and 16 KiB measured about as 8.
const FLOAT_L2_PREFETCH_AHEAD: usize = 8192;

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
/// then the two halves of `acc0 + acc1` added and [`hsum`]. Each step's weights are asked
/// for [`FLOAT_L2_PREFETCH_AHEAD`] bytes ahead into L2 when `TO_L2`, else
/// [`FLOAT_PREFETCH_AHEAD`] bytes ahead into L1.
///
/// # Safety
/// As [`dot_float8`]; the CPU has AVX-512F.
#[inline(always)]
unsafe fn dot_float16<F: Widen, const R: usize, const TO_L2: bool>(
    row: *const u8,
    row_bytes: usize,
    x: *const f32,
    n: usize,
    out: &mut [f32],
) {
    // SAFETY: every load stays inside the first `n` weights and values; ISA by the contract.
    // The prefetches may name any address (`wrapping_add`, past the matrix too): a prefetch
    // reads nothing into a register and never faults.
    unsafe {
        let rows: [*const u8; R] = std::array::from_fn(|r| row.add(r * row_bytes));
        let mut acc0 = [_mm512_setzero_ps(); R];
        let mut acc1 = [_mm512_setzero_ps(); R];
        let mut k = 0;
        while k + 32 <= n {
            let (x0, x1) = x32::<F>(x, k);
            for r in 0..R {
                for line in (0..32 * F::BYTES).step_by(64) {
                    let ahead = if TO_L2 {
                        FLOAT_L2_PREFETCH_AHEAD
                    } else {
                        FLOAT_PREFETCH_AHEAD
                    };
                    let mut offset = F::BYTES * k + ahead + line;
                    if offset >= F::BYTES * n {
                        // Past this row: the same place in the next block's row.
                        offset = offset - F::BYTES * n + R * row_bytes;
                    }
                    let ahead = rows[r].wrapping_add(offset) as *const i8;
                    if TO_L2 {
                        _mm_prefetch::<_MM_HINT_T1>(ahead);
                    } else {
                        _mm_prefetch::<_MM_HINT_T0>(ahead);
                    }
                }
            }
            for r in 0..R {
                let (w0, w1) = F::w32(rows[r], k);
                acc0[r] = _mm512_fmadd_ps(w0, x0, acc0[r]);
                acc1[r] = _mm512_fmadd_ps(w1, x1, acc1[r]);
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

/// [`dot_float16`] (`WIDE = 16`) or [`dot_float8`] (`WIDE = 8`) of `R` float rows against
/// `M` activation rows at once, each weight vector widened once for the `M` rows:
/// `out[i][r]` is bitwise the single-row body's value for row `r` and activation row `i`
/// (the same operations per output, in the same order). Each `xs[i]` is in the order of
/// `F`'s `WIDE`-lane steps ([`tile_x`]).
///
/// # Safety
/// As [`dot_float8`] for each row and each `xs[i]`; for `WIDE = 16` the CPU has AVX-512F.
#[inline(always)]
unsafe fn dot_float_tile<F: Widen, const WIDE: usize, const R: usize, const M: usize>(
    row: *const u8,
    row_bytes: usize,
    xs: [*const f32; M],
    n: usize,
    out: &mut [[f32; R]; M],
) {
    // SAFETY: every load stays inside the first `n` weights and values; ISA by the contract.
    unsafe {
        let rows: [*const u8; R] = std::array::from_fn(|r| row.add(r * row_bytes));
        if WIDE == 16 {
            let mut acc = zero16::<R, M>();
            tile16_steps::<F, R, M>(&rows, &xs, 0, n, &mut acc);
            tile16_finish::<F, R, M>(&rows, &xs, n / 32 * 32, n, &mut acc, out);
        } else {
            let mut acc0 = [[_mm256_setzero_ps(); M]; R];
            let mut acc1 = [[_mm256_setzero_ps(); M]; R];
            let mut k = 0;
            while k + 16 <= n {
                for r in 0..R {
                    let (w0, w1) = (F::w8(rows[r], k), F::w8(rows[r], k + 8));
                    for i in 0..M {
                        let x0 = _mm256_loadu_ps(xs[i].add(k));
                        let x1 = _mm256_loadu_ps(xs[i].add(k + 8));
                        acc0[r][i] = _mm256_fmadd_ps(w0, x0, acc0[r][i]);
                        acc1[r][i] = _mm256_fmadd_ps(w1, x1, acc1[r][i]);
                    }
                }
                k += 16;
            }
            if k + 8 <= n {
                for r in 0..R {
                    let w0 = F::w8(rows[r], k);
                    for i in 0..M {
                        let x0 = _mm256_loadu_ps(xs[i].add(k));
                        acc0[r][i] = _mm256_fmadd_ps(w0, x0, acc0[r][i]);
                    }
                }
                k += 8;
            }
            if k < n {
                for r in 0..R {
                    let mut w = [0.0f32; 8];
                    for (l, j) in (k..n).enumerate() {
                        w[l] = F::w1(rows[r], j);
                    }
                    let wv = _mm256_loadu_ps(w.as_ptr());
                    for i in 0..M {
                        let mut x = [0.0f32; 8];
                        for (l, j) in (k..n).enumerate() {
                            x[l] = *xs[i].add(j);
                        }
                        let xv = _mm256_loadu_ps(x.as_ptr());
                        acc1[r][i] = _mm256_fmadd_ps(wv, xv, acc1[r][i]);
                    }
                }
            }
            for r in 0..R {
                for i in 0..M {
                    out[i][r] = hsum(_mm256_add_ps(acc0[r][i], acc1[r][i]));
                }
            }
        }
    }
}

/// The 16-lane tile's accumulators: `.0[r][i]` holds the products of the first 16 values of
/// each step of 32 (and of a last 16 after them), `.1[r][i]` those of the second 16 and of
/// the row's tail.
type Acc16<const R: usize, const M: usize> = ([[__m512; M]; R], [[__m512; M]; R]);

/// Accumulators at zero.
///
/// # Safety
/// The CPU has AVX-512F.
#[inline(always)]
unsafe fn zero16<const R: usize, const M: usize>() -> Acc16<R, M> {
    // SAFETY: AVX-512F by the contract.
    let zero = unsafe { _mm512_setzero_ps() };
    ([[zero; M]; R], [[zero; M]; R])
}

/// The whole steps of 32 values of [`dot_float_tile`]'s 16-lane body that lie in `k0..k1`
/// (`k0` a multiple of 32), added into `acc`: steps taken in pieces, piece after piece, add
/// the same products in the same order as in one go.
///
/// # Safety
/// As [`dot_float_tile`]; `k1` is at most the rows' length.
#[inline(always)]
unsafe fn tile16_steps<F: Widen, const R: usize, const M: usize>(
    rows: &[*const u8; R],
    xs: &[*const f32; M],
    k0: usize,
    k1: usize,
    acc: &mut Acc16<R, M>,
) {
    // SAFETY: every load stays below `k1`, inside the rows and values; ISA by the contract.
    unsafe {
        let (acc0, acc1) = acc;
        let mut k = k0;
        while k + 32 <= k1 {
            for r in 0..R {
                let (w0, w1) = F::w32(rows[r], k);
                for i in 0..M {
                    let x0 = _mm512_loadu_ps(xs[i].add(k));
                    let x1 = _mm512_loadu_ps(xs[i].add(k + 16));
                    acc0[r][i] = _mm512_fmadd_ps(w0, x0, acc0[r][i]);
                    acc1[r][i] = _mm512_fmadd_ps(w1, x1, acc1[r][i]);
                }
            }
            k += 32;
        }
    }
}

/// The rest of [`dot_float_tile`]'s 16-lane body once its steps of 32 are in `acc`: the
/// values from `k` (the end of the last whole step) to `n`, then each output's sum.
///
/// # Safety
/// As [`dot_float_tile`].
#[inline(always)]
unsafe fn tile16_finish<F: Widen, const R: usize, const M: usize>(
    rows: &[*const u8; R],
    xs: &[*const f32; M],
    mut k: usize,
    n: usize,
    acc: &mut Acc16<R, M>,
    out: &mut [[f32; R]; M],
) {
    // SAFETY: every load stays inside the first `n` weights and values; ISA by the contract.
    unsafe {
        let (acc0, acc1) = acc;
        if k + 16 <= n {
            for r in 0..R {
                let w0 = F::w16(rows[r], k);
                for i in 0..M {
                    let x0 = _mm512_loadu_ps(xs[i].add(k));
                    acc0[r][i] = _mm512_fmadd_ps(w0, x0, acc0[r][i]);
                }
            }
            k += 16;
        }
        if k < n {
            for r in 0..R {
                let mut w = [0.0f32; 16];
                for (l, j) in (k..n).enumerate() {
                    w[l] = F::w1(rows[r], j);
                }
                let wv = _mm512_loadu_ps(w.as_ptr());
                for i in 0..M {
                    let mut x = [0.0f32; 16];
                    for (l, j) in (k..n).enumerate() {
                        x[l] = *xs[i].add(j);
                    }
                    let xv = _mm512_loadu_ps(x.as_ptr());
                    acc1[r][i] = _mm512_fmadd_ps(wv, xv, acc1[r][i]);
                }
            }
        }
        for r in 0..R {
            for i in 0..M {
                let v = _mm512_add_ps(acc0[r][i], acc1[r][i]);
                let lo = _mm512_castps512_ps256(v);
                let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
                out[i][r] = hsum(_mm256_add_ps(lo, hi));
            }
        }
    }
}

/// Weight rows of the float GEMM's register tile.
const TILE_ROWS: usize = 2;

/// Bytes of weight rows the float GEMM takes as one block: every group of activation rows
/// passes over a block's rows before the next block starts, so that the block and one
/// group's activations stay in L2 together (revision 31). `Exec::qgemm` hands the body tiles
/// of sixteen rows (revision 40), so a block is the whole tile up to rows of 64 KiB (16384
/// f32 or 32768 f16 inputs): the activations, which do not fit in L2 on long rows (32 tokens
/// of 14336 inputs are 1.8 MiB), pass once per sixteen rows. At 256 KiB (revisions 31 to 39)
/// a tile of rows of 14336 f16 inputs split into two blocks, and they passed twice.
const FLOAT_GEMM_BLOCK_BYTES: usize = 1 << 20;

/// Values per piece of a row on which the 16-lane float GEMM runs every tile of a block
/// before the next piece, on rows longer than that: a group's `M` activation rows of one
/// piece (16 KiB at `M` = 4) stay in L1 while the block's tiles pass over them, each tile's
/// accumulators kept between pieces, so the sums are the same bits (revision 31).
const FLOAT_GEMM_PIECE: usize = 1024;

/// Rows of one block of the float GEMM: the whole tiles of rows of `row_bytes` that fit in
/// [`FLOAT_GEMM_BLOCK_BYTES`], at least one tile.
fn float_gemm_block_rows(row_bytes: usize) -> usize {
    (FLOAT_GEMM_BLOCK_BYTES / row_bytes.max(1) / TILE_ROWS).max(1) * TILE_ROWS
}

/// The float GEMM: `y[i·n_rows + r]` for every activation row `i` and weight row `r`, by
/// [`dot_float_tile`] on [`TILE_ROWS`] weight rows × `M` activation rows, the remainders row
/// by row; each output bitwise its GEMV. The rows go by blocks of
/// [`float_gemm_block_rows`]: within a block, each group of `M` activation rows meets every
/// tile of the block before the next group starts, and on rows longer than
/// [`FLOAT_GEMM_PIECE`] (16-lane body) one piece of the row at a time. Before revision 31
/// each tile took whole rows against every activation row in turn, so its activations came
/// from L2 or beyond on every step: 32 tokens of 4096 inputs are 512 KiB, of 14336 inputs
/// 1.8 MiB.
///
/// # Safety
/// As [`rows`] for a float format `F`.
#[inline(always)]
pub(super) unsafe fn float_gemm<F: Widen, const WIDE: usize, const M: usize>(
    w: &[u8],
    row_bytes: usize,
    acts: &[Activations<'_>],
    y: &mut [f32],
) {
    let n_x = acts.len();
    let n_rows = y.len() / n_x;
    let n = acts[0].x().len();
    let tiled_rows = n_rows / TILE_ROWS * TILE_ROWS;
    let block_rows = float_gemm_block_rows(row_bytes);
    let tile_xs: Vec<Cow<'_, [f32]>> = acts.iter().map(tile_x::<F, WIDE>).collect();
    let x_of = |i: usize| tile_xs[i].as_ptr();
    // The accumulators of a block's tiles between pieces of a long row (16-lane body only).
    let mut state: Vec<Acc16<TILE_ROWS, M>> = Vec::new();
    // SAFETY: rows `r..r + R` lie in `w` and each activation row holds `n` values, by the
    // contract; ISA by the contract.
    unsafe {
        let mut block = 0;
        while block < tiled_rows {
            let block_end = (block + block_rows).min(tiled_rows);
            let mut i = 0;
            while i + M <= n_x {
                let xs: [*const f32; M] = std::array::from_fn(|k| x_of(i + k));
                if WIDE == 16 && n > FLOAT_GEMM_PIECE {
                    let rows = block..block_end;
                    group_by_pieces::<F, M>(w, row_bytes, rows, xs, n, &mut state, |r, out| {
                        for k in 0..M {
                            y[(i + k) * n_rows + r..][..TILE_ROWS].copy_from_slice(&out[k]);
                        }
                    });
                } else {
                    for r in (block..block_end).step_by(TILE_ROWS) {
                        let row = w.as_ptr().add(r * row_bytes);
                        let mut out = [[0.0f32; TILE_ROWS]; M];
                        dot_float_tile::<F, WIDE, TILE_ROWS, M>(row, row_bytes, xs, n, &mut out);
                        for k in 0..M {
                            y[(i + k) * n_rows + r..][..TILE_ROWS].copy_from_slice(&out[k]);
                        }
                    }
                }
                i += M;
            }
            while i < n_x {
                let xs = [x_of(i)];
                for r in (block..block_end).step_by(TILE_ROWS) {
                    let row = w.as_ptr().add(r * row_bytes);
                    let mut out = [[0.0f32; TILE_ROWS]; 1];
                    dot_float_tile::<F, WIDE, TILE_ROWS, 1>(row, row_bytes, xs, n, &mut out);
                    y[i * n_rows + r..][..TILE_ROWS].copy_from_slice(&out[0]);
                }
                i += 1;
            }
            block = block_end;
        }
        let mut r = tiled_rows;
        while r < n_rows {
            let row = w.as_ptr().add(r * row_bytes);
            for i in 0..n_x {
                let mut out = [[0.0f32; 1]; 1];
                let xs = [x_of(i)];
                dot_float_tile::<F, WIDE, 1, 1>(row, row_bytes, xs, n, &mut out);
                y[i * n_rows + r] = out[0][0];
            }
            r += 1;
        }
    }
}

/// One group of `M` activation rows (`xs`, `n` values each, `n` over [`FLOAT_GEMM_PIECE`])
/// against the tiles of the weight rows `rows` (whole tiles, `row_bytes` apart from `w`), by
/// the 16-lane body, one piece of the rows at a time: every tile of the block meets a piece
/// before the next piece starts, its accumulators kept in `state` between pieces. Each
/// tile's outputs go to `emit(first row, outputs)`, bitwise its GEMV.
///
/// # Safety
/// As [`rows`] for a float format `F` with `WIDE` = 16, for the rows `rows` and the
/// activation rows `xs`.
#[inline(always)]
unsafe fn group_by_pieces<F: Widen, const M: usize>(
    w: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    xs: [*const f32; M],
    n: usize,
    state: &mut Vec<Acc16<TILE_ROWS, M>>,
    mut emit: impl FnMut(usize, &[[f32; TILE_ROWS]; M]),
) {
    let tiles = rows.len() / TILE_ROWS;
    let rows_of = |t: usize| -> [*const u8; TILE_ROWS] {
        // SAFETY: tile `t` of `rows` lies in `w`, by the contract.
        let row = unsafe { w.as_ptr().add((rows.start + t * TILE_ROWS) * row_bytes) };
        // SAFETY: as above, row by row.
        std::array::from_fn(|r| unsafe { row.add(r * row_bytes) })
    };
    let whole = n / 32 * 32;
    // SAFETY: the tiles' rows and the activation rows hold `n` values, by the contract; ISA
    // by the contract.
    unsafe {
        state.clear();
        state.resize(tiles, zero16());
        let mut k0 = 0;
        while k0 < whole {
            let k1 = (k0 + FLOAT_GEMM_PIECE).min(whole);
            for (t, acc) in state.iter_mut().enumerate() {
                // A local copy, which no pointer of the loop can reach, stays in registers
                // through the piece.
                let mut local = *acc;
                tile16_steps::<F, TILE_ROWS, M>(&rows_of(t), &xs, k0, k1, &mut local);
                *acc = local;
            }
            k0 = k1;
        }
        for (t, acc) in state.iter_mut().enumerate() {
            let mut out = [[0.0f32; TILE_ROWS]; M];
            tile16_finish::<F, TILE_ROWS, M>(&rows_of(t), &xs, whole, n, acc, &mut out);
            emit(rows.start + t * TILE_ROWS, &out);
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
pub(super) unsafe fn float_rows<F: Widen, const WIDE: usize>(
    w: &[u8],
    row_bytes: usize,
    x: &[f32],
    y: &mut [f32],
) {
    let (xp, n) = (x.as_ptr(), x.len());
    let to_l2 = Fill::float_this_cpu() == Fill::L2;
    let mut r = 0;
    // SAFETY: rows `r..` lie in `w` by the contract; ISA by the contract.
    unsafe {
        while r + FLOAT_ROWS <= y.len() {
            let (row, out) = (w.as_ptr().add(r * row_bytes), &mut y[r..r + FLOAT_ROWS]);
            dot_float::<F, WIDE, FLOAT_ROWS>(to_l2, row, row_bytes, xp, n, out);
            r += FLOAT_ROWS;
        }
        while r < y.len() {
            let (row, out) = (w.as_ptr().add(r * row_bytes), &mut y[r..r + 1]);
            dot_float::<F, WIDE, 1>(to_l2, row, row_bytes, xp, n, out);
            r += 1;
        }
    }
}

/// [`dot_float16`] (its prefetch into L2 when `to_l2`) or [`dot_float8`], by `WIDE`.
///
/// # Safety
/// As [`dot_float8`]; for `WIDE = 16` the CPU has AVX-512F.
#[inline(always)]
unsafe fn dot_float<F: Widen, const WIDE: usize, const R: usize>(
    to_l2: bool,
    row: *const u8,
    row_bytes: usize,
    x: *const f32,
    n: usize,
    out: &mut [f32],
) {
    // SAFETY: forwarded contract.
    unsafe {
        match (WIDE, to_l2) {
            (16, true) => dot_float16::<F, R, true>(row, row_bytes, x, n, out),
            (16, false) => dot_float16::<F, R, false>(row, row_bytes, x, n, out),
            _ => dot_float8::<F, R>(row, row_bytes, x, n, out),
        }
    }
}
