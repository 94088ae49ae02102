//! Weight formats of GGUF files: their names and sizes ([`WeightFormat`]), their blocks as
//! plain structs ([`blocks`]), the portable reference dequantizers and the quantizers
//! ([`reference`]), and a matrix that owns its bytes ([`WeightMatrix`]).
//!
//! The blocks are ggml's, byte for byte, so a tensor's bytes as they lie in a `.gguf` file are
//! accepted as they are. The reference follows ggml's `dequantize_row_*` (`ggml-quants.c`)
//! operation for operation, and the tests check it bit for bit against gguf-py's
//! dequantizers on committed vectors (`tests/data/gguf_*.json`, made by
//! `scripts/gguf_vectors.py`). [`gemv`] is the portable GEMV body over these formats (the
//! reference: weights widened to f32), and [`activations`] the per-block quantization of the
//! activations that the SIMD bodies' integer dot products share.

#[cfg(target_arch = "aarch64")]
mod aarch64;
pub(crate) mod activations;
mod blocks;
mod format;
pub(crate) mod gemv;
mod matrix;
mod reference;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;
#[cfg(target_arch = "x86_64")]
mod x86_float;
#[cfg(target_arch = "x86_64")]
mod x86_int;
#[cfg(target_arch = "x86_64")]
mod x86_layout;
#[cfg(target_arch = "x86_64")]
mod x86_tile;
#[cfg(target_arch = "x86_64")]
mod x86_walk;
#[cfg(target_arch = "x86_64")]
mod x86_wide;

#[cfg(test)]
mod tests;

pub(crate) use blocks::BlockQ8x;
pub use blocks::{BlockQ4_0, BlockQ4K, BlockQ6K, BlockQ8_0};
pub use format::WeightFormat;
pub use matrix::{WeightMatrix, WeightShape};
pub use reference::{dequantize_row, quantize_row, validate_row};
#[cfg(all(feature = "walk-override", target_arch = "x86_64"))]
pub(crate) use x86_walk::WalkOverride;
