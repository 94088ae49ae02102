//! The crate's one error type.

use crate::isa_name::Isa;

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
    /// A [`WeightBuffer`](crate::WeightBuffer) could not be allocated.
    #[error("weight buffer: {0}")]
    Alloc(String),
    /// The thread pool could not run the call (a worker thread died).
    #[error("thread pool: {0}")]
    Pool(String),
    /// A weight format name that is none of [`WeightFormat`](crate::WeightFormat)'s.
    #[error("unknown weight format {0:?} (expected f32, f16, bf16, q8_0, q4_0, q4_K or q6_K)")]
    UnknownFormat(String),
    /// Weights that no valid tensor of their format holds (a non-finite scale or value), or
    /// values a quantizer cannot represent.
    #[error("invalid weights: {0}")]
    InvalidWeights(String),
    /// `SIPLLM_WALK`, the `walk-override` feature's override of the walk rules, does not
    /// parse.
    #[error("SIPLLM_WALK: {0}")]
    WalkOverride(String),
}
