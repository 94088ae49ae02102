//! SIMD fp32 GEMV/GEMM for the LLM weight layout (`W` is `n_out × n_in`, row-major), run on
//! the [`threadpool`] by any schedule policy.
//!
//! - [`Exec`] runs every operation: it names the [`Kernel`] ([`selected`] unless
//!   [`Exec::kernel`] names another) and where the output rows go (the calling thread, or a
//!   [`ThreadPool`](threadpool::ThreadPool) by [`Exec::pool`], split by the pool's own
//!   [`SchedulePolicy`](threadpool::SchedulePolicy) unless [`Exec::policy`] names another). Each output element is computed by one thread in an
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
//! - [`bodies`] is the dispatch table: which body a GEMV or a GEMM of each format runs at each
//!   ISA level ([`gemv_body`], [`gemm_body`]; [`Kernel::gemv_body`] for this kernel).
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
pub mod bodies;
mod buffer;
mod error;
mod exec;
mod isa;
mod isa_name;
mod kernel;
mod portable;
mod qmatmul;
mod quant;
mod split;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;

pub use bodies::{GemmBody, GemvBody, IsaLevel, gemm_body, gemv_body};
pub use buffer::{HugePages, WEIGHT_ALIGN, WeightBuffer, WeightBytes};
pub use error::MatmulError;
pub use exec::Exec;
pub use isa::{
    KERNEL_ENV, Kernel, Selection, cpuid_vendor, kernel_from_env_value, selected, selection,
    try_selected,
};
pub use isa_name::Isa;
pub use quant::{
    BlockQ4_0, BlockQ4K, BlockQ6K, BlockQ8_0, WeightFormat, WeightMatrix, WeightShape,
    dequantize_row, quantize_row, validate_row,
};
pub use split::GemmShape;

/// The revision of the kernels' code. Bump it with any change that can change their speed:
/// a tuning measured with another revision is stale (the tuner's cache compares it).
pub const KERNEL_REVISION: u32 = 43;

/// The environment variable a build with the `walk-override` feature reads: an override of
/// the x86 GEMV bodies' walk rules, for measuring one setting against another in one build
/// (see [`walk_override`]).
#[cfg(all(feature = "walk-override", target_arch = "x86_64"))]
pub const WALK_ENV: &str = "SIPLLM_WALK";

/// The override of the walk rules that [`WALK_ENV`] sets, in its normal form (`"rules"` when
/// it is unset or empty), or why it is refused (a refused override is not applied): `key=value`
/// pairs separated by commas, of `ahead` (the quantized bodies' prefetch distance in bytes, 0
/// to 16384), `q8_0` and `q6_K` (cache lines asked for per step, 0 to 8), `streams` and
/// `q4_streams` (rows read at once by the q8_0 and q6_K bodies, and by the 4-bit ones, 1 to
/// 6), `fill` (the cache the quantized bodies' prefetch fills, `l1` or `l2`) and `float` (the
/// float GEMV's prefetch: `l1`, 1 KiB ahead, or `l2`, 8 KiB ahead), e.g.
/// `ahead=4096,q8_0=0`. Each pair replaces that field of this CPU's rule
/// (`docs/matmul-kernel.md`, "Both vendors").
#[cfg(all(feature = "walk-override", target_arch = "x86_64"))]
pub fn walk_override() -> Result<String, MatmulError> {
    quant::WalkOverride::env()
        .map(|o| o.to_string())
        .map_err(MatmulError::WalkOverride)
}

/// Replaces the walk rules' override for every later call in this process ([`WALK_ENV`]'s
/// included) by `text`'s, in [`walk_override`]'s form, and returns its normal form; a text
/// that does not parse is refused and changes nothing. A measurement alternates two
/// settings call by call with it (`examples/qgemv_vs_read`, `QGEMV_WALKS`).
#[cfg(all(feature = "walk-override", target_arch = "x86_64"))]
pub fn set_walk_override(text: &str) -> Result<String, MatmulError> {
    quant::WalkOverride::set(text)
        .map(|o| o.to_string())
        .map_err(MatmulError::WalkOverride)
}

/// The `opt-level` this crate was compiled with (`"0"` in a debug build of a program that
/// does not optimize its dependencies): the tuner refuses to measure unoptimized kernels.
pub const BUILD_OPT_LEVEL: &str = env!("SIPLLM_BUILD_OPT_LEVEL");
