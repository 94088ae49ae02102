//! [`Exec`]: the one entry point of every operation. It says which [`Kernel`] runs and where
//! the output rows go (the calling thread, or a [`ThreadPool`] by its own policy or a given
//! one); its methods are the operations, f32 ([`Exec::gemv`], [`Exec::gemm`],
//! [`Exec::stream_read`]) and of any weight format ([`Exec::qgemv`], [`Exec::qgemm`]).

use crate::error::MatmulError;
use crate::isa::{Kernel, selected};
use crate::qmatmul::{qgemm_split, qgemv_split};
use crate::quant::WeightMatrix;
use crate::split::{GemmShape, Split, gemm_split, gemv_split, stream_read_split};
use threadpool::{SchedulePolicy, ThreadPool};

/// How one call runs: on which [`Kernel`], and on the calling thread or split over a
/// [`ThreadPool`]. It is `Copy` and holds only a borrow of the pool, so make one per call or
/// keep one beside the pool.
///
/// [`Exec::new`] (and [`Default`]) runs the [`selected`] kernel on the calling thread;
/// [`Exec::kernel`] names another, [`Exec::pool`] splits the output rows over a pool by the
/// pool's own policy ([`ThreadPool::policy`], the tuned one on a pool the tuner built), and
/// [`Exec::policy`] splits them by another policy instead (the tuner and the benches compare
/// policies on one pool).
///
/// Each output element is computed by one thread in an order fixed by the kernel, the format
/// and the shape alone, so every operation's result is **bitwise identical** with or without a
/// pool, for every policy and thread count. On a pool, every operation returns `Err(Pool)`
/// when the pool could not run the call (a worker thread died).
///
/// ```
/// use matmul_kernel::{Exec, Isa};
/// use threadpool::{SchedulePolicy, ThreadPool};
///
/// let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2 × 3
/// let x = [1.0, 1.0, 1.0];
/// let mut y = [0.0; 2];
/// Exec::new().gemv(&w, &x, &mut y)?; // the selected kernel, on this thread
/// assert_eq!(y, [6.0, 15.0]);
///
/// let pool = ThreadPool::new(2);
/// let mut y2 = [0.0; 2];
/// Exec::new().pool(&pool).gemv(&w, &x, &mut y2)?; // split by the pool's own policy
/// assert_eq!(y, y2);
///
/// // The portable kernel runs everywhere, here split by a policy of our choice.
/// let portable = Exec::new().kernel(Isa::Portable.token()?);
/// portable.pool(&pool).policy(SchedulePolicy::Fixed16).gemv(&w, &x, &mut y2)?;
/// assert_eq!(y, y2);
/// # Ok::<(), matmul_kernel::MatmulError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Exec<'p> {
    pub(crate) kernel: Kernel,
    pool: Option<&'p ThreadPool>,
    policy: Option<SchedulePolicy>,
}

impl Default for Exec<'_> {
    /// The [`selected`] kernel on the calling thread, as [`Exec::new`].
    fn default() -> Self {
        Exec::new()
    }
}

impl<'p> Exec<'p> {
    /// The [`selected`] kernel on the calling thread.
    pub fn new() -> Self {
        Exec {
            kernel: selected(),
            pool: None,
            policy: None,
        }
    }

    /// The same, on `kernel` instead.
    #[must_use]
    pub fn kernel(self, kernel: Kernel) -> Self {
        Exec { kernel, ..self }
    }

    /// The same, with the output rows (weight rows) split over `pool`, by the pool's own
    /// policy ([`ThreadPool::policy`]) unless [`Exec::policy`] names another: the call a
    /// runtime makes on the pool the tuner built, which carries the tuned policy.
    #[must_use]
    pub fn pool(self, pool: &'p ThreadPool) -> Self {
        Exec {
            pool: Some(pool),
            ..self
        }
    }

    /// The same, with the rows split over the pool by `policy` instead of the pool's own. It
    /// changes nothing without a [`pool`](Exec::pool): the calling thread runs every row.
    #[must_use]
    pub fn policy(self, policy: SchedulePolicy) -> Self {
        Exec {
            policy: Some(policy),
            ..self
        }
    }

    /// Where the rows of a call go.
    pub(crate) fn split(&self) -> Split<'p> {
        match self.pool {
            None => Split::Serial,
            Some(pool) => Split::Pool(pool, self.policy.unwrap_or_else(|| pool.policy())),
        }
    }

    /// `y = W·x` with `W` `y.len() × x.len()` row-major (f32).
    ///
    /// `Err(Shape)` when `w` does not have `y.len() · x.len()` elements.
    pub fn gemv(&self, w: &[f32], x: &[f32], y: &mut [f32]) -> Result<(), MatmulError> {
        gemv_split(self.kernel, self.split(), w, x, y)
    }

    /// `Y = X·Wᵀ` (`shape.m × shape.n_out`, f32); each weight row is read from memory once
    /// per call. With a pool, the weight rows (columns of `Y`) are split.
    ///
    /// `Err(Shape)` when a slice does not match `shape` (or the shape overflows).
    pub fn gemm(
        &self,
        shape: GemmShape,
        w: &[f32],
        x: &[f32],
        y: &mut [f32],
    ) -> Result<(), MatmulError> {
        gemm_split(self.kernel, self.split(), shape, w, x, y)
    }

    /// `row_sums[r] = Σ buf[r·row_len .. (r+1)·row_len]` with `row_len = buf.len() /
    /// row_sums.len()`: the STREAM-style read-bandwidth kernel, split like [`Exec::gemv`].
    /// Give it a buffer of the GEMV's weight size and `n_out` rows to get the same-size
    /// reference.
    ///
    /// `Err(Shape)` when `buf` is not whole rows.
    pub fn stream_read(&self, buf: &[f32], row_sums: &mut [f32]) -> Result<(), MatmulError> {
        stream_read_split(self.kernel, self.split(), buf, row_sums)
    }

    /// `y = W·x` for a [`WeightMatrix`] of any [`WeightFormat`](crate::WeightFormat) (`x` has
    /// `n_in` elements, `y` `n_out`).
    ///
    /// Each output's order of operations depends on the kernel and `n_in` alone, so the result
    /// is bitwise identical on every thread count and policy.
    ///
    /// `Err(Shape)` when `x` or `y` does not match the matrix's shape.
    ///
    /// # Numerics, per format
    /// - **f32, f16, bf16**: the weights are widened to f32 (exactly: F16C's `vcvtph2ps`, a
    ///   16-bit shift for bf16) and dotted with `x` in f32 by FMA; `x` is used as it is. BF16's
    ///   `vdpbf16ps` is not used: it would round `x` to bf16 (8 significant bits).
    /// - **q8_0, q4_0, q4_K, q6_K** on the SIMD kernels: `x` is quantized once per call, per
    ///   block of 32, to 8-bit codes with an f32 scale (`d = max|x| / 127`, as ggml's
    ///   q8_0/q8_K), and each block's dot product with the weight codes is computed in
    ///   integers, exactly (AVX2's `vpmaddubsw` + `vpmaddwd`, AVX512-VNNI's `vpdpbusd`); the
    ///   block's scales multiply it in f32. q4_0's offset 8 and q4_K's mins are summed apart
    ///   in f32 from the activations' per-block `d·Σq` (and, in the 512-bit GEMV bodies,
    ///   q8_0's 128 and q6_K's 32).
    /// - f32 weights run the body of [`Exec::gemv`] on every kernel (one f32 GEMV body per
    ///   ISA): bitwise the `gemv` of the same rows as a slice.
    /// - The portable kernel is the reference for the other formats: it widens their weights
    ///   to f32 with [`dequantize_row`](crate::dequantize_row) and keeps `x` in f32.
    ///
    /// # Error bound
    /// Against the exact dot product of the dequantized weights `w` with `x`, with
    /// `γ(n) = n·u / (1 − n·u)` and `u = 2⁻²⁴`:
    /// - f32 widening: `|ŷ − y| ≤ γ(n)·Σ_k |w_k·x_k|` with `n = ⌈n_in / 8⌉ + 5` roundings on
    ///   the longest path (a product, a lane's additions, the lanes' pairwise tree).
    /// - quantized activations: each `x_k` is replaced by `d_b·q_k` with
    ///   `|x_k − d_b·q_k| ≤ d_b·(1/2 + 2⁻¹⁶)` (block `b`'s scale `d_b`), which moves the result
    ///   by at most `Σ_b d_b·(1/2 + 2⁻¹⁶)·Σ_{k∈b} |w_k|`; the f32 part then adds at most
    ///   `γ(n)·Σ_k M_k·(|x_k| + d_b)` with `n = ⌈n_in / 32⌉ + 10` (one accumulation per block,
    ///   the scales' products, the tree) and `M_k = |w_k| + 2·|o_k|`, where `o_k` is the offset
    ///   summed apart from the scaled codes: `128·d` for q8_0 (the 512-bit body dots
    ///   `q + 128`), `8·d` for q4_0, `dmin·m` of the weight's sub-block for q4_K, `32·d·sc` of
    ///   the weight's sub-block for q6_K (the 512-bit body dots the codes `0…63` as they are),
    ///   0 otherwise.
    ///
    /// The bound holds while every product and partial sum stays in f32's normal range.
    /// Huge activations overflow sooner on the quantized paths than on the portable one, in
    /// f32 throughout, and not alike on every body:
    /// - each body sums blocks of `d·d_x·Σq` (`d_x = max|x|/127`, the activation block's
    ///   scale), which overflows past 3.4·10³⁸;
    /// - the bodies that dot the codes with their offset (the 512-bit q8_0 and q6_K bodies,
    ///   both wide q4_0 bodies) sum the offset's term `o_k` apart and take it off at the end:
    ///   they reach an infinity, and then a NaN of two cancelling ones, up to 128 times
    ///   sooner for q8_0, 32 for q6_K, 8 for q4_0 (a q8_0 row of `d = 1`, code 1, against
    ///   activations of 10³⁵ gives NaN, where the portable body gives 2.56·10³⁷; the GEMM
    ///   tiles take the offset off in integers, and do not);
    /// - the AVX2 integer bodies multiply the two scales first, so `d` near f16's largest
    ///   with activations past about 5·10³³ makes `d·d_x` infinite, and a row whose codes
    ///   are all 0 gives NaN (`0·∞`) where the others give 0.
    ///
    /// Scales or activations near f32's smallest normal values (about 10⁻³⁸) lose their low
    /// bits to underflow, and the error is then up to that size in absolute terms, whatever
    /// the relative bound says. Real activations are many orders of magnitude from both.
    ///
    /// Non-finite activations: the f32 paths follow IEEE arithmetic; with quantized activations
    /// a block holding a NaN or an infinity makes every output NaN.
    ///
    /// # Example
    /// ```
    /// use matmul_kernel::{Exec, WeightFormat, WeightMatrix, WeightShape};
    ///
    /// let shape = WeightShape { n_out: 2, n_in: 32 };
    /// // Row 0 cycles through -8..=7 twice, row 1 is all -8: q4_0 holds both exactly (d = 1).
    /// let values: Vec<f32> = (0..64).map(|i| if i < 32 { (i % 16) as f32 - 8.0 } else { -8.0 }).collect();
    /// let w = WeightMatrix::quantize(WeightFormat::Q4_0, shape, &values)?;
    /// // 127/64: the 8-bit activation blocks hold it exactly (scale 1/64, code 127).
    /// let x = [1.984375; 32];
    /// let mut y = [0.0; 2];
    /// Exec::new().qgemv(&w, &x, &mut y)?;
    /// assert_eq!(y, [-31.75, -508.0]);
    /// # Ok::<(), matmul_kernel::MatmulError>(())
    /// ```
    pub fn qgemv(&self, w: &WeightMatrix, x: &[f32], y: &mut [f32]) -> Result<(), MatmulError> {
        qgemv_split(self.kernel, self.split(), w, x, y)
    }

    /// `Y = X·Wᵀ` for a [`WeightMatrix`] of any [`WeightFormat`](crate::WeightFormat): `x`
    /// holds `m` rows of `n_in` (row-major, `m = x.len() / n_in`), `y` the `m × n_out` result
    /// (row-major). With a pool, the weight rows (columns of `Y`) are split.
    ///
    /// Each weight row is read from memory once per call and dotted with all `m` rows of `x`
    /// while it is in cache (tiles of 16 weight rows for the quantized formats; for f16 and
    /// bf16 4 to 16 rows, at most 16 KiB unless 4 rows need more; f32 on x86 as
    /// [`Exec::gemm`]); `x` is quantized once per call.
    ///
    /// # Numerics
    /// As [`Exec::qgemv`]'s, within the same error bound, but not bitwise the
    /// [`Exec::qgemv`] of a row on the x86 kernels' quantized formats (but q8_0 on a CPU
    /// without VNNI): they repack sixteen weight rows into 32-bit lanes (`vpdpbusd`, or
    /// `vpmaddubsw` and `vpmaddwd` without VNNI) and accumulate each output's scaled block dot
    /// products in one f32 lane, in increasing block order (the offsets of q8_0, q4_0 and q6_K
    /// taken off exactly in the integers, q4_K's mins in a second lane subtracted at the end).
    /// f32 on the x86 kernels runs [`Exec::gemm`]'s blocked body (one vector accumulator per
    /// output in increasing `k`, then the lanes' tree: the crate's f32 bound, not bitwise the
    /// GEMV). f16, bf16 and the other ISAs compute each output as [`Exec::qgemv`] does.
    /// Either way an output's order of operations depends on the kernel, the format and
    /// `n_in` alone: `y[i]` is bitwise the `qgemm` of row `i` of `x` alone, and the result
    /// is bitwise identical for every policy and thread count.
    ///
    /// `Err(Shape)` when `n_in` is 0, `x` is not whole rows of `n_in`, or `y` does not have
    /// `m · n_out` elements.
    ///
    /// ```
    /// use matmul_kernel::{Exec, WeightFormat, WeightMatrix, WeightShape};
    ///
    /// let shape = WeightShape { n_out: 3, n_in: 64 };
    /// let values: Vec<f32> = (0..192).map(|i| (i as f32 * 0.61).sin()).collect();
    /// let w = WeightMatrix::quantize(WeightFormat::Q8_0, shape, &values)?;
    /// let x: Vec<f32> = (0..128).map(|i| (i as f32 * 0.3).cos()).collect(); // m = 2
    /// let mut y = [0.0; 6];
    /// Exec::new().qgemm(&w, &x, &mut y)?;
    /// let mut row1 = [0.0; 3];
    /// Exec::new().qgemm(&w, &x[64..], &mut row1)?; // row 1 of `x` alone
    /// assert_eq!(y[3..], row1);
    /// # Ok::<(), matmul_kernel::MatmulError>(())
    /// ```
    pub fn qgemm(&self, w: &WeightMatrix, x: &[f32], y: &mut [f32]) -> Result<(), MatmulError> {
        qgemm_split(self.kernel, self.split(), w, x, y)
    }
}
