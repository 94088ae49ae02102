//! Timing a block of calls on a rotation of matrices: [`Rotor`] hands out the next matrix,
//! [`time_block`] times a block of calls. The report and the candle workers time alike.

use auto_tuner::median;
use std::time::Instant;

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

/// Seconds per call of `call`, each call given the next matrix of `rotor`: `warm` untimed
/// calls (they wake the contender's threads and let the previous contender's threads go
/// idle), then the median of `timed` timed calls (at least one).
pub fn time_block(
    rotor: &mut Rotor,
    warm: usize,
    timed: usize,
    mut call: impl FnMut(usize),
) -> f64 {
    for _ in 0..warm {
        call(rotor.advance());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotor_visits_every_matrix_in_turn_across_blocks() {
        let mut rotor = Rotor::new(3);
        let mut seen = Vec::new();
        time_block(&mut rotor, 1, 2, |idx| seen.push(idx));
        time_block(&mut rotor, 1, 1, |idx| seen.push(idx));
        assert_eq!(seen, [0, 1, 2, 0, 1]);
        let mut single = Rotor::new(0);
        assert_eq!((single.advance(), single.advance()), (0, 0));
    }

    #[test]
    fn a_block_makes_warm_plus_timed_calls() {
        let mut calls = 0;
        let secs = time_block(&mut Rotor::new(2), 2, 3, |_| calls += 1);
        assert_eq!(calls, 5);
        assert!(secs >= 0.0);
        calls = 0;
        time_block(&mut Rotor::new(2), 0, 0, |_| calls += 1);
        assert_eq!(calls, 1, "at least one timed call");
    }
}
