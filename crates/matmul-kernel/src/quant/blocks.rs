//! The blocks of the quantized formats as plain `#[repr(C)]` structs with ggml's layout, each
//! with its byte offsets, its reference dequantizer (ggml's `dequantize_row_*`, operation for
//! operation) and its quantizer.
//!
//! Every multi-byte field is little-endian in the file, as GGUF stores it. The structs are
//! read and written by copying fields out of and into byte arrays (`from_bytes`, `to_bytes`),
//! without `unsafe`: a tensor's bytes need not be aligned for the struct, and a big-endian host
//! reads them the same way.

use half::f16;

/// 32 weights in 34 bytes: `w[j] = d · qs[j]`.
///
/// | offset | bytes | field |
/// |---|---|---|
/// | 0 | 2 | `d`: f16 scale |
/// | 2 | 32 | `qs`: 32 × i8, weight `j` at `2 + j` |
///
/// ggml's `block_q8_0`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ8_0 {
    /// The scale.
    pub d: f16,
    /// One signed code per weight.
    pub qs: [i8; 32],
}

/// 32 weights in 18 bytes: `w[j] = d · (q[j] − 8)` with 4-bit codes `q`.
///
/// | offset | bytes | field |
/// |---|---|---|
/// | 0 | 2 | `d`: f16 scale |
/// | 2 | 16 | `qs`: byte `2 + j` holds `q[j]` in its low nibble and `q[j + 16]` in its high nibble, `j < 16` |
///
/// ggml's `block_q4_0`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ4_0 {
    /// The scale.
    pub d: f16,
    /// Two codes per byte: weight `j` low, weight `j + 16` high.
    pub qs: [u8; 16],
}

/// 256 weights in 144 bytes, 8 sub-blocks of 32: weight `l` of sub-block `s` is
/// `d·sc[s] · q − dmin·m[s]` with a 4-bit code `q` and 6-bit `sc[s]`, `m[s]`.
///
/// | offset | bytes | field |
/// |---|---|---|
/// | 0 | 2 | `d`: f16 super-scale of the scales |
/// | 2 | 2 | `dmin`: f16 super-scale of the mins |
/// | 4 | 12 | `scales`: `sc` and `m` packed, 6 bits each (below) |
/// | 16 | 128 | `qs`: byte `16 + 32c + l` holds sub-block `2c`'s weight `l` in its low nibble and sub-block `2c + 1`'s in its high nibble, `c < 4`, `l < 32` |
///
/// `scales` (ggml's `get_scale_min_k4`): for `s < 4`, `sc[s]` is the low 6 bits of byte `s`
/// and `m[s]` the low 6 bits of byte `s + 4`; for `s ≥ 4`, `sc[s]` is the low nibble of byte
/// `s + 4` with the top two bits of byte `s − 4` above it, and `m[s]` the high nibble of byte
/// `s + 4` with the top two bits of byte `s` above it.
///
/// ggml's `block_q4_K`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ4K {
    /// Super-scale of the sub-block scales.
    pub d: f16,
    /// Super-scale of the sub-block mins.
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins, packed.
    pub scales: [u8; 12],
    /// Two codes per byte (see the layout).
    pub qs: [u8; 128],
}

/// 256 weights in 210 bytes, 16 sub-blocks of 16: weight `i` is `d · scales[i / 16] · (q − 32)`
/// with a 6-bit code `q`.
///
/// | offset | bytes | field |
/// |---|---|---|
/// | 0 | 128 | `ql`: the low 4 bits of the codes |
/// | 128 | 64 | `qh`: the high 2 bits of the codes |
/// | 192 | 16 | `scales`: 16 × i8 sub-block scales |
/// | 208 | 2 | `d`: f16 super-scale |
///
/// The codes of each half `h < 2` (weights `128h …`) come from `ql[64h..64h + 64]` and
/// `qh[32h..32h + 32]`: for `l < 32`, with `a = ql[64h + l]`, `b = ql[64h + 32 + l]`,
/// `c = qh[32h + l]`, the codes of weights `128h + l`, `+ 32`, `+ 64`, `+ 96` are
/// `a & 15 | (c & 3) << 4`, `b & 15 | (c >> 2 & 3) << 4`, `a >> 4 | (c >> 4 & 3) << 4` and
/// `b >> 4 | (c >> 6) << 4`.
///
/// ggml's `block_q6_K`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ6K {
    /// The low 4 bits of each code.
    pub ql: [u8; 128],
    /// The high 2 bits of each code.
    pub qh: [u8; 64],
    /// One signed scale per 16 weights.
    pub scales: [i8; 16],
    /// The super-scale.
    pub d: f16,
}

// The structs are the file's bytes exactly: no padding anywhere (every field after an f16 is
// bytes, and the f16 fields sit at even offsets).
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<BlockQ4_0>() == 18);
const _: () = assert!(size_of::<BlockQ4K>() == 144);
const _: () = assert!(size_of::<BlockQ6K>() == 210);
const _: () = assert!(std::mem::offset_of!(BlockQ4K, qs) == 16);
const _: () = assert!(std::mem::offset_of!(BlockQ6K, scales) == 192);
const _: () = assert!(std::mem::offset_of!(BlockQ6K, d) == 208);

fn f16_le(bytes: &[u8], at: usize) -> f16 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn array<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

fn signed<const N: usize>(bytes: [u8; N]) -> [i8; N] {
    bytes.map(|b| b as i8)
}

fn unsigned<const N: usize>(bytes: [i8; N]) -> [u8; N] {
    bytes.map(|b| b as u8)
}

/// The smallest f16 at least `x` (`x ≥ 0`); infinite when `x` exceeds the largest f16.
fn f16_at_least(x: f32) -> f16 {
    let h = f16::from_f32(x);
    if h.to_f32() < x {
        f16::from_bits(h.to_bits() + 1)
    } else {
        h
    }
}

/// The largest absolute value of `values` (0 for none).
fn max_abs(values: &[f32]) -> f32 {
    values.iter().fold(0.0f32, |m, v| m.max(v.abs()))
}

impl BlockQ8_0 {
    /// Bytes per block.
    pub const BYTES: usize = 34;

    /// The block stored in `bytes`.
    pub fn from_bytes(bytes: &[u8; Self::BYTES]) -> Self {
        BlockQ8_0 {
            d: f16_le(bytes, 0),
            qs: signed(array(bytes, 2)),
        }
    }

    /// The block's bytes as a file stores them.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0; Self::BYTES];
        out[..2].copy_from_slice(&self.d.to_le_bytes());
        out[2..].copy_from_slice(&unsigned(self.qs));
        out
    }

    /// ggml's `dequantize_row_q8_0` for one block.
    pub fn dequantize(&self, out: &mut [f32; 32]) {
        let d = self.d.to_f32();
        for (y, &q) in out.iter_mut().zip(&self.qs) {
            *y = f32::from(q) * d;
        }
    }

    /// ggml's `quantize_row_q8_0_ref` (and gguf-py's `Q8_0.quantize_blocks`), bit for bit:
    /// `d = max|x| / 127`, `q = round(x / d)` (halves away from zero). The caller checks that
    /// the values are finite and `d` fits an f16.
    pub fn quantize(values: &[f32; 32]) -> Self {
        let d = max_abs(values) / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        BlockQ8_0 {
            d: f16::from_f32(d),
            qs: values.map(|x| (x * id).round() as i8),
        }
    }
}

impl BlockQ4_0 {
    /// Bytes per block.
    pub const BYTES: usize = 18;

    /// The block stored in `bytes`.
    pub fn from_bytes(bytes: &[u8; Self::BYTES]) -> Self {
        BlockQ4_0 {
            d: f16_le(bytes, 0),
            qs: array(bytes, 2),
        }
    }

    /// The block's bytes as a file stores them.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0; Self::BYTES];
        out[..2].copy_from_slice(&self.d.to_le_bytes());
        out[2..].copy_from_slice(&self.qs);
        out
    }

    /// ggml's `dequantize_row_q4_0` for one block.
    pub fn dequantize(&self, out: &mut [f32; 32]) {
        let d = self.d.to_f32();
        let (low, high) = out.split_at_mut(16);
        for ((&byte, y0), y1) in self.qs.iter().zip(low).zip(high) {
            *y0 = f32::from((byte & 0x0F) as i8 - 8) * d;
            *y1 = f32::from((byte >> 4) as i8 - 8) * d;
        }
    }

    /// ggml's `quantize_row_q4_0_ref` (and gguf-py's `Q4_0.quantize_blocks`), bit for bit:
    /// `d = m / −8` for the value `m` of largest magnitude (the first one), codes
    /// `min(15, trunc(x / d + 8.5))`. The caller checks that the values are finite and `d` fits
    /// an f16.
    pub fn quantize(values: &[f32; 32]) -> Self {
        let mut amax = 0.0f32;
        let mut max = 0.0f32;
        for &v in values {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let code = |x: f32| ((x * id + 8.5) as u8).min(15);
        let mut qs = [0u8; 16];
        for (j, q) in qs.iter_mut().enumerate() {
            *q = code(values[j]) | (code(values[j + 16]) << 4);
        }
        BlockQ4_0 {
            d: f16::from_f32(d),
            qs,
        }
    }
}

impl BlockQ4K {
    /// Bytes per block.
    pub const BYTES: usize = 144;

    /// The block stored in `bytes`.
    pub fn from_bytes(bytes: &[u8; Self::BYTES]) -> Self {
        BlockQ4K {
            d: f16_le(bytes, 0),
            dmin: f16_le(bytes, 2),
            scales: array(bytes, 4),
            qs: array(bytes, 16),
        }
    }

    /// The block's bytes as a file stores them.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0; Self::BYTES];
        out[..2].copy_from_slice(&self.d.to_le_bytes());
        out[2..4].copy_from_slice(&self.dmin.to_le_bytes());
        out[4..16].copy_from_slice(&self.scales);
        out[16..].copy_from_slice(&self.qs);
        out
    }

    /// The 6-bit scale and min of sub-block `s < 8` (ggml's `get_scale_min_k4`).
    ///
    /// # Panics
    /// If `s` is 8 or more.
    pub fn scale_min(&self, s: usize) -> (u8, u8) {
        let q = &self.scales;
        if s < 4 {
            (q[s] & 63, q[s + 4] & 63)
        } else {
            (
                (q[s + 4] & 0x0F) | ((q[s - 4] >> 6) << 4),
                (q[s + 4] >> 4) | ((q[s] >> 6) << 4),
            )
        }
    }

    /// Packs eight 6-bit scales and mins (values above 63 lose their high bits): the inverse
    /// of [`scale_min`](Self::scale_min).
    pub fn pack_scales_mins(sc: [u8; 8], m: [u8; 8]) -> [u8; 12] {
        let mut q = [0u8; 12];
        for s in 0..4 {
            q[s] = (sc[s] & 63) | ((sc[s + 4] >> 4) << 6);
            q[s + 4] = (m[s] & 63) | ((m[s + 4] >> 4) << 6);
            q[s + 8] = (sc[s + 4] & 0x0F) | ((m[s + 4] & 0x0F) << 4);
        }
        q
    }

    /// ggml's `dequantize_row_q4_K` for one block: `d·sc · q − dmin·m`, each product rounded
    /// to f32 before the subtraction.
    pub fn dequantize(&self, out: &mut [f32; 256]) {
        let d = self.d.to_f32();
        let min = self.dmin.to_f32();
        for (c, (y, q)) in out
            .chunks_exact_mut(64)
            .zip(self.qs.chunks_exact(32))
            .enumerate()
        {
            let (sc1, m1) = self.scale_min(2 * c);
            let (sc2, m2) = self.scale_min(2 * c + 1);
            let (d1, min1) = (d * f32::from(sc1), min * f32::from(m1));
            let (d2, min2) = (d * f32::from(sc2), min * f32::from(m2));
            let (low, high) = y.split_at_mut(32);
            for ((&byte, y1), y2) in q.iter().zip(low).zip(high) {
                *y1 = d1 * f32::from(byte & 0x0F) - min1;
                *y2 = d2 * f32::from(byte >> 4) - min2;
            }
        }
    }

    /// A quantizer of our own (not ggml's iterative search): per sub-block of 32, the min
    /// `lo = min(0, min x)` and the max `hi`; `dmin` and `d` are the smallest f16s that let 6-bit
    /// `m` and `sc`, each rounded up, cover `[lo, hi]`; codes `round((x + dmin·m) / (d·sc))`.
    /// Every weight is then within half a step, `d·sc / 2`, of its value (see the tests' bound).
    /// The caller checks that the values are finite and the scales fit an f16.
    pub fn quantize(values: &[f32; 256]) -> Self {
        let mut neg_min = [0.0f32; 8];
        let mut max = [0.0f32; 8];
        for (s, sub) in values.chunks_exact(32).enumerate() {
            neg_min[s] = -sub.iter().fold(0.0f32, |m, &v| m.min(v));
            max[s] = sub.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        }
        let dmin = f16_at_least(neg_min.iter().fold(0.0f32, |a, &b| a.max(b)) / 63.0);
        let dmin_f = dmin.to_f32();
        let m = neg_min.map(|nm| ceil_code(nm, dmin_f, 63));
        let offset: [f32; 8] = std::array::from_fn(|s| dmin_f * f32::from(m[s]));
        let scale: [f32; 8] = std::array::from_fn(|s| ((max[s] + offset[s]) / 15.0).max(0.0));
        let d = f16_at_least(scale.iter().fold(0.0f32, |a, &b| a.max(b)) / 63.0);
        let d_f = d.to_f32();
        let sc = scale.map(|s| ceil_code(s, d_f, 63));
        let step: [f32; 8] = std::array::from_fn(|s| d_f * f32::from(sc[s]));
        let code = |s: usize, x: f32| -> u8 {
            if step[s] > 0.0 {
                ((x + offset[s]) / step[s]).round().clamp(0.0, 15.0) as u8
            } else {
                0
            }
        };
        let mut qs = [0u8; 128];
        for (c, q) in qs.chunks_exact_mut(32).enumerate() {
            for (l, byte) in q.iter_mut().enumerate() {
                let low = code(2 * c, values[64 * c + l]);
                let high = code(2 * c + 1, values[64 * c + 32 + l]);
                *byte = low | (high << 4);
            }
        }
        BlockQ4K {
            d,
            dmin,
            scales: Self::pack_scales_mins(sc, m),
            qs,
        }
    }
}

/// `ceil(x / unit)` as a code of at most `max` (0 when `unit` is 0).
fn ceil_code(x: f32, unit: f32, max: u8) -> u8 {
    if unit > 0.0 {
        ((x / unit).ceil() as u8).min(max)
    } else {
        0
    }
}

impl BlockQ6K {
    /// Bytes per block.
    pub const BYTES: usize = 210;

    /// The block stored in `bytes`.
    pub fn from_bytes(bytes: &[u8; Self::BYTES]) -> Self {
        BlockQ6K {
            ql: array(bytes, 0),
            qh: array(bytes, 128),
            scales: signed(array(bytes, 192)),
            d: f16_le(bytes, 208),
        }
    }

    /// The block's bytes as a file stores them.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0; Self::BYTES];
        out[..128].copy_from_slice(&self.ql);
        out[128..192].copy_from_slice(&self.qh);
        out[192..208].copy_from_slice(&unsigned(self.scales));
        out[208..].copy_from_slice(&self.d.to_le_bytes());
        out
    }

    /// The 6-bit code of weight `i < 256` (0…63; the weight is `d·scale·(code − 32)`).
    ///
    /// # Panics
    /// If `i` is 256 or more.
    pub fn code(&self, i: usize) -> u8 {
        let (h, r) = (i / 128, i % 128);
        let (quarter, l) = (r / 32, r % 32);
        let low = self.ql[64 * h + 32 * (quarter % 2) + l];
        let low = if quarter < 2 { low & 0x0F } else { low >> 4 };
        let high = (self.qh[32 * h + l] >> (2 * quarter)) & 3;
        low | (high << 4)
    }

    /// ggml's `dequantize_row_q6_K` for one block: `(d · scale) · (code − 32)`, rounded to f32
    /// after each product.
    pub fn dequantize(&self, out: &mut [f32; 256]) {
        let d = self.d.to_f32();
        for (h, y) in out.chunks_exact_mut(128).enumerate() {
            let ql = &self.ql[64 * h..64 * h + 64];
            let qh = &self.qh[32 * h..32 * h + 32];
            let sc = &self.scales[8 * h..8 * h + 8];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i8 - 32;
                let q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
                y[l] = d * f32::from(sc[is]) * f32::from(q1);
                y[l + 32] = d * f32::from(sc[is + 2]) * f32::from(q2);
                y[l + 64] = d * f32::from(sc[is + 4]) * f32::from(q3);
                y[l + 96] = d * f32::from(sc[is + 6]) * f32::from(q4);
            }
        }
    }

    /// A quantizer of our own (not ggml's iterative search): per sub-block of 16, the step
    /// `max|x| / 31` rounded up to a multiple `sc` (i8, positive) of the smallest f16 `d` that
    /// keeps every `sc ≤ 127`; codes `round(x / (d·sc)) + 32`, in 1…63. Every weight is then
    /// within half a step, `d·sc / 2`, of its value (see the tests' bound). The caller checks
    /// that the values are finite and `d` fits an f16.
    pub fn quantize(values: &[f32; 256]) -> Self {
        let step_wanted: [f32; 16] =
            std::array::from_fn(|s| max_abs(&values[16 * s..16 * s + 16]) / 31.0);
        let d = f16_at_least(step_wanted.iter().fold(0.0f32, |a, &b| a.max(b)) / 127.0);
        let d_f = d.to_f32();
        let sc = step_wanted.map(|s| ceil_code(s, d_f, 127));
        let mut codes = [32u8; 256];
        for (i, code) in codes.iter_mut().enumerate() {
            let step = d_f * f32::from(sc[i / 16]);
            if step > 0.0 {
                *code = ((values[i] / step).round().clamp(-32.0, 31.0) + 32.0) as u8;
            }
        }
        let mut block = BlockQ6K {
            ql: [0; 128],
            qh: [0; 64],
            scales: sc.map(|s| s as i8),
            d,
        };
        for (i, &q) in codes.iter().enumerate() {
            let (h, r) = (i / 128, i % 128);
            let (quarter, l) = (r / 32, r % 32);
            let low = &mut block.ql[64 * h + 32 * (quarter % 2) + l];
            *low |= if quarter < 2 {
                q & 0x0F
            } else {
                (q & 0x0F) << 4
            };
            block.qh[32 * h + l] |= (q >> 4) << (2 * quarter);
        }
        block
    }
}

/// Values per activation block: the block size of q8_0 and q4_0, and the sub-block of q4_K.
pub(crate) const QX: usize = 32;

/// One block of [`QX`] activations: `x ≈ d · qs`, `sum = Σ qs`. Eight-byte aligned, 40 bytes,
/// so the codes of consecutive blocks start at a fixed stride.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C, align(8))]
pub(crate) struct BlockQ8x {
    /// The scale: `max|x| / 127`; 0 for an all-zero block, NaN for a non-finite one.
    pub(crate) d: f32,
    /// `Σ qs`.
    pub(crate) sum: i32,
    /// The codes, each in −127…127.
    pub(crate) qs: [i8; QX],
}

const _: () = assert!(size_of::<BlockQ8x>() == 40);
const _: () = assert!(std::mem::offset_of!(BlockQ8x, qs) == 8);
