//! The x86 GEMM bodies of the quantized formats (q8_0, q4_0, q4_K, q6_K): sixteen weight rows
//! at a time, one row per 32-bit lane, against many activation rows.
//!
//! A tile of sixteen weight rows is repacked, one chunk of [`KC`] blocks of 32 at a time, as two
//! halves of eight rows, into unsigned codes laid out for `vpdpbusd` with a broadcast operand:
//! vector `v` of block `j` holds, in lane `r`, the codes `4v..4v + 3` of row `r`'s block (an 8 × 8
//! transpose of 32-bit words, a block at a time: the eight rows' codes of the block go from their
//! loads through the transpose to the chunk in registers), beside the rows' block scales in f32
//! (transposed the same way). Each activation row then meets the rows with eight `vpdpbusd` per
//! block (its codes four at a time, broadcast from memory), and one conversion and one FMA scale
//! the block's exact i32 dot products into one f32 accumulator lane per output (q6_K: two
//! conversions, a product and two FMAs, one per sub-block of 16): no horizontal sum anywhere,
//! and the packing is paid once for every activation row of the call. With AVX512-VNNI one
//! 512-bit vector covers both halves ([`Full`]); otherwise each half runs in 256 bits by
//! [`Dot4`] ([`Half`]), the same operations per lane. Once a chunk is packed, the next one is
//! asked for into L1 ([`prefetch_next_chunk`]) while the packed one is computed.
//!
//! The codes are unsigned, the format's offset taken off in the integers by starting the
//! accumulator at `−offset·Σx` of the activation block (q8_0: `w + 128`, offset 128; q4_0: the
//! nibble, offset 8; q6_K: the 6-bit code, offset 32 per sub-block of 16, from the
//! activations' `sum_lo`). q4_K's mins are summed apart, `dmin·m` times the activations'
//! `d·sum`, into a second accumulator subtracted at the end. q6_K's two sub-block sums are
//! scaled in f32 by their `d·sc`, packed exact (11 significant bits of `d` times an i8).
//!
//! Order of one output `(i, r)`: for each block `b` in increasing order, `acc += I_b · s_b`
//! by FMA, with the block's exact integer dot product `I_b` and its scale
//! `s_b = sw_b · d_x` (one rounding); q6_K instead `acc += D_b · d_x` by FMA, where
//! `D_b = I₁·(d·sc₁) + (I₀·(d·sc₀))` of its sub-blocks' exact sums `I₀`, `I₁` (a product
//! and an FMA); q4_K also `mins += (dmin·m)_b · (d·sum)_b`, and the result is
//! `acc − mins`. Lanes never mix, so the value depends only on the row's bytes and the
//! activation row: not on the rows packed beside it, the activation rows run with it, the
//! chunking or the thread.

#![allow(
    clippy::needless_range_loop,
    reason = "indexed loops over lane and accumulator arrays read like the math and unroll the same"
)]

use super::activations::Activations;
use super::blocks::BlockQ8x;
use super::format::WeightFormat;
use super::x86_int::{Dot4, bytes_to_f32, f16_at, q4k_scales_mins};
use super::x86_layout::{KC, XChunk, XRowAt, next_weight_chunk};
use std::arch::x86_64::*;

/// Weight rows packed together: one per 32-bit lane of a 256-bit vector.
const LANES: usize = 8;

/// Activation rows whose accumulators one pass over a tile keeps on the stack.
const MAX_X: usize = 64;

/// One chunk of sixteen weight rows, repacked as two halves of eight.
#[repr(C, align(64))]
struct Packed {
    /// `codes[j][v][h]` lane `r`: the unsigned codes `4v..4v + 3` of row `8h + r`'s block
    /// `j` (the two halves side by side: one 512-bit vector).
    codes: [[[__m256i; 2]; 8]; KC],
    /// `scale[j][r]`: the f32 scale of row `r`'s block `j` (q8_0, q4_0: `d`; q4_K: `d·sc`;
    /// q6_K: the first sub-block's `d·sc`).
    scale: [[f32; ROWS]; KC],
    /// q4_K: `dmin·m`; q6_K: the second sub-block's `d·sc`; else unused.
    second: [[f32; ROWS]; KC],
}

/// Weight rows packed per tile: two halves of [`LANES`].
const ROWS: usize = 2 * LANES;

/// A quantized format as the tiles see it (as the NEON side's `QuantizedWeights`): how one
/// row's blocks unpack into unsigned codes and scales, and where each activation block's two
/// integer chains start (the format's offset taken off in the integers).
trait TileFormat {
    /// Scale vectors a row packs: `scale` alone, or `scale` and `second` ([`Packed`]).
    const SCALES: usize;
    /// q6_K: the two chains are its two sub-blocks, scaled apart by `scale` and `second`.
    const TWO_SUB_BLOCKS: bool = false;
    /// q4_K: `second` holds `dmin·m`, summed apart with the activations' `d·sum`.
    const MINS: bool = false;

    /// The scales of blocks `b0..b0 + kc` of one row at `row`, as vectors over the chunk's
    /// blocks (lane `j` for block `j`, as [`Packed`]'s `scale` and `second`; lanes from
    /// `kc` on are not read).
    ///
    /// # Safety
    /// The blocks are readable (q4_K and q6_K: `b0` is a multiple of 8 and `kc = 8`); the
    /// CPU has AVX2 and F16C.
    unsafe fn row_scales(row: *const u8, b0: usize, kc: usize) -> [__m256; 2];

    /// The 32 unsigned codes of block `b0 + j` of the row at `row`, in the block's order
    /// (`j` apart from `b0`, so that a loop over `j` unrolled makes the k-quants' position
    /// in their super-block a constant).
    ///
    /// # Safety
    /// The block is readable (q4_K and q6_K: `b0` is a multiple of 8 and `j < 8`); the CPU
    /// has AVX2.
    unsafe fn unpack_block(row: *const u8, b0: usize, j: usize) -> __m256i;

    /// The starts of the two chains (codes 0–15 and 16–31) of activation block `x`, whose
    /// first sixteen codes sum to `sum_lo`: minus the offset times the codes they meet.
    fn chain_starts(x: &BlockQ8x, sum_lo: i32) -> (i32, i32);
}

/// q8_0: the codes `w + 128`, offset 128.
struct Q8_0;
/// q4_0: the nibbles, offset 8.
struct Q4_0;
/// q4_K: the nibbles, the sub-block scale `d·sc` and the mins `dmin·m` apart.
struct Q4K;
/// q6_K: the 6-bit codes, offset 32, two sub-blocks of 16 per block.
struct Q6K;

/// The scales of a format of single blocks of 32 with an f16 `d` at their start (q8_0,
/// q4_0): the `d` of blocks `b0..b0 + kc` (`block_bytes` apart from `row`) as the first
/// scale vector.
///
/// # Safety
/// Blocks `b0..b0 + kc` of the row are readable; the CPU has AVX2 and F16C.
#[inline(always)]
unsafe fn d_of_blocks(row: *const u8, block_bytes: usize, b0: usize, kc: usize) -> [__m256; 2] {
    // SAFETY: the blocks are readable by the contract; ISA by the contract.
    unsafe {
        // The f16 bits side by side, converted by one `vcvtph2ps` (lanes from `kc` on: 0).
        let mut bits = [0u16; KC];
        for j in 0..kc {
            bits[j] = std::ptr::read_unaligned(row.add(block_bytes * (b0 + j)) as *const u16);
        }
        let d = _mm256_cvtph_ps(_mm_loadu_si128(bits.as_ptr() as *const __m128i));
        [d, _mm256_setzero_ps()]
    }
}

impl TileFormat for Q8_0 {
    const SCALES: usize = 1;

    #[inline(always)]
    unsafe fn row_scales(row: *const u8, b0: usize, kc: usize) -> [__m256; 2] {
        // SAFETY: forwarded contract (34 bytes a block: `d`, then 32 codes).
        unsafe { d_of_blocks(row, 34, b0, kc) }
    }

    #[inline(always)]
    unsafe fn unpack_block(row: *const u8, b0: usize, j: usize) -> __m256i {
        let b = b0 + j;
        // SAFETY: the block's 32 codes follow its `d`, inside it by the contract; AVX2 by
        // the contract.
        unsafe {
            let w = _mm256_loadu_si256(row.add(34 * b + 2) as *const __m256i);
            _mm256_xor_si256(w, _mm256_set1_epi8(-128))
        }
    }

    #[inline(always)]
    fn chain_starts(x: &BlockQ8x, _: i32) -> (i32, i32) {
        (-128 * x.sum, 0)
    }
}

impl TileFormat for Q4_0 {
    const SCALES: usize = 1;

    #[inline(always)]
    unsafe fn row_scales(row: *const u8, b0: usize, kc: usize) -> [__m256; 2] {
        // SAFETY: forwarded contract (18 bytes a block: `d`, then 16 bytes of nibbles).
        unsafe { d_of_blocks(row, 18, b0, kc) }
    }

    #[inline(always)]
    unsafe fn unpack_block(row: *const u8, b0: usize, j: usize) -> __m256i {
        let b = b0 + j;
        // SAFETY: the block's 16 nibble bytes follow its `d`, inside it by the contract;
        // AVX2 by the contract.
        unsafe {
            let low = _mm_set1_epi8(0x0F);
            let raw = _mm_loadu_si128(row.add(18 * b + 2) as *const __m128i);
            let lo_n = _mm_and_si128(raw, low);
            let hi_n = _mm_and_si128(_mm_srli_epi16::<4>(raw), low);
            _mm256_set_m128i(hi_n, lo_n)
        }
    }

    #[inline(always)]
    fn chain_starts(x: &BlockQ8x, _: i32) -> (i32, i32) {
        (-8 * x.sum, 0)
    }
}

impl TileFormat for Q4K {
    const SCALES: usize = 2;
    const MINS: bool = true;

    #[inline(always)]
    unsafe fn row_scales(row: *const u8, b0: usize, _: usize) -> [__m256; 2] {
        // SAFETY: every read is inside the super-block named by the contract; ISA by the
        // contract.
        unsafe {
            let block = row.add(144 * (b0 / 8));
            let (sc, m) = q4k_scales_mins(&*(block.add(4) as *const [u8; 12]));
            // Exact: 11 significant bits times 6.
            let d = _mm256_set1_ps(f16_at(block));
            let dmin = _mm256_set1_ps(f16_at(block.add(2)));
            [
                _mm256_mul_ps(d, bytes_to_f32(sc)),
                _mm256_mul_ps(dmin, bytes_to_f32(m)),
            ]
        }
    }

    #[inline(always)]
    unsafe fn unpack_block(row: *const u8, b0: usize, j: usize) -> __m256i {
        // SAFETY: sub-blocks `2c` and `2c + 1` are the low and high nibbles of the
        // super-block's 32 bytes `16 + 32c..`, inside it by the contract; AVX2 by the
        // contract.
        unsafe {
            let (c, high) = (j / 2, j % 2 == 1);
            let raw = _mm256_loadu_si256(row.add(144 * (b0 / 8) + 16 + 32 * c) as *const __m256i);
            let raw = if high {
                _mm256_srli_epi16::<4>(raw)
            } else {
                raw
            };
            _mm256_and_si256(raw, _mm256_set1_epi8(0x0F))
        }
    }

    #[inline(always)]
    fn chain_starts(_: &BlockQ8x, _: i32) -> (i32, i32) {
        (0, 0)
    }
}

impl TileFormat for Q6K {
    const SCALES: usize = 2;
    const TWO_SUB_BLOCKS: bool = true;

    #[inline(always)]
    unsafe fn row_scales(row: *const u8, b0: usize, _: usize) -> [__m256; 2] {
        // SAFETY: every read is inside the super-block named by the contract; ISA by the
        // contract.
        unsafe {
            let block = row.add(210 * (b0 / 8));
            // The sixteen i8 scales: the even ones (first sub-blocks) then the odd ones.
            let scales = _mm_loadu_si128(block.add(192) as *const __m128i);
            let split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
            let split = _mm_shuffle_epi8(scales, split);
            let lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(split));
            let hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(split)));
            // Exact: 11 significant bits times 8.
            let d = _mm256_set1_ps(f16_at(block.add(208)));
            [_mm256_mul_ps(d, lo), _mm256_mul_ps(d, hi)]
        }
    }

    #[inline(always)]
    unsafe fn unpack_block(row: *const u8, b0: usize, j: usize) -> __m256i {
        // SAFETY: block `4h + k` of a super-block takes its low bits from bytes
        // `64h + 32(k % 2)..` (the high nibbles for `k >= 2`) and its top two bits from
        // `128 + 32h..` (bits `2k..2k + 2`), inside it by the contract; AVX2 by the contract.
        unsafe {
            let (h, k) = (j / 4, j % 4);
            let block = row.add(210 * (b0 / 8));
            let lo = _mm256_loadu_si256(block.add(64 * h + 32 * (k % 2)) as *const __m256i);
            let top = _mm256_loadu_si256(block.add(128 + 32 * h) as *const __m256i);
            let low = _mm256_set1_epi8(0x0F);
            let lo = if k >= 2 {
                _mm256_srli_epi16::<4>(lo)
            } else {
                lo
            };
            let top = match k {
                0 => _mm256_slli_epi16::<4>(top),
                1 => _mm256_slli_epi16::<2>(top),
                2 => top,
                _ => _mm256_srli_epi16::<2>(top),
            };
            _mm256_or_si256(
                _mm256_and_si256(lo, low),
                _mm256_and_si256(top, _mm256_set1_epi8(0x30)),
            )
        }
    }

    #[inline(always)]
    fn chain_starts(x: &BlockQ8x, sum_lo: i32) -> (i32, i32) {
        (-32 * sum_lo, -32 * (x.sum - sum_lo))
    }
}

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

/// Packs blocks `b0..b0 + kc` of the `n_rows ≤ 8` rows at `w` (`row_bytes` apart) into half
/// `h` of `p`, a block at a time (the eight rows' codes of one block go from their loads
/// through [`transpose8`] to `p` in registers); lanes `n_rows..8` get zero codes and scales.
///
/// # Safety
/// As [`TileFormat::row_scales`] for each of the `n_rows` rows.
#[inline(always)]
unsafe fn pack<F: TileFormat>(
    w: *const u8,
    row_bytes: usize,
    n_rows: usize,
    b0: usize,
    kc: usize,
    h: usize,
    p: &mut Packed,
) {
    // SAFETY: rows `r < n_rows` are readable by the contract; the stores stay in half `h`
    // of the chunk's rows of `p`; ISA by the contract.
    unsafe {
        let zero = _mm256_setzero_si256();
        for j in 0..kc {
            // A plain loop, not `array::from_fn`: its closure, not always inlined, would
            // call the intrinsics without this function's target features.
            let mut u = [zero; LANES];
            for r in 0..n_rows {
                u[r] = F::unpack_block(w.add(r * row_bytes), b0, j);
            }
            let t = transpose8(&u);
            for v in 0..8 {
                p.codes[j][v][h] = t[v];
            }
        }
        let mut scales = [[zero; LANES]; 2];
        for r in 0..n_rows {
            let s = F::row_scales(w.add(r * row_bytes), b0, kc);
            for k in 0..2 {
                scales[k][r] = _mm256_castps_si256(s[k]);
            }
        }
        for (k, rows) in scales.iter().enumerate().take(F::SCALES) {
            let t = transpose8(rows);
            let dest = [&mut p.scale, &mut p.second];
            for j in 0..kc {
                _mm256_storeu_ps(
                    dest[k][j].as_mut_ptr().add(LANES * h),
                    _mm256_castsi256_ps(t[j]),
                );
            }
        }
    }
}

/// The vector width of a run over a packed chunk: eight lanes, one half of the sixteen
/// packed rows, by `D`'s dot products ([`Half`]), or all sixteen by 512-bit `vpdpbusd`
/// ([`Full`]). Lane by lane both compute the same operations.
///
/// # Safety
/// Every method runs on a CPU with the implementor's instructions; the pointers are
/// readable (writable for `store`) for the lanes' elements.
pub(super) trait Width {
    /// The i32 lanes.
    type I: Copy;
    /// The f32 lanes.
    type F: Copy;
    /// Lanes per vector.
    const LANES: usize;
    /// The packed codes `pair` of the rows this width covers in half `h` (`Half`) or both.
    unsafe fn codes(pair: &[__m256i; 2], h: usize) -> Self::I;
    /// Four bytes at `q` in every lane.
    unsafe fn broadcast4(q: *const i8) -> Self::I;
    /// `v` in every lane.
    unsafe fn splat_i(v: i32) -> Self::I;
    /// `a + b` per lane.
    unsafe fn add_i(a: Self::I, b: Self::I) -> Self::I;
    /// `acc + Σ_{j<4} a·b` per lane (unsigned `a`, signed `b`), exactly.
    unsafe fn dot_acc(acc: Self::I, a: Self::I, b: Self::I) -> Self::I;
    /// The lanes as f32 (exact below 2²⁴).
    unsafe fn to_f32(v: Self::I) -> Self::F;
    /// `v` in every lane.
    unsafe fn splat(v: f32) -> Self::F;
    /// Unaligned load.
    unsafe fn load(p: *const f32) -> Self::F;
    /// Unaligned store.
    unsafe fn store(p: *mut f32, v: Self::F);
    /// `a·b`, rounded.
    unsafe fn mul(a: Self::F, b: Self::F) -> Self::F;
    /// `a·b + c`, one rounding.
    unsafe fn fmadd(a: Self::F, b: Self::F, c: Self::F) -> Self::F;
}

/// Eight lanes with `D`'s dot products.
pub(super) struct Half<D>(std::marker::PhantomData<D>);

/// Sixteen lanes with AVX512-VNNI's 512-bit `vpdpbusd`.
pub(super) struct Full;

impl<D: Dot4> Width for Half<D> {
    type I = __m256i;
    type F = __m256;
    const LANES: usize = LANES;
    #[inline(always)]
    unsafe fn codes(pair: &[__m256i; 2], h: usize) -> __m256i {
        pair[h]
    }
    #[inline(always)]
    unsafe fn broadcast4(q: *const i8) -> __m256i {
        // SAFETY: four readable bytes and AVX, by the trait contract.
        unsafe { _mm256_set1_epi32(std::ptr::read_unaligned(q as *const i32)) }
    }
    #[inline(always)]
    unsafe fn splat_i(v: i32) -> __m256i {
        // SAFETY: AVX by the trait contract.
        unsafe { _mm256_set1_epi32(v) }
    }
    #[inline(always)]
    unsafe fn add_i(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 by the trait contract.
        unsafe { _mm256_add_epi32(a, b) }
    }
    #[inline(always)]
    unsafe fn dot_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: `D`'s instructions by the trait contract; the callers' codes are within
        // `D`'s exact range (`bodies::gemm_body`).
        unsafe { D::dot4_acc(acc, a, b) }
    }
    #[inline(always)]
    unsafe fn to_f32(v: __m256i) -> __m256 {
        // SAFETY: AVX by the trait contract.
        unsafe { _mm256_cvtepi32_ps(v) }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> __m256 {
        // SAFETY: AVX by the trait contract.
        unsafe { _mm256_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        // SAFETY: eight readable floats and AVX, by the trait contract.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        // SAFETY: eight writable floats and AVX, by the trait contract.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn mul(a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX by the trait contract.
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m256, b: __m256, c: __m256) -> __m256 {
        // SAFETY: FMA by the trait contract.
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
}

impl Width for Full {
    type I = __m512i;
    type F = __m512;
    const LANES: usize = ROWS;
    #[inline(always)]
    unsafe fn codes(pair: &[__m256i; 2], _h: usize) -> __m512i {
        // SAFETY: the pair is 64 contiguous bytes, 64-aligned in `Packed`; AVX-512F by the
        // trait contract.
        unsafe { _mm512_load_si512(pair.as_ptr() as *const __m512i) }
    }
    #[inline(always)]
    unsafe fn broadcast4(q: *const i8) -> __m512i {
        // SAFETY: four readable bytes and AVX-512F, by the trait contract.
        unsafe { _mm512_set1_epi32(std::ptr::read_unaligned(q as *const i32)) }
    }
    #[inline(always)]
    unsafe fn splat_i(v: i32) -> __m512i {
        // SAFETY: AVX-512F by the trait contract.
        unsafe { _mm512_set1_epi32(v) }
    }
    #[inline(always)]
    unsafe fn add_i(a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512F by the trait contract.
        unsafe { _mm512_add_epi32(a, b) }
    }
    #[inline(always)]
    unsafe fn dot_acc(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX512-VNNI by the trait contract; exact for any bytes.
        unsafe { _mm512_dpbusd_epi32(acc, a, b) }
    }
    #[inline(always)]
    unsafe fn to_f32(v: __m512i) -> __m512 {
        // SAFETY: AVX-512F by the trait contract.
        unsafe { _mm512_cvtepi32_ps(v) }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> __m512 {
        // SAFETY: AVX-512F by the trait contract.
        unsafe { _mm512_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        // SAFETY: sixteen readable floats and AVX-512F, by the trait contract.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        // SAFETY: sixteen writable floats and AVX-512F, by the trait contract.
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn mul(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F by the trait contract.
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
        // SAFETY: AVX-512F by the trait contract.
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
}

/// The packed chunk `p` (`kc` blocks; half `h` for [`Half`]) against `M` activation rows,
/// into their accumulators `acc[i]` (and `mins[i]` for q4_K), in the order of the module's
/// comment.
///
/// # Safety
/// `kc` blocks of each `xs[i]` are readable; the CPU has AVX2, FMA and `W`'s instructions.
#[inline(always)]
unsafe fn run<W: Width, F: TileFormat, const M: usize>(
    p: &Packed,
    h: usize,
    kc: usize,
    xs: [XChunk; M],
    acc: &mut [W::F; M],
    mins: &mut [W::F; M],
) {
    // SAFETY: block `j < kc` of each activation row is readable by the contract; the codes
    // are read four bytes at a time inside its 32; the scales' lanes `W::LANES·h..` lie in
    // their rows of 16; ISA by the contract.
    unsafe {
        let lane0 = W::LANES * h;
        for j in 0..kc {
            let codes: [W::I; 8] = std::array::from_fn(|v| W::codes(&p.codes[j][v], h));
            let scale = W::load(p.scale[j].as_ptr().add(lane0));
            let blocks: [&BlockQ8x; M] = std::array::from_fn(|i| &*xs[i].q.add(j));
            // The integer dot products, interleaved over the rows: two chains per activation
            // row (codes 0–15 and 16–31; q6_K's two sub-blocks), or one where `M` rows give
            // enough chains to cover `vpdpbusd`'s latency (eight). Exact, so the number of
            // chains changes nothing but the latency.
            let one_chain = !F::TWO_SUB_BLOCKS && M >= 8;
            let starts: [(i32, i32); M] = std::array::from_fn(|i| {
                let (lo, hi) = F::chain_starts(blocks[i], *xs[i].sum_lo.add(j));
                if one_chain { (lo + hi, 0) } else { (lo, hi) }
            });
            let mut a: [W::I; M] = std::array::from_fn(|i| W::splat_i(starts[i].0));
            let mut b: [W::I; M] = std::array::from_fn(|i| W::splat_i(starts[i].1));
            for v in 0..4 {
                for i in 0..M {
                    let q = blocks[i].qs.as_ptr();
                    a[i] = W::dot_acc(a[i], codes[v], W::broadcast4(q.add(4 * v)));
                    let hi = W::broadcast4(q.add(16 + 4 * v));
                    if one_chain {
                        a[i] = W::dot_acc(a[i], codes[4 + v], hi);
                    } else {
                        b[i] = W::dot_acc(b[i], codes[4 + v], hi);
                    }
                }
            }
            for i in 0..M {
                if F::TWO_SUB_BLOCKS {
                    // `scale` and `second` hold the sub-blocks' `d·sc`: `D_b`, then `d_x`.
                    // `second` (as q4_K's `dmin·m` below) is read per row, a memory operand
                    // of the FMA: held across the rows it takes a register, and ran slower.
                    let sc1 = W::load(p.second[j].as_ptr().add(lane0));
                    let t = W::mul(W::to_f32(a[i]), scale);
                    let dots = W::fmadd(W::to_f32(b[i]), sc1, t);
                    acc[i] = W::fmadd(dots, W::splat(blocks[i].d), acc[i]);
                } else {
                    let s = W::mul(scale, W::splat(blocks[i].d));
                    let dots = if one_chain {
                        W::to_f32(a[i])
                    } else {
                        W::to_f32(W::add_i(a[i], b[i]))
                    };
                    acc[i] = W::fmadd(dots, s, acc[i]);
                }
                if F::MINS {
                    let dmin_m = W::load(p.second[j].as_ptr().add(lane0));
                    mins[i] = W::fmadd(dmin_m, W::splat(*xs[i].d_sum.add(j)), mins[i]);
                }
            }
        }
    }
}

/// `M` activation rows from `i0` against the packed chunk, their accumulators loaded from and
/// stored back to `acc_mem` and `mins_mem` (lanes `W::LANES·h..`).
///
/// # Safety
/// As [`run`] for the rows `at[i0..i0 + M]` from block `b0` (a multiple of [`KC`]), each
/// [`XRowAt::of`] a row of `b0 + kc` blocks or more.
#[inline(always)]
#[allow(
    clippy::too_many_arguments,
    reason = "one chunk's whole state, passed down as it is"
)]
unsafe fn run_rows<W: Width, F: TileFormat, const M: usize>(
    p: &Packed,
    h: usize,
    b0: usize,
    kc: usize,
    at: &[XRowAt; MAX_X],
    i0: usize,
    acc_mem: &mut [[f32; ROWS]; MAX_X],
    mins_mem: &mut [[f32; ROWS]; MAX_X],
) {
    // SAFETY: `at[i0 + k]` holds `b0 + kc` blocks by the contract; the
    // accumulator lanes `W::LANES·h..W::LANES·(h + 1)` lie in their rows of 16; ISA by the
    // contract.
    unsafe {
        let lane0 = W::LANES * h;
        let xs: [XChunk; M] = std::array::from_fn(|k| at[i0 + k].chunk(b0));
        let mut acc: [W::F; M] =
            std::array::from_fn(|k| W::load(acc_mem[i0 + k].as_ptr().add(lane0)));
        let mut mins: [W::F; M] =
            std::array::from_fn(|k| W::load(mins_mem[i0 + k].as_ptr().add(lane0)));
        run::<W, F, M>(p, h, kc, xs, &mut acc, &mut mins);
        for k in 0..M {
            W::store(acc_mem[i0 + k].as_mut_ptr().add(lane0), acc[k]);
            W::store(mins_mem[i0 + k].as_mut_ptr().add(lane0), mins[k]);
        }
    }
}

/// The GEMM tile of format `F`: `y[i·n_rows + r]` for the `n_rows = y.len() / acts.len()`
/// rows at `w`, sixteen rows packed at a time and run in `W`'s lanes, activation rows `M`
/// at a time then one by one.
///
/// # Safety
/// `w` holds `n_rows` rows of `row_bytes`, each `nb` blocks of 32; every `acts[i]` holds `nb`
/// quantized blocks; `acts.len() <= MAX_X`; the CPU has AVX2, FMA, F16C and `W`'s
/// instructions.
#[inline(always)]
unsafe fn tile<W: Width, F: TileFormat, const M: usize>(
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
        codes: [[[zero; 2]; 8]; KC],
        scale: [[0.0; ROWS]; KC],
        second: [[0.0; ROWS]; KC],
    };
    let at: [XRowAt; MAX_X] = std::array::from_fn(|i| match acts.get(i) {
        Some(a) => XRowAt::of(a.tiles(), (a.q(), a.d_sum(), a.sum_lo()), nb),
        None => XRowAt::NONE,
    });
    let mut acc_mem = [[0.0f32; ROWS]; MAX_X];
    let mut mins_mem = [[0.0f32; ROWS]; MAX_X];
    for g0 in (0..n_rows).step_by(ROWS) {
        let rows = ROWS.min(n_rows - g0);
        for a in &mut acc_mem[..n_x] {
            *a = [0.0; ROWS];
        }
        for a in &mut mins_mem[..n_x] {
            *a = [0.0; ROWS];
        }
        // The halves that hold rows, and the runs over them.
        let halves = rows.div_ceil(LANES);
        let runs = if W::LANES == ROWS { 1 } else { halves };
        for b0 in (0..nb).step_by(KC) {
            let kc = KC.min(nb - b0);
            // SAFETY: rows `g0..g0 + rows` lie in `w` and hold `nb` blocks; the activation
            // rows hold `nb` blocks, `n_x <= MAX_X`; ISA by the contract.
            unsafe {
                for h in 0..2 {
                    let half_rows = rows.saturating_sub(LANES * h).min(LANES);
                    if half_rows > 0 || runs == 1 {
                        // An empty half reads no row: it is packed as zeros.
                        let first = if half_rows > 0 { g0 + LANES * h } else { g0 };
                        let at = w.as_ptr().add(first * row_bytes);
                        pack::<F>(at, row_bytes, half_rows, b0, kc, h, &mut p);
                    }
                }
                prefetch_next_chunk(w.as_ptr(), row_bytes, nb, g0, b0);
                for h in 0..runs {
                    let mut i0 = 0;
                    while i0 + M <= n_x {
                        run_rows::<W, F, M>(&p, h, b0, kc, &at, i0, &mut acc_mem, &mut mins_mem);
                        i0 += M;
                    }
                    while i0 < n_x {
                        run_rows::<W, F, 1>(&p, h, b0, kc, &at, i0, &mut acc_mem, &mut mins_mem);
                        i0 += 1;
                    }
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

/// Asks for the chunk the tile packs next ([`next_weight_chunk`]) into L1, so that the
/// compute on the chunk just packed overlaps DRAM's latency for the next one, which the
/// hardware's prefetch does not cover: sixteen short runs of a row apart.
///
/// # Safety
/// The CPU has SSE (a prefetch never faults: the addresses need not be readable, past `w`'s
/// end included).
#[inline(always)]
unsafe fn prefetch_next_chunk(w: *const u8, row_bytes: usize, nb: usize, g0: usize, b0: usize) {
    let (first_row, bytes) = next_weight_chunk(nb, row_bytes, ROWS, g0, b0);
    for r in first_row..first_row + ROWS {
        let start = w.wrapping_add(r * row_bytes + bytes.start);
        // Every line the bytes touch: the first one's offset in its line counts too.
        let mut line = 0;
        while line < bytes.len() + (start as usize & 63) {
            // SAFETY: a hint; SSE by the contract.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(line) as *const i8) };
            line += 64;
        }
    }
}

/// `y[i·n_rows + r]` = weight row `r` of the quantized `format` at `w` dotted with activation
/// row `acts[i]`, by sixteen-row tiles (the module's order), `M` activation rows at a time
/// (q4_K `M4K`, q6_K `M6K`), the rest one by one.
///
/// # Safety
/// `w` holds `n_rows = y.len() / acts.len()` rows of `row_bytes`, each `nb` blocks of 32;
/// every `acts[i]` holds `nb` quantized blocks with their `d·sum` and `sum_lo` (in the
/// call's tile layout, `Activations::tiles`, when it prepared one; else in the row's own;
/// a row without them panics);
/// `bodies::gemm_body` gives this tile for the format at `D`'s level (`vpmaddubsw`, which
/// sums pairs in i16, never runs q8_0's codes `w + 128`); the CPU has AVX2, FMA, F16C and
/// `D`'s instructions.
#[inline(always)]
pub(super) unsafe fn tile_rows<W: Width, const M: usize, const M4K: usize, const M6K: usize>(
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
                WeightFormat::Q8_0 => tile::<W, Q8_0, M>(w, row_bytes, nb, chunk, out),
                WeightFormat::Q4_0 => tile::<W, Q4_0, M>(w, row_bytes, nb, chunk, out),
                WeightFormat::Q4K => tile::<W, Q4K, M4K>(w, row_bytes, nb, chunk, out),
                WeightFormat::Q6K => tile::<W, Q6K, M6K>(w, row_bytes, nb, chunk, out),
                WeightFormat::F32 | WeightFormat::F16 | WeightFormat::Bf16 => {}
            }
        }
    }
}
