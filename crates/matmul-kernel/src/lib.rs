//! SIMD fp32 GEMV/GEMM for the LLM weight layout (`W` is `n_out × n_in`, row-major).
//!
//! Placeholder implementation: the API is final, the kernels are scalar.
#![deny(missing_docs)]

use std::fmt;
use threadpool::{SchedulePolicy, ThreadPool};

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
    /// The lowercase name (`portable`, `avx2`, `avx512`), as `SIPLLM_KERNEL` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of the public kernel API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatmulError {
    /// Slice lengths do not match the shape.
    #[error("shape mismatch: {0}")]
    Shape(String),
}

/// The kernel that runs (after `SIPLLM_KERNEL`), for the tuner's cache signature.
pub fn selected() -> Isa {
    Isa::Portable
}

/// y = W·x with W `y.len() × x.len()` row-major.
pub fn gemv(w: &[f32], x: &[f32], y: &mut [f32]) -> Result<(), MatmulError> {
    if w.len() != x.len() * y.len() {
        return Err(MatmulError::Shape(format!(
            "w has {} elements, expected {} x {}",
            w.len(),
            y.len(),
            x.len()
        )));
    }
    for (row, out) in w.chunks_exact(x.len().max(1)).zip(y.iter_mut()) {
        *out = row.iter().zip(x).map(|(a, b)| a * b).sum();
    }
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
    let _ = (pool, policy);
    gemv(w, x, y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemv_small() {
        let mut y = [0.0; 2];
        gemv(&[1.0, 2.0, 3.0, 4.0], &[1.0, 1.0], &mut y).unwrap();
        assert_eq!(y, [3.0, 7.0]);
    }
}
