//! What a measurement is, for every engine and for the search: a [`Setting`] of the pool,
//! the [`Stats`] of its timed repetitions, their [`median`], and the [`Measure`] trait the
//! search drives.

use crate::candidates::{CoreSet, PinnedSet};
use crate::error::TunerError;
use crate::phase::Step;
use threadpool::SchedulePolicy;

/// One setting of the pool: threads, policy, and where the workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Setting {
    /// Threads, the caller included.
    pub threads: usize,
    /// The schedule policy.
    pub policy: SchedulePolicy,
    /// Where the workers run; a pinned set pins to its first `threads` CPUs
    /// ([`crate::pinning_candidates`]).
    pub cores: CoreSet,
}

/// The timed repetitions of one setting: tokens per second and GB/s of weights, one pair
/// per repetition.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    tokens_per_sec: Vec<f64>,
    gbps: Vec<f64>,
}

impl Stats {
    /// Adds one timed repetition.
    pub fn push(&mut self, tokens_per_sec: f64, gbps: f64) {
        self.tokens_per_sec.push(tokens_per_sec);
        self.gbps.push(gbps);
    }

    /// Stats of the repetitions `tokens_per_sec`, their GB/s taken equal (for tests and
    /// fake engines).
    pub fn from_samples(tokens_per_sec: Vec<f64>) -> Self {
        Stats {
            gbps: tokens_per_sec.clone(),
            tokens_per_sec,
        }
    }

    /// Repetitions held.
    pub fn len(&self) -> usize {
        self.tokens_per_sec.len()
    }

    /// Whether no repetition is held.
    pub fn is_empty(&self) -> bool {
        self.tokens_per_sec.is_empty()
    }

    /// The median tokens per second.
    pub fn median(&self) -> f64 {
        median(&self.tokens_per_sec)
    }

    /// Median absolute deviation divided by the median: the relative noise.
    pub fn relative_mad(&self) -> f64 {
        let m = self.median();
        if m <= 0.0 {
            return 0.0;
        }
        let dev: Vec<f64> = self.tokens_per_sec.iter().map(|g| (g - m).abs()).collect();
        median(&dev) / m
    }

    /// The slowest repetition's tokens per second (0 when empty).
    pub fn min(&self) -> f64 {
        self.tokens_per_sec
            .iter()
            .copied()
            .min_by(f64::total_cmp)
            .unwrap_or(0.0)
    }

    /// The fastest repetition's tokens per second (0 when empty).
    pub fn max(&self) -> f64 {
        self.tokens_per_sec
            .iter()
            .copied()
            .max_by(f64::total_cmp)
            .unwrap_or(0.0)
    }

    /// The median GB/s of weights.
    pub fn median_gbps(&self) -> f64 {
        median(&self.gbps)
    }
}

/// The median of `samples` (the mean of the two middle ones for an even count; 0 when
/// empty), NaNs ordered last. Every score of the tuner and of the benches is a median.
pub fn median(samples: &[f64]) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// What the search needs of a measuring engine: the tuner's own benchmark of the model's
/// layers in real runs, a fake score surface in tests, or another runtime driven from
/// outside (its own benchmark command) that implements it.
pub trait Measure {
    /// Measures `configs` interleaved; `None` for a configuration the budget left unmeasured.
    fn measure(
        &mut self,
        step: Step,
        configs: &[Setting],
        repetitions: Option<usize>,
    ) -> Result<Vec<Option<Stats>>, TunerError>;
    /// The machine's pinned candidates.
    fn pinned_sets(&self) -> &[PinnedSet];
    /// True once the time budget is spent.
    fn out_of_time(&self) -> bool;
    /// Releases the pools of a finished step.
    fn drop_pools(&mut self);
    /// The schedule policies the engine can run, which the search's policy step tries
    /// (`static` first); every one by default. An engine with one (a runtime without
    /// policies) skips that step.
    fn policies(&self) -> &[SchedulePolicy] {
        &SchedulePolicy::ALL
    }
}

/// A fake machine for the tests of the search and the oracle: a known score per setting,
/// no noise, and a budget counted in rounds.
#[cfg(test)]
pub(crate) mod surface {
    use super::{Measure, Setting, Stats};
    use crate::candidates::PinnedSet;
    use crate::error::TunerError;
    use crate::phase::Step;

    /// The score surface and what was measured on it.
    pub(crate) struct Surface {
        /// Tokens per second of each setting.
        pub(crate) score: fn(Setting) -> f64,
        /// The machine's pinned candidates.
        pub(crate) pinned: Vec<PinnedSet>,
        /// Rounds of measurement left before the budget is spent.
        pub(crate) rounds_left: usize,
        /// Every setting measured, in order.
        pub(crate) measured: Vec<Setting>,
    }

    impl Surface {
        /// A machine scoring each setting with `score`, without pinned sets or budget.
        pub(crate) fn new(score: fn(Setting) -> f64) -> Self {
            Surface {
                score,
                pinned: Vec::new(),
                rounds_left: usize::MAX,
                measured: Vec::new(),
            }
        }
    }

    impl Measure for Surface {
        fn measure(
            &mut self,
            _step: Step,
            configs: &[Setting],
            _repetitions: Option<usize>,
        ) -> Result<Vec<Option<Stats>>, TunerError> {
            assert!(!self.out_of_time(), "measured after the budget ran out");
            self.rounds_left -= 1;
            self.measured.extend_from_slice(configs);
            Ok(configs
                .iter()
                .map(|&c| Some(Stats::from_samples(vec![(self.score)(c); 5])))
                .collect())
        }
        fn pinned_sets(&self) -> &[PinnedSet] {
            &self.pinned
        }
        fn out_of_time(&self) -> bool {
            self.rounds_left == 0
        }
        fn drop_pools(&mut self) {}
    }
}
