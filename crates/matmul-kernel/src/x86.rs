//! AVX2+FMA and AVX-512F kernels: the `SimdF32` implementations and thin `#[target_feature]`
//! wrappers around the generic bodies of `kernel.rs`; the quantized formats' bodies are in
//! `quant/x86.rs`, reached through the same tokens.
//!
//! `Avx2` and `Avx512` are also the ISA tokens: a value exists only when `detect` found the
//! instructions on this CPU (the private fields keep every other module from making one), so
//! their safe methods may call the `#[target_feature]` wrappers, which is the argument of
//! every `// SAFETY:` below.

use crate::bodies::{GemvBody, IsaLevel, gemv_body};
use crate::kernel::{self, GemmDims, SimdF32};
use crate::quant::WeightFormat;
use crate::quant::activations::Activations;
use crate::quant::x86 as qx86;
use std::arch::x86_64::*;

/// AVX2 with FMA and F16C: eight f32 lanes in a `__m256`. A value proves this CPU has all
/// three (every CPU with AVX2 has F16C).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Avx2 {
    _detected: (),
}

/// AVX-512F: sixteen f32 lanes in a `__m512`. A value proves this CPU has AVX-512F and the
/// AVX2 token's features (every AVX-512 CPU has them; each is detected), and records whether
/// the quantized formats' integer bodies may use VNNI, and q4_0's GEMV VBMI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Avx512 {
    /// AVX2+FMA+F16C: the integer bodies without VNNI are AVX2's.
    avx2: Avx2,
    /// AVX512-VNNI with AVX512VL and AVX512BW: the integer bodies use `vpdpbusd` (the GEMV
    /// of every quantized format on 512-bit vectors, `quant/x86_wide.rs`; the GEMM's tiles,
    /// `quant/x86_tile.rs`) instead of AVX2's `vpmaddubsw` + `vpmaddwd`.
    vnni: bool,
    /// AVX512-VBMI: with VNNI, q4_0's GEMV gathers its nibbles and scales by byte permutes
    /// instead of word permutes (`quant/x86_wide.rs`), the same bits.
    vbmi: bool,
}

impl Avx2 {
    /// The token, when this CPU has AVX2, FMA and F16C.
    pub(crate) fn detect() -> Option<Avx2> {
        (is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c"))
        .then_some(Avx2 { _detected: () })
    }

    /// `y[i·n_rows + r]` = row `r` of `format` at the start of `w` dotted with activation row
    /// `acts[i]`, `n_rows = y.len() / acts.len()` (panics when `y` is not whole rows, `w` is
    /// shorter or a row is not whole blocks): f32 FMA on the widened weights for the float
    /// formats, integer dot products with the quantized activations for the others.
    /// `threads` is how many threads the call's rows are split over (the walk's rule).
    pub(crate) fn qgemv_rows(
        self,
        format: WeightFormat,
        w: &[u8],
        acts: &[Activations<'_>],
        y: &mut [f32],
        threads: usize,
    ) {
        qx86::check_all_rows(format, w, acts, y.len());
        if let [a] = acts
            && self.wide_gemv(format)
            && !a.wide().lines.is_empty()
        {
            // SAFETY: `self` exists, so `detect` found AVX2, FMA and F16C; rows and the wide
            // codes checked above.
            return unsafe { qx86::qgemv_rows_wide_avx2(format, w, *a, y, threads) };
        }
        // SAFETY: `self` exists, so `detect` found AVX2, FMA and F16C; `check_all_rows`
        // checked that `w` holds the rows and that each activation row matches them.
        unsafe { qx86::qgemm_rows_avx2(format, w, acts, y) }
    }

    /// Whether the GEMV of `format` runs an AVX2 body on the wide activation layout of
    /// `quant/x86_wide.rs` (the table of `bodies.rs`).
    pub(crate) fn wide_gemv(self, format: WeightFormat) -> bool {
        gemv_body(IsaLevel::Avx2, format).wide_layout()
    }

    /// As [`Avx2::qgemv_rows`], for the GEMM: the quantized formats but q8_0 run the
    /// row tiles of `quant/x86_tile.rs` (not bitwise the GEMV).
    pub(crate) fn qgemm_rows(
        self,
        format: WeightFormat,
        w: &[u8],
        acts: &[Activations<'_>],
        y: &mut [f32],
    ) {
        qx86::check_all_rows(format, w, acts, y.len());
        // SAFETY: `self` exists, so `detect` found AVX2, FMA and F16C; `check_all_rows`
        // checked that `w` holds the rows and that each activation row matches them.
        unsafe { qx86::qgemm_tiles_avx2(format, w, acts, y) }
    }

    /// AVX2 GEMV over `y.len()` rows (panics when `w` is shorter than `y.len() · x.len()`).
    pub(crate) fn gemv_rows(self, w: &[f32], x: &[f32], y: &mut [f32]) {
        assert!(
            kernel::rows_fit(w.len(), y.len(), x.len()),
            "gemv_rows: w too short"
        );
        // SAFETY: `self` exists, so `detect` found AVX2, FMA and F16C; the length is checked
        // above.
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
    /// The token, when this CPU has AVX-512F (and AVX2, FMA and F16C).
    pub(crate) fn detect() -> Option<Avx512> {
        if !is_x86_feature_detected!("avx512f") {
            return None;
        }
        let avx2 = Avx2::detect()?;
        let vnni = is_x86_feature_detected!("avx512vnni")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512bw");
        let vbmi = is_x86_feature_detected!("avx512vbmi");
        Some(Avx512 { avx2, vnni, vbmi })
    }

    /// The same token without VNNI: the integer bodies of a CPU without it (removing a
    /// feature is always safe).
    pub(crate) fn without_vnni(self) -> Avx512 {
        Avx512 {
            vnni: false,
            ..self
        }
    }

    /// Whether the integer bodies use VNNI.
    pub(crate) fn has_vnni(self) -> bool {
        self.vnni
    }

    /// The same token without VBMI: q4_0's GEMV with the word permutes of a CPU without it
    /// (removing a feature is always safe).
    pub(crate) fn without_vbmi(self) -> Avx512 {
        Avx512 {
            vbmi: false,
            ..self
        }
    }

    /// Whether q4_0's 512-bit GEMV gathers by byte permutes (VBMI, with VNNI).
    pub(crate) fn has_vbmi(self) -> bool {
        self.vnni && self.vbmi
    }

    /// The level of the dispatch table (`bodies.rs`) this token runs.
    pub(crate) fn level(self) -> IsaLevel {
        if self.vnni {
            IsaLevel::Avx512Vnni
        } else {
            IsaLevel::Avx512
        }
    }

    /// As [`Avx2::qgemv_rows`], by the table of `bodies.rs`: 512-bit f32 FMA for the float
    /// formats; with VNNI, the 512-bit bodies of `quant/x86_wide.rs`; without VNNI, AVX2's.
    /// (Several activation rows at once, which no caller passes, run the 256-bit integer
    /// bodies, as the GEMM of a CPU without VNNI does.)
    pub(crate) fn qgemv_rows(
        self,
        format: WeightFormat,
        w: &[u8],
        acts: &[Activations<'_>],
        y: &mut [f32],
        threads: usize,
    ) {
        let body = gemv_body(self.level(), format);
        if matches!(body, GemvBody::Avx2Int | GemvBody::Avx2Wide) {
            return self.avx2.qgemv_rows(format, w, acts, y, threads);
        }
        qx86::check_all_rows(format, w, acts, y.len());
        if let [a] = acts
            && body == GemvBody::VnniWide
        {
            if a.wide().lines.is_empty() {
                // Only rows of no inputs have no wide codes (`quantize_for_call`): every
                // output is the empty sum.
                debug_assert!(a.x().is_empty());
                y.fill(0.0);
                return;
            }
            if self.has_vbmi() {
                // SAFETY: `vnni` is set only when `detect` found AVX512-VNNI, VL and BW
                // beside AVX-512F, AVX2, FMA and F16C, and `vbmi` only when it found
                // AVX512-VBMI; rows and the wide codes checked above.
                unsafe { qx86::qgemv_rows_wide_vbmi(format, w, *a, y, threads) }
            } else {
                // SAFETY: `vnni` is set only when `detect` found AVX512-VNNI, VL and BW
                // beside AVX-512F, AVX2, FMA and F16C; rows and the wide codes checked above.
                unsafe { qx86::qgemv_rows_wide(format, w, *a, y, threads) }
            }
        } else {
            // SAFETY: `self` exists, so `detect` found AVX-512F, AVX2, FMA and F16C; rows
            // checked above.
            unsafe { qx86::qgemm_rows_avx512(format, w, acts, y) }
        }
    }

    /// As [`Avx512::qgemv_rows`], for the GEMM: the quantized formats run the sixteen-row
    /// tiles of `quant/x86_tile.rs` (with VNNI; else AVX2's GEMM), not bitwise the GEMV.
    pub(crate) fn qgemm_rows(
        self,
        format: WeightFormat,
        w: &[u8],
        acts: &[Activations<'_>],
        y: &mut [f32],
    ) {
        if format.is_quantized() && !self.vnni {
            return self.avx2.qgemm_rows(format, w, acts, y);
        }
        qx86::check_all_rows(format, w, acts, y.len());
        if format.is_quantized() {
            // SAFETY: `vnni` is set only when `detect` found AVX512-VNNI and VL beside
            // AVX-512F, AVX2, FMA and F16C; rows checked above.
            unsafe { qx86::qgemm_tiles_vnni(format, w, acts, y) }
        } else {
            // SAFETY: `self` exists, so `detect` found AVX-512F, AVX2, FMA and F16C; rows
            // checked above.
            unsafe { qx86::qgemm_tiles_avx512(format, w, acts, y) }
        }
    }

    /// AVX-512 GEMV over `y.len()` rows (panics when `w` is shorter than `y.len() · x.len()`).
    pub(crate) fn gemv_rows(self, w: &[f32], x: &[f32], y: &mut [f32]) {
        assert!(
            kernel::rows_fit(w.len(), y.len(), x.len()),
            "gemv_rows: w too short"
        );
        // SAFETY: `self` exists, so `detect` found AVX-512F, AVX2, FMA and F16C; the length
        // is checked above.
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

/// AVX2 GEMV rows: the f32 cell of the GEMV table (`avx2-f32`, the body `qgemv` runs on f32
/// weights), not a body of its own.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `w.len() >= y.len() * x.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemv_rows_avx2(w: &[f32], x: &[f32], y: &mut [f32]) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { qx86::gemv_f32::<8>(w, x, y) }
}

/// AVX-512 GEMV rows: the f32 cell of the GEMV table (`avx512-f32`).
///
/// # Safety
/// The CPU has AVX-512F, AVX2, FMA and F16C; `w.len() >= y.len() * x.len()`.
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
unsafe fn gemv_rows_avx512(w: &[f32], x: &[f32], y: &mut [f32]) {
    // SAFETY: forwarded contract; the features are enabled on this function.
    unsafe { qx86::gemv_f32::<16>(w, x, y) }
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
