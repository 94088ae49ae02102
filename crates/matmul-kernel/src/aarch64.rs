//! NEON kernels for aarch64: the `SimdF32` implementation and thin `#[target_feature]`
//! wrappers around the generic bodies of `kernel.rs`, as `x86.rs` does for AVX2 and AVX-512.
//!
//! `Neon` is also the ISA token: a value exists only when `detect` found NEON on this CPU
//! (the private fields keep every other module from making one), so its safe methods may call
//! the `#[target_feature(enable = "neon")]` wrappers, which is the argument of every
//! `// SAFETY:` below. The token also records whether the CPU has the `dotprod` extension
//! (`SDOT`, four i8 products summed into each i32 lane); the quantized kernels
//! (`quant/aarch64.rs`) use it where present. `Neon::without_dotprod` (`Kernel::without_dotprod`)
//! gives the same token with the extension ignored, so both paths run on a CPU that has it.
//!
//! NEON is part of every aarch64 target Rust supports, so detection succeeds on any aarch64
//! CPU; the token still goes through it, like every other ISA.

use crate::kernel::{self, GemmDims, SimdF32};
use std::arch::aarch64::*;

/// NEON (Advanced SIMD): four f32 lanes in a `float32x4_t`. A value proves this CPU has NEON,
/// and `dotprod` that it has the dot-product extension too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Neon {
    _detected: (),
    /// This CPU has `dotprod` (`SDOT`) and the quantized kernels use it.
    dotprod: bool,
}

impl Neon {
    /// The token, when this CPU has NEON; it records whether `dotprod` is there too.
    pub(crate) fn detect() -> Option<Neon> {
        std::arch::is_aarch64_feature_detected!("neon").then(|| Neon {
            _detected: (),
            dotprod: std::arch::is_aarch64_feature_detected!("dotprod"),
        })
    }

    /// Whether the quantized kernels of this token use `dotprod`.
    pub(crate) fn has_dotprod(self) -> bool {
        self.dotprod
    }

    /// The same token with `dotprod` ignored: the quantized kernels take their plain NEON path
    /// (`SMULL` and pairwise additions). Weakening a detected token is always sound.
    pub(crate) fn without_dotprod(self) -> Neon {
        Neon {
            dotprod: false,
            ..self
        }
    }

    /// NEON GEMV over `y.len()` rows (panics when `w` is shorter than `y.len() · x.len()`).
    pub(crate) fn gemv_rows(self, w: &[f32], x: &[f32], y: &mut [f32]) {
        assert!(
            kernel::rows_fit(w.len(), y.len(), x.len()),
            "gemv_rows: w too short"
        );
        // SAFETY: `self` exists, so `detect` found NEON; the length is checked above.
        unsafe { gemv_rows_neon(w, x, y) }
    }

    /// NEON GEMM columns.
    ///
    /// # Safety
    /// The pointer contract of `kernel::gemm_cols`.
    pub(crate) unsafe fn gemm_cols(
        self,
        dims: GemmDims,
        x: *const f32,
        w: *const f32,
        y: *mut f32,
        cols: std::ops::Range<usize>,
    ) {
        // SAFETY: `self` exists, so `detect` found NEON; pointers per the caller.
        unsafe { gemm_cols_neon(dims, x, w, y, cols) }
    }

    /// NEON read of `sums.len()` rows of `row_len` (panics when `buf` is shorter).
    pub(crate) fn read_rows(self, buf: &[f32], row_len: usize, sums: &mut [f32]) {
        assert!(
            kernel::rows_fit(buf.len(), sums.len(), row_len),
            "read_rows: buf too short"
        );
        // SAFETY: `self` exists, so `detect` found NEON; the length is checked above.
        unsafe { read_rows_neon(buf, row_len, sums) }
    }
}

// SAFETY: every method is called only from `neon` wrappers on a CPU that has it; the partial
// load copies exactly the `n` readable floats.
unsafe impl SimdF32 for Neon {
    const LANES: usize = 4;
    type V = float32x4_t;

    #[inline(always)]
    unsafe fn zero() -> float32x4_t {
        // SAFETY: NEON is available by the trait contract.
        unsafe { vdupq_n_f32(0.0) }
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> float32x4_t {
        // SAFETY: `p..p + 4` readable by the caller; `vld1q_f32` needs only f32 alignment.
        unsafe { vld1q_f32(p) }
    }

    #[inline(always)]
    unsafe fn load_partial(p: *const f32, n: usize) -> float32x4_t {
        // NEON has no masked load: the `n < 4` floats are copied into a zeroed array first.
        let mut lanes = [0.0f32; 4];
        // SAFETY: `p..p + n` readable by the caller and `n < 4`, so the copy stays inside both
        // `p`'s floats and `lanes`; NEON available.
        unsafe {
            std::ptr::copy_nonoverlapping(p, lanes.as_mut_ptr(), n.min(4));
            vld1q_f32(lanes.as_ptr())
        }
    }

    #[inline(always)]
    unsafe fn mul_add(a: float32x4_t, b: float32x4_t, acc: float32x4_t) -> float32x4_t {
        // SAFETY: NEON available; `vfmaq_f32(acc, a, b)` is `acc + a·b`, fused.
        unsafe { vfmaq_f32(acc, a, b) }
    }

    #[inline(always)]
    unsafe fn add(a: float32x4_t, b: float32x4_t) -> float32x4_t {
        // SAFETY: NEON available.
        unsafe { vaddq_f32(a, b) }
    }

    #[inline(always)]
    unsafe fn reduce_sum(v: float32x4_t) -> f32 {
        // SAFETY: NEON available. Lanes are added as (l, l+2), then (0, 1): the last two
        // levels of the portable kernel's pairwise tree (`vaddvq_f32` would pair (0, 1) and
        // (2, 3) first).
        unsafe {
            let h = vadd_f32(vget_low_f32(v), vget_high_f32(v));
            vget_lane_f32::<0>(h) + vget_lane_f32::<1>(h)
        }
    }
}

/// NEON GEMV rows.
///
/// # Safety
/// The CPU has NEON; `w.len() >= y.len() * x.len()`.
#[target_feature(enable = "neon")]
unsafe fn gemv_rows_neon(w: &[f32], x: &[f32], y: &mut [f32]) {
    // SAFETY: forwarded contract; the feature is enabled on this function.
    unsafe { kernel::gemv_rows::<Neon>(w, x, y) }
}

/// NEON GEMM columns (tiles of 4 weight rows × 4 rows of `X`: 16 of the 32 vector registers
/// hold accumulators).
///
/// # Safety
/// The CPU has NEON; the pointer contract of `kernel::gemm_cols`.
#[target_feature(enable = "neon")]
unsafe fn gemm_cols_neon(
    dims: GemmDims,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    cols: std::ops::Range<usize>,
) {
    // SAFETY: forwarded contract; the feature is enabled on this function.
    unsafe { kernel::gemm_cols::<Neon, 4>(dims, x, w, y, cols) }
}

/// NEON read rows.
///
/// # Safety
/// The CPU has NEON; `buf.len() >= sums.len() * row_len`.
#[target_feature(enable = "neon")]
unsafe fn read_rows_neon(buf: &[f32], row_len: usize, sums: &mut [f32]) {
    // SAFETY: forwarded contract; the feature is enabled on this function.
    unsafe { kernel::read_rows::<Neon>(buf, row_len, sums) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_records_dotprod_and_it_can_be_ignored() {
        let neon = Neon::detect().expect("NEON is part of every aarch64 target");
        assert_eq!(
            neon.has_dotprod(),
            std::arch::is_aarch64_feature_detected!("dotprod")
        );
        let plain = neon.without_dotprod();
        assert!(!plain.has_dotprod());
        assert_eq!(plain.without_dotprod(), plain);
    }

    #[test]
    fn reduce_sum_adds_in_the_portable_tree_order() {
        // (a + c) + (b + d): with a = 1, c = -1 the large pair cancels before the small lane
        // is added; (a + b) + (c + d) would lose `b` to rounding.
        let lanes = [1.0f32, f32::EPSILON / 4.0, -1.0, 0.0];
        // SAFETY: NEON is part of every aarch64 target; `lanes` holds four floats.
        let sum = unsafe { Neon::reduce_sum(Neon::load(lanes.as_ptr())) };
        assert_eq!(sum, f32::EPSILON / 4.0);
    }

    #[test]
    fn load_partial_zeroes_the_missing_lanes() {
        let data = [1.0f32, 2.0, 3.0];
        for n in 0..4 {
            let mut out = [f32::NAN; 4];
            // SAFETY: NEON is part of every aarch64 target; `data` has `n <= 3` floats.
            unsafe { vst1q_f32(out.as_mut_ptr(), Neon::load_partial(data.as_ptr(), n)) };
            let expected: Vec<f32> = (0..4).map(|l| if l < n { data[l] } else { 0.0 }).collect();
            assert_eq!(out.to_vec(), expected, "n = {n}");
        }
    }
}
