//! The x86 bodies' own layouts of a call's activation codes, each prepared once per call
//! when the kernel asks for it (the shared per-block quantization is `quant/activations.rs`):
//! - for the wide GEMV bodies (`quant/x86_wide.rs`): the codes of each row in the order the
//!   bodies load them, in 64-byte aligned [`Line`]s, and q6_K's sums per 16 codes
//!   ([`WideLayout`]; `Kernel::gemv_layout`);
//! - for the GEMM tiles (`quant/x86_tile.rs`): every row's blocks, `d·sum` and `sum_lo` one
//!   chunk of [`KC`] blocks at a time, chunk by chunk ([`TileLayout`]; `Kernel::gemm_layout`),
//!   and where a tile finds a row's chunks in it or in the row's own blocks ([`XRowAt`]);
//! - for the sixteen-lane f16 and bf16 GEMM tiles (`quant/x86_float.rs`): the values in f32,
//!   each row on 64-byte lines of its own, bf16's with each step of 32 as its even values then
//!   its odd ones ([`FloatRows`], [`even_odd_order`]; `Kernel::gemm_layout`), the order in
//!   which the bf16 GEMV takes them as it goes ([`even_odd_step`]).

use super::blocks::{BlockQ8x, QX};
use super::format::WeightFormat;
use crate::kernel::{VecSlot, fill_slots, slots_as_f32};
use std::arch::x86_64::*;
use std::ops::Range;

/// One step of 32 values, `x0` the first sixteen and `x1` the second, as its 16 even values
/// and its 16 odd ones: the order in which the sixteen-lane bf16 bodies widen a step of
/// weights (one 64-byte load, the even weights by a shift, the odd ones by a mask;
/// `Widen::PAIRED` in `quant/x86_float.rs`, revision 39). The GEMV takes its values so as it
/// goes, the GEMM from [`even_odd_order`].
///
/// # Safety
/// The CPU has AVX-512F.
#[inline(always)]
pub(super) unsafe fn even_odd_step(x0: __m512, x1: __m512) -> (__m512, __m512) {
    // SAFETY: AVX-512F by the contract.
    unsafe {
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        (
            _mm512_permutex2var_ps(x0, even, x1),
            _mm512_permutex2var_ps(x0, odd, x1),
        )
    }
}

/// `x` (rows of `n_in` values) with each whole step of 32 values of every row in
/// [`even_odd_step`]'s order, the rest of the row (under 32) as it is: the GEMM's layout of
/// its activation rows for the sixteen-lane bf16 tiles, made once per call.
pub(crate) fn even_odd_order(x: &[f32], n_in: usize) -> Vec<f32> {
    let mut out = x.to_vec();
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F, just detected.
        unsafe { even_odd_avx512(&mut out, n_in) };
    } else {
        each_step(&mut out, n_in, even_odd_scalar);
    }
    out
}

/// `f` on each whole step of 32 values of every row of `x` (rows of `n_in` values).
#[inline(always)]
fn each_step(x: &mut [f32], n_in: usize, mut f: impl FnMut(&mut [f32; 32])) {
    for row in x.chunks_mut(n_in.max(1)) {
        let whole = row.len() / 32 * 32;
        for step in row[..whole].chunks_exact_mut(32) {
            f(step.try_into().expect("32 values"));
        }
    }
}

/// One step in [`even_odd_step`]'s order, in place, on any CPU.
fn even_odd_scalar(step: &mut [f32; 32]) {
    let x = *step;
    for j in 0..16 {
        step[j] = x[2 * j];
        step[16 + j] = x[2 * j + 1];
    }
}

/// [`even_odd_order`]'s steps in place, by [`even_odd_step`].
///
/// # Safety
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn even_odd_avx512(x: &mut [f32], n_in: usize) {
    each_step(x, n_in, |step| {
        let p = step.as_mut_ptr();
        // SAFETY: two 64-byte loads and stores inside the step's 32 values; AVX-512F by the
        // function's contract.
        unsafe {
            let (even, odd) = even_odd_step(_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
            _mm512_storeu_ps(p, even);
            _mm512_storeu_ps(p.add(16), odd);
        }
    });
}

/// Every activation row of a float call as the sixteen-lane float GEMM tiles read it
/// (`quant/x86_float.rs`), made once per call: each row from the start of a 64-byte line of
/// its own, so that no load of sixteen values splits across two lines, and for a paired
/// format (bf16) each whole step in [`even_odd_step`]'s order. A GEMM reads each value of `x`
/// once per weight row of its tiles, and on rows that start 16 bytes into a line, as a large
/// allocation's do, every such load touched two lines: on an Ice Lake-SP VM, m = 32 from DRAM
/// at one thread, f16 ran 48–61 GFLOP/s so and 63–85 from these rows, bf16 51–65 and 74–98
/// (revision 41).
#[derive(Debug, Default)]
pub(crate) struct FloatRows {
    /// The rows, each on whole lines of sixteen values (`kernel::VecSlot`).
    lines: Vec<VecSlot>,
    /// Values per row.
    n: usize,
    /// Lines per row.
    per_row: usize,
}

impl FloatRows {
    /// The rows of `x` (rows of `n_in` values), in even-odd order when `paired`.
    pub(crate) fn of(x: &[f32], n_in: usize, paired: bool) -> FloatRows {
        let per_row = n_in.div_ceil(16);
        let rows = x.len().checked_div(n_in).unwrap_or(0);
        if rows == 0 {
            return FloatRows::default();
        }
        let ordered;
        let x = if paired {
            ordered = even_odd_order(x, n_in);
            &ordered[..]
        } else {
            x
        };
        let mut lines = vec![VecSlot::default(); rows * per_row];
        for (row, lines) in x.chunks_exact(n_in).zip(lines.chunks_exact_mut(per_row)) {
            fill_slots(lines, row);
        }
        FloatRows {
            lines,
            n: n_in,
            per_row,
        }
    }

    /// Row `r`'s `n_in` values, or nothing when there is no row `r`.
    pub(crate) fn row(&self, r: usize) -> &[f32] {
        match self.lines.get(r * self.per_row..(r + 1) * self.per_row) {
            Some(lines) => slots_as_f32(lines, self.n),
            None => &[],
        }
    }
}

/// 64 activation codes, aligned so that a 512-bit load of them never splits a cache line.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(64))]
pub(crate) struct Line(pub(crate) [i8; 64]);

impl Default for Line {
    fn default() -> Line {
        Line([0; 64])
    }
}

/// A row's activation codes in the order one format's 512-bit GEMV body reads them (see
/// [`wide_order`]), in whole [`Line`]s (the last padded with zeros), and for q6_K `Σ` of every
/// sixteen consecutive codes as f32 (exact: at most `16·127`), one per sub-block of the
/// weights, whose offset 32 the body takes off per super-block in one FMA; both empty when
/// the call did not ask for them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WideCodes<'a> {
    pub(crate) lines: &'a [Line],
    pub(crate) sums16: &'a [f32],
}

/// The blocks of a q4_K super-block in the order its 512-bit GEMV body reads their codes.
const Q4K_BLOCK_ORDER: [usize; 8] = [0, 2, 1, 3, 4, 6, 5, 7];

/// The order of the codes for `format`'s 512-bit GEMV body, as the block `b` and code `j`
/// (within the block) at each position of a row of `nb` blocks:
/// - q4_0, per group of four blocks: the first 16 codes of each block, then the last 16 of
///   each (a 64-byte load of four blocks' nibbles holds the first halves in its low nibbles
///   and the second halves in its high ones); a last partial group as it is;
/// - q4_K, per super-block of eight blocks: blocks 0, 2, 1, 3, 4, 6, 5, 7 (a 64-byte load of
///   nibbles holds sub-blocks `2c` and `2c + 2` in its low nibbles, `2c + 1` and `2c + 3` in
///   its high ones);
/// - every other format: as they are.
#[cfg(test)]
pub(crate) fn wide_order(format: WeightFormat, nb: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..nb * QX).map(move |pos| {
        let (b, j) = (pos / QX, pos % QX);
        match format {
            WeightFormat::Q4_0 if b < nb / 4 * 4 => {
                let (group, within) = (pos / (4 * QX), pos % (4 * QX));
                let (half, k, i) = (within / 64, within % 64 / 16, within % 16);
                (4 * group + k, 16 * half + i)
            }
            WeightFormat::Q4K => (b / 8 * 8 + Q4K_BLOCK_ORDER[b % 8], j),
            _ => (b, j),
        }
    })
}

/// The owned layout of a call's rows: their [`Line`]s and q6_K's sums per 16 codes.
#[derive(Debug, Default)]
pub(crate) struct WideLayout {
    lines: Vec<Line>,
    sums16: Vec<f32>,
}

impl WideLayout {
    /// The layout of `blocks` (whole rows of `nb`) for `format`.
    pub(crate) fn of(format: WeightFormat, blocks: &[BlockQ8x], nb: usize) -> WideLayout {
        let (lines, sums16) = wide_codes(format, blocks, nb);
        WideLayout { lines, sums16 }
    }

    /// Row `row`'s codes (rows of `n` blocks); empty when the call asked for none.
    pub(crate) fn row(&self, row: usize, n: usize) -> WideCodes<'_> {
        if self.lines.is_empty() {
            return WideCodes::default();
        }
        let per_row = (n * QX).div_ceil(64);
        let sums16 = if self.sums16.is_empty() {
            &[][..]
        } else {
            &self.sums16[row * n * QX / 16..(row + 1) * n * QX / 16]
        };
        WideCodes {
            lines: &self.lines[row * per_row..(row + 1) * per_row],
            sums16,
        }
    }
}

/// [`wide_order`] of `blocks` (whole rows of `nb`) for `format`, copied 16 or 32 codes at a
/// time (every such run lies in one [`Line`]), and q6_K's sums.
fn wide_codes(format: WeightFormat, blocks: &[BlockQ8x], nb: usize) -> (Vec<Line>, Vec<f32>) {
    let rows = blocks.len().checked_div(nb).unwrap_or(0);
    let per_row = (nb * QX).div_ceil(64);
    let mut lines = vec![Line::default(); rows * per_row];
    for (row, out) in blocks
        .chunks_exact(nb.max(1))
        .zip(lines.chunks_exact_mut(per_row.max(1)))
    {
        let mut put = |pos: usize, codes: &[i8]| {
            out[pos / 64].0[pos % 64..pos % 64 + codes.len()].copy_from_slice(codes);
        };
        let grouped = match format {
            WeightFormat::Q4_0 => nb / 4,
            _ => 0,
        };
        for g in 0..grouped {
            for k in 0..4 {
                let qs = &row[4 * g + k].qs;
                put(128 * g + 16 * k, &qs[..16]);
                put(128 * g + 64 + 16 * k, &qs[16..]);
            }
        }
        for b in 4 * grouped..nb {
            let at = match format {
                WeightFormat::Q4K => b / 8 * 8 + Q4K_BLOCK_ORDER[b % 8],
                _ => b,
            };
            put(QX * b, &row[at].qs);
        }
    }
    let sums16 = if format == WeightFormat::Q6K {
        blocks
            .iter()
            .flat_map(|b| b.qs.chunks_exact(16))
            .map(|sixteen| sixteen.iter().map(|&q| i32::from(q)).sum::<i32>() as f32)
            .collect()
    } else {
        Vec::new()
    };
    (lines, sums16)
}

/// Blocks of 32 per chunk of the GEMM tiles (`quant/x86_tile.rs` packs its weights a chunk
/// at a time): one super-block of the k-quants.
pub(crate) const KC: usize = 8;

/// The chunk of weights a tile of `tile_rows` rows packs after blocks `b0..b0 + KC` of its
/// rows `g0..`, in rows of `nb` blocks of 32 (`row_bytes` each): the same rows' next chunk,
/// or after a row's last chunk the first chunk of the `tile_rows` rows that follow. Returns
/// that chunk's first row and its bytes within each of its rows. `b0` is a multiple of
/// [`KC`], so the bytes are exact for the k-quants too (a super-block is KC blocks).
pub(super) fn next_weight_chunk(
    nb: usize,
    row_bytes: usize,
    tile_rows: usize,
    g0: usize,
    b0: usize,
) -> (usize, Range<usize>) {
    let offset = |b: usize| b * row_bytes / nb.max(1);
    let (first_row, b) = if b0 + KC < nb {
        (g0, b0 + KC)
    } else {
        (g0 + tile_rows, 0)
    };
    (first_row, offset(b)..offset((b + KC).min(nb)))
}

/// The GEMM tiles' layout of a call's rows: chunk by chunk, every row's [`KC`] blocks of the
/// chunk (row `i`'s blocks `KC·c..KC·(c + 1)` at `(c·rows + i)·KC`; a last chunk that is not
/// whole padded with zero blocks, which no tile reads), and apart from them their `d·sum`
/// and `sum_lo` in the same order. A tile meets each chunk of its packed weights with many
/// activation rows in turn. Laid out by rows, those rows' blocks lie a row apart (18 KiB at
/// 14336 inputs), a page or more each, for every chunk; here they are one run of memory, and
/// the `d·sum` and `sum_lo` that only q4_K and q6_K read lie in runs of their own.
#[derive(Debug, Default)]
pub(crate) struct TileLayout {
    q: Vec<BlockQ8x>,
    d_sum: Vec<f32>,
    sum_lo: Vec<i32>,
    rows: usize,
}

impl TileLayout {
    /// The layout of `blocks` (whole rows of `nb`), with each block's `d_sum` and `sum_lo`
    /// (as many as `blocks`).
    pub(crate) fn of(blocks: &[BlockQ8x], d_sum: &[f32], sum_lo: &[i32], nb: usize) -> TileLayout {
        let rows = blocks.len().checked_div(nb).unwrap_or(0);
        let n = nb.div_ceil(KC) * rows * KC;
        let mut out = TileLayout {
            q: vec![BlockQ8x::default(); n],
            d_sum: vec![0.0; n],
            sum_lo: vec![0; n],
            rows,
        };
        for (b, ((q, &d_sum), &sum_lo)) in blocks.iter().zip(d_sum).zip(sum_lo).enumerate() {
            let (row, k) = (b / nb, b % nb);
            let at = (k / KC * rows + row) * KC + k % KC;
            out.q[at] = *q;
            out.d_sum[at] = d_sum;
            out.sum_lo[at] = sum_lo;
        }
        out
    }

    /// Row `row`'s chunks; empty when the call asked for none.
    pub(crate) fn row(&self, row: usize) -> TileCodes<'_> {
        if self.q.is_empty() {
            return TileCodes::default();
        }
        let from = (row * KC).min(self.q.len());
        TileCodes {
            q: &self.q[from..],
            d_sum: &self.d_sum[from..],
            sum_lo: &self.sum_lo[from..],
            chunk_stride: self.rows * KC,
        }
    }
}

/// One activation row in a call's [`TileLayout`]: everything from the row's first chunk on,
/// its chunk `c` at `c·chunk_stride`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TileCodes<'a> {
    pub(crate) q: &'a [BlockQ8x],
    pub(crate) d_sum: &'a [f32],
    pub(crate) sum_lo: &'a [i32],
    /// Blocks from one chunk of the row to its next (`rows · KC`).
    pub(crate) chunk_stride: usize,
}

impl TileCodes<'_> {
    /// Whether the call prepared the layout.
    pub(crate) fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}

/// Where one activation row's blocks of the current chunk lie.
#[derive(Clone, Copy)]
pub(super) struct XChunk {
    pub(super) q: *const BlockQ8x,
    pub(super) d_sum: *const f32,
    pub(super) sum_lo: *const i32,
}

/// Where an activation row's chunks lie: chunk `c` (blocks `KC·c..`) `c·stride` blocks on
/// from `q` (and from `d_sum` and `sum_lo`). From the call's tile layout when it prepared
/// one (`Kernel::gemm_layout`, `x86_layout::TileLayout`), else the row's own blocks
/// (`stride = KC`).
#[derive(Clone, Copy)]
pub(super) struct XRowAt {
    q: *const BlockQ8x,
    d_sum: *const f32,
    sum_lo: *const i32,
    stride: usize,
}

impl XRowAt {
    /// Nothing: a place no run reads.
    pub(super) const NONE: XRowAt = XRowAt {
        q: std::ptr::null(),
        d_sum: std::ptr::null(),
        sum_lo: std::ptr::null(),
        stride: 0,
    };

    /// Where a row's `nb` blocks lie: in the call's tile layout `tiles` when it holds one,
    /// else in the row's own blocks, `d·sum` and `sum_lo` (`own`).
    ///
    /// # Panics
    /// When the row does not hold them there.
    pub(super) fn of(
        tiles: TileCodes<'_>,
        own: (&[BlockQ8x], &[f32], &[i32]),
        nb: usize,
    ) -> XRowAt {
        let (q, d_sum, sum_lo, stride) = if tiles.is_empty() {
            (own.0, own.1, own.2, KC)
        } else {
            (tiles.q, tiles.d_sum, tiles.sum_lo, tiles.chunk_stride)
        };
        if let Some(last) = nb.checked_sub(1) {
            // The last block a run reads; every other lies before it.
            let at = last / KC * stride + last % KC;
            assert!(
                stride >= KC && at < q.len() && at < d_sum.len() && at < sum_lo.len(),
                "tile: an activation row without its {nb} blocks"
            );
        }
        XRowAt {
            q: q.as_ptr(),
            d_sum: d_sum.as_ptr(),
            sum_lo: sum_lo.as_ptr(),
            stride,
        }
    }

    /// The row's blocks from `b0`.
    ///
    /// # Safety
    /// `self` is [`XRowAt::of`] a row of more than `b0` blocks; `b0` is a multiple of [`KC`].
    pub(super) unsafe fn chunk(self, b0: usize) -> XChunk {
        let at = b0 / KC * self.stride;
        // SAFETY: blocks `at..at + kc` of the chunk lie in the row's slices, by `of`'s check
        // of the last one and `b0 < nb`.
        unsafe {
            XChunk {
                q: self.q.add(at),
                d_sum: self.d_sum.add(at),
                sum_lo: self.sum_lo.add(at),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Isa;
    use crate::quant::activations::tests::values;
    use crate::quant::activations::{CodeLayout, quantize_for_call};
    use crate::quant::{WeightMatrix, WeightShape};

    #[test]
    fn the_next_weight_chunk_is_the_one_the_tile_packs_next() {
        for format in [
            WeightFormat::Q8_0,
            WeightFormat::Q4_0,
            WeightFormat::Q4K,
            WeightFormat::Q6K,
        ] {
            let per_block = format.block_size() / QX;
            for nb in [1usize, 7, 8, 9, 16, 17, 24, 128, 130, 448] {
                if !nb.is_multiple_of(per_block) {
                    continue;
                }
                let row_bytes = format.row_bytes(nb * QX).unwrap();
                // A chunk's bytes in a row, as `TileFormat::unpack_block` and `row_scales`
                // read them.
                let bytes = |b: usize| {
                    let end = (b + KC).min(nb);
                    b / per_block * format.block_bytes()..end / per_block * format.block_bytes()
                };
                // The chunks in the order three tiles of 16 rows pack them.
                let order: Vec<(usize, usize)> = (0..3)
                    .flat_map(|g| (0..nb).step_by(KC).map(move |b| (16 * g, b)))
                    .collect();
                for pair in order.windows(2) {
                    let ((g0, b0), (g1, b1)) = (pair[0], pair[1]);
                    assert_eq!(
                        next_weight_chunk(nb, row_bytes, 16, g0, b0),
                        (g1, bytes(b1)),
                        "{format}, {nb} blocks, after rows {g0} blocks {b0}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_wide_order_is_a_permutation_of_the_row() {
        for format in [
            WeightFormat::Q8_0,
            WeightFormat::Q4_0,
            WeightFormat::Q4K,
            WeightFormat::Q6K,
        ] {
            for nb in [0, 1, 3, 4, 5, 8, 9, 16, 19] {
                let mut seen = vec![false; nb * QX];
                for (b, j) in wide_order(format, nb) {
                    assert!(b < nb && j < QX, "{format} {nb}: ({b}, {j})");
                    assert!(
                        !std::mem::replace(&mut seen[b * QX + j], true),
                        "{format} {nb}"
                    );
                }
                assert!(seen.iter().all(|&s| s), "{format} {nb}");
            }
        }
    }

    #[test]
    fn wide_codes_follow_the_bodies_loads() {
        // Two rows of 9 blocks: two whole q4_0 groups and one block left as it is.
        let nb = 9;
        let x = values(7, 2 * nb * QX, 3.0);
        let all = quantize_for_call(WeightFormat::Q4_0, CodeLayout::WideGemv, &x, nb * QX);
        let row = all.activations(&x[nb * QX..], 1);
        let codes: Vec<i8> = row.wide().lines.iter().flat_map(|l| l.0).collect();
        assert_eq!(codes.len(), (nb * QX).div_ceil(64) * 64);
        let q = row.q();
        // Group 1: its four blocks' first halves, then their second halves.
        assert_eq!(&codes[128..144], &q[4].qs[..16]);
        assert_eq!(&codes[176..192], &q[7].qs[..16]);
        assert_eq!(&codes[192..208], &q[4].qs[16..]);
        assert_eq!(&codes[240..256], &q[7].qs[16..]);
        assert_eq!(&codes[256..288], &q[8].qs[..]);
        assert!(codes[288..].iter().all(|&c| c == 0), "padding");
        assert!(row.wide().sums16.is_empty());
        // q4_K: a super-block's blocks in the order 0, 2, 1, 3, 4, 6, 5, 7.
        let x = values(8, 8 * QX, 1.0);
        let all = quantize_for_call(WeightFormat::Q4K, CodeLayout::WideGemv, &x, 8 * QX);
        let row = all.activations(&x, 0);
        let codes: Vec<i8> = row.wide().lines.iter().flat_map(|l| l.0).collect();
        for (pos, b) in [0, 2, 1, 3, 4, 6, 5, 7].into_iter().enumerate() {
            assert_eq!(&codes[32 * pos..32 * pos + 32], &row.q()[b].qs[..]);
        }
        // q6_K: as they are, with Σ of each sixteen codes.
        let all = quantize_for_call(WeightFormat::Q6K, CodeLayout::WideGemv, &x, 8 * QX);
        let row = all.activations(&x, 0);
        let codes: Vec<i8> = row.wide().lines.iter().flat_map(|l| l.0).collect();
        let plain: Vec<i8> = row.q().iter().flat_map(|b| b.qs).collect();
        assert_eq!(codes, plain);
        for format in [WeightFormat::Q4_0, WeightFormat::Q4K, WeightFormat::Q6K] {
            for nb in [1, 5, 8, 9, 16] {
                let x = values(9 + nb as u64, 2 * nb * QX, 1.0);
                let all = quantize_for_call(format, CodeLayout::WideGemv, &x, nb * QX);
                let row = all.activations(&x[nb * QX..], 1);
                let codes: Vec<i8> = row.wide().lines.iter().flat_map(|l| l.0).collect();
                let expected = wide_order(format, nb).map(|(b, j)| row.q()[b].qs[j]);
                assert!(
                    codes.iter().copied().zip(expected).all(|(c, e)| c == e),
                    "{format} {nb}"
                );
            }
        }
        let sums = row.wide().sums16;
        assert_eq!(sums.len(), 16);
        let expected: i32 = plain[144..160].iter().map(|&c| i32::from(c)).sum();
        assert_eq!(sums[9], expected as f32);
    }

    #[test]
    fn tile_layout_holds_each_rows_chunks_in_turn() {
        // Three rows of 11 blocks: a whole chunk and a partial one each.
        let (rows, nb) = (3, 11);
        let x = values(11, rows * nb * QX, 2.0);
        let all = quantize_for_call(WeightFormat::Q6K, CodeLayout::GemmTiles, &x, nb * QX);
        let n = nb.div_ceil(KC) * rows * KC;
        for row in 0..rows {
            let a = all.activations(&x[row * nb * QX..(row + 1) * nb * QX], row);
            let t = a.tiles();
            assert_eq!(t.chunk_stride, rows * KC);
            for b in 0..nb {
                let at = b / KC * t.chunk_stride + b % KC;
                assert_eq!(t.q[at], a.q()[b], "row {row} block {b}");
                assert_eq!(t.d_sum[at].to_bits(), a.d_sum()[b].to_bits());
                assert_eq!(t.sum_lo[at], a.sum_lo()[b]);
            }
            // Chunk 1, the partial one, is padded with zero blocks.
            for j in nb % KC..KC {
                assert_eq!(t.q[t.chunk_stride + j], BlockQ8x::default());
            }
            // From the row's first chunk to the layout's end, in each of the three.
            assert_eq!(t.q.len(), n - row * KC);
            assert_eq!(t.d_sum.len(), t.q.len());
            assert_eq!(t.sum_lo.len(), t.q.len());
        }
        // Only a call that asks for the layout gets it.
        for layout in [CodeLayout::Blocks, CodeLayout::WideGemv] {
            let none = quantize_for_call(WeightFormat::Q6K, layout, &x, nb * QX);
            assert!(none.activations(&x[..nb * QX], 0).tiles().is_empty());
        }
    }

    #[test]
    fn the_gemm_asks_for_the_tile_layout_exactly_where_it_runs_a_tile() {
        for isa in Isa::ALL {
            let Ok(kernel) = isa.token() else { continue };
            for format in WeightFormat::ALL {
                let tiles = kernel.gemm_layout(format) == CodeLayout::GemmTiles;
                assert_eq!(
                    tiles,
                    kernel.gemm_body(format).is_int_tile(),
                    "{kernel} {format}"
                );
            }
        }
    }

    #[test]
    fn a_tile_gives_the_same_bits_from_either_layout() {
        // A partial chunk (11 or 19 blocks of q8_0 and q4_0), one activation row, and more
        // than a pass's 64.
        for isa in Isa::ALL {
            let Ok(kernel) = isa.token() else { continue };
            for format in WeightFormat::ALL {
                if !kernel.gemm_body(format).is_int_tile() {
                    continue;
                }
                for (n_out, nb, m) in [(19, 11usize, 3), (16, 19, 1), (5, 11, 67)] {
                    // Whole blocks of the format (the k-quants' rows are whole chunks).
                    let block = format.block_size();
                    let n_in = (nb * QX).div_ceil(block) * block;
                    let shape = WeightShape { n_out, n_in };
                    let w = WeightMatrix::quantize(format, shape, &values(3, n_out * n_in, 1.0))
                        .unwrap();
                    let x = values(5, m * n_in, 3.0);
                    let run = |layout| {
                        let all = quantize_for_call(format, layout, &x, n_in);
                        let acts: Vec<_> = (0..m)
                            .map(|i| all.activations(&x[i * n_in..(i + 1) * n_in], i))
                            .collect();
                        let mut y = vec![f32::NAN; m * n_out];
                        for (chunk, out) in acts.chunks(64).zip(y.chunks_mut(64 * n_out)) {
                            kernel.qgemm_rows(format, w.as_bytes(), chunk, out);
                        }
                        y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                    };
                    let ctx = format!("{kernel} {format} {n_out}x{n_in} m {m}");
                    assert_eq!(run(CodeLayout::GemmTiles), run(CodeLayout::Blocks), "{ctx}");
                }
            }
        }
    }

    #[test]
    fn the_even_odd_order_puts_each_whole_step_evens_first_and_keeps_the_tail() {
        // Two rows of 70: two whole steps and a tail of 6 each.
        let x: Vec<f32> = (0..140).map(|v| v as f32).collect();
        let mut want = Vec::new();
        for row in [0, 70] {
            for step in [row, row + 32] {
                want.extend((0..16).map(|j| (step + 2 * j) as f32));
                want.extend((0..16).map(|j| (step + 2 * j + 1) as f32));
            }
            want.extend((row + 64..row + 70).map(|v| v as f32));
        }
        assert_eq!(even_odd_order(&x, 70), want);
        // The path of a CPU without AVX-512 too.
        let mut step: [f32; 32] = x[..32].try_into().unwrap();
        even_odd_scalar(&mut step);
        assert_eq!(step, want[..32]);
        // Only a float call that asks for the layout gets it: bf16's rows in that order, on
        // lines of their own.
        let all = quantize_for_call(WeightFormat::Bf16, CodeLayout::FloatTiles, &x, 70);
        for (r, want) in want.chunks(70).enumerate() {
            let row = all.activations(&x[70 * r..70 * (r + 1)], r).tile_x();
            assert_eq!(row, want);
            assert!(row.as_ptr().cast::<VecSlot>().is_aligned(), "row {r}");
        }
        let none = quantize_for_call(WeightFormat::Bf16, CodeLayout::Blocks, &x, 70);
        assert!(none.activations(&x[70..], 1).tile_x().is_empty());
    }

    #[test]
    fn the_f16_tiles_read_x_as_it_is_from_lines_of_its_own() {
        // Rows that start 4 bytes into a line, as a slice of a larger buffer may.
        let store: Vec<f32> = (0..3 * 37 + 1).map(|v| v as f32).collect();
        let x = &store[1..];
        let all = quantize_for_call(WeightFormat::F16, CodeLayout::FloatTiles, x, 37);
        for r in 0..3 {
            let row = all.activations(&x[37 * r..37 * (r + 1)], r).tile_x();
            assert_eq!(row, &x[37 * r..37 * (r + 1)], "row {r}");
            assert!(row.as_ptr().cast::<VecSlot>().is_aligned(), "row {r}");
        }
        assert!(FloatRows::of(x, 37, false).row(3).is_empty());
        assert!(FloatRows::of(&[], 0, true).row(0).is_empty());
    }

    #[test]
    fn only_the_sixteen_lane_float_gemm_asks_for_the_float_tiles_layout() {
        for isa in Isa::ALL {
            let Ok(kernel) = isa.token() else { continue };
            for format in WeightFormat::ALL {
                let wide_float = kernel.gemm_body(format) == crate::GemmBody::Avx512F32Tile;
                let ctx = format!("{kernel} {format}");
                assert_eq!(
                    kernel.gemm_layout(format) == CodeLayout::FloatTiles,
                    wide_float,
                    "{ctx}"
                );
                assert_ne!(kernel.gemv_layout(format), CodeLayout::FloatTiles, "{ctx}");
            }
        }
    }

    #[test]
    fn a_float_body_gives_the_same_bits_with_its_layout_or_without() {
        // Whole steps and a tail, a last 16 of the sixteen-lane body, rows under one step;
        // one activation row and several.
        for isa in Isa::ALL {
            let Ok(kernel) = isa.token() else { continue };
            for format in [WeightFormat::F16, WeightFormat::Bf16] {
                for (n_out, n_in, m) in [(13, 70, 1), (9, 1072, 5), (3, 20, 2)] {
                    let shape = WeightShape { n_out, n_in };
                    let w = WeightMatrix::quantize(format, shape, &values(3, n_out * n_in, 1.0))
                        .unwrap();
                    let x = values(5, m * n_in, 3.0);
                    let run = |gemv_layout, gemm_layout| {
                        let one = quantize_for_call(format, gemv_layout, &x[..n_in], n_in);
                        let mut y = vec![f32::NAN; n_out + m * n_out];
                        let (gemv, gemm) = y.split_at_mut(n_out);
                        let acts = one.activations(&x[..n_in], 0);
                        kernel.qgemv_rows(format, w.as_bytes(), acts, gemv, 1);
                        let all = quantize_for_call(format, gemm_layout, &x, n_in);
                        let acts: Vec<_> = (0..m)
                            .map(|i| all.activations(&x[i * n_in..(i + 1) * n_in], i))
                            .collect();
                        kernel.qgemm_rows(format, w.as_bytes(), &acts, gemm);
                        y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                    };
                    let ctx = format!("{kernel} {format} {n_out}x{n_in} m {m}");
                    let asked = run(kernel.gemv_layout(format), kernel.gemm_layout(format));
                    assert_eq!(asked, run(CodeLayout::Blocks, CodeLayout::Blocks), "{ctx}");
                    // The GEMM's first row is the GEMV's.
                    assert_eq!(asked[..n_out], asked[n_out..2 * n_out], "{ctx}");
                }
            }
        }
    }
}
