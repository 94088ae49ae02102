//! SIMD fp32 GEMV/GEMM for the LLM weight layout (`W` is `n_out × n_in`, row-major), run on
//! the [`threadpool`] by any schedule policy.
//!
//! - [`Exec`] runs every operation: it names the [`Kernel`] ([`selected`] unless
//!   [`Exec::kernel`] names another) and where the output rows go (the calling thread, or a
//!   [`ThreadPool`] by [`Exec::pool`], split by the pool's own [`SchedulePolicy`] unless
//!   [`Exec::policy`] names another). Each output element is computed by one thread in an
//!   order fixed by the ISA and the shape alone, so the result is **bitwise identical** with
//!   or without a pool, for every policy and thread count.
//! - [`Exec::gemv`] computes `y = W·x`; [`Exec::gemm`] computes `Y = X·Wᵀ` for a small batch
//!   `X` (`m × n_in`, m = 1…64 tokens), reading each weight row from memory once per call.
//! - [`Exec::stream_read`] is the physical reference: a STREAM-style SIMD sum over a buffer
//!   with the same rows and the same split as the GEMV.
//! - [`WeightBuffer`] is a 64-byte aligned buffer that asks for transparent huge pages
//!   ([`WeightBytes`] is its byte twin).
//! - [`WeightFormat`] names the weight formats of GGUF files (f32, f16, bf16, q8_0, q4_0, q4_K,
//!   q6_K); [`BlockQ8_0`], [`BlockQ4_0`], [`BlockQ4K`] and [`BlockQ6K`] are their blocks, byte for
//!   byte; [`dequantize_row`] is the portable reference, [`quantize_row`] the quantizers, and
//!   [`WeightMatrix`] a matrix of any format in a [`WeightBytes`]. [`Exec::qgemv`] and
//!   [`Exec::qgemm`] run a GEMV and a GEMM on a [`WeightMatrix`] of any format, with the same
//!   contracts as the f32 ones; [`Exec::qgemv`] describes their numerics per format and their
//!   error bound.
//!
//! # Instruction sets
//! [`Isa`] names the kernels: AVX-512F and AVX2+FMA on x86-64, NEON on aarch64, and a
//! portable one (eight-lane arrays with many independent accumulators, vectorized by the
//! compiler on any target) that is the reference. A name runs nothing: a [`Kernel`] does, and only detection makes one
//! ([`Isa::token`], [`Kernel::best`], [`selection`]), so [`Exec::kernel`], which takes a
//! [`Kernel`], runs only instructions this CPU has.
//!
//! `SIPLLM_KERNEL=portable|neon|avx2|avx512` forces a kernel. [`selection`] reads it once per
//! process and never fails or prints: an unknown or unavailable name falls back to
//! [`Kernel::best`], and [`Selection::warning`] says why, for the caller to show.
//! [`try_selected`] returns that refusal as an error instead. [`Exec::new`] runs
//! [`selected`].
//!
//! # Accuracy
//! Every kernel sums products in f32. The SIMD kernels use FMA, the portable one rounds the
//! product and the sum separately, so results differ between ISAs in the last bits. With
//! `L` lanes (4 NEON, 8 portable/AVX2, 16 AVX-512), each GEMV output is a sum of `2L` sequential
//! partial sums of about `n_in / 2L` terms each, combined by a pairwise tree; each GEMM output
//! is a sum of `L` partial sums of `n_in / L` terms. The standard bound applies to both:
//! `|ŷ − y| ≤ γ(n) · Σ_k |w_k·x_k|` with `γ(n) = n·u / (1 − n·u)`, `u = 2⁻²⁴` and
//! `n = ⌈n_in / L⌉ + log2(2L) + 2` roundings on the longest path. The tests check every kernel
//! against an f64 reference with exactly this bound.
//!
//! # Example
//! ```
//! use matmul_kernel::{Exec, Isa};
//! use threadpool::{SchedulePolicy, ThreadPool};
//!
//! let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2 × 3
//! let x = [1.0, 1.0, 1.0];
//! let mut y = [0.0; 2];
//! Exec::new().gemv(&w, &x, &mut y)?;
//! assert_eq!(y, [6.0, 15.0]);
//!
//! // The portable kernel runs everywhere; a SIMD one only where detection allows.
//! let portable = Isa::Portable.token()?;
//! let pool = ThreadPool::new(2);
//! let mut y2 = [0.0; 2];
//! let exec = Exec::new().kernel(portable).pool(&pool).policy(SchedulePolicy::Fixed16);
//! exec.gemv(&w, &x, &mut y2)?;
//! assert_eq!(y, y2);
//!
//! // What `SIPLLM_KERNEL` chose for this process, and why it was refused, if it was.
//! let selection = matmul_kernel::selection();
//! if let Some(warning) = selection.warning() {
//!     eprintln!("warning: {warning}");
//! }
//! # Ok::<(), matmul_kernel::MatmulError>(())
//! ```
#![deny(missing_docs)]

#[cfg(target_arch = "aarch64")]
mod aarch64;
mod bodies;
mod buffer;
mod exec;
mod isa;
mod kernel;
mod portable;
mod qmatmul;
mod quant;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;

pub use bodies::{GemmBody, GemvBody, IsaLevel, gemm_body, gemv_body};
pub use buffer::{HugePages, WEIGHT_ALIGN, WeightBuffer, WeightBytes};
pub use exec::Exec;
pub use isa::{
    Isa, KERNEL_ENV, Kernel, Selection, kernel_from_env_value, selected, selection, try_selected,
};
pub use quant::{
    BlockQ4_0, BlockQ4K, BlockQ6K, BlockQ8_0, WeightFormat, WeightMatrix, WeightShape,
    dequantize_row, quantize_row, validate_row,
};

/// The revision of the kernels' code. Bump it with any change that can change their speed:
/// a tuning measured with another revision is stale (the tuner's cache compares it).
pub const KERNEL_REVISION: u32 = 5;

/// The `opt-level` this crate was compiled with (`"0"` in a debug build of a program that
/// does not optimize its dependencies): the tuner refuses to measure unoptimized kernels.
pub const BUILD_OPT_LEVEL: &str = env!("SIPLLM_BUILD_OPT_LEVEL");

use kernel::GemmDims;
use std::ops::Range;
use threadpool::{SchedulePolicy, ThreadPool};

/// Errors of the public kernel API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatmulError {
    /// Slice lengths do not match the shape.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// A kernel name that is none of `portable`, `neon`, `avx2`, `avx512`.
    #[error("unknown kernel {0:?} (expected portable, neon, avx2 or avx512)")]
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
    /// A weight format name that is none of [`WeightFormat`]'s.
    #[error("unknown weight format {0:?} (expected f32, f16, bf16, q8_0, q4_0, q4_K or q6_K)")]
    UnknownFormat(String),
    /// Weights that no valid tensor of their format holds (a non-finite scale or value), or
    /// values a quantizer cannot represent.
    #[error("invalid weights: {0}")]
    InvalidWeights(String),
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

/// Where the output rows of one call run: on the calling thread, or split over a pool. The
/// serial and parallel calls of [`Exec`] share one body per operation through it.
#[derive(Clone, Copy)]
enum Split<'a> {
    /// All rows, in one range, on the calling thread.
    Serial,
    /// Rows handed out by `parallel_for`.
    Pool(&'a ThreadPool, SchedulePolicy),
}

impl Split<'_> {
    /// Calls `f` on ranges that cover `0..n_items`, each index exactly once.
    fn for_ranges(
        self,
        n_items: usize,
        f: impl Fn(Range<usize>) + Sync,
    ) -> Result<(), MatmulError> {
        match self {
            Split::Serial => {
                f(0..n_items);
                Ok(())
            }
            Split::Pool(pool, policy) => pool
                .parallel_for(n_items, policy, f)
                .map_err(|e| MatmulError::Pool(e.to_string())),
        }
    }

    /// Calls `f(rows, out_rows)` for ranges covering the rows of `out`, each exactly once,
    /// with `out_rows` the elements `rows` of `out`: the one place where workers write
    /// output rows through a shared pointer. `rows` is clamped to `out.len()`.
    fn for_output_rows(
        self,
        out: &mut [f32],
        f: impl Fn(Range<usize>, &mut [f32]) + Sync,
    ) -> Result<(), MatmulError> {
        let n_rows = out.len();
        let shared = SharedOut::new(out);
        self.for_ranges(n_rows, |rows: Range<usize>| {
            // SAFETY: `for_ranges` hands out every row index exactly once, so the ranges of
            // different calls are disjoint; `slice` clamps to `n_rows`.
            let out_rows = unsafe { shared.slice(rows.clone()) };
            f(rows.start.min(n_rows)..rows.end.min(n_rows), out_rows);
        })
    }
}

/// The body of [`Exec::gemv`].
pub(crate) fn gemv_split(
    kernel: Kernel,
    split: Split<'_>,
    w: &[f32],
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    check_gemv_shape(w, x, y)?;
    let n_in = x.len();
    split.for_output_rows(y, |rows, y_rows| {
        kernel.gemv_rows(&w[rows.start * n_in..], x, y_rows);
    })
}

/// The shape of one [`Exec::gemm`]: `X` is `m × n_in`, `W` is `n_out × n_in`, `Y` is `m × n_out`,
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

/// The body of [`Exec::gemm`].
pub(crate) fn gemm_split(
    kernel: Kernel,
    split: Split<'_>,
    shape: GemmShape,
    w: &[f32],
    x: &[f32],
    y: &mut [f32],
) -> Result<(), MatmulError> {
    let dims = shape.check(w, x, y)?;
    let y_out = SharedOut::new(y);
    split.for_ranges(dims.n_out, |cols: Range<usize>| {
        let cols = cols.start.min(dims.n_out)..cols.end.min(dims.n_out);
        // SAFETY: shapes checked; `for_ranges` hands out every column exactly once, so no
        // two calls write the same column of `Y`; `cols` is clamped to `n_out`.
        unsafe { kernel.gemm_cols(dims, x.as_ptr(), w.as_ptr(), y_out.as_ptr(), cols) };
    })
}

/// The body of [`Exec::stream_read`].
pub(crate) fn stream_read_split(
    kernel: Kernel,
    split: Split<'_>,
    buf: &[f32],
    row_sums: &mut [f32],
) -> Result<(), MatmulError> {
    let n_rows = row_sums.len();
    let row_len = buf.len().checked_div(n_rows).unwrap_or(0);
    if row_len * n_rows != buf.len() {
        return Err(MatmulError::Shape(format!(
            "buf has {} elements, not a multiple of {n_rows} rows",
            buf.len()
        )));
    }
    split.for_output_rows(row_sums, |rows, sums| {
        kernel.read_rows(&buf[rows.start * row_len..], row_len, sums);
    })
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
