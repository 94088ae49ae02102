//! The search, per phase: thread count under `static`, then all seven policies at that
//! count, then one re-check of the neighbouring thread counts under the winning policy. The
//! rigor decides how many thread counts and which pinned candidates step 1 measures.
//!
//! Decisions use the noise rule of [`beats`]: a candidate replaces the current choice only
//! if its median beats the choice's median by more than the measured noise.

use crate::candidates::{CoreSet, PinnedSet};
use crate::error::TunerError;
use crate::measure::{Measure, Setting, Stats};
use crate::phase::Step;
use crate::rigor::Rigor;
use threadpool::SchedulePolicy;

/// The smallest and largest margin a candidate must win by.
const MIN_MARGIN: f64 = 0.005;
const MAX_MARGIN: f64 = 0.03;

/// True when `candidate` beats `baseline` by more than the noise: its median exceeds the
/// baseline's by the sum of both relative median absolute deviations, clamped to
/// [0.5 %, 3 %]. The clamp keeps one noisy round from blocking a real 10 % gain, and keeps
/// a quiet machine from chasing 0.1 % differences.
pub(crate) fn beats(candidate: &Stats, baseline: &Stats) -> bool {
    let margin = (candidate.relative_mad() + baseline.relative_mad()).clamp(MIN_MARGIN, MAX_MARGIN);
    candidate.median() > baseline.median() * (1.0 + margin)
}

/// Of `configs` measured as `stats`, the index that wins against `baseline`: the best
/// median among those that beat the baseline, else the baseline.
pub(crate) fn pick(stats: &[Option<Stats>], baseline: usize) -> usize {
    let Some(base) = &stats[baseline] else {
        // The baseline got no sample (budget): take the best that did, if any.
        return best_median(stats).unwrap_or(baseline);
    };
    let mut winner = baseline;
    let mut winner_median = base.median();
    for (i, s) in stats.iter().enumerate() {
        if let Some(s) = s
            && i != baseline
            && beats(s, base)
            && s.median() > winner_median
        {
            winner = i;
            winner_median = s.median();
        }
    }
    winner
}

/// The index with the best median among the measured configurations.
pub(crate) fn best_median(stats: &[Option<Stats>]) -> Option<usize> {
    stats
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.as_ref().map(|s| (i, s.median())))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// The thread counts probed first when there are more than four candidates.
pub(crate) fn probes(max_threads: usize) -> Vec<usize> {
    if max_threads <= 4 {
        return (1..=max_threads).collect();
    }
    let mut p = vec![1, 2, max_threads / 2, max_threads];
    p.dedup();
    p
}

/// Runs the whole search on `bench` with thread counts `1..=max_threads` at `rigor`
/// (`estimate` measures nothing and is not searched: see [`crate::estimate_threads`]).
///
/// - `measure`: step 1 measures every count up to 4, else the probes and a refinement around
///   the best, plus the performance cores alone on a hybrid CPU;
/// - `patient`: step 1 measures every count;
/// - `exhaustive`: as `patient`, then every pinned candidate at every count it allows.
pub(crate) fn search(
    bench: &mut impl Measure,
    max_threads: usize,
    rigor: Rigor,
) -> Result<Setting, TunerError> {
    let max_threads = max_threads.max(1);
    let any = |threads| Setting {
        threads,
        policy: SchedulePolicy::Static,
        cores: CoreSet::Any,
    };
    let set_limit = |cores: CoreSet, sets: &[PinnedSet]| match cores {
        CoreSet::Any => max_threads,
        pinned => sets
            .iter()
            .find(|s| s.cores == pinned)
            .map_or(0, |s| s.cpus.len().min(max_threads)),
    };

    // 1. Thread count under `static`.
    let patient = rigor >= Rigor::Patient;
    let counts = if patient {
        (1..=max_threads).collect()
    } else {
        probes(max_threads)
    };
    let mut configs: Vec<Setting> = counts.into_iter().map(any).collect();
    let n_performance = set_limit(CoreSet::Performance, bench.pinned_sets());
    if n_performance > 0 && n_performance < max_threads {
        configs.push(Setting {
            threads: n_performance,
            policy: SchedulePolicy::Static,
            cores: CoreSet::Performance,
        });
    }
    let stats = bench.measure(Step::Threads, &configs, None)?;
    let mut best = configs[pick(&stats, 0)];

    // Refine around the winner: both neighbours at half the gap to the nearest probe, then
    // halve the step, until no neighbour wins (only where step 1 skipped counts).
    if !patient && max_threads > 4 && best.cores == CoreSet::Any {
        let nearest_gap = configs
            .iter()
            .filter(|c| c.cores == CoreSet::Any && c.threads != best.threads)
            .map(|c| c.threads.abs_diff(best.threads))
            .min()
            .unwrap_or(1);
        let mut step = (nearest_gap / 2).max(1);
        for _ in 0..16 {
            if bench.out_of_time() {
                break;
            }
            let mut round = vec![best];
            for t in [best.threads.saturating_sub(step), best.threads + step] {
                if (1..=max_threads).contains(&t) && t != best.threads {
                    round.push(any(t));
                }
            }
            let stats = bench.measure(Step::Refine, &round, None)?;
            let winner = round[pick(&stats, 0)];
            if winner != best {
                best = winner;
            } else if step == 1 {
                break;
            } else {
                step /= 2;
            }
        }
    }

    // 1c. Every pinned candidate at every count it allows, against the best so far.
    if rigor == Rigor::Exhaustive && !bench.out_of_time() {
        let mut round = vec![best];
        for set in bench.pinned_sets() {
            for threads in 1..=set.cpus.len().min(max_threads) {
                let config = Setting {
                    threads,
                    policy: SchedulePolicy::Static,
                    cores: set.cores,
                };
                if config != best {
                    round.push(config);
                }
            }
        }
        if round.len() > 1 {
            let stats = bench.measure(Step::Pinning, &round, None)?;
            best = round[pick(&stats, 0)];
        }
    }
    bench.drop_pools();

    // 2. Every policy of the engine at the winning thread count, `static` as the baseline
    //    (skipped for an engine with one policy).
    if !bench.out_of_time() && bench.policies().len() > 1 {
        let round: Vec<Setting> = bench
            .policies()
            .iter()
            .map(|&policy| Setting { policy, ..best })
            .collect();
        let stats = bench.measure(Step::Policy, &round, None)?;
        best = round[pick(&stats, 0)];
    }

    // 3. The winning count's neighbours once more, under the winning policy.
    if !bench.out_of_time() {
        let limit = set_limit(best.cores, bench.pinned_sets());
        let mut round = vec![best];
        for t in [best.threads.saturating_sub(1), best.threads + 1] {
            if (1..=limit).contains(&t) {
                round.push(Setting { threads: t, ..best });
            }
        }
        if round.len() > 1 {
            let stats = bench.measure(Step::Recheck, &round, None)?;
            best = round[pick(&stats, 0)];
        }
    }
    bench.drop_pools();
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::measure::surface::Surface;

    fn stats(v: &[f64]) -> Option<Stats> {
        Some(Stats::from_samples(v.to_vec()))
    }

    #[test]
    fn a_candidate_must_win_by_more_than_the_noise() {
        let base = stats(&[100.0, 100.0, 100.0, 100.0, 100.0]).unwrap();
        let close = stats(&[100.4, 100.4, 100.4, 100.4, 100.4]).unwrap();
        let clear = stats(&[110.0, 110.0, 110.0, 110.0, 110.0]).unwrap();
        assert!(!beats(&close, &base));
        assert!(beats(&clear, &base));
        // A noisy baseline (relative MAD 2 %) needs a bigger win than a quiet one.
        let noisy = stats(&[98.0, 100.0, 102.0, 100.0, 96.0]).unwrap();
        let two_pct = stats(&[102.0, 102.0, 102.0, 102.0, 102.0]).unwrap();
        assert!(beats(&two_pct, &base));
        assert!(!beats(&two_pct, &noisy));
        // The margin never exceeds 3 %.
        let wild = stats(&[50.0, 100.0, 150.0, 100.0, 100.0]).unwrap();
        let four_pct = stats(&[104.0, 104.0, 104.0, 104.0, 104.0]).unwrap();
        assert!(beats(&four_pct, &wild));
    }

    #[test]
    fn pick_keeps_the_baseline_unless_beaten_and_takes_the_best_winner() {
        let s = vec![
            stats(&[100.0; 5]),
            stats(&[100.2; 5]),
            stats(&[120.0; 5]),
            stats(&[130.0; 5]),
        ];
        assert_eq!(pick(&s, 0), 3);
        let s = vec![stats(&[100.0; 5]), stats(&[100.2; 5]), None];
        assert_eq!(pick(&s, 0), 0);
        let s = vec![None, stats(&[1.0; 5]), stats(&[2.0; 5])];
        assert_eq!(pick(&s, 0), 2);
    }

    #[test]
    fn the_search_finds_an_interior_peak_on_a_large_machine() {
        let mut machine = Surface::new(|c| 1000.0 - (c.threads as f64 - 11.0).powi(2));
        let choice = search(&mut machine, 16, Rigor::Measure).unwrap();
        assert_eq!(choice.threads, 11);
        assert_eq!(choice.policy, SchedulePolicy::Static);
        // Probes first, then refinement: far fewer than all 16 counts were tried.
        let counts: std::collections::BTreeSet<usize> =
            machine.measured.iter().map(|c| c.threads).collect();
        assert!(counts.is_superset(&[1, 2, 8, 16].into()), "{counts:?}");
        assert!(counts.len() < 12, "{counts:?}");
    }

    #[test]
    fn the_search_finds_the_edges() {
        let mut machine = Surface::new(|c| c.threads as f64);
        assert_eq!(
            search(&mut machine, 13, Rigor::Measure).unwrap().threads,
            13
        );
        let mut machine = Surface::new(|c| 100.0 / c.threads as f64);
        assert_eq!(search(&mut machine, 13, Rigor::Measure).unwrap().threads, 1);
        let mut machine = Surface::new(|c| (c.threads.min(3)) as f64);
        // 3 and 4 tie: the smaller count is kept.
        assert_eq!(search(&mut machine, 4, Rigor::Measure).unwrap().threads, 3);
    }

    #[test]
    fn every_policy_is_tried_and_a_clear_winner_taken() {
        let mut machine = Surface::new(|c| match c.policy {
            SchedulePolicy::Guided => 110.0,
            _ => 100.0,
        });
        let choice = search(&mut machine, 2, Rigor::Measure).unwrap();
        assert_eq!(choice.policy, SchedulePolicy::Guided);
        for policy in SchedulePolicy::ALL {
            assert!(
                machine.measured.iter().any(|c| c.policy == policy),
                "{policy}"
            );
        }
    }

    #[test]
    fn on_a_hybrid_cpu_the_performance_cores_alone_can_win() {
        let mut machine = Surface::new(|c| match c.cores {
            CoreSet::Performance => 50.0 + c.threads as f64,
            _ => 40.0,
        });
        machine.pinned = vec![PinnedSet {
            cores: CoreSet::Performance,
            cpus: vec![0, 2, 4, 6],
        }];
        let choice = search(&mut machine, 8, Rigor::Measure).unwrap();
        assert_eq!(choice.cores, CoreSet::Performance);
        assert_eq!(choice.threads, 4);
        assert!(
            machine
                .measured
                .iter()
                .all(|c| c.cores == CoreSet::Any || c.threads <= 4)
        );
    }

    #[test]
    fn a_spent_budget_stops_the_search_with_the_best_so_far() {
        let mut machine = Surface::new(|c| c.threads as f64);
        machine.rounds_left = 1;
        let choice = search(&mut machine, 16, Rigor::Measure).unwrap();
        assert_eq!(choice.threads, 16);
        assert_eq!(choice.policy, SchedulePolicy::Static);
    }

    #[test]
    fn patient_measures_every_thread_count_and_exhaustive_every_pinned_one() {
        let mut machine = Surface::new(|c| 1000.0 - (c.threads as f64 - 11.0).powi(2));
        let choice = search(&mut machine, 16, Rigor::Patient).unwrap();
        assert_eq!(choice.threads, 11);
        let counts: std::collections::BTreeSet<usize> =
            machine.measured.iter().map(|c| c.threads).collect();
        assert_eq!(counts, (1..=16).collect());
        assert!(machine.measured.iter().all(|c| c.cores == CoreSet::Any));

        // One thread per physical core, pinned, wins at 3 threads among 4 cores.
        let mut machine = Surface::new(|c| match c.cores {
            CoreSet::PhysicalCores => 100.0 + c.threads.min(3) as f64,
            _ => 50.0,
        });
        machine.pinned = vec![
            PinnedSet {
                cores: CoreSet::PhysicalCores,
                cpus: vec![0, 2, 4, 6],
            },
            PinnedSet {
                cores: CoreSet::Node(0),
                cpus: vec![0, 1],
            },
        ];
        let choice = search(&mut machine, 8, Rigor::Exhaustive).unwrap();
        assert_eq!((choice.cores, choice.threads), (CoreSet::PhysicalCores, 3));
        for (cores, most) in [(CoreSet::PhysicalCores, 4), (CoreSet::Node(0), 2)] {
            let counts: std::collections::BTreeSet<usize> = machine
                .measured
                .iter()
                .filter(|c| c.cores == cores)
                .map(|c| c.threads)
                .collect();
            assert!(
                counts.is_superset(&(1..=most).collect()),
                "{cores:?}: {counts:?}"
            );
            assert!(counts.iter().all(|&t| t <= most), "{cores:?}: {counts:?}");
        }
        // `measure` never tries them.
        let mut machine = Surface::new(|c| c.threads as f64);
        machine.pinned = vec![PinnedSet {
            cores: CoreSet::PhysicalCores,
            cpus: vec![0, 2],
        }];
        search(&mut machine, 4, Rigor::Measure).unwrap();
        assert!(machine.measured.iter().all(|c| c.cores == CoreSet::Any));
    }

    #[test]
    fn probes_cover_small_machines_and_sample_large_ones() {
        assert_eq!(probes(1), vec![1]);
        assert_eq!(probes(4), vec![1, 2, 3, 4]);
        assert_eq!(probes(16), vec![1, 2, 8, 16]);
        assert_eq!(probes(5), vec![1, 2, 5]);
    }
}
