//! The search: thread count under `static`, then all seven policies at that count, then
//! one re-check of the neighbouring thread counts under the winning policy.
//!
//! Decisions use the noise rule of [`beats`]: a candidate replaces the current choice only
//! if its median beats the choice's median by more than the measured noise.

use crate::TunerError;
use crate::bench::{Bench, Config, Stats};
use crate::profile::CoreSet;
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
fn pick(stats: &[Option<Stats>], baseline: usize) -> usize {
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

fn best_median(stats: &[Option<Stats>]) -> Option<usize> {
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

/// The search's answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Choice {
    pub(crate) config: Config,
}

/// Runs the whole search on `bench` with thread counts `1..=max_threads`.
pub(crate) fn search(bench: &mut Bench, max_threads: usize) -> Result<Choice, TunerError> {
    let max_threads = max_threads.max(1);
    let any = |threads| Config {
        threads,
        policy: SchedulePolicy::Static,
        cores: CoreSet::Any,
    };

    // 1. Thread count under `static`: every count up to 4, else the probes, plus the
    //    performance cores alone on a hybrid CPU.
    let mut configs: Vec<Config> = probes(max_threads).into_iter().map(any).collect();
    let n_performance = bench.performance_cpus().min(max_threads);
    if n_performance > 0 && n_performance < max_threads {
        configs.push(Config {
            threads: n_performance,
            policy: SchedulePolicy::Static,
            cores: CoreSet::Performance,
        });
    }
    let stats = bench.measure("threads", &configs, None)?;
    let mut best = configs[pick(&stats, 0)];

    // Refine around the winner: both neighbours at half the gap to the nearest probe, then
    // halve the step, until no neighbour wins.
    if max_threads > 4 && best.cores == CoreSet::Any {
        let nearest_gap = configs
            .iter()
            .filter(|c| c.cores == CoreSet::Any && c.threads != best.threads)
            .map(|c| c.threads.abs_diff(best.threads))
            .min()
            .unwrap_or(1);
        let mut step = (nearest_gap / 2).max(1);
        for _ in 0..16 {
            if bench.out_of_time {
                break;
            }
            let mut round = vec![best];
            for t in [best.threads.saturating_sub(step), best.threads + step] {
                if (1..=max_threads).contains(&t) && t != best.threads {
                    round.push(any(t));
                }
            }
            let stats = bench.measure("threads (refine)", &round, None)?;
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
    bench.drop_pools();

    // 2. Every policy at the winning thread count, `static` as the baseline.
    if !bench.out_of_time {
        let round: Vec<Config> = SchedulePolicy::ALL
            .iter()
            .map(|&policy| Config { policy, ..best })
            .collect();
        let stats = bench.measure("policy", &round, None)?;
        best = round[pick(&stats, 0)];
    }

    // 3. The winning count's neighbours once more, under the winning policy.
    if !bench.out_of_time {
        let limit = match best.cores {
            CoreSet::Any => max_threads,
            CoreSet::Performance => n_performance,
        };
        let mut round = vec![best];
        for t in [best.threads.saturating_sub(1), best.threads + 1] {
            if (1..=limit).contains(&t) {
                round.push(Config { threads: t, ..best });
            }
        }
        if round.len() > 1 {
            let stats = bench.measure("re-check", &round, None)?;
            best = round[pick(&stats, 0)];
        }
    }
    bench.drop_pools();
    Ok(Choice { config: best })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn probes_cover_small_machines_and_sample_large_ones() {
        assert_eq!(probes(1), vec![1]);
        assert_eq!(probes(4), vec![1, 2, 3, 4]);
        assert_eq!(probes(16), vec![1, 2, 8, 16]);
        assert_eq!(probes(5), vec![1, 2, 5]);
    }
}
