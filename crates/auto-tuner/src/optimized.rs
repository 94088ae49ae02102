//! The guard that nothing unoptimized measures: the `opt-level` each measuring crate was
//! built at, and the refusal ([`ensure_optimized`]).

use crate::error::TunerError;

/// The `opt-level` of each crate whose code is measured (recorded by their build scripts).
pub(crate) const BUILD_OPT_LEVELS: [(&str, &str); 3] = [
    ("auto-tuner", env!("SIPLLM_TUNER_OPT_LEVEL")),
    ("matmul-kernel", matmul_kernel::BUILD_OPT_LEVEL),
    ("threadpool", threadpool::BUILD_OPT_LEVEL),
];

/// Refuses to measure when a measuring crate was built without optimizations.
pub(crate) fn ensure_optimized() -> Result<(), TunerError> {
    check_opt_levels(&BUILD_OPT_LEVELS)
}

/// [`ensure_optimized`] for given `(crate, opt-level)` pairs.
pub(crate) fn check_opt_levels(
    opt_levels: &[(&'static str, &'static str)],
) -> Result<(), TunerError> {
    let unoptimized: Vec<&'static str> = opt_levels
        .iter()
        .filter(|(_, level)| *level == "0")
        .map(|(name, _)| *name)
        .collect();
    if unoptimized.is_empty() {
        Ok(())
    } else {
        Err(TunerError::UnoptimizedBuild(unoptimized))
    }
}
