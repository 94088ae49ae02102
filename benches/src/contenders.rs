//! Every call the benches time, ours and the peers', defined once.
//!
//! The `perf` report and the criterion benches both run the contenders from here, so the
//! calls into `threadpool`, `matmul-kernel` and the peer crates are written in one place:
//! a changed signature is fixed here alone.
//!
//! - [`ForkJoin`]: an empty fork-join round trip on our pool, rayon's `broadcast` or
//!   `std::thread::scope`; [`fixed_work`] is a fixed amount of work on our pool.
//! - [`Matmul`]: GEMV/GEMM by our kernels on a given ISA or by a peer (`faer`, the `gemm`
//!   crate, OpenBLAS with the `openblas` feature); [`stream_read`] is the same-size read.
//! - [`qgemv`] and [`qgemm`] are our GEMV and GEMM on a quantized
//!   [`WeightMatrix`](matmul_kernel::WeightMatrix), [`read`] the GEMV's same-size read; [`candle`] is the quantized peer (candle's `QMatMul`).
//! - [`detect`]: detecting this machine; [`CachedTune`]: `tune_if_needed` answered from a
//!   profile cached in a temporary home.

pub mod candle;
mod fork_join;
mod matmul;
mod quantized;
mod rayon_pool;
mod tune;

pub use fork_join::{ForkJoin, WORK_ROWS, fixed_work, work};
pub use matmul::{Matmul, Op, POLICY, Peer, Pools, stream_read};
pub use quantized::{qgemm, qgemv, read};
pub use rayon_pool::rayon_pool;
pub use tune::{CachedTune, detect, small_tune_options};
