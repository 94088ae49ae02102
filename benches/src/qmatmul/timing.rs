//! Timing a block of calls on a rotation of matrices: [`Rotor`] hands out the next matrix,
//! [`time_block`] times a block of calls, [`time_pairs`] two contenders call by call,
//! [`alternating_rounds`] two contenders' blocks round by round. The report and the candle
//! workers time alike.

use crate::matmul::paired_ratio;
use auto_tuner::median;
use std::time::{Duration, Instant};

/// How long a block calls its contender untimed before timing it. After the pause before
/// each block every CPU has been idle, and on a shared VM a pool whose caller works beside
/// its woken workers ran the first milliseconds of calls at one thread's rate (4096 × 4096
/// q4_K at 2 threads: GEMV and GEMM exactly the 1-thread figures after one untimed call,
/// 1.5–1.9 × them after 20 ms of calls); a rayon pool, whose caller waits, did not.
pub const WARM_UP: Duration = Duration::from_millis(20);

/// How long the block of our GEMV on one matrix from cache, timed beside llama.cpp's own
/// (from cache too), calls it untimed first. It follows a `test-backend-ops` process, after
/// which the 2-vCPU Xeon kept our matrix out of its L3 for longer than [`WARM_UP`]: 4096 ×
/// 4096 f32 at one thread read 11–15 GB/s after 20 ms of calls and 26–29 after 300 ms, as
/// without the process before it (q6_K at two threads: 15–54 and 25–32). llama.cpp's own
/// figure is the mean of about a second of calls, so ours is timed as settled as its.
pub const CACHED_WARM_UP: Duration = Duration::from_millis(300);

/// The index of the next matrix in a rotation of `len`, advancing call after call, so that
/// no call finds its weights in the cache the previous calls filled.
#[derive(Debug, Clone)]
pub struct Rotor {
    next: usize,
    len: usize,
}

impl Rotor {
    /// A rotation over `len` matrices (at least 1), starting at the first.
    pub fn new(len: usize) -> Rotor {
        Rotor {
            next: 0,
            len: len.max(1),
        }
    }

    /// The matrix of this call; the next call gets the one after it.
    pub fn advance(&mut self) -> usize {
        let idx = self.next;
        self.next = (self.next + 1) % self.len;
        idx
    }
}

/// Seconds per call of `call`, each call given the next matrix of `rotor`: untimed calls
/// for at least `warm` (at least one call; none when `warm` is zero), which wake the
/// contender's threads and let the previous contender's go idle, then the median of `timed`
/// timed calls (at least one).
pub fn time_block(
    rotor: &mut Rotor,
    warm: Duration,
    timed: usize,
    mut call: impl FnMut(usize),
) -> f64 {
    if !warm.is_zero() {
        let start = Instant::now();
        loop {
            call(rotor.advance());
            if start.elapsed() >= warm {
                break;
            }
        }
    }
    let samples: Vec<f64> = (0..timed.max(1))
        .map(|_| {
            let idx = rotor.advance();
            let start = Instant::now();
            call(idx);
            start.elapsed().as_secs_f64()
        })
        .collect();
    median(&samples)
}

/// Two contenders timed call by call, each pair on the next matrix of `rotor`: untimed pairs
/// for at least `warm` (none when `warm` is zero), then `timed` timed pairs (at least one),
/// `first` then `second` in each. Returns the median seconds per call of each and the median
/// of the per-pair ratios `first ÷ second` (time over time), so that a ratio compares calls
/// a few milliseconds apart: on a shared VM a neighbour's burst slows both or neither.
pub fn time_pairs(
    rotor: &mut Rotor,
    warm: Duration,
    timed: usize,
    mut first: impl FnMut(usize),
    mut second: impl FnMut(usize),
) -> Pairs {
    if !warm.is_zero() {
        let start = Instant::now();
        while start.elapsed() < warm {
            let idx = rotor.advance();
            first(idx);
            second(idx);
        }
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..timed.max(1) {
        let idx = rotor.advance();
        let start = Instant::now();
        first(idx);
        let between = Instant::now();
        second(idx);
        let end = Instant::now();
        a.push((between - start).as_secs_f64());
        b.push((end - between).as_secs_f64());
    }
    Pairs {
        first: median(&a),
        second: median(&b),
        ratio: paired_ratio(&b, &a),
    }
}

/// `1 + rounds` rounds of two blocks, each after `pause`: `a` then `b` in even rounds, `b`
/// then `a` in odd ones, so that neither always follows the other (whose threads may still be
/// waking or parking). Round 0 warms up and its figures are dropped; a block that gives no
/// figure (`None`) is left out. Returns the kept figures of `a` and of `b`, in round order.
pub fn alternating_rounds(
    rounds: usize,
    pause: Duration,
    mut a: impl FnMut() -> Option<f64>,
    mut b: impl FnMut() -> Option<f64>,
) -> (Vec<f64>, Vec<f64>) {
    let (mut a_kept, mut b_kept) = (Vec::new(), Vec::new());
    for round in 0..1 + rounds {
        for slot in 0..2 {
            std::thread::sleep(pause);
            let (block, kept) = if (round + slot) % 2 == 0 {
                (&mut a as &mut dyn FnMut() -> Option<f64>, &mut a_kept)
            } else {
                (&mut b as &mut dyn FnMut() -> Option<f64>, &mut b_kept)
            };
            if let Some(figure) = block()
                && round > 0
            {
                kept.push(figure);
            }
        }
    }
    (a_kept, b_kept)
}

/// What [`time_pairs`] measured: seconds per call of each contender (medians) and the median
/// per-pair ratio `first ÷ second`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pairs {
    /// The first contender's median seconds per call.
    pub first: f64,
    /// The second contender's median seconds per call.
    pub second: f64,
    /// The median over the pairs of the first's time ÷ the second's.
    pub ratio: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotor_visits_every_matrix_in_turn_across_blocks() {
        let mut rotor = Rotor::new(3);
        let mut seen = Vec::new();
        time_block(&mut rotor, Duration::from_nanos(1), 2, |idx| seen.push(idx));
        time_block(&mut rotor, Duration::ZERO, 1, |idx| seen.push(idx));
        assert_eq!(seen, [0, 1, 2, 0]);
        let mut single = Rotor::new(0);
        assert_eq!((single.advance(), single.advance()), (0, 0));
    }

    #[test]
    fn a_block_warms_up_for_its_time_then_makes_the_timed_calls() {
        // Each call records when it started. Whatever the machine's load, the warm-up ends
        // at the first check that finds `warm` gone since it began, after `before`: the
        // first timed call starts later than that.
        let warm = Duration::from_millis(5);
        let mut starts = Vec::new();
        let before = Instant::now();
        time_block(&mut Rotor::new(2), warm, 3, |_| starts.push(Instant::now()));
        assert!(starts.len() > 3, "{} calls: none untimed", starts.len());
        let first_timed = starts[starts.len() - 3].duration_since(before);
        assert!(
            first_timed >= warm,
            "the first timed call after {first_timed:?}"
        );
        let mut calls = 0;
        time_block(&mut Rotor::new(2), Duration::ZERO, 0, |_| calls += 1);
        assert_eq!(calls, 1, "no warm-up, at least one timed call");
    }

    #[test]
    fn pairs_alternate_on_one_matrix_each() {
        // Without a warm-up: three pairs, first then second, both on the pair's matrix.
        let calls = std::cell::RefCell::new(Vec::new());
        time_pairs(
            &mut Rotor::new(2),
            Duration::ZERO,
            3,
            |idx| calls.borrow_mut().push(('a', idx)),
            |idx| calls.borrow_mut().push(('b', idx)),
        );
        let expected = [('a', 0), ('b', 0), ('a', 1), ('b', 1), ('a', 0), ('b', 0)];
        assert_eq!(calls.into_inner(), expected);
    }

    #[test]
    fn rounds_alternate_which_block_comes_first_and_drop_the_warm_up() {
        let order = std::cell::RefCell::new(String::new());
        let mut n = 0.0;
        let mut b_calls = 0;
        let (a, b) = alternating_rounds(
            3,
            Duration::ZERO,
            || {
                order.borrow_mut().push('a');
                n += 1.0;
                Some(n)
            },
            || {
                order.borrow_mut().push('b');
                b_calls += 1;
                // b's second block (round 1) gives no figure.
                (b_calls != 2).then_some(10.0 * b_calls as f64)
            },
        );
        assert_eq!(order.into_inner(), "abbaabba");
        // Round 0's figures (a: 1, b: 10) are dropped, and so is b's missing one.
        assert_eq!(a, [2.0, 3.0, 4.0]);
        assert_eq!(b, [30.0, 40.0]);
    }

    #[test]
    fn a_pair_ratio_is_the_first_time_over_the_second() {
        // The first contender spins until its time has clearly passed the second's: whatever
        // the machine's load, each pair's ratio exceeds 1, and so does their median.
        let spin = |d: Duration| {
            let start = Instant::now();
            while start.elapsed() < d {
                std::hint::spin_loop();
            }
        };
        let pairs = time_pairs(
            &mut Rotor::new(1),
            Duration::from_millis(1),
            5,
            |_| spin(Duration::from_millis(4)),
            |_| {},
        );
        assert!(pairs.ratio > 1.0, "{pairs:?}");
        assert!(
            pairs.first >= 0.004 && pairs.second < pairs.first,
            "{pairs:?}"
        );
    }
}
