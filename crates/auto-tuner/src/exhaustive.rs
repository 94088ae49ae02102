//! The oracle: the tuner's normal search (decode, at the options' rigor), then every thread
//! count × every policy, and the two picks re-measured back to back, so that the search can
//! be judged by `ratio`.

use crate::bench::Bench;
use crate::candidates::CoreSet;
use crate::error::TunerError;
use crate::measure::Measure;
use crate::measure::Setting;
use crate::optimized::ensure_optimized;
use crate::options::AutoTunerOptions;
use crate::profile::{Phase, Step};
use crate::search::best_median;
use device_profile::HardwareInfo;
use serde::Serialize;
use std::time::Instant;
use threadpool::SchedulePolicy;

/// One configuration and its re-measured score.
#[derive(Debug, Clone, Serialize)]
pub struct Pick {
    /// Threads, the caller included.
    pub threads: usize,
    /// The schedule policy.
    pub schedule_policy: SchedulePolicy,
    /// Where the workers ran.
    pub cores: CoreSet,
    /// Median decode tokens per second in the final back-to-back measurement.
    pub tokens_per_sec: f64,
}

/// What the exhaustive sweep found.
#[derive(Debug, Clone, Serialize)]
pub struct ExhaustiveReport {
    /// The normal search's pick.
    pub tuned: Pick,
    /// The best configuration of the full sweep.
    pub best: Pick,
    /// `tuned.tokens_per_sec ÷ best.tokens_per_sec` (1 when they are the same
    /// configuration).
    pub ratio: f64,
    /// Wall time of the normal search alone, in seconds.
    pub tune_seconds: f64,
    /// Every configuration measured, search and sweep (decode).
    pub measurements: Vec<crate::Measurement>,
}

/// Runs the search, then every thread count `1..=`effective_cpus`` under all seven policies
/// (interleaved, `opt.repetitions` rounds), then re-measures both picks back to back with
/// four times the repetitions.
pub fn run_exhaustive(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
) -> Result<ExhaustiveReport, TunerError> {
    ensure_optimized()?;
    let started = Instant::now();
    let mut bench = Bench::new(hw, opt, started)?;
    let tuned = crate::search::search(
        &mut bench,
        opt.thread_limit(hw),
        opt.rigor.max(crate::Rigor::Measure),
    )?;
    let tune_seconds = started.elapsed().as_secs_f64();

    let sweep: Vec<Setting> = (1..=hw.effective_cpus.max(1))
        .flat_map(|threads| {
            SchedulePolicy::ALL.into_iter().map(move |policy| Setting {
                threads,
                policy,
                cores: CoreSet::Any,
            })
        })
        .collect();
    let stats = bench.measure(Step::Sweep, &sweep, None)?;
    let best_idx = best_median(&stats).unwrap_or(0);
    let best = sweep[best_idx];
    bench.drop_pools();

    let finals = if best == tuned {
        vec![tuned]
    } else {
        vec![tuned, best]
    };
    let reps = 4 * opt.repetitions.max(crate::MIN_REPETITIONS);
    let stats = bench.measure(Step::Final, &finals, Some(reps))?;
    opt.reporter.finished();
    let score = |i: usize| {
        stats[i].as_ref().map_or(0.0, |s| {
            Bench::measurement(Step::Final, finals[i], s).tokens_per_sec
        })
    };
    let tuned_score = score(0);
    let best_score = if finals.len() == 2 {
        score(1)
    } else {
        tuned_score
    };
    let pick = |c: Setting, score: f64| Pick {
        threads: c.threads,
        schedule_policy: c.policy,
        cores: c.cores,
        tokens_per_sec: score,
    };
    let ratio = if finals.len() == 1 {
        1.0
    } else if best_score > 0.0 {
        tuned_score / best_score
    } else {
        0.0
    };
    Ok(ExhaustiveReport {
        tuned: pick(tuned, tuned_score),
        best: pick(best, best_score),
        ratio,
        tune_seconds,
        measurements: bench.phase_measurements(Phase::Decode).to_vec(),
    })
}
