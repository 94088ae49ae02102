//! The GEMV/GEMM contenders: our kernels on a given ISA, and the peers on a rayon pool of
//! the same size (OpenBLAS through `openblas_set_num_threads`).

use matmul_kernel::{GemmShape, Isa, Kernel};
use threadpool::{SchedulePolicy, ThreadPool};

/// The policy our kernels run under in the benches.
pub const POLICY: SchedulePolicy = SchedulePolicy::Static;

/// The pools of one thread count: ours, and a rayon pool of the same size for the peers.
pub struct Pools {
    /// Threads in each pool.
    pub n_threads: usize,
    /// Our pool.
    pub ours: ThreadPool,
    /// The rayon pool the rayon-based peers run in.
    pub rayon: rayon::ThreadPool,
}

impl Pools {
    /// Both pools of `n_threads`.
    pub fn new(n_threads: usize) -> Self {
        Pools {
            n_threads,
            ours: ThreadPool::new(n_threads),
            rayon: super::rayon_pool::rayon_pool(n_threads),
        }
    }
}

/// What is multiplied, all matrices row-major.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// `y = W·x`, `W` being `y.len() × x.len()`.
    Gemv,
    /// `Y = X·Wᵀ` for a batch of tokens.
    Gemm(GemmShape),
}

impl Op {
    /// `gemv` or `gemm`.
    pub fn name(self) -> &'static str {
        match self {
            Op::Gemv => "gemv",
            Op::Gemm(_) => "gemm",
        }
    }
}

/// One GEMV/GEMM implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matmul {
    /// Our kernel on this instruction set, on our pool.
    Ours(Kernel),
    /// A peer crate or library.
    Peer(Peer),
}

/// The peers, each with its parallelism set to the thread count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// `faer::linalg::matmul::matmul`.
    Faer,
    /// The `gemm` crate.
    Gemm,
    /// OpenBLAS `cblas_sgemv`/`cblas_sgemm` (Debian's `libopenblas`).
    #[cfg(feature = "openblas")]
    OpenBlas,
}

impl Matmul {
    /// The peers measured in this build, faer first.
    pub fn peers() -> Vec<Matmul> {
        vec![
            Matmul::Peer(Peer::Faer),
            Matmul::Peer(Peer::Gemm),
            #[cfg(feature = "openblas")]
            Matmul::Peer(Peer::OpenBlas),
        ]
    }

    /// Ours on every ISA this CPU can run, then the peers.
    pub fn every_available() -> Vec<Matmul> {
        Isa::ALL
            .into_iter()
            .filter_map(|isa| isa.token().ok())
            .map(Matmul::Ours)
            .chain(Matmul::peers())
            .collect()
    }

    /// The name in reports: `ours_avx2`, `faer`, `gemm`, `openblas`.
    pub fn name(self) -> String {
        match self {
            Matmul::Ours(isa) => format!("ours_{isa}"),
            Matmul::Peer(Peer::Faer) => "faer".to_string(),
            Matmul::Peer(Peer::Gemm) => "gemm".to_string(),
            #[cfg(feature = "openblas")]
            Matmul::Peer(Peer::OpenBlas) => "openblas".to_string(),
        }
    }

    /// Runs `f` where this contender's threads are: a peer inside `pools.rayon` (the rayon
    /// peers take their threads from the current rayon pool), ours on the calling thread.
    /// Enter once around a timed loop, then call [`Matmul::run`] inside it.
    pub fn enter<R: Send>(self, pools: &Pools, f: impl FnOnce() -> R + Send) -> R {
        match self {
            Matmul::Ours(_) => f(),
            Matmul::Peer(_) => pools.rayon.install(f),
        }
    }

    /// One multiplication `op` of `w` and `x` into `y` on `pools`' threads. Panics on a
    /// shape the kernel refuses: a bench with a wrong shape measures nothing.
    pub fn run(self, op: Op, pools: &Pools, w: &[f32], x: &[f32], y: &mut [f32]) {
        let result = match (self, op) {
            (Matmul::Ours(isa), Op::Gemv) => matmul_kernel::Exec::new()
                .kernel(isa)
                .pool(&pools.ours)
                .policy(POLICY)
                .gemv(w, x, y),
            (Matmul::Ours(isa), Op::Gemm(shape)) => matmul_kernel::Exec::new()
                .kernel(isa)
                .pool(&pools.ours)
                .policy(POLICY)
                .gemm(shape, w, x, y),
            (Matmul::Peer(peer), Op::Gemv) => {
                peer_gemv(peer, pools.n_threads, w, x, y);
                Ok(())
            }
            (Matmul::Peer(peer), Op::Gemm(shape)) => {
                peer_gemm(peer, pools.n_threads, shape, w, x, y);
                Ok(())
            }
        };
        if let Err(err) = result {
            panic!("{} {}: {err}", self.name(), op.name());
        }
    }
}

/// Our STREAM-style read of `buf` into `row_sums` on the selected ISA: the same-size
/// reference for the GEMV.
pub fn stream_read(pools: &Pools, buf: &[f32], row_sums: &mut [f32]) {
    if let Err(err) = matmul_kernel::Exec::new()
        .pool(&pools.ours)
        .policy(POLICY)
        .stream_read(buf, row_sums)
    {
        panic!("stream read: {err}");
    }
}

/// `y = W·x` by `peer` on `n_threads` (called inside a rayon pool of that size).
fn peer_gemv(peer: Peer, n_threads: usize, w: &[f32], x: &[f32], y: &mut [f32]) {
    let (n_out, n_in) = (y.len(), x.len());
    match peer {
        Peer::Faer => {
            use faer::{Accum, MatMut, MatRef, Par};
            let par = if n_threads == 1 {
                Par::Seq
            } else {
                Par::rayon(n_threads)
            };
            faer::linalg::matmul::matmul(
                MatMut::from_column_major_slice_mut(y, n_out, 1),
                Accum::Replace,
                MatRef::from_row_major_slice(w, n_out, n_in),
                MatRef::from_column_major_slice(x, n_in, 1),
                1.0f32,
                par,
            );
        }
        Peer::Gemm => {
            let par = if n_threads == 1 {
                gemm::Parallelism::None
            } else {
                gemm::Parallelism::Rayon(n_threads)
            };
            // SAFETY: the strides describe `y` (n_out × 1), `w` (n_out × n_in, row-major) and
            // `x` (n_in × 1) exactly; `y` is exclusively borrowed.
            unsafe {
                gemm::gemm(
                    n_out,
                    1,
                    n_in,
                    y.as_mut_ptr(),
                    n_out as isize,
                    1,
                    false,
                    w.as_ptr(),
                    1,
                    n_in as isize,
                    x.as_ptr(),
                    n_in as isize,
                    1,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    par,
                );
            }
        }
        #[cfg(feature = "openblas")]
        Peer::OpenBlas => {
            use openblas::*;
            // SAFETY: row-major `w` (n_out × n_in, lda n_in), unit-stride `x` and `y` of the
            // stated lengths; `y` is exclusively borrowed.
            unsafe {
                openblas_set_num_threads(n_threads as i32);
                cblas_sgemv(
                    ROW_MAJOR,
                    NO_TRANS,
                    n_out as i32,
                    n_in as i32,
                    1.0,
                    w.as_ptr(),
                    n_in as i32,
                    x.as_ptr(),
                    1,
                    0.0,
                    y.as_mut_ptr(),
                    1,
                );
            }
        }
    }
}

/// `Y = X·Wᵀ` by `peer` on `n_threads` (called inside a rayon pool of that size).
fn peer_gemm(peer: Peer, n_threads: usize, shape: GemmShape, w: &[f32], x: &[f32], y: &mut [f32]) {
    let GemmShape { m, n_in, n_out } = shape;
    match peer {
        Peer::Faer => {
            use faer::{Accum, MatMut, MatRef, Par};
            let par = if n_threads == 1 {
                Par::Seq
            } else {
                Par::rayon(n_threads)
            };
            faer::linalg::matmul::matmul(
                MatMut::from_row_major_slice_mut(y, m, n_out),
                Accum::Replace,
                MatRef::from_row_major_slice(x, m, n_in),
                MatRef::from_row_major_slice(w, n_out, n_in).transpose(),
                1.0f32,
                par,
            );
        }
        Peer::Gemm => {
            let par = if n_threads == 1 {
                gemm::Parallelism::None
            } else {
                gemm::Parallelism::Rayon(n_threads)
            };
            // SAFETY: `y` is m × n_out row-major, `x` m × n_in row-major, and `Wᵀ` (n_in × n_out)
            // is `w` with row stride 1 and column stride n_in; `y` is exclusively borrowed.
            unsafe {
                gemm::gemm(
                    m,
                    n_out,
                    n_in,
                    y.as_mut_ptr(),
                    1,
                    n_out as isize,
                    false,
                    x.as_ptr(),
                    1,
                    n_in as isize,
                    w.as_ptr(),
                    n_in as isize,
                    1,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    par,
                );
            }
        }
        #[cfg(feature = "openblas")]
        Peer::OpenBlas => {
            use openblas::*;
            // SAFETY: row-major X (m × n_in), W (n_out × n_in) used transposed, Y (m × n_out),
            // leading dimensions as stated; `y` is exclusively borrowed.
            unsafe {
                openblas_set_num_threads(n_threads as i32);
                cblas_sgemm(
                    ROW_MAJOR,
                    NO_TRANS,
                    TRANS,
                    m as i32,
                    n_out as i32,
                    n_in as i32,
                    1.0,
                    x.as_ptr(),
                    n_in as i32,
                    w.as_ptr(),
                    n_in as i32,
                    0.0,
                    y.as_mut_ptr(),
                    n_out as i32,
                );
            }
        }
    }
}

/// OpenBLAS through its C interface (Debian's `libopenblas`).
#[cfg(feature = "openblas")]
mod openblas {
    #[link(name = "openblas")]
    unsafe extern "C" {
        pub fn openblas_set_num_threads(n_threads: i32);
        pub fn cblas_sgemv(
            order: i32,
            trans: i32,
            m: i32,
            n: i32,
            alpha: f32,
            a: *const f32,
            lda: i32,
            x: *const f32,
            incx: i32,
            beta: f32,
            y: *mut f32,
            incy: i32,
        );
        #[allow(clippy::too_many_arguments)]
        pub fn cblas_sgemm(
            order: i32,
            trans_a: i32,
            trans_b: i32,
            m: i32,
            n: i32,
            k: i32,
            alpha: f32,
            a: *const f32,
            lda: i32,
            b: *const f32,
            ldb: i32,
            beta: f32,
            c: *mut f32,
            ldc: i32,
        );
    }
    pub const ROW_MAJOR: i32 = 101;
    pub const NO_TRANS: i32 = 111;
    pub const TRANS: i32 = 112;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every contender computes the same product: a wrong stride in a peer's call would make
    /// the benches compare different work.
    #[test]
    fn every_contender_computes_the_same_product() {
        let (m, n_in, n_out) = (3, 37, 29);
        let w = crate::matmul::values(1, n_out * n_in);
        let x = crate::matmul::values(2, m * n_in);
        let mut expected = vec![0.0f32; m * n_out];
        for token in 0..m {
            for row in 0..n_out {
                expected[token * n_out + row] = (0..n_in)
                    .map(|k| w[row * n_in + k] * x[token * n_in + k])
                    .sum();
            }
        }
        let shape = GemmShape { m, n_in, n_out };
        for n_threads in [1, 2] {
            let pools = Pools::new(n_threads);
            for contender in Matmul::every_available() {
                let name = contender.name();
                let mut y = vec![f32::NAN; n_out];
                contender.enter(&pools, || {
                    contender.run(Op::Gemv, &pools, &w, &x[..n_in], &mut y)
                });
                assert_close(&name, &y, &expected[..n_out]);
                let mut y = vec![f32::NAN; m * n_out];
                contender.enter(&pools, || {
                    contender.run(Op::Gemm(shape), &pools, &w, &x, &mut y)
                });
                assert_close(&name, &y, &expected);
            }
        }
    }

    fn assert_close(name: &str, got: &[f32], expected: &[f32]) {
        for (idx, (g, e)) in got.iter().zip(expected).enumerate() {
            assert!(
                (g - e).abs() <= 1e-4 * (1.0 + e.abs()),
                "{name}: y[{idx}] = {g}, expected {e}"
            );
        }
    }
}
