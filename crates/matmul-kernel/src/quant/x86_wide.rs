//! The GEMV bodies that read the activation codes in their own order
//! (`x86_layout::wide_order`), for one activation row, through the wrappers
//! `qgemv_rows_wide` (`qgemv_rows_wide_vbmi` on a CPU with AVX512-VBMI) and
//! `qgemv_rows_wide_avx2` of `quant/x86.rs`: the 512-bit bodies of q8_0, q4_0, q4_K and q6_K
//! (AVX512-VNNI with BW), and an AVX2 body of q4_0.
//!
//! The 256-bit bodies of `quant/x86_int.rs` convert and scale every block of 32 by itself
//! (a scalar f16 conversion, a broadcast, a conversion and an FMA per block), which made the
//! 4-bit formats count instructions, not bytes, at one thread. Here a 512-bit `vpdpbusd`
//! covers two to four blocks, whose scales are converted as one vector per group and spread
//! to their lanes by one permute:
//! - **q4_0**, four blocks (72 bytes) per step: `vpermt2w` gathers their sixteen nibble bytes
//!   each into one vector (the blocks are 18 bytes apart, so every field starts on a 16-bit
//!   word) and their four f16 scales into another; on a CPU with AVX512-VBMI the byte
//!   permutes `vpermt2b` and `vpermb` gather the same bytes (one uop each on Intel, where the
//!   word permutes take three and two). The low nibbles are the first 16 weights
//!   of each block, the high ones the last 16; the activation codes were laid out to match
//!   (`x86_layout::wide_order`), so two `vpdpbusd` leave lanes `4k..4k + 3` holding block
//!   `k`'s dot product. The offset 8 is summed apart from the activations' `d·sum`, four
//!   blocks per FMA. A last partial group runs the 256-bit body.
//! - **q4_0 on AVX2**, the same groups two blocks per 256-bit step: a 32-byte load of the
//!   same layout holds two blocks' first (or second) halves, so `vpmaddubsw` on the low and
//!   on the high nibbles, added in i16, and one `vpmaddwd` leave lanes `4k..4k + 3` holding
//!   block `k` of the pair; the four scales are packed in the integer registers and converted
//!   at once.
//! - **q4_K**, one super-block per step: two 64-byte loads of nibbles; the low nibbles of a
//!   load are sub-blocks `2c` and `2c + 2`, the high ones `2c + 1` and `2c + 3` (activation
//!   codes ordered to match), eight lanes per sub-block. The high nibbles are dotted in place,
//!   masked and not shifted (`16·q`: a lane's four products at most 4 · 240 · 127 < 2¹⁷),
//!   into accumulators of their own that are scaled by 1/16 once at the end: the same values
//!   short of f32's overflow, one vector operation fewer per load. The mins as in the 256-bit
//!   body.
//! - **q6_K**, one super-block per step: a 64-byte load of low bits and the matching 32 bytes
//!   of high bits (broadcast to both halves, shifted by per-half counts) give 64 six-bit codes
//!   in natural order, dotted by `vpdpbusd` as they are (`Σ q·x`, `q` in 0…63). The sixteen
//!   sub-block scales `d·sc` are multiplied by the activation scales once per super-block
//!   (`d·sc` exact, one rounding), four lanes per sub-block of 16; the offset 32 is summed
//!   apart, one FMA per super-block of those sixteen scales with the activations' `Σ` per 16
//!   codes (it was an i16 `−32·Σ` per four codes widened into every `vpdpbusd`: four
//!   `vpmovsxwd` per super-block, a shuffle port's work on Intel).
//!
//! Each body is a `WideBody` of `quant/x86_walk.rs`: one step (a group or a super-block) at a
//! time, so that a thread can walk several rows far apart at once, one step
//! of each in turn, as this CPU's `WideAccess` rule says. On Intel three rows at once took
//! every format from about 0.8 to about 0.9 of the read: more misses in flight while the core
//! computes (a body that only loads reached the read on one row as on three;
//! `docs/matmul-kernel.md`).
//!
//! Per output, every step adds its lanes' exact integer dot products times their rounded
//! scales into accumulators by FMA, in increasing block order; the accumulators are summed
//! once at the end. So the error bound of `Exec::qgemv` holds as for the 256-bit bodies, and an
//! output's operations depend on `n_in` alone.

use super::activations::Activations;
use super::blocks::QX;
use super::format::WeightFormat;
use super::x86_int::{Maddubs, Vnni, bytes_to_f32, dot_q4_0, dot_q8_0, hsum, q4k_scales_mins};
use super::x86_walk::{WideAccess, WideBody, WideX, walk};
use std::arch::x86_64::*;

/// Word indices of `vpermt2w` over a q4_0 group's bytes `0..64` (words 0–31) and `8..72`
/// (words 32–63): the sixteen nibble bytes of each of the four blocks, in block order.
const Q4_0_NIBBLES: [u16; 32] = {
    let mut idx = [0u16; 32];
    let mut j = 0;
    while j < 32 {
        let (k, i) = (j / 8, j % 8);
        // Block k's nibbles are bytes 18k + 2 .. 18k + 18; block 3's (56..72) from the
        // second load, whose word w is bytes 8 + 2w.
        idx[j] = if k < 3 { 9 * k + 1 + i } else { 32 + 24 + i } as u16;
        j += 1;
    }
    idx
};

/// Word indices of a q4_0 group's four f16 scales (bytes 0, 18, 36, 54) in its first load.
const Q4_0_SCALES: [u16; 32] = {
    let mut idx = [0u16; 32];
    let mut k = 0;
    while k < 4 {
        idx[k] = 9 * k as u16;
        k += 1;
    }
    idx
};

/// Word indices of a permute as byte indices of the same gather (`vpermt2b`, `vpermb` of
/// AVX512-VBMI): word `w` is bytes `2w` and `2w + 1`, over the same one or two sources.
const fn word_indices_as_bytes(words: &[u16; 32]) -> [u8; 64] {
    let mut idx = [0u8; 64];
    let mut j = 0;
    while j < 64 {
        idx[j] = (2 * words[j / 2] + (j % 2) as u16) as u8;
        j += 1;
    }
    idx
}

/// [`Q4_0_NIBBLES`] for `vpermt2b`: one uop on Intel's shuffle port where `vpermt2w` takes
/// three.
const Q4_0_NIBBLE_BYTES: [u8; 64] = word_indices_as_bytes(&Q4_0_NIBBLES);

/// [`Q4_0_SCALES`] for `vpermb`.
const Q4_0_SCALE_BYTES: [u8; 64] = word_indices_as_bytes(&Q4_0_SCALES);

/// Lane `l` of a step's scale vector takes entry `SPREAD_4[l]` of the per-block scales:
/// four lanes per block.
const SPREAD_4: [i32; 16] = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3];

/// q4_K: the sub-blocks of the lanes of each of a super-block's four `vpdpbusd` (low nibbles
/// of the first load, high, low of the second, high), eight lanes each.
const Q4K_SPREAD: [[i32; 16]; 4] = {
    let mut idx = [[0i32; 16]; 4];
    let mut v = 0;
    while v < 4 {
        let first = 4 * (v / 2) + v % 2;
        let mut l = 0;
        while l < 16 {
            idx[v][l] = (first + 2 * (l / 8)) as i32;
            l += 1;
        }
        v += 1;
    }
    idx
};

/// q6_K: each activation block's scale at the two sub-blocks of 16 it covers.
const Q6K_PAIRS: [i32; 16] = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7];

/// q6_K: the sub-blocks of 16 (four lanes each) of a super-block's four `vpdpbusd`.
const Q6K_SPREAD: [[i32; 16]; 4] = {
    let mut idx = [[0i32; 16]; 4];
    let mut v = 0;
    while v < 4 {
        let mut l = 0;
        while l < 16 {
            idx[v][l] = (4 * v + l / 4) as i32;
            l += 1;
        }
        v += 1;
    }
    idx
};

/// q6_K: per 16-bit word, the shift that brings a half's two high bits to bits 4–5: left by
/// 4 and 2 for the first 64 codes (bits 0–1, 2–3), right by 0 and 2 for the next 64 (4–5,
/// 6–7); one count per half of the vector.
const Q6K_SHIFT_LEFT: [u16; 32] = halves(4, 2);
const Q6K_SHIFT_RIGHT: [u16; 32] = halves(0, 2);

const fn halves(lo: u16, hi: u16) -> [u16; 32] {
    let mut v = [lo; 32];
    let mut i = 16;
    while i < 32 {
        v[i] = hi;
        i += 1;
    }
    v
}

/// A table of 64 bytes (sixteen 32-bit, thirty-two 16-bit or sixty-four 8-bit indices or
/// counts) as a vector.
///
/// # Safety
/// The CPU has AVX-512F.
#[inline(always)]
unsafe fn table<T: Copy, const N: usize>(t: &[T; N]) -> __m512i {
    const { assert!(std::mem::size_of::<[T; N]>() == 64) };
    // SAFETY: `t` is 64 readable bytes (checked above); AVX-512F by the contract.
    unsafe { _mm512_loadu_si512(t.as_ptr() as *const __m512i) }
}

/// The 64 activation codes at `codes + pos` (`pos` a multiple of 64: one aligned line).
///
/// # Safety
/// The line is readable; the CPU has AVX-512F.
#[inline(always)]
unsafe fn line(codes: *const i8, pos: usize) -> __m512i {
    // SAFETY: by the contract; the lines are 64-byte aligned.
    unsafe { _mm512_load_si512(codes.add(pos) as *const __m512i) }
}

/// q8_0: lane `l` of pair `j`'s scale vector takes entry `Q8_0_SPREAD[j][l]` of a group's
/// eight block scales (blocks `2j` and `2j + 1`, eight lanes each).
const Q8_0_SPREAD: [[i32; 16]; 4] = {
    let mut idx = [[0i32; 16]; 4];
    let mut j = 0;
    while j < 4 {
        let mut l = 0;
        while l < 16 {
            idx[j][l] = (2 * j + l / 8) as i32;
            l += 1;
        }
        j += 1;
    }
    idx
};

/// The four little-endian 16-bit fields at `p + stride·k`, `k < 4`, packed into one 64-bit
/// integer, field `k` in bits `16k .. 16k + 16`: blocks' f16 scales, for one conversion (a
/// vector gather of fields that far apart costs more).
///
/// # Safety
/// `p .. p + 3·stride + 2` is readable.
#[inline(always)]
unsafe fn f16_bits4(p: *const u8, stride: usize) -> u64 {
    // SAFETY: each field lies inside the readable bytes, by the contract.
    let bits =
        |k: usize| u64::from(unsafe { std::ptr::read_unaligned(p.add(stride * k) as *const u16) });
    bits(0) | bits(1) << 16 | bits(2) << 32 | bits(3) << 48
}

/// The eight f16 scales of a q8_0 group (at `p + 34k`) as f32, converted at once.
///
/// # Safety
/// `p .. p + 240` is readable; the CPU has AVX2 and F16C.
#[inline(always)]
unsafe fn q8_0_scales(p: *const u8) -> __m256 {
    // SAFETY: the eight scales lie at `p + 34k`, `k < 8`, inside the readable bytes; ISA by
    // the contract.
    unsafe {
        let (lo, hi) = (f16_bits4(p, 34), f16_bits4(p.add(136), 34));
        _mm256_cvtph_ps(_mm_set_epi64x(hi as i64, lo as i64))
    }
}

/// q8_0 (34-byte blocks: an f16 scale, 32 signed codes), eight blocks (272 bytes) per step:
/// their scales converted as one vector; per pair of blocks one 512-bit `vpdpbusd` of the codes
/// made unsigned (`q + 128`, one XOR) against the activation codes as they are, so lanes
/// `8k..8k + 7` hold `Σ (q + 128)·x` of the pair's block `k` (exact: at most `32·255·127` per
/// block); the offset `128·Σ x` is summed apart from the activations' `d·sum`, eight blocks per
/// FMA. The blocks after the steps run the 256-bit body.
struct Q8_0Wide {
    flip: __m512i,
    spread: [__m512i; 4],
}

impl Q8_0Wide {
    /// # Safety
    /// The CPU has AVX-512F.
    #[inline(always)]
    unsafe fn new() -> Self {
        // SAFETY: AVX-512F by the contract.
        unsafe {
            Q8_0Wide {
                flip: _mm512_set1_epi8(-128),
                spread: Q8_0_SPREAD.map(|t| table(&t)),
            }
        }
    }
}

impl WideBody for Q8_0Wide {
    /// Two accumulators (pairs `0, 2` and `1, 3` of a step) and the offsets.
    type Acc = ([__m512; 2], __m256);
    const STEP_BLOCKS: usize = 8;
    const STEP_BYTES: usize = 272;
    const LINES: usize = 5;

    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        // SAFETY: AVX-512F by the contract.
        unsafe { ([_mm512_setzero_ps(); 2], _mm256_setzero_ps()) }
    }

    #[inline(always)]
    unsafe fn step(&self, row: *const u8, x: WideX, g: usize, (acc, offsets): &mut Self::Acc) {
        // SAFETY: bytes `272g .. 272g + 272` of the row, the codes `256g .. 256g + 256` (four
        // aligned lines) and `d`, `d·sum` of blocks `8g .. 8g + 8`; ISA by the contract.
        unsafe {
            let p = row.add(Self::STEP_BYTES * g);
            let dw = q8_0_scales(p);
            let s = _mm512_castps256_ps512(_mm256_mul_ps(dw, _mm256_loadu_ps(x.d.add(8 * g))));
            *offsets = _mm256_fmadd_ps(dw, _mm256_loadu_ps(x.d_sum.add(8 * g)), *offsets);
            for (j, idx) in self.spread.iter().enumerate() {
                let b = p.add(68 * j);
                let w = _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm256_loadu_si256(b.add(2) as *const __m256i)),
                    _mm256_loadu_si256(b.add(36) as *const __m256i),
                );
                let u = _mm512_xor_si512(w, self.flip);
                let dot =
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, line(x.codes, 256 * g + 64 * j));
                let scale = _mm512_permutexvar_ps(*idx, s);
                acc[j % 2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[j % 2]);
            }
        }
    }

    #[inline(always)]
    unsafe fn finish(&self, (acc, offsets): Self::Acc, row: *const u8, x: WideX, nb: usize) -> f32 {
        // SAFETY: the tail is the 256-bit body's, on the blocks after the steps; ISA and
        // readable bytes by the contract.
        unsafe {
            let o = _mm_add_ps(
                _mm256_castps256_ps128(offsets),
                _mm256_extractf128_ps::<1>(offsets),
            );
            let body = _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1])) - 128.0 * hsum4(o);
            let groups = nb / 8;
            let rest = nb - 8 * groups;
            if rest == 0 {
                return body;
            }
            let tail =
                dot_q8_0::<Vnni, 1>(row.add(272 * groups), [x.blocks.skip(8 * groups)], rest);
            body + tail[0]
        }
    }
}

/// The little-endian f16 at `p` in all sixteen f32 lanes: a 16-bit broadcast, then one
/// conversion (exact). A scalar conversion first (`vpinsrw` into a live register) made each
/// super-block's scales wait for the last one's.
///
/// # Safety
/// `p..p + 2` is readable; the CPU has AVX-512F and AVX2.
#[inline(always)]
unsafe fn splat_f16_16(p: *const u8) -> __m512 {
    // SAFETY: two readable bytes by the contract; ISA by the contract.
    unsafe {
        let bits = std::ptr::read_unaligned(p as *const u16);
        _mm512_cvtph_ps(_mm256_set1_epi16(bits as i16))
    }
}

/// [`splat_f16_16`] in eight lanes.
///
/// # Safety
/// `p..p + 2` is readable; the CPU has AVX2 and F16C.
#[inline(always)]
unsafe fn splat_f16_8(p: *const u8) -> __m256 {
    // SAFETY: two readable bytes by the contract; ISA by the contract.
    unsafe {
        let bits = std::ptr::read_unaligned(p as *const u16);
        _mm256_cvtph_ps(_mm_set1_epi16(bits as i16))
    }
}

/// q4_0, four blocks (72 bytes) per step: `vpermt2w` gathers their sixteen nibble bytes each
/// into one vector and `vpermw` their four f16 scales into another (see the module docs); with
/// `VBMI` (AVX512-VBMI) the byte permutes `vpermt2b` and `vpermb` gather the same bytes, one
/// uop each on Intel's port 5 where the word permutes take three and two. Two `vpdpbusd`
/// leave lanes `4k..4k + 3` holding block `k`'s dot product; the offset 8 is summed apart
/// from the activations' `d·sum`, four blocks per FMA. Even steps add into one accumulator,
/// odd ones into another. The blocks after the steps run the 256-bit body.
struct Q4_0Wide<const VBMI: bool> {
    low: __m512i,
    nibbles: __m512i,
    scales: __m512i,
    spread: __m512i,
}

impl<const VBMI: bool> Q4_0Wide<VBMI> {
    /// # Safety
    /// The CPU has AVX-512F, and AVX512-VBMI when `VBMI`.
    #[inline(always)]
    unsafe fn new() -> Self {
        // SAFETY: AVX-512F by the contract.
        unsafe {
            let (nibbles, scales) = if VBMI {
                (table(&Q4_0_NIBBLE_BYTES), table(&Q4_0_SCALE_BYTES))
            } else {
                (table(&Q4_0_NIBBLES), table(&Q4_0_SCALES))
            };
            Q4_0Wide {
                low: _mm512_set1_epi8(0x0F),
                nibbles,
                scales,
                spread: table(&SPREAD_4),
            }
        }
    }
}

impl<const VBMI: bool> WideBody for Q4_0Wide<VBMI> {
    /// Per parity of the step: an accumulator and the offsets.
    type Acc = ([__m512; 2], [__m128; 2]);
    const STEP_BLOCKS: usize = 4;
    const STEP_BYTES: usize = 72;
    const LINES: usize = 1;

    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        // SAFETY: AVX-512F by the contract.
        unsafe { ([_mm512_setzero_ps(); 2], [_mm_setzero_ps(); 2]) }
    }

    #[inline(always)]
    unsafe fn step(&self, row: *const u8, x: WideX, g: usize, (acc, offsets): &mut Self::Acc) {
        // SAFETY: bytes `72g .. 72g + 72` of the row (the second load ends there), the codes
        // `128g .. 128g + 128` and `d`, `d·sum` of blocks `4g .. 4g + 4`; ISA by the contract
        // (the byte permutes only when `VBMI`, whose `new` required AVX512-VBMI).
        unsafe {
            let p = row.add(Self::STEP_BYTES * g);
            let first = _mm512_loadu_si512(p as *const __m512i);
            let second = _mm512_loadu_si512(p.add(8) as *const __m512i);
            let (nib, scales) = if VBMI {
                (
                    _mm512_permutex2var_epi8(first, self.nibbles, second),
                    _mm512_permutexvar_epi8(self.scales, first),
                )
            } else {
                (
                    _mm512_permutex2var_epi16(first, self.nibbles, second),
                    _mm512_permutexvar_epi16(self.scales, first),
                )
            };
            let scales = _mm512_castsi512_si128(scales);
            let dw = _mm_cvtph_ps(scales);
            let lo = _mm512_and_si512(nib, self.low);
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(nib), self.low);
            let v = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, line(x.codes, 128 * g));
            let v = _mm512_dpbusd_epi32(v, hi, line(x.codes, 128 * g + 64));
            let s = _mm_mul_ps(dw, _mm_loadu_ps(x.d.add(4 * g)));
            let s = _mm512_permutexvar_ps(self.spread, _mm512_castps128_ps512(s));
            // The accumulators of this step's parity are in slot 0: the two swap places
            // each step instead of being indexed by `g % 2`, which kept them in memory.
            let [this, other] = *offsets;
            *offsets = [
                other,
                _mm_fmadd_ps(dw, _mm_loadu_ps(x.d_sum.add(4 * g)), this),
            ];
            let [this, other] = *acc;
            *acc = [other, _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), s, this)];
        }
    }

    #[inline(always)]
    unsafe fn finish(&self, (acc, offsets): Self::Acc, row: *const u8, x: WideX, nb: usize) -> f32 {
        // SAFETY: the tail is the 256-bit body's, on the blocks after the steps; ISA and
        // readable bytes by the contract.
        unsafe {
            let o = _mm_add_ps(offsets[0], offsets[1]);
            let body = _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1])) - 8.0 * hsum4(o);
            let groups = nb / 4;
            let rest = nb - 4 * groups;
            if rest == 0 {
                return body;
            }
            let tail = dot_q4_0::<Vnni, 1>(row.add(72 * groups), [x.blocks.skip(4 * groups)], rest);
            body + tail[0]
        }
    }
}

/// q4_0 on AVX2, one group of four blocks (72 bytes) per step, two blocks per 256-bit half:
/// on the same activation layout as the 512-bit body (a 32-byte load of it holds two blocks'
/// first or second halves), `vpmaddubsw` on the low and on the high nibbles added in i16 (at
/// most `2·2·15·127`, no saturation), one `vpmaddwd`, one conversion and one FMA per two
/// blocks; the four f16 scales are packed in the integer registers and converted at once.
/// Blocks 0–1 go to the first accumulator, 2–3 to the second; `dw·d·sum` to the offsets.
/// The blocks after the steps run the 256-bit body.
struct Q4_0Avx2;

impl WideBody for Q4_0Avx2 {
    /// The accumulators of blocks 0–1 and 2–3 of every step, and the offsets.
    type Acc = ([__m256; 2], __m128);
    const STEP_BLOCKS: usize = 4;
    const STEP_BYTES: usize = 72;
    const LINES: usize = 1;

    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        // SAFETY: AVX by the contract.
        unsafe { ([_mm256_setzero_ps(); 2], _mm_setzero_ps()) }
    }

    #[inline(always)]
    unsafe fn step(&self, row: *const u8, x: WideX, g: usize, (acc, offsets): &mut Self::Acc) {
        // SAFETY: bytes `72g .. 72g + 72` of the row, the codes `128g .. 128g + 128` (32-byte
        // aligned loads inside the 64-byte lines) and `d`, `d·sum` of blocks `4g .. 4g + 4`;
        // AVX2, FMA and F16C by the contract.
        unsafe {
            let p = row.add(Self::STEP_BYTES * g);
            let dw = _mm_cvtph_ps(_mm_cvtsi64_si128(f16_bits4(p, 18) as i64));
            let s = _mm256_castps128_ps256(_mm_mul_ps(dw, _mm_loadu_ps(x.d.add(4 * g))));
            *offsets = _mm_fmadd_ps(dw, _mm_loadu_ps(x.d_sum.add(4 * g)), *offsets);
            let low = _mm256_set1_epi8(0x0F);
            for (pair, acc) in acc.iter_mut().enumerate() {
                let b = p.add(36 * pair);
                let raw = _mm256_inserti128_si256::<1>(
                    _mm256_castsi128_si256(_mm_loadu_si128(b.add(2) as *const __m128i)),
                    _mm_loadu_si128(b.add(20) as *const __m128i),
                );
                let lo = _mm256_and_si256(raw, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low);
                let codes = x.codes.add(128 * g + 32 * pair);
                let x_lo = _mm256_load_si256(codes as *const __m256i);
                let x_hi = _mm256_load_si256(codes.add(64) as *const __m256i);
                let pairs = _mm256_add_epi16(
                    _mm256_maddubs_epi16(lo, x_lo),
                    _mm256_maddubs_epi16(hi, x_hi),
                );
                let v = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
                let first = 2 * pair as i32;
                let spread = _mm256_setr_epi32(
                    first,
                    first,
                    first,
                    first,
                    first + 1,
                    first + 1,
                    first + 1,
                    first + 1,
                );
                let scale = _mm256_permutevar8x32_ps(s, spread);
                *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), scale, *acc);
            }
        }
    }

    #[inline(always)]
    unsafe fn finish(&self, (acc, offsets): Self::Acc, row: *const u8, x: WideX, nb: usize) -> f32 {
        // SAFETY: the tail is the 256-bit body's, on the blocks after the steps; ISA and
        // readable bytes by the contract.
        unsafe {
            let body = hsum(_mm256_add_ps(acc[0], acc[1])) - 8.0 * hsum4(offsets);
            let groups = nb / 4;
            let rest = nb - 4 * groups;
            if rest == 0 {
                return body;
            }
            let tail = [x.blocks.skip(4 * groups)];
            body + dot_q4_0::<Maddubs, 1>(row.add(72 * groups), tail, rest)[0]
        }
    }
}

/// The sum of four lanes: (0 + 2) + (1 + 3).
///
/// # Safety
/// The CPU has SSE.
#[inline(always)]
unsafe fn hsum4(v: __m128) -> f32 {
    // SAFETY: SSE by the contract.
    unsafe {
        let h = _mm_add_ps(v, _mm_movehl_ps(v, v));
        _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps::<0b01>(h, h)))
    }
}

/// q4_K, one super-block (144 bytes, eight blocks of activations) per step: per sub-block `s`,
/// `(d·sc_s·d_x)·Σ q·x_q − (dmin·m_s)·(d_x·sum)`, the mins summed apart (see the module docs).
struct Q4KWide {
    low: __m512i,
    high: __m512i,
    spread: [__m512i; 4],
}

impl Q4KWide {
    /// # Safety
    /// The CPU has AVX-512F.
    #[inline(always)]
    unsafe fn new() -> Self {
        // SAFETY: AVX-512F by the contract.
        unsafe {
            Q4KWide {
                low: _mm512_set1_epi8(0x0F),
                high: _mm512_set1_epi8(0xF0_u8 as i8),
                spread: Q4K_SPREAD.map(|t| table(&t)),
            }
        }
    }
}

impl WideBody for Q4KWide {
    /// One accumulator per `vpdpbusd` of a step (the high nibbles', odd, at 16 times their
    /// value), and the mins.
    type Acc = ([__m512; 4], __m256);
    const STEP_BLOCKS: usize = 8;
    const STEP_BYTES: usize = 144;
    const LINES: usize = 2;

    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        // SAFETY: AVX-512F by the contract.
        unsafe { ([_mm512_setzero_ps(); 4], _mm256_setzero_ps()) }
    }

    #[inline(always)]
    unsafe fn step(&self, row: *const u8, x: WideX, sb: usize, (acc, mins): &mut Self::Acc) {
        // SAFETY: bytes `144sb .. 144sb + 144` of the row, the codes `256sb .. 256sb + 256`
        // and the `d`, `d·sum` of its eight blocks; ISA by the contract.
        unsafe {
            let block = row.add(Self::STEP_BYTES * sb);
            let (sc, m) = q4k_scales_mins(&*(block.add(4) as *const [u8; 12]));
            // d·sc and dmin·m are exact (11 + 6 significant bits); one rounding each after.
            let d_sc = _mm256_mul_ps(splat_f16_8(block), bytes_to_f32(sc));
            let dmin_m = _mm256_mul_ps(splat_f16_8(block.add(2)), bytes_to_f32(m));
            let s = _mm512_castps256_ps512(_mm256_mul_ps(d_sc, _mm256_loadu_ps(x.d.add(8 * sb))));
            *mins = _mm256_fmadd_ps(dmin_m, _mm256_loadu_ps(x.d_sum.add(8 * sb)), *mins);
            for half in 0..2 {
                let q = _mm512_loadu_si512(block.add(16 + 64 * half) as *const __m512i);
                let lo = _mm512_and_si512(q, self.low);
                // 16 times the high nibbles: a lane's four products stay below 2¹⁷
                // (4 · 240 · 127), so its conversion is exact.
                let hi = _mm512_and_si512(q, self.high);
                let pos = 256 * sb + 128 * half;
                let v_lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, line(x.codes, pos));
                let v_hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, line(x.codes, pos + 64));
                for (v, val) in [(2 * half, v_lo), (2 * half + 1, v_hi)] {
                    let scale = _mm512_permutexvar_ps(self.spread[v], s);
                    acc[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(val), scale, acc[v]);
                }
            }
        }
    }

    #[inline(always)]
    unsafe fn finish(&self, (acc, mins): Self::Acc, _: *const u8, _: WideX, _: usize) -> f32 {
        // SAFETY: AVX-512F by the contract; a row is whole super-blocks, no tail.
        unsafe {
            // Exact: a power of two (every term of the high accumulators was 16 times its
            // value, so each of their roundings was too, unless a sum came within 16 of f32's
            // overflow, about 2¹²⁴ in activations no model has).
            let sixteenth = _mm512_set1_ps(1.0 / 16.0);
            let (acc1, acc3) = (
                _mm512_mul_ps(acc[1], sixteenth),
                _mm512_mul_ps(acc[3], sixteenth),
            );
            let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc1), _mm512_add_ps(acc[2], acc3));
            _mm512_reduce_add_ps(sum) - _mm512_reduce_add_ps(_mm512_castps256_ps512(mins))
        }
    }
}

/// q6_K, one super-block (210 bytes; ql at 0, qh at 128, scales at 192, d at 208) per step:
/// per sub-block `t` of 16, `fl(d·sc_t·d_x)·(Σ q·x_q − 32·Σ x_q)` (see the module docs).
struct Q6KWide {
    low: __m512i,
    high: __m512i,
    left: __m512i,
    right: __m512i,
    pairs: __m512i,
    spread: [__m512i; 4],
}

impl Q6KWide {
    /// # Safety
    /// The CPU has AVX-512F.
    #[inline(always)]
    unsafe fn new() -> Self {
        // SAFETY: AVX-512F by the contract.
        unsafe {
            Q6KWide {
                low: _mm512_set1_epi8(0x0F),
                high: _mm512_set1_epi8(0x30),
                left: table(&Q6K_SHIFT_LEFT),
                right: table(&Q6K_SHIFT_RIGHT),
                pairs: table(&Q6K_PAIRS),
                spread: Q6K_SPREAD.map(|t| table(&t)),
            }
        }
    }
}

impl WideBody for Q6KWide {
    /// One accumulator per `vpdpbusd` of a step, and the offsets.
    type Acc = ([__m512; 4], __m512);
    const STEP_BLOCKS: usize = 8;
    const STEP_BYTES: usize = 210;
    const LINES: usize = 4;

    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        // SAFETY: AVX-512F by the contract.
        unsafe { ([_mm512_setzero_ps(); 4], _mm512_setzero_ps()) }
    }

    #[inline(always)]
    unsafe fn step(&self, row: *const u8, x: WideX, sb: usize, (acc, offsets): &mut Self::Acc) {
        // SAFETY: bytes `210sb .. 210sb + 210` of the row, the codes and the sixteen sums of
        // its 256 activations and the `d` of its eight blocks; ISA by the contract.
        unsafe {
            let block = row.add(Self::STEP_BYTES * sb);
            let d = splat_f16_16(block.add(208));
            let sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                block.add(192) as *const __m128i
            )));
            let d_x = _mm512_castps256_ps512(_mm256_loadu_ps(x.d.add(8 * sb)));
            // d·sc is exact (11 + 8 significant bits); one rounding by d_x.
            let s = _mm512_mul_ps(_mm512_mul_ps(d, sc), _mm512_permutexvar_ps(self.pairs, d_x));
            *offsets = _mm512_fmadd_ps(s, _mm512_loadu_ps(x.sums16.add(16 * sb)), *offsets);
            for h in 0..2 {
                let ql = _mm512_loadu_si512(block.add(64 * h) as *const __m512i);
                let qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(
                    block.add(128 + 32 * h) as *const __m256i
                ));
                // A | (B & C): the low four bits, then bits 4–5 from the high bits.
                let codes = [
                    _mm512_ternarylogic_epi32::<0xF8>(
                        _mm512_and_si512(ql, self.low),
                        _mm512_sllv_epi16(qh, self.left),
                        self.high,
                    ),
                    _mm512_ternarylogic_epi32::<0xF8>(
                        _mm512_and_si512(_mm512_srli_epi16::<4>(ql), self.low),
                        _mm512_srlv_epi16(qh, self.right),
                        self.high,
                    ),
                ];
                for (j, c) in codes.into_iter().enumerate() {
                    let v = 2 * h + j;
                    let pos = 256 * sb + 64 * v;
                    let dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c, line(x.codes, pos));
                    let scale = _mm512_permutexvar_ps(self.spread[v], s);
                    acc[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[v]);
                }
            }
        }
    }

    #[inline(always)]
    unsafe fn finish(&self, (acc, offsets): Self::Acc, _: *const u8, _: WideX, _: usize) -> f32 {
        // SAFETY: AVX-512F by the contract; a row is whole super-blocks, no tail.
        unsafe {
            let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
            _mm512_reduce_add_ps(sum) - 32.0 * _mm512_reduce_add_ps(offsets)
        }
    }
}

/// `y[r]` = weight row `r` of `w` (q8_0, q4_0, q4_K or q6_K; q4_0 only when not `WIDE`)
/// dotted with `acts`, for every `r < y.len()`: the 512-bit bodies when `WIDE` (q4_0's with
/// byte permutes when `VBMI`), else AVX2's, walked as this CPU's [`WideAccess`] says for rows
/// of this length split over `threads`.
///
/// # Safety
/// `w` holds `y.len()` rows of `acts.x().len()` weights of `format` (whole blocks); `acts`
/// has its blocks and its wide codes for `format` (and q6_K's sums); the CPU has
/// AVX2, FMA, F16C and, when `WIDE`, AVX512-VNNI, AVX512BW, AVX512VL and AVX-512F, and
/// AVX512-VBMI when `WIDE` and `VBMI`.
#[inline(always)]
pub(super) unsafe fn rows<const WIDE: bool, const VBMI: bool>(
    format: WeightFormat,
    w: &[u8],
    acts: Activations<'_>,
    y: &mut [f32],
    threads: usize,
) {
    let n_in = acts.x().len();
    let nb = n_in / QX;
    let row_bytes = n_in / format.block_size() * format.block_bytes();
    let x = WideX::of(&acts, WideAccess::this_cpu(n_in, threads).of(format));
    let w = w.as_ptr();
    // SAFETY: the rows lie in `w` and the activations are as the bodies need, by the
    // contract; the 512-bit bodies run only when `WIDE`.
    unsafe {
        match format {
            WeightFormat::Q4_0 if !WIDE => walk(&Q4_0Avx2, w, row_bytes, x, nb, y),
            _ if !WIDE => y.fill(f32::NAN),
            WeightFormat::Q8_0 => walk(&Q8_0Wide::new(), w, row_bytes, x, nb, y),
            WeightFormat::Q4_0 => walk(&Q4_0Wide::<VBMI>::new(), w, row_bytes, x, nb, y),
            WeightFormat::Q4K => walk(&Q4KWide::new(), w, row_bytes, x, nb, y),
            WeightFormat::Q6K => walk(&Q6KWide::new(), w, row_bytes, x, nb, y),
            _ => y.fill(f32::NAN),
        }
    }
}

#[cfg(test)]
mod tests;
