//! The oracle: the tuner's normal search (decode, at the options' rigor), then every thread
//! count × every policy, and the two picks re-measured back to back, so that the search can
//! be judged by `ratio`.

use crate::bench::{Bench, Plan};
use crate::candidates::CoreSet;
use crate::error::TunerError;
use crate::measure::Measure;
use crate::measure::{Setting, Stats};
use crate::optimized::ensure_optimized;
use crate::options::AutoTunerOptions;
use crate::phase::{Phase, Step};
use crate::search::best_median;
use device_profile::HardwareInfo;
use serde::Serialize;
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
    pub measurements: Vec<crate::profile::Measurement>,
}

/// Runs the search, then every thread count `1..=candidate_cpus` under all seven policies
/// (interleaved, `opt.measuring.repetitions` rounds), then re-measures both picks back to back with
/// four times the repetitions. Options out of the ranges [`crate::tune_if_needed`] takes are
/// refused ([`TunerError::InvalidSetting`]).
pub fn run_exhaustive(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
) -> Result<ExhaustiveReport, TunerError> {
    crate::ranges::refuse_out_of_range(opt)?;
    ensure_optimized()?;
    let job = crate::job::Job::new(hw, &opt.question);
    let plan = Plan::of(hw, &job, &opt.measuring)?;
    let mut bench = Bench::new(hw, &job, &opt.measuring, plan, &opt.reporter)?;
    let tuned = crate::search::search(
        &mut bench,
        job.request.thread_limit,
        job.request.rigor.max(crate::rigor::Rigor::Measure),
    )?;
    let tune_seconds = job.started.elapsed().as_secs_f64();
    let (tuned, best, ratio) = compare(
        &mut bench,
        tuned,
        crate::candidates::candidate_cpus(hw),
        4 * opt
            .measuring
            .repetitions
            .max(crate::options::MIN_REPETITIONS),
    )?;
    opt.reporter.finished();
    Ok(ExhaustiveReport {
        tuned,
        best,
        ratio,
        tune_seconds,
        measurements: bench.phase_measurements(Phase::Decode).to_vec(),
    })
}

/// The oracle's judgement of the search's pick `tuned` on `engine`: every thread count
/// `1..=max_threads` under every policy (interleaved), the best of that sweep, and both
/// re-measured back to back with `final_repetitions`: the two picks and `tuned ÷ best`.
fn compare<M: Measure>(
    engine: &mut M,
    tuned: Setting,
    max_threads: usize,
    final_repetitions: usize,
) -> Result<(Pick, Pick, f64), TunerError> {
    let sweep: Vec<Setting> = (1..=max_threads)
        .flat_map(|threads| {
            SchedulePolicy::ALL.into_iter().map(move |policy| Setting {
                threads,
                policy,
                cores: CoreSet::Any,
            })
        })
        .collect();
    let stats = engine.measure(Step::Sweep, &sweep, None)?;
    let best = sweep[best_median(&stats).unwrap_or(0)];
    engine.drop_pools();

    let finals = if best == tuned {
        vec![tuned]
    } else {
        vec![tuned, best]
    };
    let stats = engine.measure(Step::Final, &finals, Some(final_repetitions))?;
    let score = |i: usize| {
        stats
            .get(i)
            .and_then(Option::as_ref)
            .map_or(0.0, Stats::median)
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
    Ok((pick(tuned, tuned_score), pick(best, best_score), ratio))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::surface::Surface;
    use crate::rigor::Rigor;
    use crate::search::search;

    /// A machine where `static` peaks at the most threads, but 2 threads under `guided`
    /// are far faster: a search that settles the thread count under `static` first misses
    /// it, and the oracle finds it.
    fn guided_pair(c: Setting) -> f64 {
        match (c.threads, c.policy) {
            (2, SchedulePolicy::Guided) => 10.0,
            (t, _) => t as f64,
        }
    }

    #[test]
    fn the_oracle_finds_the_best_setting_the_search_missed_and_scores_the_pick() {
        let mut machine = Surface::new(guided_pair);
        let tuned = search(&mut machine, 4, Rigor::Measure).unwrap();
        let (tuned, best, ratio) = compare(&mut machine, tuned, 4, 20).unwrap();
        assert_eq!(
            (tuned.threads, tuned.schedule_policy),
            (4, SchedulePolicy::Static)
        );
        assert_eq!(
            (best.threads, best.schedule_policy),
            (2, SchedulePolicy::Guided)
        );
        assert_eq!((tuned.tokens_per_sec, best.tokens_per_sec), (4.0, 10.0));
        assert_eq!(ratio, 0.4);
        // The sweep covered every thread count under every policy.
        let swept = machine.measured.iter().filter(|c| c.cores == CoreSet::Any);
        assert!(swept.count() >= 4 * SchedulePolicy::ALL.len());
    }

    #[test]
    fn when_the_search_finds_the_peak_the_ratio_is_one() {
        // A clear peak at 3 threads under `static`; every other policy a little slower.
        let mut machine = Surface::new(|c| {
            let by_threads = [100.0, 200.0, 300.0, 250.0, 200.0, 150.0][c.threads - 1];
            match c.policy {
                SchedulePolicy::Static => by_threads,
                _ => by_threads - 10.0,
            }
        });
        let tuned = search(&mut machine, 6, Rigor::Measure).unwrap();
        let (tuned, best, ratio) = compare(&mut machine, tuned, 6, 20).unwrap();
        assert_eq!(tuned.threads, 3);
        assert_eq!(
            (best.threads, best.schedule_policy),
            (tuned.threads, tuned.schedule_policy)
        );
        assert_eq!(ratio, 1.0);
        assert_eq!(best.tokens_per_sec, 300.0);
    }
}
