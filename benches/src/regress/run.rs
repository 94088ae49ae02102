//! What one regression run and its checks share: the thread counts, the run's length and
//! a check's measured ratio.

/// Threads of the pools of the dispatch and GEMV checks: the CI machine's two cores.
pub const N_THREADS: usize = 2;

/// Threads of the GEMM check: one, so the ratio compares the kernels. At two threads on a
/// shared 2-core machine faer's time swung by 2.6× between runs (its rayon workers wait for
/// the cores), too much for a floor to catch a 2× regression; the parallel split is the
/// GEMV's, checked at [`N_THREADS`].
pub const GEMM_THREADS: usize = 1;

/// Kept rounds of a GEMV ÷ read check in a quick run (twice in a full one): a GEMV of one
/// matrix takes 1.5–4 ms here, so 61 pairs span a few tenths of a second, and a pause of
/// another tenant's lasting a tenth moves a few rounds of the median, not half of them (at
/// 21 rounds one CI run measured q4_0 at 0.64, at its limit, where every other run of the
/// day gave 0.90–0.98).
pub const GEMV_ROUNDS: usize = 61;

/// How long the run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunLength {
    /// Fewer rounds (CI, `--quick`): a few seconds of measuring.
    Quick,
    /// The default: about twice the rounds.
    Full,
}

impl RunLength {
    /// Kept rounds: `quick` for [`RunLength::Quick`], twice that for [`RunLength::Full`].
    pub(crate) fn rounds(self, quick: usize) -> usize {
        match self {
            RunLength::Quick => quick,
            RunLength::Full => 2 * quick,
        }
    }
}

/// One ratio measured in this run.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The check's name, one of [`CHECKS`](super::CHECKS).
    pub name: String,
    /// Ours ÷ the reference, higher is better.
    pub ratio: f64,
    /// The two medians behind the ratio, for the reader (never compared across runs).
    pub detail: String,
}
