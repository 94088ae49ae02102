//! Our quantized GEMV and GEMM on a [`WeightMatrix`] of any format, and the same-size read.

use super::matmul::POLICY;
use matmul_kernel::{Kernel, WeightMatrix};
use threadpool::ThreadPool;

/// `y = W·x` by our quantized GEMV on `kernel`, split over `pool` by [`POLICY`]. Panics on a
/// shape the kernel refuses: a bench with a wrong shape measures nothing.
pub fn qgemv(kernel: Kernel, pool: &ThreadPool, w: &WeightMatrix, x: &[f32], y: &mut [f32]) {
    if let Err(err) = matmul_kernel::Exec::new()
        .kernel(kernel)
        .pool(pool)
        .policy(POLICY)
        .qgemv(w, x, y)
    {
        panic!("qgemv {}: {err}", w.format());
    }
}

/// `Y = X·Wᵀ` by our quantized GEMM on `kernel` (`x` holds `m` tokens of `n_in`, `y` their
/// `m × n_out` outputs), split over `pool` by [`POLICY`]. Panics on a shape the kernel
/// refuses.
pub fn qgemm(kernel: Kernel, pool: &ThreadPool, w: &WeightMatrix, x: &[f32], y: &mut [f32]) {
    if let Err(err) = matmul_kernel::Exec::new()
        .kernel(kernel)
        .pool(pool)
        .policy(POLICY)
        .qgemm(w, x, y)
    {
        panic!("qgemm {}: {err}", w.format());
    }
}

/// Our STREAM-style read of `buf` into `row_sums` on `kernel`, split over `pool` by
/// [`POLICY`]: with a buffer of a matrix's byte size and its `n_out` rows, the same-size
/// reference of [`qgemv`].
pub fn read(kernel: Kernel, pool: &ThreadPool, buf: &[f32], row_sums: &mut [f32]) {
    if let Err(err) = matmul_kernel::Exec::new()
        .kernel(kernel)
        .pool(pool)
        .policy(POLICY)
        .stream_read(buf, row_sums)
    {
        panic!("stream read: {err}");
    }
}
