//! SIMD fp32 GEMV/GEMM for the LLM weight layout (`W` is `n_out × n_in`, row-major), run on
//! the [`threadpool`] by any schedule policy.
//!
//! - [`gemv`] computes `y = W·x`; [`gemm`] computes `Y = X·Wᵀ` for a small batch `X`
//!   (`m × n_in`, m = 1…64 tokens), reading each weight row from memory once per call.
//! - [`gemv_parallel`] / [`gemm_parallel`] split the output rows (weight rows) over a
//!   [`ThreadPool`] by a [`SchedulePolicy`]. Each output element is computed by one thread in an
//!   order fixed by the ISA and the shape alone, so the result is **bitwise identical** for
//!   every policy and thread count.
//! - [`stream_read`] is the physical reference: a STREAM-style SIMD sum over a buffer with the
//!   same rows and the same split as the GEMV.
//! - [`WeightBuffer`] is a 64-byte aligned buffer that asks for transparent huge pages.
//!
//! # Instruction sets
//! [`Isa`] names the kernels: AVX-512F, AVX2+FMA and a portable one (eight-lane arrays with
//! many independent accumulators, vectorized by the compiler on any target) that is the
//! reference. The CPU is detected once; `SIPLLM_KERNEL=portable|avx2|avx512` forces one.
//! [`try_selected`] reports an unknown or unavailable forced kernel as an error;
//! [`selected`] never fails: it prints a warning on stderr once and falls back to the best
//! detected kernel. The `*_with` functions run a given ISA (tests and benches).
//!
//! # Accuracy
//! Every kernel sums products in f32. The SIMD kernels use FMA, the portable one rounds the
//! product and the sum separately, so results differ between ISAs in the last bits. With
//! `L` lanes (8 portable/AVX2, 16 AVX-512), each GEMV output is a sum of `2L` sequential
//! partial sums of about `n_in / 2L` terms each, combined by a pairwise tree; each GEMM output
//! is a sum of `L` partial sums of `n_in / L` terms. The standard bound applies to both:
//! `|ŷ − y| ≤ γ(n) · Σ_k |w_k·x_k|` with `γ(n) = n·u / (1 − n·u)`, `u = 2⁻²⁴` and
//! `n = ⌈n_in / L⌉ + log2(2L) + 2` roundings on the longest path. The tests check every kernel
//! against an f64 reference with exactly this bound.
//!
//! # Example
//! ```
//! use matmul_kernel::{gemv_parallel, gemv};
//! use threadpool::{SchedulePolicy, ThreadPool};
//!
//! let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2 × 3
//! let x = [1.0, 1.0, 1.0];
//! let mut y = [0.0; 2];
//! gemv(&w, &x, &mut y)?;
//! assert_eq!(y, [6.0, 15.0]);
//!
//! let pool = ThreadPool::new(2);
//! let mut y2 = [0.0; 2];
//! gemv_parallel(&pool, SchedulePolicy::Fixed16, &w, &x, &mut y2)?;
//! assert_eq!(y, y2);
//! # Ok::<(), matmul_kernel::MatmulError>(())
//! ```
#![deny(missing_docs)]

mod buffer;
mod kernel;
mod portable;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;

pub use buffer::{HugePages, WEIGHT_ALIGN, WeightBuffer};

/// The revision of the kernels' code. Bump it with any change that can change their speed:
/// a tuning measured with another revision is stale (the tuner's cache compares it).
pub const KERNEL_REVISION: u32 = 1;

use kernel::GemmDims;
use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::sync::OnceLock;
use threadpool::{SchedulePolicy, ThreadPool};

/// The environment variable that forces a kernel: `portable`, `avx2` or `avx512`.
pub const KERNEL_ENV: &str = "SIPLLM_KERNEL";

/// An instruction set a kernel is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Portable kernel with independent accumulators; the reference.
    Portable,
    /// AVX2 + FMA.
    Avx2,
    /// AVX-512F.
    Avx512,
}

impl Isa {
    /// Every ISA, from the most portable to the widest.
    pub const ALL: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// The lowercase name (`portable`, `avx2`, `avx512`), as `SIPLLM_KERNEL` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Whether this CPU (and this build's target) can run the kernel.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 => false,
        }
    }

    /// The widest kernel this CPU can run.
    pub fn best_available() -> Isa {
        Isa::ALL
            .into_iter()
            .rev()
            .find(|isa| isa.is_available())
            .unwrap_or(Isa::Portable)
    }

    /// `Ok(self)` when the CPU can run it, else [`MatmulError::UnavailableIsa`].
    pub fn ensure_available(self) -> Result<Isa, MatmulError> {
        if self.is_available() {
            Ok(self)
        } else {
            Err(MatmulError::UnavailableIsa(self))
        }
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Isa {
    type Err = MatmulError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim().to_ascii_lowercase();
        Isa::ALL
            .into_iter()
            .find(|isa| isa.name() == name)
            .ok_or_else(|| MatmulError::UnknownIsa(s.to_string()))
    }
}

/// Errors of the public kernel API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatmulError {
    /// Slice lengths do not match the shape.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// A kernel name that is none of `portable`, `avx2`, `avx512`.
    #[error("unknown kernel {0:?} (expected portable, avx2 or avx512)")]
    UnknownIsa(String),
    /// A kernel this CPU cannot run.
    #[error("kernel {0} is not available on this cpu")]
    UnavailableIsa(Isa),
    /// A [`WeightBuffer`] could not be allocated.
    #[error("weight buffer: {0}")]
    Alloc(String),
    /// The thread pool could not run the call (a worker thread died).
    #[error("thread pool: {0}")]
    Pool(String),
}

/// The kernel `SIPLLM_KERNEL` asks for, checked against this CPU; the best available one when
/// the variable is unset or empty. Reads the environment on every call.
pub fn try_selected() -> Result<Isa, MatmulError> {
    isa_from_env_value(std::env::var(KERNEL_ENV).ok().as_deref())
}

/// [`try_selected`] for a given value of `SIPLLM_KERNEL` (`None`: unset).
pub fn isa_from_env_value(value: Option<&str>) -> Result<Isa, MatmulError> {
    match value.map(str::trim) {
        None | Some("") => Ok(Isa::best_available()),
        Some(name) => name.parse::<Isa>()?.ensure_available(),
    }
}

/// The kernel that runs (after `SIPLLM_KERNEL`), for the tuner's cache signature.
///
/// Decided once per process. When `SIPLLM_KERNEL` names an unknown kernel or one this CPU
/// lacks, this prints a warning on stderr and falls back to the best available kernel; call
/// [`try_selected`] to get the error instead.
pub fn selected() -> Isa {
    static SELECTED: OnceLock<Isa> = OnceLock::new();
    *SELECTED.get_or_init(|| {
        try_selected().unwrap_or_else(|e| {
            let best = Isa::best_available();
            eprintln!("warning: {KERNEL_ENV}: {e}; using {best}");
            best
        })
    })
}

fn check_gemv_shape(w: &[f32], x: &[f32], y: &[f32]) -> Result<(), MatmulError> {
    let expected = x.len().checked_mul(y.len());
    if expected != Some(w.len()) {
        return Err(MatmulError::Shape(format!(
            "w has {} elements, expected n_out {} x n_in {}",
            w.len(),
            y.len(),
            x.len()
        )));
    }
    Ok(())
}

/// Runs the GEMV kernel of a checked-available `isa` over `y.len()` rows.
fn gemv_rows(isa: Isa, w: &[f32], x: &[f32], y: &mut [f32]) {
    match isa {
        Isa::Portable => portable::gemv_rows(w, x, y),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: callers pass an ISA that `ensure_available` accepted; shapes are checked.
        Isa::Avx2 => unsafe { x86::gemv_rows_avx2(w, x, y) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Isa::Avx512 => unsafe { x86::gemv_rows_avx512(w, x, y) },
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2 | Isa::Avx512 => portable::gemv_rows(w, x, y),
    }
}

/// `y = W·x` with `W` `y.len() × x.len()` row-major, on the [`selected`] kernel.
pub fn gemv(w: &[f32], x: &[f32], y: &mut [f32]) -> Result<(), MatmulError> {
    gemv_with(selected(), w, x, y)
}

/// [`gemv`] on a given kernel; [`MatmulError::UnavailableIsa`] when the CPU lacks it.
pub fn gemv_with(isa: Isa, w: &[f32], x: &[f32], y: &mut [f32]) -> Result<(), MatmulError> {
    let isa = isa.ensure_available()?;
    check_gemv_shape(w, x, y)?;
    gemv_rows(isa, w, x, y);
    Ok(())
}

/// [`gemv`] with output rows split over `pool` by `policy`.
pub fn gemv_parallel(
    pool: &ThreadPool,
    policy: SchedulePolicy,
    w: &[f32],
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    gemv_parallel_with(selected(), pool, policy, w, x, y)
}

/// [`gemv_parallel`] on a given kernel.
pub fn gemv_parallel_with(
    isa: Isa,
    pool: &ThreadPool,
    policy: SchedulePolicy,
    w: &[f32],
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    let isa = isa.ensure_available()?;
    check_gemv_shape(w, x, y)?;
    let n_in = x.len();
    let n_out = y.len();
    let y_out = SharedOut::new(y);
    pool.parallel_for(n_out, policy, |rows: Range<usize>| {
        // SAFETY: `parallel_for` hands out every row index exactly once, so the ranges of
        // different calls are disjoint; `slice` clamps to `n_out`.
        let y_rows = unsafe { y_out.slice(rows.clone()) };
        let w_rows = &w[rows.start.min(n_out) * n_in..];
        gemv_rows(isa, w_rows, x, y_rows);
    })
    .map_err(|e| MatmulError::Pool(e.to_string()))
}

/// The shape of one [`gemm`]: `X` is `m × n_in`, `W` is `n_out × n_in`, `Y` is `m × n_out`,
/// all row-major.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GemmShape {
    /// Rows of `X` and `Y` (tokens in the batch).
    pub m: usize,
    /// Columns of `X` and `W` (input features).
    pub n_in: usize,
    /// Rows of `W`, columns of `Y` (output features).
    pub n_out: usize,
}

impl GemmShape {
    fn check(self, w: &[f32], x: &[f32], y: &[f32]) -> Result<GemmDims, MatmulError> {
        let GemmShape { m, n_in, n_out } = self;
        let mismatch = |what: &str, got: usize, rows: usize, cols: usize| {
            MatmulError::Shape(format!(
                "{what} has {got} elements, expected {rows} x {cols}"
            ))
        };
        if m.checked_mul(n_in) != Some(x.len()) {
            return Err(mismatch("x", x.len(), m, n_in));
        }
        if n_out.checked_mul(n_in) != Some(w.len()) {
            return Err(mismatch("w", w.len(), n_out, n_in));
        }
        if m.checked_mul(n_out) != Some(y.len()) {
            return Err(mismatch("y", y.len(), m, n_out));
        }
        Ok(GemmDims { m, n_in, n_out })
    }
}

/// Runs the GEMM kernel of a checked-available `isa` for columns `cols` of `Y`.
///
/// # Safety
/// `dims` was checked against the slices behind `x`, `w`, `y`; no other thread writes
/// columns `cols` of `Y`; `cols.end <= n_out`.
unsafe fn gemm_cols(
    isa: Isa,
    dims: GemmDims,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    cols: Range<usize>,
) {
    // SAFETY: the ISA was checked available by the caller; pointer contract forwarded.
    unsafe {
        match isa {
            Isa::Portable => portable::gemm_cols(dims, x, w, y, cols),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86::gemm_cols_avx2(dims, x, w, y, cols),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => x86::gemm_cols_avx512(dims, x, w, y, cols),
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 => portable::gemm_cols(dims, x, w, y, cols),
        }
    }
}

/// `Y = X·Wᵀ` (`shape.m × shape.n_out`) on the [`selected`] kernel; each weight row is read
/// from memory once per call.
pub fn gemm(shape: GemmShape, w: &[f32], x: &[f32], y: &mut [f32]) -> Result<(), MatmulError> {
    gemm_with(selected(), shape, w, x, y)
}

/// [`gemm`] on a given kernel.
pub fn gemm_with(
    isa: Isa,
    shape: GemmShape,
    w: &[f32],
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    let isa = isa.ensure_available()?;
    let dims = shape.check(w, x, y)?;
    // SAFETY: shapes checked; this thread owns all of `y`.
    unsafe {
        gemm_cols(
            isa,
            dims,
            x.as_ptr(),
            w.as_ptr(),
            y.as_mut_ptr(),
            0..dims.n_out,
        )
    };
    Ok(())
}

/// [`gemm`] with the weight rows (columns of `Y`) split over `pool` by `policy`.
pub fn gemm_parallel(
    pool: &ThreadPool,
    policy: SchedulePolicy,
    shape: GemmShape,
    w: &[f32],
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    gemm_parallel_with(selected(), pool, policy, shape, w, x, y)
}

/// [`gemm_parallel`] on a given kernel.
pub fn gemm_parallel_with(
    isa: Isa,
    pool: &ThreadPool,
    policy: SchedulePolicy,
    shape: GemmShape,
    w: &[f32],
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    let isa = isa.ensure_available()?;
    let dims = shape.check(w, x, y)?;
    let y_out = SharedOut::new(y);
    pool.parallel_for(dims.n_out, policy, |cols: Range<usize>| {
        let cols = cols.start.min(dims.n_out)..cols.end.min(dims.n_out);
        // SAFETY: shapes checked; `parallel_for` hands out every column exactly once, so no
        // two calls write the same column of `Y`; `cols` is clamped to `n_out`.
        unsafe { gemm_cols(isa, dims, x.as_ptr(), w.as_ptr(), y_out.as_ptr(), cols) };
    })
    .map_err(|e| MatmulError::Pool(e.to_string()))
}

/// `row_sums[r] = Σ buf[r·row_len .. (r+1)·row_len]` with `row_len = buf.len() /
/// row_sums.len()`: the STREAM-style read-bandwidth kernel on the [`selected`] ISA, split over
/// `pool` by `policy` like [`gemv_parallel`]. Give it a buffer of the GEMV's weight size and
/// `n_out` rows to get the same-size reference.
pub fn stream_read(
    pool: &ThreadPool,
    policy: SchedulePolicy,
    buf: &[f32],
    row_sums: &mut [f32],
) -> Result<(), MatmulError> {
    stream_read_with(selected(), pool, policy, buf, row_sums)
}

/// [`stream_read`] on a given kernel.
pub fn stream_read_with(
    isa: Isa,
    pool: &ThreadPool,
    policy: SchedulePolicy,
    buf: &[f32],
    row_sums: &mut [f32],
) -> Result<(), MatmulError> {
    let isa = isa.ensure_available()?;
    let n_rows = row_sums.len();
    let row_len = buf.len().checked_div(n_rows).unwrap_or(0);
    if row_len * n_rows != buf.len() {
        return Err(MatmulError::Shape(format!(
            "buf has {} elements, not a multiple of {n_rows} rows",
            buf.len()
        )));
    }
    let sums_out = SharedOut::new(row_sums);
    pool.parallel_for(n_rows, policy, |rows: Range<usize>| {
        // SAFETY: `parallel_for` hands out every row index exactly once; `slice` clamps.
        let sums = unsafe { sums_out.slice(rows.clone()) };
        let rows_buf = &buf[rows.start.min(n_rows) * row_len..];
        match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the ISA was checked available; `rows_buf` holds the rows.
            Isa::Avx2 => unsafe { x86::read_rows_avx2(rows_buf, row_len, sums) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx512 => unsafe { x86::read_rows_avx512(rows_buf, row_len, sums) },
            _ => portable::read_rows(rows_buf, row_len, sums),
        }
    })
    .map_err(|e| MatmulError::Pool(e.to_string()))
}

/// An output slice shared by the workers of one `parallel_for`, each writing its own rows.
struct SharedOut {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: workers only write disjoint ranges (see `slice`), handed out by `parallel_for`.
unsafe impl Sync for SharedOut {}

impl SharedOut {
    fn new(out: &mut [f32]) -> Self {
        SharedOut {
            ptr: out.as_mut_ptr(),
            len: out.len(),
        }
    }

    /// The start of the whole slice (method, so closures capture `self`, which is `Sync`).
    fn as_ptr(&self) -> *mut f32 {
        self.ptr
    }

    /// The elements `range` (clamped to the slice).
    ///
    /// # Safety
    /// No other live reference covers any element of `range`.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice(&self, range: Range<usize>) -> &mut [f32] {
        let end = range.end.min(self.len);
        let start = range.start.min(end);
        // SAFETY: `start..end` lies inside the slice `new` borrowed mutably for the lifetime of
        // the `parallel_for`; exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), end - start) }
    }
}
