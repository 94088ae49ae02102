//! The two phases a runtime runs a model in, and the steps of a tune that measure them.

use serde::{Deserialize, Serialize};

/// What a runtime does with the model: generate one token at a time, or process a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Token generation: each layer's projections at m = 1 (GEMV), memory-bound.
    Decode,
    /// Prompt processing: each layer's projections at m = the batch (GEMM), compute-bound.
    Prefill,
}

impl Phase {
    /// Both phases, in the order the tuner measures them.
    pub const ALL: [Phase; 2] = [Phase::Decode, Phase::Prefill];

    /// `decode` or `prefill`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Decode => "decode",
            Phase::Prefill => "prefill",
        }
    }

    /// Rows of activations per projection: 1 for decode, `batch` for prefill.
    pub fn m(self, batch: usize) -> usize {
        match self {
            Phase::Decode => 1,
            Phase::Prefill => batch.max(1),
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The step of the search a measurement belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Step {
    /// 1. Thread counts under `static` (every count up to 4, else probes; every count at
    ///    `patient` and above).
    Threads,
    /// 1b. Neighbours of the best thread count, at a shrinking step.
    Refine,
    /// 2. Every policy at the chosen thread count.
    Policy,
    /// 3. The chosen count's neighbours again, under the chosen policy.
    #[serde(rename = "re-check")]
    Recheck,
    /// The pinned candidates at every thread count (`exhaustive`).
    Pinning,
    /// The exhaustive oracle's sweep of every thread count x policy.
    Sweep,
    /// A back-to-back re-measurement (the oracle's two picks, [`crate::measure_settings`]).
    Final,
    /// llama.cpp's weight repacking on and off (`--repack 0`), before the thread counts.
    Repack,
    /// llama.cpp's polling levels at the chosen setting (`exhaustive`).
    Poll,
}

impl Step {
    /// The short name shown in tables: `threads`, `refine`, `policy`, `re-check`,
    /// `pinning`, `sweep`, `final`, `repack`, `poll`.
    pub fn name(self) -> &'static str {
        match self {
            Step::Threads => "threads",
            Step::Refine => "refine",
            Step::Policy => "policy",
            Step::Recheck => "re-check",
            Step::Pinning => "pinning",
            Step::Sweep => "sweep",
            Step::Final => "final",
            Step::Repack => "repack",
            Step::Poll => "poll",
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
