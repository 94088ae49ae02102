//! The portable kernel: plain Rust on eight-lane arrays, compiled on every target.
//!
//! Each "vector" is `[f32; 8]` and every operation is lane-wise, so the generic bodies in
//! `kernel.rs` hold many independent accumulators that the compiler vectorizes for whatever
//! the target offers (SSE2, NEON, …). Multiply and add are rounded separately (no FMA), which
//! makes this the reference the SIMD kernels are tested against.

#![allow(
    clippy::needless_range_loop,
    reason = "indexed loops over register arrays read like the math and unroll the same"
)]

use crate::kernel::{self, GemmDims, SimdF32};
use crate::quant;
use crate::quant::WeightFormat;
use crate::quant::activations::Activations;

/// The portable instruction set: eight lanes in an array. It runs on every CPU, so anyone in
/// the crate may create this token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Portable;

/// Lanes of the portable vector.
const LANES: usize = 8;

// SAFETY: no method uses an intrinsic; the pointer reads are bounded as the trait documents.
unsafe impl SimdF32 for Portable {
    const LANES: usize = LANES;
    type V = [f32; LANES];

    #[inline(always)]
    unsafe fn zero() -> Self::V {
        [0.0; LANES]
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self::V {
        // SAFETY: the caller guarantees `p..p + LANES` is readable; `[f32; 8]` has f32 alignment.
        unsafe { std::ptr::read_unaligned(p as *const [f32; LANES]) }
    }

    #[inline(always)]
    unsafe fn load_partial(p: *const f32, n: usize) -> Self::V {
        let mut v = [0.0; LANES];
        // SAFETY: the caller guarantees `p..p + n` is readable and `n < LANES`.
        unsafe { std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), n.min(LANES)) };
        v
    }

    #[inline(always)]
    unsafe fn mul_add(a: Self::V, b: Self::V, acc: Self::V) -> Self::V {
        let mut out = acc;
        for l in 0..LANES {
            out[l] += a[l] * b[l];
        }
        out
    }

    #[inline(always)]
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V {
        let mut out = a;
        for l in 0..LANES {
            out[l] += b[l];
        }
        out
    }

    #[inline(always)]
    unsafe fn reduce_sum(v: Self::V) -> f32 {
        let q = [v[0] + v[4], v[1] + v[5], v[2] + v[6], v[3] + v[7]];
        let h = [q[0] + q[2], q[1] + q[3]];
        h[0] + h[1]
    }
}

impl Portable {
    /// Portable GEMV over `y.len()` rows (panics when `w` is shorter than `y.len() · x.len()`).
    pub(crate) fn gemv_rows(self, w: &[f32], x: &[f32], y: &mut [f32]) {
        assert!(
            kernel::rows_fit(w.len(), y.len(), x.len()),
            "gemv_rows: w too short"
        );
        // SAFETY: the length is checked above; the portable "ISA" runs everywhere.
        unsafe { kernel::gemv_rows::<Portable>(w, x, y) }
    }

    /// Portable GEMM columns.
    ///
    /// # Safety
    /// As `kernel::gemm_cols` (pointer bounds and exclusive columns).
    pub(crate) unsafe fn gemm_cols(
        self,
        dims: GemmDims,
        x: *const f32,
        w: *const f32,
        y: *mut f32,
        cols: std::ops::Range<usize>,
    ) {
        // SAFETY: forwarded from the caller; the portable "ISA" runs everywhere.
        unsafe { kernel::gemm_cols::<Portable, 2>(dims, x, w, y, cols) }
    }

    /// Portable read of `sums.len()` rows of `row_len` (panics when `buf` is shorter).
    pub(crate) fn read_rows(self, buf: &[f32], row_len: usize, sums: &mut [f32]) {
        assert!(
            kernel::rows_fit(buf.len(), sums.len(), row_len),
            "read_rows: buf too short"
        );
        // SAFETY: the length is checked above; the portable "ISA" runs everywhere.
        unsafe { kernel::read_rows::<Portable>(buf, row_len, sums) }
    }

    /// Portable GEMV over `y.len()` rows of `format` at the start of `w` (panics when `w` is
    /// shorter or `x.len()` is not whole blocks): the weights widened to f32, the quantized
    /// activations unused.
    pub(crate) fn qgemv_rows(
        self,
        format: WeightFormat,
        w: &[u8],
        acts: Activations<'_>,
        y: &mut [f32],
    ) {
        quant::gemv::gemv_rows(format, w, acts.x(), y)
    }
}
