//! What one regression run and its checks share: the thread counts, the run's length and
//! a check's measured ratio.

/// Threads of the pools of the dispatch and GEMV checks: the CI machine's two cores.
pub const N_THREADS: usize = 2;

/// Threads of the GEMM check: one, so the ratio compares the kernels. At two threads on a
/// shared 2-core machine faer's time swung by 2.6× between runs (its rayon workers wait for
/// the cores), too much for a floor to catch a 2× regression; the parallel split is the
/// GEMV's, checked at [`N_THREADS`].
pub const GEMM_THREADS: usize = 1;

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
