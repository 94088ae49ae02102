//! AVX2+FMA and AVX-512F kernels: the `SimdF32` implementations and thin `#[target_feature]`
//! wrappers around the generic bodies of `kernel.rs`.
//!
//! `Avx2` and `Avx512` are also the ISA tokens: a value exists only when `detect` found the
//! instructions on this CPU (the private field keeps every other module from making one), so
//! their safe methods may call the `#[target_feature]` wrappers, which is the argument of
//! every `// SAFETY:` below.

use crate::kernel::{self, GemmDims, SimdF32};
use std::arch::x86_64::*;

/// AVX2 with FMA: eight f32 lanes in a `__m256`. A value proves this CPU has both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Avx2 {
    _detected: (),
}

/// AVX-512F: sixteen f32 lanes in a `__m512`. A value proves this CPU has AVX-512F.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Avx512 {
    _detected: (),
}

impl Avx2 {
    /// The token, when this CPU has AVX2 and FMA.
    pub(crate) fn detect() -> Option<Avx2> {
        (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
            .then_some(Avx2 { _detected: () })
    }

    /// AVX2 GEMV over `y.len()` rows (panics when `w` is shorter than `y.len() · x.len()`).
    pub(crate) fn gemv_rows(self, w: &[f32], x: &[f32], y: &mut [f32]) {
        assert!(
            kernel::rows_fit(w.len(), y.len(), x.len()),
            "gemv_rows: w too short"
        );
        // SAFETY: `self` exists, so `detect` found AVX2 and FMA; the length is checked above.
        unsafe { gemv_rows_avx2(w, x, y) }
    }

    /// AVX2 GEMM columns.
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
        // SAFETY: `self` exists, so `detect` found AVX2 and FMA; pointers per the caller.
        unsafe { gemm_cols_avx2(dims, x, w, y, cols) }
    }

    /// AVX2 read of `sums.len()` rows of `row_len` (panics when `buf` is shorter).
    pub(crate) fn read_rows(self, buf: &[f32], row_len: usize, sums: &mut [f32]) {
        assert!(
            kernel::rows_fit(buf.len(), sums.len(), row_len),
            "read_rows: buf too short"
        );
        // SAFETY: `self` exists, so `detect` found AVX2 and FMA; the length is checked above.
        unsafe { read_rows_avx2(buf, row_len, sums) }
    }
}

impl Avx512 {
    /// The token, when this CPU has AVX-512F.
    pub(crate) fn detect() -> Option<Avx512> {
        is_x86_feature_detected!("avx512f").then_some(Avx512 { _detected: () })
    }

    /// AVX-512 GEMV over `y.len()` rows (panics when `w` is shorter than `y.len() · x.len()`).
    pub(crate) fn gemv_rows(self, w: &[f32], x: &[f32], y: &mut [f32]) {
        assert!(
            kernel::rows_fit(w.len(), y.len(), x.len()),
            "gemv_rows: w too short"
        );
        // SAFETY: `self` exists, so `detect` found AVX-512F; the length is checked above.
        unsafe { gemv_rows_avx512(w, x, y) }
    }

    /// AVX-512 GEMM columns.
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
        // SAFETY: `self` exists, so `detect` found AVX-512F; pointers per the caller.
        unsafe { gemm_cols_avx512(dims, x, w, y, cols) }
    }

    /// AVX-512 read of `sums.len()` rows of `row_len` (panics when `buf` is shorter).
    pub(crate) fn read_rows(self, buf: &[f32], row_len: usize, sums: &mut [f32]) {
        assert!(
            kernel::rows_fit(buf.len(), sums.len(), row_len),
            "read_rows: buf too short"
        );
        // SAFETY: `self` exists, so `detect` found AVX-512F; the length is checked above.
        unsafe { read_rows_avx512(buf, row_len, sums) }
    }
}

/// Masks for `_mm256_maskload_ps`: the window starting at `8 - n` has `n` leading all-ones lanes.
static AVX2_TAIL_MASK: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];

// SAFETY: every method is called only from `avx2,fma` wrappers on a CPU that has them; masked
// loads read only the lanes the mask enables, which the caller guarantees readable.
unsafe impl SimdF32 for Avx2 {
    const LANES: usize = 8;
    type V = __m256;

    #[inline(always)]
    unsafe fn zero() -> __m256 {
        // SAFETY: AVX is available by the trait contract.
        unsafe { _mm256_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        // SAFETY: `p..p + 8` readable by the caller; AVX available.
        unsafe { _mm256_loadu_ps(p) }
    }

    #[inline(always)]
    unsafe fn load_partial(p: *const f32, n: usize) -> __m256 {
        // SAFETY: `n < 8`, so the mask window `8 - n .. 16 - n` lies in the table; masked-off
        // lanes are not read (no fault past `p + n`).
        unsafe {
            let mask = _mm256_loadu_si256(AVX2_TAIL_MASK.as_ptr().add(8 - n) as *const __m256i);
            _mm256_maskload_ps(p, mask)
        }
    }

    #[inline(always)]
    unsafe fn mul_add(a: __m256, b: __m256, acc: __m256) -> __m256 {
        // SAFETY: FMA available by the trait contract.
        unsafe { _mm256_fmadd_ps(a, b, acc) }
    }

    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX available.
        unsafe { _mm256_add_ps(a, b) }
    }

    #[inline(always)]
    unsafe fn reduce_sum(v: __m256) -> f32 {
        // SAFETY: AVX available. Lanes are added as (l, l+4), then (l, l+2), then (0, 1): the
        // same pairwise tree as the portable kernel.
        unsafe {
            let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let h = _mm_add_ps(q, _mm_movehl_ps(q, q));
            let s = _mm_add_ss(h, _mm_shuffle_ps::<0b01>(h, h));
            _mm_cvtss_f32(s)
        }
    }
}

// SAFETY: every method is called only from `avx512f` wrappers on a CPU that has it; masked
// loads do not touch disabled lanes.
unsafe impl SimdF32 for Avx512 {
    const LANES: usize = 16;
    type V = __m512;

    #[inline(always)]
    unsafe fn zero() -> __m512 {
        // SAFETY: AVX-512F available by the trait contract.
        unsafe { _mm512_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        // SAFETY: `p..p + 16` readable by the caller; AVX-512F available.
        unsafe { _mm512_loadu_ps(p) }
    }

    #[inline(always)]
    unsafe fn load_partial(p: *const f32, n: usize) -> __m512 {
        // SAFETY: `n < 16`, the mask enables the first `n` lanes only, and masked-off lanes are
        // neither read nor faulted on.
        unsafe {
            let mask: __mmask16 = ((1u32 << n) - 1) as __mmask16;
            _mm512_maskz_loadu_ps(mask, p)
        }
    }

    #[inline(always)]
    unsafe fn mul_add(a: __m512, b: __m512, acc: __m512) -> __m512 {
        // SAFETY: AVX-512F available.
        unsafe { _mm512_fmadd_ps(a, b, acc) }
    }

    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F available.
        unsafe { _mm512_add_ps(a, b) }
    }

    #[inline(always)]
    unsafe fn reduce_sum(v: __m512) -> f32 {
        // SAFETY: AVX-512F available. Halves are added first (l, l+8), then the AVX2 tree.
        unsafe {
            let lo = _mm512_castps512_ps256(v);
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
            let o = _mm256_add_ps(lo, hi);
            let q = _mm_add_ps(_mm256_castps256_ps128(o), _mm256_extractf128_ps::<1>(o));
            let h = _mm_add_ps(q, _mm_movehl_ps(q, q));
            let s = _mm_add_ss(h, _mm_shuffle_ps::<0b01>(h, h));
            _mm_cvtss_f32(s)
        }
    }
}

/// AVX2 GEMV rows.
///
/// # Safety
/// The CPU has AVX2 and FMA; `w.len() >= y.len() * x.len()`.
#[target_feature(enable = "avx2,fma")]
unsafe fn gemv_rows_avx2(w: &[f32], x: &[f32], y: &mut [f32]) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { kernel::gemv_rows::<Avx2>(w, x, y) }
}

/// AVX-512 GEMV rows.
///
/// # Safety
/// The CPU has AVX-512F; `w.len() >= y.len() * x.len()`.
#[target_feature(enable = "avx512f")]
unsafe fn gemv_rows_avx512(w: &[f32], x: &[f32], y: &mut [f32]) {
    // SAFETY: forwarded contract; the feature is enabled on this function.
    unsafe { kernel::gemv_rows::<Avx512>(w, x, y) }
}

/// AVX2 GEMM columns (tiles of 4 weight rows × 3 rows of `X`: 12 accumulators).
///
/// # Safety
/// The CPU has AVX2 and FMA; the pointer contract of `kernel::gemm_cols`.
#[target_feature(enable = "avx2,fma")]
unsafe fn gemm_cols_avx2(
    dims: GemmDims,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    cols: std::ops::Range<usize>,
) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { kernel::gemm_cols::<Avx2, 3>(dims, x, w, y, cols) }
}

/// AVX-512 GEMM columns (tiles of 4 weight rows × 4 rows of `X`: 16 accumulators).
///
/// # Safety
/// The CPU has AVX-512F; the pointer contract of `kernel::gemm_cols`.
#[target_feature(enable = "avx512f")]
unsafe fn gemm_cols_avx512(
    dims: GemmDims,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    cols: std::ops::Range<usize>,
) {
    // SAFETY: forwarded contract; the feature is enabled on this function.
    unsafe { kernel::gemm_cols::<Avx512, 4>(dims, x, w, y, cols) }
}

/// AVX2 read rows.
///
/// # Safety
/// The CPU has AVX2; `buf.len() >= sums.len() * row_len`.
#[target_feature(enable = "avx2,fma")]
unsafe fn read_rows_avx2(buf: &[f32], row_len: usize, sums: &mut [f32]) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { kernel::read_rows::<Avx2>(buf, row_len, sums) }
}

/// AVX-512 read rows.
///
/// # Safety
/// The CPU has AVX-512F; `buf.len() >= sums.len() * row_len`.
#[target_feature(enable = "avx512f")]
unsafe fn read_rows_avx512(buf: &[f32], row_len: usize, sums: &mut [f32]) {
    // SAFETY: forwarded contract; the feature is enabled on this function.
    unsafe { kernel::read_rows::<Avx512>(buf, row_len, sums) }
}
