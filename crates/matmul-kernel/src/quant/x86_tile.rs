//! The x86 GEMM bodies of the quantized formats (q8_0, q4_0, q4_K, q6_K): eight weight rows
//! at a time, one row per 32-bit lane, against many activation rows.
//!
//! A tile of eight weight rows is repacked, one chunk of [`KC`] blocks of 32 at a time, into
//! unsigned codes laid out for `vpdpbusd` with a broadcast operand: vector `v` of block `j`
//! holds, in lane `r`, the codes `4v..4v + 3` of row `r`'s block (an 8 × 8 transpose of
//! 32-bit words), beside each row's block scales in f32. Each activation row then meets the
//! eight weight rows with eight `vpdpbusd` per block (its codes four at a time, broadcast),
//! and one conversion and one FMA scale the block's exact i32 dot products into one f32
//! accumulator lane per output: no horizontal sum anywhere, and the packing is paid once for
//! every activation row of the call.
//!
//! The codes are unsigned, the format's offset taken off in the integers by starting the
//! accumulator at `−offset·Σx` of the activation block (q8_0: `w + 128`, offset 128; q4_0: the
//! nibble, offset 8; q6_K: the 6-bit code, offset 32 per sub-block of 16, from the
//! activations' `sum_lo`). q4_K's mins are summed apart, `dmin·m` times the activations'
//! `d·sum`, into a second accumulator subtracted at the end. q6_K's sub-block scales multiply
//! the two i32 halves in f32, exactly (the products and their sum stay below 2²⁴).
//!
//! Order of one output `(i, r)`: for each block `b` in increasing order, `acc += I_b · s_b`
//! by FMA, with the block's exact integer dot product `I_b` and its scale
//! `s_b = sw_b · d_x` (one rounding; q6_K's `I_b` is the exact scaled sum of its halves and
//! `sw_b = d`); q4_K also `mins += (dmin·m)_b · (d·sum)_b`, and the result is
//! `acc − mins`. Lanes never mix, so the value depends only on the row's bytes and the
//! activation row: not on the rows packed beside it, the activation rows run with it, the
//! chunking or the thread.

#![allow(
    clippy::needless_range_loop,
    reason = "indexed loops over lane and accumulator arrays read like the math and unroll the same"
)]

use super::activations::{Activations, BlockQ8x};
use super::format::WeightFormat;
use super::x86_int::{Dot4, f16_at, q4k_scales_mins};
use std::arch::x86_64::*;

/// Weight rows packed together: one per 32-bit lane of a 256-bit vector.
const LANES: usize = 8;

/// Blocks of 32 packed per chunk: one super-block of the k-quants. The activation rows'
/// blocks of one chunk (64 rows × 8 × 40 bytes) and the packed chunk (2.5 KiB) stay in L1.
const KC: usize = 8;

/// Activation rows whose accumulators one pass over a tile keeps on the stack.
const MAX_X: usize = 64;

/// One chunk of eight weight rows, repacked.
#[repr(C, align(32))]
struct Packed {
    /// `codes[j][v]` lane `r`: the unsigned codes `4v..4v + 3` of row `r`'s block `j`.
    codes: [[__m256i; 8]; KC],
    /// `scale[j][r]`: the f32 scale of row `r`'s block `j` (q8_0, q4_0: `d`; q4_K: `d·sc`;
    /// q6_K: `d`).
    scale: [[f32; LANES]; KC],
    /// q4_K: `dmin·m`; q6_K: the first sub-block's scale; else unused.
    lo: [[f32; LANES]; KC],
    /// q6_K: the second sub-block's scale; else unused.
    hi: [[f32; LANES]; KC],
}

/// The formats, as a const parameter of the bodies.
const Q8_0: u8 = 0;
/// q4_0.
const Q4_0: u8 = 1;
/// q4_K.
const Q4K: u8 = 2;
/// q6_K.
const Q6K: u8 = 3;

/// Transposes eight vectors of eight 32-bit words: word `v` of `u[r]` becomes word `r` of
/// the result's vector `v`.
///
/// # Safety
/// The CPU has AVX2.
#[inline(always)]
unsafe fn transpose8(u: &[__m256i; 8]) -> [__m256i; 8] {
    // SAFETY: AVX2 by the contract; register shuffles only.
    unsafe {
        let t: [__m256i; 8] = std::array::from_fn(|k| {
            let (a, b) = (u[2 * (k / 2)], u[2 * (k / 2) + 1]);
            if k % 2 == 0 {
                _mm256_unpacklo_epi32(a, b)
            } else {
                _mm256_unpackhi_epi32(a, b)
            }
        });
        // t[0] = [00 10 01 11 | 04 14 05 15], t[1] = [02 12 03 13 | 06 16 07 17], ...
        let s: [__m256i; 8] = std::array::from_fn(|k| {
            let base = 4 * (k / 4);
            let (a, b) = (t[base + (k % 4) / 2], t[base + 2 + (k % 4) / 2]);
            if k % 2 == 0 {
                _mm256_unpacklo_epi64(a, b)
            } else {
                _mm256_unpackhi_epi64(a, b)
            }
        });
        // s[0] = [00 10 20 30 | 04 14 24 34], s[1] = [01 .. | 05 ..], s[2] = [02 | 06],
        // s[3] = [03 | 07]; s[4..8] the same for rows 4–7.
        std::array::from_fn(|v| {
            let (a, b) = (s[v % 4], s[4 + v % 4]);
            if v < 4 {
                _mm256_permute2x128_si256::<0x20>(a, b)
            } else {
                _mm256_permute2x128_si256::<0x31>(a, b)
            }
        })
    }
}

/// The unsigned codes of blocks `b0..b0 + kc` of one row at `row`, with their scales (into
/// `scale[j]`, `lo[j]`, `hi[j]`, as [`Packed`]'s fields).
///
/// # Safety
/// The blocks are readable (q4_K and q6_K: `b0` is a multiple of 8 and `kc = 8`); the CPU
/// has AVX2 and F16C.
#[inline(always)]
unsafe fn unpack_row<const F: u8>(
    row: *const u8,
    b0: usize,
    kc: usize,
    codes: &mut [__m256i; KC],
    scale: &mut [f32; KC],
    lo: &mut [f32; KC],
    hi: &mut [f32; KC],
) {
    // SAFETY: every read is inside the blocks named by the contract; ISA by the contract.
    unsafe {
        let low = _mm256_set1_epi8(0x0F);
        match F {
            Q8_0 => {
                for j in 0..kc {
                    let block = row.add(34 * (b0 + j));
                    let w = _mm256_loadu_si256(block.add(2) as *const __m256i);
                    codes[j] = _mm256_xor_si256(w, _mm256_set1_epi8(-128));
                    scale[j] = f16_at(block);
                }
            }
            Q4_0 => {
                for j in 0..kc {
                    let block = row.add(18 * (b0 + j));
                    let raw = _mm_loadu_si128(block.add(2) as *const __m128i);
                    let low = _mm256_castsi256_si128(low);
                    let lo_n = _mm_and_si128(raw, low);
                    let hi_n = _mm_and_si128(_mm_srli_epi16::<4>(raw), low);
                    codes[j] = _mm256_set_m128i(hi_n, lo_n);
                    scale[j] = f16_at(block);
                }
            }
            Q4K => {
                let block = row.add(144 * (b0 / 8));
                let (sc, m) = q4k_scales_mins(&*(block.add(4) as *const [u8; 12]));
                let (d, dmin) = (f16_at(block), f16_at(block.add(2)));
                for c in 0..4 {
                    let raw = _mm256_loadu_si256(block.add(16 + 32 * c) as *const __m256i);
                    codes[2 * c] = _mm256_and_si256(raw, low);
                    codes[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low);
                }
                for s in 0..8 {
                    // Exact: 11 significant bits times 6.
                    scale[s] = d * ((sc >> (8 * s)) & 0xFF) as f32;
                    lo[s] = dmin * ((m >> (8 * s)) & 0xFF) as f32;
                }
            }
            _ => {
                let block = row.add(210 * (b0 / 8));
                let d = f16_at(block.add(208));
                let bits = |mask: i8| _mm256_set1_epi8(mask);
                for h in 0..2 {
                    let a = _mm256_loadu_si256(block.add(64 * h) as *const __m256i);
                    let b = _mm256_loadu_si256(block.add(64 * h + 32) as *const __m256i);
                    let c = _mm256_loadu_si256(block.add(128 + 32 * h) as *const __m256i);
                    codes[4 * h] = _mm256_or_si256(
                        _mm256_and_si256(a, low),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(c, bits(0x03))),
                    );
                    codes[4 * h + 1] = _mm256_or_si256(
                        _mm256_and_si256(b, low),
                        _mm256_slli_epi16::<2>(_mm256_and_si256(c, bits(0x0C))),
                    );
                    codes[4 * h + 2] = _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(a), low),
                        _mm256_and_si256(c, bits(0x30)),
                    );
                    codes[4 * h + 3] = _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(b), low),
                        _mm256_and_si256(_mm256_srli_epi16::<2>(c), bits(0x30)),
                    );
                }
                for j in 0..8 {
                    scale[j] = d;
                    lo[j] = f32::from(*block.add(192 + 2 * j) as i8);
                    hi[j] = f32::from(*block.add(192 + 2 * j + 1) as i8);
                }
            }
        }
    }
}

/// Packs blocks `b0..b0 + kc` of the `n_rows ≤ 8` rows at `w` (`row_bytes` apart); lanes
/// `n_rows..8` get zero codes and scales.
///
/// # Safety
/// As [`unpack_row`] for each of the `n_rows` rows.
#[inline(always)]
unsafe fn pack<const F: u8>(
    w: *const u8,
    row_bytes: usize,
    n_rows: usize,
    b0: usize,
    kc: usize,
    p: &mut Packed,
) {
    // SAFETY: rows `r < n_rows` are readable by the contract; ISA by the contract.
    unsafe {
        let mut codes = [[_mm256_setzero_si256(); KC]; LANES];
        let mut scale = [[0.0f32; KC]; LANES];
        let mut lo = [[0.0f32; KC]; LANES];
        let mut hi = [[0.0f32; KC]; LANES];
        for r in 0..n_rows {
            unpack_row::<F>(
                w.add(r * row_bytes),
                b0,
                kc,
                &mut codes[r],
                &mut scale[r],
                &mut lo[r],
                &mut hi[r],
            );
        }
        for j in 0..kc {
            let u: [__m256i; 8] = std::array::from_fn(|r| codes[r][j]);
            p.codes[j] = transpose8(&u);
            for r in 0..LANES {
                p.scale[j][r] = scale[r][j];
                p.lo[j][r] = lo[r][j];
                p.hi[j][r] = hi[r][j];
            }
        }
    }
}

/// Where one activation row's blocks of the current chunk lie.
#[derive(Clone, Copy)]
struct XChunk {
    q: *const BlockQ8x,
    d_sum: *const f32,
    sum_lo: *const i32,
}

/// The packed chunk `p` (`kc` blocks) against `M` activation rows, into their accumulators
/// `acc[i]` (and `mins[i]` for q4_K), in the order of the module's comment.
///
/// # Safety
/// `kc` blocks of each `xs[i]` are readable; the CPU has AVX2, FMA and `D`'s instructions.
#[inline(always)]
unsafe fn run<D: Dot4, const F: u8, const M: usize>(
    p: &Packed,
    kc: usize,
    xs: [XChunk; M],
    acc: &mut [__m256; M],
    mins: &mut [__m256; M],
) {
    // SAFETY: block `j < kc` of each activation row is readable by the contract; the codes
    // are read four bytes at a time inside its 32; ISA by the contract.
    unsafe {
        for j in 0..kc {
            let codes = &p.codes[j];
            let scale = _mm256_load_ps(p.scale[j].as_ptr());
            for i in 0..M {
                let block = &*xs[i].q.add(j);
                let q = block.qs.as_ptr();
                let x4 = |v: usize| {
                    _mm256_set1_epi32(std::ptr::read_unaligned(q.add(4 * v) as *const i32))
                };
                let s = _mm256_mul_ps(scale, _mm256_set1_ps(block.d));
                let dots = if F == Q6K {
                    let lo_sum = *xs[i].sum_lo.add(j);
                    let mut a = _mm256_set1_epi32(-32 * lo_sum);
                    let mut b = _mm256_set1_epi32(-32 * (block.sum - lo_sum));
                    for v in 0..4 {
                        a = D::dot4_acc(a, codes[v], x4(v));
                        b = D::dot4_acc(b, codes[4 + v], x4(4 + v));
                    }
                    let lo = _mm256_load_ps(p.lo[j].as_ptr());
                    let hi = _mm256_load_ps(p.hi[j].as_ptr());
                    let t = _mm256_mul_ps(_mm256_cvtepi32_ps(a), lo);
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(b), hi, t)
                } else {
                    let offset = match F {
                        Q8_0 => 128,
                        Q4_0 => 8,
                        _ => 0,
                    };
                    let mut a = _mm256_set1_epi32(-offset * block.sum);
                    for v in 0..8 {
                        a = D::dot4_acc(a, codes[v], x4(v));
                    }
                    _mm256_cvtepi32_ps(a)
                };
                acc[i] = _mm256_fmadd_ps(dots, s, acc[i]);
                if F == Q4K {
                    let dmin_m = _mm256_load_ps(p.lo[j].as_ptr());
                    let d_sum = _mm256_set1_ps(*xs[i].d_sum.add(j));
                    mins[i] = _mm256_fmadd_ps(dmin_m, d_sum, mins[i]);
                }
            }
        }
    }
}

/// `M` activation rows from `i0` against the packed chunk, their accumulators loaded from and
/// stored back to `acc_mem` and `mins_mem`.
///
/// # Safety
/// As [`run`] for `acts[i0..i0 + M]` from block `b0`; `i0 + M <= acts.len() <= MAX_X`.
#[inline(always)]
unsafe fn run_rows<D: Dot4, const F: u8, const M: usize>(
    p: &Packed,
    b0: usize,
    kc: usize,
    acts: &[Activations<'_>],
    i0: usize,
    acc_mem: &mut [[f32; LANES]; MAX_X],
    mins_mem: &mut [[f32; LANES]; MAX_X],
) {
    // SAFETY: `acts[i0 + k]` exists and holds `b0 + kc` blocks by the contract; the
    // accumulator rows are inside the arrays; ISA by the contract.
    unsafe {
        let xs: [XChunk; M] = std::array::from_fn(|k| {
            let a = &acts[i0 + k];
            XChunk {
                q: a.q().as_ptr().add(b0),
                d_sum: a.d_sum().as_ptr().add(b0),
                sum_lo: a.sum_lo().as_ptr().add(b0),
            }
        });
        let mut acc: [__m256; M] =
            std::array::from_fn(|k| _mm256_loadu_ps(acc_mem[i0 + k].as_ptr()));
        let mut mins: [__m256; M] =
            std::array::from_fn(|k| _mm256_loadu_ps(mins_mem[i0 + k].as_ptr()));
        run::<D, F, M>(p, kc, xs, &mut acc, &mut mins);
        for k in 0..M {
            _mm256_storeu_ps(acc_mem[i0 + k].as_mut_ptr(), acc[k]);
            _mm256_storeu_ps(mins_mem[i0 + k].as_mut_ptr(), mins[k]);
        }
    }
}

/// The GEMM tile of format `F`: `y[i·n_rows + r]` for the `n_rows = y.len() / acts.len()`
/// rows at `w`, eight rows at a time, activation rows `M` at a time then one by one.
///
/// # Safety
/// `w` holds `n_rows` rows of `row_bytes`, each `nb` blocks of 32; every `acts[i]` holds `nb`
/// quantized blocks; `acts.len() <= MAX_X`; the CPU has AVX2, FMA, F16C and `D`'s
/// instructions.
#[inline(always)]
unsafe fn tile<D: Dot4, const F: u8, const M: usize>(
    w: &[u8],
    row_bytes: usize,
    nb: usize,
    acts: &[Activations<'_>],
    y: &mut [f32],
) {
    let n_x = acts.len();
    let n_rows = y.len() / n_x;
    // SAFETY: AVX by the contract.
    let zero = unsafe { _mm256_setzero_si256() };
    let mut p = Packed {
        codes: [[zero; 8]; KC],
        scale: [[0.0; LANES]; KC],
        lo: [[0.0; LANES]; KC],
        hi: [[0.0; LANES]; KC],
    };
    let mut acc_mem = [[0.0f32; LANES]; MAX_X];
    let mut mins_mem = [[0.0f32; LANES]; MAX_X];
    for g0 in (0..n_rows).step_by(LANES) {
        let rows = LANES.min(n_rows - g0);
        for a in &mut acc_mem[..n_x] {
            *a = [0.0; LANES];
        }
        for a in &mut mins_mem[..n_x] {
            *a = [0.0; LANES];
        }
        for b0 in (0..nb).step_by(KC) {
            let kc = KC.min(nb - b0);
            // SAFETY: rows `g0..g0 + rows` lie in `w` and hold `nb` blocks; the activation
            // rows hold `nb` blocks, `n_x <= MAX_X`; ISA by the contract.
            unsafe {
                pack::<F>(
                    w.as_ptr().add(g0 * row_bytes),
                    row_bytes,
                    rows,
                    b0,
                    kc,
                    &mut p,
                );
                let mut i0 = 0;
                while i0 + M <= n_x {
                    run_rows::<D, F, M>(&p, b0, kc, acts, i0, &mut acc_mem, &mut mins_mem);
                    i0 += M;
                }
                while i0 < n_x {
                    run_rows::<D, F, 1>(&p, b0, kc, acts, i0, &mut acc_mem, &mut mins_mem);
                    i0 += 1;
                }
            }
        }
        for i in 0..n_x {
            for r in 0..rows {
                y[i * n_rows + g0 + r] = acc_mem[i][r] - mins_mem[i][r];
            }
        }
    }
}

/// Whether `D` may run `format`'s tile: `vpmaddubsw` (AVX2) sums pairs in i16, which q8_0's
/// codes `w + 128` (up to 255) could overflow; `vpdpbusd` may run all.
pub(super) fn tiles_fit(format: WeightFormat, exact_u8: bool) -> bool {
    format.is_quantized() && (exact_u8 || format != WeightFormat::Q8_0)
}

/// `y[i·n_rows + r]` = weight row `r` of the quantized `format` at `w` dotted with activation
/// row `acts[i]`, by eight-row tiles (the module's order).
///
/// # Safety
/// `w` holds `n_rows = y.len() / acts.len()` rows of `row_bytes`, each `nb` blocks of 32;
/// every `acts[i]` holds `nb` quantized blocks with their `d·sum` and `sum_lo`;
/// [`tiles_fit`] holds for `D`; the CPU has AVX2, FMA, F16C and `D`'s instructions.
#[inline(always)]
pub(super) unsafe fn tile_rows<D: Dot4, const M: usize>(
    format: WeightFormat,
    w: &[u8],
    row_bytes: usize,
    nb: usize,
    acts: &[Activations<'_>],
    y: &mut [f32],
) {
    let n_rows = y.len().checked_div(acts.len()).unwrap_or(0);
    if n_rows == 0 {
        return;
    }
    for (chunk, out) in acts.chunks(MAX_X).zip(y.chunks_mut(MAX_X * n_rows)) {
        // SAFETY: forwarded contract, for at most MAX_X activation rows.
        unsafe {
            match format {
                WeightFormat::Q8_0 => tile::<D, Q8_0, M>(w, row_bytes, nb, chunk, out),
                WeightFormat::Q4_0 => tile::<D, Q4_0, M>(w, row_bytes, nb, chunk, out),
                WeightFormat::Q4K => tile::<D, Q4K, M>(w, row_bytes, nb, chunk, out),
                WeightFormat::Q6K => tile::<D, Q6K, M>(w, row_bytes, nb, chunk, out),
                WeightFormat::F32 | WeightFormat::F16 | WeightFormat::Bf16 => {}
            }
        }
    }
}
